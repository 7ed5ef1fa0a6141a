"""Element steps of the reductions (compiler/reference/reductions.py): the reducer applied in
the contract's pinned order (compiler/numerics/order.py), each application its computation's
steps. reduce: blocks of REDUCE_BLOCK, REDUCE_LANES lanes folded left to right, the pairwise
tree over the lanes and then over the blocks, and reducer(init, result) last. reduce-window:
init, then the reducer over the window's positions in row-major order, padding and holes
giving init."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from compiler.hlo import attributes as attr
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.shape import TupleShape
from compiler.numerics.order import REDUCE_BLOCK, REDUCE_LANES

from . import ElementEvaluator, Handle, Scope, indexing
from .data_movement import window_source

Index = tuple[int, ...]
Parts = tuple[Handle, ...]  # one handle per reduced input (variadic reductions have several)


def _combiner(ev: ElementEvaluator, reducer: Computation) -> Callable[[Parts, Parts], Parts]:
    def combine(acc: Parts, item: Parts) -> Parts:
        result = ev.apply_scalar(reducer, list(acc) + list(item))
        return result if isinstance(result, tuple) else (result,)

    return combine


def pairwise_tree(values: list[Parts], combine: Callable[[Parts, Parts], Parts]) -> Parts:
    """(v0, v1), (v2, v3), ...; an odd last value passes up unchanged; until one remains."""
    while len(values) > 1:
        paired = [combine(values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
        values = paired + (values[-1:] if len(values) % 2 else [])
    return values[0]


def pinned_reduce(
    sequence: list[Callable[[], Parts]], init: Parts, combine: Callable[[Parts, Parts], Parts]
) -> Parts:
    """The contract's order over `sequence` (element makers, called in the order the steps
    read them)."""
    if not sequence:
        return init
    blocks = []
    for start in range(0, len(sequence), REDUCE_BLOCK):
        block = sequence[start : start + REDUCE_BLOCK]
        lanes = [block[lane]() for lane in range(min(REDUCE_LANES, len(block)))]
        for position in range(REDUCE_LANES, len(block)):
            lane = position % REDUCE_LANES
            lanes[lane] = combine(lanes[lane], block[position]())
        blocks.append(pairwise_tree(lanes, combine))
    return combine(init, pairwise_tree(blocks, combine))


def _reduce(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    half = len(instruction.operands) // 2
    dims = instruction.attrs["dimensions"]
    reducer = instruction.attrs["to_apply"]
    assert isinstance(dims, tuple) and isinstance(reducer, Computation)
    operand_dims = instruction.operands[0].array_shape.dims
    kept = [d for d in range(len(operand_dims)) if d not in dims]
    reduced = sorted(dims)

    rec = ev.recorder

    def element_at(position: Index) -> Callable[[], Parts]:
        full = [0] * len(operand_dims)
        for d, i in zip(kept, index, strict=True):
            full[d] = i
        for d, i in zip(reduced, position, strict=True):
            full[d] = indexing.const(rec, i)
        at = tuple(full)
        return lambda: tuple(ev.operand(instruction, number, at, scope) for number in range(half))

    positions = itertools.product(*(range(operand_dims[d]) for d in reduced))
    sequence = [element_at(position) for position in positions]
    init = tuple(ev.operand(instruction, half + number, (), scope) for number in range(half))
    result = pinned_reduce(sequence, init, _combiner(ev, reducer))
    return result[0] if half == 1 else result


def _reduce_window(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    half = len(instruction.operands) // 2
    window = instruction.attrs["window"]
    reducer = instruction.attrs["to_apply"]
    assert isinstance(window, attr.Window) and isinstance(reducer, Computation)
    operand_dims = instruction.operands[0].array_shape.dims
    init = tuple(ev.operand(instruction, half + number, (), scope) for number in range(half))
    combine = _combiner(ev, reducer)
    rec = ev.recorder
    out_dims = _out_dims(instruction)
    acc = init
    for position in itertools.product(*(range(w.size) for w in window.dims)):
        found = window_source(rec, index, position, window.dims, out_dims, operand_dims)
        if found is None:
            item = init
        else:
            valid, coords = found
            inside = tuple(ev.operand(instruction, number, coords, scope) for number in range(half))
            item = tuple(
                indexing.select(rec, valid, a, b) for a, b in zip(inside, init, strict=True)
            )  # type: ignore[arg-type]
        acc = combine(acc, item)
    return acc[0] if half == 1 else acc


def _out_dims(instruction: Instruction) -> tuple[int, ...]:
    shape = instruction.shape
    return shape.elements[0].dims if isinstance(shape, TupleShape) else shape.dims  # type: ignore[union-attr]


RULES = {
    "reduce": _reduce,
    "reduce-window": _reduce_window,
}
