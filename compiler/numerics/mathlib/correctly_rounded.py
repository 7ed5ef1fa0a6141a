"""Correctly rounded binary32 unary functions.

Each element is evaluated with the pinned binary64 algorithm (relative error below 2**-51,
measured) and rounded to binary32. The binary32 result is the correctly rounded one unless
the binary64 value lies close to a rounding boundary of the binary32 grid: a midpoint
between two adjacent binary32 values (on the subnormal grid too) or the overflow threshold
2**128 - 2**103. Elements within AMBIGUITY_BAND (relative) of a boundary, exact midpoints
included, are recomputed with MPFR, which rounds correctly by construction.
"""

from __future__ import annotations

import numpy as np

from .dsl import Ops, Value
from .mpfr_reference import correctly_rounded_f32
from .pinned_f64 import PINNED_F64

# The pinned binary64 functions are accurate to about 2**-52 relative; the band leaves a
# safety factor of 2**11 over that.
AMBIGUITY_BAND = 2.0**-40

_F32_MAX_BITS = 0x7F7FFFFF
_F32_INF_BITS = 0x7F800000
_TWO_POW_128 = 2.0**128
_MIN_SUBNORMAL_F32 = 2.0**-149


def ambiguous(v: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Mask of elements whose binary64 value v is too close to a binary32 rounding boundary.

    r must be v rounded to binary32. Non-finite v are never ambiguous: the pinned binary64
    functions return infinities and NaN only where the exact result is one (or overflows
    binary64, which is far beyond the binary32 range).
    """
    a = np.abs(v)
    b = np.abs(r).view(np.int32)
    ra = np.abs(r).astype(np.float64)
    up = (b + 1).view(np.float32).astype(np.float64)
    dn = (b - 1).view(np.float32).astype(np.float64)
    # Treat 2**128 as the binary32 value above FLT_MAX: its midpoint with FLT_MAX is the
    # overflow threshold. Above infinity there is no boundary; below +0, -2**-149.
    is_inf = b == _F32_INF_BITS
    ra = np.where(is_inf, _TWO_POW_128, ra)
    up = np.where(b == _F32_MAX_BITS, _TWO_POW_128, up)
    up = np.where(is_inf, np.inf, up)
    dn = np.where(b == 0, -_MIN_SUBNORMAL_F32, dn)
    d = a - ra
    dist_up = (up - ra) * 0.5 - d
    dist_dn = d + (ra - dn) * 0.5
    dist = np.minimum(dist_up, dist_dn)
    return np.isfinite(a) & (dist <= a * AMBIGUITY_BAND)


def unary_f32(name: str, x: np.ndarray) -> np.ndarray:
    """Correctly rounded binary32 name(x) for a 1-D float32 array."""
    v = PINNED_F64[name](x.astype(np.float64))
    r = v.astype(np.float32)
    for i in np.flatnonzero(ambiguous(v, r)).tolist():
        r[i] = correctly_rounded_f32(name, float(x[i]))
    return r


# Half the binary32 precision gap of binary64: a binary32 midpoint m in the normal range has
# binary64 bits ending in 1 followed by 28 zeros (the 29 bits below binary32's last bit).
_LOW29 = (1 << 29) - 1
_MIDPOINT_LOW29 = 1 << 28
# The AMBIGUITY_BAND around a value in [2**e, 2**(e+1)) is below 2**13 binary64 ulps of
# that binade (and of the binade below); this margin doubles that.
_NEAR_ULPS = 1 << 14
_F32_MIN_NORMAL_BITS = 0x3810000000000000  # 2**-126 as binary64 bits
_SUBNORMAL_GRID_SCALE = 2.0**149  # one binary32 subnormal step becomes 1
_SUBNORMAL_NEAR_STEPS = 2.0**-16


def near_f32_boundary(ops: Ops, v: Value) -> Value:
    """Mask of binary64 values v that may be within AMBIGUITY_BAND of a binary32 rounding
    boundary (DSL code; a cheap superset of `ambiguous`, with no false negatives).

    True where the low 29 fraction bits of v are within 2**14 of a midpoint's pattern (this
    covers every midpoint in the binary32 normal range, and the overflow threshold
    2**128 - 2**103, which is the midpoint above FLT_MAX), or where 0 < |v| < 2**-126 (the
    subnormal range, where the grid is 2**-149 whatever the exponent) and |v| is within
    2**-16 grid steps of a midpoint of that grid (an odd multiple of 2**-150; the band is
    below |v| * 2**-40 < 2**-17 steps there). The compiled binary32 functions look their
    inputs up in the exception table only where this holds.
    """
    bits = ops.bits(v)
    # low in [MID - NEAR, MID + NEAR], as one wrapped offset (the sign and exponent bits
    # above bit 28 do not reach the low 29 after the mask).
    near = ((bits + (_LOW29 + 1 - (_MIDPOINT_LOW29 - _NEAR_ULPS))) & _LOW29) <= 2 * _NEAR_ULPS
    mag = bits & 0x7FFFFFFFFFFFFFFF
    tiny = (mag > 0) & (mag < _F32_MIN_NORMAL_BITS)
    # In units of the subnormal grid: |v| * 2**149 is exact (a power of two, the product
    # below 2**23), as are its distance to the floor and to the midpoint above it.
    steps = ops.abs(v) * _SUBNORMAL_GRID_SCALE
    off_midpoint = ops.abs(steps - ops.floor(steps) - 0.5)
    return near | (tiny & (off_midpoint <= _SUBNORMAL_NEAR_STEPS))
