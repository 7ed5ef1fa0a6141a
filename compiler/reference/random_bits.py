"""rng-bit-generator: ThreeFry-2x32 and Philox-4x32 on whole arrays of counters, laid out as
compiler/numerics/random_bits.py defines (XLA's layout)."""

from __future__ import annotations

import numpy as np

from compiler.hlo.family_tables import family_table
from compiler.hlo.ir import Instruction
from compiler.numerics import random_bits as R
from compiler.reference.evaluator import Evaluator, Value

U32 = np.uint32
U64 = np.uint64


def _low_high(words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (words & U64(R.MASK32)).astype(U32), (words >> U64(32)).astype(U32)


def _rotate_left(v: np.ndarray, distance: int) -> np.ndarray:
    return (v << U32(distance)) | (v >> U32(32 - distance))


def threefry2x32(x0: np.ndarray, x1: np.ndarray, key: int) -> tuple[np.ndarray, np.ndarray]:
    """ThreeFry-2x32, 20 rounds, on counter words (x0, x1) under a 64-bit key."""
    k0, k1 = U32(key & R.MASK32), U32(key >> 32)
    schedule = (k0, k1, U32(R.THREEFRY_PARITY) ^ k0 ^ k1)
    x0, x1 = x0 + schedule[0], x1 + schedule[1]
    for group in range(R.THREEFRY_GROUPS):
        rotations = R.THREEFRY_ROTATIONS[:4] if group % 2 == 0 else R.THREEFRY_ROTATIONS[4:]
        for rotation in rotations:
            x0 = x0 + x1
            x1 = _rotate_left(x1, rotation) ^ x0
        x0 = x0 + schedule[(group + 1) % 3]
        x1 = x1 + schedule[(group + 2) % 3] + U32(group + 1)
    return x0, x1


def philox4x32(x: list[np.ndarray], key: int) -> list[np.ndarray]:
    """Philox-4x32, 10 rounds, on counter words x[0..3] under a 64-bit key."""
    k0, k1 = key & R.MASK32, key >> 32
    for _ in range(R.PHILOX_ROUNDS):
        p0 = x[0].astype(U64) * U64(R.PHILOX_MULTIPLIERS[0])
        p1 = x[2].astype(U64) * U64(R.PHILOX_MULTIPLIERS[1])
        low0, high0 = _low_high(p0)
        low1, high1 = _low_high(p1)
        x = [high1 ^ x[1] ^ U32(k0), low1, high0 ^ x[3] ^ U32(k1), low0]
        k0, k1 = (k0 + R.PHILOX_KEY_STEPS[0]) & R.MASK32, (k1 + R.PHILOX_KEY_STEPS[1]) & R.MASK32
    return x


def _threefry(state: list[int], layout: R.BlockLayout) -> tuple[list[int], np.ndarray]:
    blocks = np.arange(layout.block_count, dtype=U64) + U64(state[1])
    low, high = _low_high(blocks)
    w0, w1 = threefry2x32(low, high, state[0])
    new_state = [state[0], (state[1] + layout.block_count) & R.MASK64]
    if layout.bits == 64:
        return new_state, (w0.astype(U64) | (w1.astype(U64) << U64(32))).reshape(layout.dims)
    if not layout.dims:
        return new_state, w0.reshape(())
    split = layout.split_dimension
    halves = [w.reshape(layout.half_dims) for w in (w0, w1)]
    paired = np.stack(halves, axis=split + 1)  # word c of half position h is element 2h + c
    merged = paired.reshape(tuple(2 * h if axis == split else h for axis, h in enumerate(layout.half_dims)))
    return new_state, merged[tuple(slice(0, d) for d in layout.dims)]


def _philox(state: list[int], layout: R.BlockLayout) -> tuple[list[int], np.ndarray]:
    counter_low, counter_high = (state[1], state[2]) if len(state) >= 3 else (state[1], state[0])
    offsets = np.arange(layout.block_count, dtype=U64)
    low = offsets + U64(counter_low)
    high = np.where(low < U64(counter_low), U64((counter_high + 1) & R.MASK64), U64(counter_high))
    words = philox4x32([*_low_high(low), *_low_high(high)], state[0])
    advanced_low = (counter_low + layout.block_count) & R.MASK64
    advanced_high = (counter_high + (advanced_low < counter_low)) & R.MASK64
    new_state = [state[0], advanced_low, advanced_high] if len(state) >= 3 else [state[0], advanced_low]
    n = int(np.prod(layout.dims, dtype=np.int64))
    if layout.bits == 64:
        pairs = [w.astype(U64) for w in words]
        elements = np.stack([pairs[0] | (pairs[1] << U64(32)), pairs[2] | (pairs[3] << U64(32))], axis=1)
    else:
        elements = np.stack(words, axis=1)
    return new_state, elements.reshape(-1)[:n].reshape(layout.dims)


def random_bits(algorithm: str, state: list[int], dims: tuple[int, ...], bits: int) -> tuple[list[int], np.ndarray]:
    """The new state and the generated words (u32 or u64) of rng-bit-generator."""
    layout = R.BlockLayout(R.resolved(algorithm), dims, bits)
    return (_threefry if layout.algorithm == R.THREEFRY else _philox)(state, layout)


def _rng_bit_generator(evaluator: Evaluator, instruction: Instruction, operands: list[Value]) -> Value:
    state = [int(v) for v in np.asarray(operands[0]).reshape(-1)]
    result = instruction.shape.elements[1]  # type: ignore[union-attr]
    new_state, words = random_bits(str(instruction.attrs["algorithm"]), state, result.dims, result.dtype.bits)
    # Narrower types take the low bits; signed types the same bits.
    values = words.astype(np.dtype(f"u{result.dtype.bits // 8}")).view(result.dtype.numpy)
    return np.array(new_state, dtype=U64).reshape(np.asarray(operands[0]).shape), values


HANDLERS = family_table("random_bits", globals())
