"""Pinned binary64 erf: odd Taylor series near 0, Taylor expansions on intervals above
(DSL code)."""

from __future__ import annotations

import math

from . import constants as C
from .double_double import fast_two_sum, horner, two_prod
from .dsl import Ops, Table, Value

ERF_CLAMP = 6.0  # erf(x) rounds to +-1 for |x| >= 5.93
TINY = 2.0**-900
TINY_SCALE = 2.0**200
NAN = math.nan
CENTRES = Table("erf_centres", C.ERF_CENTRES)
C0_HI = Table("erf_c0_hi", C.ERF_TAYLOR_C0_HI)
C0_LO = Table("erf_c0_lo", C.ERF_TAYLOR_C0_LO)
# TAYLOR[n - 1]: the coefficient of d**n of every interval (one table per power of d).
TAYLOR = tuple(
    Table(f"erf_taylor_{n}", [row[n - 1] for row in C.ERF_TAYLOR])
    for n in range(1, len(C.ERF_TAYLOR[0]) + 1)
)
_LAST = len(C.ERF_CENTRES) - 1


def _erf_small(ops: Ops, a: Value) -> Value:
    """erf(a) for 0 <= a < 1/2: a*c0 + a^3 * P(a^2), with a*c0 exact in double-double.

    Below 2**-900 the argument is first scaled by 2**200 (exactly) so that the product
    a*c0 stays exact, and the result is scaled back with a single rounding.
    """
    tiny = a < TINY
    a = ops.where(tiny, a * TINY_SCALE, a)
    ph, pl = two_prod(a, C.ERF_SMALL_C0_HI)
    z = a * a
    tail = a * (z * horner(C.ERF_SMALL_POLY, z))
    y = ph + ((pl + a * C.ERF_SMALL_C0_LO) + tail)
    return ops.where(tiny, y * (1.0 / TINY_SCALE), y)


def _erf_interval(ops: Ops, a: Value) -> Value:
    """erf(a) for 1/2 <= a <= 6: Taylor series of degree 19 around the interval centre."""
    i = ops.minimum(ops.to_int(ops.floor((a - C.ERF_SMALL_LIMIT) * 2.0)), _LAST)
    d = a - ops.table(CENTRES, i)  # exact (Sterbenz)
    p = ops.table(TAYLOR[-1], i)
    for n in range(len(TAYLOR) - 2, -1, -1):
        p = p * d + ops.table(TAYLOR[n], i)
    s, e = fast_two_sum(ops.table(C0_HI, i), p * d)
    return s + (e + ops.table(C0_LO, i))


def erf(ops: Ops, x: Value) -> Value:
    """Pinned binary64 error function."""
    nan = ops.isnan(x)
    a = ops.minimum(ops.where(nan, 0.0, ops.abs(x)), ERF_CLAMP)
    small = a < C.ERF_SMALL_LIMIT
    y = ops.branch(
        small,
        lambda v: _erf_small(ops, v),
        lambda v: _erf_interval(ops, v),
        (a,),
        safe_true=(0.0,),
        safe_false=(1.0,),
    )
    y = ops.where(x < 0.0, -y, y)
    y = ops.where(x == 0.0, x, y)
    return ops.where(nan, NAN, y)
