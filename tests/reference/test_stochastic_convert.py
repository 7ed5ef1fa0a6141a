"""stochastic-convert: XLA's decomposition as the definition, checked against the rule it
implements on chosen values (a fraction rounds away from zero exactly when the random bits
are below it, scaled to their width; the bounds saturate), the backend against the reference
on every target and thread count, and the uses XLA refuses."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from compiler.hlo import HloVerifyError, load_module
from compiler.reference import evaluate
from harness.targets import run_everywhere


def _module(source: str, random: str, target: str, n: int) -> str:
    return (f"HloModule s\nENTRY e {{\n  x = {source}[{n}] parameter(0)\n  r = {random}[{n}] parameter(1)\n"
            f"  ROOT c = {target}[{n}] stochastic-convert(x, r)\n}}\n")  # fmt: skip


def test_a_fraction_rounds_up_when_the_random_bits_are_below_it() -> None:
    x = np.array([2.25, 2.25, -2.25, -2.25, 0.5, 7.0, 300.0, -300.0, np.nan, -0.75], np.float32)
    r = np.array([2**30 - 1, 2**30, 0, 2**31, 2**31 - 1, 0, 0, 0, 0, 2**31 + 2**30 - 1], np.uint32)
    (got,) = evaluate(load_module(_module("f32", "u32", "s8", x.size)), [x, r])
    assert got.tolist() == [3, 2, -3, -2, 1, 7, 127, -128, 0, -1]


@pytest.mark.parametrize(("source", "random", "target"), [("f32", "u32", "s32"), ("bf16", "u16", "s8"), ("f16", "u16", "s16"), ("f64", "u64", "s64")])
def test_the_backend_gives_the_references_bits_on_every_target(source: str, random: str, target: str) -> None:
    rng = np.random.default_rng(6)
    numpy_type = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "f16": np.float16, "f64": np.float64}[source]
    x = (rng.standard_normal(300) * 10.0 ** rng.integers(0, 4, 300)).astype(numpy_type)
    x[:4] = np.array([np.nan, np.inf, -np.inf, -0.0]).astype(numpy_type)
    bits = {"u16": np.uint16, "u32": np.uint32, "u64": np.uint64}[random]
    r = rng.integers(0, np.iinfo(bits).max, 300, dtype=bits, endpoint=True)
    run_everywhere(_module(source, random, target, 300), [x, r])


@pytest.mark.parametrize(
    ("source", "random", "target", "message"),
    [("f32", "u16", "s32", "unsigned of the operand's width"), ("f32", "s32", "s32", "unsigned"), ("f32", "u32", "f16", "gives s8")],
)
def test_uses_xla_refuses_are_verify_errors(source: str, random: str, target: str, message: str) -> None:
    with pytest.raises(HloVerifyError, match=message):
        load_module(_module(source, random, target, 4))
