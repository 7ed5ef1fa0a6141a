"""Element-by-element MPFR (gmpy2) references for the math library.

Used three ways: by the f32 path to recompute the rare elements whose rounding the binary64
evaluation cannot decide, by the tests, and by tools/mathlib_accuracy.py. Everything here is
a Python loop over elements: slow but obviously correct, since MPFR rounds correctly.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import gmpy2
import numpy as np
from gmpy2 import mpfr

MpfrFn = Callable[[mpfr], mpfr]


def _logistic(x: mpfr) -> mpfr:
    """1/(1 + e^-x) at the context precision (not correctly rounded: for error measurement)."""
    return 1 / (1 + gmpy2.exp(-x))


# Functions that MPFR rounds correctly in one call, in the current context.
DIRECT: dict[str, MpfrFn] = {
    "exp": gmpy2.exp,
    "expm1": gmpy2.expm1,
    "log": gmpy2.log,
    "log1p": gmpy2.log1p,
    "tanh": gmpy2.tanh,
    "erf": gmpy2.erf,
    "sin": gmpy2.sin,
    "cos": gmpy2.cos,
    "rsqrt": gmpy2.rec_sqrt,
    "cbrt": gmpy2.cbrt,
}

HIGH_PRECISION: dict[str, MpfrFn] = {**DIRECT, "logistic": _logistic}


def _binary32_special(name: str, x: float) -> float | None:
    """Values where the contract's convention differs from MPFR's or MPFR needs no call."""
    if math.isnan(x):
        return math.nan
    if name == "rsqrt" and x == 0.0:
        return math.copysign(math.inf, x)  # 1/sqrt(-0) = 1/(-0) = -inf
    if name == "logistic" and math.isinf(x):
        return 1.0 if x > 0 else 0.0
    return None


def _logistic_bounds(x: mpfr, precision: int) -> tuple[mpfr, mpfr]:
    """Rigorous lower and upper bounds of 1/(1 + e^-x) at the given precision."""
    with gmpy2.context(precision=precision, round=gmpy2.RoundUp, emin=-(2**30), emax=2**30):
        e_up = gmpy2.exp(-x)
        d_up = 1 + e_up
    with gmpy2.context(precision=precision, round=gmpy2.RoundDown, emin=-(2**30), emax=2**30):
        e_down = gmpy2.exp(-x)
        d_down = 1 + e_down
        lower = 1 / d_up
    with gmpy2.context(precision=precision, round=gmpy2.RoundUp, emin=-(2**30), emax=2**30):
        upper = 1 / d_down
    return lower, upper


_CTX80 = gmpy2.context(precision=80, emin=-(2**30), emax=2**30)
_CTX_F32 = gmpy2.ieee(32)
# Relative margin 2**-72: more than the 2**-78 error of three 80-bit operations.
_LOGISTIC_LOWER = _CTX80.sub(1, _CTX80.exp2(-72))
_LOGISTIC_UPPER = _CTX80.add(1, _CTX80.exp2(-72))


def _logistic_f32(x: float) -> float:
    """Correctly rounded binary32 logistic: a fast 80-bit attempt, then Ziv's loop."""
    ctx = _CTX80
    v = ctx.div(1, ctx.add(1, ctx.exp(-x)))
    lo32 = _CTX_F32.plus(ctx.mul(v, _LOGISTIC_LOWER))
    hi32 = _CTX_F32.plus(ctx.mul(v, _LOGISTIC_UPPER))
    if lo32 == hi32:
        return float(lo32)
    xm = mpfr(x, 53)
    precision = 128
    while True:  # stop when both bounds round to the same binary32 value
        lower, upper = _logistic_bounds(xm, precision)
        with gmpy2.ieee(32):
            lo32, hi32 = +lower, +upper
        if lo32 == hi32:
            return float(lo32)
        precision *= 2


def correctly_rounded_f32(name: str, x: float) -> float:
    """The binary32 value nearest (ties to even) to name(x), with IEEE over/underflow."""
    special = _binary32_special(name, x)
    if special is not None:
        return special
    if name == "logistic":
        return _logistic_f32(x)
    with gmpy2.ieee(32):
        return float(DIRECT[name](x))  # a Python float argument is converted exactly


def correctly_rounded_f32_array(name: str, x: np.ndarray) -> np.ndarray:
    """correctly_rounded_f32 over an array of binary32 values (any shape)."""
    with np.errstate(invalid="ignore"):
        flat = np.asarray(x, dtype=np.float32).astype(np.float64).ravel()
    out = np.empty(flat.size, dtype=np.float32)
    special = np.isnan(flat)
    if name == "rsqrt":
        special |= flat == 0.0
    if name == "logistic":
        special |= np.isinf(flat)
    for i in np.flatnonzero(special).tolist():
        out[i] = _binary32_special(name, float(flat[i]))
    rest = np.flatnonzero(~special)
    values = flat[rest].tolist()
    fn = DIRECT.get(name)
    if fn is None:
        out[rest] = [_logistic_f32(v) for v in values]
    else:
        with gmpy2.ieee(32):
            out[rest] = [float(fn(v)) for v in values]
    return out.reshape(np.shape(x))


def ulp_error(y: float, exact: mpfr) -> float:
    """|y - exact| in units of the binary64 ulp of exact (2**-1074 below the normal range).

    exact must come from a context with a wide exponent range. A non-finite y counts as
    exact when it equals exact rounded to binary64, and as infinitely wrong otherwise.
    """
    if gmpy2.is_nan(exact):
        return 0.0 if math.isnan(y) else math.inf
    if math.isnan(y):
        return math.inf
    with gmpy2.ieee(64):
        rounded = float(+exact)
    if math.isinf(y) or math.isinf(rounded):
        return 0.0 if y == rounded else math.inf
    if exact == 0:
        return 0.0 if y == 0.0 else math.inf
    exponent = max(gmpy2.get_exp(exact) - 53, -1074)
    with gmpy2.context(precision=256, emin=-(2**30), emax=2**30):
        err = abs(mpfr(y, 53) - exact) * gmpy2.exp2(-exponent)
    return float(err)


def ulp_errors_unary(name: str, x: np.ndarray, y: np.ndarray, precision: int = 160) -> np.ndarray:
    """ulp_error of each y[i] against name(x[i]) computed with `precision` bits."""
    fn = HIGH_PRECISION[name]
    out = np.empty(x.size, dtype=np.float64)
    with gmpy2.context(precision=precision, emin=-(2**30), emax=2**30):
        for i, (xv, yv) in enumerate(zip(x.ravel().tolist(), y.ravel().tolist(), strict=True)):
            if name == "rsqrt" and xv == 0.0:
                out[i] = 0.0 if yv == math.copysign(math.inf, xv) else math.inf
                continue
            out[i] = ulp_error(yv, fn(mpfr(xv, 53)))
    return out


def _mpfr_pow(x: mpfr, y: mpfr) -> mpfr:
    return x**y


def ulp_errors_binary(
    name: str, a: np.ndarray, b: np.ndarray, y: np.ndarray, precision: int = 160
) -> np.ndarray:
    """ulp errors of power(a, b) or atan2(a, b) against MPFR at `precision` bits."""
    fn: Callable[[mpfr, mpfr], mpfr] = {"power": _mpfr_pow, "atan2": gmpy2.atan2}[name]
    out = np.empty(a.size, dtype=np.float64)
    triples = zip(a.ravel().tolist(), b.ravel().tolist(), y.ravel().tolist(), strict=True)
    with gmpy2.context(precision=precision, emin=-(2**30), emax=2**30):
        for i, (av, bv, yv) in enumerate(triples):
            out[i] = ulp_error(yv, fn(mpfr(av, 53), mpfr(bv, 53)))
    return out
