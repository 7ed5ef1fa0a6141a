"""Tests of the math library of the numerics contract (compiler.numerics.mathlib)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import gmpy2
import numpy as np
import pytest

from compiler.numerics import mathlib
from compiler.numerics.mathlib import mpfr_reference, trig
from compiler.numerics.mathlib.correctly_rounded import ambiguous
from compiler.numerics.mathlib.mpfr_reference import (
    correctly_rounded_f32_array,
    ulp_errors_binary,
    ulp_errors_unary,
)
from compiler.numerics.mathlib.pinned_f64 import PINNED_F64
from core.dtypes import F32, F64
from tools import mathlib_accuracy as acc
from tools import mathlib_constants

NAMES = mathlib.UNARY_FUNCTIONS
INF = math.inf
NAN = math.nan
F32_NAN_BITS = F32.float_layout.canonical_nan
F64_NAN_BITS = F64.float_layout.canonical_nan

# Test bounds: just above the measured maxima given in docs/numerics.md (section 3).
F64_BOUND_ULP = {
    "exp": 0.76,  # 0.5 + 0.25: double rounding of results just below 2**-1022
    "expm1": 0.55,
    "log": 0.51,
    "log1p": 0.51,
    "tanh": 0.55,
    "logistic": 0.76,
    "erf": 0.8,
    "sin": 0.82,
    "cos": 0.82,
    "rsqrt": 1.6,
    "cbrt": 0.51,
}
BINARY_BOUND_ULP = {"power": 0.76, "atan2": 0.51}


def bits(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def f32_mismatches(name: str, x: np.ndarray) -> np.ndarray:
    return acc.f32_mismatches(name, np.asarray(x, dtype=np.float32))


# --------------------------------------------------------------------------- constants


def test_constants_module_matches_generator() -> None:
    path = Path(mathlib_constants.MODULE_PATH)
    assert path.read_text() == mathlib_constants.generate()


# --------------------------------------------------------------------------- binary32


@pytest.mark.parametrize("name", NAMES)
def test_f32_random_bits_correctly_rounded(name: str) -> None:
    rng = np.random.default_rng([1, NAMES.index(name)])
    x = acc.random_f32_bits(rng, 200_000)
    bad = f32_mismatches(name, x)
    assert bad.size == 0, [float(v).hex() for v in bad[:8]]


@pytest.mark.parametrize("name", NAMES)
def test_f32_hard_regions_correctly_rounded(name: str) -> None:
    rng = np.random.default_rng([2, NAMES.index(name)])
    x = acc.f32_hard_samples(name, rng, 100_000)
    bad = f32_mismatches(name, x)
    assert bad.size == 0, [float(v).hex() for v in bad[:8]]


@pytest.mark.parametrize(
    ("name", "start"),
    [
        ("log", 0x3F7C0000),  # just below 1
        ("log1p", 0xB6000000),  # small negative arguments
        ("sin", 0x49800000),  # from 2**20: the first Payne-Hanek binade
        ("erf", 0x40780000),  # around 3.9, where erf starts to round to 1
        ("tanh", 0x3A800000),  # small arguments
        ("logistic", 0xC2C00000),  # around -96: subnormal results
    ],
)
def test_f32_exhaustive_slices(name: str, start: int) -> None:
    x = np.arange(start, start + (1 << 18), dtype=np.uint32).view(np.float32)
    bad = f32_mismatches(name, x)
    assert bad.size == 0, [float(v).hex() for v in bad[:8]]


@pytest.mark.parametrize("name", NAMES)
def test_f32_ambiguous_elements_are_resolved(name: str) -> None:
    """The elements whose binary64 value is too close to a boundary go through MPFR."""
    rng = np.random.default_rng([9, NAMES.index(name)])
    x = acc.random_f32_bits(rng, 1 << 20)
    with np.errstate(all="ignore"):
        v = PINNED_F64[name](x.astype(np.float64))
        hard = x[ambiguous(v, v.astype(np.float32))]
    assert hard.size > 0
    assert f32_mismatches(name, hard).size == 0


@pytest.mark.parametrize(("name", "start"), [("exp", 0x3F800000), ("cos", 0x3FC00000)])
def test_f32_quarter_binade(name: str, start: int) -> None:
    """Every binary32 of a quarter binade, 2^21 values: exp on [1, 1.25), cos on [1.5, 1.75),
    which holds its zero crossing at pi/2. Every binary32 of every function:
    tools/check_f32_exhaustive.py."""
    x = np.arange(start, start + (1 << 21), dtype=np.uint32).view(np.float32)
    bad = f32_mismatches(name, x)
    assert bad.size == 0, [float(v).hex() for v in bad[:8]]


def test_f32_ambiguity_detection_boundaries() -> None:
    f32 = np.float32
    one = np.float64(1.0)
    eps = 2.0**-24
    v = np.array(
        [
            one + eps,  # exact midpoint above 1
            one - eps / 2,  # exact midpoint below 1 (finer grid)
            one + eps * (1 + 2.0**-45),  # within the band
            one + eps * 0.5,  # a quarter ulp: safe
            2.0**128 - 2.0**103,  # overflow threshold itself
            (2.0**128 - 2.0**103) * (1 + 2.0**-45),
            1e39,  # far beyond the threshold
            2.0**-150,  # midpoint between 0 and the smallest subnormal
            2.0**-151,
            0.0,
            np.inf,
            np.nan,
        ]
    )
    with np.errstate(all="ignore"):
        r = v.astype(f32)
    expected = [True, True, True, False, True, True, False, True, False, False, False, False]
    with np.errstate(all="ignore"):
        assert ambiguous(v, r).tolist() == expected


SPECIALS = [
    ("exp", [-INF, INF, 0.0, -0.0, NAN], [0.0, INF, 1.0, 1.0, NAN]),
    ("expm1", [-INF, INF, 0.0, -0.0, NAN], [-1.0, INF, 0.0, -0.0, NAN]),
    ("log", [0.0, -0.0, -1.0, INF, -INF, 1.0, NAN], [-INF, -INF, NAN, INF, NAN, 0.0, NAN]),
    ("log1p", [-1.0, -2.0, 0.0, -0.0, INF, -INF, NAN], [-INF, NAN, 0.0, -0.0, INF, NAN, NAN]),
    ("tanh", [INF, -INF, 0.0, -0.0, NAN], [1.0, -1.0, 0.0, -0.0, NAN]),
    ("logistic", [INF, -INF, 0.0, -0.0, NAN], [1.0, 0.0, 0.5, 0.5, NAN]),
    ("erf", [INF, -INF, 0.0, -0.0, NAN], [1.0, -1.0, 0.0, -0.0, NAN]),
    ("sin", [INF, -INF, 0.0, -0.0, NAN], [NAN, NAN, 0.0, -0.0, NAN]),
    ("cos", [INF, -INF, 0.0, -0.0, NAN], [NAN, NAN, 1.0, 1.0, NAN]),
    ("rsqrt", [0.0, -0.0, INF, -INF, -1.0, 4.0, NAN], [INF, -INF, 0.0, NAN, NAN, 0.5, NAN]),
    ("cbrt", [0.0, -0.0, INF, -INF, -8.0, 27.0, NAN], [0.0, -0.0, INF, -INF, -2.0, 3.0, NAN]),
]

# Saturation: overflow to inf, underflow to 0, rounding to +-1 (binary32, binary64).
SATURATION = {
    np.float32: [
        ("exp", [89.0, -104.0, -103.9], [INF, 0.0, 1e-45]),
        ("expm1", [89.0, -18.0], [INF, -1.0]),
        ("tanh", [9.1, -9.1], [1.0, -1.0]),
        ("logistic", [-104.0, 17.4], [0.0, 1.0]),
        ("erf", [3.92, -3.92], [1.0, -1.0]),
    ],
    np.float64: [
        ("exp", [710.0, -746.0, -745.0], [INF, 0.0, 5e-324]),
        ("expm1", [710.0, -38.0], [INF, -1.0]),
        ("tanh", [19.1, -19.1], [1.0, -1.0]),
        ("logistic", [-746.0, 37.5], [0.0, 1.0]),
        ("erf", [5.93, -5.93], [1.0, -1.0]),
    ],
}


def _check_table(name: str, inputs: list[float], expected: list[float], dtype: type) -> None:
    got = mathlib.unary(name, np.array(inputs, dtype=dtype))
    want = np.array(expected, dtype=dtype)
    want_bits = bits(want).copy()
    want_bits[np.isnan(want)] = F32_NAN_BITS if dtype is np.float32 else F64_NAN_BITS
    assert bits(got).tolist() == want_bits.tolist()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("name", "inputs", "expected"), SPECIALS)
def test_special_values(name: str, inputs: list[float], expected: list[float], dtype: type) -> None:
    _check_table(name, inputs, expected, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_saturation(dtype: type) -> None:
    for name, inputs, expected in SATURATION[dtype]:
        _check_table(name, inputs, expected, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", NAMES)
def test_nan_is_canonical(name: str, dtype: type) -> None:
    if dtype is np.float32:
        patterns = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FC12345], np.uint32)
    else:
        patterns = np.array(
            [0x7FF8000000000000, 0xFFF8000000000000, 0x7FF0000000000001, 0xFFFFFFFFFFFFFFFF],
            np.uint64,
        )
    got = bits(mathlib.unary(name, patterns.view(dtype)))
    assert set(got.tolist()) == {F32_NAN_BITS if dtype is np.float32 else F64_NAN_BITS}


def test_sin_cos_huge_f32_arguments() -> None:
    x = np.array([3.4028235e38, -3.4028235e38, 1e38, 2.0**100, 16777216.0], dtype=np.float32)
    for name in ("sin", "cos"):
        assert f32_mismatches(name, x).size == 0


# --------------------------------------------------------------------------- binary64


@pytest.mark.parametrize("name", NAMES)
def test_f64_max_ulp_error(name: str) -> None:
    rng = np.random.default_rng([3, NAMES.index(name)])
    for _label, x in acc.f64_samples(name, rng, 5000):
        err = ulp_errors_unary(name, x, mathlib.unary(name, x))
        i = int(np.argmax(err))
        assert err[i] <= F64_BOUND_ULP[name], (float(x[i]).hex(), err[i])


def test_payne_hanek_reduction_against_mpfr() -> None:
    rng = np.random.default_rng(10)
    a = np.abs(acc.log_uniform(rng, 300, 20, 1024))
    a = np.append(a, [6381956970095103.0 * 2.0**797, 2.0**20, float.fromhex("0x1.fffffffffffffp+1023")])
    q, rh, rl = trig.reduce_payne_hanek(a)
    with gmpy2.context(precision=2400):
        pio2 = gmpy2.const_pi() / 2
        for ai, qi, hi, lo in zip(a.tolist(), q.tolist(), rh.tolist(), rl.tolist(), strict=True):
            k = gmpy2.rint(gmpy2.mpfr(ai) / pio2)
            r = gmpy2.mpfr(ai) - k * pio2
            assert int(k) % 4 == qi
            # Window truncation: below 2**-127 quarter turns; double-double: 2**-100 relative.
            err = abs((gmpy2.mpfr(hi) + gmpy2.mpfr(lo)) - r)
            assert err < 2.0**-126 + 2.0**-100 * abs(r)


def test_payne_hanek_window_table() -> None:
    with gmpy2.context(precision=1500):
        two_over_pi = 2 / gmpy2.const_pi()
        for s in (-33, -1, 0, 1, 100, 500, 970):
            window = int(gmpy2.floor(two_over_pi * gmpy2.exp2(s + 181))) % 2**182
            limbs = [(window >> (26 * t)) & (2**26 - 1) for t in range(7)]
            assert trig._WINDOWS[s + 33].tolist() == limbs


@pytest.mark.parametrize("name", ["sin", "cos"])
def test_f64_sin_cos_huge_arguments(name: str) -> None:
    x = np.array(
        [
            1e300,
            -1e300,
            6381956970095103.0 * 2.0**797,  # the binary64 closest to a multiple of pi/2
            float.fromhex("0x1.fffffffffffffp+1023"),
            2.0**20,
            float.fromhex("0x1.fffffffffffffp+19"),
            1e22,
        ]
    )
    err = ulp_errors_unary(name, x, mathlib.unary(name, x))
    assert err.max() <= F64_BOUND_ULP[name]


def test_f64_subnormal_inputs_and_outputs() -> None:
    tiny = np.array([5e-324, 1e-310, -2.5e-320, 2.2250738585072009e-308])
    for name in ("sin", "tanh", "erf", "expm1", "log1p", "cbrt", "rsqrt", "log"):
        x = np.abs(tiny) if name in ("rsqrt", "log") else tiny
        err = ulp_errors_unary(name, x, mathlib.unary(name, x))
        assert err.max() <= F64_BOUND_ULP[name], name
    x = np.array([-708.5, -720.0, -744.0, -745.2, -746.0, 709.78, 709.79])
    for name in ("exp", "logistic"):
        xs = x if name == "exp" else x.clip(-1e9, 0)
        err = ulp_errors_unary(name, xs, mathlib.unary(name, xs))
        assert err.max() <= F64_BOUND_ULP[name], name


@pytest.mark.parametrize("name", NAMES)
def test_determinism_across_layouts(name: str) -> None:
    rng = np.random.default_rng(4)
    base = acc.log_uniform(rng, 4096, -20, 12)
    for dtype in (np.float32, np.float64):
        x = base.astype(dtype)
        flat = mathlib.unary(name, x)
        assert bits(mathlib.unary(name, x)).tolist() == bits(flat).tolist()
        grid = x.reshape(64, 64)
        assert bits(mathlib.unary(name, grid)).ravel().tolist() == bits(flat).tolist()
        fortran = np.asfortranarray(grid)
        assert bits(mathlib.unary(name, fortran)).ravel().tolist() == bits(flat).tolist()
        strided = np.repeat(x, 2)[::2]
        assert bits(mathlib.unary(name, strided)).tolist() == bits(flat).tolist()
        transposed = grid.T
        got = mathlib.unary(name, transposed)
        assert bits(got).tolist() == bits(flat.reshape(64, 64).T).tolist()


@pytest.mark.parametrize("name", NAMES)
def test_symmetry(name: str) -> None:
    rng = np.random.default_rng(5)
    x = np.abs(acc.log_uniform(rng, 2000, -30, 30))
    pos, neg = mathlib.unary(name, x), mathlib.unary(name, -x)
    if name in ("sin", "tanh", "erf", "cbrt"):
        assert bits(neg).tolist() == bits(-pos).tolist()
    elif name == "cos":
        assert bits(neg).tolist() == bits(pos).tolist()


def test_shapes_and_errors() -> None:
    assert mathlib.unary("exp", np.zeros((0, 3), np.float32)).shape == (0, 3)
    scalar = mathlib.unary("exp", np.array(1.0))
    assert scalar.shape == () and scalar.dtype == np.float64
    with pytest.raises(ValueError):
        mathlib.unary("tan", np.zeros(3))
    with pytest.raises(TypeError):
        mathlib.unary("exp", np.zeros(3, np.float16))
    with pytest.raises(ValueError):
        mathlib.power(np.zeros(3), np.zeros(3, np.float32))
    with pytest.raises(ValueError):
        mathlib.atan2(np.zeros(3), np.zeros(4))


# --------------------------------------------------------------------------- power, atan2

P0, N0 = 0.0, -0.0
POW_SPECIALS = [
    # (x, y, expected): C99 F.10.4.4
    (P0, -3.0, INF), (N0, -3.0, -INF),  # odd negative integer
    (P0, -2.0, INF), (N0, -2.0, INF), (N0, -0.5, INF),  # negative, not an odd integer
    (P0, -INF, INF), (N0, -INF, INF),
    (P0, 3.0, P0), (N0, 3.0, N0),  # odd positive integer
    (P0, 2.0, P0), (N0, 2.0, P0), (N0, 0.5, P0), (N0, INF, P0),
    (-1.0, INF, 1.0), (-1.0, -INF, 1.0),
    (1.0, NAN, 1.0), (1.0, INF, 1.0), (1.0, -INF, 1.0), (1.0, 7.5, 1.0),
    (NAN, 0.0, 1.0), (NAN, -0.0, 1.0), (INF, 0.0, 1.0), (-3.0, -0.0, 1.0),
    (-2.0, 0.5, NAN), (-2.0, -1.5, NAN), (-INF, 0.5, INF),
    (0.5, -INF, INF), (-0.5, -INF, INF), (2.0, -INF, P0), (-2.0, -INF, P0),
    (0.5, INF, P0), (-0.5, INF, P0), (2.0, INF, INF), (-2.0, INF, INF),
    (-INF, -3.0, N0), (-INF, -2.0, P0), (-INF, -0.5, P0),
    (-INF, 3.0, -INF), (-INF, 2.0, INF), (-INF, 0.5, INF),
    (INF, -1.0, P0), (INF, -INF, P0), (INF, 0.5, INF), (INF, INF, INF),
    (NAN, 1.0, NAN), (2.0, NAN, NAN), (-1.0, NAN, NAN), (P0, NAN, NAN),
    (-2.0, 3.0, -8.0), (-2.0, 2.0, 4.0), (-2.0, -1.0, -0.5), (4.0, 0.5, 2.0),
    (2.0, 1024.0, INF), (2.0, -1074.0, 5e-324), (2.0, -1080.0, P0), (-2.0, -1075.0, N0),
]

ATAN2_SPECIALS = [
    # (y, x, expected): C99 F.10.1.4
    (P0, N0, math.pi), (N0, N0, -math.pi), (P0, P0, P0), (N0, P0, N0),
    (P0, -1.0, math.pi), (N0, -1.0, -math.pi), (P0, 1.0, P0), (N0, 1.0, N0),
    (-1.0, P0, -math.pi / 2), (-1.0, N0, -math.pi / 2),
    (1.0, P0, math.pi / 2), (1.0, N0, math.pi / 2),
    (1.0, -INF, math.pi), (-1.0, -INF, -math.pi), (1.0, INF, P0), (-1.0, INF, N0),
    (INF, 1.0, math.pi / 2), (-INF, 1.0, -math.pi / 2),
    (INF, -INF, 3 * math.pi / 4), (-INF, -INF, -3 * math.pi / 4),
    (INF, INF, math.pi / 4), (-INF, INF, -math.pi / 4),
    (NAN, 1.0, NAN), (1.0, NAN, NAN), (NAN, NAN, NAN), (INF, NAN, NAN),
    (1.0, 1.0, math.pi / 4), (-1.0, -1.0, -3 * math.pi / 4),
    (5e-324, -1.0, math.pi), (1.0, 1e300, 1e-300), (1e-300, 1e300, P0),
]


def _expected_bits(values: list[float], dtype: type) -> list[int]:
    want = np.array(values, dtype=np.float64).astype(dtype)
    out = bits(want).copy()
    out[np.isnan(want)] = F32_NAN_BITS if dtype is np.float32 else F64_NAN_BITS
    return out.tolist()


def _mismatched_rows(fn: Callable[[np.ndarray, np.ndarray], np.ndarray], rows: list, dtype: type) -> list:
    """The rows (first operand, second operand, expected value) where the bits of `fn` on
    the operands in `dtype` differ from the expected value's in `dtype`."""
    first = np.array([r[0] for r in rows], dtype=dtype)
    second = np.array([r[1] for r in rows], dtype=dtype)
    got = bits(fn(first, second)).tolist()
    want = _expected_bits([r[2] for r in rows], dtype)
    pairs = zip(rows, got, want, strict=True)
    return [(row, hex(g), hex(w)) for row, g, w in pairs if g != w]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_special_cases(dtype: type) -> None:
    rows = [r for r in POW_SPECIALS if dtype is np.float64 or abs(r[1]) < 1000]
    assert _mismatched_rows(mathlib.power, rows, dtype) == []


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_atan2_special_cases(dtype: type) -> None:
    rows = [r for r in ATAN2_SPECIALS if dtype is np.float64 or abs(r[1]) < 1e30]
    assert _mismatched_rows(mathlib.atan2, rows, dtype) == []


@pytest.mark.parametrize("name", ["power", "atan2"])
def test_binary_f64_accuracy(name: str) -> None:
    rng = np.random.default_rng(6)
    fn = mathlib.power if name == "power" else mathlib.atan2
    for _label, a, b in acc.binary_samples(name, rng, 10_000):
        err = ulp_errors_binary(name, a, b, fn(a, b))
        i = int(np.argmax(err))
        assert err[i] <= BINARY_BOUND_ULP[name], (float(a[i]).hex(), float(b[i]).hex(), err[i])


@pytest.mark.parametrize("name", ["power", "atan2"])
def test_binary_f32_is_rounded_f64(name: str) -> None:
    rng = np.random.default_rng(7)
    fn = mathlib.power if name == "power" else mathlib.atan2
    a = np.abs(acc.log_uniform(rng, 5000, -20, 20)).astype(np.float32)
    b = acc.log_uniform(rng, 5000, -6, 4).astype(np.float32)
    got = fn(a, b)
    with np.errstate(all="ignore"):
        want = fn(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    assert bits(got).tolist() == bits(want).tolist()


def test_power_exact_small_integer_powers() -> None:
    rng = np.random.default_rng(8)
    m = rng.integers(-(2**17), 2**17, 20000).astype(np.float64)
    x = m * np.exp2(rng.integers(-300, 300, 20000).astype(np.float64))
    for k in (1.0, 2.0, 3.0):  # x has at most 18 bits: x**2 and x**3 are exact
        want = x**k
        got = mathlib.power(x, np.full_like(x, k))
        assert bits(got).tolist() == bits(want).tolist()
    p2 = np.exp2(np.arange(-1074, 1024, dtype=np.float64))
    for k in (-1.0, 0.5):
        got = mathlib.power(p2, np.full_like(p2, k))
        exact = np.arange(-1074, 1024) % 2 == 0 if k == 0.5 else np.abs(np.log2(p2)) <= 1022
        with np.errstate(all="ignore"):
            want = p2**k
        assert bits(got[exact]).tolist() == bits(want[exact]).tolist()
    ints = np.arange(-100, 101, dtype=np.float32)
    for k in (2.0, 3.0):
        got = mathlib.power(ints, np.full_like(ints, k))
        assert got.tolist() == (ints.astype(np.float64) ** k).tolist()


def test_logistic_reference_bounds() -> None:
    """The directed-rounding fallback of the logistic reference brackets the value."""
    for x in (-100.0, -3.5, 0.0, 1e-6, 2.0, 17.0):
        lower, upper = mpfr_reference._logistic_bounds(gmpy2.mpfr(x), 128)
        assert lower <= upper
        with gmpy2.ieee(32):
            assert float(+lower) == float(+upper) == mpfr_reference.correctly_rounded_f32(
                "logistic", x
            )


def test_f32_reference_handles_subnormal_results() -> None:
    x = np.array([-100.0, -103.5, -87.5], dtype=np.float32)
    ref = correctly_rounded_f32_array("exp", x)
    assert np.all(ref > 0) and np.all(ref < np.float32(1.2e-38))
