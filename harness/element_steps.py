"""Checks element steps (compiler/reference/steps/) against the reference evaluator, for the
tool (tools/element_steps.py, every fixture) and the tests (a sample): for every op-trace leaf
of a module and a sample of each leaf's output elements, the steps' result must be the
element's bits as the reference computes them, and every sampled element of a leaf must have
the same program (the steps without their values)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from attest.digests import canonical_tensor_bytes
from compiler.api import (
    Module,
    Uncovered,
    element_steps,
    evaluate,
    flatten,
    trace_leaves,
)


@dataclass
class StepsReport:
    """Per leaf opcode: elements checked, steps, mismatches, undecided ROUND_F32_CR steps,
    leaves not covered; the failures and the reasons for what is not covered."""

    stats: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    uncovered: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    failures: list[str] = field(default_factory=list)

    def table(self) -> str:
        lines = [
            f"{'opcode':24} {'elements':>9} {'steps':>10} {'mismatch':>9} {'undecided':>9} {'uncovered':>9}"
        ]
        for opcode in sorted(self.stats):
            s = self.stats[opcode]
            lines.append(
                f"{opcode:24} {s['elements']:9} {s['steps']:10} {s['mismatches']:9} {s['undecided']:9} {s['uncovered']:9}"
            )
        lines += [
            f"uncovered: {why}"
            for opcode in sorted(self.uncovered)
            for why in sorted(self.uncovered[opcode])
        ]
        return "\n".join(lines)


def _parts(value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [array for part in value for array in _parts(part)]
    return [value]


def sample(count: int, n: int, rng: np.random.Generator) -> list[int]:
    """The first and last element and random others, `count` in all (every one when fewer)."""
    if n <= count:
        return list(range(n))
    return sorted({0, n - 1} | set(rng.choice(n, size=max(count - 2, 0), replace=False).tolist()))


def check_module(
    module: Module,
    inputs: Sequence[np.ndarray],
    elements: int,
    rng: np.random.Generator,
    report: StepsReport,
    label: str = "",
    max_steps: int = 100_000,
) -> None:
    """Adds `module`'s leaves to `report` (module: the optimized module)."""
    values: dict[int, object] = {}
    evaluate(
        module,
        inputs,
        observer=lambda instruction, value: values.__setitem__(id(instruction), value),
    )
    for leaf in trace_leaves(module):
        operands = [values[id(o)] for o in leaf.operands]
        stats = report.stats[leaf.opcode]
        for output, (part, _shape) in enumerate(
            zip(_parts(values[id(leaf)]), flatten(leaf.shape), strict=True)
        ):
            flat = np.asarray(part).reshape(-1)
            program = None
            for element in sample(elements, flat.size, rng):
                try:
                    trace = element_steps(leaf, operands, element, output)  # type: ignore[arg-type]
                except Uncovered as why:
                    stats["uncovered"] += 1
                    report.uncovered[leaf.opcode].add(str(why))
                    break
                # As the output's digest holds it: a NaN is the canonical NaN.
                expected = int.from_bytes(
                    canonical_tensor_bytes(flat[element : element + 1]), "little"
                )
                where = f"{label} {leaf.opcode} output {output} element {element}"
                stats["elements"] += 1
                stats["steps"] += len(trace.steps)
                stats["undecided"] += not trace.decided
                if trace.value != expected:
                    stats["mismatches"] += 1
                    report.failures.append(
                        f"{where}: steps give {trace.value:#x}, the reference {expected:#x}"
                    )
                program = program or trace.program
                if trace.program != program:
                    stats["mismatches"] += 1
                    report.failures.append(f"{where}: its program differs from the first element's")
                if len(trace.steps) > max_steps:
                    break
