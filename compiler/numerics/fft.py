"""The fast Fourier transform of the numerics contract (docs/numerics.md §7, "fft").

A transform over several dimensions is a sequence of one-dimensional passes, one per
dimension, in a pinned order (`pass_axes`). A pass transforms each line along its dimension
with a pinned algorithm:
- a length that is a power of two: radix-2 decimation in time, the input read in
  bit-reversed order, then stages of butterflies `t = w*odd; even + t, even - t` with spans
  2, 4, ..., n;
- any other length: the direct sum `X[k] = sum over j of w[j*k mod n] * x[j]`, from +0 in
  the order j = 0, 1, ..., n-1.
The complex products and sums are the contract's (`compiler.numerics.complexes`: each
product and sum rounded, no fma, canonical NaN parts). The twiddle factors `w[j]` are
exp(-2 pi i j/n) (forward) or exp(+2 pi i j/n) (inverse), each part correctly rounded to the
part type, computed exactly here and compiled in as constants. An inverse pass divides both
parts of each result by n at the end.

This module owns the algorithm: the reference evaluator runs it on numpy arrays and the
backend emits the same steps (compiler/codegen/fft.py), reading its tables from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import gmpy2
import numpy as np

from compiler.numerics import complexes
from core.dtypes import DType

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")
# Working precision of the twiddle factors before their one rounding: far beyond any
# double rounding for angles that are not multiples of pi/4, where the values are exact.
_TWIDDLE_PRECISION = 256


@dataclass(frozen=True)
class FftPass:
    """One pass: the axis it transforms, the line length, and its direction. `real_input`:
    the lines are read from real values (imaginary parts +0); `hermitian_input`: the lines are
    rebuilt from the n//2+1 stored values of a half spectrum (X[n-k] = conj(X[k]), the
    imaginary parts of X[0] and, for even n, X[n/2] taken as +0)."""

    axis: int
    length: int
    inverse: bool
    real_input: bool = False
    hermitian_input: bool = False


def pass_axes(fft_type: str, rank: int, lengths: tuple[int, ...]) -> list[FftPass]:
    """The passes of an fft over the last len(lengths) of `rank` dimensions: the last
    dimension first, then the ones before it (FFT, IFFT, RFFT); for IRFFT the dimensions
    before the last first (on the half spectrum), the last one (complex to real) at the end."""
    axes = list(range(rank - len(lengths), rank))
    by_axis = dict(zip(axes, lengths, strict=True))
    inverse = fft_type in ("IFFT", "IRFFT")
    if fft_type == "IRFFT":
        outer = [FftPass(axis, by_axis[axis], True) for axis in reversed(axes[:-1])]
        return [*outer, FftPass(axes[-1], lengths[-1], True, hermitian_input=True)]
    first = FftPass(axes[-1], lengths[-1], inverse, real_input=fft_type == "RFFT")
    return [first, *(FftPass(axis, by_axis[axis], inverse) for axis in reversed(axes[:-1]))]


def is_power_of_two(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


@cache
def bit_reversal(n: int) -> tuple[int, ...]:
    """The radix-2 input order: position i reads element reverse_bits(i) (n a power of two)."""
    bits = n.bit_length() - 1
    return tuple(int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(n))


def _round_to(value: gmpy2.mpfr, component: DType) -> float:
    """`value` (at the working precision) rounded once to the part type, nearest-even."""
    significand = component.float_layout.mantissa_bits + 1
    with gmpy2.context(gmpy2.get_context(), precision=significand, round=gmpy2.RoundToNearest):
        return float(gmpy2.mpfr(value))


def _cos_sin(turns: Fraction, component: DType) -> tuple[float, float]:
    """cos and sin of 2*pi*turns (0 <= turns < 1), each correctly rounded: the angle is
    brought into [0, 1/8] of a turn by exact symmetries, where both are computed at the
    working precision; no result is -0."""
    if turns >= Fraction(1, 2):
        c, s = _cos_sin(turns - Fraction(1, 2), component)
        return -c + 0.0, -s + 0.0
    if turns >= Fraction(1, 4):
        c, s = _cos_sin(turns - Fraction(1, 4), component)
        return -s + 0.0, c
    if turns > Fraction(1, 8):
        c, s = _cos_sin(Fraction(1, 4) - turns, component)
        return s, c
    if turns == 0:
        return 1.0, 0.0
    with gmpy2.context(gmpy2.get_context(), precision=_TWIDDLE_PRECISION):
        angle = 2 * gmpy2.const_pi() * turns.numerator / turns.denominator
        return _round_to(gmpy2.cos(angle), component), _round_to(gmpy2.sin(angle), component)


@cache
def twiddles(n: int, component: DType, inverse: bool) -> tuple[np.ndarray, np.ndarray]:
    """The real and imaginary parts of w[j] = exp(-+2 pi i j/n), j < n, as arrays of the
    part type (the forward table's imaginary parts are the negated sines, -0 where 0)."""
    cos = np.empty(n, component.numpy)
    sin = np.empty(n, component.numpy)
    for j in range(n):
        cos[j], sin[j] = _cos_sin(Fraction(j, n), component)
    if not inverse:
        sin = -sin
    cos.flags.writeable = sin.flags.writeable = False
    return cos, sin


def twiddle_table(n: int, dtype: DType, inverse: bool) -> np.ndarray:
    """w[j] as an array of the complex type `dtype`."""
    cos, sin = twiddles(n, dtype.component, inverse)
    table = np.empty(n, dtype.numpy)
    table.real, table.imag = cos, sin
    return table


def transform_lines(lines: np.ndarray, dtype: DType, inverse: bool) -> np.ndarray:
    """The pinned one-dimensional transform of each row of `lines` (complex, [count, n])."""
    count, n = lines.shape
    if n == 0:
        return lines.copy()
    table = twiddle_table(n, dtype, inverse)
    if is_power_of_two(n):
        x = lines[:, list(bit_reversal(n))]
        span = 2
        while span <= n:
            half = span // 2
            w = table[np.arange(half) * (n // span)]
            blocks = x.reshape(count, n // span, span)
            even, odd = blocks[:, :, :half], blocks[:, :, half:]
            t = complexes.multiply(w, odd, dtype)
            x = np.concatenate([complexes.add(even, t, dtype), complexes.subtract(even, t, dtype)], axis=2).reshape(count, n)
            span *= 2
    else:
        k = np.arange(n)
        x = np.zeros((count, n), dtype.numpy)
        for j in range(n):
            x = complexes.add(x, complexes.multiply(table[(j * k) % n], lines[:, j : j + 1], dtype), dtype)
    if inverse:
        real, imag = complexes.parts(x)
        size = dtype.component.numpy.type(n)
        x = complexes.make(real / size, imag / size, dtype)
    return x


def hermitian_lines(half: np.ndarray, n: int, dtype: DType) -> np.ndarray:
    """Full lines of length n from half spectra ([count, n//2+1]): X[k] for k <= n/2 (the
    imaginary parts of X[0] and, for even n, X[n/2] +0), conj(X[n-k]) above."""
    real, imag = complexes.parts(half)
    imag[:, 0] = 0
    if n % 2 == 0 and n:
        imag[:, n // 2] = 0
    index = np.array([k if k <= n // 2 else n - k for k in range(n)], dtype=np.int64)
    sign = np.array([1 if k <= n // 2 else -1 for k in range(n)], dtype=real.dtype)
    return complexes.make(real[:, index], imag[:, index] * sign, dtype)


def apply_pass(values: np.ndarray, step: FftPass, dtype: DType) -> np.ndarray:
    """One pass over an array: its lines along `step.axis`, transformed, put back. `dtype`
    is the complex type of the result."""
    moved = np.moveaxis(values, step.axis, -1)
    outer = moved.shape[:-1]
    lines = moved.reshape(-1, moved.shape[-1])
    if step.real_input:
        lines = complexes.make(lines, np.zeros_like(lines), dtype)
    elif step.hermitian_input:
        lines = hermitian_lines(lines, step.length, dtype)
    done = transform_lines(lines, dtype, step.inverse)
    return np.moveaxis(done.reshape(*outer, step.length), -1, step.axis)


def fft(values: np.ndarray, fft_type: str, lengths: tuple[int, ...], dtype: DType) -> np.ndarray:
    """The fft op: `dtype` is the complex type it computes in (the operand's, or the
    result's for RFFT); an RFFT keeps the first n//2+1 values of its last dimension, an
    IRFFT the real parts."""
    x = np.asarray(values)
    for step in pass_axes(fft_type, x.ndim, lengths):
        x = apply_pass(x, step, dtype)
        if step.real_input:
            x = np.take(x, np.arange(step.length // 2 + 1), axis=-1)
    if fft_type == "IRFFT":
        return np.ascontiguousarray(complexes.parts(x)[0])
    return np.ascontiguousarray(x)
