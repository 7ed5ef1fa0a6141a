"""The shape rules of reduce, reduce-window and select-and-scatter."""

from __future__ import annotations

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape, Shape
from compiler.hlo.verifier.checks import (
    ShapeRule,
    array,
    attribute,
    called_computation,
    check,
    check_window,
    dims_in_range,
    int_list,
    operand_count,
    scalar_computation,
    tuple_or_single,
    window_output_size,
)
from core.dtypes import PRED, DType


def _reducer_types(instruction: Instruction) -> tuple[list[ArrayShape], list[DType]]:
    count = len(instruction.operands)
    check(count >= 2 and count % 2 == 0, f"{instruction.opcode} takes inputs then as many init values")
    half = count // 2
    inputs = [array(instruction, i) for i in range(half)]
    inits = [array(instruction, half + i) for i in range(half)]
    for shape, init in zip(inputs, inits, strict=True):
        check(init.rank == 0 and init.dtype == shape.dtype, "init values must be scalars of the inputs' types")
        check(shape.dims == inputs[0].dims, "all inputs must have the same dimensions")
    types = [s.dtype for s in inputs]
    scalar_computation(called_computation(instruction, "to_apply"), types + types, types, "reducer")
    return inputs, types


def _reduce(instruction: Instruction) -> Shape:
    inputs, types = _reducer_types(instruction)
    dims = int_list(instruction, "dimensions")
    dims_in_range(dims, inputs[0].rank, "reduce dimensions")
    kept = tuple(d for i, d in enumerate(inputs[0].dims) if i not in dims)
    return tuple_or_single([ArrayShape.of(t, kept) for t in types])


def _reduce_window(instruction: Instruction) -> Shape:
    inputs, types = _reducer_types(instruction)
    window = check_window(attribute(instruction, "window"), inputs[0].rank)
    check(not any(w.reversal for w in window.dims), "reduce-window does not take rhs_reversal")
    dims = tuple(window_output_size(s, w) for s, w in zip(inputs[0].dims, window.dims, strict=True))
    return tuple_or_single([ArrayShape.of(t, dims) for t in types])


def _select_and_scatter(instruction: Instruction) -> Shape:
    operand_count(instruction, 3)
    operand, source, init = array(instruction, 0), array(instruction, 1), array(instruction, 2)
    dtype = operand.dtype
    check(source.dtype == dtype and init.dtype == dtype and init.rank == 0, "select-and-scatter source and init value must have the operand's type (init a scalar)")
    window = check_window(attribute(instruction, "window"), operand.rank)
    check(not any(w.reversal or w.base_dilation > 1 or w.window_dilation > 1 for w in window.dims), "select-and-scatter takes no dilation or reversal")
    positions = tuple(window_output_size(s, w) for s, w in zip(operand.dims, window.dims, strict=True))
    check(source.dims == positions, f"select-and-scatter source has dimensions {list(source.dims)}, the window has {list(positions)} positions")
    scalar_computation(called_computation(instruction, "select"), [dtype, dtype], [PRED], "select")
    scalar_computation(called_computation(instruction, "scatter"), [dtype, dtype], [dtype], "scatter")
    return operand


RULES: dict[str, ShapeRule] = family_table("reductions", globals())
