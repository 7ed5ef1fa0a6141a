"""cholesky and triangular-solve: the reference against XLA:CPU's results
(tools/export_op_cases.py) within rounding, the backend against the reference bit for bit on
every target, the pinned fma order against an exact model, and the verifier's messages."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from compiler.hlo import HloVerifyError, load_module
from compiler.reference import evaluate
from harness.fixture_data import xla_op_cases
from tests.reference.test_batch_norm import check_xla_case

CASES = xla_op_cases("linalg")
TOLERANCE = {"f32": 1e-4, "f64": 1e-11}


def _case_id(number: int) -> str:
    """cholesky_f32_0, triangular-solve_f64_17, ...: `make test-arm64` samples by type."""
    opcode = "cholesky" if "cholesky(" in CASES[number].module else "triangular-solve"
    return f"{opcode}_{CASES[number].dtype}_{number}"


@pytest.mark.parametrize("number", range(len(CASES)), ids=_case_id)
def test_reference_is_xla_close_and_the_backend_is_the_reference(number: int) -> None:
    check_xla_case(CASES[number], TOLERANCE[CASES[number].dtype])


def _fma(x: float, y: float, acc: float) -> float:
    return float(Fraction(x) * Fraction(y) + Fraction(acc))


def test_cholesky_follows_the_pinned_fma_order_exactly() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 4))
    a = x @ x.T + 4 * np.eye(4)
    text = "HloModule m\nENTRY e {\n  a = f64[4,4] parameter(0)\n  ROOT c = f64[4,4] cholesky(a), lower=true\n}\n"
    (got,) = evaluate(load_module(text), [a])
    model = [[0.0] * 4 for _ in range(4)]
    for j in range(4):
        d = float(a[j, j])
        for k in range(j):
            d = _fma(-model[j][k], model[j][k], d)
        model[j][j] = float(np.sqrt(d))
        for i in range(j + 1, 4):
            s = float(a[i, j])
            for k in range(j):
                s = _fma(-model[i][k], model[j][k], s)
            model[i][j] = s / model[j][j]
    assert got.tolist() == model  # the upper triangle is +0


def test_triangular_solve_reads_only_its_triangle() -> None:
    rng = np.random.default_rng(6)
    lower = np.tril(rng.standard_normal((5, 5))) + 3 * np.eye(5)
    noisy = lower + np.triu(rng.standard_normal((5, 5)) * 1e6, 1)
    b = rng.standard_normal((5, 2))
    text = "HloModule m\nENTRY e {\n  a = f64[5,5] parameter(0)\n  b = f64[5,2] parameter(1)\n  ROOT x = f64[5,2] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE\n}\n"
    (clean,) = evaluate(load_module(text), [lower, b])
    (noisy_result,) = evaluate(load_module(text), [noisy, b])
    assert clean.tobytes() == noisy_result.tobytes()
    np.testing.assert_allclose(lower @ clean, b, rtol=1e-12, atol=1e-12)


def test_a_matrix_that_is_not_positive_definite_gives_nan_not_an_error() -> None:
    text = "HloModule m\nENTRY e {\n  a = f32[2,2] parameter(0)\n  ROOT c = f32[2,2] cholesky(a), lower=true\n}\n"
    (got,) = evaluate(load_module(text), [np.array([[-1.0, 0.0], [0.0, 1.0]], np.float32)])
    assert np.isnan(got[0, 0]) and got[0, 0].view(np.uint32) == 0x7FC00000


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("a = f32[2,3] parameter(0)\n  ROOT c = f32[2,3] cholesky(a)", "square matrices"),
        ("a = s32[2,2] parameter(0)\n  ROOT c = s32[2,2] cholesky(a)", "f32 or f64 matrices, not s32"),
        ("a = f32[3,3] parameter(0)\n  b = f32[3,2] parameter(1)\n  ROOT x = f32[3,2] triangular-solve(a, b), left_side=false, lower=true", "needs b's columns to number 3, not 2"),
        ("a = f32[3,3] parameter(0)\n  b = f32[3,2] parameter(1)\n  ROOT x = f32[3,2] triangular-solve(a, b), left_side=true, transpose_a=CONJUGATE", "transpose_a=CONJUGATE is not one of"),
    ],
)
def test_malformed_linear_algebra_is_a_verify_error(body: str, message: str) -> None:
    with pytest.raises(HloVerifyError, match=message):
        load_module(f"HloModule m\nENTRY e {{\n  {body}\n}}\n")


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_f16_and_bf16_solve_in_f32_and_round_once_on_every_target(dtype: str) -> None:
    """The narrow types' cholesky and triangular-solve are the f32 ones on the widened
    values, rounded once; the backend gives the reference's bits."""
    import ml_dtypes

    from compiler.numerics.convert import convert
    from core.dtypes import BY_NAME
    from harness.targets import run_everywhere

    def module(t: str) -> str:
        return f"""HloModule n
ENTRY e {{
  a = {t}[2,5,5] parameter(0)
  b = {t}[2,5,3] parameter(1)
  l = {t}[2,5,5] cholesky(a), lower=true
  x = {t}[2,5,3] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE
  ROOT r = ({t}[2,5,5], {t}[2,5,3]) tuple(l, x)
}}
"""

    numpy_type = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 5, 5))
    a = (x @ np.swapaxes(x, -1, -2) + 5 * np.eye(5)).astype(numpy_type)
    b = rng.standard_normal((2, 5, 3)).astype(numpy_type)
    narrow = evaluate(load_module(module(dtype)), [a, b])
    wide = evaluate(load_module(module("f32")), [a.astype(np.float32), b.astype(np.float32)])
    for got, in_f32 in zip(narrow, wide, strict=True):
        assert got.tobytes() == convert(in_f32, BY_NAME["f32"], BY_NAME[dtype]).tobytes()
    run_everywhere(module(dtype), [a, b])
