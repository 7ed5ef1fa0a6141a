"""Exact bit-level helpers on binary64 arrays used by the pinned algorithms.

Everything here is exact: bit manipulation, integer arithmetic on bit patterns and
multiplication by powers of two that stay in the normal range.
"""

from __future__ import annotations

import numpy as np

F64 = np.float64
U64 = np.uint64
I64 = np.int64

EXP_MASK = np.uint64(0x7FF0000000000000)
FRAC_MASK = np.uint64(0x000FFFFFFFFFFFFF)
ONE_BITS = np.uint64(0x3FF0000000000000)
SMALLEST_NORMAL = 2.0**-1022
TWO_POW_54 = 2.0**54


def pow2(n: np.ndarray) -> np.ndarray:
    """2.0**n for int64 n in [-1022, 1023], built from its bit pattern (exact)."""
    return ((n + 1023).astype(U64) << U64(52)).view(F64)


def scale_by_pow2(value: np.ndarray, n: np.ndarray) -> np.ndarray:
    """value * 2**n for |n| <= 2044, as two multiplications by 2**(n//2) and 2**(n - n//2).

    The first product is exact when value is a normal number near 1; the second performs
    the only rounding (to the subnormal grid or to infinity when the result is out of the
    normal range).
    """
    n1 = n >> 1
    return (value * pow2(n1)) * pow2(n - n1)


def biased_exponent(x: np.ndarray) -> np.ndarray:
    """The 11-bit biased exponent field of each element, as int64."""
    return ((x.view(U64) & EXP_MASK) >> U64(52)).astype(I64)


def decompose(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For finite x > 0 (subnormals included): (e, m) with x = m * 2**e, m in [1, 2)."""
    subnormal = x < SMALLEST_NORMAL
    scaled = np.where(subnormal, x * TWO_POW_54, x)
    bits = scaled.view(U64)
    e = ((bits & EXP_MASK) >> U64(52)).astype(I64) - 1023 - np.where(subnormal, 54, 0)
    m = ((bits & FRAC_MASK) | ONE_BITS).view(F64)
    return e, m


def is_integer(y: np.ndarray) -> np.ndarray:
    """True where y is a finite integer value."""
    return np.isfinite(y) & (np.floor(y) == y)


def is_odd_integer(y: np.ndarray) -> np.ndarray:
    """True where y is a finite odd integer (|y| >= 2**53 is always even)."""
    half = np.floor(y * 0.5)
    return is_integer(y) & (y - (half + half) == 1.0)
