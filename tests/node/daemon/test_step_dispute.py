"""A node plays the step referee's case with its real execution processes (node/daemon/
step_disputes.py, sandbox.StepsRequest) on the in-process chain with the StepReferee wired
(its committee the fallback): what it holds of the disputed instruction (the element program,
its output's chunk tree, an element's step values, a load's proof) comes from the reference's
run of the job in an execution process, checked against its own signed trace. Against a
party lying at one step of one tanh element (harness/step_referee.py), the node wins as
defender and as challenger, by the contract's evaluation of the step."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from attest.keys import generate_private_key
from compiler.api import (
    StepKind,
)
from harness.dispute_game import WINDOW, GameEnv, deployed_env
from harness.evm import in_process_web3
from harness.step_referee import StepJob, StepSide, dot_tanh_job, leaf_index
from node.chain import OnChainJob, Stage, StepStage, Verdict, referees
from node.chain.dispute_role import DisputeRole
from node.chain.disputes import Execution, GraphLeaves
from node.chain.state import ChainState
from node.chain.step_play import step_case_summary, step_case_words
from node.daemon.chain_executor import BlobFetcher, ChainExecutor
from node.daemon.config import Limits
from node.daemon.disputes import ExecutorKnowledge
from node.daemon.store import JobStore
from node.daemon.worker import WorkerPool
from node.protocol import chain_digests, inputs_manifest
from node.tensors import npy_bytes
from tests.node.helpers import settled

ELEMENT = 1100  # in the output's second chunk


class Liar:
    """The other party (DisputeKnowledge): a harness holding that lies at one step of ELEMENT,
    and the execution it commits."""

    def __init__(self, execution: Execution, graph: GraphLeaves, side: StepSide) -> None:
        self.lying_execution, self.graph_leaves, self.side = execution, graph, side

    def executed_jobs(self) -> list[int]:
        return [1]

    def execution(self, job_id: int) -> Execution | None:
        return self.lying_execution

    def graph(self, job: OnChainJob, job_id: int) -> GraphLeaves:
        return self.graph_leaves

    def vote(self, job: OnChainJob, job_id: int, index: int) -> bytes:
        raise AssertionError("no committee in these disputes")

    def instruction(self, job: OnChainJob, job_id: int, index: int) -> StepSide:
        return self.side


@dataclass
class Node:
    store: JobStore
    pool: WorkerPool
    tmp: Path


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    tmp = tmp_path_factory.mktemp("step-dispute")
    store = JobStore(tmp / "node")
    pool = WorkerPool(store, generate_private_key(), Limits(), workers=1)
    try:
        yield Node(store, pool, tmp)
    finally:
        pool.stop(timeout=1)
        store.close()


def _play(g: GameEnv, roles: list[DisputeRole], timeout: float = 150.0) -> None:
    give_up = time.monotonic() + timeout
    while not (g.game.dispute_count() and g.game.get_dispute(1).stage == Stage.SETTLED):
        assert time.monotonic() < give_up, "the dispute did not settle"
        for role in roles:
            role.step()
        time.sleep(0.05)


def _setup(node: Node, liar: str):
    """A fresh chain with the step referee, the job's blobs in the node's store, the honest
    node's executor and knowledge, and the liar's holding of the tanh instruction."""
    g = deployed_env(in_process_web3(), step_referee=True)
    committee, step_referee = referees(g.client, g.d.registry)
    job: StepJob = dot_tanh_job(16, 8, 80, seed=5, on_inputs=True)  # committed on its inputs, as nodes do
    commitment = job.graph
    index = leaf_index(job, "tanh")
    honest_account, liar_account = (g.nodes[0], g.nodes[1]) if liar == "challenger" else (g.nodes[1], g.nodes[0])
    trace = job.side(liar_account, index).trace(ELEMENT)
    lie = (ELEMENT, [i for i, s in enumerate(trace.steps) if s.kind is StepKind.OP][30])
    side = job.side(liar_account, index, lie)
    lying = Liar(job.execution({index: side.output_array}), job.leaves(), side)
    module = job.text.encode()
    input_digests = [node.store.blobs.put(npy_bytes(x)) for x in job.inputs]
    node.store.blobs.put(module)
    node.store.blobs.put(inputs_manifest(input_digests))
    state = ChainState(node.tmp / f"{liar}-honest.sqlite3", chain_id=g.client.chain_id, contract=g.market.address, account=honest_account, start_block=g.d.block)
    executor = ChainExecutor(node.pool, BlobFetcher(node.store, lambda: []), state)
    knowledge = ExecutorKnowledge(executor, g.market, g.client.chain_id, account=honest_account)
    program_digest, inputs_digest = chain_digests(module, input_digests)
    return g, committee, step_referee, commitment, index, honest_account, liar_account, lying, executor, knowledge, state, (program_digest, inputs_digest)


def _role(g: GameEnv, tmp: Path, account: str, knowledge, committee, step_referee, state: ChainState | None = None) -> DisputeRole:  # noqa: ANN001
    state = state or ChainState(tmp / f"{account}-{g.d.block}.sqlite3", chain_id=g.client.chain_id, contract=g.market.address, account=account, start_block=g.d.block)
    return DisputeRole(g.client, g.market, g.game, committee, account, knowledge, state, step_referee=step_referee)


def _post(g: GameEnv, commitment, digests: tuple[bytes, bytes]) -> int:  # noqa: ANN001
    now = g.now()
    return g.market.post_job(
        g.submitter, digests[0], digests[1], 1, now + 1_000, now + 2_000, 10**18,
        graph_root=bytes.fromhex(commitment.root), trace_leaves=commitment.trace_leaves, challenge_window=WINDOW,
    )  # fmt: skip


def test_the_node_defends_its_slot_from_its_execution_processes(node: Node) -> None:
    g, committee, step_referee, commitment, index, me, liar, lying, executor, knowledge, state, digests = _setup(node, "challenger")
    try:
        job_id = _post(g, commitment, digests)
        g.market.claim_slot(me, job_id)
        outcome = settled(lambda: executor.execute(knowledge.chain_job(g.market.get_job(job_id), job_id)))
        g.market.commit_result(me, job_id, outcome.result_digest, outcome.op_trace_root)
        g.market.reveal(me, job_id, outcome.result_digest, outcome.envelope_digest, outcome.op_trace_root)
        assert knowledge.execution(job_id) is not None
        defender = _role(g, node.tmp, me, knowledge, committee, step_referee, state)
        challenger = _role(g, node.tmp, liar, lying, committee, step_referee)
        _play(g, [challenger, defender])
        d = g.game.get_dispute(1)
        assert (d.position, d.verdict, d.defender) == (index, Verdict.DEFENDER_RIGHT, me)
        case = step_referee.get_case(1)
        assert case["stage"] == StepStage.DONE and int(case["element"]) == ELEMENT and int(case["chunk"]) == 1
        shown = step_case_summary(step_referee, 1)
        assert shown is not None and (shown["stage"], shown["element"], shown["committee"]) == ("done", ELEMENT, False)
        assert shown["step"] == int(case["position"]) and "evaluated by the contract" in step_case_words(shown)
    finally:
        executor.close()
        state.close()


def test_the_node_challenges_a_lying_slot_and_wins_from_its_execution_processes(node: Node) -> None:
    g, committee, step_referee, commitment, index, me, liar, lying, executor, knowledge, state, digests = _setup(node, "defender")
    try:
        job_id = _post(g, commitment, digests)
        wrong = lying.lying_execution
        g.market.claim_slot(liar, job_id)
        g.market.commit_result(liar, job_id, wrong.result, wrong.op_trace_root)
        g.market.reveal(liar, job_id, wrong.result, b"\x01" * 32, wrong.op_trace_root)
        # The honest node re-executes the job (its verifier role) and holds that execution.
        settled(lambda: executor.execute(knowledge.chain_job(g.market.get_job(job_id), job_id)))
        assert knowledge.executed_jobs() == [job_id]
        challenger = _role(g, node.tmp, me, knowledge, committee, step_referee, state)
        defender = _role(g, node.tmp, liar, lying, committee, step_referee)
        _play(g, [challenger, defender])
        d = g.game.get_dispute(1)
        assert (d.position, d.verdict, d.challenger) == (index, Verdict.DEFENDER_WRONG, me)
        assert not d.by_timeout
        assert step_referee.get_case(1)["stage"] == StepStage.DONE
    finally:
        executor.close()
        state.close()
