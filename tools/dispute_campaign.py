"""A long campaign of the dispute game on anvil (the pinned build): every lie of
harness/dispute_game.py CASES, on jobs of random size with the divergence at a random
instruction (the result record included), each on a fresh deployment. Every case must end
with the honest side winning, its stake whole and no ether created or lost. `make test` runs
a sample of it (tests/contracts/test_disputes_anvil.py).

  .venv/bin/python tools/dispute_campaign.py --rounds 30 --max-instructions 2000 [--seed N]
"""

from __future__ import annotations

import argparse
import random
import sys
import time

from harness.anvil import running_anvil
from harness.dispute_game import CASES, deployed_env, play_case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=len(CASES) * 3, help="cases to play (default: each lie three times)")
    parser.add_argument("--max-instructions", type=int, default=2_000, help="largest job drawn (default 2000)")
    parser.add_argument("--seed", type=int, default=None, help="draw from this seed (default: a fresh one, printed)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.max_instructions < 1:
        parser.error("--rounds and --max-instructions must be at least 1")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    print(f"seed {seed}", flush=True)
    rng = random.Random(seed)
    started = time.monotonic()
    with running_anvil() as (w3, _):
        for round_ in range(args.rounds):
            case = CASES[round_ % len(CASES)]
            n = rng.randint(1, args.max_instructions)
            diverge_at = rng.randint(0, n)  # n: only the result differs
            g = deployed_env(w3)
            before = g.total()
            outcome = play_case(g, case, n, diverge_at, seed=rng.randrange(2**32))
            assert g.total() == before, f"{case}: ether was created or lost"
            gas = sum(sum(v) for v in g.gas.values())
            print(f"{round_ + 1:>3}/{args.rounds} {case:<26} n={n:<6} diverge at {diverge_at:<6} honest side won; {gas:,} gas", flush=True)
            del outcome
    print(f"{args.rounds} cases: the honest side won every one ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
