"""The simplification group on a large module: a 2000-step chain full of
get-tuple-element/tuple pairs, reshape chains, duplicates, calls and bitcasts simplifies
completely and keeps every bit. (The passes rewrite uses in one sweep, so this takes seconds;
a quadratic pass took about a minute. Tests assert behaviour, never a time.)"""

from __future__ import annotations

from compiler.hlo import load_module, verify_module
from compiler.passes.base import FixedPoint, Pipeline
from compiler.passes.pipeline import default_pipeline
from compiler.reference import evaluate
from tests.passes.simplification_helpers import bits, inputs_for

STEPS = 2000


def _large_module() -> str:
    lines = [
        "HloModule large",
        "f {",
        "  a = f32[8] parameter(0)",
        "  ROOT n = f32[8] negate(a)",
        "}",
        "ENTRY e {",
        "  p = f32[8] parameter(0)",
    ]
    previous = "p"
    for i in range(STEPS):
        lines += [
            f"  t{i} = (f32[8], f32[8]) tuple({previous}, p)",
            f"  g{i} = f32[8] get-tuple-element(t{i}), index=0",
            f"  r{i} = f32[2,4]{{0,1}} reshape(g{i})",
            f"  b{i} = f32[8] bitcast(r{i})",
            f"  c{i} = f32[8] call(b{i}), to_apply=f",
            f"  x{i} = f32[8] exponential(c{i})",
            f"  y{i} = f32[8] exponential(c{i})",
            f"  s{i} = f32[8] subtract(x{i}, y{i})",
        ]
        previous = f"s{i}"
    lines += [f"  ROOT out = f32[8] add({previous}, p)", "}"]
    return "\n".join(lines)


def test_a_large_module_simplifies_completely_and_keeps_its_bits() -> None:
    text = _large_module()
    module = load_module(text)
    group = next(
        s
        for s in default_pipeline().stages
        if isinstance(s, FixedPoint) and s.name == "simplification"
    )
    Pipeline((group,), verify_each=False).run(module)
    verify_module(module)
    # Every step's duplicate merged, every call inlined, every bitcast lowered.
    opcodes = [i.opcode for i in module.entry.execution_order()]
    assert (
        opcodes.count("exponential") == STEPS and "call" not in opcodes and "bitcast" not in opcodes
    )
    original = load_module(text)
    inputs = inputs_for(original)
    assert [bits(a) for a in evaluate(module, inputs)] == [
        bits(a) for a in evaluate(original, inputs)
    ]
