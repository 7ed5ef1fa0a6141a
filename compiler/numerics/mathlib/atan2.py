"""Pinned binary64 atan2 with C99 Annex F special cases (F.10.1.4) (DSL code)."""

from __future__ import annotations

import math

from . import constants as C
from .double_double import dd_divide, fast_two_sum, horner, two_prod, two_sum
from .dsl import Ops, Table, Value
from .ieee import decompose, scale_by_pow2

RESIDUAL_MIN = 2.0**-960
NAN = math.nan
ATAN_HI = Table("atan_hi", C.ATAN_HI)
ATAN_LO = Table("atan_lo", C.ATAN_LO)


def _quotient(ops: Ops, num: Value, den: Value) -> tuple[Value, Value]:
    """th + tl ~ num/den for 0 < num <= den finite: th = RN(num/den), tl from the residual.

    The residual num - th*den is computed exactly on num and den scaled by 2**-e, where
    den = m * 2**e, m in [1, 2); it is dropped (tl = 0) when the scaled num is below
    2**-960, where the product th*den' could underflow.
    """
    th = num / den
    e, _ = decompose(ops, den)
    den_s = scale_by_pow2(ops, den, -e)
    num_s = scale_by_pow2(ops, num, -e)
    p, pe = two_prod(th, den_s)
    tl = ((num_s - p) - pe) / den_s
    return th, ops.where(num_s < RESIDUAL_MIN, 0.0, tl)


def _atan_unit(ops: Ops, th: Value, tl: Value) -> tuple[Value, Value]:
    """atan(t) ~ hi + lo for t = th + tl, 0 <= th <= 1.

    c = i/32 with i = rint(32 th); atan(t) = atan(c) + atan(v), v = (t - c)/(1 + t c),
    |v| <= 1/64, atan(v) = v + v^3 * P(v^2).
    """
    i = ops.to_int(ops.rint(th * C.ATAN_TABLE_SIZE))
    c = ops.to_float(i) * (1.0 / C.ATAN_TABLE_SIZE)
    num = th - c  # exact (Sterbenz, or c = 0)
    ph, pl = two_prod(th, c)
    dh, dl = fast_two_sum(1.0, ph)
    dl = dl + (pl + tl * c)
    vh, vl = dd_divide(num, tl, dh, dl)
    z = vh * vh
    tail = (z * vh) * horner(C.ATAN_POLY, z)
    s, e = two_sum(ops.table(ATAN_HI, i), vh)
    lo = e + (ops.table(ATAN_LO, i) + (vl + tail))
    return fast_two_sum(s, lo)


def _sub_from(ch: float, cl: float, h: Value, lo: Value) -> tuple[Value, Value]:
    """(ch + cl) - (h + lo) in double-double."""
    s, e = two_sum(ch, -h)
    return fast_two_sum(s, e + (cl - lo))


def atan2(ops: Ops, y: Value, x: Value) -> Value:
    """Pinned binary64 atan2(y, x)."""
    ay = ops.abs(y)
    ax = ops.abs(x)
    general = ops.isfinite(x) & ops.isfinite(y) & (x != 0.0) & (y != 0.0)
    ay_g = ops.where(general, ay, 1.0)
    ax_g = ops.where(general, ax, 1.0)
    swap = ay_g > ax_g
    th, tl = _quotient(ops, ops.where(swap, ax_g, ay_g), ops.where(swap, ay_g, ax_g))
    h, lo = _atan_unit(ops, th, tl)
    sh, sl = _sub_from(C.TRIG_PIO2_HI, C.TRIG_PIO2_LO, h, lo)  # pi/2 - atan(t)
    h = ops.where(swap, sh, h)
    lo = ops.where(swap, sl, lo)
    ph, pl = _sub_from(C.PI_HI, C.PI_LO, h, lo)  # pi - angle
    neg_x = x < 0.0  # -0 is not < 0: zeros are special cases below
    h = ops.where(neg_x, ph, h)
    lo = ops.where(neg_x, pl, lo)
    r = h + lo
    # Special cases. Zero y: +-0 for x > 0 or x = +0, +-pi for x < 0 or x = -0.
    x_negative = ops.signbit(x)
    r_zero_y = ops.where(x_negative, C.PI_HI, 0.0)
    r = ops.where(y == 0.0, r_zero_y, r)
    r = ops.where((x == 0.0) & (y != 0.0), C.TRIG_PIO2_HI, r)
    inf_x_finite_y = ops.isinf(x) & ops.isfinite(y)
    r = ops.where(inf_x_finite_y, ops.where(x < 0.0, C.PI_HI, 0.0), r)
    both_inf = ops.isinf(x) & ops.isinf(y)
    r = ops.where(ops.isinf(y) & ops.isfinite(x), C.TRIG_PIO2_HI, r)
    r = ops.where(both_inf, ops.where(x < 0.0, C.THREE_PI_OVER_4, C.PI_OVER_4), r)
    r = ops.where(ops.signbit(y), -r, r)
    return ops.where(ops.isnan(x) | ops.isnan(y), NAN, r)
