"""dot and convolution: every output element is the contract's chain of fused multiply-adds,
acc = +0; for k: acc = fma(a[k], b[k], acc), in the pinned contraction order.
Mirror of compiler/reference/dot_conv.py.

Operands are first rearranged (and converted to the accumulation type) into canonical
row-major forms: dot into lhs (B, M, K) and rhs (B, K, N); convolution into a padded,
dilated input (B, spatial..., C) and weights (spatial..., I, O). The main kernels then keep
a block of output elements in vector registers and run their chains side by side: lanes
are output columns (dot) or output features (convolution), so the vector width never
changes any element's chain.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from compiler.codegen import numerics_ir as nir
from compiler.codegen import plan as P
from compiler.codegen.elementwise import ElementEmitter, vector_width
from compiler.codegen.kernel import Kernel, ravel, row_major_strides, unravel
from compiler.codegen.llvm_ir import I32, I64, constant, storage_type, vector_of
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo import attributes as attr
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape
from compiler.numerics.dtypes import DType
from compiler.numerics.order import accumulation_type

ROW_BLOCK = 4

# Called at the end of a gemm work item: (kernel, accumulation buffer, flat begin, flat end).
Epilogue = Callable[[Kernel, int, ir.Value, ir.Value], None]


def multiply_add(kernel: Kernel, a: ir.Value, b: ir.Value, acc: ir.Value, dtype: DType) -> ir.Value:
    """One chain step in the accumulation type (integers wrap). Float steps leave NaN bits
    as they are; `chain_result` canonicalizes once when the chain is stored."""
    if dtype.is_float:
        return nir.fma(kernel.builder, a, b, acc, dtype, kernel.config, canonicalize=False)
    return kernel.builder.add(acc, kernel.builder.mul(a, b))


def chain_result(kernel: Kernel, acc: ir.Value, dtype: DType) -> ir.Value:
    """A finished chain as stored: canonical NaN for floats."""
    return nir.canonicalize_nan(kernel.builder, acc, dtype) if dtype.is_float else acc


def emit_rearrange(
    lowering: Lowering,
    instruction: Instruction,
    source: Ref,
    source_shape: ArrayShape,
    target_dims: tuple[int, ...],
    dtype: DType,
    source_index,
    steps: list[P.Step],
) -> int:
    """A buffer of `target_dims` in `dtype` whose element t is convert(source[source_index(t)])
    (or +0 where source_index says the element is padding)."""
    output = lowering.new_buffer(ArrayShape.of(dtype, target_dims))
    count = 1
    for d in target_dims:
        count *= d
    if count == 0:
        return output
    source_strides = row_major_strides(source_shape.dims)
    # A work item is a row of the last target dimension: the outer indices are unravelled
    # once per row, and the index arithmetic of the inner loop is affine in its counter.
    row = target_dims[-1] if target_dims else 1
    outer_dims = target_dims[:-1]
    with lowering.kernels.kernel("rearrange") as kernel:
        b = kernel.builder
        with kernel.loop(kernel.begin, kernel.end, 1, "row") as row_index:
            outer = unravel(b, row_index, outer_dims) if outer_dims else []
            row_start = b.mul(row_index, I64(row))
            with kernel.loop(I64(0), I64(row), 1, "j") as j:
                target = [*outer, j] if target_dims else []
                indices, inside = source_index(b, target)
                safe = [b.select(inside, i, I64(0)) for i in indices] if inside is not None else indices
                value = kernel.load(kernel.buffer(source), source_shape.dtype, ravel(b, safe, source_strides))  # type: ignore[arg-type]
                value = nir.convert(b, value, source_shape.dtype, dtype, kernel.config)
                if inside is not None:
                    value = b.select(inside, value, constant(value.type, 0))
                kernel.store(value, kernel.buffer(output), dtype, b.add(row_start, j))
    steps.append(P.KernelStep(kernel.name, count // row, max(1, 16384 // row), instruction.name))
    return output


def _finish(lowering: Lowering, instruction: Instruction, accumulated: int, acc_type: DType, steps: list[P.Step]) -> int:
    """Rounds an f32 accumulation to an f16/bf16 result once, wraps an s8/u8 one to s4/u4;
    otherwise returns it."""
    result = instruction.array_shape
    if result.dtype == acc_type:
        return accumulated
    output = lowering.new_buffer(result)
    if result.element_count:
        with lowering.kernels.kernel("round") as kernel:
            b = kernel.builder
            with kernel.loop(kernel.begin, kernel.end, 1, "i") as index:
                value = kernel.load(kernel.buffer(accumulated), acc_type, index)
                value = nir.convert(b, value, acc_type, result.dtype, kernel.config)
                kernel.store(value, kernel.buffer(output), result.dtype, index)
        steps.append(P.KernelStep(kernel.name, result.element_count, 16384, instruction.name))
    return output


def _splat(emitter: ElementEmitter, value: ir.Value, width: int) -> ir.Value:
    return emitter.splat(value, width)


def panel_width(config) -> int:
    """Columns per packed panel of the rhs: two vectors of the target."""
    return 2 * vector_width(config)


@dataclass(frozen=True)
class RhsLayout:
    """Where element [b, p, kk, w] of the rhs panels is: batch * b + panel * p + row * kk + w
    elements from the buffer's start. Packed panels are (B, ceil(N/PW), K, PW); an rhs that
    is already (B, K, N) row-major in the accumulation type with N a multiple of PW is read
    in place, as panels with row stride N (the same values, so the same chains)."""

    batch: int
    panel: int
    row: int

    @staticmethod
    def packed(k: int, n: int, panel: int) -> RhsLayout:
        return RhsLayout(-(-n // panel) * k * panel, k * panel, panel)

    @staticmethod
    def in_place(k: int, n: int, panel: int) -> RhsLayout:
        return RhsLayout(k * n, panel, n)


def emit_gemm(lowering: Lowering, instruction: Instruction, lhs: int, rhs_panels: int, batch: int, m: int, k: int, n: int, acc_type: DType, steps: list[P.Step],
              epilogue: Epilogue | None = None, rhs_layout: RhsLayout | None = None) -> int:  # fmt: skip
    """C[b, i, j] = chain over k of lhs[b, i, k] * rhs[b, k, j].

    lhs is (B, M, K) row-major; the rhs comes packed in panels (B, ceil(N/PW), K, PW) with
    zero columns past N. A work item is a block of ROW_BLOCK rows; for each panel it keeps
    ROW_BLOCK x PW chains in vector registers. C is laid out as the dot's result (batch, lhs
    free, rhs free dimensions, row-major). An `epilogue` (a kOutput fusion) runs at the end of
    each work item over the flat range of C the item has just finished, while it is in cache;
    the chains themselves do not change."""
    output = lowering.new_buffer(ArrayShape.of(acc_type, instruction.array_shape.dims))
    if batch * m * n == 0:
        return output
    width = vector_width(lowering.config)
    panel = panel_width(lowering.config)
    panels = -(-n // panel)
    row_blocks = -(-m // ROW_BLOCK)
    vector = vector_of(storage_type(acc_type), width)
    layout = rhs_layout or RhsLayout.packed(k, n, panel)
    with lowering.kernels.kernel("dot") as kernel:
        b = kernel.builder
        emitter = ElementEmitter(kernel)
        a_base, p_base, c_base = kernel.buffer(lhs), kernel.buffer(rhs_panels), kernel.buffer(output)
        slots = [[kernel.alloca(vector, name=f"acc{r}_{v}") for v in range(panel // width)] for r in range(ROW_BLOCK)]
        with kernel.loop(kernel.begin, kernel.end, 1, "item") as item:
            batch_index = b.udiv(item, I64(row_blocks))
            first_row = b.mul(b.urem(item, I64(row_blocks)), I64(ROW_BLOCK))
            rows_left = b.sub(I64(m), first_row)
            with b.if_else(b.icmp_signed(">=", rows_left, I64(ROW_BLOCK))) as (then, otherwise):
                with then:
                    _row_block(kernel, emitter, slots, a_base, p_base, c_base, batch_index, first_row, ROW_BLOCK, m, k, n, width, panel, panels, acc_type, layout)
                with otherwise, kernel.loop(I64(0), rows_left, 1, "row") as row:
                    _row_block(kernel, emitter, slots, a_base, p_base, c_base, batch_index, b.add(first_row, row), 1, m, k, n, width, panel, panels, acc_type, layout)
            if epilogue is not None:
                rows = b.select(b.icmp_signed(">=", rows_left, I64(ROW_BLOCK)), I64(ROW_BLOCK), rows_left)
                start = b.mul(b.add(b.mul(batch_index, I64(m)), first_row), I64(n))
                epilogue(kernel, output, start, b.add(start, b.mul(rows, I64(n))))
    grain = max(1, 16384 // max(k * panels * panel // 64, 1))
    steps.append(P.KernelStep(kernel.name, batch * row_blocks, grain, instruction.name))
    return output


def _row_block(kernel, emitter, slots, a_base, p_base, c_base, batch_index, first_row, rows, m, k, n, width, panel, panels, acc_type, layout: RhsLayout) -> None:
    b = kernel.builder
    vectors = panel // width
    zero = constant(slots[0][0].allocated_type, 0)
    a_rows = [b.mul(b.add(b.mul(batch_index, I64(m)), b.add(first_row, I64(r))), I64(k)) for r in range(rows)]
    c_rows = [b.mul(b.add(b.mul(batch_index, I64(m)), b.add(first_row, I64(r))), I64(n)) for r in range(rows)]
    with kernel.loop(I64(0), I64(panels), 1, "panel") as panel_index:
        for r in range(rows):
            for v in range(vectors):
                b.store(zero, slots[r][v])
        panel_base = b.add(b.mul(batch_index, I64(layout.batch)), b.mul(panel_index, I64(layout.panel)))
        with kernel.loop(I64(0), I64(k), 1, "k") as kk:
            row_base = b.add(panel_base, b.mul(kk, I64(layout.row)))
            b_vectors = [kernel.load(p_base, acc_type, b.add(row_base, I64(v * width)), width) for v in range(vectors)]
            for r in range(rows):
                a_value = emitter.splat(kernel.load(a_base, acc_type, b.add(a_rows[r], kk)), width)
                for v in range(vectors):
                    b.store(multiply_add(kernel, a_value, b_vectors[v], b.load(slots[r][v]), acc_type), slots[r][v])
        first_column = b.mul(panel_index, I64(panel))
        full = b.icmp_signed("<=", b.add(first_column, I64(panel)), I64(n))
        with b.if_else(full) as (then, otherwise):
            with then:
                for r in range(rows):
                    for v in range(vectors):
                        kernel.store(chain_result(kernel, b.load(slots[r][v]), acc_type), c_base, acc_type, b.add(c_rows[r], b.add(first_column, I64(v * width))))
            with otherwise:
                # The last panel: only the columns below n exist.
                for r in range(rows):
                    for v in range(vectors):
                        accumulated = chain_result(kernel, b.load(slots[r][v]), acc_type)
                        for lane in range(width):
                            column = b.add(first_column, I64(v * width + lane))
                            with b.if_then(b.icmp_signed("<", column, I64(n))):
                                kernel.store(b.extract_element(accumulated, I32(lane)), c_base, acc_type, b.add(c_rows[r], column))


def pack_rhs(lowering: Lowering, instruction: Instruction, source: int, shape: ArrayShape, groups: tuple[list[int], list[int], list[int]], acc_type: DType, steps: list[P.Step]) -> int:
    """The rhs as panels (B, ceil(N/PW), K, PW) in acc_type: element [b, p, kk, w] is
    rhs[b, kk, p*PW + w], where b, kk and the column run row-major over the operand's batch,
    contracting and free dimensions (`groups`); +0 past N."""
    panel = panel_width(lowering.config)
    sizes = [[shape.dims[d] for d in group] for group in groups]
    batch, k, n = (_product(group) for group in sizes)
    panels = -(-n // panel)

    def source_index(b, target):
        batch_index, panel_index, kk, lane = target
        column = b.add(b.mul(panel_index, I64(panel)), lane)
        inside = b.icmp_signed("<", column, I64(n))
        indices = [I64(0)] * shape.rank
        for flat, group, group_sizes in zip((batch_index, kk, b.select(inside, column, I64(0))), groups, sizes, strict=True):
            for dim, value in zip(group, unravel(b, flat, tuple(group_sizes)) if group else [], strict=True):
                indices[dim] = value
        return indices, inside

    return emit_rearrange(lowering, instruction, source, shape, (batch, panels, k, panel), acc_type, source_index, steps)


def _product(values) -> int:
    total = 1
    for value in values:
        total *= value
    return total


def _emit_dot(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    return emit_dot(lowering, instruction, operands, steps)


def emit_dot(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step], epilogue: Epilogue | None = None) -> Ref:
    """The dot's kernels; with an `epilogue`, its result must be in the accumulation type
    (the epilogue reads the accumulation buffer, see emit_gemm)."""
    lhs_shape, rhs_shape = instruction.operands[0].array_shape, instruction.operands[1].array_shape
    acc_type = accumulation_type(instruction.array_shape.dtype)
    lb: tuple[int, ...] = instruction.attrs.get("lhs_batch_dims", ())  # type: ignore[assignment]
    rb: tuple[int, ...] = instruction.attrs.get("rhs_batch_dims", ())  # type: ignore[assignment]
    lc: tuple[int, ...] = instruction.attrs.get("lhs_contracting_dims", ())  # type: ignore[assignment]
    rc: tuple[int, ...] = instruction.attrs.get("rhs_contracting_dims", ())  # type: ignore[assignment]
    lhs_free = [d for d in range(lhs_shape.rank) if d not in lb + lc]
    rhs_free = [d for d in range(rhs_shape.rank) if d not in rb + rc]
    batch = _product(lhs_shape.dims[d] for d in lb)
    m = _product(lhs_shape.dims[d] for d in lhs_free)
    k = _product(lhs_shape.dims[d] for d in lc)
    n = _product(rhs_shape.dims[d] for d in rhs_free)
    lhs = _canonical(lowering, instruction, operands[0], lhs_shape, list(lb) + lhs_free + list(lc), acc_type, steps)  # type: ignore[arg-type]
    if acc_type.is_complex:
        rhs = _canonical(lowering, instruction, operands[1], rhs_shape, list(rb) + list(rc) + rhs_free, acc_type, steps)  # type: ignore[arg-type]
        return _emit_complex_chains(lowering, instruction, lhs, rhs, batch, m, k, n, acc_type, steps)
    panel = panel_width(lowering.config)
    if list(rb) + list(rc) + rhs_free == list(range(rhs_shape.rank)) and rhs_shape.dtype == acc_type and n % panel == 0:
        rhs, layout = operands[1], RhsLayout.in_place(k, n, panel)  # already (B, K, N) row-major
    else:
        rhs = pack_rhs(lowering, instruction, operands[1], rhs_shape, (list(rb), list(rc), rhs_free), acc_type, steps)  # type: ignore[arg-type]
        layout = RhsLayout.packed(k, n, panel)
    accumulated = emit_gemm(lowering, instruction, lhs, rhs, batch, m, k, n, acc_type, steps, epilogue, layout)  # type: ignore[arg-type]
    assert epilogue is None or acc_type == instruction.array_shape.dtype
    return _finish(lowering, instruction, accumulated, acc_type, steps)


def _emit_complex_chains(lowering: Lowering, instruction: Instruction, lhs: int, rhs: int, batch: int, m: int, k: int, n: int,
                         dtype: DType, steps: list[P.Step]) -> int:  # fmt: skip
    """A complex dot of (B, M, K) by (B, K, N), both row-major: per output element two fma
    chains in the component type, each step re += ar*br, re += (-ai)*bi, im += ar*bi,
    im += ai*br (compiler/reference/dot_conv.py). A plain loop nest: complex dots are rare
    in the programs vxla runs, and this one is easy to hold against the reference."""
    output = lowering.new_buffer(instruction.array_shape)
    if batch * m * n == 0:
        return output
    component = dtype.component
    with lowering.kernels.kernel("complex_dot") as kernel:
        b = kernel.builder
        zero = constant(storage_type(component), 0.0)
        with kernel.loop(kernel.begin, kernel.end, 1, "row") as row:  # row = batch * M + i
            item = b.udiv(row, I64(m))
            with kernel.loop(I64(0), I64(n), 1, "j") as j:
                real, imag = kernel.alloca(storage_type(component)), kernel.alloca(storage_type(component))
                b.store(zero, real)
                b.store(zero, imag)
                with kernel.loop(I64(0), I64(k), 1, "kk") as kk:
                    a = kernel.load(kernel.buffer(lhs), dtype, b.add(b.mul(row, I64(k)), kk))
                    c = kernel.load(kernel.buffer(rhs), dtype, b.add(b.mul(b.add(b.mul(item, I64(k)), kk), I64(n)), j))
                    (ar, ai), (cr, ci) = nir.complex_parts(b, a, dtype), nir.complex_parts(b, c, dtype)
                    re = multiply_add(kernel, ar, cr, b.load(real), component)
                    re = multiply_add(kernel, b.fneg(ai), ci, re, component)
                    im = multiply_add(kernel, ar, ci, b.load(imag), component)
                    im = multiply_add(kernel, ai, cr, im, component)
                    b.store(re, real)
                    b.store(im, imag)
                value = nir.make_complex(b, b.load(real), b.load(imag), dtype)
                kernel.store(value, kernel.buffer(output), dtype, b.add(b.mul(row, I64(n)), j))
    steps.append(P.KernelStep(kernel.name, batch * m, max(1, 4096 // max(1, n * k)), instruction.name))
    return output


def _canonical(lowering: Lowering, instruction: Instruction, source: int, shape: ArrayShape, order: list[int], acc_type: DType, steps: list[P.Step]) -> int:
    """`source` with its dimensions in `order`, row-major, in acc_type (no copy if already)."""
    if order == list(range(shape.rank)) and shape.dtype == acc_type:
        return source
    target_dims = tuple(shape.dims[d] for d in order)

    def source_index(b, target):
        indices = [I64(0)] * shape.rank
        for position, dim in enumerate(order):
            indices[dim] = target[position]
        return indices, None

    return emit_rearrange(lowering, instruction, source, shape, target_dims, acc_type, source_index, steps)


def _emit_convolution(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    labels = instruction.attrs["dim_labels"]
    window = instruction.attrs.get("window", attr.Window(()))
    assert isinstance(labels, attr.ConvDimLabels) and isinstance(window, attr.Window)
    groups = int(instruction.attrs.get("feature_group_count", 1))  # type: ignore[arg-type]
    batch_groups = int(instruction.attrs.get("batch_group_count", 1))  # type: ignore[arg-type]
    lhs_shape, rhs_shape = instruction.operands[0].array_shape, instruction.operands[1].array_shape
    result = instruction.array_shape
    acc_type = accumulation_type(result.dtype)
    spatial = labels.num_spatial
    batch = lhs_shape.dims[labels.input_batch]
    channels = lhs_shape.dims[labels.input_feature]
    group_in = rhs_shape.dims[labels.kernel_input_feature]
    out_features = rhs_shape.dims[labels.kernel_output_feature]
    in_spatial = [lhs_shape.dims[d] for d in labels.input_spatial]
    kernel_spatial = [rhs_shape.dims[d] for d in labels.kernel_spatial]
    padded = [(s - 1) * w.base_dilation + 1 + w.pad_low + w.pad_high if s else w.pad_low + w.pad_high for s, w in zip(in_spatial, window.dims, strict=True)]
    out_spatial = [result.dims[d] for d in labels.output_spatial]

    # Input: (B, padded spatial..., C), zero where padding or dilation holes are.
    def input_index(b, target):
        indices = [I64(0)] * lhs_shape.rank
        indices[labels.input_batch] = target[0]
        indices[labels.input_feature] = target[-1]
        inside = ir.Constant(ir.IntType(1), 1)
        for axis, w in enumerate(window.dims):
            shifted = b.sub(target[1 + axis], I64(w.pad_low))
            position = b.sdiv(shifted, I64(w.base_dilation)) if w.base_dilation > 1 else shifted
            ok = b.and_(b.icmp_signed(">=", shifted, I64(0)), b.icmp_signed("<", position, I64(in_spatial[axis])))
            if w.base_dilation > 1:
                ok = b.and_(ok, b.icmp_signed("==", b.srem(shifted, I64(w.base_dilation)), I64(0)))
            inside = b.and_(inside, ok)
            indices[labels.input_spatial[axis]] = position
        return indices, inside

    x = emit_rearrange(lowering, instruction, operands[0], lhs_shape, (batch, *padded, channels), acc_type, input_index, steps)  # type: ignore[arg-type]

    # Weights: (spatial..., I, O), reversed along rhs_reversal dimensions.
    def weight_index(b, target):
        indices = [I64(0)] * rhs_shape.rank
        for axis, w in enumerate(window.dims):
            position = target[axis]
            if w.reversal:
                position = b.sub(I64(kernel_spatial[axis] - 1), position)
            indices[labels.kernel_spatial[axis]] = position
        indices[labels.kernel_input_feature] = target[spatial]
        indices[labels.kernel_output_feature] = target[spatial + 1]
        return indices, None

    weights = emit_rearrange(lowering, instruction, operands[1], rhs_shape, (*kernel_spatial, group_in, out_features), acc_type, weight_index, steps)  # type: ignore[arg-type]
    out_batch = batch // batch_groups
    accumulated = _conv_kernel(lowering, instruction, x, weights, out_batch, padded, channels, group_in, out_features, kernel_spatial, out_spatial, window, groups, batch_groups, acc_type, steps)
    # Back to the output's dimension order: from (B, spatial..., O).
    canonical_dims = (out_batch, *out_spatial, out_features)
    order = [labels.output_batch, *labels.output_spatial, labels.output_feature]
    if order != list(range(result.rank)):
        canonical_shape = ArrayShape.of(acc_type, canonical_dims)

        def back(b, target):
            indices = [I64(0)] * len(order)
            for position, dim in enumerate(order):
                indices[position] = target[dim]
            return indices, None

        accumulated = emit_rearrange(lowering, instruction, accumulated, canonical_shape, result.dims, acc_type, back, steps)
    return _finish(lowering, instruction, accumulated, acc_type, steps)


def _conv_kernel(lowering, instruction, x, weights, out_batch, padded, channels, group_in, out_features, kernel_spatial, out_spatial, window, groups, batch_groups, acc_type, steps) -> int:
    """acc[b, o_sp..., o] over window positions (row-major) then the group's input features."""
    count_positions = 1
    for size in out_spatial:
        count_positions *= size
    output = lowering.new_buffer(ArrayShape.of(acc_type, (out_batch, *out_spatial, out_features)))
    items = out_batch * count_positions
    if items * out_features == 0:
        return output
    width = vector_width(lowering.config)
    per_group = out_features // groups
    per_batch_group = out_features // batch_groups
    x_strides = row_major_strides((out_batch * batch_groups, *padded, channels))
    window_count = 1
    for size in kernel_spatial:
        window_count *= size
    element = storage_type(acc_type)
    shared_input = groups == 1 and batch_groups == 1
    with lowering.kernels.kernel("convolution") as kernel:
        b = kernel.builder
        emitter = ElementEmitter(kernel)
        x_base, w_base, out_base = kernel.buffer(x), kernel.buffer(weights), kernel.buffer(output)
        vector_slot = kernel.alloca(vector_of(element, width), name="acc")
        scalar_slot = kernel.alloca(element, name="acc1")
        vector_features = out_features // width * width
        with kernel.loop(kernel.begin, kernel.end, 1, "item") as item:
            coords = unravel(b, item, (out_batch, *out_spatial))
            batch_index, positions = coords[0], coords[1:]

            def x_offset(window_position, feature, lane_feature_base, lane_batch):
                spatial_indices = [b.add(b.mul(p, I64(w.stride)), b.mul(wp, I64(w.window_dilation))) for p, wp, w in zip(positions, window_position, window.dims, strict=True)]
                return ravel(b, [lane_batch, *spatial_indices, b.add(lane_feature_base, feature)], x_strides)

            def chain(first_feature: ir.Value, lane_count: int, slot) -> None:
                b.store(constant(slot.allocated_type, 0), slot)
                with kernel.loop(I64(0), I64(window_count), 1, "wpos") as flat_window:
                    window_position = unravel(b, flat_window, tuple(kernel_spatial))
                    w_row = b.mul(ravel(b, window_position, row_major_strides(tuple(kernel_spatial))), I64(group_in * out_features))
                    with kernel.loop(I64(0), I64(group_in), 1, "c") as feature:
                        w_offset = b.add(w_row, b.add(b.mul(feature, I64(out_features)), first_feature))
                        w_value = kernel.load(w_base, acc_type, w_offset, lane_count)
                        if shared_input:
                            x_value = kernel.load(x_base, acc_type, x_offset(window_position, feature, I64(0), batch_index))
                            x_value = emitter.splat(x_value, lane_count)
                        else:
                            x_value = ir.Constant(vector_of(element, lane_count), ir.Undefined) if lane_count > 1 else None
                            for lane in range(lane_count):
                                o = b.add(first_feature, I64(lane))
                                lane_batch = b.add(batch_index, b.mul(b.udiv(o, I64(per_batch_group)), I64(out_batch)))
                                feature_base = b.mul(b.udiv(o, I64(per_group)), I64(group_in))
                                loaded = kernel.load(x_base, acc_type, x_offset(window_position, feature, feature_base, lane_batch))
                                x_value = b.insert_element(x_value, loaded, I32(lane)) if lane_count > 1 else loaded
                        b.store(multiply_add(kernel, x_value, w_value, b.load(slot), acc_type), slot)
                kernel.store(chain_result(kernel, b.load(slot), acc_type), out_base, acc_type, b.add(b.mul(item, I64(out_features)), first_feature))

            if vector_features:
                with kernel.loop(I64(0), I64(vector_features), width, "ovec") as first:
                    chain(first, width, vector_slot)
            if vector_features < out_features:
                with kernel.loop(I64(vector_features), I64(out_features), 1, "o") as first:
                    chain(first, 1, scalar_slot)
    steps.append(P.KernelStep(kernel.name, items, max(1, 256 // max(window_count * group_in // 16, 1)), instruction.name))
    return output


EMITTERS = {"dot": _emit_dot, "convolution": _emit_convolution}
