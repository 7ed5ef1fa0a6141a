"""Exact bit-level helpers on binary64 values used by the pinned algorithms (DSL code).

Everything here is exact: bit manipulation, integer arithmetic on bit patterns and
multiplication by powers of two that stay in the normal range. Bit patterns are int64
(the binary64 bits reinterpreted); every mask below has the sign bit clear or is applied
to non-negative values, so signed shifts equal logical ones.
"""

from __future__ import annotations

from .dsl import Ops, Value

EXP_MASK = 0x7FF0000000000000
FRAC_MASK = 0x000FFFFFFFFFFFFF
ONE_BITS = 0x3FF0000000000000
SMALLEST_NORMAL = 2.0**-1022
TWO_POW_54 = 2.0**54


def pow2(ops: Ops, n: Value) -> Value:
    """2.0**n for int64 n in [-1022, 1023], built from its bit pattern (exact)."""
    return ops.from_bits((n + 1023) << 52)


def scale_by_pow2(ops: Ops, value: Value, n: Value) -> Value:
    """value * 2**n for |n| <= 2044, as two multiplications by 2**(n//2) and 2**(n - n//2).

    The first product is exact when value is a normal number near 1; the second performs
    the only rounding (to the subnormal grid or to infinity when the result is out of the
    normal range).
    """
    n1 = n >> 1
    return (value * pow2(ops, n1)) * pow2(ops, n - n1)


def biased_exponent(ops: Ops, x: Value) -> Value:
    """The 11-bit biased exponent field of each element, as int64."""
    return (ops.bits(x) & EXP_MASK) >> 52


def decompose(ops: Ops, x: Value) -> tuple[Value, Value]:
    """For finite x > 0 (subnormals included): (e, m) with x = m * 2**e, m in [1, 2)."""
    subnormal = x < SMALLEST_NORMAL
    scaled = ops.where(subnormal, x * TWO_POW_54, x)
    bits = ops.bits(scaled)
    e = ((bits & EXP_MASK) >> 52) - 1023 - ops.where(subnormal, 54, 0)
    m = ops.from_bits((bits & FRAC_MASK) | ONE_BITS)
    return e, m


def is_integer(ops: Ops, y: Value) -> Value:
    """True where y is a finite integer value."""
    return ops.isfinite(y) & (ops.floor(y) == y)


def is_odd_integer(ops: Ops, y: Value) -> Value:
    """True where y is a finite odd integer (|y| >= 2**53 is always even)."""
    half = ops.floor(y * 0.5)
    return is_integer(ops, y) & (y - (half + half) == 1.0)
