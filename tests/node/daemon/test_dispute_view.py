"""A chain job's disputes as a node shows them (py-evm chain, the real market, game and
committee): the chain job API answer lists each dispute with its stage, bisection moves, the
instruction reached (named from the node's own signed trace of the job, the name of the
job's graph record there), who moves next and by when, and once settled the verdict and the
winner (by timeout when so); the chain job page shows the same in its Disputes section, and
`vxla job N` one line per dispute.

The node here is the defender: it executed the job for real (compiled, ran, signed its
trace) and holds its record and trace as the daemon's executor stores them; three other
registered nodes challenge it: one lies from an instruction on and loses before the
committee, one claims only the result differs and then stops answering (timed out), one is
still bisecting.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import uvicorn
from fastapi.testclient import TestClient

from attest import key_id, sign_statement
from attest.digests import tensor_digest
from attest.keys import generate_private_key
from compiler.api import UNCOVERED
from compiler.config import load_config
from compiler.driver import compile_program, graph_commitment
from compiler.hlo.commitment import GraphCommitment
from compiler.program import load_program
from harness.dispute_game import GameEnv, Party, diverging, game_env
from harness.fixture_data import Fixture
from node.chain import Stage
from node.chain.disputes import Execution, GraphLeaves, play_move
from node.chain.state import ChainState
from node.daemon.api import ChainDisputes, create_app
from node.daemon.chain_executor import BlobFetcher, ChainExecutor, ExecutedChainJob
from node.daemon.chain_role import ChainRole
from node.daemon.config import Limits
from node.daemon.divergence import DivergenceMonitor
from node.daemon.store import JobStore
from node.protocol import result_digest_of
from node.tracing.statement import build_statement
from tests.node.helpers import post_fixture_job

FIXTURE = Fixture("integer_arith")
LIES_FROM = 5  # the first instruction the lying challenger's execution differs at


@dataclass
class Disputed:
    """A job the node executed and defends, with three disputes on it, and the node's API."""

    g: GameEnv
    job_id: int
    graph: GraphCommitment
    node: str
    challengers: list[str]
    disputes: list[int]
    role: ChainRole
    store: JobStore
    api: TestClient


@pytest.fixture(scope="module")
def disputed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Disputed]:
    environment = game_env()
    g = next(environment)
    tmp = tmp_path_factory.mktemp("dispute-view")
    node, challengers = g.nodes[0], g.nodes[1:4]
    key = generate_private_key()
    store = JobStore(tmp / "node")
    state = ChainState(tmp / "chain.sqlite3", chain_id=g.client.chain_id, contract=g.market.address, account=node, start_block=g.d.block)
    executor = ChainExecutor(SimpleNamespace(store=store), BlobFetcher(store, lambda: []), state)  # type: ignore[arg-type]
    monitor = DivergenceMonitor(g.market, g.d.registry, executor, node)
    try:
        # The job, posted with its program's graph commitment as a submitter does.
        config = load_config()
        program = load_program(FIXTURE.module_text)
        inputs = FIXTURE.inputs()
        graph = graph_commitment(program, config, inputs)
        leaves = GraphLeaves(tuple(graph.leaves()), graph.records[-1].leaf())
        job_id, program_digest, input_digests = post_fixture_job(g, store, FIXTURE, graph)

        # The node runs it, signs its trace, stores both as the daemon's executor does, and
        # claims, commits and reveals.
        executable = compile_program(program, config)
        run = executable.run_traced(*inputs)
        statement = build_statement(
            program, executable, inputs, run, job_id=str(job_id), chain_id=g.client.chain_id, contract=g.market.address,
            key_id=key_id(key.public_key()), threads=1, timings_ns={"execute": 0}, op_level=True,
        )  # fmt: skip
        envelope_digest = store.blobs.put(sign_statement(statement, key).to_json().encode())
        op_trace = statement.predicate.deterministic.op_trace
        assert op_trace is not None and len(op_trace.instructions) == graph.trace_leaves
        output_digests = [tensor_digest(o) for o in run.outputs]
        honest = Execution(tuple(bytes.fromhex(i.digest) for i in op_trace.instructions), result_digest_of(output_digests))
        assert honest.op_trace_root.hex() == op_trace.merkle_root
        g.market.claim_slot(node, job_id)
        g.market.commit_result(node, job_id, honest.result, honest.op_trace_root)
        g.market.reveal(node, job_id, honest.result, bytes.fromhex(envelope_digest), honest.op_trace_root)
        record = ExecutedChainJob(
            job_id, g.client.chain_id, g.market.address, program_digest.hex(), input_digests, [], output_digests,
            envelope_digest, honest.result.hex(), honest.op_trace_root.hex(),
        )  # fmt: skip
        state.record_execution(g.market.address, job_id, record.to_dict())
        defender = Party(node, honest)

        # 1. A challenger whose execution differs from instruction LIES_FROM on: the walk ends
        # there, the committee re-executes it and sides with the defender.
        liar = Party(challengers[0], diverging(honest, LIES_FROM))
        lost = g.challenge(job_id, 0, liar)
        g.play(lost, defender, liar, leaves)
        assert g.game.get_dispute(lost).position == LIES_FROM
        g.vote_all(lost, honest.digest_at(LIES_FROM))
        g.resolve(lost)
        # 2. One claiming the same op trace but another result (the result record), who then
        # never opens the leaf: timed out.
        silent = Party(challengers[1], Execution(honest.digests, honest.result[::-1]))
        timed_out = g.challenge(job_id, 0, silent)
        g.travel_to(g.game.get_dispute(timed_out).deadline)
        g.game.timeout(g.submitter, timed_out)
        # 3. One still bisecting: one round made, the defender to move.
        bisecting = Party(challengers[2], diverging(honest, 20, tag="other"))
        still_open = g.challenge(job_id, 0, bisecting)
        for party in (defender, bisecting):
            assert play_move(g.game, party.account, still_open, party.execution, leaves) is not None
        assert g.game.get_dispute(still_open).stage == Stage.BISECT

        role = ChainRole(g.client, g.market, g.d.registry, executor, monitor, node)
        api = TestClient(create_app(store, Limits(), key.public_key(), chain=role))
        yield Disputed(g, job_id, graph, node, challengers, [lost, timed_out, still_open], role, store, api)
    finally:
        monitor.close()
        executor.close()
        state.close()
        store.close()
        next(environment, None)  # the environment's check: no ether created or lost


def test_the_chain_job_answer_lists_each_dispute_with_its_instruction_and_verdict(disputed: Disputed) -> None:
    answer = disputed.api.get(f"/v1/chain/jobs/{disputed.job_id}").json()
    lost, timed_out, still_open = answer["disputes"]
    assert [d["dispute_id"] for d in answer["disputes"]] == disputed.disputes
    assert all(d["job_id"] == disputed.job_id and d["slot"] == 0 and d["defender"] == disputed.node for d in answer["disputes"])
    assert [d["challenger"] for d in answer["disputes"]] == disputed.challengers
    # Settled before the committee: the instruction reached, named as the job's graph names it.
    record = disputed.graph.records[LIES_FROM]
    assert lost["stage"] == "settled" and lost["verdict"] == "defender-right" and lost["winner"] == disputed.node
    assert not lost["by_timeout"] and lost["to_move"] is None and lost["deadline"] == 0
    assert lost["instruction"] == LIES_FROM and not lost["result_leaf"]
    assert (lost["instruction_name"], lost["instruction_opcode"]) == (record.name, record.opcode)
    # Each record names why a contract could not evaluate the instruction step by step.
    assert lost["steps_uncovered"] == UNCOVERED.get(record.opcode)
    assert lost["moves"] >= 2 and lost["moves"] % 2 == 0  # whole rounds: defender, then challenger
    # The result record, and a challenger that stopped answering.
    n = disputed.graph.trace_leaves
    assert timed_out["instruction"] == n and timed_out["result_leaf"] and timed_out["instruction_name"] == "result"
    assert "result record" in timed_out["steps_uncovered"]
    assert timed_out["moves"] == 0 and timed_out["verdict"] == "defender-right" and timed_out["by_timeout"]
    assert timed_out["winner"] == disputed.node
    # Still open: who moves next and by when, on the chain's clock.
    assert still_open["stage"] == "bisect" and still_open["moves"] == 2 and still_open["verdict"] is None
    assert still_open["instruction"] is None and still_open["instruction_name"] is None and still_open["winner"] is None
    assert still_open["to_move"] == disputed.node and still_open["deadline"] > answer["chain_time"]
    assert answer["open_disputes"] == 1 and answer["dispute_count"] == 3


def test_a_node_without_its_trace_of_the_job_names_no_instruction_and_the_index_agrees(disputed: Disputed, tmp_path: Path) -> None:
    """Without the node's signed trace (another store) the instruction is only an index; and
    the disputes found from the logs indexed once (no block read again) are the same."""
    other = JobStore(tmp_path / "other")
    try:
        view = ChainDisputes(disputed.role, other)
        view.REREAD_BLOCKS = 0
        for _ in range(2):  # the second call reads only what the first has not indexed
            first = view.of_job(disputed.job_id)[0][0]
            assert first["instruction"] == LIES_FROM and first["instruction_name"] is None and first["instruction_opcode"] is None
        assert [d["dispute_id"] for d in view.of_job(disputed.job_id)[0]] == disputed.disputes
        assert view.of_job(disputed.job_id + 1) == ([], 0)  # no such job, no dispute
        view.SHOWN = 2  # past its bound, an answer summarizes the newest and counts them all
        shown, opened = view.of_job(disputed.job_id)
        assert [d["dispute_id"] for d in shown] == disputed.disputes[1:] and opened == 3
    finally:
        other.close()


def test_the_chain_job_page_shows_the_disputes(disputed: Disputed) -> None:
    page = disputed.api.get(f"/chain/jobs/{disputed.job_id}")
    assert page.status_code == 200
    text = page.text
    section = text[text.index("<h2>Disputes</h2>") :]
    name = disputed.graph.records[LIES_FROM].name
    assert f"<mark class=disputed>{name}</mark></a> ({disputed.graph.records[LIES_FROM].opcode}), op-trace leaf {LIES_FROM}" in section
    assert f"?highlight={name}'><mark class=disputed>{name}</mark></a>" in section  # a link to the graph viewer at it
    assert "defender-right</span>: the defender won by timeout" in section  # the silent challenger
    assert section.count("defender-right</span>: the defender won") == 2
    assert "<mark class=disputed>result</mark>" in section
    assert f"the defender <code>{disputed.node}</code>, until" in section and "1 round(s)" in section
    for challenger in disputed.challengers:
        assert f"<code>{challenger}</code>" in section
    assert "<script" not in text


def test_vxla_job_prints_one_line_per_dispute(disputed: Disputed, capsys: pytest.CaptureFixture[str]) -> None:
    from node.cli import main

    with serving(disputed.api.app) as url:
        capsys.readouterr()
        assert main(["job", str(disputed.job_id), "--node", url]) == 0
    shown = capsys.readouterr().out
    lines = [line for line in shown.splitlines() if line.startswith("  dispute ")]
    assert len(lines) == 3, shown
    lost, timed_out, still_open = lines
    record = disputed.graph.records[LIES_FROM]
    assert lost.startswith(f"  dispute {disputed.disputes[0]}: {disputed.challengers[0]} challenges {disputed.node} (slot 0), settled, ")
    assert f"at instruction {LIES_FROM} {record.name} ({record.opcode})" in lost
    assert lost.endswith(f"defender-right: the defender {disputed.node} won")
    assert "at the result record" in timed_out and timed_out.endswith(f"defender-right: the defender {disputed.node} won by timeout")
    assert "bisect, 1 bisection round(s) (2 move(s))" in still_open and "the defender moves next (deadline in " in still_open


class serving:  # noqa: N801 - a context manager used as a function
    """The app on a local port (uvicorn in a thread), for the command line to ask."""

    def __init__(self, app: object) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))  # type: ignore[arg-type]
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.socket.getsockname()[1]}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.socket.close()
