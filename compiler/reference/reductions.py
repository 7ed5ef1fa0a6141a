"""Reductions: `reduce` in the contract's pinned order (compiler/numerics/order.py), and the
windowed ops `reduce-window` and `select-and-scatter` (the gradient of a max pooling)."""

from __future__ import annotations

import numpy as np

from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Computation, Instruction
from compiler.numerics.order import REDUCE_BLOCK, REDUCE_LANES
from compiler.reference.data_movement import pad_array
from compiler.reference.evaluator import Evaluator, Value

Values = list[np.ndarray]  # one array per reduced input (variadic reductions have several)


def _combine(evaluator: Evaluator, reducer: Computation, acc: Values, item: Values) -> Values:
    return evaluator.apply_scalar_computation(reducer, acc + item)


def pairwise_tree(evaluator: Evaluator, reducer: Computation, values: Values, axis: int) -> Values:
    """Combines the entries along `axis` by the pinned pairwise tree; removes that axis."""
    count = values[0].shape[axis]
    while count > 1:
        pairs = count // 2
        left = [np.take(v, np.arange(0, 2 * pairs, 2), axis=axis) for v in values]
        right = [np.take(v, np.arange(1, 2 * pairs, 2), axis=axis) for v in values]
        combined = _combine(evaluator, reducer, left, right)
        if count % 2:
            odd = [np.take(v, [count - 1], axis=axis) for v in values]
            combined = [np.concatenate([c, o], axis=axis) for c, o in zip(combined, odd, strict=True)]
        values = combined
        count = values[0].shape[axis]
    return [np.take(v, 0, axis=axis) for v in values]


def _fold_lanes(evaluator: Evaluator, reducer: Computation, block: Values) -> Values:
    """Folds blocks of shape (..., length) into lanes (..., min(REDUCE_LANES, length))."""
    length = block[0].shape[-1]
    steps = -(-length // REDUCE_LANES)
    lanes = [b[..., 0 : min(REDUCE_LANES, length)] for b in block]
    for step in range(1, steps):
        start = step * REDUCE_LANES
        width = min(REDUCE_LANES, length - start)
        current = [lane[..., :width] for lane in lanes]
        items = [b[..., start : start + width] for b in block]
        folded = _combine(evaluator, reducer, current, items)
        lanes = [np.concatenate([f, lane[..., width:]], axis=-1) for f, lane in zip(folded, lanes, strict=True)]
    return lanes


def reduce_sequences(evaluator: Evaluator, reducer: Computation, sequences: Values, inits: Values) -> Values:
    """Reduces arrays of shape (M, n) along their last axis in the pinned order."""
    n = sequences[0].shape[-1]
    rows = sequences[0].shape[0]
    if n == 0:
        return [np.broadcast_to(np.asarray(init), (rows,)).copy() for init in inits]
    full_blocks = n // REDUCE_BLOCK
    block_results: list[Values] = []
    if full_blocks:
        body = [s[:, : full_blocks * REDUCE_BLOCK].reshape(rows, full_blocks, REDUCE_BLOCK) for s in sequences]
        lanes = _fold_lanes(evaluator, reducer, body)
        block_results.append(pairwise_tree(evaluator, reducer, lanes, axis=2))
    if n % REDUCE_BLOCK:
        tail = [s[:, full_blocks * REDUCE_BLOCK :].reshape(rows, 1, n % REDUCE_BLOCK) for s in sequences]
        lanes = _fold_lanes(evaluator, reducer, tail)
        block_results.append(pairwise_tree(evaluator, reducer, lanes, axis=2))
    blocks = [np.concatenate([r[i] for r in block_results], axis=1) for i in range(len(sequences))]
    result = pairwise_tree(evaluator, reducer, blocks, axis=1)
    init_rows = [np.broadcast_to(np.asarray(init), (rows,)) for init in inits]
    return _combine(evaluator, reducer, init_rows, result)


def _reduce(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    half = len(operands) // 2
    inputs = [np.asarray(o) for o in operands[:half]]
    inits = [np.asarray(o) for o in operands[half:]]
    dims = instruction.attrs["dimensions"]
    assert isinstance(dims, tuple)
    reducer = instruction.attrs["to_apply"]
    assert isinstance(reducer, Computation)
    kept = [d for d in range(inputs[0].ndim) if d not in dims]
    reduced = sorted(dims)  # row-major logical order of the reduced dimensions
    out_dims = tuple(inputs[0].shape[d] for d in kept)
    rows = int(np.prod(out_dims, dtype=np.int64))
    n = int(np.prod([inputs[0].shape[d] for d in reduced], dtype=np.int64))
    sequences = [np.transpose(x, kept + reduced).reshape(rows, n) for x in inputs]
    results = reduce_sequences(evaluator, reducer, sequences, inits)
    shaped = [r.reshape(out_dims).astype(x.dtype) for r, x in zip(results, inputs, strict=True)]
    return shaped[0] if half == 1 else tuple(shaped)


def _reduce_window(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    """For each output element: acc = init, then acc = reducer(acc, x) over the window
    positions in row-major order. Positions in padding or in base-dilation holes hold init."""
    half = len(operands) // 2
    inputs = [np.asarray(o) for o in operands[:half]]
    inits = [np.asarray(o) for o in operands[half:]]
    window = instruction.attrs["window"]
    reducer = instruction.attrs["to_apply"]
    assert isinstance(window, attr.Window) and isinstance(reducer, Computation)
    config = tuple(attr.PadDim(w.pad_low, w.pad_high, w.base_dilation - 1) for w in window.dims)
    padded = [pad_array(x, init, config) for x, init in zip(inputs, inits, strict=True)]
    out_shape = instruction.shape.elements[0].dims if half > 1 else instruction.shape.dims  # type: ignore[union-attr]
    acc = [np.broadcast_to(init, out_shape).copy() for init in inits]
    if 0 in out_shape:
        return acc[0] if half == 1 else tuple(acc)
    for position in np.ndindex(*(w.size for w in window.dims)):
        index = tuple(
            slice(k * w.window_dilation, k * w.window_dilation + (n - 1) * w.stride + 1, w.stride)
            for k, w, n in zip(position, window.dims, out_shape, strict=True)
        )
        acc = _combine(evaluator, reducer, acc, [p[index] for p in padded])
    shaped = [a.astype(x.dtype).reshape(out_shape) for a, x in zip(acc, inputs, strict=True)]
    return shaped[0] if half == 1 else tuple(shaped)


def _select_positions(evaluator: Evaluator, instruction: Instruction, operand: np.ndarray, source_dims: tuple[int, ...]) -> np.ndarray:
    """The flat operand position each window selects (-1: the window holds padding only).
    Window positions are visited in row-major order; the first inside the operand is
    selected, and each later one replaces it when `select(selected, current)` is false."""
    window = instruction.attrs["window"]
    select = instruction.attrs["select"]
    assert isinstance(window, attr.Window) and isinstance(select, Computation)
    config = tuple(attr.PadDim(w.pad_low, w.pad_high, 0) for w in window.dims)
    padded = pad_array(operand, np.zeros((), operand.dtype), config)
    places = pad_array(np.arange(operand.size, dtype=np.int64).reshape(operand.shape), np.int64(-1), config)
    selected = np.full(source_dims, -1, dtype=np.int64)
    selected_value = np.zeros(source_dims, dtype=operand.dtype)
    for position in np.ndindex(*(w.size for w in window.dims)):
        index = tuple(slice(k, k + (n - 1) * w.stride + 1, w.stride) for k, w, n in zip(position, window.dims, source_dims, strict=True))
        current, place = padded[index], places[index]
        keep = evaluator.apply_scalar_computation(select, [selected_value, current])[0].astype(bool)
        replace = (place >= 0) & ((selected < 0) | ~keep)
        selected_value = np.where(replace, current, selected_value)
        selected = np.where(replace, place, selected)
    return selected


def _select_and_scatter(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    """The result starts as init everywhere; then for each source element in row-major
    order, result[s] = scatter(result[s], source element) at the position s its window
    selects (XLA:CPU's order of the arguments). Elements that select the same position are applied in source order: in rounds,
    the k-th of each position in round k."""
    operand, source, init = (np.asarray(o) for o in operands)
    scatter = instruction.attrs["scatter"]
    assert isinstance(scatter, Computation)
    result = np.full(operand.shape, init, dtype=operand.dtype)
    if source.size == 0 or operand.size == 0:
        return result
    targets = _select_positions(evaluator, instruction, operand, source.shape).reshape(-1)
    values = source.reshape(-1)
    order = np.flatnonzero(targets >= 0)
    by_target = np.argsort(targets[order], kind="stable")
    sorted_targets = targets[order][by_target]
    first_of_group = np.concatenate([[True], sorted_targets[1:] != sorted_targets[:-1]])
    group_start = np.maximum.accumulate(np.where(first_of_group, np.arange(len(order)), 0))
    rank = np.empty(len(order), dtype=np.int64)
    rank[by_target] = np.arange(len(order)) - group_start
    flat = result.reshape(-1)
    for round_number in range(int(rank.max(initial=-1)) + 1):
        picked = order[rank == round_number]
        places = targets[picked]
        flat[places] = evaluator.apply_scalar_computation(scatter, [flat[places], values[picked]])[0]
    return result


HANDLERS = family_table("reductions", globals())
