"""The node's dispute role (node/chain/dispute_role.py) on the in-process EVM: three roles
(a faulty defender, an honest challenger and a committee member) play a dispute to its end by
themselves, each from its own chain database; restarted mid-dispute, a role carries on and
sends nothing twice; after a reorg drops its move, it sends it again; a role that cannot
answer says why; under the step referee, the two parties play its case to the end."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from compiler.api import (
    StepKind,
)
from harness.dispute_game import (
    GameEnv,
    Party,
    deployed_env,
    diverging,
    game_env,
    honest_execution,
    synthetic_graph,
)
from harness.evm import in_process_web3
from harness.step_referee import dot_tanh_job, leaf_index
from node.chain import OnChainJob, Stage, StepStage, Verdict, referees
from node.chain.dispute_role import DisputeRole
from node.chain.disputes import Execution, GraphLeaves
from node.chain.state import ChainState
from node.chain.step_play import step_case_summary, step_case_words
from node.errors import JobRejected


@dataclass
class Knowledge:
    """What one node knows: its executions by job, the graph, and the digests it votes."""

    executions: dict[int, Execution] = field(default_factory=dict)
    graph_leaves: GraphLeaves | None = None
    honest: Execution | None = None
    refuse: str = ""

    def executed_jobs(self) -> list[int]:
        return sorted(self.executions)

    def execution(self, job_id: int) -> Execution | None:
        if self.refuse:
            raise JobRejected(self.refuse)
        return self.executions.get(job_id)

    def graph(self, job: OnChainJob, job_id: int) -> GraphLeaves:
        assert self.graph_leaves is not None
        return self.graph_leaves

    def vote(self, job: OnChainJob, job_id: int, index: int) -> bytes:
        assert self.honest is not None
        return self.honest.digest_at(index)


@pytest.fixture
def g() -> Iterator[GameEnv]:
    yield from game_env()


def _role(g: GameEnv, account: str, knowledge: Knowledge, tmp_path: Path) -> DisputeRole:
    state = ChainState(tmp_path / f"{account}.sqlite3", chain_id=g.client.chain_id, contract=g.market.address, account=account, start_block=0)
    return DisputeRole(g.client, g.market, g.game, g.committee, account, knowledge, state)


def _setup(g: GameEnv, n: int = 13, diverge_at: int = 6):
    graph = synthetic_graph(n, 5)
    honest = honest_execution(n, 5)
    wrong = diverging(honest, diverge_at)
    faulty, verifier = g.nodes[0], g.nodes[1]
    job = g.run_job(graph, [Party(faulty, wrong)])
    defender = Knowledge({job: wrong}, graph, honest)
    challenger = Knowledge({job: honest}, graph, honest)
    return graph, honest, wrong, job, faulty, verifier, defender, challenger


def _sent(g: GameEnv, start_block: int) -> Counter[tuple[str, bytes]]:
    """(sender, calldata) of every transaction since `start_block`: a repeat is a duplicate."""
    sent: Counter[tuple[str, bytes]] = Counter()
    for number in range(start_block, g.client.block_number() + 1):
        for tx in g.w3.eth.get_block(number, full_transactions=True)["transactions"]:
            sent[(tx["from"], bytes(tx.get("input", tx.get("data", b""))))] += 1
    return sent


def _members(g: GameEnv, tmp_path: Path, honest: Execution, graph: GraphLeaves) -> list[DisputeRole]:
    return [_role(g, node, Knowledge({}, graph, honest), tmp_path) for node in g.nodes[2:]]


def test_roles_play_a_dispute_to_the_end_by_themselves(g: GameEnv, tmp_path: Path) -> None:
    graph, honest, wrong, job, faulty, verifier, dk, ck = _setup(g)
    start = g.client.block_number() + 1
    defender, challenger = _role(g, faulty, dk, tmp_path), _role(g, verifier, ck, tmp_path)
    members = _members(g, tmp_path, honest, graph)
    for _ in range(60):
        for role in (defender, challenger, *members):
            role.step()
        if g.game.dispute_count() and g.game.get_dispute(1).stage == Stage.SETTLED:
            break
    [dispute_id] = range(1, g.game.dispute_count() + 1)
    d = g.game.get_dispute(dispute_id)
    assert d.stage == Stage.SETTLED and d.verdict == Verdict.DEFENDER_WRONG and d.position == 6
    assert d.challenger == verifier and not d.by_timeout
    # The faulty node challenged nobody (its execution is the one revealed), nothing was sent twice.
    assert all(count == 1 for count in _sent(g, start).values())


def test_a_role_restarted_mid_dispute_carries_on_and_sends_nothing_twice(g: GameEnv, tmp_path: Path) -> None:
    graph, honest, wrong, job, faulty, verifier, dk, ck = _setup(g, n=40, diverge_at=25)
    start = g.client.block_number() + 1
    defender, challenger = _role(g, faulty, dk, tmp_path), _role(g, verifier, ck, tmp_path)
    challenger.step()  # the challenge
    defender.step()  # its first move
    challenger.step()
    # Both stop and start again from their databases: the moves on record are not repeated.
    defender.state.close()
    challenger.state.close()
    defender, challenger = _role(g, faulty, dk, tmp_path), _role(g, verifier, ck, tmp_path)
    members = _members(g, tmp_path, honest, graph)
    for _ in range(80):
        for role in (challenger, defender, *members):
            role.step()
        if g.game.get_dispute(1).stage == Stage.SETTLED:
            break
    assert g.game.get_dispute(1).winner == verifier
    assert all(count == 1 for count in _sent(g, start).values())


def test_a_move_a_reorg_dropped_is_sent_again(g: GameEnv, tmp_path: Path) -> None:
    graph, honest, wrong, job, faulty, verifier, dk, ck = _setup(g)
    defender, challenger = _role(g, faulty, dk, tmp_path), _role(g, verifier, ck, tmp_path)
    challenger.step()
    tester = g.w3.provider.ethereum_tester
    snapshot = tester.take_snapshot()
    fees = dict(g.client.fees_paid)
    [action] = defender.step()  # the defender's first bisection move, recorded
    assert action.key == "move:1:bisect:0" and g.game.get_dispute(1).moves == 1
    tester.revert_to_snapshot(snapshot)  # a reorg: the move is gone from the chain
    tester.mine_blocks(1)
    g.client.fees_paid.clear()
    g.client.fees_paid.update(fees)  # its fee went with it
    assert g.game.get_dispute(1).moves == 0
    [again] = defender.step()
    assert again.key == "move:1:bisect:0"  # sent again (the same transaction: same nonce, same call)
    assert g.game.get_dispute(1).moves == 1
    assert defender.state.dispute_action("move:1:bisect:0") is not None


def test_a_role_that_cannot_answer_says_why_and_loses_only_its_turn(g: GameEnv, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    graph, honest, wrong, job, faulty, verifier, dk, ck = _setup(g)
    challenger = _role(g, verifier, ck, tmp_path)
    challenger.step()
    dk.refuse = "the signed trace of chain job 1 is no longer stored"
    defender = _role(g, faulty, dk, tmp_path)
    with caplog.at_level(logging.WARNING, logger="node.chain.dispute_role"):
        assert defender.step() == []
        assert defender.step() == []
    said = [r.getMessage() for r in caplog.records if "no longer stored" in r.getMessage()]
    assert len(said) == 1  # once, not every round
    g.travel_to(g.game.get_dispute(1).deadline)
    [action] = challenger.step()
    assert action.key == "timeout:1" and g.game.get_dispute(1).winner == verifier


@dataclass
class StepKnowledge(Knowledge):
    """Knowledge of a real job's instruction under the step referee (harness StepSide)."""

    sides: dict[int, object] = field(default_factory=dict)

    def instruction(self, job: OnChainJob, job_id: int, index: int):  # noqa: ANN201
        return self.sides[index]


def test_roles_play_the_step_referees_case_to_the_end_by_themselves(tmp_path: Path) -> None:
    """Under the step referee, the roles play the whole case themselves, from what each holds
    of the instruction: the chunk bisection of a 5 KiB output, the revealed chunk, the element,
    the steps and the evaluation. The liar (lying at one step of a tanh element of the second
    chunk) loses, the honest side wins, nothing is sent twice. (A lying challenger against an
    honest node: tests/node/daemon/test_step_dispute.py.)"""
    liar = "defender"
    g = deployed_env(in_process_web3(), step_referee=True)
    committee, step_referee = referees(g.client, g.d.registry)
    assert step_referee is not None and committee.address == g.committee.address
    job = dot_tanh_job(16, 8, 80, seed=5)
    index = leaf_index(job, "tanh")
    element = 1100  # byte 4,400: the second chunk
    faulty, verifier = g.nodes[0], g.nodes[1]
    trace = job.side(faulty, index).trace(element)
    lie = (element, [i for i, s in enumerate(trace.steps) if s.kind is StepKind.OP][30])
    defender_side = job.side(faulty, index, lie if liar == "defender" else None)
    challenger_side = job.side(verifier, index, lie if liar == "challenger" else None)
    defender_exec = job.execution({index: defender_side.output_array} if liar == "defender" else None)
    challenger_exec = job.execution({index: challenger_side.output_array} if liar == "challenger" else None)
    graph = job.leaves()
    job_id = g.run_job(graph, [Party(faulty, defender_exec)])
    start = g.client.block_number() + 1
    dk = StepKnowledge({job_id: defender_exec}, graph, sides={index: defender_side})
    ck = StepKnowledge({job_id: challenger_exec}, graph, sides={index: challenger_side})

    def role(account: str, knowledge: Knowledge) -> DisputeRole:
        state = ChainState(tmp_path / f"{account}.sqlite3", chain_id=g.client.chain_id, contract=g.market.address, account=account, start_block=0)
        return DisputeRole(g.client, g.market, g.game, committee, account, knowledge, state, step_referee=step_referee)

    defender, challenger = role(faulty, dk), role(verifier, ck)
    for _ in range(80):
        defender.step()
        challenger.step()
        if g.game.dispute_count() and g.game.get_dispute(1).stage == Stage.SETTLED:
            break
    d = g.game.get_dispute(1)
    assert d.stage == Stage.SETTLED and d.position == index
    assert d.verdict == (Verdict.DEFENDER_WRONG if liar == "defender" else Verdict.DEFENDER_RIGHT)
    case = step_referee.get_case(1)
    assert case["stage"] == StepStage.DONE and case["chunk"] == 1 and case["element"] == element
    assert all(count == 1 for count in _sent(g, start).values())


def test_under_the_step_referee_an_uncovered_instruction_goes_to_the_committee_members_vote(tmp_path: Path) -> None:
    """The multiply reads a job input, so its record binds no element program: the honest
    challenger's role shows that, the step referee hands the instruction to the committee,
    the members' roles vote and resolve, and the ruling reaches the game through the step
    referee: the faulty defender loses, with nothing sent twice."""
    g = deployed_env(in_process_web3(), step_referee=True)
    committee, step_referee = referees(g.client, g.d.registry)
    job = dot_tanh_job(16, 8, 80, seed=5)  # committed without its inputs: the multiply has no program
    index = leaf_index(job, "multiply")
    assert job.graph.records[index].program == "00" * 32
    faulty, verifier = g.nodes[0], g.nodes[1]
    honest_side = job.side(verifier, index)
    wrong = job.execution({index: np.asarray(honest_side.output_array) + np.float32(1)})
    honest = job.execution()
    graph = job.leaves()
    job_id = g.run_job(graph, [Party(faulty, wrong)])
    start = g.client.block_number() + 1

    def role(account: str, knowledge: Knowledge) -> DisputeRole:
        state = ChainState(tmp_path / f"{account}.sqlite3", chain_id=g.client.chain_id, contract=g.market.address, account=account, start_block=0)
        return DisputeRole(g.client, g.market, g.game, committee, account, knowledge, state, step_referee=step_referee)

    roles = [
        role(faulty, StepKnowledge({job_id: wrong}, graph, honest, sides={index: job.side(faulty, index)})),
        role(verifier, StepKnowledge({job_id: honest}, graph, honest, sides={index: honest_side})),
        *(role(member, Knowledge({}, graph, honest)) for member in g.nodes[2:]),
    ]
    for _ in range(60):
        for r in roles:
            r.step()
        if g.game.dispute_count() and g.game.get_dispute(1).stage == Stage.SETTLED:
            break
    d = g.game.get_dispute(1)
    assert d.stage == Stage.SETTLED and d.position == index and d.verdict == Verdict.DEFENDER_WRONG
    assert step_referee.get_case(1)["stage"] == StepStage.DONE
    panel = committee.get_panel(1)
    assert panel.resolved and all(panel.voted)
    shown = step_case_summary(step_referee, 1)
    assert shown is not None and shown["committee"] and shown["element"] is None and "the committee rules" in step_case_words(shown)
    assert all(count == 1 for count in _sent(g, start).values())
