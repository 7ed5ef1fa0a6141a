"""A long campaign of the market state machine (tests/contracts/test_stateful.py): random
register/stake/post/claim/commit/reveal/challenge/timeout/finalize/withdraw sequences by
several accounts on py-evm against the Python model (harness/market.py), every invariant
checked after every action. `make test`
runs a derandomized sample of 4 sequences; this runs as many as asked, from fresh random
seeds unless --derandomize.

  .venv/bin/python tools/market_campaign.py --examples 200 --steps 50
"""

from __future__ import annotations

import argparse
import sys
import time

from hypothesis.stateful import run_state_machine_as_test

from harness.market import MarketMachine, campaign_settings, deployed_chain


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100, help="action sequences to run (default 100)")
    parser.add_argument("--steps", type=int, default=50, help="most actions per sequence (default 50)")
    parser.add_argument("--derandomize", action="store_true", help="the fixed sequences of the test, extended")
    args = parser.parse_args(argv)
    if args.examples < 1 or args.steps < 1:
        parser.error("--examples and --steps must be at least 1")
    # The chain is deployed before the run: deploying changes the recursion limit, which
    # hypothesis would warn about after every sequence.
    deployed_chain()
    started = time.monotonic()
    # A failure raises with hypothesis's minimized sequence of actions printed.
    run_state_machine_as_test(MarketMachine, settings=campaign_settings(args.examples, args.steps, args.derandomize))
    print(f"{args.examples} sequences of up to {args.steps} actions: every invariant held ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
