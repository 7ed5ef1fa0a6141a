"""Floating-point building blocks of the numerics contract: canonical NaNs, rounding to the
narrow types, the exactly rounded fused multiply-add, and the IEEE total order.

Everything here is exact IEEE-754 arithmetic on numpy arrays; none of it depends on the host's
floating-point environment beyond round-to-nearest-even with subnormals honoured, which
`check_fp_environment` verifies.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np

from compiler.errors import FloatingPointEnvironmentError
from core.dtypes import BF16, F16, F32, F64, DType, FloatLayout

_BITS_DTYPES = {8: np.dtype(np.uint8), 16: np.dtype(np.uint16), 32: np.dtype(np.uint32), 64: np.dtype(np.uint64)}


def bits_dtype(dtype: DType) -> np.dtype:
    """The unsigned integer numpy type of the same width, for viewing bit patterns."""
    return _BITS_DTYPES[dtype.bits]


def canonical_nan(dtype: DType) -> np.ndarray:
    """A 0-d array holding the canonical quiet NaN of `dtype`."""
    return np.array(dtype.float_layout.canonical_nan, dtype=bits_dtype(dtype)).view(dtype.numpy)


def canonicalize_nans(array: np.ndarray, dtype: DType) -> np.ndarray:
    """`array` with every NaN replaced by the canonical NaN (a copy only when needed)."""
    if not dtype.is_float:
        return array
    nan_mask = np.isnan(to_f32(array, dtype) if dtype is BF16 or dtype.is_float8 else array)
    if not nan_mask.any():
        return array
    out = np.array(array, copy=True)
    out[nan_mask] = canonical_nan(dtype)
    return out


def f32_to_bf16(values: np.ndarray) -> np.ndarray:
    """Rounds f32 to bfloat16, nearest-even, overflow to infinity, NaN to the canonical NaN."""
    bits = np.require(values, dtype=np.float32, requirements="C").view(np.uint32).astype(np.uint64)
    rounding_bias = ((bits >> 16) & 1) + 0x7FFF
    rounded = ((bits + rounding_bias) >> 16).astype(np.uint16)
    rounded = np.where(np.isnan(values), np.uint16(BF16.float_layout.canonical_nan), rounded)
    return rounded.astype(np.uint16).view(ml_dtypes.bfloat16)


def round_from_f32(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Rounds f32 values to `dtype` (f16, bf16 or f32), nearest-even, canonical NaN."""
    values = np.asarray(values, dtype=np.float32)
    if dtype is F32:
        return canonicalize_nans(values, F32)
    if dtype is BF16:
        return f32_to_bf16(values)
    if dtype is F16:
        # numpy's float32 -> float16 conversion is the IEEE nearest-even conversion.
        with np.errstate(over="ignore"):
            return canonicalize_nans(values.astype(np.float16), F16)
    if dtype.is_float8:
        return f32_to_float8(values, dtype)
    raise ValueError(f"cannot round f32 to {dtype.name}")


def to_f32(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Widens f16/bf16/f32 values to f32 exactly, NaN payloads (and the signaling bit)
    moved along. Integer code: numpy's float16 conversion uses the host's instruction where
    there is one, and Arm's quiets signaling NaNs where x86's does not."""
    if dtype is BF16:
        bits = np.asarray(np.asarray(values).view(np.uint16).astype(np.uint32) << 16)
        return bits.view(np.float32)  # an array for rank 0 too (numpy makes the shift a scalar)
    if dtype.is_float8:
        return float8_to_f32(values, dtype)
    if dtype is not F16:
        return np.asarray(values).astype(np.float32)
    half = np.asarray(values).view(np.uint16).astype(np.uint32)
    sign = (half & 0x8000) << 16
    magnitude = half & 0x7FFF
    moved = magnitude << 13
    normal = moved + ((127 - 15) << 23)
    special = moved | 0x7F800000
    # Subnormals count units of 2^-24: exact in binary32 either way.
    subnormal = (magnitude.astype(np.float32) * np.float32(2.0**-24)).view(np.uint32)
    bits = np.where(magnitude >= 0x7C00, special, np.where(magnitude < 0x0400, subnormal, normal))
    return np.asarray(bits.astype(np.uint32) | sign).view(np.float32).reshape(np.shape(values))


def literal_from_float64(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Applies the literal rule: binary64 value -> binary32 -> `dtype`, each nearest-even."""
    values = np.asarray(values, dtype=np.float64)
    if dtype is F64:
        return canonicalize_nans(values, F64)
    with np.errstate(over="ignore"):
        as_f32 = values.astype(np.float32)
    return round_from_f32(as_f32, dtype)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fma(a, b, c) on float32 arrays with one rounding, as IEEE fusedMultiplyAdd.

    The product of two binary32 values is exact in binary64. The sum with c is computed in
    binary64 with round-to-odd (TwoSum gives the rounding error; an inexact even result is
    moved one ulp towards the error), and binary64 has more than 2*24+2 bits, so the final
    rounding to binary32 is the correctly rounded fma (Boldo and Melquiond, "Emulation of FMA
    and correctly rounded sums: proved algorithms using rounding to odd", 2008).
    """
    a64 = np.asarray(a, dtype=np.float32).astype(np.float64)
    b64 = np.asarray(b, dtype=np.float32).astype(np.float64)
    c64 = np.asarray(c, dtype=np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        product = a64 * b64
        total = product + c64
        # TwoSum (Knuth): the exact error of product + c64.
        virtual_c = total - product
        virtual_p = total - virtual_c
        error = (product - virtual_p) + (c64 - virtual_c)
    bits = total.view(np.uint64)
    inexact_even = np.isfinite(total) & (error != 0) & ((bits & 1) == 0)
    if inexact_even.any():
        toward = np.where(error > 0, np.inf, -np.inf)
        total = np.where(inexact_even, np.nextafter(total, toward), total)
    with np.errstate(over="ignore", invalid="ignore"):
        result = total.astype(np.float32)
    return canonicalize_nans(result, F32)


def total_order_key(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Signed integers that order like the IEEE totalOrder predicate on `values`:
    -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN."""
    unsigned = np.require(values, requirements="C").view(bits_dtype(dtype))
    signed = unsigned.view(np.dtype(f"int{dtype.bits}"))
    magnitude_mask = np.array((1 << (dtype.bits - 1)) - 1, dtype=signed.dtype)
    # Negative values: flip the magnitude bits so that larger magnitudes sort lower.
    return np.where(signed < 0, signed ^ magnitude_mask, signed)


def check_fp_environment() -> None:
    """Raises RuntimeError unless this process rounds to nearest with subnormals honoured.

    A library loaded into the process can switch on flush-to-zero or denormals-are-zero (code
    built with fast-math does so when it is loaded); then IEEE arithmetic, and so the reference,
    would be wrong. Checked, never assumed.
    """
    tiny = np.array([2.0**-126], dtype=np.float32)
    half = np.array([0.5], dtype=np.float32)
    subnormal = tiny * half
    if subnormal[0] == 0 or subnormal.view(np.uint32)[0] != 0x00400000:
        raise FloatingPointEnvironmentError("floating-point environment flushes subnormal results to zero (FTZ)")
    denormal_in = np.array([1], dtype=np.uint32).view(np.float32)
    if (denormal_in * np.float32(2.0))[0] == 0:
        raise FloatingPointEnvironmentError("floating-point environment treats subnormal inputs as zero (DAZ)")
    one = np.array([1.0], dtype=np.float32)
    if (one + np.float32(2.0**-24))[0] != 1.0 or (one + np.float32(3 * 2.0**-24))[0] == 1.0:
        raise FloatingPointEnvironmentError("floating-point environment does not round to nearest-even")


def _fma_f64_scalar(a: float, b: float, c: float) -> float:
    """fma(a, b, c) on Python floats, exactly rounded, by integer arithmetic."""
    if math.isfinite(a) and math.isfinite(b) and math.isinf(c):
        return c  # the exact product is finite, even where a * b would overflow
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c
    if a == 0.0 or b == 0.0:
        # The product is an exact signed zero; IEEE addition then rounds once.
        return a * b + c
    total = Fraction(a) * Fraction(b) + Fraction(c)
    if total == 0:
        return 0.0
    try:
        return total.numerator / total.denominator
    except OverflowError:
        return math.inf if total > 0 else -math.inf


_fma_f64_vectorized = np.frompyfunc(_fma_f64_scalar, 3, 1)


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """fma(a, b, c) on float64 arrays with one rounding. Exact rational arithmetic: slow, and
    only used where binary64 dot products or convolutions need it."""
    a, b, c = (np.asarray(v, dtype=np.float64) for v in (a, b, c))
    result = np.asarray(_fma_f64_vectorized(a, b, c), dtype=np.float64)  # a scalar for 0-d inputs
    return canonicalize_nans(result, F64)


def round_to_odd_f32(values: np.ndarray) -> np.ndarray:
    """Rounds float64 values to float32 with round-to-odd: truncate towards zero and, when
    inexact, make the last significand bit 1. Rounding this result to any narrower format
    with nearest-even gives the same bits as rounding the float64 value directly."""
    values = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = values.astype(np.float32)
    widened = nearest.astype(np.float64)
    inexact = np.isfinite(values) & (widened != values)
    even = (nearest.view(np.uint32) & 1) == 0
    adjust = inexact & even
    if adjust.any():
        # Nearest-even was either side of the value; the odd neighbour on the value's side
        # is the round-to-odd result. An overflow to infinity steps back to the largest float.
        toward = np.where(values > widened, np.float32(np.inf), np.float32(-np.inf))
        nearest = np.where(adjust, np.nextafter(nearest, toward), nearest)
        overflowed = adjust & np.isinf(nearest)
        nearest = np.where(overflowed, np.copysign(np.float32(3.4028234663852886e38), values), nearest)
        nearest = nearest.astype(np.float32)
    return nearest


def round_from_f64(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Rounds float64 values to `dtype` with one nearest-even rounding, canonical NaN."""
    values = np.asarray(values, dtype=np.float64)
    if dtype is F64:
        return canonicalize_nans(values, F64)
    if dtype is F32:
        with np.errstate(over="ignore", invalid="ignore"):
            return canonicalize_nans(values.astype(np.float32), F32)
    return round_from_f32(round_to_odd_f32(values), dtype)


def reduce_precision(values: np.ndarray, dtype: DType, exponent_bits: int, mantissa_bits: int) -> np.ndarray:
    """XLA's reduce-precision, on the bits: the mantissa rounded to `mantissa_bits`, nearest
    even (a carry moves into the exponent); then, when the exponent is narrowed, a value
    beyond the narrow format's largest exponent becomes infinity and one at or below its
    smallest normal exponent's predecessor becomes zero, sign kept (its subnormals flush).
    A NaN gives the canonical NaN, also when no mantissa bit is kept (XLA:CPU keeps a NaN
    a NaN there too)."""
    layout = dtype.float_layout
    unsigned = bits_dtype(dtype)
    bits = np.require(values, dtype=dtype.numpy, requirements="C").view(unsigned).astype(np.uint64)
    width_mask = np.uint64((1 << layout.bits) - 1)
    sign = bits & np.uint64(layout.sign_mask)
    exponent_mask = np.uint64(layout.inf_bits)
    is_nan = (bits & np.uint64(layout.abs_mask)) > exponent_mask
    source_exponent_bits = layout.bits - 1 - layout.mantissa_bits
    if mantissa_bits < layout.mantissa_bits:
        shift = layout.mantissa_bits - mantissa_bits
        last_kept = (bits >> np.uint64(shift)) & np.uint64(1)
        rounded = (bits + last_kept + np.uint64((1 << (shift - 1)) - 1)) & width_mask
        bits = rounded & np.uint64(~((1 << shift) - 1) & ((1 << layout.bits) - 1))
    if exponent_bits < source_exponent_bits:
        bias = (1 << (source_exponent_bits - 1)) - 1
        narrow_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & exponent_mask
        overflows = exponent > np.uint64((bias + narrow_bias) << layout.mantissa_bits)
        underflows = exponent <= np.uint64((bias - narrow_bias) << layout.mantissa_bits)
        bits = np.where(overflows, sign | exponent_mask, bits)
        bits = np.where(underflows, sign, bits)
    bits = np.where(is_nan, np.uint64(layout.canonical_nan), bits)
    return bits.astype(unsigned).view(dtype.numpy)


# --- 8-bit floats -------------------------------------------------------------------------------


def float8_nan(codes: np.ndarray, layout: FloatLayout) -> np.ndarray:
    """Which 8-bit codes (uint) are NaN in `layout`'s family."""
    magnitude = codes & 0x7F
    if layout.specials == "fnuz":
        return codes == 0x80
    if layout.specials == "fn":
        return magnitude == 0x7F
    return magnitude > layout.inf_bits


def float8_to_f32(values: np.ndarray, dtype: DType) -> np.ndarray:
    """8-bit float values (as their codes) widened to f32, exactly; a NaN gives f32's
    canonical NaN."""
    layout = dtype.float_layout
    m, bias = layout.mantissa_bits, layout.bias
    codes = np.asarray(values).view(np.uint8).astype(np.uint32)
    sign = (codes & 0x80) << 24
    magnitude = codes & 0x7F
    normal = (magnitude << (23 - m)) + ((127 - bias) << 23)
    subnormal = ((magnitude & ((1 << m) - 1)).astype(np.float32) * np.float32(2.0 ** (1 - bias - m))).view(np.uint32)
    bits = np.where(magnitude >> m == 0, subnormal, normal) | sign
    if layout.specials == "ieee":
        bits = np.where(magnitude == layout.inf_bits, sign | 0x7F800000, bits)
    bits = np.where(float8_nan(codes, layout), F32.float_layout.canonical_nan, bits)
    return np.asarray(bits.astype(np.uint32)).view(np.float32).reshape(np.shape(values))


def float8_overflow_bound(layout: FloatLayout) -> tuple[int, bool]:
    """The f32 bits of the midpoint above the largest finite value, and whether the
    midpoint itself overflows (it does when the largest value's mantissa is odd: the tie
    goes to the even neighbour above)."""
    largest = layout.max_finite
    exponent = math.frexp(largest)[1] - 1
    midpoint = largest + 2.0 ** (exponent - layout.mantissa_bits - 1)
    odd = round(largest / 2.0 ** (exponent - layout.mantissa_bits)) % 2 == 1
    return int(np.float32(midpoint).view(np.uint32)), odd


def float8_overflow_code(layout: FloatLayout) -> int:
    """What a value beyond the largest finite one becomes: infinity where the format has
    one (the sign added), else the canonical NaN."""
    return layout.inf_bits if layout.specials == "ieee" else layout.canonical_nan


def f32_to_float8(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Rounds f32 values to an 8-bit float, nearest-even: subnormals kept, a value beyond
    the largest finite one gives infinity or (no infinity in the format) the canonical NaN,
    NaN the canonical NaN; -0 stays -0 except in the fnuz formats, which have none."""
    layout = dtype.float_layout
    m, bias = layout.mantissa_bits, layout.bias
    shift = 23 - m
    bits = np.require(values, dtype=np.float32, requirements="C").view(np.uint32).astype(np.int64)
    sign = (bits >> 24) & 0x80
    magnitude = bits & 0x7FFFFFFF
    odd = (magnitude >> shift) & 1
    normal = (magnitude + ((bias - 127) << 23) + (1 << (shift - 1)) - 1 + odd) >> shift
    # Below the smallest normal, adding 2^(1 - bias - m + 23) puts the f32 ulp at the
    # format's subnormal spacing: the f32 addition rounds nearest-even.
    offset = np.float32(2.0 ** (24 - bias - m))
    with np.errstate(over="ignore", invalid="ignore"):
        shifted = (np.abs(np.asarray(values, np.float32)) + offset).view(np.uint32).astype(np.int64)
    subnormal = shifted - int(offset.view(np.uint32))
    tiny = magnitude < int(np.float32(2.0 ** (1 - bias)).view(np.uint32))
    bound, midpoint_overflows = float8_overflow_bound(layout)
    overflow = magnitude >= bound if midpoint_overflows else magnitude > bound
    code = np.where(tiny, subnormal, normal)
    if layout.specials == "ieee":
        code = np.where(overflow, layout.inf_bits, code) | sign
    else:
        code = np.where(overflow, layout.canonical_nan, code)
        has_sign = ~overflow if layout.specials == "fn" else ~overflow & (code != 0)
        code = np.where(has_sign, code | sign, code)
    code = np.where(magnitude > 0x7F800000, layout.canonical_nan, code)
    return np.asarray(code.astype(np.uint8)).view(dtype.numpy).reshape(np.shape(values))
