"""Checks the element steps (compiler/reference/steps/) against the reference evaluator:
for every fixture, every op-trace leaf of its optimized module and a sample of each leaf's
output elements, the steps' result must be the element's bits as the reference computes it.
Prints per leaf opcode: leaves, elements checked, steps, mismatches, and the opcodes left
uncovered (with why).

    python tools/element_steps.py                       # every fixture, 4 elements per leaf
    python tools/element_steps.py --fixtures mlp_softmax --elements 16 --max-steps 200000
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.api import (  # noqa: E402
    Uncovered,
    element_steps,
    evaluate,
    flatten,
    load_config,
    load_program,
    optimize,
    scalar_bits,
    trace_leaves,
)
from harness.fixture_data import FIXTURES, Fixture  # noqa: E402


def leaf_values(module, inputs):
    """The reference value of every entry instruction, by id."""
    values = {}
    evaluate(
        module,
        inputs,
        observer=lambda instruction, value: values.__setitem__(id(instruction), value),
    )
    return values


def _parts(value) -> list[np.ndarray]:
    """The flat output buffers of a (nested) tuple value."""
    if isinstance(value, tuple):
        return [array for part in value for array in _parts(part)]
    return [value]


def sample(count: int, n: int, rng: np.random.Generator) -> list[int]:
    if n <= count:
        return list(range(n))
    picked = {0, n - 1} | set(rng.choice(n, size=count - 2, replace=False).tolist())
    return sorted(picked)


def check_fixture(
    name: str, elements: int, max_steps: int, rng: np.random.Generator, report
) -> None:
    fixture = Fixture(name)
    module = optimize(load_program(fixture.module_text), load_config())
    values = leaf_values(module, fixture.inputs())
    for leaf in trace_leaves(module):
        operands = [values[id(o)] for o in leaf.operands]
        parts = _parts(values[id(leaf)])
        shapes = flatten(leaf.shape)
        for output, (part, shape) in enumerate(zip(parts, shapes, strict=True)):
            flat = np.asarray(part).reshape(-1)
            for element in sample(elements, flat.size, rng):
                try:
                    trace = element_steps(leaf, operands, element, output)
                except Uncovered as why:
                    report(leaf.opcode, uncovered=str(why))
                    break
                expected = scalar_bits(flat[element : element + 1], shape.dtype)
                where = f"{name} {leaf.opcode} output {output} element {element}: steps {trace.value:#x}, reference {expected:#x}"
                report(
                    leaf.opcode,
                    steps=len(trace.steps),
                    ok=trace.value == expected,
                    where=where,
                    undecided=not trace.decided,
                )
                if len(trace.steps) > max_steps:
                    break
            else:
                continue
            break


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--fixtures", nargs="*", help="fixture names (default: every fixture with a module)"
    )
    parser.add_argument(
        "--elements", type=int, default=4, help="output elements per leaf (first, last, random)"
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=100_000,
        help="stop a leaf's sample after an element this long",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    names = args.fixtures or sorted(p.parent.name for p in FIXTURES.glob("*/module.hlo"))
    rng = np.random.default_rng(args.seed)
    stats: dict[str, Counter] = defaultdict(Counter)
    uncovered: dict[str, set[str]] = defaultdict(set)
    failures: list[str] = []

    def report(opcode, steps=0, ok=True, where="", undecided=False, uncovered=None):
        if uncovered is not None:
            stats[opcode]["uncovered"] += 1
            globals_uncovered = uncovered_by[opcode]
            globals_uncovered.add(uncovered)
            return
        stats[opcode]["elements"] += 1
        stats[opcode]["steps"] += steps
        stats[opcode]["undecided"] += undecided
        if not ok:
            stats[opcode]["mismatches"] += 1
            failures.append(where)

    uncovered_by = uncovered
    for name in names:
        started = time.perf_counter()
        check_fixture(name, args.elements, args.max_steps, rng, report)
        print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)
    print(
        f"\n{'opcode':24} {'elements':>9} {'steps':>10} {'mismatch':>9} {'undecided':>9} {'uncovered':>9}"
    )
    for opcode in sorted(stats):
        s = stats[opcode]
        print(
            f"{opcode:24} {s['elements']:9} {s['steps']:10} {s['mismatches']:9} {s['undecided']:9} {s['uncovered']:9}"
        )
    for opcode in sorted(uncovered):
        for why in sorted(uncovered[opcode]):
            print(f"uncovered: {why}")
    for failure in failures[:20]:
        print(f"MISMATCH {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
