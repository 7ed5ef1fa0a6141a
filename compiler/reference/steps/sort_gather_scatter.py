"""Element steps of gather (compiler/reference/sort_gather_scatter.py `_gather`). An output
element is one operand element: the output coordinate splits into batch coordinates (the
positions not in offset_dims), which pick a start index vector from the indices operand, and
offset coordinates, which step within the slice. Each start index is loaded, widened to s64
and clamped to [0, dim - slice size] (a u64 index is first capped at the limit in u64, as the
reference caps it before clipping); an operand batching dimension starts at its batch
coordinate. The index loads are ordinary LOADs of the indices operand, so a dispute about a
gathered element can narrow to the index step as well as to the element itself.

Scatter (one operand): an output element is the operand's, then, for every update window in
the reference's order (the scatter positions row-major), the combiner applied to it and the
update's element at the window coordinate, kept where the window is in bounds and covers the
element (a SELECT), so the program is the same for every element and its length is the
number of scatter positions times a few steps. sort has no element steps (steps/__init__.py
UNCOVERED)."""

from __future__ import annotations

import numpy as np

from compiler.hlo.ir import Computation, Instruction
from compiler.reference.scalar import Op
from core.dtypes import S64, U64

from . import ElementEvaluator, Handle, Scope, Uncovered, indexing

Coords = tuple[int, ...]


def _gather(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    rec = ev.recorder
    attrs = instruction.attrs
    offset_dims = tuple(attrs.get("offset_dims", ()))  # type: ignore[arg-type]
    collapsed = tuple(attrs.get("collapsed_slice_dims", ()))  # type: ignore[arg-type]
    start_map = tuple(attrs["start_index_map"])  # type: ignore[arg-type]
    operand_batching = tuple(attrs.get("operand_batching_dims", ()))  # type: ignore[arg-type]
    indices_batching = tuple(attrs.get("start_indices_batching_dims", ()))  # type: ignore[arg-type]
    slice_sizes = tuple(attrs["slice_sizes"])  # type: ignore[arg-type]
    vector_dim = attrs["index_vector_dim"]
    assert isinstance(vector_dim, int)
    operand_dims = instruction.operands[0].array_shape.dims
    if 0 in operand_dims:
        raise Uncovered("gather", "an operand with no elements (the result is zeros)")
    batch = [c for position, c in enumerate(index) if position not in offset_dims]
    offsets = [index[position] for position in offset_dims]
    removed = set(collapsed) | set(operand_batching)
    kept = [d for d in range(len(operand_dims)) if d not in removed]

    starts: dict[int, int] = {
        d: _start_index(ev, instruction, batch, vector_dim, k, scope) for k, d in enumerate(start_map)
    }
    for d, j in zip(operand_batching, indices_batching, strict=True):
        starts[d] = batch[j if j < vector_dim else j - 1]
    coords = []
    for d, (dim, size) in enumerate(zip(operand_dims, slice_sizes, strict=True)):
        start = starts.get(d)
        if start is None:
            clamped = indexing.const(rec, 0)
        else:
            low = rec.op(Op.MAX, start, indexing.const(rec, 0))
            clamped = rec.op(Op.MIN, low, indexing.const(rec, dim - size))
        coords.append(rec.op(Op.ADD, clamped, offsets[kept.index(d)]) if d in kept else clamped)
    return ev.operand(instruction, 0, tuple(coords), scope)


def _start_index(
    ev: ElementEvaluator, instruction: Instruction, batch: list[int], vector_dim: int, k: int, scope: Scope
) -> int:
    """Element k of the index vector (operand 1) at the batch coordinates, as s64: a u64
    index capped at 2^62 in u64 first, as the reference caps it (it clamps or skips anyway)."""
    rec = ev.recorder
    coords = list(batch)
    if vector_dim < instruction.operands[1].array_shape.rank:
        coords.insert(vector_dim, indexing.const(rec, k))
    loaded = ev.operand(instruction, 1, tuple(coords), scope)
    assert isinstance(loaded, int)
    if rec.dtype(loaded) == U64:
        return rec.op(Op.CONVERT, rec.op(Op.MIN, loaded, rec.const(U64, 1 << 62)), to=S64)
    return loaded if rec.dtype(loaded) == S64 else rec.op(Op.CONVERT, loaded, to=S64)


def _scatter(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    rec = ev.recorder
    attrs = instruction.attrs
    if len(instruction.operands) != 3:
        raise Uncovered("scatter", "several operands scattered together: a tuple result")
    window_dims = tuple(attrs.get("update_window_dims", ()))  # type: ignore[arg-type]
    inserted = tuple(attrs.get("inserted_window_dims", ()))  # type: ignore[arg-type]
    to_operand = tuple(attrs["scatter_dims_to_operand_dims"])  # type: ignore[arg-type]
    input_batching = tuple(attrs.get("input_batching_dims", ()))  # type: ignore[arg-type]
    indices_batching = tuple(attrs.get("scatter_indices_batching_dims", ()))  # type: ignore[arg-type]
    vector_dim = attrs["index_vector_dim"]
    combiner = attrs["to_apply"]
    assert isinstance(vector_dim, int) and isinstance(combiner, Computation)
    dims = instruction.operands[0].array_shape.dims
    update_dims = instruction.operands[2].array_shape.dims
    result = ev.operand(instruction, 0, index, scope)
    if 0 in update_dims:
        return result
    scatter_dims = [d for d in range(len(update_dims)) if d not in window_dims]
    operand_window_dims = [d for d in range(len(dims)) if d not in inserted and d not in input_batching]
    sizes = [1] * len(dims)
    for d, u in zip(operand_window_dims, window_dims, strict=True):
        sizes[d] = update_dims[u]
    for position in np.ndindex(*_scatter_batch(instruction)):  # the reference's order of updates
        batch = [indexing.const(rec, p) for p in position]
        starts = {d: _start_index(ev, instruction, batch, vector_dim, k, scope) for k, d in enumerate(to_operand)}
        for d, j in zip(input_batching, indices_batching, strict=True):
            starts[d] = batch[j if j < vector_dim else j - 1]
        checks, window = [], {}
        for d, (dim, size) in enumerate(zip(dims, sizes, strict=True)):
            start = starts.get(d, indexing.const(rec, 0))
            checks.append(indexing.in_range(rec, start, 0, dim - size + 1))  # the window in bounds
            local = rec.op(Op.SUB, index[d], start)
            inside = indexing.in_range(rec, local, 0, size)
            checks.append(inside)
            window[d] = indexing.select(rec, inside, local, indexing.const(rec, 0))
        coords = [
            batch[scatter_dims.index(u)] if u in scatter_dims else window[operand_window_dims[window_dims.index(u)]]
            for u in range(len(update_dims))
        ]
        update = ev.operand(instruction, 2, tuple(coords), scope)
        combined = ev.apply_scalar(combiner, [result, update])
        result = indexing.select(rec, indexing.all_of(rec, checks), combined, result)  # type: ignore[arg-type]
    return result


# A scatter's element visits every scatter position, with some ten steps each.
_STEPS_PER_SCATTER_POSITION = 10


def _scatter_batch(instruction: Instruction) -> list[int]:
    """The dimensions of a scatter's positions: its indices' without the index vector's."""
    indices = instruction.operands[len(instruction.operands) // 2].array_shape.dims
    vector_dim = instruction.attrs["index_vector_dim"]
    return [size for d, size in enumerate(indices) if d != vector_dim]


def scatter_steps_estimate(instruction: Instruction) -> int:
    """About how many steps an element of scatter `instruction` has (before recording)."""
    positions = int(np.prod(_scatter_batch(instruction), dtype=np.int64))
    return positions * _STEPS_PER_SCATTER_POSITION


RULES = {"gather": _gather, "scatter": _scatter}

__all__ = ["RULES", "scatter_steps_estimate"]
