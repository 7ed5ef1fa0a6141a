"""Pinned binary64 tanh and logistic, built on the double-double exp core."""

from __future__ import annotations

import numpy as np

from .double_double import dd_divide, two_sum
from .exp_log import exp_core, expm1_dd
from .ieee import scale_by_pow2

TANH_CLAMP = 22.0  # tanh(x) rounds to +-1 for |x| >= 19.1
LOGISTIC_CLAMP = 800.0  # exp(-800) underflows to 0 for certain


def tanh(x: np.ndarray) -> np.ndarray:
    """Pinned binary64 tanh: tanh|x| = E / (E + 2) with E = expm1(2|x|) in double-double."""
    nan = np.isnan(x)
    a = np.minimum(np.where(nan, 0.0, np.abs(x)), TANH_CLAMP)
    eh, el = expm1_dd(a + a)
    dh, dl = two_sum(eh, 2.0)
    dl = dl + el
    qh, ql = dd_divide(eh, el, dh, dl)
    y = qh + ql
    y = np.where(x < 0.0, -y, y)
    y = np.where(x == 0.0, x, y)
    return np.where(nan, np.nan, y)


def logistic(x: np.ndarray) -> np.ndarray:
    """Pinned binary64 logistic 1/(1 + e^-x).

    With E = e^-|x| = 2**m * (hi + lo) and D = 1 + E in double-double:
    x >= 0: 1/D;  x < 0: E/D = 2**m * ((hi + lo)/D), rounded once at the final scaling.
    """
    nan = np.isnan(x)
    a = np.minimum(np.where(nan, 0.0, np.abs(x)), LOGISTIC_CLAMP)
    parts = exp_core(-a, np.zeros_like(a))
    eh = scale_by_pow2(parts.hi, parts.m)
    el = scale_by_pow2(parts.lo, parts.m)
    dh, dl = two_sum(np.ones_like(a), eh)
    dl = dl + el
    neg = x < 0.0
    nh = np.where(neg, parts.hi, 1.0)
    nl = np.where(neg, parts.lo, 0.0)
    qh, ql = dd_divide(nh, nl, dh, dl)
    y = scale_by_pow2(qh + ql, np.where(neg, parts.m, 0))
    return np.where(nan, np.nan, y)
