"""Fast binary64 approximations behind the compiled binary32 functions (DSL code).

A compiled binary32 function must return RN32(f(x)), the correctly rounded value, which
the exact path computes with the pinned binary64 algorithm, a rounding and the exception
table (correctly_rounded.py, f32_exceptions.py). That path is built for binary64 accuracy
and costs 4-10 ns per element. The approximations here cost a fraction of it: each returns
`(v, usable)`, where `usable` marks the lanes on which

    |v - f(x)| <= FAST_ERROR * |f(x)|      (FAST_ERROR = 2**-46)

and v elsewhere is meaningless. Where v is also not near a binary32 rounding boundary
(`near_f32_boundary` flags everything within 2**-40 relative of one, on the subnormal grid too),
RN32(v) = RN32(f(x)): the real value and v lie on the same side of every boundary. The
backend takes RN32(v) there and the exact path on every other lane, so the result is the
contract's bit for bit; the fast path changes speed only. tools/check_f32_exhaustive.py
proves it on all 2**32 inputs per function and target; tools/mathlib_accuracy.py
--fast measures the error of v against the pinned binary64 functions.

The argument x is a binary32 value widened exactly to binary64. Every operation is one IEEE
binary64 operation in the written order (no fma), so v is the same on every target. A NaN
argument is never usable; the clamps (`minimum(NaN, c)` is c) keep its lane's arithmetic
in range.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from . import constants as C
from .dsl import Ops, Value
from .ieee import pow2

__all__ = ["FAST_ERROR", "FAST_F32", "SATURATED", "estrin"]

FAST_ERROR = 2.0**-46

TRIG_LIMIT = 2.0**15  # |k| < 2**15: k times each 33-bit part of pi/2 is exact
# sin(r) = r + r z (-1/3! + ... + z^6/15!), cos(r) = 1 - z/2 + z^2 (1/4! - ... + z^6/16!),
# z = r^2: truncations below 2**-53 relative for |r| <= pi/4.
_SIN_TERMS = C.SIN_POLY[:7]
_COS_TERMS = C.COS_POLY[:7]
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD  # sqrt(2)/2 rounded: the lower end of m's interval
_INV_LN2 = C.EXP_INV_LN2_N / C.EXP_TABLE_SIZE  # exact: a power of two apart
EXP_OVERFLOW = 89.0  # exp(x) > 2**128 for x >= 88.73: the binary32 result is inf
EXP_UNDERFLOW = -105.0  # exp(x) < 2**-150 for x <= -103.98: the binary32 result is +0
TANH_SATURATION = 20.0  # tanh(x) rounds to +-1 in binary32 for |x| >= 9.02
ERF_SATURATION = 4.0  # erf(x) rounds to +-1 in binary32 for |x| >= 3.92 (erfc < 2**-25)
# erf(a) = a * (c0 + z * P(z)), z = a^2 < 1/4: the Taylor terms up to a^21 (2**-52 beyond).
_ERF_SMALL_TERMS = C.ERF_SMALL_POLY[:10]


def estrin(coeffs: tuple[float, ...], x: Value) -> Value:
    """coeffs[0] + coeffs[1] x + ... by Estrin's scheme: pairs c_i + c_(i+1) x, combined
    with x^2, x^4, ... The dependency chain is logarithmic in the degree instead of linear
    (Horner), which is what bounds these loops; the rounding errors are of the same order.
    """
    terms = [coeffs[i] + coeffs[i + 1] * x if i + 1 < len(coeffs) else coeffs[i]
             for i in range(0, len(coeffs), 2)]
    power = x * x
    while len(terms) > 1:
        terms = [terms[i] + power * terms[i + 1] if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
        if len(terms) > 1:
            power = power * power
    return terms[0]


def _exp_reduced(ops: Ops, x: Value) -> tuple[Value, Value]:
    """exp(x) = 2**k * (1 + q) for |x| <= 110: (k, q), q = expm1(r).

    k = rint(x / ln2), r = x - k ln2 (|r| <= 0.35; ln2 in two parts: the product with the
    42-bit high part and the subtraction are exact), q the Taylor polynomial of degree 12
    (truncation below 2**-50 relative). No table: a gather costs more than the terms.
    """
    kf = ops.rint(x * _INV_LN2)
    r = (x - kf * C.LOG_LN2_HI) - kf * C.LOG_LN2_LO
    q = r + (r * r) * estrin(C.FAST_EXP_POLY, r)
    return ops.to_int(kf), q


def _exp_value(ops: Ops, x: Value) -> Value:
    """exp(x) for -110 <= x <= 89, relative error below 2**-51 (the scaling is exact)."""
    k, q = _exp_reduced(ops, x)
    return (1.0 + q) * pow2(ops, k)


def _expm1_value(ops: Ops, x: Value) -> Value:
    """expm1(x) for -110 <= x <= 89 as (S - 1) + S q, S = 2**k.

    S - 1 is exact for |k| <= 1 and |expm1(x)| >= 1/2 elsewhere, so no cancellation loses
    accuracy; k = 0 gives q itself.
    """
    k, q = _exp_reduced(ops, x)
    s = pow2(ops, k)
    return (s - 1.0) + s * q


def exp(ops: Ops, x: Value) -> tuple[Value, Value]:
    """exp: usable everywhere but NaN (+0 below -105, inf above 89)."""
    xs = ops.minimum(ops.maximum(x, EXP_UNDERFLOW), EXP_OVERFLOW)
    v = _exp_value(ops, xs)
    v = ops.where(x <= EXP_UNDERFLOW, 0.0, v)
    v = ops.where(x >= EXP_OVERFLOW, math.inf, v)
    return v, ~ops.isnan(x)


def expm1(ops: Ops, x: Value) -> tuple[Value, Value]:
    """expm1: usable for -105 < x < 89 (beyond, -1 and inf are left to the exact path)."""
    usable = (x > EXP_UNDERFLOW) & (x < EXP_OVERFLOW)
    v = _expm1_value(ops, ops.where(usable, x, 0.0))
    return ops.where(x == 0.0, x, v), usable  # expm1(-0) = -0


def tanh(ops: Ops, x: Value) -> tuple[Value, Value]:
    """tanh|x| = E / (E + 2), E = expm1(2|x|), with |x| clamped to 20 (tanh rounds to 1)."""
    a = ops.minimum(ops.abs(x), TANH_SATURATION)
    e = _expm1_value(ops, a + a)
    return ops.copysign(e / (e + 2.0), x), ~ops.isnan(x)


def logistic(ops: Ops, x: Value) -> tuple[Value, Value]:
    """logistic(x) = 1/(1 + e) for x >= 0 and e/(1 + e) for x < 0, e = exp(-|x|); +0 for
    x <= -105, where the binary32 result underflows to zero."""
    a = ops.minimum(ops.abs(x), -EXP_UNDERFLOW)
    e = _exp_value(ops, -a)
    v = ops.where(x < 0.0, e, 1.0) / (e + 1.0)
    v = ops.where(x <= EXP_UNDERFLOW, 0.0, v)
    return v, ~ops.isnan(x)


def _log_value(ops: Ops, x: Value) -> Value:
    """log(x) for finite x > 0 (normal binary64): x = 2**k m with m in [sqrt(2)/2, sqrt(2)),
    log(m) = 2 atanh(s), s = f / (2 + f), f = m - 1 (exact), as an odd series in s."""
    shifted = ops.bits(x) - _SQRT_HALF_BITS
    k = shifted >> 52
    m = ops.from_bits(ops.bits(x) - (k << 52))
    f = m - 1.0
    s = f / (f + 2.0)
    z = s * s
    log_m = (s + s) + (s + s) * (z * estrin(C.FAST_LOG_POLY, z))
    kf = ops.to_float(k)
    return kf * C.LOG_LN2_HI + (log_m + kf * C.LOG_LN2_LO)


def log(ops: Ops, x: Value) -> tuple[Value, Value]:
    """log: usable for finite x > 0 (0, negatives, inf and NaN take the exact path)."""
    usable = (x > 0.0) & (x < math.inf)
    return _log_value(ops, ops.where(usable, x, 1.0)), usable


def log1p(ops: Ops, x: Value) -> tuple[Value, Value]:
    """log1p(x) = log(u) + (x - (u - 1)) / u with u = 1 + x rounded: the quotient restores
    what the rounding of u lost (u - 1 is exact), so small x keep their relative accuracy."""
    usable = (x > -1.0) & (x < math.inf)
    xs = ops.where(usable, x, 0.0)
    u = xs + 1.0
    v = _log_value(ops, u) + (xs - (u - 1.0)) / u
    return ops.where(x == 0.0, x, v), usable  # log1p(-0) = -0


def _sin_cos(ops: Ops, x: Value, want_sin: bool) -> tuple[Value, Value]:
    """sin or cos for |x| < 2**15: x = k pi/2 + r by Cody-Waite in three 33-bit parts of
    pi/2 (each k * part exact, the first subtraction exact), Taylor kernels on |r| <= pi/4,
    the quadrant k mod 4 choosing the kernel and the sign."""
    usable = ops.abs(x) < TRIG_LIMIT
    a = ops.where(usable, ops.abs(x), 0.0)
    kf = ops.rint(a * C.TRIG_TWO_OVER_PI)
    r = ((a - kf * C.TRIG_PIO2_C1) - kf * C.TRIG_PIO2_C2) - kf * C.TRIG_PIO2_C3
    z = r * r
    sin_r = r + (r * z) * estrin(_SIN_TERMS, z)
    cos_r = (1.0 - 0.5 * z) + (z * z) * estrin(_COS_TERMS, z)
    q = ops.to_int(kf) & 3
    if not want_sin:
        q = (q + 1) & 3  # cos(x) = sin(x + pi/2)
    y = ops.where((q & 1) == 0, sin_r, cos_r)
    y = ops.where(q >= 2, -y, y)
    if want_sin:
        y = ops.where(x < 0.0, -y, y)
        y = ops.where(x == 0.0, x, y)  # sin(-0) = -0
    return y, usable


def sin(ops: Ops, x: Value) -> tuple[Value, Value]:
    """sin: usable for |x| < 2**15 (larger arguments take the exact Payne-Hanek path)."""
    return _sin_cos(ops, x, want_sin=True)


def cos(ops: Ops, x: Value) -> tuple[Value, Value]:
    """cos: usable for |x| < 2**15."""
    return _sin_cos(ops, x, want_sin=False)


def erf(ops: Ops, x: Value) -> tuple[Value, Value]:
    """erf: the Taylor series below 1/2, one polynomial in |x| - 2.25 on [1/2, 4], +-1
    above; usable everywhere but NaN."""
    a = ops.minimum(ops.abs(x), ERF_SATURATION)
    z = a * a
    small = a * (C.ERF_SMALL_C0_HI + z * estrin(_ERF_SMALL_TERMS, z))
    mid = estrin(C.ERF_FAST_MID_POLY, a - C.ERF_FAST_MID_CENTRE)  # exact subtraction
    v = ops.where(a < C.ERF_SMALL_LIMIT, small, mid)
    v = ops.where(a >= ERF_SATURATION, 1.0, v)
    return ops.copysign(v, x), ~ops.isnan(x)


FAST_F32: dict[str, Callable[[Ops, Value], tuple[Value, Value]]] = {
    "exp": exp,
    "expm1": expm1,
    "tanh": tanh,
    "logistic": logistic,
    "erf": erf,
    "log": log,
    "log1p": log1p,
    "sin": sin,
    "cos": cos,
}

# The lanes whose fast value is a saturation constant (0, inf, 1), exact after rounding to
# binary32 but not within FAST_ERROR of the real value; on all other usable lanes the bound
# holds. (tanh and the large logistic are clamped arguments: their values are within it.)
SATURATED: dict[str, Callable[[Ops, Value], Value]] = {
    "exp": lambda ops, x: (x <= EXP_UNDERFLOW) | (x >= EXP_OVERFLOW),
    "logistic": lambda ops, x: x <= EXP_UNDERFLOW,
    "erf": lambda ops, x: ops.abs(x) >= ERF_SATURATION,
}
