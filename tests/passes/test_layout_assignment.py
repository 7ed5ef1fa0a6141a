"""Layout assignment: bitcasts become logical-index ops, every unpinned value gets the
default layout, the entry signature stays, and every result bit stays."""

from __future__ import annotations

import pytest

from compiler.hlo.shape import ArrayShape, flatten
from compiler.passes.layout_assignment import LayoutAssignment
from tests.passes.simplification_helpers import (
    assert_bit_identical,
    canonical,
    opcodes,
    run_pass,
)

BITCASTS = [
    # (operand shape, result shape, the ops the bitcast becomes)
    ("f32[2,3]{1,0}", "f32[6]{0}", ["reshape"]),
    ("f32[2,3]{1,0}", "f32[2,3]{1,0}", ["reshape"]),
    ("f32[2,3]{0,1}", "f32[6]{0}", ["transpose", "reshape"]),
    ("f32[2,3]{0,1}", "f32[3,2]{1,0}", ["transpose"]),
    ("f32[2,3,4]{0,2,1}", "f32[4,6]{0,1}", ["transpose", "reshape", "transpose"]),
    ("f32[2,3]{1,0}", "s32[3,2]{0,1}", ["bitcast-convert", "transpose"]),
    ("f32[2,3]{1,0}", "s32[6,1]{0,1}", ["bitcast-convert", "reshape", "transpose"]),
    ("f16[4,2]{0,1}", "u16[8]{0}", ["transpose", "bitcast-convert", "reshape"]),
    ("f64[2,2,2]{2,1,0}", "s64[2,2,2]{2,1,0}", ["bitcast-convert"]),
    (
        "bf16[3,2,2]{1,2,0}",
        "s16[2,6]{0,1}",
        ["transpose", "bitcast-convert", "reshape", "transpose"],
    ),
]


@pytest.mark.parametrize(
    ("source", "target", "ops"), BITCASTS, ids=[f"{s}->{t}" for s, t, _ in BITCASTS]
)
def test_bitcasts_become_logical_ops_with_the_same_bits(
    source: str, target: str, ops: list[str]
) -> None:
    logical = source.split("{")[0]
    text = f"""HloModule m
ENTRY e {{
  x = {logical} parameter(0)
  a = {source} negate(x)
  b = {target} bitcast(a)
  ROOT r = {target.split("{")[0]} copy(b)
}}
"""
    before, after, changed = run_pass(LayoutAssignment(), text)
    assert changed
    assert opcodes(after) == ["parameter", "negate", *ops, "copy"]
    for instruction in after.entry.instructions:
        assert all(s.has_default_layout for s in flatten(instruction.shape))
    assert_bit_identical(before, after)


def test_the_entry_signature_keeps_its_layouts() -> None:
    text = """HloModule m, entry_computation_layout={(f32[2,3]{0,1}, s32[4]{0})->(f32[3,2]{0,1}, s32[4]{0})}
ENTRY e {
  x = f32[2,3]{0,1} parameter(0)
  y = s32[4]{0} parameter(1)
  t = f32[3,2]{0,1} transpose(x), dimensions={1,0}
  n = f32[3,2]{0,1} negate(t)
  ROOT r = (f32[3,2]{0,1}, s32[4]{0}) tuple(n, y)
}
"""
    before, after, changed = run_pass(LayoutAssignment(), text)
    assert changed
    entry = after.entry
    assert str(entry.parameters[0].shape) == "f32[2,3]{0,1}"
    assert str(entry.root.shape) == "(f32[3,2]{0,1}, s32[4]{0})"
    assert [str(i.shape) for i in entry.instructions if i.opcode in ("transpose", "negate")] == [
        "f32[3,2]{1,0}"
    ] * 2
    assert canonical(after).splitlines()[0] == canonical(before).splitlines()[0]
    assert_bit_identical(before, after)


def test_called_computations_get_default_layouts_too() -> None:
    text = """HloModule m
body {
  s = (s32[], f32[2,2]{0,1}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[2,2]{0,1} get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  flat = f32[4]{0} bitcast(v)
  back = f32[2,2]{1,0} reshape(flat)
  ROOT r = (s32[], f32[2,2]{0,1}) tuple(j, back)
}
cond {
  s = (s32[], f32[2,2]{0,1}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[2,2] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[2,2]{0,1}) tuple(z, x)
  ROOT w = (s32[], f32[2,2]{0,1}) while(init), condition=cond, body=body
}
"""
    before, after, changed = run_pass(LayoutAssignment(), text)
    assert changed
    body = after.computation("body")
    assert "bitcast" not in [i.opcode for i in body.instructions]
    for computation in after.computations:
        for instruction in computation.instructions:
            if instruction is not after.entry.root:
                assert all(
                    isinstance(s, ArrayShape) and s.has_default_layout
                    for s in flatten(instruction.shape)
                )
    assert_bit_identical(before, after)


def test_a_second_run_changes_nothing() -> None:
    source, target, _ = BITCASTS[4]
    text = f"HloModule m\nENTRY e {{\n  x = {source} parameter(0)\n  ROOT b = {target} bitcast(x)\n}}\n"
    before, after, changed = run_pass(LayoutAssignment(), text)
    assert changed
    snapshot = canonical(after)
    assert not LayoutAssignment().run(after)
    assert canonical(after) == snapshot
    assert_bit_identical(before, after)
