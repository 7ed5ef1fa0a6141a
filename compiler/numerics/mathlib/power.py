"""Pinned binary64 power: exp(y * log|x|) in double-double, with C99 Annex F specials."""

from __future__ import annotations

import numpy as np

from .double_double import two_prod, two_sum
from .exp_log import exp_core, log_core
from .ieee import is_integer, is_odd_integer, scale_by_pow2

Y_CLAMP = 2.0**64  # |y| beyond this: |y log|x|| > 2048 whenever x != 1, so 0 or inf


def _pow_positive(ax: np.ndarray, y: np.ndarray) -> np.ndarray:
    """exp(y * log(ax)) for finite ax > 0 and finite y."""
    lh, ll = log_core(ax)
    yc = np.clip(y, -Y_CLAMP, Y_CLAMP)
    ph, pl = two_prod(yc, lh)
    pl = pl + yc * ll
    ph, pl = two_sum(ph, pl)
    parts = exp_core(ph, pl)
    return scale_by_pow2(parts.hi + parts.lo, parts.m)


def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Pinned binary64 pow(x, y) (C99 Annex F special cases, F.10.4.4)."""
    ax = np.abs(x)
    y_int = is_integer(y)
    y_odd = is_odd_integer(y)
    general = np.isfinite(x) & np.isfinite(y) & (x != 0.0) & (y != 0.0)
    r = _pow_positive(np.where(general, ax, 1.0), np.where(general, y, 1.0))
    r = np.where((x < 0.0) & y_odd, -r, r)
    r = np.where((x < 0.0) & ~y_int, np.nan, r)  # negative base, non-integer y
    # x = +-0
    zero_pos = np.where(y_odd, x, 0.0)  # y > 0
    zero_neg = np.where(y_odd, np.copysign(np.inf, x), np.inf)  # y < 0
    r = np.where(x == 0.0, np.where(y > 0.0, zero_pos, zero_neg), r)
    # x = +-inf
    inf_pos = np.where(y_odd, x, np.inf)  # y > 0
    inf_neg = np.where(y_odd, np.copysign(0.0, x), 0.0)  # y < 0
    r = np.where(np.isinf(x), np.where(y > 0.0, inf_pos, inf_neg), r)
    # y = +-inf
    grows = (ax > 1.0) == (y > 0.0)
    r = np.where(np.isinf(y), np.where(grows, np.inf, 0.0), r)
    r = np.where(np.isinf(y) & (ax == 1.0), 1.0, r)
    # NaN, then the two rules that override NaN
    r = np.where(np.isnan(x) | np.isnan(y), np.nan, r)
    r = np.where((x == 1.0) | (y == 0.0), 1.0, r)
    return r
