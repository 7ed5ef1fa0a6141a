"""Pinned binary64 power: exp(y * log|x|) in double-double, with C99 Annex F specials
(DSL code)."""

from __future__ import annotations

import math

from .double_double import two_prod, two_sum
from .dsl import Ops, Value
from .exp_log import exp_core, log_core
from .ieee import is_integer, is_odd_integer, scale_by_pow2

Y_CLAMP = 2.0**64  # |y| beyond this: |y log|x|| > 2048 whenever x != 1, so 0 or inf
INF = math.inf
NAN = math.nan


def _pow_positive(ops: Ops, ax: Value, y: Value) -> Value:
    """exp(y * log(ax)) for finite ax > 0 and finite y."""
    lh, ll = log_core(ops, ax)
    yc = ops.minimum(ops.maximum(y, -Y_CLAMP), Y_CLAMP)
    ph, pl = two_prod(yc, lh)
    pl = pl + yc * ll
    ph, pl = two_sum(ph, pl)
    parts = exp_core(ops, ph, pl)
    return scale_by_pow2(ops, parts.hi + parts.lo, parts.m)


def power(ops: Ops, x: Value, y: Value) -> Value:
    """Pinned binary64 pow(x, y) (C99 Annex F special cases, F.10.4.4)."""
    ax = ops.abs(x)
    y_int = is_integer(ops, y)
    y_odd = is_odd_integer(ops, y)
    general = ops.isfinite(x) & ops.isfinite(y) & (x != 0.0) & (y != 0.0)
    r = _pow_positive(ops, ops.where(general, ax, 1.0), ops.where(general, y, 1.0))
    r = ops.where((x < 0.0) & y_odd, -r, r)
    r = ops.where((x < 0.0) & ~y_int, NAN, r)  # negative base, non-integer y
    # x = +-0
    zero_pos = ops.where(y_odd, x, 0.0)  # y > 0
    zero_neg = ops.where(y_odd, ops.copysign(INF, x), INF)  # y < 0
    r = ops.where(x == 0.0, ops.where(y > 0.0, zero_pos, zero_neg), r)
    # x = +-inf
    inf_pos = ops.where(y_odd, x, INF)  # y > 0
    inf_neg = ops.where(y_odd, ops.copysign(0.0, x), 0.0)  # y < 0
    r = ops.where(ops.isinf(x), ops.where(y > 0.0, inf_pos, inf_neg), r)
    # y = +-inf
    grows = (ax > 1.0) == (y > 0.0)
    r = ops.where(ops.isinf(y), ops.where(grows, INF, 0.0), r)
    r = ops.where(ops.isinf(y) & (ax == 1.0), 1.0, r)
    # NaN, then the two rules that override NaN
    r = ops.where(ops.isnan(x) | ops.isnan(y), NAN, r)
    r = ops.where((x == 1.0) | (y == 0.0), 1.0, r)
    return r
