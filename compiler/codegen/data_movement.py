"""Data movement ops: each output element is read from an operand at an index computed from
the output's multi-index (or is a fill value). Mirror of compiler/reference/data_movement.py;
values move bit for bit."""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from compiler.codegen import numerics_ir as nir
from compiler.codegen import plan as P
from compiler.codegen.kernel import Kernel, pad_source, ravel, row_major_strides, unravel
from compiler.codegen.llvm_ir import I64, storage_type
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape
from core.dtypes import S64

ElementFunction = Callable[[Kernel, list[ir.Value]], ir.Value]


def emit_index_kernel(
    lowering: Lowering, instruction: Instruction, output: int, element: ElementFunction, grain: int = 16384
) -> P.KernelStep | None:
    """A kernel over the output's elements: out[o] = element(kernel, multi_index(o))."""
    shape = instruction.array_shape
    count = shape.element_count
    if count == 0:
        return None
    with lowering.kernels.kernel(instruction.opcode) as kernel:
        out_base = kernel.buffer(output)
        with kernel.loop(kernel.begin, kernel.end, 1, "i") as index:
            multi = unravel(kernel.builder, index, shape.dims)
            kernel.store(element(kernel, multi), out_base, shape.dtype, index)
    return P.KernelStep(kernel.name, count, grain, instruction.name)


def _emit(lowering: Lowering, instruction: Instruction, steps: list[P.Step], element: ElementFunction) -> int:
    output = lowering.new_buffer(instruction.array_shape)
    step = emit_index_kernel(lowering, instruction, output, element)
    if step is not None:
        steps.append(step)
    return output


def _operand(instruction: Instruction, index: int = 0) -> ArrayShape:
    return instruction.operands[index].array_shape


def emit_byte_copy(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """reshape (and same-byte bitcasts): the row-major bytes do not change."""
    output = lowering.new_buffer(instruction.array_shape)
    if instruction.array_shape.byte_size:
        steps.append(P.CopyStep((operands[0],), (output,)))  # type: ignore[arg-type]
    return output


def _broadcast(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    source = _operand(instruction)
    dims = instruction.attrs.get("dimensions", ())
    strides = row_major_strides(source.dims)

    def element(kernel: Kernel, multi: list[ir.Value]) -> ir.Value:
        index = ravel(kernel.builder, [multi[d] for d in dims], strides)  # type: ignore[union-attr]
        return kernel.load(kernel.buffer(operands[0]), source.dtype, index)  # type: ignore[arg-type]

    return _emit(lowering, instruction, steps, element)


TRANSPOSE_TILE = 32


def _transpose(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    source = _operand(instruction)
    perm = instruction.attrs["dimensions"]
    strides = row_major_strides(source.dims)
    shape = instruction.array_shape
    if shape.rank >= 2 and perm[-2] == source.rank - 1 and perm[-1] != source.rank - 1 and shape.element_count:  # type: ignore[index]
        return _tiled_transpose(lowering, instruction, operands, steps)

    def element(kernel: Kernel, multi: list[ir.Value]) -> ir.Value:
        index = ravel(kernel.builder, multi, [strides[p] for p in perm])  # type: ignore[union-attr]
        return kernel.load(kernel.buffer(operands[0]), source.dtype, index)  # type: ignore[arg-type]

    return _emit(lowering, instruction, steps, element)


def _tiled_transpose(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """A transpose that makes the operand's contiguous dimension the result's second to last:
    a work item is a TILE x TILE tile of the result's last two dimensions, whose source rows
    and result rows all stay in L1 (element by element, every read would be a cache miss)."""
    source, shape = _operand(instruction), instruction.array_shape
    perm = instruction.attrs["dimensions"]
    strides = row_major_strides(source.dims)
    rows, columns = shape.dims[-2], shape.dims[-1]
    outer_dims = shape.dims[:-2]
    tile = TRANSPOSE_TILE
    tile_rows, tile_columns = -(-rows // tile), -(-columns // tile)
    output = lowering.new_buffer(shape)
    column_stride = strides[perm[-1]]  # type: ignore[index]
    with lowering.kernels.kernel("transpose") as kernel:
        b = kernel.builder
        source_base, out_base = kernel.buffer(operands[0]), kernel.buffer(output)  # type: ignore[arg-type]
        with kernel.loop(kernel.begin, kernel.end, 1, "tile") as item:
            column_tile = b.urem(item, I64(tile_columns))
            rest = b.udiv(item, I64(tile_columns))
            row_tile, outer = b.urem(rest, I64(tile_rows)), b.udiv(rest, I64(tile_rows))
            outer_index = unravel(b, outer, outer_dims) if outer_dims else []
            source_outer = ravel(b, outer_index, [strides[p] for p in perm[:-2]])  # type: ignore[union-attr, index]
            first_row, first_column = b.mul(row_tile, I64(tile)), b.mul(column_tile, I64(tile))
            row_stop = b.add(first_row, I64(tile))
            row_stop = b.select(b.icmp_signed("<", row_stop, I64(rows)), row_stop, I64(rows))
            column_stop = b.add(first_column, I64(tile))
            column_stop = b.select(b.icmp_signed("<", column_stop, I64(columns)), column_stop, I64(columns))
            with kernel.loop(first_row, row_stop, 1, "r") as row:
                target_row = b.mul(b.add(b.mul(outer, I64(rows)), row), I64(columns))
                with kernel.loop(first_column, column_stop, 1, "c") as column:
                    value = kernel.load(source_base, source.dtype, b.add(b.add(source_outer, b.mul(column, I64(column_stride))), row))
                    kernel.store(value, out_base, shape.dtype, b.add(target_row, column))
    outer_count = 1
    for size in outer_dims:
        outer_count *= size
    steps.append(P.KernelStep(kernel.name, outer_count * tile_rows * tile_columns, 64, instruction.name))
    return output


def _reverse(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    source = _operand(instruction)
    reversed_dims = set(instruction.attrs["dimensions"])  # type: ignore[arg-type]
    strides = row_major_strides(source.dims)

    def element(kernel: Kernel, multi: list[ir.Value]) -> ir.Value:
        b = kernel.builder
        indices = [b.sub(I64(source.dims[d] - 1), m) if d in reversed_dims else m for d, m in enumerate(multi)]
        return kernel.load(kernel.buffer(operands[0]), source.dtype, ravel(b, indices, strides))  # type: ignore[arg-type]

    return _emit(lowering, instruction, steps, element)


def _slice(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    source = _operand(instruction)
    spec = instruction.attrs["slice"]
    strides = row_major_strides(source.dims)

    def element(kernel: Kernel, multi: list[ir.Value]) -> ir.Value:
        b = kernel.builder
        indices = [b.add(I64(d.start), b.mul(m, I64(d.stride))) for d, m in zip(spec, multi, strict=True)]  # type: ignore[arg-type]
        return kernel.load(kernel.buffer(operands[0]), source.dtype, ravel(b, indices, strides))  # type: ignore[arg-type]

    return _emit(lowering, instruction, steps, element)


def clamped_starts(kernel: Kernel, instruction: Instruction, operands: list[Ref], first: int, sizes: tuple[int, ...]) -> list[ir.Value]:
    """Start indices read from scalar operands, as i64, clamped to [0, dim - size]."""
    b = kernel.builder
    dims = _operand(instruction).dims
    starts = []
    for axis, (dim, size) in enumerate(zip(dims, sizes, strict=True)):
        index_shape = _operand(instruction, first + axis)
        raw = kernel.load(kernel.buffer(operands[first + axis]), index_shape.dtype, I64(0))  # type: ignore[arg-type]
        if index_shape.dtype.bits < 64:
            wide = b.zext(raw, I64) if index_shape.dtype.is_unsigned else b.sext(raw, I64)
        elif index_shape.dtype.is_unsigned:
            # An unsigned index past the signed range is huge: it clamps to the top.
            wide = b.select(b.icmp_signed("<", raw, I64(0)), I64(dim), raw)
        else:
            wide = raw
        low = b.select(b.icmp_signed("<", wide, I64(0)), I64(0), wide)
        limit = I64(dim - size)
        starts.append(b.select(b.icmp_signed(">", low, limit), limit, low))
    return starts


def _dynamic_slice(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    source = _operand(instruction)
    sizes = instruction.attrs["dynamic_slice_sizes"]
    strides = row_major_strides(source.dims)

    def element(kernel: Kernel, multi: list[ir.Value]) -> ir.Value:
        # The starts are loop-invariant: LLVM hoists them out of the element loop.
        b = kernel.builder
        starts = clamped_starts(kernel, instruction, operands, 1, sizes)  # type: ignore[arg-type]
        indices = [b.add(s, m) for s, m in zip(starts, multi, strict=True)]
        return kernel.load(kernel.buffer(operands[0]), source.dtype, ravel(b, indices, strides))  # type: ignore[arg-type]

    return _emit(lowering, instruction, steps, element)


def _dynamic_update_slice(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """A copy of the operand, then a kernel over the update's elements writing each at the
    clamped start plus its index. The copy reads the operand whole before the kernel writes, so
    the output may take the operand's memory (buffer assignment: in place at the top level,
    and onto the loop state when a while body updates its state), and the copy onto itself is
    skipped: the step costs the update's size, not the operand's."""
    source, update = _operand(instruction), _operand(instruction, 1)
    output = lowering.new_buffer(instruction.array_shape)
    if source.byte_size:
        steps.append(P.CopyStep((operands[0],), (output,)))  # type: ignore[arg-type]
    lowering.in_place.append((output, operands[0]))  # type: ignore[arg-type]
    if update.element_count == 0:
        return output
    source_strides = row_major_strides(source.dims)
    with lowering.kernels.kernel(instruction.opcode) as kernel:
        b = kernel.builder
        # The starts are loop-invariant: LLVM hoists them out of the element loop.
        with kernel.loop(kernel.begin, kernel.end, 1, "u") as index:
            starts = clamped_starts(kernel, instruction, operands, 2, update.dims)  # type: ignore[arg-type]
            multi = unravel(b, index, update.dims)
            target = ravel(b, [b.add(start, m) for start, m in zip(starts, multi, strict=True)], source_strides)
            value = kernel.load(kernel.buffer(operands[1]), update.dtype, index)  # type: ignore[arg-type]
            kernel.store(value, kernel.buffer(output), source.dtype, target)
    steps.append(P.KernelStep(kernel.name, update.element_count, 16384, instruction.name))
    return output


def _concatenate(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """One kernel per operand, each writing its own slab of the output."""
    shape = instruction.array_shape
    axis = instruction.attrs["dimensions"][0]  # type: ignore[index]
    output = lowering.new_buffer(shape)
    out_strides = row_major_strides(shape.dims)
    offset = 0
    for ref, operand in zip(operands, instruction.operands, strict=True):
        source = operand.array_shape
        if source.element_count:
            with lowering.kernels.kernel("concatenate") as kernel:
                b = kernel.builder
                with kernel.loop(kernel.begin, kernel.end, 1, "i") as index:
                    multi = unravel(b, index, source.dims)
                    multi[axis] = b.add(multi[axis], I64(offset))
                    value = kernel.load(kernel.buffer(ref), source.dtype, index)  # type: ignore[arg-type]
                    kernel.store(value, kernel.buffer(output), shape.dtype, ravel(b, multi, out_strides))
            steps.append(P.KernelStep(kernel.name, source.element_count, 16384, instruction.name))
        offset += source.dims[axis]
    return output


def _pad(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    source = _operand(instruction)
    config: tuple[attr.PadDim, ...] = instruction.attrs.get("padding", ())  # type: ignore[assignment]
    strides = row_major_strides(source.dims)

    def element(kernel: Kernel, multi: list[ir.Value]) -> ir.Value:
        b = kernel.builder
        fill = kernel.load(kernel.buffer(operands[1]), source.dtype, I64(0))  # type: ignore[arg-type]
        if source.element_count == 0:
            return fill
        inside, safe = pad_source(b, multi, config, source.dims)
        value = kernel.load(kernel.buffer(operands[0]), source.dtype, ravel(b, safe, strides))  # type: ignore[arg-type]
        return b.select(inside, value, fill)

    return _emit(lowering, instruction, steps, element)


def _iota(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    dimension = instruction.attrs["iota_dimension"]
    dtype = instruction.array_shape.dtype

    def element(kernel: Kernel, multi: list[ir.Value]) -> ir.Value:
        return nir.convert(kernel.builder, multi[dimension], S64, dtype, kernel.config)  # type: ignore[index]

    return _emit(lowering, instruction, steps, element)


def _physical_strides(shape: ArrayShape) -> list[int]:
    """Strides of each logical dimension in memory under the shape's layout."""
    strides = [0] * shape.rank
    stride = 1
    for dim in shape.minor_to_major:
        strides[dim] = stride
        stride *= shape.dims[dim]
    return strides


def _bitcast(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """Reinterprets the buffer: the element at memory position k of the result is the one at
    memory position k of the operand."""
    source, target = _operand(instruction), instruction.array_shape
    if source.has_default_layout and target.has_default_layout:
        return emit_byte_copy(lowering, instruction, operands, steps)
    source_order = tuple(reversed(source.minor_to_major))
    source_physical_dims = tuple(source.dims[d] for d in source_order)
    source_strides = _physical_strides(source)
    target_strides = _physical_strides(target)
    output = lowering.new_buffer(target)
    if target.element_count:
        with lowering.kernels.kernel("bitcast") as kernel:
            b = kernel.builder
            with kernel.loop(kernel.begin, kernel.end, 1, "i") as index:
                multi = unravel(b, index, target.dims)
                position = ravel(b, multi, target_strides)
                physical = unravel(b, position, source_physical_dims)
                logical = [I64(0)] * source.rank
                for slot, dim in enumerate(source_order):
                    logical[dim] = physical[slot]
                offset = ravel(b, logical, source_strides)
                value = kernel.load(kernel.buffer(operands[0]), source.dtype, offset)  # type: ignore[arg-type]
                if source.dtype != target.dtype:
                    value = b.bitcast(value, storage_type(target.dtype))
                kernel.store(value, kernel.buffer(output), target.dtype, index)
        steps.append(P.KernelStep(kernel.name, target.element_count, 16384, instruction.name))
    return output


# Each opcode of the family lowered by the function named after it; a reshape only copies
# bytes (a row-major layout keeps the element order).
EMITTERS = family_table("data_movement", globals(), shared={"reshape": emit_byte_copy})
