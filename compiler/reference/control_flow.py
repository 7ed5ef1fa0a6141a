"""Control flow and value plumbing: constants, tuples, call/fusion, while and conditional
(parameters are bound by the evaluator itself)."""

from __future__ import annotations

import numpy as np

from compiler.errors import ExecutionError
from compiler.hlo.errors import from_user
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.scan import ScanForm, results_of, stacked
from compiler.hlo.shape import TupleShape
from compiler.reference.evaluator import Evaluator, Value


def _constant(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    assert instruction.literal is not None
    return instruction.literal


def _tuple(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return tuple(operands)


def _get_tuple_element(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    value = operands[0]
    assert isinstance(value, tuple)
    return value[instruction.attrs["index"]]  # type: ignore[index]


def _opt_barrier(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return operands[0]


def callee(instruction: Instruction) -> Computation:
    """The computation a call, fusion or map applies."""
    callee = instruction.attrs.get("to_apply", instruction.attrs.get("calls"))
    assert isinstance(callee, Computation)
    return callee


def _call(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return evaluator.evaluate_computation(callee(instruction), operands)


def _while(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    condition = instruction.attrs["condition"]
    body = instruction.attrs["body"]
    assert isinstance(condition, Computation) and isinstance(body, Computation)
    state = operands[0]
    iterations = 0
    while bool(np.asarray(evaluator.evaluate_computation(condition, [state]))):
        if evaluator.max_while_iterations is not None and iterations >= evaluator.max_while_iterations:
            raise ExecutionError(f"while loop %{instruction.name}{from_user(instruction.location)} ran past the limit of {evaluator.max_while_iterations} iterations")
        state = evaluator.evaluate_computation(body, [state])
        iterations += 1
    return state


def _scan(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    """The steps in order (reverse: last index first): slice each input at the step, apply
    the computation to the slices and the carries, keep its outputs at the step."""
    form = ScanForm.of(instruction)
    computation = instruction.attrs["to_apply"]
    assert isinstance(computation, Computation)
    inputs = [np.asarray(x) for x in operands[: form.inputs]]
    carries = list(operands[form.inputs :])
    result_shapes = results_of(computation)
    output_shapes = result_shapes[: len(result_shapes) - form.carries]
    outputs = [np.zeros(stacked(shape, form.dimension, form.length).dims, shape.dtype.numpy) for shape in output_shapes]  # type: ignore[union-attr]
    for step in range(form.length):
        at = form.step_index(step)
        slices = [np.array(np.take(x, at, axis=form.dimension)) for x in inputs]
        value = evaluator.evaluate_computation(computation, [*slices, *carries])
        values = list(value) if isinstance(computation.root.shape, TupleShape) else [value]
        for output, produced in zip(outputs, values[: len(outputs)], strict=True):
            index = [slice(None)] * output.ndim
            index[form.dimension] = at  # type: ignore[call-overload]
            output[tuple(index)] = produced
        carries = values[len(outputs) :]
    finals = [*outputs, *carries]
    return finals[0] if len(finals) == 1 else tuple(finals)


def _conditional(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    selector = np.asarray(operands[0])
    if "branch_computations" in instruction.attrs:
        branches = instruction.attrs["branch_computations"]
        assert isinstance(branches, tuple)
        index = int(selector)
        if not 0 <= index < len(branches):
            index = len(branches) - 1  # an out-of-range index runs the last branch
    else:
        branches = (instruction.attrs["true_computation"], instruction.attrs["false_computation"])
        index = 0 if bool(selector) else 1
    branch = branches[index]
    assert isinstance(branch, Computation)
    return evaluator.evaluate_computation(branch, [operands[1 + index]])


# Each opcode of the family evaluated by the function named after it (a fusion is a call);
# the walk binds parameters itself.
HANDLERS = family_table("control_flow", globals(), shared={"fusion": _call}, bound_elsewhere=("parameter",))
