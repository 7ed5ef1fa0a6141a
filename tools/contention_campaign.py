"""A campaign for the thread race's class: random valid modules of the differential fuzzer's
generator (harness/program_generator.py), with arrays large enough that kernels split their
work, run with many thread counts while other processes keep every core busy. Each module
runs on the pinned build and on the schedule-perturbed build (seeded delays at every barrier
and step, every kernel split as finely as it goes, poisoned memory), and every run's output
bits are compared with the pinned build's 1-thread run. Every value a module computes is one
of its results (nothing is dead code), and its dense layers (a dot with a bias and an
activation) become gemm epilogues. `make test` runs the contention modules the same way for
about a minute (tests/codegen/test_contention.py). On the row-path epilogue race this
campaign was written for, put back, it finds a differing run within its first modules and
shrinks it to a 1x1 by 1x13 f64 dense layer.

    .venv/bin/python tools/contention_campaign.py --executions 10000 [--save DIR]

Progress goes to standard error; the totals (modules, executions by thread count, how many
ran a plan that splits work, differing runs) to standard output. On a differing run the
module is printed (and written to DIR with its input seed) and the exit status is 1.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from compiler.api import KernelStep, load_module, load_program, walk_steps
from harness.contention import Contender, Tally, busy_cores, cores, thread_counts
from harness.fuzzing import fuzz_settings, report_failure
from harness.program_generator import LARGE, inputs, programs
from harness.targets import DEFAULT, config


def _splits(contender: Contender) -> bool:
    """Whether the pinned plan shares some step's work among workers."""
    return any(s.extent >= 2 * max(s.grain, 1) for s in walk_steps(contender.pinned.plan.steps) if isinstance(s, KernelStep))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=10000, help="multi-threaded runs to make in all (default 10000)")
    parser.add_argument("--rounds", type=int, default=4, help="rounds per module: each a run of both builds per thread count (default 4)")
    parser.add_argument("--threads", help="comma-separated thread counts (default: 2, 3, 4, 8, cores + 1, 2 x cores)")
    parser.add_argument("--target", default=DEFAULT, help=f"the target CPU to run (default {DEFAULT})")
    parser.add_argument("--save", type=Path, help="directory for a module that differed")
    parser.add_argument("--derandomize", action="store_true", help="the same modules every time")
    args = parser.parse_args(argv)
    threads = tuple(int(t) for t in args.threads.split(",")) if args.threads else thread_counts()
    if args.executions < 1 or args.rounds < 1 or min(threads) < 2:
        parser.error("--executions and --rounds must be at least 1, and every thread count at least 2")
    per_module = 2 * args.rounds * len(threads)
    modules = math.ceil(args.executions / per_module)
    target = config(args.target)
    tally = Tally()
    counts = {"modules": 0, "splitting": 0, "seed": 1}
    failing: list[tuple[str, int]] = []
    started = time.monotonic()

    @fuzz_settings(modules, args.derandomize)
    @given(programs(sizes=LARGE, every_sink=True), st.integers(0, 2**32 - 1))
    def campaign(text: str, seed: int) -> None:
        module = load_module(text)
        arrays = inputs([(p.array_shape.dtype.name, p.array_shape.dims) for p in module.entry.parameters], seed)
        contender = Contender.of("fuzz", load_program(text), target, arrays)
        before = len(tally.differences)
        runs_before = tally.total
        for _ in range(args.rounds):
            contender.round(threads, counts["seed"], tally)
            counts["seed"] += len(threads)
        counts["modules"] += 1
        counts["splitting"] += (tally.total - runs_before) if _splits(contender) else 0
        if len(tally.differences) > before:
            failing.append((text, seed))
            raise AssertionError(f"{len(tally.differences) - before} runs differ: {tally.differences[before]}")
        if counts["modules"] % 20 == 0:
            rate = tally.total / (time.monotonic() - started)
            print(f"{counts['modules']}/{modules} modules, {tally.total} executions, none differ ({rate:.0f} executions/s)", file=sys.stderr, flush=True)

    with busy_cores() as busy:
        print(f"{busy} busy processes on {cores()} cores; threads {', '.join(map(str, threads))}; target {target.cpu}", file=sys.stderr, flush=True)
        try:
            campaign()
        except Exception as exc:
            text, seed = failing[-1] if failing else ("", 0)
            report_failure(exc, text, seed, args.save, "contention")
            return 1
    elapsed = time.monotonic() - started
    by_threads = ", ".join(f"{count} threads: {tally.runs.get(count, 0)}" for count in threads)
    print(
        f"{counts['modules']} modules, {tally.total} multi-threaded executions ({by_threads}), half on the perturbed build; "
        f"{counts['splitting']} of them of modules whose pinned plan splits work; {len(tally.differences)} differ from 1 thread ({elapsed:.0f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
