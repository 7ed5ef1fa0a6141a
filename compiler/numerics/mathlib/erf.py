"""Pinned binary64 erf: odd Taylor series near 0, Taylor expansions on intervals above."""

from __future__ import annotations

import numpy as np

from . import constants as C
from .double_double import fast_two_sum, two_prod
from .exp_log import horner
from .ieee import F64, I64

ERF_CLAMP = 6.0  # erf(x) rounds to +-1 for |x| >= 5.93
TINY = 2.0**-900
TINY_SCALE = 2.0**200
_CENTRES = np.array(C.ERF_CENTRES, dtype=F64)
_C0_HI = np.array(C.ERF_TAYLOR_C0_HI, dtype=F64)
_C0_LO = np.array(C.ERF_TAYLOR_C0_LO, dtype=F64)
_TAYLOR = np.array(C.ERF_TAYLOR, dtype=F64)  # [interval, n-1]: coefficient of d**n
_LAST = len(C.ERF_CENTRES) - 1


def _erf_small(a: np.ndarray) -> np.ndarray:
    """erf(a) for 0 <= a < 1/2: a*c0 + a^3 * P(a^2), with a*c0 exact in double-double.

    Below 2**-900 the argument is first scaled by 2**200 (exactly) so that the product
    a*c0 stays exact, and the result is scaled back with a single rounding.
    """
    tiny = a < TINY
    a = np.where(tiny, a * TINY_SCALE, a)
    ph, pl = two_prod(a, C.ERF_SMALL_C0_HI)
    z = a * a
    tail = a * (z * horner(C.ERF_SMALL_POLY, z))
    y = ph + ((pl + a * C.ERF_SMALL_C0_LO) + tail)
    return np.where(tiny, y * (1.0 / TINY_SCALE), y)


def _erf_interval(a: np.ndarray) -> np.ndarray:
    """erf(a) for 1/2 <= a <= 6: Taylor series of degree 19 around the interval centre."""
    i = np.minimum(np.floor((a - C.ERF_SMALL_LIMIT) * 2.0).astype(I64), _LAST)
    d = a - _CENTRES[i]  # exact (Sterbenz)
    coeffs = _TAYLOR[i]
    p = coeffs[:, -1]
    for n in range(coeffs.shape[1] - 2, -1, -1):
        p = p * d + coeffs[:, n]
    s, e = fast_two_sum(_C0_HI[i], p * d)
    return s + (e + _C0_LO[i])


def erf(x: np.ndarray) -> np.ndarray:
    """Pinned binary64 error function."""
    nan = np.isnan(x)
    a = np.minimum(np.where(nan, 0.0, np.abs(x)), ERF_CLAMP)
    small = a < C.ERF_SMALL_LIMIT
    y = np.empty_like(a)
    if small.any():
        y[small] = _erf_small(a[small])
    if (~small).any():
        y[~small] = _erf_interval(a[~small])
    y = np.where(x < 0.0, -y, y)
    y = np.where(x == 0.0, x, y)
    return np.where(nan, np.nan, y)
