"""Random programs built to hit the simplification rewrites (neutral constants, duplicated
subexpressions, reshape/transpose chains, calls, tuples, constant subgraphs, negated
select predicates) keep every reference output bit, on special input values."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.hlo import canonical_text, load_module, verify_module
from compiler.passes.base import FixedPoint, Pipeline
from compiler.passes.pipeline import default_pipeline
from compiler.reference import evaluate
from tests.passes.simplification_helpers import bits, inputs_for

# Element type -> constants worth combining with (neutral elements and their neighbours).
CONSTANTS = {
    "s32": ["0", "1", "-1", "2"],
    "u8": ["0", "1", "255"],
    "f32": ["0", "-0", "1", "-1", "inf"],
}
BINARY = {
    "s32": [
        "add",
        "subtract",
        "multiply",
        "divide",
        "and",
        "or",
        "xor",
        "maximum",
        "minimum",
        "shift-left",
    ],
    "u8": ["add", "multiply", "and", "or", "xor", "shift-right-logical"],
    "f32": ["add", "subtract", "multiply", "divide", "maximum", "minimum"],
}
UNARY = {
    "s32": ["negate", "not", "abs"],
    "u8": ["not", "negate"],
    "f32": ["negate", "abs", "floor"],
}
DIMS = (2, 3)
SHAPE = "[2,3]"


class Builder:
    """Appends instructions to an entry computation, one name per value."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.values: dict[str, list[str]] = {t: [] for t in CONSTANTS}
        self.count = 0
        self.helpers: list[str] = []

    def add(self, dtype: str, text: str, shape: str = SHAPE) -> str:
        self.count += 1
        name = f"v{self.count}"
        kind = f"{dtype}{shape}" if shape.startswith("[") else shape  # a tuple type as given
        self.lines.append(f"  {name} = {kind} {text}")
        if shape == SHAPE and dtype in self.values:
            self.values[dtype].append(name)
        return name


@st.composite
def programs(draw) -> str:
    b = Builder()
    for number, dtype in enumerate(CONSTANTS):
        b.lines.append(f"  p{number} = {dtype}{SHAPE} parameter({number})")
        b.values[dtype].append(f"p{number}")
    b.lines.append(f"  s = pred{SHAPE} parameter({len(CONSTANTS)})")

    def pick(dtype: str) -> str:
        return draw(st.sampled_from(b.values[dtype]))

    for _ in range(draw(st.integers(4, 14))):
        dtype = draw(st.sampled_from(sorted(CONSTANTS)))
        kind = draw(
            st.sampled_from(
                [
                    "binary-const",
                    "binary",
                    "unary",
                    "dup",
                    "movement",
                    "select",
                    "call",
                    "tuple",
                    "fold",
                ]
            )
        )
        if kind in ("binary-const", "binary"):
            op = draw(st.sampled_from(BINARY[dtype]))
            if kind == "binary-const":
                k = b.add(dtype, f"constant({draw(st.sampled_from(CONSTANTS[dtype]))})", "[]")
                other = b.add(dtype, f"broadcast({k}), dimensions={{}}")
            else:
                other = pick(dtype)
            lhs, rhs = (pick(dtype), other) if draw(st.booleans()) else (other, pick(dtype))
            b.add(dtype, f"{op}({lhs}, {rhs})")
        elif kind == "unary":
            v = b.add(dtype, f"{draw(st.sampled_from(UNARY[dtype]))}({pick(dtype)})")
            if draw(st.booleans()):
                b.add(dtype, f"{b.lines[-1].split()[-1].split('(')[0]}({v})")
        elif kind == "dup":
            line = draw(st.sampled_from(b.lines))
            name, body = line.strip().split(" = ", 1)
            if "parameter" not in body and body.startswith(f"{dtype}{SHAPE} "):
                b.add(dtype, body.split(" ", 1)[1])
        elif kind == "movement":
            x = pick(dtype)
            flat = b.add(dtype, f"reshape({x})", "[6]")
            back = b.add(dtype, f"reshape({flat})", "[3,2]")
            t = b.add(dtype, f"transpose({back}), dimensions={{1,0}}", "[2,3]")
            t2 = b.add(dtype, f"transpose({t}), dimensions={{1,0}}", "[3,2]")
            b.add(dtype, f"transpose({t2}), dimensions={{1,0}}")
            b.add(dtype, f"slice({x}), slice={{[0:2], [0:3]}}")
            b.add(dtype, f"concatenate({x}), dimensions={{0}}")
            b.add(dtype, f"reverse({x}), dimensions={{{draw(st.sampled_from(['', '0', '1']))}}}")
        elif kind == "select":
            predicate = "s"
            for _ in range(draw(st.integers(0, 2))):
                predicate = b.add("pred", f"not({predicate})")
            if draw(st.booleans()):
                predicate = b.add(
                    "pred", f"constant({draw(st.sampled_from(['true', 'false']))})", "[]"
                )
            b.add(dtype, f"select({predicate}, {pick(dtype)}, {pick(dtype)})")
        elif kind == "call":
            name = f"helper{len(b.helpers)}"
            b.helpers.append(
                f"{name} {{\n  a = {dtype}{SHAPE} parameter(0)\n  c = {dtype}{SHAPE} parameter(1)\n"
                f"  m = {dtype}{SHAPE} {draw(st.sampled_from(BINARY[dtype]))}(a, c)\n"
                f"  ROOT t = ({dtype}{SHAPE}, {dtype}{SHAPE}) tuple(m, a)\n}}\n"
            )
            pair = b.add(
                dtype,
                f"call({pick(dtype)}, {pick(dtype)}), to_apply={name}",
                f"({dtype}{SHAPE}, {dtype}{SHAPE})",
            )
            b.add(dtype, f"get-tuple-element({pair}), index={draw(st.integers(0, 1))}")
        elif kind == "tuple":
            x, y = pick(dtype), pick(dtype)
            t = b.add(dtype, f"tuple({x}, {y})", f"({dtype}{SHAPE}, {dtype}{SHAPE})")
            b.add(dtype, f"get-tuple-element({t}), index={draw(st.integers(0, 1))}")
        else:
            values = ", ".join(draw(st.sampled_from(CONSTANTS[dtype])) for _ in range(6))
            k = b.add(dtype, f"constant({{{values}}})", "[6]")
            r = b.add(dtype, f"reshape({k})")
            b.add(dtype, f"{draw(st.sampled_from(BINARY[dtype]))}({r}, {r})")
    results = [v for t in sorted(CONSTANTS) for v in b.values[t][-2:]]
    shapes = ", ".join(f"{t}{SHAPE}" for t in sorted(CONSTANTS) for _ in b.values[t][-2:])
    b.lines.append(f"  ROOT out = ({shapes}) tuple({', '.join(results)})")
    body = "\n".join(b.lines)
    return "HloModule random\n" + "".join(b.helpers) + f"ENTRY e {{\n{body}\n}}\n"


def _group() -> FixedPoint:
    return next(
        s
        for s in default_pipeline().stages
        if isinstance(s, FixedPoint) and s.name == "simplification"
    )


@settings(max_examples=60, deadline=None, derandomize=True)
@given(programs())
def test_random_programs_keep_their_bits(text: str) -> None:
    before = load_module(text)
    inputs = inputs_for(before)
    expected = [bits(a) for a in evaluate(before, inputs)]
    after = Pipeline((_group(),)).run(load_module(text))
    verify_module(after)
    assert [bits(a) for a in evaluate(after, inputs)] == expected
    # The group ends at a fixed point.
    snapshot = canonical_text(after)
    assert not any([p.run(after) for p in _group().passes])
    assert canonical_text(after) == snapshot
