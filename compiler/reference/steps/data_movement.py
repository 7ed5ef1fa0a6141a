"""Element steps of the data-movement ops (compiler/reference/data_movement.py): none. An
output element is an operand element (or the padding value), found by index arithmetic on
the instruction's attributes; its handle is that element's, bits unchanged. iota's element
is a constant converted to the type; a dynamic slice's start indices are loaded and clamped
by integer steps, whose values place the element."""

from __future__ import annotations

import numpy as np

from compiler.hlo import attributes as attr
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape
from compiler.reference.scalar import Op
from core.dtypes import S64

from . import ElementEvaluator, Handle, Scope

Index = tuple[int, ...]


def _same(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    return ev.operand(instruction, 0, index, scope)


def _broadcast(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    dims = instruction.attrs.get("dimensions", ())
    assert isinstance(dims, tuple)
    return ev.operand(instruction, 0, tuple(index[d] for d in dims), scope)


def _reshape(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    source = instruction.operands[0].array_shape
    flat = int(np.ravel_multi_index(index, instruction.array_shape.dims)) if index else 0
    return ev.operand(
        instruction,
        0,
        tuple(int(i) for i in np.unravel_index(flat, source.dims)) if source.rank else (),
        scope,
    )


def _physical(index: Index, shape: ArrayShape) -> int:
    """The memory position of logical element `index` under `shape`'s layout."""
    order = tuple(reversed(shape.minor_to_major))
    return (
        int(
            np.ravel_multi_index(
                tuple(index[d] for d in order), tuple(shape.dims[d] for d in order)
            )
        )
        if shape.rank
        else 0
    )


def _logical(position: int, shape: ArrayShape) -> Index:
    order = tuple(reversed(shape.minor_to_major))
    physical = np.unravel_index(position, tuple(shape.dims[d] for d in order)) if shape.rank else ()
    index = [0] * shape.rank
    for d, i in zip(order, physical, strict=True):
        index[d] = int(i)
    return tuple(index)


def _bitcast(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    """The element at the same memory position under the operand's layout."""
    source, target = instruction.operands[0].array_shape, instruction.array_shape
    handle = ev.operand(instruction, 0, _logical(_physical(index, target), source), scope)
    if source.dtype != target.dtype:
        return ev.recorder.op(Op.BITCAST, handle, to=target.dtype)  # type: ignore[arg-type]
    return handle


def _transpose(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    perm = instruction.attrs["dimensions"]
    assert isinstance(perm, tuple)
    source = [0] * len(perm)
    for out_dim, in_dim in enumerate(perm):
        source[in_dim] = index[out_dim]
    return ev.operand(instruction, 0, tuple(source), scope)


def _slice(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    spec = instruction.attrs["slice"]
    assert isinstance(spec, tuple)
    return ev.operand(
        instruction,
        0,
        tuple(d.start + i * d.stride for d, i in zip(spec, index, strict=True)),
        scope,
    )


def _reverse(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    dims = instruction.attrs["dimensions"]
    assert isinstance(dims, tuple)
    shape = instruction.array_shape.dims
    return ev.operand(
        instruction,
        0,
        tuple(shape[d] - 1 - i if d in dims else i for d, i in enumerate(index)),
        scope,
    )


def padded_source(
    index: Index, dims: tuple[int, ...], config: tuple[attr.PadDim, ...]
) -> Index | None:
    """The operand element at padded position `index`, or None in padding or a hole."""
    source = []
    for position, size, pad in zip(index, dims, config, strict=True):
        dilated = size + (size - 1) * pad.interior if size else 0
        offset = position - pad.low
        if not 0 <= offset < dilated or offset % (pad.interior + 1):
            return None
        source.append(offset // (pad.interior + 1))
    return tuple(source)


def _pad(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    config = instruction.attrs["padding"]
    assert isinstance(config, tuple)
    source = padded_source(index, instruction.operands[0].array_shape.dims, config)
    return (
        ev.operand(instruction, 1, (), scope)
        if source is None
        else ev.operand(instruction, 0, source, scope)
    )


def _concatenate(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    axis = instruction.attrs["dimensions"][0]  # type: ignore[index]
    offset = index[axis]
    for number, operand in enumerate(instruction.operands):
        size = operand.array_shape.dims[axis]
        if offset < size:
            return ev.operand(
                instruction, number, index[:axis] + (offset,) + index[axis + 1 :], scope
            )
        offset -= size
    raise AssertionError("index outside the concatenation")


def _iota(ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope) -> Handle:
    """convert(i) of the index along iota_dimension, from s64."""
    dimension = instruction.attrs["iota_dimension"]
    assert isinstance(dimension, int)
    count = ev.recorder.const(S64, index[dimension])
    dtype = instruction.array_shape.dtype
    return count if dtype == S64 else ev.recorder.op(Op.CONVERT, count, to=dtype)


def _clamped_starts(
    ev: ElementEvaluator,
    instruction: Instruction,
    first: int,
    sizes: tuple[int, ...],
    index: Index,
    scope: Scope,
) -> list[int]:
    """Each start index loaded and clamped to [0, dim - size] by MAX and MIN steps (in the
    index's type); the values the steps give."""
    rec = ev.recorder
    dims = instruction.operands[0].array_shape.dims
    starts = []
    for number, (dim, size) in enumerate(zip(dims, sizes, strict=True)):
        start = ev.operand(instruction, first + number, (), scope)
        assert isinstance(start, int)
        dtype = rec.dtype(start)
        bits = dtype.storage_bits
        low = rec.const(dtype, 0)
        high = rec.const(dtype, (dim - size) & ((1 << bits) - 1))
        clamped = rec.op(Op.MIN, rec.op(Op.MAX, start, low), high)
        value = rec.bits(clamped)
        starts.append(value - (1 << bits) if dtype.is_signed and value >> (bits - 1) else value)
    return starts


def _dynamic_slice(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    sizes = instruction.attrs["dynamic_slice_sizes"]
    assert isinstance(sizes, tuple)
    starts = _clamped_starts(ev, instruction, 1, sizes, index, scope)
    return ev.operand(
        instruction, 0, tuple(s + i for s, i in zip(starts, index, strict=True)), scope
    )


def _dynamic_update_slice(
    ev: ElementEvaluator, instruction: Instruction, index: Index, scope: Scope
) -> Handle:
    update = instruction.operands[1].array_shape.dims
    starts = _clamped_starts(ev, instruction, 2, update, index, scope)
    inside = all(s <= i < s + n for s, i, n in zip(starts, index, update, strict=True))
    if inside:
        return ev.operand(
            instruction, 1, tuple(i - s for s, i in zip(starts, index, strict=True)), scope
        )
    return ev.operand(instruction, 0, index, scope)


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
