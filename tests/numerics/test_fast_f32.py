"""The fast paths of the binary32 functions (compiler.numerics.mathlib.fast_f32).

Their values are never results: the compiled function returns RN32(v) only where v is
usable and not near a binary32 rounding boundary, and the exact path elsewhere. What makes
that correct is the error bound FAST_ERROR on every usable lane and saturation values that
round as the real function does; both are checked here on samples with the numpy backend
of the DSL (tools/check_f32_exhaustive.py checks the compiled functions on all 2**32
inputs). tests/codegen/test_mathlib_ir.py checks the compiled bits against the reference.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.numerics import mathlib
from compiler.numerics.mathlib.correctly_rounded import near_f32_boundary
from compiler.numerics.mathlib.fast_f32 import FAST_ERROR, FAST_F32, SATURATED, estrin
from compiler.numerics.mathlib.numpy_ops import NUMPY
from compiler.numerics.mathlib.pinned_f64 import PINNED_F64
from tools import mathlib_accuracy as acc

F32_MIN_NORMAL = 2.0**-126


def _inputs(name: str) -> np.ndarray:
    """Random bit patterns, the usual range of activations, and the edges of every
    interval of the fast paths (saturation points, the erf pieces, exp's clamps)."""
    rng = np.random.default_rng([30, sorted(FAST_F32).index(name)])
    edges = np.array([0.0, 0.5, 2.0**-7, 0.17, 0.35, 0.69, 1.0, 3.9, 4.0, 9.0, 9.02, 17.33,
                      20.0, 40.0, 87.3, 88.72, 89.0, 103.97, 104.0, 105.0, 110.0, 32768.0, 1e30,
                      np.inf], dtype=np.float32)
    around = (edges.view(np.int32)[:, None] + np.arange(-40, 41)[None, :]).ravel()
    around = np.abs(around).astype(np.int32).view(np.float32)
    # The binary32 values nearest to multiples of pi/2, where sin and cos are smallest.
    k = rng.integers(1, 2**15, 20_000)
    multiples = (k * (np.pi / 2)).astype(np.float32).view(np.int32)
    near_zeros = (multiples[:, None] + np.arange(-2, 3)[None, :]).ravel().view(np.float32)
    parts = [near_zeros, acc.random_f32_bits(rng, 200_000),
             (rng.standard_normal(200_000) * 4).astype(np.float32),
             acc.log_uniform(rng, 100_000, -40, 8).astype(np.float32), around]
    x = np.concatenate(parts)
    return np.concatenate([x, -x])


def _saturated(name: str, x: np.ndarray) -> np.ndarray:
    rule = SATURATED.get(name)
    return np.zeros(x.shape, dtype=bool) if rule is None else rule(NUMPY, x)


def _wide(x32: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # widening a signaling NaN raises the flag
        return x32.astype(np.float64)


@pytest.mark.parametrize("name", sorted(FAST_F32))
def test_usable_lanes_meet_the_error_bound(name: str) -> None:
    """|v - f(x)| <= FAST_ERROR |f(x)| wherever v is used as an approximation: f(x) from
    the pinned binary64 function (itself within 2**-51), with a factor 4 of margin."""
    x = _wide(_inputs(name))
    with np.errstate(all="ignore"):
        v, usable = FAST_F32[name](NUMPY, x)
        exact = PINNED_F64[name](x)
    approximated = usable & ~_saturated(name, x) & (np.abs(exact) >= F32_MIN_NORMAL) & (
        np.abs(exact) < 2.0**128)
    relative = np.abs(v[approximated] - exact[approximated]) / np.abs(exact[approximated])
    assert approximated.sum() > 300_000
    assert relative.max() <= FAST_ERROR / 4, f"{name}: max relative error 2**{np.log2(relative.max()):.1f}"


@pytest.mark.parametrize("name", sorted(FAST_F32))
def test_decided_lanes_round_as_the_contract(name: str) -> None:
    """Where the backend takes the fast value (usable and not near a boundary), RN32(v) is
    the reference's binary32 result: saturations (0, inf, +-1) and clamps included."""
    x32 = _inputs(name)
    x = _wide(x32)
    with np.errstate(all="ignore"):
        v, usable = FAST_F32[name](NUMPY, x)
        decided = usable & ~near_f32_boundary(NUMPY, v)
        got = v[decided].astype(np.float32).view(np.uint32)
    want = mathlib.unary(name, x32[decided]).view(np.uint32)
    assert decided.mean() > 0.4  # log: the negative half of the inputs is not usable
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{name}: x={x32[decided][bad[:5]]}"


@pytest.mark.parametrize("name", sorted(FAST_F32))
def test_nan_is_never_usable(name: str) -> None:
    x = np.array([np.nan, -np.nan], dtype=np.float64)
    with np.errstate(all="ignore"):
        _, usable = FAST_F32[name](NUMPY, x)
    assert not usable.any()


def test_estrin_evaluates_the_polynomial() -> None:
    coeffs = tuple(1.0 / (k + 1) for k in range(11))
    x = np.linspace(-0.5, 0.5, 101)
    want = sum(c * x**k for k, c in enumerate(coeffs))
    for degree in range(len(coeffs)):
        part = coeffs[: degree + 1]
        expect = sum(c * x**k for k, c in enumerate(part))
        assert np.allclose(estrin(part, x), expect, rtol=1e-15, atol=1e-16), degree
    assert np.allclose(estrin(coeffs, x), want, rtol=1e-15)
