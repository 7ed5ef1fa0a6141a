"""bench/models.py's numpy equivalents compute what the models compute: against vxla's
outputs and the XLA:CPU outputs stored with each fixture, within the bench's tolerance. The
bench checks this itself before timing; these tests keep the equivalents right as the code
changes. Nothing here measures or asserts a time."""

from __future__ import annotations

import dataclasses
import json
import math
from functools import cache

import numpy as np
import pytest

from bench import models
from compiler.config import CompilerConfig, load_config

FIXTURE_MODELS = [name for name in models.MODEL_NAMES if not name.endswith("_chain")]


def quick_config() -> CompilerConfig:
    """The project's config at LLVM opt level 0: every config computes the same results, and
    this one compiles the transformer several times faster, which keeps these tests quick."""
    return dataclasses.replace(load_config(), opt_level=0)


@cache
def vxla_outputs(name: str) -> tuple[np.ndarray, ...]:
    """vxla's outputs for a model, compiled once per test process."""
    model = models.load_model(name)
    executable, _ = models.compile_model(model, quick_config(), threads=1)
    return tuple(executable.run(*model.inputs))


@pytest.mark.parametrize("name", models.MODEL_NAMES)
def test_numpy_equivalent_agrees_with_vxla(name: str) -> None:
    model = models.load_model(name)
    models.check_close(name, model.numpy_fn(*model.inputs), vxla_outputs(name))


@pytest.mark.parametrize("name", FIXTURE_MODELS)
def test_numpy_equivalent_agrees_with_the_xla_outputs(name: str) -> None:
    model = models.load_model(name)
    assert model.expected is not None
    models.check_close(name, model.numpy_fn(*model.inputs), model.expected)


def test_the_exact_gelu_path_without_scipy_agrees_with_vxla(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transformer with erfc_numpy, whether or not scipy is installed here (the bench
    uses scipy's erfc where it can)."""
    monkeypatch.setattr(models, "_scipy_erfc", None)
    model = models.load_model("transformer_block")
    models.check_close("transformer_block", model.numpy_fn(*model.inputs), vxla_outputs("transformer_block"))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erfc_numpy_has_small_relative_error(dtype: type) -> None:
    # Up to |x| = 9: beyond that erfc(x) falls below f32's smallest normal number. In f32 the
    # fit's own error (1.2e-7) is dominated by the rounding of exp's argument -x*x + poly
    # (about 81 * 2**-24 at |x| = 9), hence the looser f32 bound.
    x = np.linspace(-9, 9, 20001).astype(dtype)
    expected = np.array([math.erfc(float(v)) for v in x])
    relative = np.abs(models.erfc_numpy(x).astype(np.float64) - expected) / expected
    assert models.erfc_numpy(x).dtype == dtype
    assert relative.max() < (2e-5 if dtype == np.float32 else 2e-7)


def test_check_close_refuses_a_wrong_equivalent() -> None:
    model = models.load_model("mlp_softmax")
    logits, probabilities = model.numpy_fn(*model.inputs)
    with pytest.raises(models.EquivalenceError, match="out1"):
        models.check_close("mlp_softmax", (logits, probabilities * np.float32(1.001)), vxla_outputs("mlp_softmax"))
    with pytest.raises(models.EquivalenceError, match="2 outputs, expected 1"):
        models.check_close("x", (logits, logits), (logits,))
    with pytest.raises(models.EquivalenceError, match="float64"):
        models.check_close("x", (logits.astype(np.float64),), (logits,))


def test_the_command_line_writes_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One sample of one call on the smallest model: the report's structure, not its times."""
    monkeypatch.setattr(models, "resolve_target", lambda cpu: quick_config().with_target(cpu=cpu))
    assert models.main(["--models", "mlp_softmax", "--threads", "1", "--repeat", "1", "--min-sample-ms", "0", "--no-jax", "--target", "x86-64-v3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (result,) = report["results"]
    assert result["model"] == "mlp_softmax" and report["threads"] == 1 and report["target_cpu"] == "x86-64-v3"
    assert result["jax"] is None and result["jax_over_vxla"] is None
    assert set(result["vxla"]) == {"median_ms", "min_ms", "samples", "calls_per_sample"}
    assert result["numpy_max_abs_diff"] <= 1e-4
