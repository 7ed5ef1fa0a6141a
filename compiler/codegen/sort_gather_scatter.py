"""sort, gather and scatter. Mirror of compiler/reference/sort_gather_scatter.py.

sort runs the contract's bottom-up merge sort on a permutation of positions (one row per
work item, the comparator inlined), then moves every operand by that permutation. gather
clamps each slice's start. scatter copies the operand, then applies the update windows in
row-major order of their scatter indices in one sequential kernel, skipping a window that
does not fit.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir

from compiler.codegen import plan as P
from compiler.codegen.elementwise import ElementEmitter
from compiler.codegen.kernel import Kernel, ravel, row_major_strides, unravel
from compiler.codegen.llvm_ir import I1, I32, I64, storage_type
from compiler.codegen.lower import Lowering, Ref, flatten_ref
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Computation, Instruction
from core.dtypes import DType


def _computation(instruction: Instruction) -> Computation:
    computation = instruction.attrs["to_apply"]
    assert isinstance(computation, Computation)
    return computation


def _emit_sort(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    shapes = [op.array_shape for op in instruction.operands]
    dims = shapes[0].dims
    axis = instruction.attrs["dimensions"][0]  # type: ignore[index]
    n = dims[axis] if dims else 1
    outputs = [lowering.new_buffer(s) for s in shapes]
    other = tuple(d for i, d in enumerate(dims) if i != axis)
    rows = 1
    for d in other:
        rows *= d
    if rows * n == 0:
        return outputs[0] if len(outputs) == 1 else tuple(outputs)
    strides = row_major_strides(dims)
    scratch = lowering.scratch_buffer(rows * 2 * n * 4)
    comparator = _computation(instruction)
    with lowering.kernels.kernel("sort") as kernel:
        b = kernel.builder
        emitter = ElementEmitter(kernel)
        bases = [kernel.buffer(ref) for ref in operands]  # type: ignore[arg-type]
        out_bases = [kernel.buffer(o) for o in outputs]
        scratch_base = kernel.buffer(scratch)
        with kernel.loop(kernel.begin, kernel.end, 1, "row") as row:
            row_multi = unravel(b, row, other)
            full = list(row_multi)
            full.insert(axis, I64(0))
            row_base = ravel(b, full, strides)
            step = strides[axis]
            first = b.gep(scratch_base, [b.mul(row, I64(2 * n))], source_etype=I32)
            second = b.gep(first, [I64(n)], source_etype=I32)

            def value_at(position: ir.Value) -> list[ir.Value]:
                offset = b.add(row_base, b.mul(position, I64(step)))
                return [kernel.load(base, shape.dtype, offset) for base, shape in zip(bases, shapes, strict=True)]

            def right_first(right: list[ir.Value], left: list[ir.Value]) -> ir.Value:
                arguments = [v for pair in zip(right, left, strict=True) for v in pair]
                (less,) = emitter.emit_computation(comparator, arguments)
                return b.icmp_unsigned("!=", less, ir.Constant(less.type, 0))

            with kernel.loop(I64(0), I64(n), 1, "init") as i:
                b.store(b.trunc(i, I32), b.gep(first, [i], source_etype=I32))
            _merge_sort(kernel, right_first, first, second, n, value_at)
            # After the passes the sorted permutation is in `first` (the passes copy back).
            with kernel.loop(I64(0), I64(n), 1, "move") as i:
                position = b.zext(b.load(b.gep(first, [i], source_etype=I32), typ=I32), I64)
                values = value_at(position)
                offset = b.add(row_base, b.mul(i, I64(step)))
                for out, shape, value in zip(out_bases, shapes, values, strict=True):
                    kernel.store(value, out, shape.dtype, offset)
    steps.append(P.KernelStep(kernel.name, rows, max(1, 4096 // n), instruction.name))
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _merge_sort(kernel: Kernel, right_first: Callable[[list[ir.Value], list[ir.Value]], ir.Value], first, second, n: int, value_at) -> None:
    """Bottom-up merge passes over the permutation in `first` (using `second` as the other
    buffer; each pass ends by copying back, so `first` always holds the current order). A
    merge takes the right head when `right_first(right values, left values)` is true."""
    b = kernel.builder
    width = 1
    while width < n:
        with kernel.loop(I64(0), I64(n), 2 * width, "run") as start:
            left_end = _min(b, b.add(start, I64(width)), I64(n))
            right_end = _min(b, b.add(start, I64(2 * width)), I64(n))
            i_slot = kernel.alloca(I64, name="left")
            j_slot = kernel.alloca(I64, name="right")
            b.store(start, i_slot)
            b.store(left_end, j_slot)
            with kernel.loop(start, right_end, 1, "out") as out:
                i, j = b.load(i_slot), b.load(j_slot)
                has_left = b.icmp_signed("<", i, left_end)
                has_right = b.icmp_signed("<", j, right_end)
                left_position = b.zext(b.load(b.gep(first, [_min(b, i, I64(n - 1))], source_etype=I32), typ=I32), I64)
                right_position = b.zext(b.load(b.gep(first, [_min(b, j, I64(n - 1))], source_etype=I32), typ=I32), I64)
                takes_right = right_first(value_at(right_position), value_at(left_position))
                take_right = b.and_(has_right, b.or_(b.not_(has_left), takes_right))
                chosen = b.select(take_right, right_position, left_position)
                b.store(b.trunc(chosen, I32), b.gep(second, [out], source_etype=I32))
                b.store(b.select(take_right, i, b.add(i, I64(1))), i_slot)
                b.store(b.select(take_right, b.add(j, I64(1)), j), j_slot)
        with kernel.loop(I64(0), I64(n), 1, "copy") as k:
            b.store(b.load(b.gep(second, [k], source_etype=I32), typ=I32), b.gep(first, [k], source_etype=I32))
        width *= 2


def _emit_topk(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """Per row of the last dimension, the contract's merge sort of positions by the order
    key, greatest first (least first with largest=false; equal keys keep their order), then
    the first k values and their positions."""
    shape = instruction.operands[0].array_shape
    dtype = shape.dtype
    n, k = shape.dims[-1], int(instruction.attrs["k"])  # type: ignore[arg-type]
    largest = bool(instruction.attrs.get("largest", True))
    values_shape, indices_shape = instruction.shape.elements  # type: ignore[union-attr]
    outputs = (lowering.new_buffer(values_shape), lowering.new_buffer(indices_shape))
    rows = shape.element_count // n if n else 0
    if rows == 0 or k == 0:
        return outputs
    (operand,) = operands
    assert isinstance(operand, int)
    scratch = lowering.scratch_buffer(rows * 2 * n * 4)
    with lowering.kernels.kernel("topk") as kernel:
        b = kernel.builder
        keys = ElementEmitter(kernel)
        base, scratch_base = kernel.buffer(operand), kernel.buffer(scratch)
        with kernel.loop(kernel.begin, kernel.end, 1, "row") as row:
            row_base = b.mul(row, I64(n))
            first = b.gep(scratch_base, [b.mul(row, I64(2 * n))], source_etype=I32)
            second = b.gep(first, [I64(n)], source_etype=I32)

            def value_at(position: ir.Value) -> list[ir.Value]:
                return [kernel.load(base, dtype, b.add(row_base, position))]

            def right_first(right: list[ir.Value], left: list[ir.Value]) -> ir.Value:
                return keys.strictly_ordered(left[0], right[0], dtype) if largest else keys.strictly_ordered(right[0], left[0], dtype)

            with kernel.loop(I64(0), I64(n), 1, "init") as i:
                b.store(b.trunc(i, I32), b.gep(first, [i], source_etype=I32))
            _merge_sort(kernel, right_first, first, second, n, value_at)
            with kernel.loop(I64(0), I64(k), 1, "take") as i:
                position = b.load(b.gep(first, [i], source_etype=I32), typ=I32)
                offset = b.add(b.mul(row, I64(k)), i)
                kernel.store(value_at(b.zext(position, I64))[0], kernel.buffer(outputs[0]), dtype, offset)
                kernel.store(position, kernel.buffer(outputs[1]), indices_shape.dtype, offset)
    steps.append(P.KernelStep(kernel.name, rows, max(1, 4096 // n), instruction.name))
    return outputs


def _min(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _index_value(kernel: Kernel, base: ir.Value, dtype: DType, offset: ir.Value) -> ir.Value:
    """An index element as i64 (unsigned values past the signed range become huge)."""
    b = kernel.builder
    raw = kernel.load(base, dtype, offset)
    if dtype.bits < 64:
        return b.zext(raw, I64) if dtype.is_unsigned else b.sext(raw, I64)
    if dtype.is_unsigned:
        return b.select(b.icmp_signed("<", raw, I64(0)), I64(2**62), raw)
    return raw


def _batch_axis(indices_dim: int, index_vector_dim: int) -> int:
    return indices_dim if indices_dim < index_vector_dim else indices_dim - 1


def _emit_gather(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    operand_shape, indices_shape = instruction.operands[0].array_shape, instruction.operands[1].array_shape
    result = instruction.array_shape
    attrs = instruction.attrs
    offset_dims: tuple[int, ...] = attrs.get("offset_dims", ())  # type: ignore[assignment]
    collapsed: tuple[int, ...] = attrs.get("collapsed_slice_dims", ())  # type: ignore[assignment]
    start_map: tuple[int, ...] = attrs["start_index_map"]  # type: ignore[assignment]
    operand_batching: tuple[int, ...] = attrs.get("operand_batching_dims", ())  # type: ignore[assignment]
    indices_batching: tuple[int, ...] = attrs.get("start_indices_batching_dims", ())  # type: ignore[assignment]
    slice_sizes: tuple[int, ...] = attrs["slice_sizes"]  # type: ignore[assignment]
    index_vector_dim: int = attrs["index_vector_dim"]  # type: ignore[assignment]
    output = lowering.new_buffer(result)
    if result.element_count == 0:
        return output
    window_operand_dims = [d for d in range(operand_shape.rank) if d not in collapsed and d not in operand_batching]
    implicit_vector = index_vector_dim == indices_shape.rank
    indices_dims = indices_shape.dims + ((1,) if implicit_vector else ())
    indices_strides = row_major_strides(indices_dims)
    operand_strides = row_major_strides(operand_shape.dims)
    with lowering.kernels.kernel("gather") as kernel:
        b = kernel.builder
        operand_base, indices_base = kernel.buffer(operands[0]), kernel.buffer(operands[1])  # type: ignore[arg-type]
        with kernel.loop(kernel.begin, kernel.end, 1, "i") as index:
            multi = unravel(b, index, result.dims)
            batch = [m for position, m in enumerate(multi) if position not in offset_dims]
            offsets = [m for position, m in enumerate(multi) if position in offset_dims]
            starts = [I64(0)] * operand_shape.rank
            for k, d in enumerate(start_map):
                coordinate = list(batch)
                coordinate.insert(index_vector_dim, I64(k))
                starts[d] = _index_value(kernel, indices_base, indices_shape.dtype, ravel(b, coordinate, indices_strides))
            for d, j in zip(operand_batching, indices_batching, strict=True):
                starts[d] = batch[_batch_axis(j, index_vector_dim)]
            source = []
            for d in range(operand_shape.rank):
                limit = I64(operand_shape.dims[d] - slice_sizes[d])
                clamped = _min(b, b.select(b.icmp_signed("<", starts[d], I64(0)), I64(0), starts[d]), limit)
                position = clamped
                if d in window_operand_dims:
                    position = b.add(clamped, offsets[window_operand_dims.index(d)])
                source.append(position)
            if operand_shape.element_count:
                value = kernel.load(operand_base, operand_shape.dtype, ravel(b, source, operand_strides))
            else:
                # The slices are empty along a collapsed dimension: nothing to read, zero.
                value = ir.Constant(storage_type(result.dtype), 0)
            kernel.store(value, kernel.buffer(output), result.dtype, index)
    steps.append(P.KernelStep(kernel.name, result.element_count, 16384, instruction.name))
    return output


def _emit_scatter(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    count = (len(operands) - 1) // 2
    operand_shapes = [op.array_shape for op in instruction.operands[:count]]
    indices_shape = instruction.operands[count].array_shape
    update_shapes = [op.array_shape for op in instruction.operands[count + 1 :]]
    attrs = instruction.attrs
    window_dims: tuple[int, ...] = attrs.get("update_window_dims", ())  # type: ignore[assignment]
    inserted: tuple[int, ...] = attrs.get("inserted_window_dims", ())  # type: ignore[assignment]
    to_operand: tuple[int, ...] = attrs["scatter_dims_to_operand_dims"]  # type: ignore[assignment]
    input_batching: tuple[int, ...] = attrs.get("input_batching_dims", ())  # type: ignore[assignment]
    indices_batching: tuple[int, ...] = attrs.get("scatter_indices_batching_dims", ())  # type: ignore[assignment]
    index_vector_dim: int = attrs["index_vector_dim"]  # type: ignore[assignment]
    outputs = [lowering.new_buffer(s) for s in operand_shapes]
    steps.append(P.CopyStep(tuple(flatten_ref(tuple(operands[:count]))), tuple(outputs)))
    update_dims = update_shapes[0].dims
    scatter_dims = [d for d in range(len(update_dims)) if d not in window_dims]
    scatter_sizes = tuple(update_dims[d] for d in scatter_dims)
    window_sizes = tuple(update_dims[d] for d in window_dims)
    operand_window_dims = [d for d in range(operand_shapes[0].rank) if d not in inserted and d not in input_batching]
    sizes = [1] * operand_shapes[0].rank
    for d, size in zip(operand_window_dims, window_sizes, strict=True):
        sizes[d] = size
    positions = 1
    for size in scatter_sizes:
        positions *= size
    windows = 1
    for size in window_sizes:
        windows *= size
    if positions * windows == 0 or operand_shapes[0].element_count == 0:
        return outputs[0] if count == 1 else tuple(outputs)
    implicit_vector = index_vector_dim == indices_shape.rank
    indices_strides = row_major_strides(indices_shape.dims + ((1,) if implicit_vector else ()))
    operand_strides = row_major_strides(operand_shapes[0].dims)
    update_strides = row_major_strides(update_dims)
    combiner = _computation(instruction)
    with lowering.kernels.kernel("scatter") as kernel:
        b = kernel.builder
        emitter = ElementEmitter(kernel)
        indices_base = kernel.buffer(operands[count])  # type: ignore[arg-type]
        update_bases = [kernel.buffer(ref) for ref in operands[count + 1 :]]  # type: ignore[arg-type]
        out_bases = [kernel.buffer(o) for o in outputs]
        with kernel.loop(I64(0), I64(positions), 1, "update") as update:
            position = unravel(b, update, scatter_sizes)
            starts = [I64(0)] * operand_shapes[0].rank
            for k, d in enumerate(to_operand):
                coordinate = list(position)
                coordinate.insert(index_vector_dim, I64(k))
                starts[d] = _index_value(kernel, indices_base, indices_shape.dtype, ravel(b, coordinate, indices_strides))
            for d, j in zip(input_batching, indices_batching, strict=True):
                starts[d] = position[_batch_axis(j, index_vector_dim)]
            fits: ir.Value = ir.Constant(I1, 1)
            for start, size, dim in zip(starts, sizes, operand_shapes[0].dims, strict=True):
                fits = b.and_(fits, b.and_(b.icmp_signed(">=", start, I64(0)), b.icmp_signed("<=", start, I64(dim - size))))
            with b.if_then(fits), kernel.loop(I64(0), I64(windows), 1, "w") as element:
                offsets = unravel(b, element, window_sizes)
                target = list(starts)
                for d, offset in zip(operand_window_dims, offsets, strict=True):
                    target[d] = b.add(target[d], offset)
                target_offset = ravel(b, target, operand_strides)
                update_index = [I64(0)] * len(update_dims)
                for d, p in zip(scatter_dims, position, strict=True):
                    update_index[d] = p
                for d, offset in zip(window_dims, offsets, strict=True):
                    update_index[d] = offset
                update_offset = ravel(b, update_index, update_strides)
                current = [kernel.load(base, s.dtype, target_offset) for base, s in zip(out_bases, operand_shapes, strict=True)]
                new = [kernel.load(base, s.dtype, update_offset) for base, s in zip(update_bases, update_shapes, strict=True)]
                for base, shape, value in zip(out_bases, operand_shapes, emitter.emit_computation(combiner, current + new), strict=True):
                    kernel.store(value, base, shape.dtype, target_offset)
    steps.append(P.KernelStep(kernel.name, 1, 1, instruction.name))
    return outputs[0] if count == 1 else tuple(outputs)


EMITTERS = family_table("sort_gather_scatter", globals(), prefix="_emit_")

