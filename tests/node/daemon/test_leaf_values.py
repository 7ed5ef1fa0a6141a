"""A dispute's committee decides one instruction from its operands (docs/disputes.md, "The
committee referee"), with real execution processes on the in-process chain (the real market,
game and committee):

- a party serves the values of the op-trace leaves of a job it executed
  (`GET /v1/chain/jobs/{id}/leaves/{index}` and `.../{buffer}`), each checked against its own
  signed trace, not before the job's commit phase is over, and says why it will not (unknown
  job or index, a value that is not its trace's);
- a member that holds no execution of the job fetches the operands the committee's event
  names from the two parties, checks them against the digests on chain, evaluates the
  instruction alone in an execution process and votes what the whole job's re-execution gives
  (an instruction reading a tuple-valued leaf, and the result record reading several leaves);
- when neither party serves a valid operand (an error status, wrong bytes, an address its
  policy refuses) the member says why in one line and re-executes the whole job instead.

The job is rbg_dropout: 8 op-trace leaves, rng-bit-generator leaves with (state, bits) tuple
values read by later instructions and by the result record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from attest.keys import generate_private_key
from compiler.config import load_config
from compiler.driver import graph_commitment
from compiler.program import load_program
from harness.dispute_game import GameEnv, Party, diverging, game_env
from harness.fixture_data import Fixture
from node.chain import Stage
from node.chain.disputes import Execution, GraphLeaves
from node.chain.state import ChainState
from node.daemon.api import create_app
from node.daemon.chain_executor import BlobFetcher, ChainExecutor, LeafValues, leaf_digest_of
from node.daemon.chain_role import ChainRole
from node.daemon.config import Limits
from node.daemon.disputes import ExecutorKnowledge
from node.daemon.divergence import DivergenceMonitor
from node.daemon.peer_addresses import PeerAddressPolicy
from node.daemon.sandbox import LeafBuffer
from node.daemon.store import JobStore
from node.daemon.worker import WorkerPool
from tests.node.helpers import post_fixture_job, settled

FIXTURE = Fixture("rbg_dropout")
TUPLE_READER = 3  # a fusion reading leaf 2, an rng-bit-generator's (state, bits) tuple


@dataclass
class Env:
    g: GameEnv
    tmp: Path
    store: JobStore
    pool: WorkerPool
    executor: ChainExecutor  # the defender's, node 0
    job_id: int
    honest: Execution
    graph: GraphLeaves
    api: TestClient
    before_commit: httpx.Response  # a leaf asked for while the commit phase was open
    modes: dict[str, str]  # how each party's endpoint answers members: serve, 404, wrong

    def handler(self, request: httpx.Request) -> httpx.Response:
        """The parties' endpoints as members reach them (node{i}.example is node i)."""
        mode = self.modes.get(request.url.host, "404")
        if mode == "404":
            return httpx.Response(404, json={"detail": "this node has nothing of the kind"})
        answer = self.api.get(request.url.raw_path.decode())
        content = answer.content
        if mode == "wrong" and request.url.path.count("/") == 7:  # a buffer: one bit flipped
            content = content[:-1] + bytes([content[-1] ^ 1])
        return httpx.Response(answer.status_code, content=content, headers={"content-type": answer.headers["content-type"]})


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    environment = game_env()
    g = next(environment)
    tmp = tmp_path_factory.mktemp("leaf-values")
    key = generate_private_key()
    store = JobStore(tmp / "node")
    pool = WorkerPool(store, key, Limits(), workers=1)
    node = g.nodes[0]
    state = ChainState(tmp / "node0.sqlite3", chain_id=g.client.chain_id, contract=g.market.address, account=node, start_block=g.d.block)
    executor = ChainExecutor(pool, BlobFetcher(store, lambda: []), state)
    monitor = DivergenceMonitor(g.market, g.d.registry, executor, node)
    try:
        program = load_program(FIXTURE.module_text)
        commitment = graph_commitment(program, load_config(), FIXTURE.inputs())
        graph = GraphLeaves(tuple(commitment.leaves()), commitment.records[-1].leaf())
        job_id, _, _ = post_fixture_job(g, store, FIXTURE, commitment)
        g.market.claim_slot(node, job_id)
        knowledge = ExecutorKnowledge(executor, g.market, g.client.chain_id, account=node)
        outcome = settled(lambda: executor.execute(knowledge.chain_job(g.market.get_job(job_id), job_id)))
        honest = knowledge.execution(job_id)
        assert honest is not None and honest.op_trace_root == outcome.op_trace_root and len(honest.digests) == commitment.trace_leaves

        role = ChainRole(g.client, g.market, g.d.registry, executor, monitor, node)
        api = TestClient(create_app(store, Limits(), key.public_key(), pool=pool, chain=role))
        before_commit = api.get(f"/v1/chain/jobs/{job_id}/leaves/0")
        g.market.commit_result(node, job_id, outcome.result_digest, outcome.op_trace_root)
        g.market.reveal(node, job_id, outcome.result_digest, outcome.envelope_digest, outcome.op_trace_root)
        yield Env(g, tmp, store, pool, executor, job_id, honest, graph, api, before_commit, {})
    finally:
        monitor.close()
        executor.close()
        pool.stop(timeout=1)
        state.close()
        store.close()
        next(environment, None)


def _dispute(env: Env, challenger: Party) -> int:
    """`challenger` disputes the node's slot; both play until the committee is drawn."""
    g = env.g
    dispute = g.challenge(env.job_id, 0, challenger)
    g.play(dispute, Party(g.nodes[0], env.honest), challenger, env.graph)
    assert g.game.get_dispute(dispute).stage == Stage.REFEREE
    return dispute


def _member(env: Env, dispute: int, name: str, policy: PeerAddressPolicy | None = None) -> ExecutorKnowledge:
    """A drawn member of `dispute` that holds no execution of the job (a chain database of
    its own; the node's store, pool and execution processes, which hold nothing of its)."""
    g = env.g
    member = g.committee.get_panel(dispute).members[0]
    state = ChainState(env.tmp / f"{name}.sqlite3", chain_id=g.client.chain_id, contract=g.market.address, account=member, start_block=g.d.block)
    http = httpx.Client(transport=httpx.MockTransport(env.handler))
    fetcher = BlobFetcher(env.store, lambda: [], http=http, policy=policy or PeerAddressPolicy(allow_private=True))
    return ExecutorKnowledge(ChainExecutor(env.pool, fetcher, state), g.market, g.client.chain_id, account=member)


def _vote(env: Env, knowledge: ExecutorKnowledge, index: int) -> bytes:
    job = env.g.market.get_job(env.job_id)
    return settled(lambda: knowledge.vote(job, env.job_id, index))


def test_a_party_serves_its_leaf_values_checked_against_its_trace(env: Env) -> None:
    assert env.before_commit.status_code == 409 and "commit phase open" in env.before_commit.json()["detail"]
    base = f"/v1/chain/jobs/{env.job_id}/leaves"
    n = len(env.honest.digests)
    runs = env.pool.metrics.executions_started._value.get()
    for index in range(n):
        # The first asks for every leaf at once (`also`): one run of the job serves them all.
        answer = env.api.get(f"{base}/{index}", params={"also": ",".join(map(str, range(n)))} if index == 0 else None)
        assert answer.status_code == 200, answer.text
        described = answer.json()
        assert described["index"] == index and described["digest"] == env.honest.digests[index].hex()
        buffers = []
        for k, buffer in enumerate(described["buffers"]):
            data = env.api.get(f"{base}/{index}/{k}")
            assert data.status_code == 200 and len(data.content) == buffer["bytes"]
            buffers.append(LeafBuffer(buffer["dtype"], tuple(buffer["shape"]), data.content))
        assert leaf_digest_of(buffers) == env.honest.digests[index].hex()
        if index == 2:
            assert len(buffers) == 2  # the rng-bit-generator's (state, bits)
    assert env.pool.metrics.executions_started._value.get() == runs + 1
    # Unknown: the result record, a leaf past the trace, a buffer the leaf has not, a job not run here.
    for path, status, said in (
        (f"{base}/{n}", 404, "the result record"),
        (f"{base}/99", 404, "no op-trace leaf 99"),
        (f"{base}/0/5", 404, "has 1 buffer(s)"),
        (f"/v1/chain/jobs/{env.job_id + 1}/leaves/0", 404, "not executed by this node"),
        (f"{base}/x", 400, "not a number"),
        (f"{base}/0?also=1,a", 400, "also"),
    ):
        answer = env.api.get(path)
        assert answer.status_code == status and said in answer.json()["detail"], (path, answer.text)


def test_a_value_that_is_not_the_trace_s_is_refused(env: Env) -> None:
    """A run again that gives another value than the signed trace holds (here: the trace as
    the node reads it changed) is not served."""
    record = env.executor.record(env.g.market.address, env.job_id)
    assert record is not None
    saved = env.executor.leaves
    try:
        env.executor.leaves = LeafValues(env.executor)
        digests = list(env.honest.digests)
        digests[4] = bytes(32)
        env.executor.leaves._traces.put(record.envelope_digest, tuple(d.hex() for d in digests))
        answer = env.api.get(f"/v1/chain/jobs/{env.job_id}/leaves/4")
        assert answer.status_code == 500 and "its signed trace holds" in answer.json()["detail"]
    finally:
        env.executor.leaves = saved


def test_a_member_evaluates_the_instruction_alone_from_the_parties_values(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    env.modes.update({"node0.example": "serve", "node1.example": "404", "node2.example": "404"})
    caplog.set_level(logging.INFO, logger="vxla.node.disputes")
    # An instruction reading a tuple-valued leaf: the challenger (node 1) serves nothing, the defender does.
    dispute = _dispute(env, Party(env.g.nodes[1], diverging(env.honest, TUPLE_READER)))
    member = _member(env, dispute, "member-a")
    try:
        assert _vote(env, member, TUPLE_READER) == env.honest.digest_at(TUPLE_READER)
        assert f"dispute {dispute}: instruction {TUPLE_READER} of job {env.job_id} evaluated alone from 1 operand value(s)" in caplog.text
        assert member.executor.record(env.g.market.address, env.job_id) is None  # no run of the whole job
    finally:
        member.executor.close()
    # The result record, reading three leaves (two of them tuples); only the challenger (node 2) serves.
    env.modes.update({"node0.example": "404", "node2.example": "serve"})
    n = len(env.honest.digests)
    dispute = _dispute(env, Party(env.g.nodes[2], Execution(env.honest.digests, env.honest.result[::-1])))
    assert env.g.game.get_dispute(dispute).position == n
    member = _member(env, dispute, "member-b")
    try:
        assert _vote(env, member, n) == env.honest.result
        assert f"instruction {n} of job {env.job_id} evaluated alone from 3 operand value(s)" in caplog.text
        assert member.executor.record(env.g.market.address, env.job_id) is None
    finally:
        member.executor.close()


def test_a_member_whom_no_party_serves_says_why_and_re_executes_the_job(env: Env, caplog: pytest.LogCaptureFixture) -> None:
    # The defender (node 0) serves wrong bytes; the challenger (node 3) is at an address the policy refuses.
    env.modes.update({"node0.example": "wrong", "node3.example": "serve"})
    dispute = _dispute(env, Party(env.g.nodes[3], diverging(env.honest, TUPLE_READER, tag="other")))
    policy = PeerAddressPolicy(resolver=lambda host, port: ["10.0.0.3" if host == "node3.example" else "93.184.216.34"])
    member = _member(env, dispute, "member-c", policy)
    caplog.set_level(logging.INFO, logger="vxla.node.disputes")
    try:
        assert _vote(env, member, TUPLE_READER) == env.honest.digest_at(TUPLE_READER)
        [line] = [r.getMessage() for r in caplog.records if "no party served" in r.getMessage()]
        # The dispute is named (with dispute 1 when the member sits on both: the same
        # instruction from the same operands, whose parties are asked too).
        assert line.startswith((f"dispute {dispute}: ", f"disputes {dispute}, 1: ")), line
        assert f"operand 2 (digest {env.honest.digests[2].hex()}) of instruction {TUPLE_READER} of job {env.job_id}" in line
        assert "address refused" in line and "10.0.0.3 is a private address" in line
        assert "digest mismatch" in line and "re-executing the whole job" in line
        # The whole job ran: the member now holds its own execution, the same as the node's.
        assert member.execution(env.job_id) == env.honest
    finally:
        member.executor.close()
