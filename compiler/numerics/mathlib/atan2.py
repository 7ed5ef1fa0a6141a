"""Pinned binary64 atan2 with C99 Annex F special cases (F.10.1.4)."""

from __future__ import annotations

import numpy as np

from . import constants as C
from .double_double import dd_divide, fast_two_sum, two_prod, two_sum
from .exp_log import horner
from .ieee import F64, I64, decompose, scale_by_pow2

RESIDUAL_MIN = 2.0**-960

_ATAN_HI = np.array(C.ATAN_HI, dtype=F64)
_ATAN_LO = np.array(C.ATAN_LO, dtype=F64)


def _quotient(num: np.ndarray, den: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """th + tl ~ num/den for 0 < num <= den finite: th = RN(num/den), tl from the residual.

    The residual num - th*den is computed exactly on num and den scaled by 2**-e, where
    den = m * 2**e, m in [1, 2); it is dropped (tl = 0) when the scaled num is below
    2**-960, where the product th*den' could underflow.
    """
    th = num / den
    e, _ = decompose(den)
    den_s = scale_by_pow2(den, -e)
    num_s = scale_by_pow2(num, -e)
    p, pe = two_prod(th, den_s)
    tl = ((num_s - p) - pe) / den_s
    return th, np.where(num_s < RESIDUAL_MIN, 0.0, tl)


def _atan_unit(th: np.ndarray, tl: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """atan(t) ~ hi + lo for t = th + tl, 0 <= th <= 1.

    c = i/32 with i = rint(32 th); atan(t) = atan(c) + atan(v), v = (t - c)/(1 + t c),
    |v| <= 1/64, atan(v) = v + v^3 * P(v^2).
    """
    i = np.rint(th * C.ATAN_TABLE_SIZE).astype(I64)
    c = i.astype(F64) * (1.0 / C.ATAN_TABLE_SIZE)
    num = th - c  # exact (Sterbenz, or c = 0)
    ph, pl = two_prod(th, c)
    dh, dl = fast_two_sum(np.ones_like(th), ph)
    dl = dl + (pl + tl * c)
    vh, vl = dd_divide(num, tl, dh, dl)
    z = vh * vh
    tail = (z * vh) * horner(C.ATAN_POLY, z)
    s, e = two_sum(_ATAN_HI[i], vh)
    lo = e + (_ATAN_LO[i] + (vl + tail))
    return fast_two_sum(s, lo)


def _sub_from(ch: float, cl: float, h: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ch + cl) - (h + lo) in double-double."""
    s, e = two_sum(np.full_like(h, ch), -h)
    return fast_two_sum(s, e + (cl - lo))


def atan2(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Pinned binary64 atan2(y, x)."""
    ay = np.abs(y)
    ax = np.abs(x)
    general = np.isfinite(x) & np.isfinite(y) & (x != 0.0) & (y != 0.0)
    ay_g = np.where(general, ay, 1.0)
    ax_g = np.where(general, ax, 1.0)
    swap = ay_g > ax_g
    th, tl = _quotient(np.where(swap, ax_g, ay_g), np.where(swap, ay_g, ax_g))
    h, lo = _atan_unit(th, tl)
    sh, sl = _sub_from(C.TRIG_PIO2_HI, C.TRIG_PIO2_LO, h, lo)  # pi/2 - atan(t)
    h = np.where(swap, sh, h)
    lo = np.where(swap, sl, lo)
    ph, pl = _sub_from(C.PI_HI, C.PI_LO, h, lo)  # pi - angle
    neg_x = x < 0.0  # -0 is not < 0: zeros are special cases below
    h = np.where(neg_x, ph, h)
    lo = np.where(neg_x, pl, lo)
    r = h + lo
    # Special cases. Zero y: +-0 for x > 0 or x = +0, +-pi for x < 0 or x = -0.
    x_negative = np.signbit(x)
    r_zero_y = np.where(x_negative, C.PI_HI, 0.0)
    r = np.where(y == 0.0, r_zero_y, r)
    r = np.where((x == 0.0) & (y != 0.0), C.TRIG_PIO2_HI, r)
    inf_x_finite_y = np.isinf(x) & np.isfinite(y)
    r = np.where(inf_x_finite_y, np.where(x < 0.0, C.PI_HI, 0.0), r)
    both_inf = np.isinf(x) & np.isinf(y)
    r = np.where(np.isinf(y) & np.isfinite(x), C.TRIG_PIO2_HI, r)
    r = np.where(both_inf, np.where(x < 0.0, C.THREE_PI_OVER_4, C.PI_OVER_4), r)
    r = np.where(np.signbit(y), -r, r)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, r)
