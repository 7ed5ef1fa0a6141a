"""Dead code elimination: unused instructions and computations go, parameters stay."""

from __future__ import annotations

from compiler.passes.dead_code_elimination import DeadCodeElimination
from tests.passes.simplification_helpers import assert_bit_identical, run_pass

TEXT = """HloModule m
unused {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
used {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  dead = f32[] multiply(a, b)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  never = f32[4] parameter(2)
  d1 = f32[4] exponential(p)
  d2 = f32[4] map(d1), dimensions={0}, to_apply=unused
  z = f32[] constant(0)
  ROOT r = f32[] reduce(q, z), dimensions={0}, to_apply=used
}
"""


def test_dead_instructions_and_computations_go_parameters_stay() -> None:
    before, after, changed = run_pass(DeadCodeElimination(), TEXT)
    assert changed
    assert [c.name for c in after.computations] == ["used", "e"]
    assert [i.name for i in after.entry.instructions] == ["p", "q", "never", "z", "r"]
    # Dead code inside called computations goes too; their parameters stay.
    assert [i.name for i in after.computation("used").instructions] == ["a", "b", "s"]
    assert_bit_identical(before, after)


def test_a_second_run_changes_nothing() -> None:
    _, after, _ = run_pass(DeadCodeElimination(), TEXT)
    assert not DeadCodeElimination().run(after)
