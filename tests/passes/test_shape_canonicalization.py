"""Shape canonicalization: reshape, transpose and broadcast chains collapse, identities
disappear, and nothing changes a shape or layout that a user sees."""

from __future__ import annotations

import pytest

from compiler.passes.dead_code_elimination import DeadCodeElimination
from compiler.passes.shape_canonicalization import ShapeCanonicalization
from tests.passes.simplification_helpers import (
    assert_bit_identical,
    assert_same_result,
    canonical,
    opcodes,
    run_pass,
)


def _body(lines: str, param: str = "f32[2,3,4]") -> str:
    return f"HloModule m\nENTRY e {{\n  x = {param} parameter(0)\n{lines}\n}}\n"


CASES = [
    (
        "reshape-reshape",
        "  a = f32[6,4] reshape(x)\n  b = f32[4,6] reshape(a)\n  ROOT r = f32[24] reshape(b)",
        ["parameter", "reshape"],
    ),
    (
        "reshape-same",
        "  a = f32[2,3,4] reshape(x)\n  ROOT r = f32[2,3,4] negate(a)",
        ["parameter", "negate"],
    ),
    (
        "transpose-transpose",
        "  a = f32[3,4,2] transpose(x), dimensions={1,2,0}\n  ROOT r = f32[4,2,3] transpose(a), dimensions={1,2,0}",
        ["parameter", "transpose"],
    ),
    (
        "transpose-inverse",
        "  a = f32[3,4,2] transpose(x), dimensions={1,2,0}\n  b = f32[2,3,4] transpose(a), dimensions={2,0,1}\n  ROOT r = f32[2,3,4] negate(b)",
        ["parameter", "negate"],
    ),
    (
        "transpose-identity",
        "  a = f32[2,3,4] transpose(x), dimensions={0,1,2}\n  ROOT r = f32[2,3,4] abs(a)",
        ["parameter", "abs"],
    ),
    (
        "broadcast-broadcast",
        "  a = f32[2,5,3,4] broadcast(x), dimensions={0,2,3}\n  ROOT r = f32[2,5,3,6,4] broadcast(a), dimensions={0,1,2,4}",
        ["parameter", "broadcast"],
    ),
    (
        "broadcast-identity",
        "  a = f32[2,3,4] broadcast(x), dimensions={0,1,2}\n  ROOT r = f32[2,3,4] sqrt(a)",
        ["parameter", "sqrt"],
    ),
]


@pytest.mark.parametrize(
    ("lines", "expected"), [pytest.param(lines, ops, id=name) for name, lines, ops in CASES]
)
def test_rewrite_keeps_every_bit(lines: str, expected: list[str]) -> None:
    before, after, changed = run_pass(ShapeCanonicalization(), _body(lines))
    assert changed
    DeadCodeElimination().run(after)
    assert opcodes(after) == expected
    assert_bit_identical(before, after)


def test_composed_attributes_are_the_composition() -> None:
    _, after, _ = run_pass(ShapeCanonicalization(), _body(CASES[2][1]))
    assert after.entry.root.attrs["dimensions"] == (2, 0, 1)
    _, after, _ = run_pass(ShapeCanonicalization(), _body(CASES[5][1]))
    assert after.entry.root.attrs["dimensions"] == (0, 2, 4)


def test_identities_with_another_layout_stay() -> None:
    # The reshape changes the layout a bitcast reads: removing it would change the result.
    text = _body("  a = f32[2,3,4]{0,1,2} reshape(x)\n  ROOT r = f32[24] bitcast(a)")
    before, after, changed = run_pass(ShapeCanonicalization(), text)
    assert not changed
    assert canonical(after) == canonical(before)
    assert_bit_identical(before, after)


def test_a_shared_inner_op_stays_for_its_other_users() -> None:
    text = _body(
        "  a = f32[6,4] reshape(x)\n  b = f32[24] reshape(a)\n  n = f32[6,4] negate(a)\n  ROOT t = (f32[24], f32[6,4]) tuple(b, n)"
    )
    before, after, changed = run_pass(ShapeCanonicalization(), text)
    assert changed
    DeadCodeElimination().run(after)
    assert opcodes(after).count("reshape") == 2
    assert_bit_identical(before, after)


def test_deterministic_under_renaming_and_reordering() -> None:
    text = _body(
        "  a = f32[6,4] reshape(x)\n  t = f32[4,3,2] transpose(x), dimensions={2,1,0}\n  b = f32[24] reshape(a)\n  u = f32[2,3,4] transpose(t), dimensions={2,1,0}\n  ROOT r = (f32[24], f32[2,3,4]) tuple(b, u)"
    )
    variant = _body(
        "  tt = f32[4,3,2] transpose(x), dimensions={2,1,0}\n  uu = f32[2,3,4] transpose(tt), dimensions={2,1,0}\n  aa = f32[6,4] reshape(x)\n  bb = f32[24] reshape(aa)\n  ROOT r = (f32[24], f32[2,3,4]) tuple(bb, uu)"
    )
    assert_same_result(ShapeCanonicalization, text, variant)
