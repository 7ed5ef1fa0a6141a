"""rng-bit-generator: one kernel computing each result element from its own generator block
(ThreeFry-2x32 or Philox-4x32 on the block's counter), so elements are independent and any
split of the work gives the same bits; and one work item writing the advanced state. The
algorithms and the block layout are compiler/numerics/random_bits.py's, as the reference's."""

from __future__ import annotations

from llvmlite import ir

from compiler.codegen import plan as P
from compiler.codegen.kernel import Kernel, ravel, row_major_strides, unravel
from compiler.codegen.llvm_ir import I32, I64, storage_type
from compiler.codegen.lower import Lowering, Ref
from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.hlo.shape import ArrayShape
from compiler.numerics import random_bits as R
from core.dtypes import U64


def _split(b: ir.IRBuilder, word: ir.Value) -> tuple[ir.Value, ir.Value]:
    return b.trunc(word, I32), b.trunc(b.lshr(word, I64(32)), I32)


def _join(b: ir.IRBuilder, low: ir.Value, high: ir.Value) -> ir.Value:
    return b.or_(b.zext(low, I64), b.shl(b.zext(high, I64), I64(32)))


def _rotate_left(b: ir.IRBuilder, v: ir.Value, distance: int) -> ir.Value:
    return b.or_(b.shl(v, I32(distance)), b.lshr(v, I32(32 - distance)))


def threefry2x32(b: ir.IRBuilder, x0: ir.Value, x1: ir.Value, key: ir.Value) -> tuple[ir.Value, ir.Value]:
    """ThreeFry-2x32, 20 rounds (compiler/reference/random_bits.py's, in IR)."""
    k0, k1 = _split(b, key)
    schedule = (k0, k1, b.xor(b.xor(I32(R.THREEFRY_PARITY), k0), k1))
    x0, x1 = b.add(x0, schedule[0]), b.add(x1, schedule[1])
    for group in range(R.THREEFRY_GROUPS):
        rotations = R.THREEFRY_ROTATIONS[:4] if group % 2 == 0 else R.THREEFRY_ROTATIONS[4:]
        for rotation in rotations:
            x0 = b.add(x0, x1)
            x1 = b.xor(_rotate_left(b, x1, rotation), x0)
        x0 = b.add(x0, schedule[(group + 1) % 3])
        x1 = b.add(b.add(x1, schedule[(group + 2) % 3]), I32(group + 1))
    return x0, x1


def philox4x32(b: ir.IRBuilder, x: list[ir.Value], key: ir.Value) -> list[ir.Value]:
    """Philox-4x32, 10 rounds (compiler/reference/random_bits.py's, in IR)."""
    k0, k1 = _split(b, key)
    for _ in range(R.PHILOX_ROUNDS):
        low0, high0 = _split(b, b.mul(b.zext(x[0], I64), I64(R.PHILOX_MULTIPLIERS[0])))
        low1, high1 = _split(b, b.mul(b.zext(x[2], I64), I64(R.PHILOX_MULTIPLIERS[1])))
        x = [b.xor(b.xor(high1, x[1]), k0), low1, b.xor(b.xor(high0, x[3]), k1), low0]
        k0, k1 = b.add(k0, I32(R.PHILOX_KEY_STEPS[0])), b.add(k1, I32(R.PHILOX_KEY_STEPS[1]))
    return x


def _philox_counter(state: list[ir.Value]) -> tuple[ir.Value, ir.Value]:
    """The 128-bit counter's low and high words (with a u64[2] state the key is the high word)."""
    return (state[1], state[2]) if len(state) >= 3 else (state[1], state[0])


def _element(b: ir.IRBuilder, layout: R.BlockLayout, state: list[ir.Value], index: ir.Value) -> ir.Value:
    """Result element `index` (flat) as a 64-bit word: the generator words of its block."""
    if layout.algorithm == R.THREEFRY:
        if layout.bits == 64:
            w0, w1 = threefry2x32(b, *_split(b, b.add(state[1], index)), state[0])
            return _join(b, w0, w1)
        if not layout.dims:
            block, word = I64(0), I64(0)
        else:
            split = layout.split_dimension
            multi = unravel(b, index, layout.dims)
            word = b.and_(multi[split], I64(1))
            multi[split] = b.lshr(multi[split], I64(1))
            block = ravel(b, multi, row_major_strides(layout.half_dims))
        w0, w1 = threefry2x32(b, *_split(b, b.add(state[1], block)), state[0])
        return b.zext(b.select(b.icmp_unsigned("==", word, I64(0)), w0, w1), I64)
    shift = 1 if layout.bits == 64 else 2
    block = b.lshr(index, I64(shift))
    word = b.and_(index, I64((1 << shift) - 1))
    counter_low, counter_high = _philox_counter(state)
    low = b.add(counter_low, block)
    high = b.add(counter_high, b.zext(b.icmp_unsigned("<", low, counter_low), I64))
    w = philox4x32(b, [*_split(b, low), *_split(b, high)], state[0])
    if layout.bits == 64:
        return b.select(b.icmp_unsigned("==", word, I64(0)), _join(b, w[0], w[1]), _join(b, w[2], w[3]))
    chosen = b.select(b.icmp_unsigned("==", word, I64(0)), w[0], b.select(b.icmp_unsigned("==", word, I64(1)), w[1], b.select(b.icmp_unsigned("==", word, I64(2)), w[2], w[3])))
    return b.zext(chosen, I64)


def _load_state(kernel: Kernel, buffer: int, words: int) -> list[ir.Value]:
    return [kernel.load(kernel.buffer(buffer), U64, I64(k)) for k in range(words)]


def _emit_rng_bit_generator(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
    """The bits kernel over the result's elements, then the new state."""
    (state_ref,) = operands
    assert isinstance(state_ref, int)
    words = instruction.operands[0].array_shape.dims[0]
    result = instruction.shape.elements[1]  # type: ignore[union-attr]
    assert isinstance(result, ArrayShape)
    layout = R.BlockLayout(R.resolved(str(instruction.attrs["algorithm"])), result.dims, result.dtype.bits)
    outputs = lowering.new_buffers(instruction.shape)
    new_state, bits = outputs  # type: ignore[misc]
    count = result.element_count
    if count:
        with lowering.kernels.kernel("rng_bits") as kernel:
            b = kernel.builder
            state = _load_state(kernel, state_ref, words)
            with kernel.work_items(count, "i") as index:
                value = _element(b, layout, state, index)
                element = storage_type(result.dtype)
                kernel.store(b.trunc(value, element) if element.width < 64 else value, kernel.buffer(bits), result.dtype, index)
        steps.append(P.KernelStep(kernel.name, count, 2048, instruction.name))
    with lowering.kernels.kernel("rng_state") as kernel:
        b = kernel.builder
        with kernel.work_items(1, "one"):
            state = _load_state(kernel, state_ref, words)
            advanced = [state[0]]
            if layout.algorithm == R.THREEFRY:
                advanced.append(b.add(state[1], I64(layout.block_count)))
            else:
                counter_low, counter_high = _philox_counter(state)
                low = b.add(counter_low, I64(layout.block_count))
                advanced.append(low)
                if words >= 3:
                    advanced.append(b.add(counter_high, b.zext(b.icmp_unsigned("<", low, counter_low), I64)))
            for k, word in enumerate(advanced):
                kernel.store(word, kernel.buffer(new_state), U64, I64(k))
    steps.append(P.KernelStep(kernel.name, 1, 1, instruction.name))
    return outputs


EMITTERS = family_table("random_bits", globals(), prefix="_emit_")
