"""Element steps of the data-movement ops (compiler/reference/data_movement.py): no
arithmetic on values. An output element is an operand element, or the padding value, at
coordinates the index steps compute from the instruction's attributes; where a position may
fall in padding (pad, concatenate, dynamic-update-slice), both candidates are evaluated, the
operand's at coordinates kept in range, and a SELECT on the position's validity picks one,
so the program is the same for every element. iota's element is its coordinate converted;
a dynamic slice's start indices are loaded and clamped by MAX and MIN steps."""

from __future__ import annotations

from collections.abc import Sequence

from compiler.hlo import attributes as attr
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape
from compiler.reference.scalar import Op
from core.dtypes import S64

from . import ElementEvaluator, Handle, Scope, indexing
from .record import Recorder

Coords = tuple[int, ...]


def _same(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    return ev.operand(instruction, 0, index, scope)


def _broadcast(
    ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope
) -> Handle:
    dims = instruction.attrs.get("dimensions", ())
    assert isinstance(dims, tuple)
    return ev.operand(instruction, 0, tuple(index[d] for d in dims), scope)


def _reshape(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    rec = ev.recorder
    source = instruction.operands[0].array_shape
    flat = indexing.flat(rec, index, instruction.array_shape.dims)
    return ev.operand(instruction, 0, indexing.unflat(rec, flat, source.dims), scope)


def _major_to_minor(shape: ArrayShape) -> tuple[int, ...]:
    return tuple(reversed(shape.minor_to_major))


def _bitcast(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    """The element at the same memory position under the operand's layout."""
    rec = ev.recorder
    source, target = instruction.operands[0].array_shape, instruction.array_shape
    order = _major_to_minor(target)
    position = indexing.flat(
        rec, tuple(index[d] for d in order), tuple(target.dims[d] for d in order)
    )
    source_order = _major_to_minor(source)
    physical = indexing.unflat(rec, position, tuple(source.dims[d] for d in source_order))
    coords = [0] * source.rank
    for d, coord in zip(source_order, physical, strict=True):
        coords[d] = coord
    handle = ev.operand(instruction, 0, tuple(coords), scope)
    if source.dtype != target.dtype:
        return rec.op(Op.BITCAST, handle, to=target.dtype)  # type: ignore[arg-type]
    return handle


def _transpose(
    ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope
) -> Handle:
    perm = instruction.attrs["dimensions"]
    assert isinstance(perm, tuple)
    source = [0] * len(perm)
    for out_dim, in_dim in enumerate(perm):
        source[in_dim] = index[out_dim]
    return ev.operand(instruction, 0, tuple(source), scope)


def _slice(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    spec = instruction.attrs["slice"]
    assert isinstance(spec, tuple)
    rec = ev.recorder
    source = tuple(
        indexing.add(rec, indexing.scale(rec, c, d.stride), d.start)
        for d, c in zip(spec, index, strict=True)
    )
    return ev.operand(instruction, 0, source, scope)


def _reverse(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    dims = instruction.attrs["dimensions"]
    assert isinstance(dims, tuple)
    rec = ev.recorder
    shape = instruction.array_shape.dims
    source = tuple(
        rec.op(Op.SUB, indexing.const(rec, shape[d] - 1), c) if d in dims else c
        for d, c in enumerate(index)
    )
    return ev.operand(instruction, 0, source, scope)


def padded_source(
    rec: Recorder,
    index: Coords,
    out_dims: tuple[int, ...],
    dims: tuple[int, ...],
    config: tuple[attr.PadDim, ...],
) -> tuple[int, Coords] | None:
    """For padded positions `index` (ranging over `out_dims`): (valid, coords), the pred step
    "the position holds an operand element" and the operand coordinates there (0 where it
    does not), or None when no position does (an empty operand)."""
    if any(size == 0 for size in dims):
        return None
    checks, coords = [], []
    for position, out_size, size, pad in zip(index, out_dims, dims, config, strict=True):
        dilated = size + (size - 1) * pad.interior
        step = pad.interior + 1
        offset = indexing.add(rec, position, -pad.low)
        # Statically in range and on the grid: no check.
        always = pad.low <= 0 and out_size - 1 - pad.low < dilated and step == 1
        if not always:
            valid = indexing.in_range(rec, offset, 0, dilated)
            if step > 1:
                on_grid = rec.op(
                    Op.EQ, rec.op(Op.REM, offset, indexing.const(rec, step)), indexing.const(rec, 0)
                )
                valid = rec.op(Op.AND, valid, on_grid)
            checks.append(valid)
        source = offset if step == 1 else rec.op(Op.FLOOR_DIV, offset, indexing.const(rec, step))
        coords.append(
            source if always else indexing.select(rec, checks[-1], source, indexing.const(rec, 0))
        )
    return indexing.all_of(rec, checks), tuple(coords)


def window_source(
    rec: Recorder,
    index: Coords,
    position: tuple[int, ...],
    window: Sequence[attr.WindowDim],
    out_dims: Sequence[int],
    dims: tuple[int, ...],
) -> tuple[int, Coords] | None:
    """padded_source of the operand element that window position `position` of output
    element `index` reads (a convolution's spatial dimensions, a reduce-window's): padded
    coordinate o * stride + k * window_dilation over the base-dilated, padded operand."""
    config = tuple(attr.PadDim(w.pad_low, w.pad_high, w.base_dilation - 1) for w in window)
    padded = tuple(
        indexing.add(rec, indexing.scale(rec, o, w.stride), k * w.window_dilation)
        for o, k, w in zip(index, position, window, strict=True)
    )
    extent = tuple(
        (n - 1) * w.stride + k * w.window_dilation + 1
        for n, k, w in zip(out_dims, position, window, strict=True)
    )
    return padded_source(rec, padded, extent, dims, config)


def _pad(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    config = instruction.attrs["padding"]
    assert isinstance(config, tuple)
    padding = ev.operand(instruction, 1, (), scope)
    found = padded_source(
        ev.recorder,
        index,
        instruction.array_shape.dims,
        instruction.operands[0].array_shape.dims,
        config,
    )
    if found is None:
        return padding
    valid, coords = found
    return indexing.select(ev.recorder, valid, ev.operand(instruction, 0, coords, scope), padding)  # type: ignore[arg-type]


def _concatenate(
    ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope
) -> Handle:
    """Every operand's element at the coordinate clamped into it, the one whose range holds
    the position selected (the last operand's where none of the others' does)."""
    rec = ev.recorder
    axis = instruction.attrs["dimensions"][0]  # type: ignore[index]
    candidates = []
    start = 0
    for number, operand in enumerate(instruction.operands):
        size = operand.array_shape.dims[axis]
        if size:
            local = indexing.add(rec, index[axis], -start)
            inside = indexing.in_range(rec, local, 0, size)
            clamped = indexing.select(rec, inside, local, indexing.const(rec, 0))
            element = ev.operand(
                instruction, number, index[:axis] + (clamped,) + index[axis + 1 :], scope
            )
            candidates.append((inside, element))
        start += size
    result = candidates[-1][1]
    for inside, element in reversed(candidates[:-1]):
        result = indexing.select(rec, inside, element, result)  # type: ignore[arg-type]
    return result


def _iota(ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope) -> Handle:
    """convert(i) of the coordinate along iota_dimension, from s64."""
    dimension = instruction.attrs["iota_dimension"]
    assert isinstance(dimension, int)
    dtype = instruction.array_shape.dtype
    return (
        index[dimension] if dtype == S64 else ev.recorder.op(Op.CONVERT, index[dimension], to=dtype)
    )


def _clamped_starts(
    ev: ElementEvaluator, instruction: Instruction, first: int, sizes: tuple[int, ...], scope: Scope
) -> list[int]:
    """Each start index loaded, clamped to [0, dim - size] by MAX and MIN steps in its type,
    then widened to s64."""
    rec = ev.recorder
    dims = instruction.operands[0].array_shape.dims
    starts = []
    for number, (dim, size) in enumerate(zip(dims, sizes, strict=True)):
        start = ev.operand(instruction, first + number, (), scope)
        assert isinstance(start, int)
        dtype = rec.dtype(start)
        mask = (1 << dtype.storage_bits) - 1
        clamped = rec.op(
            Op.MIN,
            rec.op(Op.MAX, start, rec.const(dtype, 0)),
            rec.const(dtype, (dim - size) & mask),
        )
        starts.append(clamped if dtype == S64 else rec.op(Op.CONVERT, clamped, to=S64))
    return starts


def _dynamic_slice(
    ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope
) -> Handle:
    sizes = instruction.attrs["dynamic_slice_sizes"]
    assert isinstance(sizes, tuple)
    rec = ev.recorder
    starts = _clamped_starts(ev, instruction, 1, sizes, scope)
    return ev.operand(
        instruction,
        0,
        tuple(rec.op(Op.ADD, s, c) for s, c in zip(starts, index, strict=True)),
        scope,
    )


def _dynamic_update_slice(
    ev: ElementEvaluator, instruction: Instruction, index: Coords, scope: Scope
) -> Handle:
    rec = ev.recorder
    update = instruction.operands[1].array_shape.dims
    original = ev.operand(instruction, 0, index, scope)
    if 0 in update:
        return original
    starts = _clamped_starts(ev, instruction, 2, update, scope)
    checks, coords = [], []
    for start, coord, size in zip(starts, index, update, strict=True):
        local = rec.op(Op.SUB, coord, start)
        inside = indexing.in_range(rec, local, 0, size)
        checks.append(inside)
        coords.append(indexing.select(rec, inside, local, indexing.const(rec, 0)))
    inside_all = indexing.all_of(rec, checks)
    return indexing.select(
        rec, inside_all, ev.operand(instruction, 1, tuple(coords), scope), original
    )  # type: ignore[arg-type]


RULES = {
    "copy": _same,
    "broadcast": _broadcast,
    "reshape": _reshape,
    "bitcast": _bitcast,
    "transpose": _transpose,
    "slice": _slice,
    "reverse": _reverse,
    "pad": _pad,
    "concatenate": _concatenate,
    "iota": _iota,
    "dynamic-slice": _dynamic_slice,
    "dynamic-update-slice": _dynamic_update_slice,
}

__all__ = ["RULES", "padded_source", "window_source"]
