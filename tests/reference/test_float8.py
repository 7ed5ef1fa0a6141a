"""8-bit floats: the conversions against ml_dtypes (JAX's and XLA:CPU's types) bit for bit,
the backend against the reference on every target and thread count (every code of every
type through conversions, data movement and dot), the ops the contract refuses, and raw
.npy records as inputs. The JAX fixture fp8_matmul checks agreement with XLA:CPU."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from compiler.hlo import HloUnsupportedError, load_module
from compiler.numerics.floats import f32_to_float8, float8_nan, float8_to_f32
from compiler.program import bind_argument
from compiler.reference import evaluate
from core.dtypes import F32, FLOAT8_DTYPES
from harness.targets import run_everywhere

IDS = [dtype.name for dtype in FLOAT8_DTYPES]


def _same_or_both_nan(ours: np.ndarray, theirs: np.ndarray, dtype) -> None:  # noqa: ANN001
    layout = dtype.float_layout
    ours_nan, theirs_nan = float8_nan(ours.view(np.uint8), layout), float8_nan(theirs.view(np.uint8), layout)
    assert np.array_equal(ours_nan, theirs_nan)
    assert ours.view(np.uint8)[~ours_nan].tobytes() == theirs.view(np.uint8)[~theirs_nan].tobytes()
    assert (ours.view(np.uint8)[ours_nan] == layout.canonical_nan).all()


@pytest.mark.parametrize("dtype", FLOAT8_DTYPES, ids=IDS)
def test_conversions_are_ml_dtypes_bit_for_bit(dtype) -> None:  # noqa: ANN001
    """Every code widened to f32, and f32 values (random bit patterns, values around the
    type's range, its subnormals, ties) rounded into the type."""
    codes = np.arange(256, dtype=np.uint8).view(dtype.numpy)
    ours, theirs = float8_to_f32(codes, dtype), codes.astype(np.float32)
    same = (ours.view(np.uint32) == theirs.view(np.uint32)) | (np.isnan(ours) & np.isnan(theirs))
    assert same.all()
    assert (ours.view(np.uint32)[np.isnan(ours)] == F32.float_layout.canonical_nan).all()
    rng = np.random.default_rng(8)
    exact = ours[~np.isnan(ours)]
    steps = np.unique(np.abs(exact))
    midpoints = ((steps[1:] + steps[:-1]) / 2).astype(np.float32)
    x = np.concatenate([
        rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32),
        (rng.standard_normal(200_000) * dtype.float_layout.max_finite * 2.0 ** rng.integers(-30, 2, 200_000)).astype(np.float32),
        midpoints, -midpoints, np.nextafter(midpoints, np.float32(np.inf)), np.nextafter(midpoints, np.float32(0)),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32),
    ])  # fmt: skip
    with np.errstate(invalid="ignore"):  # infinities into types without them: some ml_dtypes warn
        theirs = x.astype(dtype.numpy)
    _same_or_both_nan(f32_to_float8(x, dtype), theirs, dtype)


def test_the_backend_gives_the_references_bits_on_every_target() -> None:
    """Every code of every type converted to f32, f16, bf16, f64, s32 and pred; f32 special
    values converted into every type; an 8-bit type to another; transposes, slices and a
    dot of 8-bit operands accumulated in f32. One module, 1, 2 and 4 threads."""
    lines, outputs, arrays = [], [], []
    specials = np.array([0, -0.0, 1e-9, -3e-3, 0.1, 1.5, 240, 248, 448, 464, 465, 5e4, 61440, 1e30, np.inf, -np.inf, np.nan], np.float32)
    lines.append(f"  s = f32[{specials.size}] parameter(0)")
    arrays.append(specials)
    for number, dtype in enumerate(FLOAT8_DTYPES, start=1):
        t = dtype.name
        lines.append(f"  c{number} = {t}[16,16] parameter({number})")
        arrays.append(np.arange(256, dtype=np.uint8).view(dtype.numpy).reshape(16, 16))
        for target in ("f32", "f16", "bf16", "f64", "s32", "pred", "f8e4m3fn"):
            lines.append(f"  c{number}_{target} = {target}[16,16] convert(c{number})")
            outputs.append((f"c{number}_{target}", f"{target}[16,16]"))
        lines.append(f"  s{number} = {t}[{specials.size}] convert(s)")
        lines.append(f"  t{number} = {t}[16,16] transpose(c{number}), dimensions={{1,0}}")
        lines.append(f"  d{number} = f32[16,16] dot(c{number}, t{number}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")
        lines.append(f"  z{number} = {t}[4,8] slice(t{number}), slice={{[2:6], [1:16:2]}}")
        outputs += [(f"s{number}", f"{t}[{specials.size}]"), (f"d{number}", "f32[16,16]"), (f"z{number}", f"{t}[4,8]")]
    lines.append(f"  ROOT r = ({', '.join(shape for _, shape in outputs)}) tuple({', '.join(name for name, _ in outputs)})")
    run_everywhere("HloModule f8\nENTRY e {\n" + "\n".join(lines) + "\n}\n", arrays)


@pytest.mark.parametrize(
    ("instruction", "message"),
    [
        ("f8e4m3fn[4] add(a, a)", "add of f8e4m3fn values is not in the numerics contract: convert"),
        ("f8e4m3fn[4] exponential(a)", "exponential of f8e4m3fn"),
        ("pred[4] compare(a, a), direction=LT", "compare of f8e4m3fn"),
        ("f8e4m3fn[] dot(a, a), lhs_contracting_dims={0}, rhs_contracting_dims={0}", "wider result type"),
    ],
)
def test_arithmetic_on_8_bit_floats_is_refused_by_name(instruction: str, message: str) -> None:
    with pytest.raises(HloUnsupportedError, match=message):
        load_module(f"HloModule m\nENTRY e {{\n  a = f8e4m3fn[4] parameter(0)\n  ROOT r = {instruction}\n}}\n")


def test_literals_read_and_print_through_the_literal_rule() -> None:
    module = load_module("HloModule m\nENTRY e {\n  c = f8e4m3fn[5] constant({0.3, -448, 500, nan, 1e-3})\n  ROOT f = f32[5] convert(c)\n}\n")
    (values,) = evaluate(module, [])
    expected = np.array([0.3, -448, 500, np.nan, 1e-3], np.float32).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    assert np.array_equal(values, expected, equal_nan=True)


def test_raw_npy_records_are_taken_as_the_declared_8_bit_type() -> None:
    """.npy files store ml_dtypes' types as 1-byte void records; an argument of those bytes
    (or of uint8 codes) is read as the parameter's type, a wrong width is refused."""
    shape = load_module("HloModule m\nENTRY e {\n  ROOT p = f8e5m2[3] parameter(0)\n}\n").entry.root.shape
    codes = np.array([0x3C, 0x7E, 0x80], np.uint8)
    assert bind_argument(shape, codes.view("V1"), 0).dtype == ml_dtypes.float8_e5m2
    assert bind_argument(shape, codes, 0).view(np.uint8).tolist() == codes.tolist()
    with pytest.raises(Exception, match="expects f8e5m2"):
        bind_argument(shape, codes.astype(np.uint16), 0)
