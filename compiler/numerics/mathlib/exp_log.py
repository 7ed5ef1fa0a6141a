"""Pinned binary64 exp, expm1, log, log1p and their double-double cores."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import constants as C
from .double_double import fast_two_sum, two_prod, two_sum
from .ieee import F64, I64, U64, decompose, pow2, scale_by_pow2

_EXP_T_HI = np.array(C.EXP_T_HI, dtype=F64)
_EXP_T_LO = np.array(C.EXP_T_LO, dtype=F64)
_LOG_INVC = np.array(C.LOG_INVC, dtype=F64)
_LOG_LOGC_HI = np.array(C.LOG_LOGC_HI, dtype=F64)
_LOG_LOGC_LO = np.array(C.LOG_LOGC_LO, dtype=F64)
_LOW27_CLEAR = ~U64((1 << 27) - 1)

EXP_CLAMP = 1000.0  # |x| beyond this overflows or underflows for certain
EXPM1_LOW = -40.0  # expm1(x) = -1 exactly below this
EXPM1_HIGH = 40.0  # expm1(x) is computed as exp(x) above this
LOG1P_DIRECT = 2.0**-7  # log1p(x) reduces r = x directly below this


def horner(coeffs: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    """coeffs[0] + x*(coeffs[1] + x*(...)), evaluated from the last coefficient inwards."""
    p = np.full_like(x, coeffs[-1])
    for c in coeffs[-2::-1]:
        p = p * x + c
    return p


class ExpParts(NamedTuple):
    """exp(xh + xl) ~ 2**m * (hi + lo); also the reduced argument r = rh + rl and
    c = rl + (exp(rh) - 1 - rh), so that exp(r) - 1 ~ rh + c."""

    m: np.ndarray
    hi: np.ndarray
    lo: np.ndarray
    k: np.ndarray
    rh: np.ndarray
    c: np.ndarray


def exp_core(xh: np.ndarray, xl: np.ndarray) -> ExpParts:
    """exp(xh + xl) ~ 2**m * (hi + lo), hi in (0.99, 2), relative error about 2**-65.

    xh must not be NaN. |xh| > 1000 is clamped to +-1000 (with xl = 0), which keeps the
    over/underflow of the final result.
    """
    clamp = np.abs(xh) > EXP_CLAMP
    xh = np.where(clamp, np.copysign(EXP_CLAMP, xh), xh)
    xl = np.where(clamp, 0.0, xl)
    kf = np.rint(xh * C.EXP_INV_LN2_N)
    t = xh - kf * C.EXP_LN2_N_HI  # exact: |k| < 2**17 and the hi part has 36 bits
    u = kf * C.EXP_LN2_N_LO
    a, b = two_sum(t, -u)
    b = b + xl
    rh, rl = two_sum(a, b)  # r = x - k*ln2/64, |r| <= 0.0055
    k = kf.astype(I64)
    j = k & 63
    m = k >> 6
    th = _EXP_T_HI[j]
    tl = _EXP_T_LO[j]
    q = (rh * rh) * horner(C.EXP_POLY, rh)  # exp(r) - 1 - r, truncation < 2**-75
    c = rl + q
    p1, p2 = two_prod(th, rh)
    s1, s2 = fast_two_sum(th, p1)
    lo = s2 + p2
    lo = lo + th * c
    lo = lo + tl
    lo = lo + tl * rh
    hi, lo = fast_two_sum(s1, lo)
    return ExpParts(m, hi, lo, k, rh, c)


def exp(x: np.ndarray) -> np.ndarray:
    """Pinned binary64 exp."""
    nan = np.isnan(x)
    xs = np.where(nan, 0.0, x)
    parts = exp_core(xs, np.zeros_like(xs))
    y = scale_by_pow2(parts.hi + parts.lo, parts.m)
    return np.where(nan, np.nan, y)


def expm1_dd(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """expm1(x) ~ hi + lo for x in [-40, 40] (not NaN), relative error about 2**-60."""
    parts = exp_core(x, np.zeros_like(x))
    scale = pow2(parts.m)  # |m| <= 58
    s, e = two_sum(parts.hi * scale, -1.0)
    hi, lo = two_sum(s, e + parts.lo * scale)
    # k = 0 (|x| < 0.0055): the reduced argument is x itself and expm1 = x + c directly,
    # without the cancellation of 1 + x - 1.
    k0 = parts.k == 0
    hi0, lo0 = fast_two_sum(parts.rh, parts.c)
    return np.where(k0, hi0, hi), np.where(k0, lo0, lo)


def expm1(x: np.ndarray) -> np.ndarray:
    """Pinned binary64 expm1."""
    nan = np.isnan(x)
    big = x > EXPM1_HIGH
    xs = np.clip(np.where(nan, 0.0, x), EXPM1_LOW, EXPM1_HIGH)
    hi, lo = expm1_dd(xs)
    y = hi + lo
    if big.any():
        y[big] = exp(x[big])
    y = np.where(x == 0.0, x, y)
    return np.where(nan, np.nan, y)


class LogReduced(NamedTuple):
    """x = 2**e * (1 + r) / invc[i], with r = rh + rl exactly."""

    e: np.ndarray
    i: np.ndarray
    rh: np.ndarray
    rl: np.ndarray


def log_reduce(x: np.ndarray) -> LogReduced:
    """Table reduction of finite x > 0: x = 2**e * mt, r = mt * invc[i] - 1, |r| < 2**-7."""
    e, m = decompose(x)
    i = ((m.view(U64) >> U64(45)) & U64(127)).astype(I64)
    fold = i >= C.LOG_FOLD_INDEX
    mt = np.where(fold, m * 0.5, m)
    e = e + fold
    mh = (mt.view(U64) & _LOW27_CLEAR).view(F64)  # top 26 significant bits
    ml = mt - mh
    invc = _LOG_INVC[i]
    a = mh * invc - 1.0  # both steps exact: invc has 24 bits
    b = ml * invc  # exact
    rh, rl = two_sum(a, b)
    return LogReduced(e, i, rh, rl)


def log_assemble(
    red: LogReduced, extra: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """log(x) ~ hi + lo = e*ln2 - log(invc[i]) + log1p(r) (+ extra), rel. error ~2**-68.

    `extra`, if given, is a small correction added to the low part (ul/uh for the log of
    a double-double uh + ul).
    """
    e, i, rh, rl = red
    zh, zl = two_prod(rh, rh)
    qh = zh * -0.5
    ql = zl * -0.5
    tail = (zh * rh) * horner(C.LOG_POLY, rh)  # log1p(r) - r + r^2/2
    ef = e.astype(F64)
    big = ef * C.LOG_LN2_HI  # exact: |e| <= 1075, LOG_LN2_HI has 42 bits
    big_lo = ef * C.LOG_LN2_LO
    s, err = two_sum(big, _LOG_LOGC_HI[i])
    s, e2 = two_sum(s, rh)
    err = err + e2
    s, e3 = two_sum(s, qh)
    err = err + e3
    small = (tail + ql) + (rl - rl * rh)
    small = (big_lo + _LOG_LOGC_LO[i]) + small
    lo = err + small
    if extra is not None:
        lo = lo + extra
    return fast_two_sum(s, lo)


def log_core(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log(x) ~ hi + lo for finite x > 0."""
    return log_assemble(log_reduce(x))


def log(x: np.ndarray) -> np.ndarray:
    """Pinned binary64 natural logarithm."""
    ok = (x > 0.0) & np.isfinite(x)
    hi, _ = log_core(np.where(ok, x, 1.0))
    y = np.where(x == 0.0, -np.inf, hi)
    y = np.where(x == np.inf, np.inf, y)
    return np.where((x < 0.0) | np.isnan(x), np.nan, y)


def log1p(x: np.ndarray) -> np.ndarray:
    """Pinned binary64 log1p: log of the double-double 1 + x."""
    ok = (x > -1.0) & np.isfinite(x)
    xs = np.where(ok, x, 0.0)
    uh, ul = two_sum(np.ones_like(xs), xs)
    red = log_reduce(uh)
    # |x| < 2**-7: skip 1 + x and use r = x directly (e = 0, i = 0, invc = 1).
    small = np.abs(xs) < LOG1P_DIRECT
    zero = np.zeros_like(xs)
    red = LogReduced(
        np.where(small, 0, red.e),
        np.where(small, 0, red.i),
        np.where(small, xs, red.rh),
        np.where(small, 0.0, red.rl),
    )
    hi, _ = log_assemble(red, np.where(small, zero, ul / uh))
    y = np.where(x == 0.0, x, hi)
    y = np.where(x == -1.0, -np.inf, y)
    y = np.where(x == np.inf, np.inf, y)
    return np.where((x < -1.0) | np.isnan(x), np.nan, y)
