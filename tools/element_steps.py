"""Checks the element steps (compiler/reference/steps/) against the reference evaluator on
every fixture: every op-trace leaf of its optimized module and a sample of each leaf's output
elements. The steps' result must be the element's bits as the reference computes them, and
the program (the steps without their values) the same for every element. Prints per leaf
opcode: elements checked, steps, mismatches, undecided steps, and what is not covered (why).

    python tools/element_steps.py                         # every fixture, 4 elements per leaf
    python tools/element_steps.py --fixtures mlp_softmax --elements 16
    python tools/element_steps.py --fuzz 200           # also 200 generated programs
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.api import load_config, load_program, optimize  # noqa: E402
from harness.element_steps import StepsReport, check_module  # noqa: E402
from harness.fixture_data import FIXTURES, Fixture  # noqa: E402


def fuzz(
    count: int, seed: int, elements: int, rng: np.random.Generator, report: StepsReport
) -> None:
    """`count` programs of the fuzzer's generator, each optimized and checked like a fixture."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import seed as fixed_seed
    from hypothesis import strategies as st

    from harness.program_generator import inputs, programs

    @fixed_seed(seed)
    @settings(
        max_examples=count, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(programs(), st.integers(0, 2**32 - 1))
    def one(text: str, input_seed: int) -> None:
        program = load_program(text)
        parameters = [
            (p.shape.dtype.name, tuple(p.shape.dims)) for p in program.module.entry.parameters
        ]
        check_module(
            optimize(program, load_config()),
            inputs(parameters, input_seed),
            elements,
            rng,
            report,
            label=text.splitlines()[0],
        )

    one()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--fixtures", nargs="*", help="fixture names (default: every fixture with a module)"
    )
    parser.add_argument(
        "--elements",
        type=int,
        default=4,
        help="output elements per leaf output (first, last, random)",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=100_000,
        help="stop a leaf's sample after an element this long",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--fuzz",
        type=int,
        default=0,
        help="also check this many generated programs (harness/program_generator.py)",
    )
    args = parser.parse_args(argv)
    names = args.fixtures or sorted(p.parent.name for p in FIXTURES.glob("*/module.hlo"))
    rng = np.random.default_rng(args.seed)
    report = StepsReport()
    for name in names:
        started = time.perf_counter()
        fixture = Fixture(name)
        module = optimize(load_program(fixture.module_text), load_config())
        check_module(
            module,
            fixture.inputs(),
            args.elements,
            rng,
            report,
            label=name,
            max_steps=args.max_steps,
        )
        print(f"{name}: {time.perf_counter() - started:.1f} s", flush=True)
    if args.fuzz:
        started = time.perf_counter()
        fuzz(args.fuzz, args.seed, args.elements, rng, report)
        print(f"{args.fuzz} generated programs: {time.perf_counter() - started:.1f} s", flush=True)
    print()
    print(report.table())
    for failure in report.failures[:20]:
        print(f"MISMATCH {failure}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
