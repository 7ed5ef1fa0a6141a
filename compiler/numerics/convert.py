"""The `convert` op of the numerics contract: every pair of element types, one defined result.

- float -> float: one nearest-even rounding (widening is exact), canonical NaN; into an
  8-bit float without infinity, a value beyond its largest finite one gives its NaN.
- integer -> float: one nearest-even rounding of the exact integer.
- float -> integer: truncation towards zero, saturating at the type's bounds; NaN -> 0.
- integer -> integer: two's complement wrap (sign- or zero-extension, then truncation; s4
  and u4 keep their low 4 bits).
- pred -> number: 0 or 1. number -> pred: x != 0 (so NaN -> true).
- real -> complex: the real part converted as to the component type, imaginary part +0;
  complex -> complex: each part converted as a float.
"""

from __future__ import annotations

import numpy as np

from compiler.numerics import complexes, floats, integers
from core.dtypes import BF16, F16, F32, F64, U8, DType


def float_to_f64(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Exact widening of any float type to float64."""
    if dtype in (BF16, F16):
        return floats.to_f32(values, dtype).astype(np.float64)
    return np.asarray(values).astype(np.float64)


def _integers_to_f64(values: np.ndarray, round_to_odd: bool) -> np.ndarray:
    """Integers to float64, rounded to nearest-even, or to odd so that a later nearest-even
    rounding to a narrower type is a single correct rounding of the integer."""
    values = np.asarray(values)
    if values.dtype.itemsize < 8 or values.size == 0:
        return values.astype(np.float64)  # exact
    small = np.abs(values.astype(np.float64)) <= 2.0**53
    if small.all():
        return values.astype(np.float64)
    out = values.astype(np.float64)
    flat_out = out.reshape(-1)
    flat_in = values.reshape(-1)
    for index in np.flatnonzero(~small.reshape(-1)).tolist():
        exact = int(flat_in[index])
        nearest = float(exact)  # Python rounds int -> float to nearest-even
        inexact_even = int(nearest) != exact and (np.float64(nearest).view(np.uint64) & 1) == 0
        if round_to_odd and inexact_even:
            toward = np.inf if exact > int(nearest) else -np.inf
            nearest = float(np.nextafter(nearest, toward))
        flat_out[index] = nearest
    return out


def convert(values: np.ndarray, source: DType, target: DType) -> np.ndarray:
    """`values` of type `source` converted to `target` under the contract."""
    values = np.asarray(values)
    if source == target:
        return values.copy()
    if source.is_float8:  # exact in binary32 (a NaN becomes the canonical one)
        values, source = floats.to_f32(values, source), F32
        if target == F32:
            return values
    if target.is_complex:
        if source.is_complex:
            real, imag = (convert(part, source.component, target.component) for part in complexes.parts(values))
        else:
            real = convert(values, source, target.component)
            imag = np.zeros_like(real)
        return complexes.make(real, imag, target)
    if target.is_pred:
        return (float_to_f64(values, source) if source.is_float else values) != 0
    if source.is_pred:
        values = values.astype(np.uint8)
        source = U8
    if target.is_float:
        # Every source value is exact in float64 (or rounded to odd there), so this is one
        # correct nearest-even rounding into the target.
        if source.is_float:
            return floats.round_from_f64(float_to_f64(values, source), target)
        widened = _integers_to_f64(values, round_to_odd=target is not F64)
        return floats.round_from_f64(widened, target)
    if source.is_float:
        return _float_to_integer(float_to_f64(values, source), target)
    return integers.wrap(values, target)


def _float_to_integer(values: np.ndarray, target: DType) -> np.ndarray:
    """Truncate towards zero, saturate, NaN -> 0."""
    truncated = np.trunc(values)
    if target.is_signed:
        low, high = -(2.0 ** (target.bits - 1)), 2.0 ** (target.bits - 1)
    else:
        low, high = 0.0, 2.0**target.bits
    least, greatest = target.integer_bounds
    in_range = (truncated >= low) & (truncated < high)
    safe = np.where(in_range, truncated, 0.0)
    # float64 -> uint64 of values >= 2^63 is exact through numpy's unsigned conversion.
    result = safe.astype(target.numpy)
    result = np.where(truncated >= high, np.array(greatest, target.numpy), result)
    result = np.where(truncated < low, np.array(least, target.numpy), result)
    result = np.where(np.isnan(values), np.array(0, target.numpy), result)
    return result.astype(target.numpy)
