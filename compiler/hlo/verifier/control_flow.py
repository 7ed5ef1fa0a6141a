"""The shape rules of parameters, constants, tuples and the ops that call computations."""

from __future__ import annotations

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.scan import ScanForm, results_of, stacked, without
from compiler.hlo.shape import ArrayShape, Shape, TupleShape
from compiler.hlo.verifier.checks import (
    array,
    attribute,
    called_computation,
    check,
    int_list,
    operand_count,
)
from core.dtypes import PRED, S32


def _leaf(instruction: Instruction) -> Shape:
    operand_count(instruction, 0)
    return instruction.shape


def _tuple(instruction: Instruction) -> Shape:
    return TupleShape(tuple(o.shape for o in instruction.operands))


def _get_tuple_element(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    shape = instruction.operands[0].shape
    check(isinstance(shape, TupleShape), "get-tuple-element of a non-tuple")
    assert isinstance(shape, TupleShape)
    index = attribute(instruction, "index")
    check(isinstance(index, int) and 0 <= index < len(shape.elements), f"tuple index {index} out of range")
    assert isinstance(index, int)
    return shape.elements[index]


def _opt_barrier(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    return instruction.operands[0].shape


def _check_arguments(computation: Computation, shapes: list[Shape], role: str) -> None:
    params = computation.parameters
    check(len(params) == len(shapes), f"{role} %{computation.name} takes {len(params)} parameters, given {len(shapes)}")  # fmt: skip
    for param, shape in zip(params, shapes, strict=True):
        check(param.shape.same_logical(shape), f"{role} %{computation.name} parameter {param.parameter_number} is {param.shape}, given {shape}")  # fmt: skip


def _call(instruction: Instruction) -> Shape:
    key = "calls" if instruction.opcode == "fusion" else "to_apply"
    if instruction.opcode == "call" and "to_apply" not in instruction.attrs and "calls" in instruction.attrs:
        key = "calls"
    computation = called_computation(instruction, key)
    _check_arguments(computation, [o.shape for o in instruction.operands], "called computation")
    return computation.root.shape


def _while(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    state = instruction.operands[0].shape
    condition, body = called_computation(instruction, "condition"), called_computation(instruction, "body")
    _check_arguments(condition, [state], "while condition")
    _check_arguments(body, [state], "while body")
    cond_root = condition.root.shape
    check(isinstance(cond_root, ArrayShape) and cond_root.dtype == PRED and cond_root.rank == 0, "while condition must return pred[]")  # fmt: skip
    check(body.root.shape.same_logical(state), f"while body returns {body.root.shape}, the loop state is {state}")
    return state


def _scan(instruction: Instruction) -> Shape:
    """XLA's scan: inputs then `num_carries` carries; `to_apply` takes one slice of each
    input (the scanned dimension dropped) and the carries, and returns the step's outputs
    and the new carries; the result stacks the outputs along the dimension, then the final
    carries (a single value is not a tuple)."""
    carries = attribute(instruction, "num_carries", 0)
    check(isinstance(carries, int) and 0 <= carries <= len(instruction.operands), "scan needs num_carries between 0 and its operand count")
    form = ScanForm.of(instruction)
    computation = called_computation(instruction, "to_apply")
    inputs = [array(instruction, n) for n in range(form.inputs)]
    dimensions = int_list(instruction, "dimensions")
    check(len(dimensions) == 1, "scan scans one dimension (dimensions={d})")
    check(all(0 <= form.dimension < x.rank and x.dims[form.dimension] == form.length for x in inputs),
          f"scan inputs must all have dimension {form.dimension} of size {form.length}")  # fmt: skip
    elements: list[Shape] = [ArrayShape.of(x.dtype, without(x.dims, form.dimension)) for x in inputs]
    carried = [operand.shape for operand in instruction.operands[form.inputs :]]
    _check_arguments(computation, [*elements, *carried], "scan computation")
    results = results_of(computation)
    check(len(results) >= form.carries, "scan computation returns fewer values than num_carries")
    outputs, new_carries = results[: len(results) - form.carries], results[len(results) - form.carries :]
    check(all(a.same_logical(b) for a, b in zip(new_carries, carried, strict=True)), "scan computation's carries do not have the carries' shapes")
    check(all(isinstance(o, ArrayShape) and o.rank >= form.dimension for o in outputs), "scan outputs must be arrays")
    shapes: list[Shape] = [stacked(o, form.dimension, form.length) for o in outputs]  # type: ignore[arg-type]
    shapes += carried
    return shapes[0] if len(shapes) == 1 else TupleShape(tuple(shapes))


def _conditional(instruction: Instruction) -> Shape:
    operand_count(instruction, (2, None))
    selector = array(instruction, 0)
    if "branch_computations" in instruction.attrs:
        branches = instruction.attrs["branch_computations"]
        check(isinstance(branches, tuple) and len(branches) >= 1, "branch_computations is empty")
        check(selector.rank == 0 and selector.dtype == S32, "conditional branch index must be s32[]")
    else:
        branches = (called_computation(instruction, "true_computation"), called_computation(instruction, "false_computation"))
        check(selector.rank == 0 and selector.dtype == PRED, "conditional predicate must be pred[]")
    assert isinstance(branches, tuple)
    operand_count(instruction, 1 + len(branches))
    result: Shape | None = None
    for index, branch in enumerate(branches):
        check(isinstance(branch, Computation), "conditional branch is not a computation")
        _check_arguments(branch, [instruction.operands[1 + index].shape], "conditional branch")
        if result is None:
            result = branch.root.shape
        check(branch.root.shape.same_logical(result), "conditional branches return different shapes")
    assert result is not None
    return result


RULES = family_table("control_flow", globals(), shared={"parameter": _leaf, "constant": _leaf, "fusion": _call})
