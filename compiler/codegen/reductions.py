"""Reductions: `reduce` in the contract's pinned order (blocks of 4096, 16 lanes folded as
one vector, pairwise trees), and the windowed ops `reduce-window` and `select-and-scatter`. Mirror of compiler/reference/reductions.py.

The reducer computation is inlined on lane values of whatever width a step needs: a 16-lane
vector for the lane folds, 8, 4, 2 and 1 lanes down the tree, scalars for the block tree.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

from llvmlite import ir

from compiler.codegen import plan as P
from compiler.codegen.elementwise import ElementEmitter
from compiler.codegen.kernel import Kernel, ravel, row_major_strides, unravel
from compiler.codegen.llvm_ir import I32, I64, storage_type, vector_of
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo import attributes as attr
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.opcodes import is_order_free as opcode_is_order_free
from compiler.hlo.shape import ArrayShape, TupleShape
from compiler.numerics.order import REDUCE_BLOCK, REDUCE_LANES
from compiler.passes.backend_decisions import running_window
from core.dtypes import F32, F64, S64

# Independent accumulators per lane for order-free reducers (see Reducer.order_free).
UNROLL = 4
# Accumulator pairs (greatest and least key) per lane for float maximum/minimum.
EXTREMUM_UNROLL = 2

Values = list[ir.Value]


class Reducer:
    """The reducer computation applied to lists of lane values (one per reduced input)."""

    def __init__(self, kernel: Kernel, computation: Computation) -> None:
        self.emitter = ElementEmitter(kernel)
        self.computation = computation
        self.order_free = is_order_free(computation)

    def __call__(self, acc: Values, item: Values) -> Values:
        return self.emitter.emit_computation(self.computation, acc + item)


def is_order_free(computation: Computation) -> bool:
    """Whether the reducer is one associative and commutative op on its two scalar
    parameters, exactly (then more accumulators than the contract's 16 lanes give the same
    bits, and the lane loop need not wait for each step's result)."""
    parameters = computation.parameters
    root = computation.root
    if len(parameters) != 2 or len(computation.post_order()) != 3 or not isinstance(root.shape, ArrayShape):
        return False
    if root.shape.rank != 0 or {id(op) for op in root.operands} != {id(p) for p in parameters}:
        return False
    # The registry's laws (compiler/hlo/opcodes.py): maximum and minimum on every type (the
    # greatest or least element with -0 < +0, or the canonical NaN if any is NaN); wrapping
    # integer add and multiply and the bitwise ops on integers and pred.
    return opcode_is_order_free(root.opcode, root.shape.dtype)


def _shuffle(builder: ir.IRBuilder, vector: ir.Value, indices: list[int]) -> ir.Value:
    mask = ir.Constant(ir.VectorType(I32, len(indices)), indices)
    return builder.shuffle_vector(vector, ir.Constant(vector.type, ir.Undefined), mask)


def vector_tree(builder: ir.IRBuilder, reduce: Reducer, vectors: Values) -> Values:
    """The pairwise tree over the 16 lanes of each vector: (0,1),(2,3),... then pairs of
    those; returns scalars."""
    width = REDUCE_LANES
    while width > 1:
        half = width // 2
        evens = [_shuffle(builder, v, list(range(0, width, 2))) if half > 1 else builder.extract_element(v, I32(0)) for v in vectors]
        odds = [_shuffle(builder, v, list(range(1, width, 2))) if half > 1 else builder.extract_element(v, I32(1)) for v in vectors]
        vectors = reduce(evens, odds)
        width = half
    return vectors


def scalar_tree(reduce: Reducer, items: list[Values]) -> Values:
    """The pairwise tree over a statically known list of values."""
    while len(items) > 1:
        paired = [reduce(items[i], items[i + 1]) for i in range(0, len(items) - 1, 2)]
        if len(items) % 2:
            paired.append(items[-1])
        items = paired
    return items[0]


class Inputs:
    """Where a reduce's inputs come from inside one kernel: element `offset` (a flat
    row-major index) of input `number`, `count` consecutive elements at a time, and the init
    values. This one loads from buffers; a reduction input fusion computes the elements
    instead (compiler/codegen/fusion.py). The reduction order does not depend on it."""

    def __init__(self, kernel: Kernel, instruction: Instruction, operands: list[Ref]) -> None:
        self.kernel = kernel
        half = len(operands) // 2
        self.shapes = [op.array_shape for op in instruction.operands]
        self.refs = list(operands)
        self.half = half

    def element(self, number: int, offset: ir.Value, count: int = 1) -> ir.Value:
        return self.kernel.load(self.kernel.buffer(self.refs[number]), self.shapes[number].dtype, offset, count)  # type: ignore[arg-type]

    def init(self, number: int) -> ir.Value:
        return self.kernel.load(self.kernel.buffer(self.refs[self.half + number]), self.shapes[self.half + number].dtype, I64(0))  # type: ignore[arg-type]


class SequenceReader:
    """Reads element k of one output element's reduced sequence, for every input."""

    def __init__(self, kernel: Kernel, instruction: Instruction, inputs: Inputs, kept: list[int], reduced: list[int]) -> None:
        self.kernel = kernel
        half = len(instruction.operands) // 2
        self.shapes = [op.array_shape for op in instruction.operands[:half]]
        self.inputs = inputs
        dims = self.shapes[0].dims
        strides = row_major_strides(dims)
        self.kept_strides = [strides[d] for d in kept]
        self.reduced_dims = tuple(dims[d] for d in reduced)
        self.reduced_strides = [strides[d] for d in reduced]
        # The sequence is contiguous when the reduced dimensions are the trailing ones.
        self.contiguous = reduced == list(range(len(dims) - len(reduced), len(dims)))
        self.base_offset: ir.Value = I64(0)

    def set_output(self, kept_index: list[ir.Value]) -> None:
        self.base_offset = ravel(self.kernel.builder, kept_index, self.kept_strides)

    def _offset(self, k: ir.Value) -> ir.Value:
        b = self.kernel.builder
        if self.contiguous:
            return b.add(self.base_offset, k)
        return b.add(self.base_offset, ravel(b, unravel(b, k, self.reduced_dims), self.reduced_strides))

    def scalars(self, k: ir.Value) -> Values:
        offset = self._offset(k)
        return [self.inputs.element(number, offset) for number in range(len(self.shapes))]

    def vectors(self, start: ir.Value, count: int, filler: Values | None = None) -> Values:
        """`count` consecutive sequence elements from `start` in lanes 0..count-1 of 16-lane
        vectors; the other lanes hold `filler`'s lanes (or are undefined)."""
        b = self.kernel.builder
        if self.contiguous and count == REDUCE_LANES:
            offset = self._offset(start)
            return [self.inputs.element(number, offset, REDUCE_LANES) for number in range(len(self.shapes))]
        out = []
        for position, shape in enumerate(self.shapes):
            vector = filler[position] if filler is not None else ir.Constant(vector_of(storage_type(shape.dtype), REDUCE_LANES), ir.Undefined)
            for lane in range(count):
                element = self.inputs.element(position, self._offset(b.add(start, I64(lane))))
                vector = b.insert_element(vector, element, I32(lane))
            out.append(vector)
        return out


def _lane_mask(count: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(ir.IntType(1), REDUCE_LANES), [1 if i < count else 0 for i in range(REDUCE_LANES)])


def reduce_block(kernel: Kernel, reduce: Reducer, reader: SequenceReader, start: ir.Value, length: int) -> Values:
    """The reduction of one block of `length` elements from `start` (lanes, then the tree)."""
    b = kernel.builder
    if length < REDUCE_LANES:
        return scalar_tree(reduce, [reader.scalars(b.add(start, I64(i))) for i in range(length)])
    full_steps = length // REDUCE_LANES
    if reduce.order_free and full_steps >= 2 * UNROLL:
        lane_values = _order_free_lanes(kernel, reduce, reader, start, full_steps)
    else:
        lane_values = reader.vectors(start, REDUCE_LANES)
    if full_steps > 1 and not (reduce.order_free and full_steps >= 2 * UNROLL):
        slots = [kernel.alloca(v.type, name="lanes") for v in lane_values]
        for slot, value in zip(slots, lane_values, strict=True):
            b.store(value, slot)
        with kernel.loop(I64(1), I64(full_steps), 1, "step") as step:
            current = [b.load(slot) for slot in slots]
            item = reader.vectors(b.add(start, b.mul(step, I64(REDUCE_LANES))), REDUCE_LANES)
            for slot, value in zip(slots, reduce(current, item), strict=True):
                b.store(value, slot)
        lane_values = [b.load(slot) for slot in slots]
    remainder = length % REDUCE_LANES
    if remainder:
        item = reader.vectors(b.add(start, I64(full_steps * REDUCE_LANES)), remainder, filler=lane_values)
        folded = reduce(lane_values, item)
        mask = _lane_mask(remainder)
        lane_values = [b.select(mask, f, v) for f, v in zip(folded, lane_values, strict=True)]
    return vector_tree(b, reduce, lane_values)


def _float_extremum(reduce: Reducer) -> str | None:
    """"maximum" or "minimum" when the reducer is that op on f32/f64 (order-free, and
    computable on integer keys), else None."""
    root = reduce.computation.root
    if reduce.order_free and root.opcode in ("maximum", "minimum") and root.array_shape.dtype.name in ("f32", "f64"):
        return root.opcode
    return None


def _total_order_key(b: ir.IRBuilder, bits: ir.Value, width: int) -> ir.Value:
    """Integer keys whose signed order is IEEE totalOrder (-NaN < -inf < ... < -0 < +0 < ...
    < +inf < +NaN): negative values get their magnitude bits flipped. Applied twice it gives
    the bits back."""
    sign = b.ashr(bits, ir.Constant(bits.type, [width - 1] * REDUCE_LANES))
    return b.xor(bits, b.and_(sign, ir.Constant(bits.type, [(1 << (width - 1)) - 1] * REDUCE_LANES)))


def _extremum_lanes(kernel: Kernel, reduce: Reducer, reader: SequenceReader, start: ir.Value, full_steps: int, op: str) -> Values:
    """The 16 lane values after all full steps of a float maximum or minimum.

    First with the hardware's max/min pattern (`x > acc ? x : acc`, one instruction) and an
    or-accumulated NaN flag: exact whenever a lane's extremum is not zero, because a nonzero
    value has one bit pattern, and NaN lanes become the canonical NaN. When some lane's
    extremum is ±0 its sign depends on the order the zeros met, so that block is computed
    again on totalOrder keys (`_extremum_key_lanes`), which is exact in every case."""
    b = kernel.builder
    dtype = reduce.computation.root.array_shape.dtype
    width = dtype.bits
    float_vector = vector_of(storage_type(dtype), REDUCE_LANES)
    int_vector = ir.VectorType(ir.IntType(width), REDUCE_LANES)
    mask_vector = ir.VectorType(ir.IntType(1), REDUCE_LANES)

    def values_at(offset: ir.Value) -> ir.Value:
        return reader.vectors(offset, REDUCE_LANES)[0]

    def fold(acc: ir.Value, seen_nan: ir.Value, x: ir.Value) -> tuple[ir.Value, ir.Value]:
        better = b.fcmp_ordered(">" if op == "maximum" else "<", x, acc)
        return b.select(better, x, acc), b.or_(seen_nan, b.fcmp_unordered("uno", x, x))

    rounds, leftover = divmod(full_steps, EXTREMUM_UNROLL)
    accs = [kernel.alloca(float_vector, name=f"acc{u}") for u in range(EXTREMUM_UNROLL)]
    nans = [kernel.alloca(mask_vector, name=f"nan{u}") for u in range(EXTREMUM_UNROLL)]
    for u in range(EXTREMUM_UNROLL):
        first = values_at(b.add(start, I64(u * REDUCE_LANES)))
        b.store(first, accs[u])
        b.store(b.fcmp_unordered("uno", first, first), nans[u])
    with kernel.loop(I64(1), I64(rounds), 1, "round") as round_index:
        base = b.add(start, b.mul(round_index, I64(EXTREMUM_UNROLL * REDUCE_LANES)))
        for u in range(EXTREMUM_UNROLL):
            acc, seen = fold(b.load(accs[u]), b.load(nans[u]), values_at(b.add(base, I64(u * REDUCE_LANES))))
            b.store(acc, accs[u])
            b.store(seen, nans[u])
    acc, seen = b.load(accs[0]), b.load(nans[0])
    for u in range(1, EXTREMUM_UNROLL):
        other = b.load(accs[u])
        acc, seen = fold(acc, b.or_(seen, b.load(nans[u])), other)
    for extra in range(leftover):
        acc, seen = fold(acc, seen, values_at(b.add(start, I64((rounds * EXTREMUM_UNROLL + extra) * REDUCE_LANES))))
    canonical = (F64 if width == 64 else F32).float_layout.canonical_nan
    fast = b.bitcast(b.select(seen, ir.Constant(int_vector, [canonical] * REDUCE_LANES), b.bitcast(acc, int_vector)), float_vector)
    zero = b.and_(b.fcmp_ordered("==", acc, ir.Constant(float_vector, [0.0] * REDUCE_LANES)), b.not_(seen))
    any_zero = b.icmp_unsigned("!=", b.bitcast(zero, ir.IntType(REDUCE_LANES)), ir.Constant(ir.IntType(REDUCE_LANES), 0))
    before = b.block
    with b.if_then(any_zero, likely=False):
        exact = _extremum_key_lanes(kernel, reduce, reader, start, full_steps, op)[0]
        after = b.block
    merged = b.phi(float_vector)
    merged.add_incoming(exact, after)
    merged.add_incoming(fast, before)
    return [merged]


def _extremum_key_lanes(kernel: Kernel, reduce: Reducer, reader: SequenceReader, start: ir.Value, full_steps: int, op: str) -> Values:
    """The 16 lane values after all full steps of a float maximum or minimum, computed on
    totalOrder keys: a lane's result is its greatest (least) element with -0 < +0, or the
    canonical NaN if it saw a NaN (a NaN key lies above +inf's or below -inf's). Integer
    max/min per element instead of the float op's compare-and-select chain; the same bits."""
    b = kernel.builder
    dtype = reduce.computation.root.array_shape.dtype
    width = dtype.bits
    int_vector = ir.VectorType(ir.IntType(width), REDUCE_LANES)
    float_vector = vector_of(storage_type(dtype), REDUCE_LANES)

    def keys_at(offset: ir.Value) -> ir.Value:
        return _total_order_key(b, b.bitcast(reader.vectors(offset, REDUCE_LANES)[0], int_vector), width)

    def fold(high: ir.Value, low: ir.Value, key: ir.Value) -> tuple[ir.Value, ir.Value]:
        return b.select(b.icmp_signed(">", key, high), key, high), b.select(b.icmp_signed("<", key, low), key, low)

    rounds, leftover = divmod(full_steps, EXTREMUM_UNROLL)
    first = [keys_at(b.add(start, I64(u * REDUCE_LANES))) for u in range(EXTREMUM_UNROLL)]
    highs = [kernel.alloca(int_vector, name=f"high{u}") for u in range(EXTREMUM_UNROLL)]
    lows = [kernel.alloca(int_vector, name=f"low{u}") for u in range(EXTREMUM_UNROLL)]
    for high, low, key in zip(highs, lows, first, strict=True):
        b.store(key, high)
        b.store(key, low)
    with kernel.loop(I64(1), I64(rounds), 1, "round") as round_index:
        base = b.add(start, b.mul(round_index, I64(EXTREMUM_UNROLL * REDUCE_LANES)))
        for u in range(EXTREMUM_UNROLL):
            high, low = fold(b.load(highs[u]), b.load(lows[u]), keys_at(b.add(base, I64(u * REDUCE_LANES))))
            b.store(high, highs[u])
            b.store(low, lows[u])
    high, low = b.load(highs[0]), b.load(lows[0])
    for u in range(1, EXTREMUM_UNROLL):
        high, low = fold(high, low, b.load(highs[u]))
        high, low = fold(high, low, b.load(lows[u]))
    for extra in range(leftover):
        high, low = fold(high, low, keys_at(b.add(start, I64((rounds * EXTREMUM_UNROLL + extra) * REDUCE_LANES))))
    exponent_all_ones = ((1 << (width - 1)) - 1) ^ ((1 << (52 if width == 64 else 23)) - 1)
    plus_inf_key = exponent_all_ones  # +inf's bits are its key
    minus_inf_key = -plus_inf_key - 1  # -inf: sign bit set, magnitude bits flipped
    nan = b.or_(
        b.icmp_signed(">", high, ir.Constant(int_vector, [plus_inf_key] * REDUCE_LANES)),
        b.icmp_signed("<", low, ir.Constant(int_vector, [minus_inf_key] * REDUCE_LANES)),
    )
    result_bits = _total_order_key(b, high if op == "maximum" else low, width)
    canonical = (F64 if width == 64 else F32).float_layout.canonical_nan
    result_bits = b.select(nan, ir.Constant(int_vector, [canonical] * REDUCE_LANES), result_bits)
    return [b.bitcast(result_bits, float_vector)]


def _order_free_lanes(kernel: Kernel, reduce: Reducer, reader: SequenceReader, start: ir.Value, full_steps: int) -> Values:
    """The 16 lane values after all full steps, for an order-free reducer: UNROLL
    accumulators take interleaved steps (independent dependency chains), then combine."""
    extremum = _float_extremum(reduce)
    if extremum is not None and len(reader.shapes) == 1:
        return _extremum_lanes(kernel, reduce, reader, start, full_steps, extremum)
    b = kernel.builder
    rounds, leftover = divmod(full_steps, UNROLL)
    accumulators = [reader.vectors(b.add(start, I64(u * REDUCE_LANES)), REDUCE_LANES) for u in range(UNROLL)]
    slots = [[kernel.alloca(v.type, name=f"lanes{u}") for v in values] for u, values in enumerate(accumulators)]
    for row, values in zip(slots, accumulators, strict=True):
        for slot, value in zip(row, values, strict=True):
            b.store(value, slot)
    with kernel.loop(I64(1), I64(rounds), 1, "round") as round_index:
        base = b.add(start, b.mul(round_index, I64(UNROLL * REDUCE_LANES)))
        for u, row in enumerate(slots):
            item = reader.vectors(b.add(base, I64(u * REDUCE_LANES)), REDUCE_LANES)
            for slot, value in zip(row, reduce([b.load(slot) for slot in row], item), strict=True):
                b.store(value, slot)
    combined = [b.load(slot) for slot in slots[0]]
    for row in slots[1:]:
        combined = reduce(combined, [b.load(slot) for slot in row])
    for extra in range(leftover):
        combined = reduce(combined, reader.vectors(b.add(start, I64((rounds * UNROLL + extra) * REDUCE_LANES)), REDUCE_LANES))
    return combined


def tree_in_memory(kernel: Kernel, reduce: Reducer, arrays: list[ir.Value], types: list[ir.Type], count: int) -> Values:
    """The pairwise tree over `count` values stored at `arrays` (one array per input),
    computed in place; returns the result."""
    b = kernel.builder

    def at(array: ir.Value, t: ir.Type, index: ir.Value) -> ir.Value:
        return b.gep(array, [index], source_etype=t)

    remaining = count
    while remaining > 1:
        pairs = remaining // 2
        with kernel.loop(I64(0), I64(pairs), 1, "pair") as pair:
            left = b.mul(pair, I64(2))
            right = b.add(left, I64(1))
            a = [b.load(at(arr, t, left), typ=t) for arr, t in zip(arrays, types, strict=True)]
            c = [b.load(at(arr, t, right), typ=t) for arr, t in zip(arrays, types, strict=True)]
            for arr, t, value in zip(arrays, types, reduce(a, c), strict=True):
                b.store(value, at(arr, t, pair))
        if remaining % 2:
            for arr, t in zip(arrays, types, strict=True):
                b.store(b.load(at(arr, t, I64(remaining - 1)), typ=t), at(arr, t, I64(pairs)))
        remaining = pairs + remaining % 2
    return [b.load(arr, typ=t) for arr, t in zip(arrays, types, strict=True)]


def block_result(kernel: Kernel, reduce: Reducer, reader: SequenceReader, block: ir.Value, n: int) -> Values:
    """The reduction of block number `block` of an n-element sequence."""
    full_blocks, tail = divmod(n, REDUCE_BLOCK)
    b = kernel.builder
    if not tail:
        return reduce_block(kernel, reduce, reader, b.mul(block, I64(REDUCE_BLOCK)), REDUCE_BLOCK)
    types = [storage_type(shape.dtype) for shape in reader.shapes]
    slots = [kernel.alloca(t, name="block") for t in types]
    with b.if_else(b.icmp_signed("<", block, I64(full_blocks))) as (full, last):
        with full:
            for slot, value in zip(slots, reduce_block(kernel, reduce, reader, b.mul(block, I64(REDUCE_BLOCK)), REDUCE_BLOCK), strict=True):
                b.store(value, slot)
        with last:
            for slot, value in zip(slots, reduce_block(kernel, reduce, reader, I64(full_blocks * REDUCE_BLOCK), tail), strict=True):
                b.store(value, slot)
    return [b.load(slot) for slot in slots]


def emit_reduce_element(kernel: Kernel, reduce: Reducer, reader: SequenceReader, n: int, inits: Values) -> Values:
    """The whole pinned reduction of one output element's sequence of n <= REDUCE_BLOCK elements."""
    if n == 0:
        return inits
    return reduce(inits, reduce_block(kernel, reduce, reader, I64(0), n))


def _result_shapes(instruction: Instruction) -> list[ArrayShape]:
    shape = instruction.shape
    return list(shape.elements) if isinstance(shape, TupleShape) else [shape]  # type: ignore[list-item]


def _emit_reduce(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """A reduce reading its inputs from buffers (see emit_reduce)."""
    return emit_reduce(lowering, instruction, steps, lambda kernel: Inputs(kernel, instruction, operands))


def emit_reduce(lowering: Lowering, instruction: Instruction, steps: list[P.Step], make_inputs: Callable[[Kernel], Inputs]) -> Ref:
    """One kernel when a sequence fits in one block. Longer sequences take two kernels: the
    first computes every (output element, block) result in parallel, the second runs each
    output element's tree over its blocks and applies the init value. `make_inputs` gives
    each kernel its source of input elements and init values."""
    half = len(instruction.operands) // 2
    input_shape = instruction.operands[0].array_shape
    dims: tuple[int, ...] = instruction.attrs["dimensions"]  # type: ignore[assignment]
    reduced = sorted(dims)
    kept = [d for d in range(input_shape.rank) if d not in dims]
    out_shapes = _result_shapes(instruction)
    outputs = [lowering.new_buffer(s) for s in out_shapes]
    out_dims = out_shapes[0].dims
    count = out_shapes[0].element_count
    n = 1
    for d in reduced:
        n *= input_shape.dims[d]
    computation = instruction.attrs["to_apply"]
    assert isinstance(computation, Computation)
    result: Ref = outputs[0] if half == 1 else tuple(outputs)
    if not count:
        return result
    blocks = -(-n // REDUCE_BLOCK)
    if blocks <= 1:
        with lowering.kernels.kernel("reduce") as kernel:
            b = kernel.builder
            reduce = Reducer(kernel, computation)
            inputs = make_inputs(kernel)
            reader = SequenceReader(kernel, instruction, inputs, kept, reduced)
            inits = [inputs.init(number) for number in range(half)]
            with kernel.work_items(count, "out") as index:
                reader.set_output(unravel(b, index, out_dims))
                values = emit_reduce_element(kernel, reduce, reader, n, inits)
                for output, shape, value in zip(outputs, out_shapes, values, strict=True):
                    kernel.store(value, kernel.buffer(output), shape.dtype, index)
        steps.append(P.KernelStep(kernel.name, count, max(1, 65536 // max(n, 1)), instruction.name))
        return result
    partials = [lowering.new_buffer(ArrayShape.of(s.dtype, (count, blocks))) for s in out_shapes]
    with lowering.kernels.kernel("reduce_blocks") as kernel:
        b = kernel.builder
        reduce = Reducer(kernel, computation)
        reader = SequenceReader(kernel, instruction, make_inputs(kernel), kept, reduced)
        with kernel.loop(kernel.begin, kernel.end, 1, "item") as item:
            reader.set_output(unravel(b, b.udiv(item, I64(blocks)), out_dims))
            values = block_result(kernel, reduce, reader, b.urem(item, I64(blocks)), n)
            for partial, shape, value in zip(partials, out_shapes, values, strict=True):
                kernel.store(value, kernel.buffer(partial), shape.dtype, item)
    steps.append(P.KernelStep(kernel.name, count * blocks, 1, instruction.name))
    with lowering.kernels.kernel("reduce_tree") as kernel:
        b = kernel.builder
        reduce = Reducer(kernel, computation)
        inputs = make_inputs(kernel)
        inits = [inputs.init(number) for number in range(half)]
        types = [storage_type(s.dtype) for s in out_shapes]
        with kernel.work_items(count, "out") as index:
            arrays = [kernel.element_pointer(kernel.buffer(p), t, b.mul(index, I64(blocks))) for p, t in zip(partials, types, strict=True)]
            values = reduce(inits, tree_in_memory(kernel, reduce, arrays, types, blocks))
            for output, shape, value in zip(outputs, out_shapes, values, strict=True):
                kernel.store(value, kernel.buffer(output), shape.dtype, index)
    steps.append(P.KernelStep(kernel.name, count, max(1, 4096 // blocks), instruction.name))
    return result


def window_element(b: ir.IRBuilder, window: attr.Window, dims: tuple[int, ...], output: list[ir.Value], position: list[ir.Value]) -> tuple[ir.Value, list[ir.Value]]:
    """Where window `position` of output element `output` falls in an input of `dims`:
    whether inside it (not in padding or a base-dilation hole), and the input index there
    (zeros when not, so it can be loaded either way)."""
    inside = ir.Constant(ir.IntType(1), 1)
    indices = []
    for o, k, w, size in zip(output, position, window.dims, dims, strict=True):
        dilated = b.sub(b.add(b.mul(o, I64(w.stride)), b.mul(k, I64(w.window_dilation))), I64(w.pad_low))
        index_in = b.sdiv(dilated, I64(w.base_dilation)) if w.base_dilation > 1 else dilated
        on_grid = b.icmp_signed("==", b.srem(dilated, I64(w.base_dilation)), I64(0)) if w.base_dilation > 1 else ir.Constant(ir.IntType(1), 1)
        ok = b.and_(on_grid, b.and_(b.icmp_signed(">=", dilated, I64(0)), b.icmp_signed("<", index_in, I64(size))))
        inside = b.and_(inside, ok)
        indices.append(b.select(ok, index_in, I64(0)))
    return inside, indices


def _window_accumulators(kernel: Kernel, instruction: Instruction, operands: list[Ref]) -> tuple[Values, Values, list, Values]:
    """A reduce-window kernel's inits (loaded), input bases and dtypes, and one accumulator
    slot per reduced input."""
    half = len(operands) // 2
    inits = [kernel.load(kernel.buffer(ref), op.array_shape.dtype, I64(0)) for ref, op in zip(operands[half:], instruction.operands[half:], strict=True)]  # type: ignore[arg-type]
    bases = [kernel.buffer(ref) for ref in operands[:half]]  # type: ignore[arg-type]
    dtypes = [op.array_shape.dtype for op in instruction.operands[:half]]
    slots = [kernel.alloca(init.type, name="acc") for init in inits]
    return inits, bases, dtypes, slots


def _emit_running_reduce_window(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step], dim: int) -> Ref:
    """A running reduce-window (compiler/passes/backend_decisions.py running_dimension): one
    work item per line along `dim`, acc = init, then for k = 0, 1, ...: acc = reducer(acc,
    x[k]), out[k] = acc."""
    half = len(operands) // 2
    dims = instruction.operands[0].array_shape.dims
    computation = instruction.attrs["to_apply"]
    window = instruction.attrs["window"]
    assert isinstance(computation, Computation) and isinstance(window, attr.Window)
    # The scan is the window loop only for this window shape (the decision also checked that
    # the padding folds to init, which needs the reference's bits).
    assert running_window(window, dims) == dim, f"%{instruction.name}: not a running window along {dim}"
    out_shapes = _result_shapes(instruction)
    outputs = [lowering.new_buffer(s) for s in out_shapes]
    length = dims[dim]
    inner = prod(dims[dim + 1:])
    lines = out_shapes[0].element_count // length
    if lines:
        with lowering.kernels.kernel("running_reduce_window") as kernel:
            b = kernel.builder
            reduce = Reducer(kernel, computation)
            inits, bases, dtypes, slots = _window_accumulators(kernel, instruction, operands)
            with kernel.work_items(lines, "line") as line:
                outer = b.udiv(line, I64(inner))
                start = b.add(b.mul(outer, I64(length * inner)), b.urem(line, I64(inner)))
                for slot, init in zip(slots, inits, strict=True):
                    b.store(init, slot)
                with kernel.loop(I64(0), I64(length), 1, "k") as k:
                    offset = b.add(start, b.mul(k, I64(inner)))
                    values = [kernel.load(base, dtype, offset) for base, dtype in zip(bases, dtypes, strict=True)]
                    acc = reduce([b.load(slot) for slot in slots], values)
                    for slot, value, output, shape in zip(slots, acc, outputs, out_shapes, strict=True):
                        b.store(value, slot)
                        kernel.store(value, kernel.buffer(output), shape.dtype, offset)
        steps.append(P.KernelStep(kernel.name, lines, max(1, 4096 // length), instruction.name))
    return outputs[0] if half == 1 else tuple(outputs)


def _emit_reduce_window(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """acc = init, then acc = reducer(acc, v) over window positions in row-major order; a
    position in padding or in a base-dilation hole contributes init."""
    decided = instruction.decisions
    running = decided.running_dimension if decided is not None else None
    if running is not None:
        return _emit_running_reduce_window(lowering, instruction, operands, steps, running)
    half = len(operands) // 2
    input_shape = instruction.operands[0].array_shape
    window = instruction.attrs["window"]
    computation = instruction.attrs["to_apply"]
    assert isinstance(window, attr.Window) and isinstance(computation, Computation)
    out_shapes = _result_shapes(instruction)
    outputs = [lowering.new_buffer(s) for s in out_shapes]
    count = out_shapes[0].element_count
    strides = row_major_strides(input_shape.dims)
    if count:
        with lowering.kernels.kernel("reduce_window") as kernel:
            b = kernel.builder
            reduce = Reducer(kernel, computation)
            inits, bases, dtypes, slots = _window_accumulators(kernel, instruction, operands)
            window_sizes = tuple(w.size for w in window.dims)
            total = 1
            for size in window_sizes:
                total *= size
            with kernel.work_items(count, "out") as index:
                multi = unravel(b, index, out_shapes[0].dims)
                for slot, init in zip(slots, inits, strict=True):
                    b.store(init, slot)
                with kernel.loop(I64(0), I64(total), 1, "pos") as flat_position:
                    inside, indices = window_element(b, window, input_shape.dims, multi, unravel(b, flat_position, window_sizes))
                    if input_shape.element_count:
                        offset = ravel(b, indices, strides)
                        values = [b.select(inside, kernel.load(base, dtype, offset), init) for base, dtype, init in zip(bases, dtypes, inits, strict=True)]
                    else:
                        values = list(inits)
                    acc = reduce([b.load(slot) for slot in slots], values)
                    for slot, value in zip(slots, acc, strict=True):
                        b.store(value, slot)
                for output, shape, slot in zip(outputs, out_shapes, slots, strict=True):
                    kernel.store(b.load(slot), kernel.buffer(output), shape.dtype, index)
        steps.append(P.KernelStep(kernel.name, count, 1024, instruction.name))
    return outputs[0] if half == 1 else tuple(outputs)


def _emit_select_and_scatter(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """Three kernels, as the reference: the result filled with init; the flat operand
    position each source element's window selects (row-major window order, the first inside
    the operand, replaced whenever select(selected, current) is false; -1 for a window of
    padding only), in parallel; then one work item applying result[s] = scatter(result[s],
    source element) in source order, so elements selecting one position meet it in
    that order."""
    operand_shape, source_shape = instruction.operands[0].array_shape, instruction.operands[1].array_shape
    dtype = operand_shape.dtype
    window, select, scatter = instruction.attrs["window"], instruction.attrs["select"], instruction.attrs["scatter"]
    assert isinstance(window, attr.Window) and isinstance(select, Computation) and isinstance(scatter, Computation)
    operand, source, init = operands
    assert isinstance(operand, int) and isinstance(source, int) and isinstance(init, int)
    result = lowering.new_buffer(operand_shape)
    count, sources = operand_shape.element_count, source_shape.element_count
    if count:
        with lowering.kernels.kernel("select_and_scatter_init") as kernel:
            value = kernel.load(kernel.buffer(init), dtype, I64(0))
            with kernel.work_items(count, "i") as index:
                kernel.store(value, kernel.buffer(result), dtype, index)
        steps.append(P.KernelStep(kernel.name, count, 16384, instruction.name))
    if not count or not sources:
        return result
    selected = lowering.scratch_buffer(8 * sources)
    window_sizes = tuple(w.size for w in window.dims)
    strides = row_major_strides(operand_shape.dims)
    with lowering.kernels.kernel("select_and_scatter_select") as kernel:
        b = kernel.builder
        chooses = ElementEmitter(kernel)
        best_value = kernel.alloca(storage_type(dtype), name="best")
        best_place = kernel.alloca(I64, name="place")
        with kernel.work_items(sources, "s") as index:
            multi = unravel(b, index, source_shape.dims)
            b.store(I64(-1), best_place)
            b.store(ir.Constant(storage_type(dtype), None), best_value)
            with kernel.loop(I64(0), I64(prod(window_sizes)), 1, "pos") as flat_position:
                inside, indices = window_element(b, window, operand_shape.dims, multi, unravel(b, flat_position, window_sizes))
                with b.if_then(inside):
                    place = ravel(b, indices, strides)
                    current = kernel.load(kernel.buffer(operand), dtype, place)
                    (keep,) = chooses.emit_computation(select, [b.load(best_value), current])
                    rejected = b.icmp_unsigned("==", keep, ir.Constant(keep.type, 0))
                    replace = b.or_(b.icmp_signed("<", b.load(best_place), I64(0)), rejected)
                    with b.if_then(replace):
                        b.store(current, best_value)
                        b.store(place, best_place)
            kernel.store(b.load(best_place), kernel.buffer(selected), S64, index)
    steps.append(P.KernelStep(kernel.name, sources, max(1, 4096 // prod(window_sizes)), instruction.name))
    with lowering.kernels.kernel("select_and_scatter_apply") as kernel:
        b = kernel.builder
        applies = ElementEmitter(kernel)
        with kernel.work_items(1, "one"), kernel.loop(I64(0), I64(sources), 1, "s") as index:
            place = kernel.load(kernel.buffer(selected), S64, index)
            with b.if_then(b.icmp_signed(">=", place, I64(0))):
                value = kernel.load(kernel.buffer(source), dtype, index)
                (combined,) = applies.emit_computation(scatter, [kernel.load(kernel.buffer(result), dtype, place), value])
                kernel.store(combined, kernel.buffer(result), dtype, place)
    steps.append(P.KernelStep(kernel.name, 1, 1, instruction.name))
    return result


EMITTERS = family_table("reductions", globals(), prefix="_emit_")
