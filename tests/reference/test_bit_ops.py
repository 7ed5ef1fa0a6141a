"""reduce-precision, popcnt and count-leading-zeros: the reference against XLA:CPU's results
(tools/export_op_cases.py) bit for bit (these ops are exact on the bits; only a NaN's
encoding differs, the contract's being canonical), against independent oracles, and the
backend against the reference bit for bit on every target and thread count."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from compiler.hlo import HloVerifyError, load_module
from compiler.numerics.floats import bits_dtype, reduce_precision
from compiler.reference import evaluate
from core.dtypes import BY_NAME
from harness.fixture_data import xla_op_cases
from harness.targets import run_everywhere

CASES = xla_op_cases("bits")


def _same_bits_or_both_nan(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    element = BY_NAME[dtype]
    if element.is_float:
        layout = element.float_layout
        got_bits, want_bits = got.view(bits_dtype(element)), want.view(bits_dtype(element))
        got_nan, want_nan = (got_bits & layout.abs_mask) > layout.inf_bits, (want_bits & layout.abs_mask) > layout.inf_bits
        assert np.array_equal(got_nan, want_nan)
        assert got_bits[~got_nan].tobytes() == want_bits[~want_nan].tobytes()
        assert (got_bits[got_nan] == layout.canonical_nan).all()
    else:
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("number", range(len(CASES)), ids=lambda n: f"{CASES[n].module.split('ROOT r = ')[1].split('(')[0].split()[-1]}_{CASES[n].dtype}_{n}")
def test_reference_gives_xla_cpus_bits(number: int) -> None:
    case = CASES[number]
    (got,) = evaluate(load_module(case.module), case.inputs)
    _same_bits_or_both_nan(np.asarray(got), case.outputs[0], case.dtype)


def test_reduce_precision_to_a_narrow_format_is_that_formats_rounding() -> None:
    """To (8, 7) it is bfloat16's rounding; to (5, 10) f16's where f16 has normal numbers
    (below them reduce-precision flushes to zero, f16 keeps subnormals)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(50_000) * 10.0 ** rng.integers(-9, 9, 50_000)).astype(np.float32)
    f32 = BY_NAME["f32"]
    assert reduce_precision(x, f32, 8, 7).tobytes() == x.astype(ml_dtypes.bfloat16).astype(np.float32).tobytes()
    with np.errstate(over="ignore"):
        as_f16 = x.astype(np.float16).astype(np.float32)
    normal = np.abs(x) >= np.float32(2.0**-14)
    assert reduce_precision(x, f32, 5, 10)[normal].tobytes() == as_f16[normal].tobytes()
    assert (reduce_precision(x, f32, 5, 10)[~normal] == 0).all()


def test_the_backend_gives_the_references_bits_on_every_target() -> None:
    """Every case of the fixture in one module (one compile per target), run with 1, 2 and
    4 threads, plus f16 and bf16 over all their 65,536 bit patterns."""
    parameters, results, arrays = [], [], []
    for number, case in enumerate(CASES):
        body = case.module.split("ENTRY e {\n")[1]
        root = body.split("ROOT r = ")[1].split("\n")[0].replace("(a)", f"(a{number})")
        shape = root.split(" ")[0]
        parameters.append(f"  a{number} = {shape} parameter({number})")
        results.append((f"r{number}", shape, root))
        arrays.append(case.inputs[0])
    for dtype in ("f16", "bf16"):
        number = len(arrays)
        parameters.append(f"  a{number} = {dtype}[65536] parameter({number})")
        results.append((f"r{number}", f"{dtype}[65536]", f"{dtype}[65536] reduce-precision(a{number}), exponent_bits=4, mantissa_bits=3"))
        arrays.append(np.arange(65536, dtype=np.uint16).view(BY_NAME[dtype].numpy))
    lines = [*parameters, *(f"  {name} = {root}" for name, _, root in results)]
    tuple_shape = ", ".join(shape for _, shape, _ in results)
    lines.append(f"  ROOT t = ({tuple_shape}) tuple({', '.join(name for name, _, _ in results)})")
    run_everywhere("HloModule all\nENTRY e {\n" + "\n".join(lines) + "\n}\n", arrays)


@pytest.mark.parametrize(
    ("instruction", "message"),
    [
        ("s32[4] reduce-precision(p), exponent_bits=5, mantissa_bits=10", "floating-point"),
        ("f32[4] reduce-precision(q), exponent_bits=0, mantissa_bits=10", "exponent_bits >= 1"),
        ("f32[4] reduce-precision(q), exponent_bits=5", "mantissa_bits"),
        ("f32[4] popcnt(q)", "integer"),
    ],
)
def test_bad_uses_are_verify_errors(instruction: str, message: str) -> None:
    text = f"HloModule m\nENTRY e {{\n  p = s32[4] parameter(0)\n  q = f32[4] parameter(1)\n  ROOT r = {instruction}\n}}\n"
    with pytest.raises(HloVerifyError, match=message):
        load_module(text)
