"""Gas per job lifecycle on the in-process py-evm chain: post, k claims, k commits, k
reveals and finalize (unanimous and undisputed, so no slash), for k = 1 and 3 by default.
The k = 1 job is the optimistic one of docs/disputes.md: one execution, final once its
challenge window passed unchallenged; its transactions are listed one by one.

    python bench/gas.py [--k 1 3 5] [--json OUT.json]

Gas is deterministic for a given compiler build and chain state, so these numbers are exact
for the committed artifacts (first-time storage writes included: each lifecycle uses fresh
nodes and a fresh job). Waiting out the challenge window costs time, not gas.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Run from a checkout without installing: the repository root holds the `node` package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from web3 import EthereumTesterProvider, Web3  # noqa: E402

from node.chain import ChainClient, deploy  # noqa: E402
from node.chain.contracts import Deployment  # noqa: E402

ETHER = 10**18
GRAPH_ROOT = b"\x47" * 32  # the market stores the graph commitment unchecked
TRACE_LEAVES = 4
OP_TRACE_ROOT = b"\x0e" * 32
CHALLENGE_WINDOW = 60


@dataclass
class Lifecycle:
    """Gas used by each step of one job, and the total."""

    k: int
    post: int
    claims: int
    commits: int
    reveals: int
    finalize: int
    total: int
    withdraw_one: int  # one winner pulling its reward (not part of the lifecycle total)
    # Every transaction of the lifecycle in order, (function, gas): they add up to `total`.
    transactions: list[tuple[str, int]] = field(default_factory=list)


def fresh_deployment() -> tuple[ChainClient, Deployment, list[str]]:
    """A new py-evm chain with the four contracts deployed and wired (the default game
    terms), and its accounts."""
    w3 = Web3(EthereumTesterProvider())
    client = ChainClient(w3)
    accounts = client.accounts()
    d = deploy(
        client,
        accounts[0],
        min_stake_wei=ETHER,
        unbonding_delay_s=3600,
        slash_amount_wei=ETHER // 10,
    )
    return client, d, accounts


def measure(k: int) -> Lifecycle:
    """Run one unanimous, unchallenged job with redundancy k on a fresh chain; return its gas."""
    client, d, accounts = fresh_deployment()
    nodes = accounts[1 : 1 + k]
    submitter = accounts[-1]
    for i, node in enumerate(nodes):
        d.registry.register(node, bytes([i + 1]) * 32, f"http://node{i}", 2 * ETHER)
    now = client.timestamp()
    before = client.block_number()
    job = d.market.post_job(
        submitter,
        b"\x01" * 32,
        b"\x02" * 32,
        k,
        now + 100,
        now + 200,
        ETHER,
        graph_root=GRAPH_ROOT,
        trace_leaves=TRACE_LEAVES,
        challenge_window=CHALLENGE_WINDOW,
    )
    post = _gas_of_block_range(client, before + 1)
    txs: list[tuple[str, int]] = [("postJob", post)]
    digest = b"\xaa" * 32

    def step(name: str, gas: int) -> int:
        txs.append((name, gas))
        return gas

    claims = sum(step("claimSlot", d.market.claim_slot(n, job).gas_used) for n in nodes)
    commits = sum(
        step("commit", d.market.commit_result(n, job, digest, OP_TRACE_ROOT).gas_used)
        for n in nodes
    )
    reveals = sum(
        step("reveal", d.market.reveal(n, job, digest, b"\x03" * 32, OP_TRACE_ROOT).gas_used)
        for n in nodes
    )
    # Nobody challenges: finalize once the window after the k-th reveal is over.
    client.advance_time(d.market.challenge_deadline(job) - client.timestamp())
    finalize = step("finalize", d.market.finalize(submitter, job).gas_used)
    withdraw_one = d.market.withdraw(nodes[0]).gas_used
    total = post + claims + commits + reveals + finalize
    return Lifecycle(k, post, claims, commits, reveals, finalize, total, withdraw_one, txs)


def _gas_of_block_range(client: ChainClient, first: int) -> int:
    # post_job returns the job id, not the receipt: read the gas from the mined block.
    total = 0
    for number in range(first, client.block_number() + 1):
        total += int(client.w3.eth.get_block(number)["gasUsed"])
    return total


def print_lifecycles(results: list[Lifecycle]) -> None:
    """The table of gas per lifecycle step, and the optimistic job's transactions."""
    header = f"{'k':>2} {'post':>8} {'claims':>8} {'commits':>8} {'reveals':>8} {'finalize':>9} {'total':>9} {'per slot':>9}"
    print(header)
    for r in results:
        per_slot = (r.claims + r.commits + r.reveals) // r.k  # claim + commit + reveal
        print(
            f"{r.k:>2} {r.post:>8} {r.claims:>8} {r.commits:>8} {r.reveals:>8} {r.finalize:>9} {r.total:>9} {per_slot:>9}"
        )
    print(f"(withdraw of one reward: {results[0].withdraw_one} gas)")
    optimistic = next((r for r in results if r.k == 1), None)
    if optimistic is not None:
        steps = ", ".join(f"{name} {gas}" for name, gas in optimistic.transactions)
        print(
            f"optimistic job (k = 1, undisputed): {len(optimistic.transactions)} transactions, "
            f"{optimistic.total} gas: {steps}"
        )


# -- disputes ---------------------------------------------------------------------------
# The figures of a challenged job (challenge, bisection moves, the leaf, the referee, the
# settled finalize) belong here: a function of their own, on fresh_deployment() or the
# dispute harness (harness/dispute_game.py), printed by main() after the lifecycles.


def main(argv: list[str] | None = None) -> int:
    """Print a table of gas per lifecycle step; optionally write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    results = [measure(k) for k in args.k]
    print_lifecycles(results)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
