"""sort, gather and scatter.

sort is a stable bottom-up merge sort whose steps are part of the contract, so any comparator,
even one that is not a strict weak order, has one defined result: runs of width 1, 2, 4, ...
are merged pairwise from the left; a merge takes the right run's head only when
comparator(right_head, left_head) is true, otherwise the left head; a run without a partner is
kept as it is.

gather clamps each slice's start so the slice lies inside the operand (as dynamic-slice does).
scatter applies the update windows in row-major order of their scatter indices, each window's
elements at once (they are distinct); a window that does not lie inside the operand is skipped.
"""

from __future__ import annotations

import math

import numpy as np

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Computation, Instruction
from compiler.numerics import floats
from compiler.reference.evaluator import Evaluator, Value
from core.dtypes import DType


def _comparator(instruction: Instruction) -> Computation:
    computation = instruction.attrs["to_apply"]
    assert isinstance(computation, Computation)
    return computation


def merge_sort_rows(evaluator: Evaluator, comparator: Computation, rows: list[np.ndarray]) -> list[np.ndarray]:
    """Sorts arrays of shape (R, n) along the last axis by the pinned merge sort; the first
    array's order decides unless the comparator reads the others."""
    count, n = rows[0].shape
    current = [r.copy() for r in rows]
    width = 1
    row_index = np.arange(count)[:, None]
    while width < n:
        starts = np.arange(0, n, 2 * width)
        left_end = np.minimum(starts + width, n)
        right_end = np.minimum(starts + 2 * width, n)
        left = np.broadcast_to(starts, (count, starts.size)).copy()
        right = np.broadcast_to(left_end, (count, starts.size)).copy()
        merged = [np.empty_like(c) for c in current]
        for step in range(2 * width):
            out_position = starts + step
            active = out_position < right_end
            if not active.any():
                break
            pairs = np.flatnonzero(active)
            li, ri = left[:, pairs], right[:, pairs]
            has_left = li < left_end[pairs]
            has_right = ri < right_end[pairs]
            left_values = [c[row_index, np.minimum(li, n - 1)] for c in current]
            right_values = [c[row_index, np.minimum(ri, n - 1)] for c in current]
            arguments = [v for pair in zip(right_values, left_values, strict=True) for v in pair]
            right_first = evaluator.apply_scalar_computation(comparator, arguments)[0].astype(bool)
            take_right = has_right & (~has_left | right_first)
            for out, lv, rv in zip(merged, left_values, right_values, strict=True):
                out[:, out_position[pairs]] = np.where(take_right, rv, lv)
            left[:, pairs] = li + (~take_right)
            right[:, pairs] = ri + take_right
        current = merged
        width *= 2
    return current


def _sort(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    arrays = [np.asarray(o) for o in operands]
    axis = instruction.attrs["dimensions"][0]  # type: ignore[index]
    moved = [np.moveaxis(a, axis, -1) for a in arrays]
    shape = moved[0].shape
    n = shape[-1] if shape else 1
    # The row count is given, not inferred: with no elements, reshape cannot infer it.
    rows = [m.reshape(math.prod(shape[:-1]), n) for m in moved]
    if rows[0].shape[0] and n > 1:
        rows = merge_sort_rows(evaluator, _comparator(instruction), rows)
    results = [np.require(np.moveaxis(r.reshape(shape), -1, axis), requirements="C") for r in rows]
    return results[0] if len(results) == 1 else tuple(results)


def order_key(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Integers in the order topk ranks by: the IEEE totalOrder for floats (-NaN < -inf <
    ... < +inf < +NaN), the value for integers, false < true for pred."""
    if dtype.is_pred:
        return values.astype(np.uint8)
    return floats.total_order_key(values, dtype) if dtype.is_float else values


def _topk(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    """The first k of the stable sort of the last dimension, greatest first (least first
    with largest=false): equal keys keep their order, so the lower index comes first."""
    operand = np.asarray(operands[0])
    k = instruction.attrs["k"]
    assert isinstance(k, int)
    keys = order_key(operand, instruction.operands[0].array_shape.dtype)
    if instruction.attrs.get("largest", True):
        keys = ~keys  # reverses the order of every signed or unsigned integer type
    order = np.argsort(keys, axis=-1, kind="stable")[..., :k]
    values = np.require(np.take_along_axis(operand, order, axis=-1), requirements="C")
    return values, order.astype(np.int32)


def _index_vectors(indices: np.ndarray, index_vector_dim: int) -> np.ndarray:
    """Index array with the index vector moved last: (batch..., vector length), as int64.
    u64 indices beyond the int64 range are capped (they clamp or skip anyway); every
    narrower type fits as it is."""
    if indices.dtype == np.uint64:
        indices = np.minimum(indices, np.uint64(2**62))
    indices = indices.astype(np.int64)
    if index_vector_dim == indices.ndim:
        indices = indices[..., None]
    return np.moveaxis(indices, index_vector_dim, -1)


def _batch_coordinate_axis(indices_dim: int, index_vector_dim: int) -> int:
    """Position of an indices dimension among the batch dimensions (index vector removed)."""
    return indices_dim if indices_dim < index_vector_dim else indices_dim - 1


def _gather(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    operand, indices = np.asarray(operands[0]), np.asarray(operands[1])
    attrs = instruction.attrs
    offset_dims = attrs.get("offset_dims", ())
    collapsed = attrs.get("collapsed_slice_dims", ())
    start_map = attrs["start_index_map"]
    operand_batching = attrs.get("operand_batching_dims", ())
    indices_batching = attrs.get("start_indices_batching_dims", ())
    slice_sizes = attrs["slice_sizes"]
    index_vector_dim = attrs["index_vector_dim"]
    assert isinstance(slice_sizes, tuple) and isinstance(start_map, tuple) and isinstance(index_vector_dim, int)
    vectors = _index_vectors(indices, index_vector_dim)
    batch_shape = vectors.shape[:-1]
    flat = vectors.reshape(int(np.prod(batch_shape, dtype=np.int64)), vectors.shape[-1])
    count = flat.shape[0]
    starts = np.zeros((count, operand.ndim), dtype=np.int64)
    for k, d in enumerate(start_map):
        starts[:, d] = flat[:, k]
    if operand_batching:
        coordinates = np.indices(batch_shape).reshape(len(batch_shape), -1)
        for d, j in zip(operand_batching, indices_batching, strict=True):  # type: ignore[arg-type]
            starts[:, d] = coordinates[_batch_coordinate_axis(j, index_vector_dim)]
    if operand.size == 0:
        # Slices empty along a collapsed dimension read nothing: the result is zero.
        return np.zeros(instruction.array_shape.dims, dtype=operand.dtype)
    limits = np.array(operand.shape, dtype=np.int64) - np.array(slice_sizes, dtype=np.int64)
    starts = np.clip(starts, 0, limits)
    index_arrays = []
    for d, size in enumerate(slice_sizes):
        shape = [1] * (1 + operand.ndim)
        shape[1 + d] = size
        index_arrays.append(starts[:, d].reshape([count] + [1] * operand.ndim) + np.arange(size).reshape(shape))
    gathered = operand[tuple(index_arrays)]  # (count, *slice_sizes)
    removed = set(collapsed) | set(operand_batching)  # type: ignore[arg-type]
    offset_sizes = [s for d, s in enumerate(slice_sizes) if d not in removed]
    gathered = gathered.reshape(tuple(batch_shape) + tuple(offset_sizes))
    rank = len(batch_shape) + len(offset_sizes)
    perm, batch_axis = [], 0
    for position in range(rank):
        if position in offset_dims:  # type: ignore[operator]
            perm.append(len(batch_shape) + list(offset_dims).index(position))  # type: ignore[arg-type]
        else:
            perm.append(batch_axis)
            batch_axis += 1
    return np.require(np.transpose(gathered, perm), requirements="C")


def _scatter(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    n = (len(operands) - 1) // 2
    results = [np.array(o, copy=True) for o in operands[:n]]
    indices = np.asarray(operands[n])
    updates = [np.asarray(u) for u in operands[n + 1 :]]
    attrs = instruction.attrs
    window_dims = attrs.get("update_window_dims", ())
    inserted = attrs.get("inserted_window_dims", ())
    to_operand = attrs["scatter_dims_to_operand_dims"]
    input_batching = attrs.get("input_batching_dims", ())
    indices_batching = attrs.get("scatter_indices_batching_dims", ())
    index_vector_dim = attrs["index_vector_dim"]
    assert isinstance(window_dims, tuple) and isinstance(to_operand, tuple) and isinstance(index_vector_dim, int)
    combiner = _comparator(instruction)
    vectors = _index_vectors(indices, index_vector_dim)
    batch_shape = vectors.shape[:-1]
    rank = results[0].ndim
    scatter_dims = [d for d in range(updates[0].ndim) if d not in window_dims]
    operand_window_dims = [d for d in range(rank) if d not in inserted and d not in input_batching]  # type: ignore[operator]
    window_sizes = [updates[0].shape[d] for d in window_dims]
    sizes = [1] * rank
    for d, size in zip(operand_window_dims, window_sizes, strict=True):
        sizes[d] = size
    operand_dims = results[0].shape
    for position in np.ndindex(*batch_shape):
        start = [0] * rank
        for k, d in enumerate(to_operand):
            start[d] = int(vectors[position][k])
        for d, j in zip(input_batching, indices_batching, strict=True):  # type: ignore[arg-type]
            start[d] = position[_batch_coordinate_axis(j, index_vector_dim)]
        if any(s < 0 or s + size > dim for s, size, dim in zip(start, sizes, operand_dims, strict=True)):
            continue
        region = tuple(slice(s, s + size) for s, size in zip(start, sizes, strict=True))
        update_index: list[object] = [slice(None)] * updates[0].ndim
        for axis, coordinate in zip(scatter_dims, position, strict=True):
            update_index[axis] = coordinate
        current = [r[region].reshape(window_sizes) for r in results]
        window = [u[tuple(update_index)].reshape(window_sizes) for u in updates]
        combined = evaluator.apply_scalar_computation(combiner, current + window)
        for result, value in zip(results, combined, strict=True):
            result[region] = value.reshape(result[region].shape)
    return results[0] if n == 1 else tuple(results)


HANDLERS = family_table("sort_gather_scatter", globals())
