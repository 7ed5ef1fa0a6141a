"""scan (XLA's newer loop op): the reference against the results XLA's own evaluator tests
expect, the backend (the op's while-loop expansion, compiler/hlo/scan.py) against the
reference bit for bit on every target and thread count, and the verifier's messages."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.hlo import HloVerifyError, load_module
from compiler.reference import evaluate
from harness.targets import run_everywhere

ADD = """scan_add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  add = f32[] add(x, y)
  ROOT t = (f32[], f32[]) tuple(add, add)
}
"""


def _module(entry: str, computations: str = ADD) -> str:
    return f"HloModule s\n{computations}ENTRY e {{\n{entry}\n}}\n"


@pytest.mark.parametrize(
    ("reverse", "expected"),
    [(False, ([1.0, 3.0, 6.0, 10.0], 10.0)), (True, ([10.0, 9.0, 7.0, 4.0], 10.0))],
)
def test_a_running_sum_as_xlas_evaluator_test_expects(reverse: bool, expected: tuple[list[float], float]) -> None:
    attrs = ", is_reverse=true" if reverse else ""
    text = _module(f"  input = f32[4] parameter(0)\n  init = f32[] parameter(1)\n  ROOT scan = (f32[4], f32[]) scan(input, init), dimensions={{0}}, num_carries=1{attrs}, to_apply=scan_add")
    sums, total = evaluate(load_module(text), [np.array([1, 2, 3, 4], np.float32), np.float32(0)])
    assert (sums.tolist(), float(total)) == expected


def test_the_backend_gives_the_references_bits_on_every_target() -> None:
    """Two inputs scanned along dimension 1 in reverse with two carries of other shapes,
    outputs of two types (one a pred), and a scan of no steps."""
    body = """step {
  x = f32[3] parameter(0)
  i = s32[3] parameter(1)
  acc = f32[3] parameter(2)
  count = s32[] parameter(3)
  mixed = f32[3] multiply(acc, x)
  wide = f32[3] convert(i)
  next = f32[3] add(mixed, wide)
  one = s32[] constant(1)
  counted = s32[] add(count, one)
  zero = f32[] constant(0)
  zeros = f32[3] broadcast(zero), dimensions={}
  positive = pred[3] compare(next, zeros), direction=GT
  ROOT t = (f32[3], pred[3], f32[3], s32[]) tuple(next, positive, next, counted)
}
"""
    entry = """  x = f32[3,5] parameter(0)
  i = s32[3,5] parameter(1)
  acc = f32[3] parameter(2)
  count = s32[] parameter(3)
  s = (f32[3,5], pred[3,5], f32[3], s32[]) scan(x, i, acc, count), dimensions={1}, num_carries=2, is_reverse=true, is_associative=false, to_apply=step
  empty = f32[3,0] parameter(4)
  none = s32[3,0] convert(empty)
  e = (f32[3,0], pred[3,0], f32[3], s32[]) scan(empty, none, acc, count), dimensions={1}, num_carries=2, to_apply=step
  ROOT r = ((f32[3,5], pred[3,5], f32[3], s32[]), (f32[3,0], pred[3,0], f32[3], s32[])) tuple(s, e)"""
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((3, 5)).astype(np.float32), rng.integers(-3, 3, (3, 5)).astype(np.int32),
              rng.standard_normal(3).astype(np.float32), np.int32(7), np.zeros((3, 0), np.float32)]  # fmt: skip
    outputs = evaluate(load_module(_module(entry, body)), arrays)
    assert outputs[3] == 12 and outputs[7] == 7
    assert outputs[6].tobytes() == arrays[2].tobytes()
    run_everywhere(_module(entry, body), arrays)


@pytest.mark.parametrize(
    ("scan", "message"),
    [
        ("(f32[4], f32[]) scan(input, init), dimensions={0}, num_carries=3, to_apply=scan_add", "num_carries"),
        ("(f32[4], f32[]) scan(input, init), dimensions={0,1}, num_carries=1, to_apply=scan_add", "one dimension"),
        ("(f32[4], f32[]) scan(input, input), dimensions={0}, num_carries=1, to_apply=scan_add", "scan computation"),
    ],
)
def test_bad_scans_are_verify_errors(scan: str, message: str) -> None:
    text = _module(f"  input = f32[4] parameter(0)\n  init = f32[] parameter(1)\n  ROOT s = {scan}")
    with pytest.raises(HloVerifyError, match=message):
        load_module(text)
