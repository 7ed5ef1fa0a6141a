"""Gas and transactions of the dispute game (docs/disputes.md) for jobs of about 10, 1,000
and 10,000 instructions, on the in-process py-evm chain (or anvil with --anvil):

- an undisputed optimistic job (k = 1) against today's undisputed k = 3 job;
- a dispute from challenge to verdict: a faulty k = 1 node, one honest verifier, a committee
  of three, the divergent instruction on the deepest path of the tree and reading three
  earlier instructions;
- the alternative the game did not take, measured: locating the same instruction with one
  non-interactive proof (bench/contracts/NonInteractiveLocate.sol);
- wall time of each, on this chain (the windows a silent party would be waited for are not
  included: every party answers at once).

    python bench/dispute_gas.py [--sizes 10 1000 10000] [--json OUT.json] [--anvil]

Gas is exact for the committed artifacts; sizes only change the depth of the walk and the
proofs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from web3 import EthereumTesterProvider, Web3  # noqa: E402

from attest.commitment import path_moves  # noqa: E402
from harness.dispute_game import (  # noqa: E402
    TERMS,
    GameEnv,
    Party,
    deployed_env,
    diverging,
    honest_execution,
    synthetic_graph,
)
from node.chain.disputes import Execution, GraphLeaves, leaf_opening  # noqa: E402

ETHER = 10**18
SOLC_JS = """
const fs = require('fs'); const path = require('path');
const solc = require(path.join(process.argv[1], 'contracts/node_modules/solc'));
const root = process.argv[1];
const input = {language: 'Solidity',
  sources: {'bench/contracts/NonInteractiveLocate.sol': {content: fs.readFileSync(path.join(root, 'bench/contracts/NonInteractiveLocate.sol'), 'utf8')}},
  settings: {optimizer: {enabled: true, runs: 200}, evmVersion: 'cancun', outputSelection: {'*': {'*': ['abi', 'evm.bytecode.object']}}}};
function findImports(p) { return {contents: fs.readFileSync(path.join(root, p), 'utf8')}; }
const out = JSON.parse(solc.compile(JSON.stringify(input), {import: findImports}));
for (const e of out.errors || []) if (e.severity === 'error') { console.error(e.formattedMessage); process.exit(1); }
const c = out.contracts['bench/contracts/NonInteractiveLocate.sol'].NonInteractiveLocate;
process.stdout.write(JSON.stringify({abi: c.abi, bytecode: c.evm.bytecode.object}));
"""


@dataclass
class Figures:
    """One job size's figures."""

    instructions: int
    walk_moves: int  # bisection moves (each party posts half)
    optimistic_txs: int
    optimistic_gas: int
    k3_txs: int
    k3_gas: int
    dispute_txs: int
    dispute_gas: int
    dispute_gas_by_step: dict[str, int]
    dispute_seconds: float
    non_interactive_gas: int
    non_interactive_proof_bytes: int


def _deepest_leaf_with_operands(graph: GraphLeaves, operands: int = 3) -> int:
    candidates = [i for i, leaf in enumerate(graph.leaves) if (len(leaf) - 32) // 4 == operands]
    return max(candidates, key=lambda i: (path_moves(i, graph.n), -i))


def _lifecycle_gas(g: GameEnv, graph: GraphLeaves, k: int) -> tuple[int, int]:
    """Transactions and gas of one undisputed job with redundancy k, post to finalize."""
    execution = honest_execution(graph.n, 7)
    g.gas.clear()
    now = g.now()
    job = g.market.post_job(
        g.submitter, b"\x01" * 32, b"\x02" * 32, k, now + 1_000, now + 2_000, ETHER,
        graph_root=graph.root, trace_leaves=graph.n, challenge_window=TERMS.min_challenge_window_s,
    )
    post = _gas_of_block(g, g.client.block_number())
    for node in g.nodes[:k]:
        g.record("claim", g.market.claim_slot(node, job))
        g.record("commit", g.market.commit_result(node, job, execution.result, execution.op_trace_root))
    for node in g.nodes[:k]:
        g.record("reveal", g.market.reveal(node, job, execution.result, b"\x03" * 32, execution.op_trace_root))
    g.finalize(job)
    return 1 + 3 * k + 1, post + sum(sum(v) for v in g.gas.values())


def _gas_of_block(g: GameEnv, number: int) -> int:
    block = g.w3.eth.get_block(number)
    return sum(int(g.w3.eth.get_transaction_receipt(t)["gasUsed"]) for t in block["transactions"])


def _non_interactive(g: GameEnv, locate_artifact: dict, graph: GraphLeaves, index: int, defender: Execution, challenger: Execution) -> tuple[int, int]:
    """Gas of NonInteractiveLocate.locate for the same instruction, and its proof bytes."""
    tx = g.client.deploy(g.deployer, bytes.fromhex(locate_artifact["bytecode"]), b"")
    bound = g.w3.eth.contract(address=tx.receipt["contractAddress"], abi=locate_artifact["abi"])
    mine = leaf_opening(challenger, graph, index)

    def side(e: Execution) -> tuple:
        ops = [e.digests[j] for j in _operands(graph.leaf(index))]
        return (e.exec_root, e.digest_at(index), e.proof(index), ops, [e.proof(j) for j in _operands(graph.leaf(index))])

    args = (graph.root, graph.n, index, mine.graph_leaf, mine.graph_proof, side(defender), side(challenger))
    result = g.client.transact(g.nodes[1], bound.functions.locate(*args))
    data = bound.encode_abi("locate", args=args)
    return result.gas_used, len(bytes.fromhex(data.removeprefix("0x")))


def _operands(graph_leaf: bytes) -> list[int]:
    return [int.from_bytes(graph_leaf[i : i + 4], "big") for i in range(32, len(graph_leaf), 4)]


def measure(n: int, w3_factory, locate_artifact: dict) -> Figures:  # noqa: ANN001 - a callable making a Web3
    graph = synthetic_graph(n, seed=n)
    index = _deepest_leaf_with_operands(graph)
    g = deployed_env(w3_factory())
    optimistic_txs, optimistic_gas = _lifecycle_gas(g, graph, 1)
    k3_txs, k3_gas = _lifecycle_gas(g, graph, 3)

    honest = honest_execution(n, 1)
    wrong = diverging(honest, index)
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    job = g.run_job(graph, [faulty])
    g.gas.clear()
    started = time.perf_counter()
    dispute = g.challenge(job, 0, verifier)
    g.play(dispute, faulty, verifier, graph)
    g.vote_all(dispute, honest.digests[index])
    g.resolve(dispute)
    seconds = time.perf_counter() - started
    d = g.game.get_dispute(dispute)
    assert d.position == index and d.winner == verifier.account, (d.position, index)
    by_step = {step: sum(values) for step, values in sorted(g.gas.items())}
    txs = sum(len(values) for values in g.gas.values())
    ni_gas, ni_bytes = _non_interactive(g, locate_artifact, graph, index, wrong, honest)
    return Figures(
        instructions=n,
        walk_moves=d.moves,
        optimistic_txs=optimistic_txs,
        optimistic_gas=optimistic_gas,
        k3_txs=k3_txs,
        k3_gas=k3_gas,
        dispute_txs=txs,
        dispute_gas=sum(by_step.values()),
        dispute_gas_by_step=by_step,
        dispute_seconds=round(seconds, 2),
        non_interactive_gas=ni_gas,
        non_interactive_proof_bytes=ni_bytes,
    )


def compile_locate() -> dict:
    """NonInteractiveLocate compiled with the pinned solc-js of contracts/ (needs `make contracts`' npm ci)."""
    out = subprocess.run(["node", "-e", SOLC_JS, str(ROOT)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1_000, 10_000], help="instructions per job")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--anvil", action="store_true", help="run on anvil (contracts/node_modules) instead of py-evm")
    args = parser.parse_args()
    locate = compile_locate()
    with ExitStack() as stack:
        if args.anvil:
            from harness.anvil import running_anvil

            anvil, _ = stack.enter_context(running_anvil())

            def factory() -> Web3:
                return anvil
        else:

            def factory() -> Web3:
                return Web3(EthereumTesterProvider())

        figures = [measure(n, factory, locate) for n in args.sizes]
    chain = "anvil" if args.anvil else "py-evm"
    print(f"dispute game gas ({chain}; committee of {TERMS.committee_size}; divergence on the deepest path, 3 operands)")
    header = f"{'instructions':>12} {'optimistic k=1':>22} {'k=3 today':>22} {'dispute to verdict':>26} {'moves':>5} {'seconds':>7} {'non-interactive':>16}"
    print(header)
    for f in figures:
        print(
            f"{f.instructions:>12,} {f.optimistic_txs:>4} tx {f.optimistic_gas:>12,} gas "
            f"{f.k3_txs:>4} tx {f.k3_gas:>12,} gas {f.dispute_txs:>4} tx {f.dispute_gas:>16,} gas "
            f"{f.walk_moves:>5} {f.dispute_seconds:>7} {f.non_interactive_gas:>12,} gas"
        )
    for f in figures:
        steps = ", ".join(f"{k} {v:,}" for k, v in f.dispute_gas_by_step.items())
        print(f"  n={f.instructions:,}: {steps}; non-interactive calldata {f.non_interactive_proof_bytes:,} bytes")
    if args.json:
        args.json.write_text(json.dumps([asdict(f) for f in figures], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
