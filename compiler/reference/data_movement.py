"""Data movement ops: they rearrange elements and never change a value's bits."""

from __future__ import annotations

import numpy as np

from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape
from compiler.numerics.convert import convert
from compiler.reference.evaluator import Evaluator, Value
from core.dtypes import S64


def _shape(instruction: Instruction) -> ArrayShape:
    return instruction.array_shape


def _broadcast(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    operand = np.asarray(operands[0])
    shape = _shape(instruction)
    dims = instruction.attrs.get("dimensions", ())
    assert isinstance(dims, tuple)
    # Put the operand's dimensions where `dimensions` maps them, with size-1 axes elsewhere.
    order = np.argsort(dims, kind="stable")
    expanded_shape = [1] * shape.rank
    for index in order.tolist():
        expanded_shape[dims[index]] = operand.shape[index]
    expanded = np.transpose(operand, order).reshape(expanded_shape) if operand.ndim else operand
    return np.broadcast_to(expanded, shape.dims).copy()


def _reshape(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    return np.asarray(operands[0]).reshape(_shape(instruction).dims).copy()


def physical_order(array: np.ndarray, shape: ArrayShape) -> np.ndarray:
    """The elements of a logical array in memory order under `shape`'s layout, flattened."""
    major_to_minor = tuple(reversed(shape.minor_to_major))
    return np.transpose(array, major_to_minor).reshape(-1) if array.ndim else array.reshape(-1)


def from_physical_order(flat: np.ndarray, shape: ArrayShape) -> np.ndarray:
    """Inverse of physical_order: the logical array whose memory order under `shape` is `flat`."""
    major_to_minor = tuple(reversed(shape.minor_to_major))
    physical_dims = tuple(shape.dims[d] for d in major_to_minor)
    physical = flat.reshape(physical_dims)
    return np.transpose(physical, np.argsort(major_to_minor)) if shape.rank else physical.reshape(())


def _bitcast(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    """Reinterprets the operand's buffer: layouts decide which logical element is which."""
    source = instruction.operands[0].array_shape
    target = _shape(instruction)
    flat = physical_order(np.asarray(operands[0]), source)
    flat = np.require(flat, requirements="C").view(target.dtype.numpy)
    return np.require(from_physical_order(flat, target), requirements="C")


def _transpose(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    perm = instruction.attrs["dimensions"]
    return np.require(np.transpose(np.asarray(operands[0]), perm), requirements="C")


def _reverse(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    dims = instruction.attrs["dimensions"]
    assert isinstance(dims, tuple)
    return np.require(np.flip(np.asarray(operands[0]), axis=dims) if dims else np.asarray(operands[0]).copy(), requirements="C")


def _slice(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    spec = instruction.attrs["slice"]
    assert isinstance(spec, tuple)
    index = tuple(slice(d.start, d.limit, d.stride) for d in spec)
    return np.require(np.asarray(operands[0])[index], requirements="C")


def clamped_starts(indices: list[Value], operand_dims: tuple[int, ...], sizes: tuple[int, ...]) -> list[int]:
    """Start indices clamped so the window [start, start+size) lies inside the operand."""
    starts = []
    for index, dim, size in zip(indices, operand_dims, sizes, strict=True):
        value = int(np.asarray(index).reshape(()))
        starts.append(min(max(value, 0), dim - size))
    return starts


def _dynamic_slice(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    operand = np.asarray(operands[0])
    sizes = instruction.attrs["dynamic_slice_sizes"]
    assert isinstance(sizes, tuple)
    starts = clamped_starts(operands[1:], operand.shape, sizes)
    index = tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))
    return np.require(operand[index], requirements="C")


def _dynamic_update_slice(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    operand = np.array(operands[0], copy=True)
    update = np.asarray(operands[1])
    starts = clamped_starts(operands[2:], operand.shape, update.shape)
    index = tuple(slice(s, s + n) for s, n in zip(starts, update.shape, strict=True))
    operand[index] = update
    return operand


def _concatenate(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    axis = instruction.attrs["dimensions"][0]  # type: ignore[index]
    return np.concatenate([np.asarray(o) for o in operands], axis=axis)


def pad_array(operand: np.ndarray, value: np.ndarray, config: tuple[attr.PadDim, ...]) -> np.ndarray:
    """Pads with low/high (negative: crops) and interior padding, filling with `value`."""
    result = operand
    for axis, p in enumerate(config):
        size = result.shape[axis]
        if p.interior and size > 1:
            dilated_size = size + (size - 1) * p.interior
            shape = list(result.shape)
            shape[axis] = dilated_size
            dilated = np.full(shape, value, dtype=result.dtype)
            index = [slice(None)] * result.ndim
            index[axis] = slice(0, dilated_size, p.interior + 1)
            dilated[tuple(index)] = result
            result = dilated
        # Low and high edges: output element o is element o - low of the (dilated) operand,
        # or the padding value where there is none. A negative amount removes elements, of
        # the padding on the other edge too (low 1, high -1 of no elements: no elements).
        size = result.shape[axis]
        shape = list(result.shape)
        shape[axis] = p.low + size + p.high
        padded = np.full(shape, value, dtype=result.dtype)
        first, last = max(-p.low, 0), min(size, shape[axis] - p.low)
        if last > first:
            source = [slice(None)] * result.ndim
            target = [slice(None)] * result.ndim
            source[axis] = slice(first, last)
            target[axis] = slice(first + p.low, last + p.low)
            padded[tuple(target)] = result[tuple(source)]
        result = padded
    return np.require(result, requirements="C")


def _pad(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    config = instruction.attrs.get("padding", ())
    assert isinstance(config, tuple)
    return pad_array(np.asarray(operands[0]), np.asarray(operands[1]), config)


def _iota(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    shape = _shape(instruction)
    dimension = instruction.attrs["iota_dimension"]
    assert isinstance(dimension, int)
    if shape.element_count == 0:
        return np.zeros(shape.dims, dtype=shape.dtype.numpy)  # however long the iota dimension
    counts = np.arange(shape.dims[dimension], dtype=np.int64)
    values = convert(counts, S64, shape.dtype)
    expanded = [1] * shape.rank
    expanded[dimension] = shape.dims[dimension]
    return np.broadcast_to(values.reshape(expanded), shape.dims).copy()


# Each opcode of the family evaluated by the function named after it.
HANDLERS = family_table("data_movement", globals())
