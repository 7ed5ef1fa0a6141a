"""Complex arithmetic of the numerics contract (docs/numerics.md, "Complex numbers"): every op
is a pinned sequence of IEEE operations on the real and imaginary parts (binary32 for c64,
binary64 for c128), each rounded once, with no fused multiply-add, and each part of a result
made canonical if it is a NaN. The formulas are XLA:CPU's, so results agree with it where
its own are not special-cased."""

from __future__ import annotations

import numpy as np

from compiler.numerics import floats
from core.dtypes import DType


def parts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The real and imaginary parts of a complex array, as arrays of the component type."""
    values = np.asarray(values)
    return values.real.copy(), values.imag.copy()


def make(real: np.ndarray, imag: np.ndarray, dtype: DType) -> np.ndarray:
    """A complex array of `dtype` from its parts, each NaN made canonical."""
    component = dtype.component
    real = floats.canonicalize_nans(np.asarray(real, component.numpy), component)
    imag = floats.canonicalize_nans(np.asarray(imag, component.numpy), component)
    real, imag = np.broadcast_arrays(real, imag)
    out = np.empty(real.shape, dtype.numpy)
    out.real, out.imag = real, imag
    return out


def add(a: np.ndarray, b: np.ndarray, dtype: DType) -> np.ndarray:
    (ar, ai), (br, bi) = parts(a), parts(b)
    return make(ar + br, ai + bi, dtype)


def subtract(a: np.ndarray, b: np.ndarray, dtype: DType) -> np.ndarray:
    (ar, ai), (br, bi) = parts(a), parts(b)
    return make(ar - br, ai - bi, dtype)


def negate(a: np.ndarray, dtype: DType) -> np.ndarray:
    ar, ai = parts(a)
    return make(-ar, -ai, dtype)


def multiply(a: np.ndarray, b: np.ndarray, dtype: DType) -> np.ndarray:
    """(ar*br - ai*bi) + (ar*bi + ai*br)i, each product and sum rounded."""
    (ar, ai), (br, bi) = parts(a), parts(b)
    return make(ar * br - ai * bi, ar * bi + ai * br, dtype)


def divide(a: np.ndarray, b: np.ndarray, dtype: DType) -> np.ndarray:
    """Smith's algorithm, divided by the larger part of b: when |br| < |bi|, with
    r = br/bi and d = bi + r*br, ((r*ar + ai)/d) + ((r*ai - ar)/d)i; otherwise, with
    r = bi/br and d = br + r*bi, ((r*ai + ar)/d) + ((ai - r*ar)/d)i. Where both parts of
    that are NaN, XLA:CPU's three repairs, in this order: a zero b (and a not all NaN) gives
    copysign(inf, br) * a; an infinite part of a with b finite gives inf * (sa*conj(b))
    with sa the parts of a reduced to copysign(0 or 1); a finite a with an infinite part of
    b gives 0 * (a*conj(sb)), sb likewise."""
    (ar, ai), (br, bi) = parts(a), parts(b)
    ar, ai, br, bi = np.broadcast_arrays(ar, ai, br, bi)
    component = dtype.component.numpy
    zero, one, inf = (np.asarray(v, component) for v in (0.0, 1.0, np.inf))
    r_by_imag = br / bi
    d_by_imag = bi + r_by_imag * br
    r_by_real = bi / br
    d_by_real = br + r_by_real * bi
    by_imag = np.abs(br) < np.abs(bi)
    real = np.where(by_imag, (r_by_imag * ar + ai) / d_by_imag, (r_by_real * ai + ar) / d_by_real)
    imag = np.where(by_imag, (r_by_imag * ai - ar) / d_by_imag, (ai - r_by_real * ar) / d_by_real)

    def finite(x: np.ndarray) -> np.ndarray:
        return (np.abs(x) != inf) & ~np.isnan(x)

    def unit(x: np.ndarray, infinite: np.ndarray) -> np.ndarray:
        return np.copysign(np.where(infinite, one, zero), x)

    zero_denominator = (br == 0) & (bi == 0) & (~np.isnan(ar) | ~np.isnan(ai))
    scale = np.copysign(inf, br)
    ar_inf, ai_inf, br_inf, bi_inf = (np.abs(x) == inf for x in (ar, ai, br, bi))
    infinite_numerator = (ar_inf | ai_inf) & finite(br) & finite(bi)
    sar, sai = unit(ar, ar_inf), unit(ai, ai_inf)
    infinite_denominator = (br_inf | bi_inf) & finite(ar) & finite(ai)
    sbr, sbi = unit(br, br_inf), unit(bi, bi_inf)
    repairs = [
        (zero_denominator, scale * ar, scale * ai),
        (infinite_numerator, inf * (sar * br + sai * bi), inf * (sai * br - sar * bi)),
        (infinite_denominator, zero * (ar * sbr + ai * sbi), zero * (ai * sbr - ar * sbi)),
    ]
    repaired_real, repaired_imag = real, imag
    for case, case_real, case_imag in reversed(repairs):
        repaired_real = np.where(case, case_real, repaired_real)
        repaired_imag = np.where(case, case_imag, repaired_imag)
    both_nan = np.isnan(real) & np.isnan(imag)
    return make(np.where(both_nan, repaired_real, real), np.where(both_nan, repaired_imag, imag), dtype)


def sign(a: np.ndarray, dtype: DType) -> np.ndarray:
    """a / |a| part by part (each part divided by the contract's |a|), and 0 + 0i where
    |a| = 0, as XLA:CPU computes it."""
    ar, ai = parts(a)
    magnitude = absolute(a, dtype)
    zero = magnitude == 0
    with np.errstate(all="ignore"):
        real = np.where(zero, 0, ar / np.where(zero, 1, magnitude))
        imag = np.where(zero, 0, ai / np.where(zero, 1, magnitude))
    return make(real, imag, dtype)


def absolute(a: np.ndarray, dtype: DType) -> np.ndarray:
    """|a| = hi * sqrt(1 + (lo/hi)^2) with hi, lo the larger and smaller of |ar|, |ai|
    (maximum and minimum as the contract's, NaN propagating); lo where that is NaN, which
    makes |0| = 0 and |inf + inf i| = inf."""
    ar, ai = parts(a)
    component = dtype.component
    magnitude_r, magnitude_i = np.abs(ar), np.abs(ai)
    nan = np.isnan(magnitude_r) | np.isnan(magnitude_i)
    high = np.where(nan, np.nan, np.maximum(magnitude_r, magnitude_i)).astype(component.numpy)
    low = np.where(nan, np.nan, np.minimum(magnitude_r, magnitude_i)).astype(component.numpy)
    ratio = low / high
    result = high * np.sqrt(np.asarray(1, component.numpy) + ratio * ratio)
    return floats.canonicalize_nans(np.where(np.isnan(result), low, result).astype(component.numpy), component)


def equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Both parts equal (IEEE: a NaN part is unequal to everything)."""
    (ar, ai), (br, bi) = parts(a), parts(b)
    return (ar == br) & (ai == bi)
