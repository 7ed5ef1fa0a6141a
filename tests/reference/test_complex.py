"""Complex numbers in the contract: what the reference computes (against numpy's complex
arithmetic where both are ordinary, exactly where the contract pins a special value), the
literals, digests and the refusals that name what is outside the contract."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from attest.digests import tensor_digest
from compiler.hlo import HloUnsupportedError, canonical_text, load_module
from compiler.hlo.errors import HloVerifyError
from compiler.reference import evaluate
from harness.hlo_fragments import scalar_binary

ARITHMETIC = """HloModule m
ENTRY e {
  a = c64[64] parameter(0)
  b = c64[64] parameter(1)
  s = c64[64] add(a, b)
  d = c64[64] subtract(a, b)
  m = c64[64] multiply(a, b)
  q = c64[64] divide(a, b)
  n = c64[64] negate(a)
  r = f32[64] abs(a)
  ROOT t = (c64[64], c64[64], c64[64], c64[64], c64[64], f32[64]) tuple(s, d, m, q, n, r)
}
"""


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: type = np.complex64) -> np.ndarray:
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


def test_arithmetic_on_ordinary_values_is_numpys_to_rounding() -> None:
    rng = np.random.default_rng(1)
    a, b = _random(rng, (64,)), _random(rng, (64,))
    added, subtracted, multiplied, divided, negated, magnitude = evaluate(load_module(ARITHMETIC), [a, b])
    assert added.tobytes() == (a + b).tobytes() and subtracted.tobytes() == (a - b).tobytes()
    assert negated.tobytes() == (-a).tobytes()
    np.testing.assert_allclose(multiplied, a * b, rtol=1e-6)
    np.testing.assert_allclose(divided, a / b, rtol=1e-6)
    np.testing.assert_allclose(magnitude, np.abs(a), rtol=1e-6)


def test_pinned_special_values() -> None:
    inf, nan = np.inf, np.nan
    a = np.array([1 + 1j, complex(inf, 1), complex(1, 1), complex(nan, 0), 3 + 4j, 0j, complex(inf, inf), 1e30 + 1e30j], np.complex64)
    b = np.array([0j, 1 + 1j, complex(inf, 0), 1 + 0j, 1 + 0j, 1 + 0j, 1 + 0j, 1 + 0j], np.complex64)
    text = ARITHMETIC.replace("[64]", "[8]")
    _, _, multiplied, divided, _, magnitude = evaluate(load_module(text), [a, b])
    # A zero divisor: copysign(inf, br) times each part (XLA's repair).
    assert divided[0].real == inf and divided[0].imag == inf
    # An infinite numerator over a finite divisor stays infinite; a finite one over an
    # infinite divisor is zero.
    assert divided[1].real == inf and divided[2] == 0
    # A NaN part makes the canonical NaN, never another NaN pattern.
    assert np.isnan(divided[3].real) and divided[3].real.view(np.uint32) == 0x7FC00000
    assert magnitude[4] == 5 and magnitude[5] == 0 and magnitude[6] == inf
    assert magnitude[7] == np.float32(1e30) * np.sqrt(np.float32(2))  # no overflow in the square
    # (inf + 1i)(1 + 1i): inf*1 - 1*1 = inf, inf*1 + 1*1 = inf; no fma, each step rounded.
    assert multiplied[1] == complex(inf, inf)


def _fma(x: float, y: float, acc: float) -> float:
    """fma in binary64, from exact rationals (float() of a Fraction rounds correctly)."""
    return float(Fraction(x) * Fraction(y) + Fraction(acc))


def test_dot_is_two_fma_chains_in_contraction_order() -> None:
    rng = np.random.default_rng(2)
    a, b = _random(rng, (3, 40), np.complex128), _random(rng, (40, 2), np.complex128)
    text = "HloModule m\nENTRY e {\n  a = c128[3,40] parameter(0)\n  b = c128[40,2] parameter(1)\n  ROOT d = c128[3,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n"
    (got,) = evaluate(load_module(text), [a, b])
    for i, j in ((0, 0), (2, 1)):
        real = imag = 0.0
        for k in range(40):
            x, y = a[i, k], b[k, j]
            real = _fma(-x.imag, y.imag, _fma(x.real, y.real, real))
            imag = _fma(x.imag, y.real, _fma(x.real, y.imag, imag))
        assert got[i, j] == complex(real, imag)
    np.testing.assert_allclose(got, a @ b, rtol=1e-13)


def test_reduce_multiply_follows_the_pinned_tree() -> None:
    rng = np.random.default_rng(3)
    a = _random(rng, (50,)) * np.complex64(0.9)
    text = "HloModule m\n" + scalar_binary("mul", "c64", "multiply", lhs="p", rhs="q", root="r") + """ENTRY e {
  a = c64[50] parameter(0)
  one = c64[] constant((1, 0))
  ROOT r = c64[] reduce(a, one), dimensions={0}, to_apply=mul
}
"""
    (got,) = evaluate(load_module(text), [a])
    np.testing.assert_allclose(got, np.prod(a.astype(np.complex128)), rtol=1e-4)


def test_literals_print_and_read_back() -> None:
    text = "HloModule m\nENTRY e {\n  ROOT c = c64[3] constant({(1, -2), (0.1, inf), (-0, nan)})\n}\n"
    module = load_module(text)
    printed = canonical_text(module)
    assert "constant({(1.0, -2.0), (0.1, inf), (-0.0, nan)})" in printed
    assert canonical_text(load_module(printed)) == printed
    (value,) = evaluate(module, [])
    assert value[1].real == np.float32(0.1) and np.signbit(value[2].real)


def test_real_imag_complex_and_conversions() -> None:
    text = """HloModule m
ENTRY e {
  a = c64[2] parameter(0)
  x = f32[2] parameter(1)
  re = f32[2] real(a)
  im = f32[2] imag(a)
  swapped = c64[2] complex(im, re)
  real_of_real = f32[2] real(x)
  imag_of_real = f32[2] imag(x)
  wide = c128[2] convert(a)
  from_real = c64[2] convert(x)
  eq = pred[2] compare(a, swapped), direction=EQ
  ROOT t = (f32[2], f32[2], c64[2], f32[2], f32[2], c128[2], c64[2], pred[2]) tuple(re, im, swapped, real_of_real, imag_of_real, wide, from_real, eq)
}
"""
    a = np.array([1 + 2j, 3 + 3j], np.complex64)
    x = np.array([5.0, -0.0], np.float32)
    re, im, swapped, real_of_real, imag_of_real, wide, from_real, eq = evaluate(load_module(text), [a, x])
    assert re.tolist() == [1, 3] and im.tolist() == [2, 3] and swapped.tolist() == [2 + 1j, 3 + 3j]
    assert real_of_real.tobytes() == x.tobytes() and imag_of_real.tolist() == [0, 0]
    assert wide.dtype == np.complex128 and wide.tolist() == [1 + 2j, 3 + 3j]
    assert from_real.tolist() == [5 + 0j, 0j] and eq.tolist() == [False, True]


def test_digest_takes_one_nan_per_part() -> None:
    a = np.array([complex(np.nan, 1), 2 + 3j], np.complex64)
    b = a.copy()
    b.view(np.uint32)[0] = 0xFFC12345  # another NaN in the real part
    assert tensor_digest(a) == tensor_digest(b)
    c = a.copy()
    c[1] = 2 - 3j
    assert tensor_digest(a) != tensor_digest(c)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("ROOT s = c64[4] sqrt(a)", "sqrt of c64 values is not in the numerics contract"),
        ("ROOT s = pred[4] compare(a, a), direction=LT", "complex numbers are not ordered"),
        ("ROOT s = f32[4] convert(a)", "would drop the imaginary part"),
        ("ROOT s = c64[4] power(a, a)", "power of c64 values is not in the numerics contract"),
    ],
)
def test_what_is_outside_the_contract_is_named(body: str, message: str) -> None:
    with pytest.raises((HloUnsupportedError, HloVerifyError), match=message):
        load_module(f"HloModule m\nENTRY e {{\n  a = c64[4] parameter(0)\n  {body}\n}}\n")
