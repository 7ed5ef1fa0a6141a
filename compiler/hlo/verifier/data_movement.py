"""The shape rules of the ops that move values: broadcasts, reshapes, transposes, slices, pads, iota."""

from __future__ import annotations

from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape, Shape
from compiler.hlo.verifier.checks import (
    ShapeRule,
    array,
    attribute,
    check,
    declared_array,
    dims_in_range,
    int_list,
    operand_and_declared,
    operand_count,
    operand_types,
)


def _broadcast(instruction: Instruction) -> Shape:
    operand, declared = operand_and_declared(instruction)
    dims = int_list(instruction, "dimensions", ())
    check(len(dims) == operand.rank, f"broadcast dimensions {list(dims)} do not match operand rank {operand.rank}")
    dims_in_range(dims, declared.rank, "broadcast dimensions")
    for index, target in enumerate(dims):
        check(operand.dims[index] == declared.dims[target],
              f"broadcast operand dimension {index} has size {operand.dims[index]}, result dimension {target} has {declared.dims[target]}")  # fmt: skip
    return ArrayShape.of(operand.dtype, declared.dims)


def _reshape(instruction: Instruction) -> Shape:
    operand, declared = operand_and_declared(instruction)
    check(operand.element_count == declared.element_count,
          f"reshape from {operand.element_count} to {declared.element_count} elements")  # fmt: skip
    return ArrayShape.of(operand.dtype, declared.dims)


def _bitcast(instruction: Instruction) -> Shape:
    operand, declared = operand_and_declared(instruction)
    check(operand.byte_size == declared.byte_size, f"bitcast from {operand} to {declared} changes the byte size")
    check(operand.dtype.bits == declared.dtype.bits, "bitcast may not change the element width")
    return ArrayShape.of(declared.dtype, declared.dims)


def _transpose(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    operand = array(instruction, 0)
    perm = int_list(instruction, "dimensions")
    check(sorted(perm) == list(range(operand.rank)), f"transpose dimensions {list(perm)} are not a permutation")
    return ArrayShape.of(operand.dtype, tuple(operand.dims[p] for p in perm))


def _reverse(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    operand = array(instruction, 0)
    dims_in_range(int_list(instruction, "dimensions"), operand.rank, "reverse dimensions")
    return ArrayShape.of(operand.dtype, operand.dims)


def _slice(instruction: Instruction) -> Shape:
    operand_count(instruction, 1)
    operand = array(instruction, 0)
    spec = attribute(instruction, "slice")
    check(isinstance(spec, tuple) and len(spec) == operand.rank, "slice needs one [start:limit:stride] per dimension")
    assert isinstance(spec, tuple)
    dims = []
    for size, d in zip(operand.dims, spec, strict=True):
        check(isinstance(d, attr.SliceDim), "bad slice")
        check(0 <= d.start <= d.limit <= size and d.stride >= 1, f"slice [{d.start}:{d.limit}:{d.stride}] out of bounds for size {size}")  # fmt: skip
        dims.append((d.limit - d.start + d.stride - 1) // d.stride)
    return ArrayShape.of(operand.dtype, tuple(dims))


def _index_scalars(instruction: Instruction, first: int, count: int) -> None:
    operand_count(instruction, first + count)
    types = set()
    for index in range(first, first + count):
        shape = array(instruction, index)
        check(shape.rank == 0 and shape.dtype.is_integer, f"operand {index} must be an integer scalar index")
        types.add(shape.dtype.name)
    check(len(types) <= 1, "start indices must all have the same type")


def _dynamic_slice(instruction: Instruction) -> Shape:
    operand = array(instruction, 0)
    _index_scalars(instruction, 1, operand.rank)
    sizes = int_list(instruction, "dynamic_slice_sizes")
    check(len(sizes) == operand.rank, "dynamic_slice_sizes needs one size per dimension")
    for size, limit in zip(sizes, operand.dims, strict=True):
        check(0 <= size <= limit, f"slice size {size} exceeds dimension size {limit}")
    return ArrayShape.of(operand.dtype, sizes)


def _dynamic_update_slice(instruction: Instruction) -> Shape:
    operand, update = array(instruction, 0), array(instruction, 1)
    _index_scalars(instruction, 2, operand.rank)
    check(update.dtype == operand.dtype, "update must have the operand's type")
    check(update.rank == operand.rank and all(u <= o for u, o in zip(update.dims, operand.dims, strict=True)),
          f"update {list(update.dims)} does not fit operand {list(operand.dims)}")  # fmt: skip
    return ArrayShape.of(operand.dtype, operand.dims)


def _concatenate(instruction: Instruction) -> Shape:
    operand_count(instruction, (1, None))
    shapes = [array(instruction, i) for i in range(len(instruction.operands))]
    dims = int_list(instruction, "dimensions")
    check(len(dims) == 1, "concatenate needs exactly one dimension")
    axis = dims[0]
    first = shapes[0]
    check(0 <= axis < first.rank, f"concatenate dimension {axis} out of range")
    total = 0
    for shape in shapes:
        check(shape.dtype == first.dtype and shape.rank == first.rank, "concatenate operands differ in type or rank")
        check(all(a == b for i, (a, b) in enumerate(zip(shape.dims, first.dims, strict=True)) if i != axis),
              "concatenate operands differ outside the concatenated dimension")  # fmt: skip
        total += shape.dims[axis]
    return ArrayShape.of(first.dtype, first.dims[:axis] + (total,) + first.dims[axis + 1 :])


def _pad(instruction: Instruction) -> Shape:
    operand_count(instruction, 2)
    operand, value = array(instruction, 0), array(instruction, 1)
    check(value.rank == 0 and value.dtype == operand.dtype, "padding value must be a scalar of the operand's type")
    config = attribute(instruction, "padding", ())
    check(isinstance(config, tuple) and len(config) == operand.rank, "padding needs one low_high[_interior] per dimension")
    assert isinstance(config, tuple)
    dims = []
    for size, p in zip(operand.dims, config, strict=True):
        check(p.interior >= 0, "interior padding must be non-negative")
        out = p.low + p.high + size + max(size - 1, 0) * p.interior
        check(out >= 0, "negative padding removes more than the dimension holds")
        dims.append(out)
    return ArrayShape.of(operand.dtype, tuple(dims))


def _iota(instruction: Instruction) -> Shape:
    operand_count(instruction, 0)
    declared = declared_array(instruction)
    dimension = attribute(instruction, "iota_dimension")
    check(isinstance(dimension, int) and 0 <= dimension < declared.rank, "iota_dimension out of range")
    operand_types(declared.dtype, "iota")
    return ArrayShape.of(declared.dtype, declared.dims)


RULES: dict[str, ShapeRule] = family_table("data_movement", globals())
