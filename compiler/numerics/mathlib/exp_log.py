"""Pinned binary64 exp, expm1, log, log1p and their double-double cores (DSL code)."""

from __future__ import annotations

import math
from typing import NamedTuple

from . import constants as C
from .double_double import fast_two_sum, horner, two_prod, two_sum
from .dsl import Ops, Table, Value
from .ieee import decompose, pow2, scale_by_pow2

__all__ = [
    "ExpParts",
    "LogReduced",
    "exp",
    "exp_core",
    "expm1",
    "expm1_dd",
    "horner",
    "log",
    "log1p",
    "log_assemble",
    "log_core",
    "log_reduce",
]

EXP_T_HI = Table("exp_t_hi", C.EXP_T_HI)
EXP_T_LO = Table("exp_t_lo", C.EXP_T_LO)
LOG_INVC = Table("log_invc", C.LOG_INVC)
LOG_LOGC_HI = Table("log_logc_hi", C.LOG_LOGC_HI)
LOG_LOGC_LO = Table("log_logc_lo", C.LOG_LOGC_LO)
LOW27_CLEAR = ~((1 << 27) - 1)  # int64 mask clearing the low 27 fraction bits

EXP_CLAMP = 1000.0  # |x| beyond this overflows or underflows for certain
EXPM1_LOW = -40.0  # expm1(x) = -1 exactly below this
EXPM1_HIGH = 40.0  # expm1(x) is computed as exp(x) above this
LOG1P_DIRECT = 2.0**-7  # log1p(x) reduces r = x directly below this
NAN = math.nan
INF = math.inf


class ExpParts(NamedTuple):
    """exp(xh + xl) ~ 2**m * (hi + lo); also the reduced argument r = rh + rl and
    c = rl + (exp(rh) - 1 - rh), so that exp(r) - 1 ~ rh + c."""

    m: Value
    hi: Value
    lo: Value
    k: Value
    rh: Value
    c: Value


def exp_core(ops: Ops, xh: Value, xl: Value) -> ExpParts:
    """exp(xh + xl) ~ 2**m * (hi + lo), hi in (0.99, 2), relative error about 2**-65.

    xh must not be NaN. |xh| > 1000 is clamped to +-1000 (with xl = 0), which keeps the
    over/underflow of the final result.
    """
    clamp = ops.abs(xh) > EXP_CLAMP
    xh = ops.where(clamp, ops.copysign(EXP_CLAMP, xh), xh)
    xl = ops.where(clamp, 0.0, xl)
    kf = ops.rint(xh * C.EXP_INV_LN2_N)
    t = xh - kf * C.EXP_LN2_N_HI  # exact: |k| < 2**17 and the hi part has 36 bits
    u = kf * C.EXP_LN2_N_LO
    a, b = two_sum(t, -u)
    b = b + xl
    rh, rl = two_sum(a, b)  # r = x - k*ln2/64, |r| <= 0.0055
    k = ops.to_int(kf)
    j = k & 63
    m = k >> 6
    th = ops.table(EXP_T_HI, j)
    tl = ops.table(EXP_T_LO, j)
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


def exp(ops: Ops, x: Value) -> Value:
    """Pinned binary64 exp."""
    nan = ops.isnan(x)
    xs = ops.where(nan, 0.0, x)
    parts = exp_core(ops, xs, 0.0)
    y = scale_by_pow2(ops, parts.hi + parts.lo, parts.m)
    return ops.where(nan, NAN, y)


def expm1_from_parts(ops: Ops, parts: ExpParts) -> tuple[Value, Value]:
    """The steps of Expm1DD after its ExpCore: expm1 ~ hi + lo from the parts of exp."""
    scale = pow2(ops, parts.m)  # |m| <= 58 where the result is used
    s, e = two_sum(parts.hi * scale, -1.0)
    hi, lo = two_sum(s, e + parts.lo * scale)
    # k = 0 (|x| < 0.0055): the reduced argument is x itself and expm1 = x + c directly,
    # without the cancellation of 1 + x - 1.
    k0 = parts.k == 0
    hi0, lo0 = fast_two_sum(parts.rh, parts.c)
    return ops.where(k0, hi0, hi), ops.where(k0, lo0, lo)


def expm1_dd(ops: Ops, x: Value) -> tuple[Value, Value]:
    """expm1(x) ~ hi + lo for x in [-40, 40] (not NaN), relative error about 2**-60."""
    return expm1_from_parts(ops, exp_core(ops, x, 0.0))


def expm1(ops: Ops, x: Value) -> Value:
    """Pinned binary64 expm1.

    One ExpCore serves both cases: for x > 40 the parts of ExpCore(x) give exp(x) exactly
    as `exp` computes it, and for -40 <= x <= 40 they are those of Expm1DD(x).
    """
    nan = ops.isnan(x)
    xs = ops.maximum(ops.where(nan, 0.0, x), EXPM1_LOW)
    parts = exp_core(ops, xs, 0.0)
    hi, lo = expm1_from_parts(ops, parts)
    y = hi + lo
    y = ops.where(x > EXPM1_HIGH, scale_by_pow2(ops, parts.hi + parts.lo, parts.m), y)
    y = ops.where(x == 0.0, x, y)
    return ops.where(nan, NAN, y)


class LogReduced(NamedTuple):
    """x = 2**e * (1 + r) / invc[i], with r = rh + rl exactly."""

    e: Value
    i: Value
    rh: Value
    rl: Value


def log_reduce(ops: Ops, x: Value) -> LogReduced:
    """Table reduction of finite x > 0: x = 2**e * mt, r = mt * invc[i] - 1, |r| < 2**-7."""
    e, m = decompose(ops, x)
    i = (ops.bits(m) >> 45) & 127
    fold = i >= C.LOG_FOLD_INDEX
    mt = ops.where(fold, m * 0.5, m)
    e = ops.where(fold, e + 1, e)
    mh = ops.from_bits(ops.bits(mt) & LOW27_CLEAR)  # top 26 significant bits
    ml = mt - mh
    invc = ops.table(LOG_INVC, i)
    a = mh * invc - 1.0  # both steps exact: invc has 24 bits
    b = ml * invc  # exact
    rh, rl = two_sum(a, b)
    return LogReduced(e, i, rh, rl)


def log_assemble(ops: Ops, red: LogReduced, extra: Value | None = None) -> tuple[Value, Value]:
    """log(x) ~ hi + lo = e*ln2 - log(invc[i]) + log1p(r) (+ extra), rel. error ~2**-68.

    `extra`, if given, is a small correction added to the low part (ul/uh for the log of
    a double-double uh + ul).
    """
    e, i, rh, rl = red
    zh, zl = two_prod(rh, rh)
    qh = zh * -0.5
    ql = zl * -0.5
    tail = (zh * rh) * horner(C.LOG_POLY, rh)  # log1p(r) - r + r^2/2
    ef = ops.to_float(e)
    big = ef * C.LOG_LN2_HI  # exact: |e| <= 1075, LOG_LN2_HI has 42 bits
    big_lo = ef * C.LOG_LN2_LO
    s, err = two_sum(big, ops.table(LOG_LOGC_HI, i))
    s, e2 = two_sum(s, rh)
    err = err + e2
    s, e3 = two_sum(s, qh)
    err = err + e3
    small = (tail + ql) + (rl - rl * rh)
    small = (big_lo + ops.table(LOG_LOGC_LO, i)) + small
    lo = err + small
    if extra is not None:
        lo = lo + extra
    return fast_two_sum(s, lo)


def log_core(ops: Ops, x: Value) -> tuple[Value, Value]:
    """log(x) ~ hi + lo for finite x > 0."""
    return log_assemble(ops, log_reduce(ops, x))


def log(ops: Ops, x: Value) -> Value:
    """Pinned binary64 natural logarithm."""
    ok = (x > 0.0) & ops.isfinite(x)
    hi, _ = log_core(ops, ops.where(ok, x, 1.0))
    y = ops.where(x == 0.0, -INF, hi)
    y = ops.where(x == INF, INF, y)
    return ops.where((x < 0.0) | ops.isnan(x), NAN, y)


def log1p(ops: Ops, x: Value) -> Value:
    """Pinned binary64 log1p: log of the double-double 1 + x."""
    ok = (x > -1.0) & ops.isfinite(x)
    xs = ops.where(ok, x, 0.0)
    uh, ul = two_sum(1.0, xs)
    red = log_reduce(ops, uh)
    # |x| < 2**-7: skip 1 + x and use r = x directly (e = 0, i = 0, invc = 1).
    small = ops.abs(xs) < LOG1P_DIRECT
    red = LogReduced(
        ops.where(small, 0, red.e),
        ops.where(small, 0, red.i),
        ops.where(small, xs, red.rh),
        ops.where(small, 0.0, red.rl),
    )
    hi, _ = log_assemble(ops, red, ops.where(small, 0.0, ul / uh))
    y = ops.where(x == 0.0, x, hi)
    y = ops.where(x == -1.0, -INF, y)
    y = ops.where(x == INF, INF, y)
    return ops.where((x < -1.0) | ops.isnan(x), NAN, y)
