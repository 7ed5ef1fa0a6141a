"""A long chaos campaign on a devnet (harness/chaos.py): node processes on anvil take a
batch of chain jobs while nodes are killed and restarted, the RPC endpoint goes away, the
chain is reorganized shallower and deeper than `confirmations` and chain time jumps; then
every job must settle, no honest node be slashed, no transaction be sent twice, and every
node's chain database match the chain. `make test` runs one small seeded campaign.

  .venv/bin/python tools/chaos_devnet.py --nodes 4 --jobs 30 --faults 40 --seed 7

Exit status 0 when every check held, 1 when one did not (the problems are printed), 2 on
bad arguments.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from harness.chaos import ChaosPlan, run_campaign


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4, help="node processes (default 4, at most 8)")
    parser.add_argument("--jobs", type=int, default=30, help="chain jobs posted (default 30)")
    parser.add_argument("--k", type=int, default=3, help="redundancy of each job (default 3)")
    parser.add_argument("--faults", type=int, default=40, help="faults injected one after another (default 40)")
    parser.add_argument("--confirmations", type=int, default=2, help="the nodes' chain.confirmations (default 2)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every random draw (default 1)")
    parser.add_argument("--dir", type=Path, help="where the devnet lives (default: a temporary directory)")
    args = parser.parse_args(argv)
    if not 1 <= args.nodes <= 8 or not 1 <= args.k <= args.nodes or args.jobs < 1 or args.faults < 0 or args.confirmations < 1:
        parser.error("need 1 <= k <= nodes <= 8, jobs >= 1, faults >= 0, confirmations >= 1")
    plan = ChaosPlan(
        nodes=args.nodes, jobs=args.jobs, k=args.k, faults=args.faults, seed=args.seed,
        confirmations=args.confirmations, commit_window_s=600, reveal_window_s=600, jump_budget_s=240,
        settle_timeout_s=900,
    )  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="vxla-chaos-") as scratch:
        directory = args.dir or Path(scratch)
        report = run_campaign(directory, plan, lambda line: print(line, flush=True))
    print(report.summary())
    return 0 if not report.problems else 1


if __name__ == "__main__":
    sys.exit(main())
