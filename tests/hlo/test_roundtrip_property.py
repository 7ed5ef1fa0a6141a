"""Property: for random modules, printing is a fixed point, the canonical form computes the
same bits, and shuffling independent instructions or renaming them keeps hlo_hash."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.hlo import canonical_text, load_module
from compiler.program import load_program
from compiler.reference import evaluate

UNARY = ["negate", "abs", "exponential", "tanh", "sqrt", "floor", "sine"]
BINARY = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "atan2"]


@st.composite
def programs(draw):
    """A random straight-line f32 program as (lines, number of parameters)."""
    params = draw(st.integers(1, 3))
    count = draw(st.integers(1, 12))
    lines = [f"p{i} = f32[4]{{0}} parameter({i})" for i in range(params)]
    names = [f"p{i}" for i in range(params)]
    for index in range(count):
        if draw(st.booleans()):
            op = draw(st.sampled_from(UNARY))
            args = draw(st.sampled_from(names))
        else:
            op = draw(st.sampled_from(BINARY))
            args = f"{draw(st.sampled_from(names))}, {draw(st.sampled_from(names))}"
        lines.append(f"v{index} = f32[4]{{0}} {op}({args})")
        names.append(f"v{index}")
    return lines, params


def _module(lines: list[str], order: list[int], prefix: str) -> str:
    rename = re.compile(r"\b([pv]\d+)\b")
    body = [rename.sub(lambda m: prefix + m.group(1), lines[i]) for i in order]
    last = lines[-1].split(" = ")[0]
    root = f"ROOT out = f32[4]{{0}} copy({prefix}{last})"
    return "HloModule m\nENTRY e {\n  " + "\n  ".join(body + [root]) + "\n}\n"


@settings(max_examples=60, deadline=None)
@given(programs(), st.randoms(use_true_random=False))
def test_random_programs_round_trip(program, random) -> None:
    lines, params = program
    text = _module(lines, list(range(len(lines))), "")
    module = load_module(text)
    printed = canonical_text(module)
    assert canonical_text(load_module(printed)) == printed
    # The order of the instruction lines and the names do not matter: operands resolve by name.
    order = list(range(len(lines)))
    random.shuffle(order)
    shuffled = _module(lines, order, "x_")
    assert load_program(shuffled).hlo_hash == load_program(text).hlo_hash
    inputs = [np.linspace(-3, 3, 4, dtype=np.float32) * (i + 1) for i in range(params)]
    direct = evaluate(module, inputs)
    reprinted = evaluate(load_module(printed), inputs)
    assert [a.tobytes() for a in direct] == [b.tobytes() for b in reprinted]
