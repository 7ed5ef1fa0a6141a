"""Reductions whose reducer is exactly associative and commutative (maximum, minimum; wrapping
integer add and multiply; bitwise ops) run with more accumulators than the contract's 16
lanes. The bits must be the contract's anyway: checked against the reference on every
target, on lengths around the unrolled loop's edges, with sparse special values."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.reductions import UNROLL, is_order_free
from compiler.hlo import load_module
from compiler.numerics.order import REDUCE_BLOCK as BLOCK
from compiler.numerics.order import REDUCE_LANES as LANES
from compiler.reference import evaluate
from harness.sampling import share_of
from harness.targets import DEFAULT, NATIVE, executable_for

LENGTHS = [LANES * 2 * UNROLL - 1, LANES * 2 * UNROLL, LANES * 2 * UNROLL + 17, BLOCK - 3, BLOCK + LANES * 9 + 5, 3 * BLOCK + 1000]
CASES = [
    ("f32", "maximum"), ("f32", "minimum"), ("f64", "maximum"), ("f64", "minimum"),
    ("s32", "maximum"), ("u8", "minimum"), ("s32", "add"), ("s64", "multiply"), ("u8", "xor"),
    ("s32", "and"), ("pred", "or"), ("pred", "and"),
]  # fmt: skip
NUMPY = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "s64": np.int64, "u8": np.uint8, "pred": np.bool_}


def _module(dtype: str, op: str, n: int, swapped: bool = False) -> str:
    a, b = ("b", "a") if swapped else ("a", "b")
    return f"""HloModule t
r {{
  a = {dtype}[] parameter(0)
  b = {dtype}[] parameter(1)
  ROOT s = {dtype}[] {op}({a}, {b})
}}
ENTRY e {{
  x = {dtype}[2,{n}] parameter(0)
  i = {dtype}[] parameter(1)
  ROOT y = {dtype}[2] reduce(x, i), dimensions={{1}}, to_apply=r
}}
"""


def _values(rng: np.random.Generator, dtype: str, n: int, variant: int, op: str = "maximum") -> np.ndarray:
    shape = (2, n)
    if dtype == "pred":
        return rng.random(shape) < (0.999 if variant % 2 else 0.001)
    if dtype in ("f32", "f64"):
        x = rng.standard_normal(shape).astype(NUMPY[dtype])
        if variant == 1:  # zeros of both signs only: the -0 < +0 rule decides
            x = np.where(rng.random(shape) < 0.5, -0.0, 0.0).astype(NUMPY[dtype])
            x[1] = -0.0
        elif variant == 2:  # a NaN in one row, a negative NaN with a payload in the other, infinities
            x[0, rng.integers(n)] = np.nan
            x[1, rng.integers(n)] = np.inf
            x[1, rng.integers(n)] = -np.inf
            bits = np.uint64(0xFFF0000000000123) if dtype == "f64" else np.uint32(0xFF800123)
            x[1].view(bits.dtype)[rng.integers(n)] = bits
        elif variant == 3:  # subnormals around zero
            x = (x * np.finfo(NUMPY[dtype]).tiny / 8).astype(NUMPY[dtype])
        elif variant == 4:  # one sign only, plus zeros of both signs in some places: the
            # extremum is ±0 in some lanes only (maximum: negatives; minimum: positives)
            x = -np.abs(x) if op == "maximum" else np.abs(x)
            x.reshape(-1)[rng.integers(0, x.size, size=max(1, x.size // 50))] = 0.0
            x.reshape(-1)[rng.integers(0, x.size, size=max(1, x.size // 50))] = -0.0
        return x
    info = np.iinfo(NUMPY[dtype])
    x = rng.integers(info.min, info.max, size=shape, dtype=NUMPY[dtype], endpoint=True)
    if variant == 1:
        x[0, rng.integers(n)] = info.min
        x[1, rng.integers(n)] = info.max
    return x


@pytest.mark.parametrize("dtype,op", CASES)
def test_order_free_reductions_keep_the_contract_bits(dtype: str, op: str) -> None:
    rng = np.random.default_rng(abs(hash((dtype, op))) % 2**32)
    for n in LENGTHS:
        text = _module(dtype, op, n, swapped=n % 2 == 1)
        module = load_module(text)
        assert is_order_free(module.entry.root.attrs["to_apply"])  # type: ignore[arg-type]
        # The default target and, case by case, one other (harness/sampling.py).
        for target in dict.fromkeys([DEFAULT, *share_of([t for t in NATIVE if t != DEFAULT], 2, f"{dtype} {op}")]):
            executable = executable_for(text, target)
            if executable is None:
                continue
            for variant in range(5):
                x = _values(rng, dtype, n, variant, op)
                init = np.array(x.reshape(-1)[0])
                want = evaluate(module, [x, init])[0]
                got = executable.run(x, init, threads=2)[0]
                assert got.tobytes() == want.tobytes(), (dtype, op, n, target, variant, got, want)


@pytest.mark.parametrize(
    "text",
    [
        _module("f32", "add", 8),  # float addition is not associative
        _module("f64", "multiply", 8),
        _module("f32", "maximum", 8).replace("maximum(a, b)", "maximum(a, a)"),
        _module("s32", "subtract", 8),
    ],
)
def test_other_reducers_keep_the_pinned_lane_order(text: str) -> None:
    assert not is_order_free(load_module(text).entry.root.attrs["to_apply"])  # type: ignore[arg-type]
