"""Pinned binary64 rsqrt and cbrt (DSL code)."""

from __future__ import annotations

from . import constants as C
from .double_double import two_prod
from .dsl import Ops, Value
from .ieee import decompose, pow2

CBRT_NEWTON_STEPS = 4


def rsqrt(ops: Ops, x: Value) -> Value:
    """Pinned binary64 rsqrt: 1 / sqrt(x), two correctly rounded IEEE operations."""
    return 1.0 / ops.sqrt(x)


def cbrt(ops: Ops, x: Value) -> Value:
    """Pinned binary64 cube root.

    |x| = u * 2**(3q) with u in [1, 8); y0 = 1 + (u - 1)/7; four Newton steps
    y = ((y + y) + u/(y*y)) / 3; one final step with the residual y^3 - u computed exactly.
    """
    special = ~ops.isfinite(x) | (x == 0.0)
    a = ops.where(special, 1.0, ops.abs(x))
    e, m = decompose(ops, a)
    q = e // 3
    s = e - 3 * q
    u = m * pow2(ops, s)  # exact: s in {0, 1, 2}
    y = 1.0 + (u - 1.0) * C.CBRT_ONE_SEVENTH
    for _ in range(CBRT_NEWTON_STEPS):
        y = ((y + y) + u / (y * y)) / 3.0
    ph, pl = two_prod(y, y)
    th, tl = two_prod(y, ph)
    d = (th - u) + (tl + y * pl)  # y^3 - u; th - u is exact
    y = y - d / (3.0 * ph)
    y = y * pow2(ops, q)  # exact: q in [-358, 341]
    y = ops.where(x < 0.0, -y, y)
    return ops.where(special, x, y)  # +-0, +-inf and NaN map to themselves
