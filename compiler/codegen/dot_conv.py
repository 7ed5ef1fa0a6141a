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
from functools import cache, partial

from llvmlite import ir

from compiler.codegen import numerics_ir as nir
from compiler.codegen import plan as P
from compiler.codegen.elementwise import ElementEmitter, vector_width
from compiler.codegen.kernel import Kernel, KernelModule, ravel, row_major_strides, unravel
from compiler.codegen.kernel_library import LibraryUse
from compiler.codegen.llvm_ir import (
    I32,
    I64,
    PTR,
    VOID,
    constant,
    gather,
    lanes_below,
    masked_load,
    masked_store,
    splat,
    storage_type,
    vector_of,
)
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape
from compiler.numerics.order import accumulation_type
from core.dtypes import F32, F64, DType

# Called at the end of a gemm work item: (kernel, accumulation buffer, flat begin, flat end).
# The range holds only elements the item itself has just finished (a piece of one row when
# the items split the columns), so the epilogue must compute exactly that range.
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


# Cache budgets of the blocking (bytes): a register block's slice of rhs panel stays in L1
# while every row block of a work item uses it, and the work item's lhs rows of one
# contraction block stay in L2 while every panel uses them. Every target vxla pins has at
# least 32 KiB of L1 data cache and 512 KiB of L2 per core.
L1_PANEL_BYTES = 16 * 1024
L2_BLOCK_BYTES = 128 * 1024
# Work items a gemm aims for per batch element, so that threads get balanced shares, and the
# fewest multiply-adds (per lane of output) an item is cut down to for that: a smaller item
# costs more in its setup (a call into the gemm library, its blocks' addresses) than its
# share buys (a GRU step's gemm, 8 x 128 x 384, was 12 items of a few hundred cycles each).
ITEMS_PER_BATCH = 16
MIN_ITEM_WORK = 1 << 16


def register_block(config) -> tuple[int, int]:
    """(rows, vectors): the gemm keeps rows x vectors accumulator registers, plus `vectors`
    registers of rhs and one broadcast lhs element: 6x2 in the 16 registers of SSE/AVX2, 6x4
    in the 32 of AVX-512 and AArch64. The lhs is read where it is, each row of a block a
    stream at a stride of K elements: six streams, not twelve (a 12x2 block ran sgemm 1024^3
    at 70 GFLOP/s on one Zen 4 core against 6x4's 91-102, the rows' lines contending for the
    same L1 sets)."""
    return (6, 4) if config.vector_registers >= 32 else (6, 2)


def lanes_of(config, dtype: DType) -> int:
    """Elements of `dtype` in one vector register of the target."""
    return max(1, config.vector_bits // dtype.storage_bits)


def panel_width(config, acc_type: DType) -> int:
    """Columns per packed panel of the rhs: one register block's width."""
    return register_block(config)[1] * lanes_of(config, acc_type)


def reads_rhs_in_place(config, acc_type: DType, m: int, n: int) -> bool:
    """Whether a gemm reads an rhs that is (B, K, N) row-major in acc_type where it is, as
    panels with row stride N: when N is a multiple of the panel width and the lhs has so few
    rows that packing would cost about as much as the products. (With more rows, the packed
    copy pays: a panel's rows at stride N can all fall in one cache set.)"""
    return n % panel_width(config, acc_type) == 0 and m <= 2 * register_block(config)[0]


@dataclass(frozen=True)
class GemmBlocking:
    """The loop structure of one gemm (BLIS's, without packing the lhs): a work item is
    `item_rows` rows of one batch element against `item_panels` rhs panels; it runs the
    contraction in blocks of `depth`, and in each block every one of its panels against
    every `rows`-row block of its rows. Each output element's accumulator is stored after a
    contraction block and reloaded for the next, so it is still the contract's one fma
    chain in increasing k, whatever the blocking.

    Rows per item are as many as keep the item's lhs block in L2 (every panel reuses it);
    the items split the columns before the rows, since each row item reads the whole rhs
    once: a 128-row activation against a 3072x768 weight is then 2 or 3 passes over the
    weight instead of 11. A gemm is cut into ITEMS_PER_BATCH items per batch element for
    the threads' shares, but never into items of fewer than MIN_ITEM_WORK multiply-adds."""

    rows: int
    vectors: int
    lanes: int
    depth: int
    item_rows: int
    row_items: int
    item_panels: int
    column_items: int

    @property
    def panel(self) -> int:
        return self.vectors * self.lanes

    @property
    def items_per_batch(self) -> int:
        return self.row_items * self.column_items

    @staticmethod
    def of(config, acc_type: DType, batch: int, m: int, k: int, n: int) -> GemmBlocking:
        rows, vectors = register_block(config)
        lanes = lanes_of(config, acc_type)
        element_bytes = max(1, acc_type.storage_bits // 8)
        depth = max(8, L1_PANEL_BYTES // (vectors * lanes * element_bytes))
        depth = min(depth, max(k, 1))
        panels = max(1, -(-n // (vectors * lanes)))
        row_blocks = max(1, -(-m // rows))
        if config.architecture.gemm == "per-thread":
            # A GPU runs a work item per thread: every register block is an item, so a gemm
            # has as many threads as blocks of rows x panel outputs (each output still one
            # chain in k order).
            return GemmBlocking(rows, vectors, lanes, depth, rows, row_blocks if m else 0, 1, panels)
        blocks_in_l2 = max(1, L2_BLOCK_BYTES // (depth * element_bytes) // rows)
        row_items = -(-row_blocks // blocks_in_l2)
        wanted = max(1, min(-(-ITEMS_PER_BATCH // max(batch, 1)), m * k * n // MIN_ITEM_WORK))
        column_items = min(panels, -(-wanted // row_items))
        row_items = min(row_blocks, max(row_items, -(-wanted // column_items)))
        blocks = -(-row_blocks // row_items)
        item_panels = -(-panels // column_items)
        return GemmBlocking(rows, vectors, lanes, depth, blocks * rows, -(-m // (blocks * rows)) if m else 0,
                            item_panels, -(-panels // item_panels))


@dataclass(frozen=True)
class RhsLayout:
    """Where element [b, p, kk, w] of the rhs panels is: batch * b + panel * p + row * kk + w
    elements from the buffer's start. Packed panels are (B, ceil(N/PW), K, PW); an rhs that
    is already (B, K, N) row-major in the accumulation type with N a multiple of PW is read
    in place, as panels with row stride N (the same values, so the same chains). In the gemm
    library the strides are the function's arguments."""

    batch: int | ir.Value
    panel: int | ir.Value
    row: int | ir.Value

    @staticmethod
    def packed(k: int, n: int, panel: int) -> RhsLayout:
        return RhsLayout(-(-n // panel) * k * panel, k * panel, panel)

    @staticmethod
    def in_place(k: int, n: int, panel: int) -> RhsLayout:
        return RhsLayout(k * n, panel, n)


def emit_gemm(lowering: Lowering, instruction: Instruction, lhs: int, rhs_panels: int, batch: int, m: int, k: int, n: int, acc_type: DType, steps: list[P.Step],
              epilogue: Epilogue | None = None, rhs_layout: RhsLayout | None = None, result_dims: tuple[int, ...] | None = None) -> int:  # fmt: skip
    """C[b, i, j] = chain over k of lhs[b, i, k] * rhs[b, k, j].

    lhs is (B, M, K) row-major; the rhs comes packed in panels (B, ceil(N/PW), K, PW) with
    zero columns past N (or read in place, see RhsLayout). The loops are GemmBlocking's; a
    register block keeps rows x PW chains in vector registers. C is laid out as the dot's
    result (batch, lhs free, rhs free dimensions, row-major), or as `result_dims` say (the same
    elements in the same order). On a CPU target the kernel runs each work item through the
    gemm library (`gemm_library`: one function for every shape, compiled once per target);
    on a GPU, where a work item is one register block, the kernel holds the loops itself. An
    `epilogue` (a kOutput fusion) runs at the end of each work item over the elements of C the
    item has just finished, while they are in cache: its whole rows, or with several column
    items each row's columns of the item, one flat range per row. It never sees an element of
    another item, which another worker may be accumulating at that moment. The chains do not
    change."""
    output = lowering.new_buffer(ArrayShape.of(acc_type, result_dims or instruction.array_shape.dims))
    if batch * m * n == 0:
        return output
    config = lowering.config
    blocking = GemmBlocking.of(config, acc_type, batch, m, k, n)
    panel = blocking.panel
    layout = rhs_layout or RhsLayout.packed(k, n, panel)
    with lowering.kernels.kernel("dot") as kernel:
        b = kernel.builder
        if config.architecture.gemm == "library":
            bases = (kernel.buffer(lhs), kernel.buffer(rhs_panels), kernel.buffer(output))
            gemm = lowering.kernels.use_library(gemm_library(config, acc_type), gemm_symbol(acc_type), GEMM_TYPE)
        else:
            emitter = ElementEmitter(kernel)
            bases = (kernel.buffer(lhs), kernel.buffer(rhs_panels), kernel.buffer(output))
            slots = [[kernel.alloca(vector_of(storage_type(acc_type), blocking.lanes), name=f"acc{r}_{v}") for v in range(blocking.vectors)] for r in range(blocking.rows)]
        with kernel.loop(kernel.begin, kernel.end, 1, "item") as item:
            span = _ItemSpan.of(b, item, blocking, m, n)
            if config.architecture.gemm == "library":
                dims = (m, k, n, blocking.depth, layout.batch, layout.panel, layout.row)
                b.call(gemm, [*bases, span.batch_index, span.first_row, span.rows_here, span.first_panel, span.panels_stop, *(I64(d) for d in dims)])
            else:
                _inline_item(kernel, emitter, slots, bases, span, blocking, m, k, n, acc_type, layout)
            if epilogue is not None:
                row_start = b.add(b.mul(span.batch_index, I64(m)), span.first_row)
                if blocking.column_items == 1:
                    start = b.mul(row_start, I64(n))
                    epilogue(kernel, output, start, b.add(start, b.mul(span.rows_here, I64(n))))
                else:
                    # The item's columns of each of its rows: the elements it has just finished.
                    first_column = b.mul(span.first_panel, I64(panel))
                    stop_column = b.mul(span.panels_stop, I64(panel))
                    stop_column = b.select(b.icmp_signed("<", stop_column, I64(n)), stop_column, I64(n))
                    with kernel.loop(row_start, b.add(row_start, span.rows_here), 1, "epirow") as row:
                        start = b.mul(row, I64(n))
                        epilogue(kernel, output, b.add(start, first_column), b.add(start, stop_column))
    work = blocking.item_rows * max(k, 1) * blocking.item_panels * panel
    steps.append(P.KernelStep(kernel.name, batch * blocking.items_per_batch, max(1, (1 << 20) // work), instruction.name))
    return output


@dataclass(frozen=True)
class _ItemSpan:
    """What work item `item` of a gemm covers: batch element, rows [first_row, first_row +
    rows_here), panels [first_panel, panels_stop) (past the last panel in the last column
    item); and what the inline loops derive from it."""

    batch_index: ir.Value
    first_row: ir.Value
    rows_here: ir.Value
    full_blocks: ir.Value
    last_item: ir.Value
    first_panel: ir.Value
    panels_stop: ir.Value
    full_stop: ir.Value
    last_column_item: ir.Value

    @staticmethod
    def of(b: ir.IRBuilder, item: ir.Value, blocking: GemmBlocking, m: int, n: int) -> _ItemSpan:
        full_panels = n // blocking.panel
        batch_index = b.udiv(item, I64(blocking.items_per_batch))
        in_batch = b.urem(item, I64(blocking.items_per_batch))
        column_item = b.urem(in_batch, I64(blocking.column_items))
        first_row = b.mul(b.udiv(in_batch, I64(blocking.column_items)), I64(blocking.item_rows))
        rows_left = b.sub(I64(m), first_row)
        rows_here = b.select(b.icmp_signed("<", rows_left, I64(blocking.item_rows)), rows_left, I64(blocking.item_rows))
        full_blocks = b.udiv(rows_here, I64(blocking.rows))
        last_item = b.icmp_signed("==", b.add(first_row, rows_here), I64(m))
        first_panel = b.mul(column_item, I64(blocking.item_panels))
        panels_stop = b.add(first_panel, I64(blocking.item_panels))
        full_stop = b.select(b.icmp_signed("<", panels_stop, I64(full_panels)), panels_stop, I64(full_panels))
        last_column_item = b.icmp_signed("==", column_item, I64(blocking.column_items - 1))
        return _ItemSpan(batch_index, first_row, rows_here, full_blocks, last_item, first_panel, panels_stop, full_stop, last_column_item)


def _inline_item(kernel: Kernel, emitter: ElementEmitter, slots, bases, span: _ItemSpan, blocking: GemmBlocking, m: int, k: int, n: int, acc_type: DType,
                 layout: RhsLayout) -> None:  # fmt: skip
    """One work item's loops with the shape in constants (a GPU target's gemm)."""
    b = kernel.builder
    full_panels, last_columns = divmod(n, blocking.panel)
    k_blocks = max(1, -(-k // blocking.depth))
    tail_rows = m % blocking.rows
    with kernel.loop(I64(0), I64(k_blocks), 1, "kblock") as k_block:
        k_first = b.mul(k_block, I64(blocking.depth))
        k_stop = b.add(k_first, I64(blocking.depth))
        k_stop = b.select(b.icmp_signed("<", k_stop, I64(k)), k_stop, I64(k))
        block = _ContractionBlock(span.batch_index, k_first, k_stop, b.icmp_signed("==", k_block, I64(0)), b.icmp_signed("==", k_block, I64(k_blocks - 1)))

        def panel_pass(panel_index: ir.Value, columns: int) -> None:
            with kernel.loop(I64(0), span.full_blocks, 1, "rowblock") as row_block:
                row = b.add(span.first_row, b.mul(row_block, I64(blocking.rows)))
                _register_block(kernel, emitter, slots, bases, block, row, blocking.rows, panel_index, columns, blocking, m, k, n, acc_type, layout)
            if tail_rows:
                with b.if_then(span.last_item):
                    row = b.add(span.first_row, b.mul(span.full_blocks, I64(blocking.rows)))
                    _register_block(kernel, emitter, slots, bases, block, row, tail_rows, panel_index, columns, blocking, m, k, n, acc_type, layout)

        if full_panels:
            with kernel.loop(span.first_panel, span.full_stop, 1, "panel") as panel_index:
                panel_pass(panel_index, blocking.panel)
        if last_columns:
            with b.if_then(span.last_column_item):
                panel_pass(I64(full_panels), last_columns)


# The gemm library's function: one work item of any shape. Arguments: the lhs, the rhs panels
# and C; the item's batch element, first row, rows, first panel and panels stop (_ItemSpan);
# then M, K, N, the contraction block's depth and the rhs layout's three strides (RhsLayout).
GEMM_TYPE = ir.FunctionType(VOID, [PTR] * 3 + [I64] * 12)


# The accumulation types whose gemm libraries `compiler.driver.prepare_libraries` makes ahead.
COMMON_GEMM_TYPES = (F32, F64)


def gemm_symbol(acc_type: DType) -> str:
    return f"vxla.gemm.{acc_type.name}"


def gemm_library(config, acc_type: DType) -> LibraryUse:
    """The gemm library of `acc_type` for `config`'s target (`gemm_library_ir`)."""
    return LibraryUse(f"gemm.{acc_type.name}", partial(gemm_library_ir, config, acc_type))


@cache
def gemm_library_ir(config, acc_type: DType) -> str:
    """The gemm library's module: GEMM_TYPE's function, the work item of any shape in the
    same loops as the inline gemm (so the same chains). The shape is read from the arguments;
    the row tail (1 to rows - 1 rows) and the last panel's columns (masked loads and stores)
    are decided when it runs."""
    kernels = KernelModule(config)
    rows = register_block(config)[0]
    with kernels.library_function(gemm_symbol(acc_type), GEMM_TYPE) as kernel:
        b = kernel.builder
        lhs, panels, result, batch_index, first_row, rows_here, first_panel, panels_stop, m, k, n, depth, *strides = kernel.function.args
        blocking = GemmBlocking.of(config, acc_type, 1, 1, 1, 1)  # rows, vectors and lanes: the target's
        emitter = ElementEmitter(kernel)
        bases = (lhs, panels, result)
        slots = [[kernel.alloca(vector_of(storage_type(acc_type), blocking.lanes), name=f"acc{r}_{v}") for v in range(blocking.vectors)] for r in range(rows)]
        layout = RhsLayout(*strides)
        panel = I64(blocking.panel)
        full_panels, last_columns = b.udiv(n, panel), b.urem(n, panel)
        k_blocks = b.udiv(b.add(k, b.sub(depth, I64(1))), depth)
        k_blocks = b.select(b.icmp_signed("==", k_blocks, I64(0)), I64(1), k_blocks)
        full_blocks, tail_rows = b.udiv(rows_here, I64(rows)), b.urem(rows_here, I64(rows))
        full_stop = b.select(b.icmp_signed("<", panels_stop, full_panels), panels_stop, full_panels)
        used_vectors = b.udiv(b.add(last_columns, I64(blocking.lanes - 1)), I64(blocking.lanes))
        partial_panel = b.and_(b.icmp_signed(">", panels_stop, full_panels), b.icmp_signed("!=", last_columns, I64(0)))
        with kernel.loop(I64(0), k_blocks, 1, "kblock") as k_block:
            k_first = b.mul(k_block, depth)
            k_stop = b.add(k_first, depth)
            k_stop = b.select(b.icmp_signed("<", k_stop, k), k_stop, k)
            block = _ContractionBlock(batch_index, k_first, k_stop, b.icmp_signed("==", k_block, I64(0)), b.icmp_signed("==", k_block, b.sub(k_blocks, I64(1))))

            def panel_pass(panel_index: ir.Value, columns: int | ir.Value, vectors: int, block: _ContractionBlock = block) -> None:
                with kernel.loop(I64(0), full_blocks, 1, "rowblock") as row_block:
                    row = b.add(first_row, b.mul(row_block, I64(rows)))
                    _register_block(kernel, emitter, slots, bases, block, row, rows, panel_index, columns, blocking, m, k, n, acc_type, layout, vectors)
                row = b.add(first_row, b.mul(full_blocks, I64(rows)))
                for tail in range(1, rows):
                    with b.if_then(b.icmp_signed("==", tail_rows, I64(tail))):
                        _register_block(kernel, emitter, slots, bases, block, row, tail, panel_index, columns, blocking, m, k, n, acc_type, layout, vectors)

            with kernel.loop(first_panel, full_stop, 1, "panel") as panel_index:
                panel_pass(panel_index, blocking.panel, blocking.vectors)
            # The last panel's columns run in as many vectors as they fill (a narrow dot's
            # only panel), the last one masked.
            with b.if_then(partial_panel):
                for vectors in range(1, blocking.vectors + 1):
                    with b.if_then(b.icmp_signed("==", used_vectors, I64(vectors))):
                        panel_pass(full_panels, last_columns, vectors)
    return kernels.ir_text()


@dataclass(frozen=True)
class _ContractionBlock:
    """The contraction range [k_first, k_stop) of the block being run (of batch element
    `batch_index`), and whether it is the first (chains start at +0) or the last (chains
    are finished when stored)."""

    batch_index: ir.Value
    k_first: ir.Value
    k_stop: ir.Value
    first: ir.Value
    last: ir.Value


def _i64(value: int | ir.Value) -> ir.Value:
    """A dimension of the inline gemm (a constant) or of the library's (an argument)."""
    return value if isinstance(value, ir.Value) else I64(value)


def _register_block(kernel, emitter, slots, bases, block: _ContractionBlock, first_row: ir.Value, rows: int, panel_index: ir.Value, columns: int | ir.Value,
                    blocking: GemmBlocking, m, k, n, acc_type: DType, layout: RhsLayout, masked_vectors: int = 0) -> None:  # fmt: skip
    """rows x columns chains (columns up to the panel's width; the panel's other lanes are
    computed and never stored) through one contraction block: loaded from C (+0 in the first
    block), advanced over the block's k, stored back (finished in the last block). `columns`
    known only when it runs (the library's last panel, in `masked_vectors` vectors) loads and
    stores C through masks."""
    b = kernel.builder
    a_base, p_base, c_base = bases
    lanes = blocking.lanes
    masked = isinstance(columns, ir.Value)
    vectors = masked_vectors if masked else -(-columns // lanes)
    zero = constant(slots[0][0].allocated_type, 0)
    first_column = b.mul(panel_index, I64(blocking.panel))
    row_index = [b.add(b.mul(block.batch_index, _i64(m)), b.add(first_row, I64(r))) for r in range(rows)]
    a_rows = [b.mul(index, _i64(k)) for index in row_index]
    c_rows = [b.mul(index, _i64(n)) for index in row_index]
    masks = [lanes_below(b, b.sub(columns, I64(v * lanes)), lanes) for v in range(vectors)] if masked else []

    def c_offset(r: int, v: int) -> ir.Value:
        return b.add(c_rows[r], b.add(first_column, I64(v * lanes)))

    def c_pointer(r: int, v: int) -> ir.Value:
        return kernel.element_pointer(c_base, storage_type(acc_type), c_offset(r, v))

    with b.if_else(block.first) as (then, otherwise):
        with then:
            for r in range(rows):
                for v in range(vectors):
                    b.store(zero, slots[r][v])
        with otherwise:
            for r in range(rows):
                for v in range(vectors):
                    if masked:
                        b.store(masked_load(b, c_pointer(r, v), zero.type, masks[v]), slots[r][v])
                        continue
                    valid = min(lanes, columns - v * lanes)
                    if valid == lanes:
                        b.store(kernel.load(c_base, acc_type, c_offset(r, v), lanes), slots[r][v])
                        continue
                    partial = zero
                    for lane in range(valid):
                        partial = b.insert_element(partial, kernel.load(c_base, acc_type, b.add(c_offset(r, v), I64(lane))), I32(lane))
                    b.store(partial, slots[r][v])
    panel_base = b.add(b.mul(block.batch_index, _i64(layout.batch)), b.mul(panel_index, _i64(layout.panel)))
    with kernel.loop(block.k_first, block.k_stop, 1, "k") as kk:
        row_base = b.add(panel_base, b.mul(kk, _i64(layout.row)))
        b_vectors = [kernel.load(p_base, acc_type, b.add(row_base, I64(v * lanes)), lanes) for v in range(vectors)]
        for r in range(rows):
            a_value = emitter.splat(kernel.load(a_base, acc_type, b.add(a_rows[r], kk)), lanes)
            for v in range(vectors):
                b.store(multiply_add(kernel, a_value, b_vectors[v], b.load(slots[r][v]), acc_type), slots[r][v])
    for r in range(rows):
        for v in range(vectors):
            accumulated = b.load(slots[r][v])
            accumulated = b.select(block.last, chain_result(kernel, accumulated, acc_type), accumulated)
            if masked:
                masked_store(b, accumulated, c_pointer(r, v), masks[v])
                continue
            valid = min(lanes, columns - v * lanes)
            if valid == lanes:
                kernel.store(accumulated, c_base, acc_type, c_offset(r, v))
                continue
            for lane in range(valid):
                kernel.store(b.extract_element(accumulated, I32(lane)), c_base, acc_type, b.add(c_offset(r, v), I64(lane)))


def pack_rhs(lowering: Lowering, instruction: Instruction, source: int, shape: ArrayShape, groups: tuple[list[int], list[int], list[int]], acc_type: DType, steps: list[P.Step]) -> int:
    """The rhs as panels (B, ceil(N/PW), K, PW) in acc_type: element [b, p, kk, w] is
    rhs[b, kk, p*PW + w], where b, kk and the column run row-major over the operand's batch,
    contracting and free dimensions (`groups`); +0 past N."""
    panel = panel_width(lowering.config, acc_type)
    sizes = [[shape.dims[d] for d in group] for group in groups]
    batch, k, n = (_product(group) for group in sizes)
    panels = -(-n // panel)
    # Packing reads only the rhs: with weights a loop keeps unchanged, it runs once, before it.
    steps = lowering.hoisted([source], steps)
    if [d for group in groups for d in group] == list(range(shape.rank)):
        return _pack_row_major(lowering, instruction, source, shape.dtype, batch, k, n, acc_type, panel, steps)
    if [d for group in (groups[0], groups[2], groups[1]) for d in group] == list(range(shape.rank)):
        return _pack_columns(lowering, instruction, source, shape.dtype, batch, k, n, acc_type, panel, steps)

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


def _pack_row_major(lowering: Lowering, instruction: Instruction, source: int, dtype: DType, batch: int, k: int, n: int, acc_type: DType, panel: int,
                    steps: list[P.Step]) -> int:  # fmt: skip
    """pack_rhs of an rhs that is (B, K, N) row-major already: a work item is one source row
    (b, kk), copied a panel's width at a time (converted to acc_type) to its place in each
    panel."""
    panels = -(-n // panel)
    output = lowering.new_buffer(ArrayShape.of(acc_type, (batch, panels, k, panel)))
    if batch * k * n == 0:
        return output
    full_panels, last_columns = divmod(n, panel)
    with lowering.kernels.kernel("pack") as kernel:
        b = kernel.builder
        source_base, target_base = kernel.buffer(source), kernel.buffer(output)
        with kernel.loop(kernel.begin, kernel.end, 1, "row") as row:
            batch_index, kk = b.udiv(row, I64(k)), b.urem(row, I64(k))
            source_row = b.mul(row, I64(n))
            target_row = b.add(b.mul(batch_index, I64(panels * k * panel)), b.mul(kk, I64(panel)))
            if full_panels:
                with kernel.loop(I64(0), I64(full_panels), 1, "panel") as panel_index:
                    value = kernel.load(source_base, dtype, b.add(source_row, b.mul(panel_index, I64(panel))), panel)
                    value = nir.convert(b, value, dtype, acc_type, kernel.config)
                    kernel.store(value, target_base, acc_type, b.add(target_row, b.mul(panel_index, I64(k * panel))))
            if last_columns:
                target = b.add(target_row, I64(full_panels * k * panel))
                for lane in range(panel):
                    if lane < last_columns:
                        value = kernel.load(source_base, dtype, b.add(source_row, I64(full_panels * panel + lane)))
                        value = nir.convert(b, value, dtype, acc_type, kernel.config)
                    else:
                        value = constant(storage_type(acc_type), 0)
                    kernel.store(value, target_base, acc_type, b.add(target, I64(lane)))
    steps.append(P.KernelStep(kernel.name, batch * k, max(1, 16384 // max(n, 1)), instruction.name))
    return output


def _pack_columns(lowering: Lowering, instruction: Instruction, source: int, dtype: DType, batch: int, k: int, n: int, acc_type: DType, panel: int,
                  steps: list[P.Step]) -> int:  # fmt: skip
    """pack_rhs of an rhs that is (B, N, K) row-major (a weight stored as out x in, or a
    transposed activation): a work item is one panel, whose PW source rows are read
    side by side, one contracting index at a time (sequential in each row), and written as
    the panel's rows, one vector each (+0 past N)."""
    panels = -(-n // panel)
    output = lowering.new_buffer(ArrayShape.of(acc_type, (batch, panels, k, panel)))
    if batch * k * n == 0:
        return output
    with lowering.kernels.kernel("pack_columns") as kernel:
        source_base, target_base = kernel.buffer(source), kernel.buffer(output)
        _pack_columns_gathered(kernel, source_base, target_base, dtype, k, n, acc_type, panel, panels)
    steps.append(P.KernelStep(kernel.name, batch * panels, max(1, 16384 // max(k * panel, 1)), instruction.name))
    return output


def _pack_columns_gathered(kernel: Kernel, source_base, target_base, dtype: DType, k: int, n: int, acc_type: DType, panel: int, panels: int) -> None:
    """A panel row as one llvm.masked.gather of the PW source rows' elements at kk (every
    storage type is whole bytes; complex dots never pack). Read lane by lane it was PW loads
    and inserts: a third of the equinox MLP's IR, and 13% of its cold compile. Lanes past N
    read column 0 and are zeroed."""
    b = kernel.builder
    offsets_type = vector_of(I64, panel)
    with kernel.loop(kernel.begin, kernel.end, 1, "panel") as item:
        batch_index, panel_index = b.udiv(item, I64(panels)), b.urem(item, I64(panels))
        columns = b.add(splat(b, b.mul(panel_index, I64(panel)), panel), ir.Constant(offsets_type, list(range(panel))))
        inside = b.icmp_signed("<", columns, ir.Constant(offsets_type, [n] * panel))
        clamped = b.select(inside, columns, ir.Constant(offsets_type, [0] * panel))
        rows = b.mul(b.add(splat(b, b.mul(batch_index, I64(n)), panel), clamped), ir.Constant(offsets_type, [k] * panel))
        target_panel = b.mul(item, I64(k * panel))
        with kernel.loop(I64(0), I64(k), 1, "kk") as kk:
            values = gather(b, source_base, b.add(rows, splat(b, kk, panel)), storage_type(dtype))
            values = nir.convert(b, values, dtype, acc_type, kernel.config)
            row = b.select(inside, values, ir.Constant(values.type, [0] * panel))
            kernel.store(row, target_base, acc_type, b.add(target_panel, b.mul(kk, I64(panel))))


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
        # The complex loop nest has no gemm work items to end with an epilogue
        # (fusibility.dot_takes_epilogue keeps complex dots out of kOutput kernels).
        assert epilogue is None, f"%{instruction.name}: an epilogue on a complex dot"
        rhs = _canonical(lowering, instruction, operands[1], rhs_shape, list(rb) + list(rc) + rhs_free, acc_type, steps)  # type: ignore[arg-type]
        return _emit_complex_chains(lowering, instruction, lhs, rhs, batch, m, k, n, acc_type, steps)
    panel = panel_width(lowering.config, acc_type)
    if list(rb) + list(rc) + rhs_free == list(range(rhs_shape.rank)) and rhs_shape.dtype == acc_type and reads_rhs_in_place(lowering.config, acc_type, m, n):
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
    if groups == 1 and batch_groups == 1:
        accumulated = _conv_as_gemm(lowering, instruction, x, weights, batch, padded, channels, out_features, kernel_spatial, out_spatial, window, acc_type, steps)
    else:
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


def _conv_as_gemm(lowering, instruction, x, weights, batch, padded, channels, out_features, kernel_spatial, out_spatial, window, acc_type, steps) -> int:
    """A convolution without feature or batch groups as a gemm (im2col): row (b, position) of
    the lhs is the window's patch of the padded input, window positions row-major then input
    features, and the weights (spatial..., I, O) are already that (K, O) matrix, row-major.
    Each output element's chain runs over k = window position * I + input feature in
    increasing k: the contract's order, through the blocked gemm."""
    spatial = len(out_spatial)
    positions = _product(out_spatial)
    k = _product(kernel_spatial) * channels
    x_shape = ArrayShape.of(acc_type, (batch, *padded, channels))

    def patch_index(b, target):
        batch_index, position, window_position, feature = target[0], target[1 : 1 + spatial], target[1 + spatial : 1 + 2 * spatial], target[-1]
        indices = [b.add(b.mul(p, I64(w.stride)), b.mul(wp, I64(w.window_dilation))) for p, wp, w in zip(position, window_position, window.dims, strict=True)]
        return [batch_index, *indices, feature], None

    patches = emit_rearrange(lowering, instruction, x, x_shape, (batch, *out_spatial, *kernel_spatial, channels), acc_type, patch_index, steps)
    m, n = batch * positions, out_features
    if reads_rhs_in_place(lowering.config, acc_type, m, n):
        rhs, layout = weights, RhsLayout.in_place(k, n, panel_width(lowering.config, acc_type))
    else:
        rhs = _pack_row_major(lowering, instruction, weights, acc_type, 1, k, n, acc_type, panel_width(lowering.config, acc_type), steps)
        layout = RhsLayout.packed(k, n, panel_width(lowering.config, acc_type))
    return emit_gemm(lowering, instruction, patches, rhs, 1, m, k, n, acc_type, steps, rhs_layout=layout, result_dims=(batch, *out_spatial, out_features))


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


EMITTERS = family_table("dot_conv", globals(), prefix="_emit_")
