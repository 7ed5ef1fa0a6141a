"""A campaign of the step referee (contracts/src/StepReferee.sol) on anvil: disputes about
real instructions of the fixtures, each settled by the contract evaluating one scalar step.
Every case draws a fixture, one of its op-trace leaves that has an element program, an output
element, a liar (the defender or the challenger), the step it lies at (any step of the
program: an operation, a load, a table lookup, a constant, the element index, the result) and
whether it then stops answering. The honest side must win every case, by the contract alone
(no committee), with no ether created or lost. tests/contracts/test_step_referee.py runs a
sample on py-evm in `make test`.

  .venv/bin/python tools/step_campaign.py --cases 40 [--seed N] [--fixtures transformer_block ...]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.api import trace_leaves  # noqa: E402
from harness.anvil import running_anvil  # noqa: E402
from harness.step_referee import dispute_with_lie, fixture_job, step_env  # noqa: E402
from node.chain import Stage, Verdict  # noqa: E402

FIXTURES = (
    "transformer_block",
    "mlp_train_step",
    "cnn_maxpool_train_step",
    "remat_transformer_train_step",
    "dropout_train_step",
    "f16_bf16",
    "f64_math",
    "mlp_softmax",
    "bf16_mlp",
)
NO_PROGRAM = "00" * 32


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=30)
    parser.add_argument(
        "--seed", type=int, default=None, help="draw from this seed (default: a fresh one, printed)"
    )
    parser.add_argument("--fixtures", nargs="*", default=list(FIXTURES))
    args = parser.parse_args(argv)
    if args.cases < 1:
        parser.error("--cases must be at least 1")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}", flush=True)
    rng = random.Random(seed)
    jobs = {name: fixture_job(name) for name in args.fixtures}
    started = time.monotonic()
    failures = 0
    kinds: dict[str, int] = {}
    with running_anvil() as (w3, _):
        for case in range(args.cases):
            name = rng.choice(sorted(jobs))
            job = jobs[name]
            covered = [i for i, r in enumerate(job.graph.records[:-1]) if r.program != NO_PROGRAM]
            index = rng.choice(covered)
            leaf = trace_leaves(job.module)[index]
            element = rng.randrange(int(np.prod(leaf.shape.dims, dtype=np.int64)))  # type: ignore[union-attr]
            liar = rng.choice(("defender", "challenger"))
            silent = rng.random() < 0.2
            trace = job.side("0x" + "00" * 20, index).trace(element)
            steps = len(trace.steps)
            step = rng.randrange(steps)
            env = step_env(w3)
            before = env.total()
            dispute, gas = dispute_with_lie(env, job, index, element, liar, step, silent=silent)
            kind = trace.steps[step].kind.value
            kinds[kind] = kinds.get(kind, 0) + 1
            honest_won = dispute.stage == Stage.SETTLED and dispute.verdict == (
                Verdict.DEFENDER_WRONG if liar == "defender" else Verdict.DEFENDER_RIGHT
            )
            whole = env.total() == before
            failures += not (honest_won and whole)
            total_gas = sum(v for k, v in gas.items() if not k.endswith("moves"))
            moves = sum(v for k, v in gas.items() if k.endswith("moves"))
            print(
                f"{case + 1:>3}/{args.cases} {name:<28} {leaf.opcode:<10} element {element:<6} {steps:>6} steps, "
                f"{liar} lies at {step} ({kind}){' then stops' if silent else ''}: {dispute.verdict.name}, "
                f"{moves} moves, {total_gas:,} gas{'' if honest_won and whole else '  FAILED'}",
                flush=True,
            )
    print(
        f"{args.cases} cases ({', '.join(f'{k} {v}' for k, v in sorted(kinds.items()))}) in {time.monotonic() - started:.0f} s: {failures} failed"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
