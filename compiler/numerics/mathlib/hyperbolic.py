"""Pinned binary64 tanh and logistic, built on the double-double exp core (DSL code)."""

from __future__ import annotations

import math

from .double_double import dd_divide, two_sum
from .dsl import Ops, Value
from .exp_log import exp_core, expm1_dd
from .ieee import scale_by_pow2

TANH_CLAMP = 22.0  # tanh(x) rounds to +-1 for |x| >= 19.1
LOGISTIC_CLAMP = 800.0  # exp(-800) underflows to 0 for certain
NAN = math.nan


def tanh(ops: Ops, x: Value) -> Value:
    """Pinned binary64 tanh: tanh|x| = E / (E + 2) with E = expm1(2|x|) in double-double."""
    nan = ops.isnan(x)
    a = ops.minimum(ops.where(nan, 0.0, ops.abs(x)), TANH_CLAMP)
    eh, el = expm1_dd(ops, a + a)
    dh, dl = two_sum(eh, 2.0)
    dl = dl + el
    qh, ql = dd_divide(eh, el, dh, dl)
    y = qh + ql
    y = ops.where(x < 0.0, -y, y)
    y = ops.where(x == 0.0, x, y)
    return ops.where(nan, NAN, y)


def logistic(ops: Ops, x: Value) -> Value:
    """Pinned binary64 logistic 1/(1 + e^-x).

    With E = e^-|x| = 2**m * (hi + lo) and D = 1 + E in double-double:
    x >= 0: 1/D;  x < 0: E/D = 2**m * ((hi + lo)/D), rounded once at the final scaling.
    """
    nan = ops.isnan(x)
    a = ops.minimum(ops.where(nan, 0.0, ops.abs(x)), LOGISTIC_CLAMP)
    parts = exp_core(ops, -a, 0.0)
    eh = scale_by_pow2(ops, parts.hi, parts.m)
    el = scale_by_pow2(ops, parts.lo, parts.m)
    dh, dl = two_sum(1.0, eh)
    dl = dl + el
    neg = x < 0.0
    nh = ops.where(neg, parts.hi, 1.0)
    nl = ops.where(neg, parts.lo, 0.0)
    qh, ql = dd_divide(nh, nl, dh, dl)
    y = scale_by_pow2(ops, qh + ql, ops.where(neg, parts.m, 0))
    return ops.where(nan, NAN, y)
