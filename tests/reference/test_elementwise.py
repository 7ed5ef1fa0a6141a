"""Elementwise ops against the contract: IEEE arithmetic checked against MPFR in every float
format, canonical NaN, signed zeros, subnormals, and the total integer semantics."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tests.reference.oracle import (
    BITS,
    CANONICAL_NAN,
    FORMATS,
    elementwise_module,
    ieee_binary,
    ieee_round,
    ieee_round_int,
    run,
    same_bits,
    special_floats,
)

FLOAT_TYPES = ["f16", "bf16", "f32", "f64"]


def _pairs(dtype: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    values = special_floats(dtype, np.random.default_rng(seed), count=40)
    pairs = list(itertools.product(range(values.size), repeat=2))
    a = np.array([values[i] for i, _ in pairs], dtype=values.dtype)
    b = np.array([values[j] for _, j in pairs], dtype=values.dtype)
    return a, b


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
@pytest.mark.parametrize("opcode", ["add", "subtract", "multiply", "divide", "remainder"])
def test_float_arithmetic_is_ieee_in_every_format(opcode: str, dtype: str) -> None:
    a, b = _pairs(dtype, seed=hash((opcode, dtype)) % 1000)
    (out,) = run(elementwise_module(opcode, dtype, a.size, 2), a, b)
    expected = ieee_binary(opcode, a, b, dtype)
    mismatch = np.flatnonzero(out.view(BITS[dtype]) != expected.view(BITS[dtype]))
    assert mismatch.size == 0, f"{opcode} {dtype}: {a[mismatch[:4]]} {b[mismatch[:4]]} -> {out[mismatch[:4]]} want {expected[mismatch[:4]]}"


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_every_nan_a_float_op_produces_is_canonical(dtype: str) -> None:
    numpy_type = FORMATS[dtype][0]
    bits = BITS[dtype]
    payloads = np.array([CANONICAL_NAN[dtype] | 1, CANONICAL_NAN[dtype] | (1 << (np.dtype(bits).itemsize * 8 - 1)) | 3], dtype=bits)
    x = payloads.view(numpy_type)
    for opcode in ("negate", "abs", "sqrt", "floor", "round-nearest-afz", "sign"):
        (out,) = run(elementwise_module(opcode, dtype, x.size, 1), x)
        assert (out.view(bits) == CANONICAL_NAN[dtype]).all(), opcode
    inf = np.array([np.inf, 0.0], dtype=np.float32).astype(numpy_type)
    (out,) = run(elementwise_module("multiply", dtype, 2, 2), inf, inf[::-1].copy())
    assert (out.view(bits) == CANONICAL_NAN[dtype]).all()  # inf*0 and 0*inf


@pytest.mark.parametrize("dtype", FLOAT_TYPES)
def test_maximum_minimum_propagate_nan_and_order_signed_zeros(dtype: str) -> None:
    numpy_type = FORMATS[dtype][0]
    a = np.array([0.0, -0.0, -0.0, 0.0, np.nan, 1.0, -np.inf], dtype=np.float32).astype(numpy_type)
    b = np.array([-0.0, 0.0, -0.0, 0.0, 1.0, np.nan, 5.0], dtype=np.float32).astype(numpy_type)
    (mx,) = run(elementwise_module("maximum", dtype, a.size, 2), a, b)
    (mn,) = run(elementwise_module("minimum", dtype, a.size, 2), a, b)
    assert np.signbit(mx[:4].astype(np.float32)).tolist() == [False, False, True, False]
    assert np.signbit(mn[:4].astype(np.float32)).tolist() == [True, True, True, False]
    assert (mx[4:6].view(BITS[dtype]) == CANONICAL_NAN[dtype]).all()
    assert (mn[4:6].view(BITS[dtype]) == CANONICAL_NAN[dtype]).all()
    assert float(mx[6]) == 5.0 and float(mn[6]) == -np.inf


def test_subnormals_are_honoured() -> None:
    tiny = np.array([2.0**-149, 2.0**-126, -(2.0**-140)], dtype=np.float32)
    (out,) = run(elementwise_module("add", "f32", 3, 2), tiny, tiny)
    assert out.tolist() == [2.0**-148, 2.0**-125, -(2.0**-139)]
    (half,) = run(elementwise_module("divide", "f32", 3, 2), tiny, np.full(3, 2, np.float32))
    assert half.view(np.uint32).tolist() == [0, 0x00400000, 0x80000000 | (1 << 8)]  # 2^-150 ties to even: 0


def test_rounding_ops() -> None:
    x = np.array([-2.5, -1.5, -0.5, -0.3, 0.5, 1.5, 2.5, 0.49999997, -0.0, 8388609.0, np.inf], dtype=np.float32)
    (even,) = run(elementwise_module("round-nearest-even", "f32", x.size, 1), x)
    (away,) = run(elementwise_module("round-nearest-afz", "f32", x.size, 1), x)
    (floor,) = run(elementwise_module("floor", "f32", x.size, 1), x)
    (ceil,) = run(elementwise_module("ceil", "f32", x.size, 1), x)
    assert even.tolist() == [-2.0, -2.0, -0.0, -0.0, 0.0, 2.0, 2.0, 0.0, -0.0, 8388609.0, np.inf]
    assert away.tolist() == [-3.0, -2.0, -1.0, -0.0, 1.0, 2.0, 3.0, 0.0, -0.0, 8388609.0, np.inf]
    assert np.signbit(away[3]) and np.signbit(even[2]) and np.signbit(ceil[3])
    assert floor.tolist()[:4] == [-3.0, -2.0, -1.0, -1.0]


def test_sign() -> None:
    x = np.array([-3.0, -0.0, 0.0, 2.0, np.nan, -np.inf, 1e-45], dtype=np.float32)
    (out,) = run(elementwise_module("sign", "f32", x.size, 1), x)
    assert out.view(np.uint32).tolist() == [0xBF800000, 0x80000000, 0, 0x3F800000, 0x7FC00000, 0xBF800000, 0x3F800000]
    ints = np.array([-5, 0, 7, -(2**31)], dtype=np.int32)
    (out,) = run(elementwise_module("sign", "s32", 4, 1), ints)
    assert out.tolist() == [-1, 0, 1, -1]


@pytest.mark.parametrize("dtype", ["s8", "s32", "s64"])
def test_signed_division_is_total(dtype: str) -> None:
    numpy_type = np.dtype({"s8": np.int8, "s32": np.int32, "s64": np.int64}[dtype])
    info = np.iinfo(numpy_type)
    x = np.array([7, -7, 7, -7, info.min, info.min, 5, 0, info.max], dtype=numpy_type)
    y = np.array([2, 2, -2, -2, -1, 1, 0, 0, -1], dtype=numpy_type)
    (q,) = run(elementwise_module("divide", dtype, x.size, 2), x, y)
    (r,) = run(elementwise_module("remainder", dtype, x.size, 2), x, y)
    assert q.tolist() == [3, -3, -3, 3, info.min, info.min, -1, -1, -info.max]
    assert r.tolist() == [1, -1, 1, -1, 0, 0, 5, 0, 0]


def test_unsigned_division_is_total() -> None:
    x = np.array([7, 255, 0, 9], dtype=np.uint8)
    y = np.array([2, 0, 0, 4], dtype=np.uint8)
    (q,) = run(elementwise_module("divide", "u8", 4, 2), x, y)
    (r,) = run(elementwise_module("remainder", "u8", 4, 2), x, y)
    assert q.tolist() == [3, 255, 255, 2] and r.tolist() == [1, 255, 0, 1]


def test_integer_arithmetic_wraps() -> None:
    x = np.array([2**31 - 1, -(2**31), 65536, -7], dtype=np.int32)
    y = np.array([1, -1, 65536, 3], dtype=np.int32)
    (add,) = run(elementwise_module("add", "s32", 4, 2), x, y)
    (sub,) = run(elementwise_module("subtract", "s32", 4, 2), x, y)
    (mul,) = run(elementwise_module("multiply", "s32", 4, 2), x, y)
    (neg,) = run(elementwise_module("negate", "s32", 4, 1), x)
    (ab,) = run(elementwise_module("abs", "s32", 4, 1), x)
    assert add.tolist() == [-(2**31), 2**31 - 1, 131072, -4]
    assert sub.tolist() == [2**31 - 2, -(2**31) + 1, 0, -10]
    assert mul.tolist() == [2**31 - 1, -(2**31), 0, -21]
    assert neg.tolist() == [-(2**31) + 1, -(2**31), -65536, 7]
    assert ab.tolist() == [2**31 - 1, -(2**31), 65536, 7]


@pytest.mark.parametrize("dtype", ["s8", "u8", "s32", "u32", "s64"])
def test_shifts_by_the_width_or_more(dtype: str) -> None:
    numpy_type = np.dtype({"s8": np.int8, "u8": np.uint8, "s32": np.int32, "u32": np.uint32, "s64": np.int64}[dtype])
    bits = numpy_type.itemsize * 8
    negative = np.array(-1).astype(numpy_type)
    x = np.array([1, 1, 1, 0, 0], dtype=numpy_type)
    x[3] = np.array(-8).astype(numpy_type)
    x[4] = np.array(-8).astype(numpy_type)
    amounts = np.array([0, bits - 1, bits, bits + 5, 0], dtype=numpy_type)
    amounts[4] = negative  # a negative amount is a huge unsigned one
    (left,) = run(elementwise_module("shift-left", dtype, 5, 2), x, amounts)
    (logical,) = run(elementwise_module("shift-right-logical", dtype, 5, 2), x, amounts)
    (arith,) = run(elementwise_module("shift-right-arithmetic", dtype, 5, 2), x, amounts)
    top = np.array(1 << (bits - 1), dtype=np.uint64).astype(numpy_type) if numpy_type.kind == "u" else np.array(-(1 << (bits - 1))).astype(numpy_type)
    assert left.tolist() == [1, top, 0, 0, 0]
    assert logical.tolist()[:3] == [1, 0, 0] and logical[3] == 0 and logical[4] == 0
    sign_fill = negative  # -8 has its top bit set in every width
    assert arith[3] == sign_fill and arith[4] == sign_fill and arith[2] == 0


def test_integer_power() -> None:
    x = np.array([3, 2, 1, -1, 2, 0, -2, 7], dtype=np.int32)
    y = np.array([4, 31, -5, -5, 32, 0, 3, 100], dtype=np.int32)
    (out,) = run(elementwise_module("power", "s32", 8, 2), x, y)
    assert out.tolist() == [81, -(2**31), 1, 0, 0, 1, -8, pow(7, 100, 2**32) - (2**32 if pow(7, 100, 2**32) >= 2**31 else 0)]


def test_compare_float_and_total_order() -> None:
    values = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], dtype=np.float32)
    neg_nan = np.array([0xFFC00000], dtype=np.uint32).view(np.float32)
    values = np.concatenate([neg_nan, values])
    a = np.repeat(values, values.size)
    b = np.tile(values, values.size)
    (lt,) = run(elementwise_module("compare", "f32", a.size, 2, "pred", "direction=LT"), a, b)
    (eq,) = run(elementwise_module("compare", "f32", a.size, 2, "pred", "direction=EQ"), a, b)
    (ne,) = run(elementwise_module("compare", "f32", a.size, 2, "pred", "direction=NE"), a, b)
    (total,) = run(elementwise_module("compare", "f32", a.size, 2, "pred", "direction=LT, type=TOTALORDER"), a, b)
    with np.errstate(invalid="ignore"):
        assert lt.tolist() == (a < b).tolist()
        assert eq.tolist() == (a == b).tolist()  # NaN unordered, -0 == +0
        assert ne.tolist() == (a != b).tolist()
    rank = {i: i for i in range(values.size)}  # values are listed in total order
    expected = [rank[i] < rank[j] for i in range(values.size) for j in range(values.size)]
    assert total.tolist() == expected


def test_clamp_and_select() -> None:
    text = """HloModule t
ENTRY e {
  lo = f32[] parameter(0)
  x = f32[5]{0} parameter(1)
  hi = f32[] parameter(2)
  p = pred[5]{0} parameter(3)
  c = f32[5]{0} clamp(lo, x, hi)
  n = f32[5]{0} negate(x)
  s = f32[5]{0} select(p, c, n)
  ROOT t = (f32[5]{0}, f32[5]{0}) tuple(c, s)
}
"""
    x = np.array([-5.0, 0.5, 9.0, np.nan, -0.0], dtype=np.float32)
    p = np.array([True, False, True, True, False])
    c, s = run(text, np.float32(0.0), x, np.float32(1.0), p)
    assert c.view(np.uint32).tolist() == [0, 0x3F000000, 0x3F800000, 0x7FC00000, 0]
    assert s.view(np.uint32).tolist() == [0, 0xBF000000, 0x3F800000, 0x7FC00000, 0]


def test_float_to_integer_converts_saturate() -> None:
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.9, -2.9, -0.0, 2147483520.0, 255.5, -1.0], dtype=np.float32)
    (s32,) = run(elementwise_module("convert", "f32", x.size, 1, "s32"), x)
    (u8,) = run(elementwise_module("convert", "f32", x.size, 1, "u8"), x)
    (u64,) = run(elementwise_module("convert", "f32", x.size, 1, "u64"), x)
    i32 = np.iinfo(np.int32)
    assert s32.tolist() == [0, i32.max, i32.min, i32.max, i32.min, 2, -2, 0, 2147483520, 255, -1]
    assert u8.tolist() == [0, 255, 0, 255, 0, 2, 0, 0, 255, 255, 0]
    assert u64.tolist() == [0, 2**64 - 1, 0, 3000000000, 0, 2, 0, 0, 2147483520, 255, 0]


@pytest.mark.parametrize("target", ["f16", "bf16", "f32"])
def test_float_narrowing_converts_round_once(target: str) -> None:
    rng = np.random.default_rng(7)
    values = special_floats("f64", rng, count=2000)
    # Values near the narrow format's rounding boundaries, where rounding twice would differ.
    boundary = (1 + 2.0 ** -np.array([8, 11, 24])[:, None] * (1 + 2.0 ** -np.arange(20, 40))).reshape(-1)
    values = np.concatenate([values, boundary, -boundary])
    (out,) = run(elementwise_module("convert", "f64", values.size, 1, target), values)
    expected = ieee_round(values, target)
    assert same_bits(out, expected)


@pytest.mark.parametrize("target", ["f16", "bf16", "f32", "f64"])
def test_integer_to_float_converts_round_once(target: str) -> None:
    big = [2**63 - 1, -(2**63), 2**53 + 1, 2**24 + 1, 2**24 + 3, (2**60) + (2**36) + 1, -(2**40) - 1, 65520, 65519, 3]
    big += [int(v) for v in np.random.default_rng(3).integers(-(2**63), 2**63 - 1, size=200, dtype=np.int64)]
    x = np.array(big, dtype=np.int64)
    (out,) = run(elementwise_module("convert", "s64", x.size, 1, target), x)
    assert same_bits(out, ieee_round_int(big, target))


def test_bitcast_convert() -> None:
    x = np.array([1.0, -0.0, np.nan], dtype=np.float32)
    nan_bits = np.array([0x7FC00001], dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, nan_bits])
    (bits,) = run(elementwise_module("bitcast-convert", "f32", 4, 1, "s32"), x)
    assert bits.view(np.uint32).tolist() == [0x3F800000, 0x80000000, 0x7FC00000, 0x7FC00001]
    text = """HloModule t
ENTRY e {
  p = u32[2]{0} parameter(0)
  ROOT b = u8[2,4]{1,0} bitcast-convert(p)
}
"""
    (out,) = run(text, np.array([0x04030201, 0xAABBCCDD], dtype=np.uint32))
    assert out.tolist() == [[1, 2, 3, 4], [0xDD, 0xCC, 0xBB, 0xAA]]


def test_is_finite_and_not() -> None:
    x = np.array([1.0, np.inf, -np.inf, np.nan, 1e-45], dtype=np.float32)
    (out,) = run(elementwise_module("is-finite", "f32", 5, 1, "pred"), x)
    assert out.tolist() == [True, False, False, False, True]
    (inv,) = run(elementwise_module("not", "s32", 2, 1), np.array([0, 5], dtype=np.int32))
    assert inv.tolist() == [-1, -6]
    (pnot,) = run(elementwise_module("not", "pred", 2, 1), np.array([True, False]))
    assert pnot.tolist() == [False, True]

