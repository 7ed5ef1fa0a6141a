"""The batch-norm ops: the reference against XLA:CPU's results (tools/export_batch_norm_cases.py)
within the type's rounding, the LLVM backend against the reference bit for bit on every
target, and the expansion against the textbook formulas."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.hlo import HloVerifyError, canonical_text, load_module
from compiler.reference import evaluate
from harness.fixture_data import XlaOpCase, xla_op_cases
from harness.targets import run_everywhere

CASES = xla_op_cases("batch_norm")
TOLERANCE = {"f32": 2e-5, "f64": 1e-12, "bf16": 3e-2, "f16": 5e-3}


def check_xla_case(case: XlaOpCase, tolerance: float) -> None:
    """The reference within `tolerance` (relative, and of the largest output magnitude) of
    XLA:CPU's outputs; the backend the reference's bits on every target."""
    got = evaluate(load_module(case.module), case.inputs)
    assert len(got) == len(case.outputs)
    for g, e in zip(got, case.outputs, strict=True):
        a, b = g.astype(np.float64), e.astype(np.float64)
        scale = max(1.0, float(np.abs(b).max()))
        np.testing.assert_allclose(a, b, rtol=tolerance, atol=tolerance * scale)
    run_everywhere(case.module, case.inputs)


@pytest.mark.parametrize("number", range(len(CASES)))
def test_reference_is_xla_close_and_the_backend_is_the_reference(number: int) -> None:
    check_xla_case(CASES[number], TOLERANCE[CASES[number].dtype])


def test_training_computes_the_batch_statistics() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 5, 4)).astype(np.float64)
    scale, offset = rng.standard_normal(5), rng.standard_normal(5)
    text = """HloModule m
ENTRY e {
  x = f64[6,5,4] parameter(0)
  s = f64[5] parameter(1)
  o = f64[5] parameter(2)
  ROOT t = (f64[6,5,4], f64[5], f64[5]) batch-norm-training(x, s, o), epsilon=0.25, feature_index=1
}
"""
    y, mean, variance = evaluate(load_module(text), [x, scale, offset])
    np.testing.assert_allclose(mean, x.mean(axis=(0, 2)), rtol=1e-13)
    np.testing.assert_allclose(variance, x.var(axis=(0, 2)), rtol=1e-12)
    expected = (x - x.mean(axis=(0, 2))[:, None]) / np.sqrt(x.var(axis=(0, 2))[:, None] + 0.25) * scale[:, None] + offset[:, None]
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-13)


def test_epsilon_is_read_as_binary32_and_printed_exactly() -> None:
    text = """HloModule m
ENTRY e {
  x = f64[2,3] parameter(0)
  s = f64[3] parameter(1)
  ROOT y = f64[2,3] batch-norm-inference(x, s, s, s, s), epsilon=1e-3, feature_index=1
}
"""
    printed = canonical_text(load_module(text))
    assert "epsilon=0.0010000000474974513" in printed  # binary32 0.001, as XLA holds it
    assert canonical_text(load_module(text.replace("1e-3", "0.001"))) == printed


@pytest.mark.parametrize(
    ("operands", "attrs", "message"),
    [
        ("x, s, s", "epsilon=0.1, feature_index=2", "feature_index 2 is not a dimension"),
        ("x, x, s", "epsilon=0.1, feature_index=1", "operand 1 of batch-norm-training must be f32\\[3\\]"),
        ("x, s, s", "feature_index=1", "needs attribute epsilon="),
    ],
)
def test_malformed_batch_norm_is_a_verify_error(operands: str, attrs: str, message: str) -> None:
    text = f"HloModule m\nENTRY e {{\n  x = f32[2,3] parameter(0)\n  s = f32[3] parameter(1)\n  ROOT t = (f32[2,3], f32[3], f32[3]) batch-norm-training({operands}), {attrs}\n}}\n"
    with pytest.raises(HloVerifyError, match=message):
        load_module(text)
