"""Malformed or unsupported input is a clear error naming line and column, never a crash:
both through the API (HloError) and the CLI (exit status 2, message on stderr)."""

from __future__ import annotations

import pytest

from compiler.hlo import HloError, load_module
from node.cli import main

GOOD = """HloModule m
ENTRY e {
  a = f32[2,3]{1,0} parameter(0)
  b = f32[2,3]{1,0} parameter(1)
  ROOT c = f32[2,3]{1,0} add(a, b)
}
"""

# (name, text, line, message fragment); the column is checked to be positive and on that line.
CORPUS = [
    ("empty", "", 1, "HloModule"),
    ("no header", "ENTRY e {\n  ROOT p = f32[] parameter(0)\n}\n", 1, "HloModule"),
    ("truncated", GOOD[: GOOD.index("add(")], 5, "expected"),
    ("truncated mid-shape", GOOD[: GOOD.index("[2,3]{1,0} parameter(1)") + 3], 4, "expected"),
    ("unclosed computation", GOOD.rstrip().rstrip("}"), 2, "not closed"),
    ("unknown opcode", GOOD.replace("add(a, b)", "addd(a, b)"), 5, "unknown opcode 'addd'"),
    ("undefined operand", GOOD.replace("add(a, b)", "add(a, z)"), 5, "undefined operand %z"),
    ("bad element type", GOOD.replace("f32[2,3]{1,0} parameter(1)", "f31[2,3]{1,0} parameter(1)"), 4, "unknown element type"),
    ("negative dimension", GOOD.replace("f32[2,3]{1,0} parameter(1)", "f32[2,-3]{1,0} parameter(1)"), 4, "negative dimension"),
    ("bad layout", GOOD.replace("parameter(1)", "parameter(1)").replace("b = f32[2,3]{1,0}", "b = f32[2,3]{1,1}"), 4, "permutation"),
    ("shape mismatch", GOOD.replace("ROOT c = f32[2,3]{1,0} add", "ROOT c = f32[3,2]{1,0} add"), 5, "does not match"),
    ("wrong operand count", GOOD.replace("add(a, b)", "add(a, b, a)"), 5, "takes 2 operands"),
    ("wrong operand count unary", GOOD.replace("add(a, b)", "negate(a, b)").replace("ROOT c", "ROOT c"), 5, "takes 1 operands"),
    ("type mismatch", GOOD.replace("b = f32[2,3]{1,0}", "b = s32[2,3]{1,0}"), 5, "types differ"),
    ("duplicate name", GOOD.replace("b = f32", "a = f32"), 4, "defined twice"),
    ("two roots", GOOD.replace("  b = f32", "  ROOT b = f32"), 5, "two ROOT"),
    ("parameter gap", GOOD.replace("parameter(1)", "parameter(2)"), 2, "parameter numbers"),
    ("bad attribute", GOOD.replace("add(a, b)", "transpose(a), dimensions={1,x}"), 5, "bad attribute dimensions"),
    ("missing attribute", GOOD.replace("ROOT c = f32[2,3]{1,0} add(a, b)", "ROOT c = f32[3,2]{1,0} transpose(a)"), 5, "needs attribute dimensions"),
    ("literal too short", GOOD.replace("b = f32[2,3]{1,0} parameter(1)", "b = f32[2,3]{1,0} constant({ {1, 2, 3}, {4, 5} })"), 4, "2 elements"),
    ("literal bad number", GOOD.replace("b = f32[2,3]{1,0} parameter(1)", "b = f32[2,3]{1,0} constant({ {1, 2, 3}, {4, 5, x} })"), 4, "floating-point"),
    ("literal out of range", "HloModule m\nENTRY e {\n  ROOT c = s8[] constant(300)\n}\n", 3, "out of range"),
    ("elided constant", "HloModule m\nENTRY e {\n  ROOT c = f32[4]{0} constant({...})\n}\n", 3, "elided"),
    ("unterminated string", GOOD.replace("add(a, b)", 'add(a, b), metadata={op_name="x}'), 5, "unterminated string"),
    ("unbalanced braces", GOOD.replace("add(a, b)", "add(a, b), foo={{1}"), 5, "unbalanced"),
    ("cycle", GOOD.replace("add(a, b)", "add(a, c)"), 5, "depends on itself"),
    ("recursion", "HloModule m\nf {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=f\n}\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=f\n}\n", 4, "calls itself"),
    ("undefined computation", GOOD.replace("add(a, b)", "map(a, b), dimensions={0,1}, to_apply=nope"), 5, "undefined computation"),
    ("custom call", GOOD.replace("add(a, b)", 'custom-call(a, b), custom_call_target="foo"'), 5, "custom call foo runs opaque host code"),
    ("rng", GOOD.replace("add(a, b)", "rng(a, b), distribution=rng_uniform"), 5, "random"),
    ("collective", GOOD.replace("add(a, b)", "all-gather(a), dimensions={0}"), 5, "collectives"),
    ("sparse layout", GOOD.replace("a = f32[2,3]{1,0}", "a = f32[2,3]{1,0:D(D,C)}"), 3, "mark D"),
    ("bitcast of a tiled layout", GOOD.replace("a = f32[2,3]{1,0}", "a = f32[2,3]{1,0:T(8,128)}").replace("add(a, b)", "bitcast(a)"), 5, "tiled"),
    ("dynamic shape", GOOD.replace("a = f32[2,3]{1,0}", "a = f32[2,<=3]{1,0}"), 3, "dynamic"),
    ("not utf-8 later", None, 0, ""),
]


def _location_line(error: HloError) -> int:
    assert error.location is not None, f"no location in: {error}"
    assert error.location.column >= 1
    return error.location.line


@pytest.mark.parametrize(("name", "text", "line", "fragment"), [c for c in CORPUS if c[1] is not None], ids=[c[0] for c in CORPUS if c[1] is not None])
def test_malformed_module_is_a_located_error(name: str, text: str, line: int, fragment: str) -> None:
    with pytest.raises(HloError) as info:
        load_module(text)
    assert fragment in str(info.value)
    assert _location_line(info.value) == line
    assert str(info.value).startswith(f"line {line}, column ")


@pytest.mark.parametrize(("name", "text", "line", "fragment"), [c for c in CORPUS if c[1] is not None][:12], ids=[c[0] for c in CORPUS if c[1] is not None][:12])
def test_cli_exits_2_with_line_and_column(tmp_path, capsys, name: str, text: str, line: int, fragment: str) -> None:
    path = tmp_path / "bad.hlo"
    path.write_text(text)
    for command in (["inspect", str(path)], ["run", str(path)]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"line {line}, column " in err and fragment in err


def test_non_utf8_bytes_are_located(tmp_path, capsys) -> None:
    path = tmp_path / "bad.hlo"
    path.write_bytes(GOOD.encode().replace(b"add", b"a\xffd"))
    assert main(["inspect", str(path)]) == 2
    assert "line 5, column" in capsys.readouterr().err


def test_module_of_many_megabytes(tmp_path, capsys) -> None:
    # A 6 MB constant with one bad element near the end: the error still names its place.
    values = ", ".join(["1.5"] * 1_000_000)
    big = f"HloModule m\nENTRY e {{\n  ROOT c = f32[1000000]{{0}} constant({{{values}}})\n}}\n"
    assert len(big) > 5_000_000
    module = load_module(big)
    assert module.entry.root.literal.shape == (1_000_000,)
    broken = big.replace("1.5})", "oops})")
    path = tmp_path / "big.hlo"
    path.write_text(broken)
    assert main(["inspect", str(path)]) == 2
    err = capsys.readouterr().err
    assert "line 3, column " in err and "oops" in err


def test_deeply_nested_tuples_are_rejected_not_crashing() -> None:
    depth = 5000
    shape = "(" * depth + "f32[]" + ")" * depth
    text = f"HloModule m\nENTRY e {{\n  ROOT p = {shape} parameter(0)\n}}\n"
    with pytest.raises(HloError, match="nested deeper"):
        load_module(text)


def test_moderately_nested_tuples_work() -> None:
    depth = 20
    lines = ["HloModule m", "ENTRY e {", "  t0 = f32[] parameter(0)"]
    for level in range(1, depth + 1):
        lines.append(f"  t{level} = {'(' * level}f32[]{')' * level} tuple(t{level - 1})")
    lines[-1] = lines[-1].replace(f"  t{depth} =", f"  ROOT t{depth} =")
    lines.append("}")
    module = load_module("\n".join(lines) + "\n")
    assert module.entry.root.name == f"t{depth}"


@pytest.mark.parametrize("depth", [66, 50_000, 1_100_000])
def test_deeply_nested_operands_are_a_located_error_not_a_crash(depth: int) -> None:
    """Instructions written in place of operands, `depth` levels (the root's own included; up
    to the 1.1 million a 16 MiB module holds): a located refusal, whatever the recursion limit."""
    inner = "p"
    for _ in range(min(depth, 70)):
        inner = f"f32[] negate({inner})"
    # Deeper texts repeat the opening only: the parser refuses at level 65, before it would
    # need the rest.
    text = "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = " + "f32[] negate(" * (depth - 70) + inner + ")" * (depth - 70) + "\n}\n"
    with pytest.raises(HloError, match=r"line 4, column \d+: instructions nested in operands deeper than 64"):
        load_module(text)


def test_nested_operands_up_to_the_limit_parse() -> None:
    inner = "p"
    for _ in range(65):  # the root and 64 levels inside it
        inner = f"f32[] negate({inner})"
    module = load_module("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = " + inner + "\n}\n")
    assert len(module.entry.instructions) == 66


def test_arrays_past_64_dimensions_are_refused_with_their_place() -> None:
    dims = ",".join(["1"] * 65)
    with pytest.raises(HloError, match="line 3, column 12: arrays of more than 64 dimensions"):
        load_module(f"HloModule m\nENTRY e {{\n  ROOT c = f32[{dims}] parameter(0)\n}}\n")
