"""The admission estimate of a module's operations (compiler.hlo.cost): contractions count
two operations per multiply-add, reductions the elements they fold, the rest one per output
element, every reachable instruction once."""

from __future__ import annotations

from compiler.hlo.cost import estimate_flops, instruction_flops
from compiler.hlo.ir import Instruction
from compiler.hlo.parser import parse_module
from harness.fixture_data import Fixture
from harness.hlo_fragments import ADD_F32

MODULE = "HloModule m\n\n" + ADD_F32 + """
ENTRY e {
  x = f32[4,8] parameter(0)
  w = f32[8,16] parameter(1)
  d = f32[4,16] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[4,16] tanh(d)
  z = f32[] constant(0)
  r = f32[4] reduce(t, z), dimensions={1}, to_apply=add
  m = f32[2,8] reduce-window(t, z), window={size=2x2 stride=2x2}, to_apply=add
  ROOT out = (f32[4], f32[2,8]) tuple(r, m)
}
"""


def _by_name(text: str) -> dict[str, Instruction]:
    module = parse_module(text)
    return {i.name: i for c in module.reachable_computations() for i in c.post_order()}


def test_each_kind_of_instruction_counts_its_own_work() -> None:
    ops = {name: instruction_flops(i) for name, i in _by_name(MODULE).items()}
    assert ops["d"] == 2 * 4 * 16 * 8  # a multiply-add per output element and contraction step
    assert ops["t"] == 4 * 16
    assert ops["r"] == 4 * 16  # the elements folded, not the 4 results
    assert ops["m"] == 2 * 8 * 4  # each output folds a 2x2 window
    assert ops["x"] == 32 and ops["z"] == 1 and ops["out"] == 4 + 16
    assert ops["s"] == 1  # the reducer's scalar body counts once, not per application


def test_the_module_total_is_the_sum_over_every_reachable_instruction() -> None:
    module = parse_module(MODULE)
    assert estimate_flops(module) == sum(instruction_flops(i) for i in _by_name(MODULE).values())


def test_convolutions_count_kernel_features_times_window() -> None:
    cnn = _by_name(Fixture("cnn").module_text)["conv_general_dilated.1"]
    # f32[2,8,8,8] output (b01f); kernel f32[3,3,3,8] (01io): 3x3 window, 3 input features.
    kernel = cnn.operands[1].shape.dims
    assert instruction_flops(cnn) == 2 * (2 * 8 * 8 * 8) * kernel[2] * 9
    depthwise = _by_name(Fixture("depthwise_conv").module_text)["conv_general_dilated.2"]
    # oi01 kernel: one input feature per group, so each output sums 3x3 values only.
    assert depthwise.operands[1].shape.dims[1] == 1
    assert instruction_flops(depthwise) == 2 * (8 * 16 * 16) * 1 * 9


def test_a_sort_counts_its_merge_passes_and_comparator_steps() -> None:
    text = """HloModule s
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  x = f32[4,1000] parameter(0)
  ROOT s = f32[4,1000] sort(x), dimensions={1}, to_apply=cmp
}
"""
    sort = parse_module(text).entry.root
    assert instruction_flops(sort) == 4 * 1000 * 10 * 3  # 10 merge passes over 1000, 3 steps
