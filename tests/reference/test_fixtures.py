"""Every fixture (a real program exported from JAX) parses, verifies, round-trips through the
canonical printer, and evaluates to XLA:CPU's outputs within a tolerance stated per dtype
(exactly for integers and predicates)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from compiler.hlo import HloUnsupportedError, canonical_text, load_module, parse_module
from compiler.program import load_program
from compiler.reference import evaluate
from harness.fixture_data import FIXTURE_NAMES, Fixture

# Relative tolerance per element type against XLA:CPU, which reassociates reductions,
# contracts multiply-adds and uses its own approximations of transcendental functions. The
# same number times the largest magnitude of the output is the absolute floor, for values
# that come out of cancellation.
XLA_RTOL = {"f64": 1e-12, "f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2}

# The smallest normal value per type: XLA:CPU flushes subnormals to zero in arithmetic.
SMALLEST_NORMAL = {"f64": 2.0**-1022, "f32": 2.0**-126, "f16": 2.0**-14, "bf16": 2.0**-126}


def flush_subnormals(array: np.ndarray, dtype: str) -> np.ndarray:
    """Subnormal values replaced by zero of the same sign (XLA:CPU's DAZ/FTZ behaviour)."""
    if dtype not in SMALLEST_NORMAL:
        return array
    wide = array.astype(np.float64)
    tiny = (wide != 0) & (np.abs(wide) < SMALLEST_NORMAL[dtype])
    return np.where(tiny, np.copysign(0.0, wide), wide).astype(array.dtype)


def agreement(ours: np.ndarray, xla: np.ndarray, dtype: str) -> np.ndarray:
    """Elementwise: does our value agree with XLA's within the dtype's tolerance?"""
    if dtype not in XLA_RTOL:
        return ours == xla
    a = flush_subnormals(ours, dtype).astype(np.float64)
    b = flush_subnormals(xla, dtype).astype(np.float64)
    rtol = XLA_RTOL[dtype]
    finite = np.isfinite(b)
    scale = float(np.max(np.abs(b[finite]))) if finite.any() else 0.0
    with np.errstate(invalid="ignore"):
        close = np.abs(a - b) <= rtol * np.abs(b) + rtol * scale
    same_special = (np.isnan(a) & np.isnan(b)) | ((a == b) & ~finite)
    return np.where(finite, close & np.isfinite(a), same_special)


@pytest.fixture(scope="module", params=FIXTURE_NAMES)
def fixture(request) -> Fixture:
    return Fixture(request.param)


def test_parses_verifies_and_prints_canonically(fixture: Fixture) -> None:
    module = load_module(fixture.module_text)
    text = canonical_text(module)
    reparsed = load_module(text)
    assert canonical_text(reparsed) == text
    assert load_program(text).hlo_hash == load_program(fixture.module_text).hlo_hash


def test_xla_optimized_dump_parses(fixture: Fixture) -> None:
    text = fixture.optimized_text
    if "{...}" in text:
        # XLA elides large constants in dumps; the parser must say so, not crash.
        with pytest.raises(Exception, match="elided"):
            parse_module(text)
        return
    if "custom-call(" in text:
        # XLA:CPU lowers some ops (topk) to custom calls in its optimized module: the parser
        # reads it, and the verifier refuses it by name.
        parse_module(text)
        with pytest.raises(HloUnsupportedError, match="custom-call is not supported"):
            load_module(text)
        return
    module = load_module(text)
    assert canonical_text(load_module(canonical_text(module))) == canonical_text(module)


def test_reference_matches_xla_within_tolerance(fixture: Fixture) -> None:
    inputs = fixture.inputs()
    module = load_module(fixture.module_text)
    ours = evaluate(module, inputs)
    specs = fixture.meta["outputs"]
    assert len(ours) == len(specs)
    flushed_inputs = [flush_subnormals(a, s["dtype"]) for a, s in zip(inputs, fixture.meta["inputs"], strict=True)]
    ours_flushed = evaluate(module, flushed_inputs)
    for index, (mine, mine_flushed, xla, spec) in enumerate(
        zip(ours, ours_flushed, fixture.xla_outputs(), specs, strict=True)
    ):
        assert list(mine.shape) == spec["shape"], f"out{index} shape"
        expected_dtype = ml_dtypes.bfloat16 if spec["dtype"] == "bf16" else xla.dtype
        assert mine.dtype == expected_dtype, f"out{index} dtype"
        ok = agreement(mine, xla, spec["dtype"]) | agreement(mine_flushed, xla, spec["dtype"])
        bad = np.flatnonzero(~ok.reshape(-1))
        assert bad.size == 0, (
            f"out{index} ({spec['dtype']}) differs from XLA at {bad[:8].tolist()}: "
            f"ours {mine.reshape(-1)[bad[:8]].tolist()} xla {xla.reshape(-1)[bad[:8]].tolist()}"
        )


def test_evaluation_is_deterministic(fixture: Fixture) -> None:
    module = load_module(fixture.module_text)
    first = evaluate(module, fixture.inputs())
    second = evaluate(load_module(fixture.module_text), fixture.inputs())
    for a, b in zip(first, second, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
