"""A fuzz campaign against a node's HTTP API, from its own OpenAPI schema (schemathesis): a
real `vxla node run` process requiring tokens gets requests drawn from every operation,
valid and invalid, with its token and without, and hostile bodies; no answer may be a
server error, the node may not die, a refused request may not store a byte, and the node's
memory must be back within 10% of what it was after the warm-up (harness/api_fuzz.py says
how). `make test` runs a short derandomized sample (tests/node/daemon/test_api_fuzz.py).

    .venv/bin/python tools/api_fuzz.py --requests 5000 [--seed N]

The totals go to standard output; the exit status is 1 on any server error, crash, store
change by a refused request, or memory grown by more than 10%.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from harness.api_fuzz import FuzzedNode, campaign

MEMORY_GROWTH = 0.10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5000, help="requests to draw (default 5000)")
    parser.add_argument("--seed", type=int, help="hypothesis seed (default: random; printed)")
    args = parser.parse_args(argv)
    if args.requests < 1:
        parser.error("--requests must be at least 1")
    seed = args.seed if args.seed is not None else int(time.time())
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vxla-api-fuzz-") as directory:
        node = FuzzedNode(Path(directory) / "node")
        print(f"node {node.url}, seed {seed}, {args.requests} requests", file=sys.stderr, flush=True)
        try:
            tally = campaign(node, args.requests, derandomize=False, seed=seed)
        finally:
            node.stop()
    print(f"{tally.summary()} ({time.monotonic() - started:.0f} s)")
    for problem in [*tally.server_errors, *tally.stored_by_refusals][:20]:
        print(f"  {problem}")
    bad = tally.server_errors or tally.stored_by_refusals or tally.deaths or tally.rss_change > MEMORY_GROWTH
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
