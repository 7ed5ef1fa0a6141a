"""fft: the pinned algorithm (compiler/numerics/fft.py) against an explicit model and
numpy's transforms, its twiddle factors against their exact values, the backend against the
reference bit for bit on every target and thread count, and the verifier's messages. The
JAX fixture fft_spectrogram checks agreement with XLA:CPU (tests/reference/test_fixtures.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compiler.hlo import HloVerifyError, load_module
from compiler.numerics import fft as transforms
from compiler.reference import evaluate
from core.dtypes import C64, C128, F32, F64
from harness.targets import run_everywhere

COMPLEX = {"c64": np.complex64, "c128": np.complex128}
REAL = {"c64": np.float32, "c128": np.float64}


def _module(fft_type: str, operand: str, result: str, lengths: tuple[int, ...]) -> str:
    return f"HloModule f\nENTRY e {{\n  p = {operand} parameter(0)\n  ROOT r = {result} fft(p), fft_type={fft_type}, fft_length={{{','.join(map(str, lengths))}}}\n}}\n"


def _complex(rng: np.random.Generator, dims: tuple[int, ...], name: str) -> np.ndarray:
    return (rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(COMPLEX[name])


@pytest.mark.parametrize("n", [1, 2, 3, 8, 12, 64, 100, 1024])
@pytest.mark.parametrize("component", [F32, F64], ids=["f32", "f64"])
def test_twiddles_are_the_correctly_rounded_values(n: int, component) -> None:  # noqa: ANN001
    """Each part within half an ulp of the exact value (checked in f64 against math.cos
    and math.sin, whose own error is far below an f32 ulp; for f64 within one ulp), the
    quarter turns exact, and the forward table the inverse's conjugate."""
    cos, sin = transforms.twiddles(n, component, True)
    forward_cos, forward_sin = transforms.twiddles(n, component, False)
    assert forward_cos.tobytes() == cos.tobytes() and (forward_sin == -sin).all()
    for j in range(n):
        angle = 2 * math.pi * j / n
        for got, exact in ((cos[j], math.cos(angle)), (sin[j], math.sin(angle))):
            ulp = float(np.spacing(component.numpy.type(abs(got)))) if got else float(np.spacing(component.numpy.type(0)))
            assert abs(float(got) - exact) <= (0.5 if component is F32 else 1.0) * ulp + 1e-15, (n, j)
        if (4 * j) % n == 0:
            assert (cos[j], sin[j]) == [(1, 0), (0, 1), (-1, 0), (0, -1)][4 * j // n]
    assert not np.signbit(cos[cos == 0]).any() and not np.signbit(sin[sin == 0]).any()


def test_radix_2_follows_the_documented_butterflies() -> None:
    """n = 4, c64: bit-reversed input, then spans 2 and 4 of t = w*odd; even + t, even - t,
    each complex product (ar*br - ai*bi) + (ar*bi + ai*br)i rounded as written."""
    f32 = np.float32
    x = _complex(np.random.default_rng(1), (4,), "c64")

    def multiply(a: complex, b: complex) -> complex:
        return complex(f32(f32(f32(a.real) * f32(b.real)) - f32(f32(a.imag) * f32(b.imag))), f32(f32(f32(a.real) * f32(b.imag)) + f32(f32(a.imag) * f32(b.real))))

    def add(a: complex, b: complex, sign: int = 1) -> complex:
        return complex(f32(f32(a.real) + f32(sign * b.real)), f32(f32(a.imag) + f32(sign * b.imag)))

    v = [complex(x[i]) for i in (0, 2, 1, 3)]
    w = [complex(1, 0), complex(0, -1)]
    for span in (2, 4):
        half = span // 2
        for group in range(0, 4, span):
            for j in range(half):
                t = multiply(w[j * (4 // span)], v[group + j + half])
                v[group + j], v[group + j + half] = add(v[group + j], t), add(v[group + j], t, -1)
    (got,) = evaluate(load_module(_module("FFT", "c64[4]", "c64[4]", (4,))), [x])
    assert got.tolist() == np.array(v, np.complex64).tolist()


@pytest.mark.parametrize("n", [1, 2, 5, 8, 12, 64, 100])
def test_one_dimension_agrees_with_numpy(n: int) -> None:
    rng = np.random.default_rng(n)
    x = _complex(rng, (3, n), "c128")
    (forward,) = evaluate(load_module(_module("FFT", f"c128[3,{n}]", f"c128[3,{n}]", (n,))), [x])
    (inverse,) = evaluate(load_module(_module("IFFT", f"c128[3,{n}]", f"c128[3,{n}]", (n,))), [x])
    assert np.allclose(forward, np.fft.fft(x), rtol=0, atol=1e-12 * n)
    assert np.allclose(inverse, np.fft.ifft(x), rtol=0, atol=1e-13)
    real = rng.standard_normal((2, n))
    (half,) = evaluate(load_module(_module("RFFT", f"f64[2,{n}]", f"c128[2,{n // 2 + 1}]", (n,))), [real])
    assert np.allclose(half, np.fft.rfft(real), rtol=0, atol=1e-12 * n)
    (back,) = evaluate(load_module(_module("IRFFT", f"c128[2,{n // 2 + 1}]", f"f64[2,{n}]", (n,))), [np.fft.rfft(real)])
    assert np.allclose(back, real, rtol=0, atol=1e-12)


def test_several_dimensions_agree_with_numpy() -> None:
    rng = np.random.default_rng(7)
    x = _complex(rng, (2, 4, 6, 8), "c128")
    (got,) = evaluate(load_module(_module("FFT", "c128[2,4,6,8]", "c128[2,4,6,8]", (4, 6, 8))), [x])
    assert np.allclose(got, np.fft.fftn(x, axes=(1, 2, 3)), rtol=0, atol=1e-11)
    real = rng.standard_normal((3, 6, 10))
    (half,) = evaluate(load_module(_module("RFFT", "f64[3,6,10]", "c128[3,6,6]", (6, 10))), [real])
    assert np.allclose(half, np.fft.rfftn(real, axes=(1, 2)), rtol=0, atol=1e-11)
    (back,) = evaluate(load_module(_module("IRFFT", "c128[3,6,6]", "f64[3,6,10]", (6, 10))), [half])
    assert np.allclose(back, real, rtol=0, atol=1e-12)


def test_irfft_reads_no_imaginary_part_at_zero_and_half() -> None:
    spectrum = np.fft.rfft(np.random.default_rng(3).standard_normal(8)).astype(np.complex64)
    noisy = spectrum.copy()
    noisy[0] += 5j
    noisy[4] -= 3j
    module = load_module(_module("IRFFT", "c64[5]", "f32[8]", (8,)))
    assert evaluate(module, [noisy])[0].tobytes() == evaluate(module, [spectrum])[0].tobytes()


CASES = [
    ("FFT", "c64[3,16]", "c64[3,16]", (16,)),
    ("IFFT", "c64[2,12]", "c64[2,12]", (12,)),
    ("FFT", "c128[2,4,6]", "c128[2,4,6]", (4, 6)),
    ("IFFT", "c128[5,3,2]", "c128[5,3,2]", (5, 3, 2)),
    ("RFFT", "f32[4,32]", "c64[4,17]", (32,)),
    ("RFFT", "f64[2,6,10]", "c128[2,6,6]", (6, 10)),
    ("IRFFT", "c64[3,9]", "f32[3,16]", (16,)),
    ("IRFFT", "c128[2,4,4]", "f64[2,4,7]", (4, 7)),
    ("FFT", "c64[1]", "c64[1]", (1,)),
]


def test_the_backend_gives_the_references_bits_on_every_target() -> None:
    """Every case in one module (one compile per target), 1, 2 and 4 threads, with NaN,
    infinite and zero parts among the values."""
    rng = np.random.default_rng(11)
    lines, arrays, results = [], [], []
    for number, (fft_type, operand, result, lengths) in enumerate(CASES):
        name, dims = operand.split("[")[0], tuple(int(d) for d in operand.split("[")[1].rstrip("]").split(","))
        value = _complex(rng, dims, name) if name in COMPLEX else rng.standard_normal(dims).astype(REAL["c64" if name == "f32" else "c128"])
        flat = value.reshape(-1)
        flat[rng.random(flat.size) < 0.05] = np.array([np.nan, np.inf, -0.0])[number % 3]
        arrays.append(value)
        lines.append(f"  p{number} = {operand} parameter({number})")
        lines.append(f"  r{number} = {result} fft(p{number}), fft_type={fft_type}, fft_length={{{','.join(map(str, lengths))}}}")
        results.append((f"r{number}", result))
    lines.append(f"  ROOT t = ({', '.join(shape for _, shape in results)}) tuple({', '.join(name for name, _ in results)})")
    run_everywhere("HloModule ffts\nENTRY e {\n" + "\n".join(lines) + "\n}\n", arrays)


@pytest.mark.parametrize(
    ("instruction", "message"),
    [
        ("c64[4,8] fft(c), fft_type=DCT, fft_length={8}", "fft_type must be one of"),
        ("c64[4,8] fft(c), fft_type=FFT, fft_length={4}", "FFT of dimensions"),
        ("c64[4,8] fft(c), fft_type=FFT, fft_length={1,2,3,4}", "1 to 3"),
        ("c64[4,9] fft(r), fft_type=RFFT, fft_length={16}", "RFFT of dimensions"),
        ("f32[4,8] fft(r), fft_type=FFT, fft_length={8}", "complex operand"),
        ("f32[4,12] fft(c), fft_type=IRFFT, fft_length={12}", "holds n/2"),
    ],
)
def test_bad_ffts_are_verify_errors(instruction: str, message: str) -> None:
    text = f"HloModule m\nENTRY e {{\n  c = c64[4,8] parameter(0)\n  r = f32[4,8] parameter(1)\n  ROOT x = {instruction}\n}}\n"
    with pytest.raises(HloVerifyError, match=message):
        load_module(text)


def test_the_reference_types() -> None:
    assert transforms.twiddle_table(4, C64, False).dtype == np.complex64
    assert transforms.twiddle_table(4, C128, True).dtype == np.complex128


@pytest.mark.parametrize(
    ("fft_type", "operand", "result", "lengths"),
    [
        ("FFT", "c64[0]", "c64[0]", (1,)),
        ("FFT", "c64[1,0,1]", "c64[1,0,1]", (1, 1, 1)),
        ("IFFT", "c64[3,0]", "c64[3,0]", (0,)),
        ("RFFT", "f32[2,0]", "c64[2,0]", (0,)),
        ("IRFFT", "c64[2,0]", "f32[2,0]", (0,)),
    ],
)
def test_empty_transforms_have_xlas_shapes_and_no_elements(fft_type: str, operand: str, result: str, lengths: tuple[int, ...]) -> None:
    text = _module(fft_type, operand, result, lengths)
    dims = tuple(int(d) for d in operand.split("[")[1].rstrip("]").split(","))
    value = np.zeros(dims, COMPLEX["c64"] if operand.startswith("c64") else np.float32)
    run_everywhere(text, [value])
