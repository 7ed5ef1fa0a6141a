"""The dispute game on the in-process EVM against parties that lie on purpose, at every step
and deadline (docs/disputes.md; the cases are the table in docs/threat-model.md). In every
case the honest side wins, no honest party loses stake, and no ether is created or lost.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from attest.commitment import first_divergence_walk
from harness.dispute_game import (
    SLASH,
    TERMS,
    GameEnv,
    Party,
    digest,
    diverging,
    game_env,
    honest_execution,
    synthetic_graph,
)
from node.chain import Stage, Verdict
from node.chain.disputes import GraphLeaves, leaf_opening
from tests.contracts.helpers import reverts

BOND = TERMS.challenge_bond_wei


@pytest.fixture
def g() -> Iterator[GameEnv]:
    yield from game_env()


def _parties(g: GameEnv, n: int = 13, diverge_at: int = 5, seed: int = 1):
    graph = synthetic_graph(n, seed)
    honest = honest_execution(n, seed)
    wrong = diverging(honest, diverge_at)
    return graph, honest, wrong


def _stakes(g: GameEnv, *accounts: str) -> list[int]:
    return [g.stake(a) for a in accounts]


def _played_one_slot_dispute(
    g: GameEnv, graph: GraphLeaves, defender: Party, challenger: Party, stop_at: Stage | None = None
) -> tuple[int, int, list[int]]:
    """Runs a job with `defender` in its only slot, has `challenger` dispute it and plays the
    game to the referee (or to `stop_at`): (the job, the dispute, both parties' stakes
    before the challenge)."""
    job = g.run_job(graph, [defender])
    before = _stakes(g, defender.account, challenger.account)
    dispute = g.challenge(job, 0, challenger)
    g.play(dispute, defender, challenger, graph, stop_at=stop_at)
    return job, dispute, before


def test_a_wrong_optimistic_result_is_refuted_by_one_honest_verifier(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=13, diverge_at=5)
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    job, dispute, before = _played_one_slot_dispute(g, graph, faulty, verifier)
    d = g.game.get_dispute(dispute)
    assert d.stage == Stage.REFEREE and d.position == 5  # the first divergent instruction
    assert (d.defender_leaf, d.challenger_leaf) == (wrong.digests[5], honest.digests[5])
    members = g.vote_all(dispute, honest.digests[5])
    assert not {faulty.account, verifier.account} & set(members)
    g.resolve(dispute)
    d = g.game.get_dispute(dispute)
    assert d.verdict == Verdict.DEFENDER_WRONG and d.winner == verifier.account
    assert g.market.get_slots(job)[0].refuted
    assert _stakes(g, faulty.account, verifier.account) == [before[0] - SLASH, before[1]]
    assert g.market.credits(verifier.account) == SLASH + BOND
    g.finalize(job)
    j = g.market.get_job(job)
    assert not j.accepted  # the only slot was refuted: the submitter gets the reward back
    assert g.market.credits(g.submitter) == 10**18
    assert all(g.locked(a) == 0 for a in g.nodes)


def test_a_right_result_challenged_costs_the_challenger_its_bond(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=10, diverge_at=0)
    node, liar = Party(g.nodes[0], honest), Party(g.nodes[1], wrong)
    job, dispute, before = _played_one_slot_dispute(g, graph, node, liar)
    assert g.game.get_dispute(dispute).position == 0
    g.vote_all(dispute, honest.digests[0])
    g.resolve(dispute)
    assert g.game.get_dispute(dispute).verdict == Verdict.DEFENDER_RIGHT
    assert _stakes(g, node.account, liar.account) == before
    g.finalize(job)
    assert g.market.get_job(job).accepted and g.market.get_job(job).result == honest.result
    assert g.market.credits(node.account) == 10**18 + BOND


@pytest.mark.parametrize("n, diverge_at", [(1, 0), (3, 2), (13, 0), (70, 33)])
def test_the_walk_ends_at_the_first_divergent_instruction(g: GameEnv, n: int, diverge_at: int) -> None:
    graph, honest, wrong = _parties(g, n=n, diverge_at=diverge_at, seed=n)
    job = g.run_job(graph, [Party(g.nodes[0], wrong)])
    dispute = g.challenge(job, 0, Party(g.nodes[1], honest))
    moves = g.play(dispute, Party(g.nodes[0], wrong), Party(g.nodes[1], honest), graph)
    d = g.game.get_dispute(dispute)
    index, nodes = first_divergence_walk(honest.levels, wrong.levels)
    assert d.position == index == diverge_at
    assert d.moves == 2 * len(nodes)
    assert moves == 2 * len(nodes) + 2  # then the defender's leaf and the challenger's opening


def test_equal_traces_with_different_results_are_decided_at_the_result_record(g: GameEnv) -> None:
    graph, honest, _ = _parties(g, n=6)
    wrong = diverging(honest, 6)  # every instruction right, the result digest wrong
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    job = g.run_job(graph, [faulty])
    dispute = g.challenge(job, 0, verifier)
    d = g.game.get_dispute(dispute)
    assert d.stage == Stage.OPEN_LEAF and d.position == 6  # no bisection at all
    g.play(dispute, faulty, verifier, graph)
    g.vote_all(dispute, honest.result)
    g.resolve(dispute)
    assert g.game.get_dispute(dispute).verdict == Verdict.DEFENDER_WRONG


def test_k2_slots_that_disagree_settle_on_the_honest_one_not_a_refund(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=9, diverge_at=4)
    good, bad = Party(g.nodes[0], honest), Party(g.nodes[1], wrong)
    job = g.run_job(graph, [good, bad])
    dispute = g.challenge(job, 1, good)  # the honest slot challenges the other slot
    g.play(dispute, bad, good, graph)
    g.vote_all(dispute, honest.digests[4])
    g.resolve(dispute)
    g.finalize(job)
    j = g.market.get_job(job)
    assert j.accepted and j.result == honest.result
    assert g.market.credits(good.account) == 10**18 + SLASH + BOND


def test_a_colluding_majority_of_slots_loses_to_one_honest_slot(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=9, diverge_at=2)
    good = Party(g.nodes[0], honest)
    colluders = [Party(g.nodes[1], wrong), Party(g.nodes[2], wrong)]
    job = g.run_job(graph, [good, *colluders])
    for slot, bad in ((1, colluders[0]), (2, colluders[1])):
        dispute = g.challenge(job, slot, good)
        g.play(dispute, bad, good, graph)
        g.vote_all(dispute, honest.digests[2])
        g.resolve(dispute)
    before = g.stake(good.account)
    g.finalize(job)
    j = g.market.get_job(job)
    assert j.accepted and j.result == honest.result and j.revealed == 3
    assert g.stake(good.account) == before
    assert all(g.stake(c.account) == 2 * 10**18 - SLASH for c in colluders)


def test_a_wrong_operand_claim_is_refused_and_the_lying_challenger_then_loses(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=13, diverge_at=7)
    node, liar = Party(g.nodes[0], honest), Party(g.nodes[1], wrong)
    _, dispute, _ = _played_one_slot_dispute(g, graph, node, liar, stop_at=Stage.OPEN_LEAF)
    d = g.game.get_dispute(dispute)
    opening = leaf_opening(liar.execution, graph, 7)
    assert opening.operands
    # Claiming the instruction reads other leaves: a graph leaf the commitment does not hold.
    other = opening.graph_leaf[:32] + (0).to_bytes(4, "big")
    with reverts("BadGraphProof"):
        g.game.open_leaf(liar.account, dispute, opening.digest, other, opening.graph_proof, [wrong.digests[0]], [wrong.proof(0)])
    # Claiming other operand values than the ones committed.
    with reverts("BadOperandProof"):
        g.game.open_leaf(liar.account, dispute, opening.digest, opening.graph_leaf, opening.graph_proof, [digest(k) for k in range(len(opening.operands))], opening.operand_proofs)
    g.travel_to(d.deadline)
    g.game.timeout(g.nodes[5], dispute)
    d = g.game.get_dispute(dispute)
    assert d.verdict == Verdict.DEFENDER_RIGHT and d.by_timeout


def test_an_operand_digest_not_in_the_commitment_is_refused(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=13, diverge_at=7)
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    _, dispute, _ = _played_one_slot_dispute(g, graph, faulty, verifier, stop_at=Stage.OPEN_LEAF)
    opening = leaf_opening(honest, graph, 7)
    assert opening.operands, "the synthetic graph gives leaf 7 operands"
    lied = [digest("lie"), *opening.operands[1:]]
    with reverts("BadOperandProof"):
        g.game.open_leaf(verifier.account, dispute, opening.digest, opening.graph_leaf, opening.graph_proof, lied, opening.operand_proofs)
    shifted = [opening.operand_proofs[-1], *opening.operand_proofs[:-1]] if len(opening.operands) > 1 else [[digest("x")]]
    with reverts("BadOperandProof"):
        g.game.open_leaf(verifier.account, dispute, opening.digest, opening.graph_leaf, opening.graph_proof, opening.operands, shifted)
    with reverts("OperandCount"):
        g.game.open_leaf(verifier.account, dispute, opening.digest, opening.graph_leaf, opening.graph_proof, opening.operands[:-1], opening.operand_proofs[:-1])
    g.play(dispute, faulty, verifier, graph)  # the honest opening goes through
    assert g.game.get_dispute(dispute).stage == Stage.REFEREE


def test_forged_proofs_and_children_are_refused(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=13, diverge_at=6)
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    job = g.run_job(graph, [faulty])
    dispute = g.challenge(job, 0, verifier)
    # Children that do not hash to the mover's node.
    with reverts("ChildrenMismatch"):
        g.game.bisect(faulty.account, dispute, digest("a"), digest("b"))
    with reverts("NotYourMove"):
        g.game.bisect(verifier.account, dispute, digest("a"), digest("b"))
    g.play(dispute, faulty, verifier, graph, stop_at=Stage.REVEAL_LEAF)
    with reverts("LeafMismatch"):
        g.game.reveal_leaf(faulty.account, dispute, honest.digests[6])  # not what it committed
    g.play(dispute, faulty, verifier, graph, stop_at=Stage.OPEN_LEAF)
    opening = leaf_opening(honest, graph, 6)
    bad_proof = [*opening.graph_proof[:-1], digest("forged")]
    with reverts("BadGraphProof"):
        g.game.open_leaf(verifier.account, dispute, opening.digest, opening.graph_leaf, bad_proof, opening.operands, opening.operand_proofs)
    with reverts("BadGraphProof"):
        g.game.open_leaf(verifier.account, dispute, opening.digest, opening.graph_leaf, opening.graph_proof[:-1], opening.operands, opening.operand_proofs)
    with reverts("LeafMismatch"):
        g.game.open_leaf(verifier.account, dispute, wrong.digests[6], opening.graph_leaf, opening.graph_proof, opening.operands, opening.operand_proofs)


def test_a_malformed_graph_commitment_loses_for_the_defender_that_claimed_it(g: GameEnv) -> None:
    n = 6
    honest = honest_execution(n, 3)
    good = synthetic_graph(n, 3)
    # Record 4 names itself as an operand: not a schedule. An honest node refuses such a job
    # before claiming (its own compile differs); one that runs it anyway loses its dispute.
    leaves = list(good.leaves)
    leaves[4] = digest("record", 4) + (4).to_bytes(4, "big")
    bad = type(good)(tuple(leaves), good.top)
    wrong = diverging(honest, 4)
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    job = g.run_job(bad, [faulty])
    dispute = g.challenge(job, 0, verifier)
    g.play(dispute, faulty, verifier, bad)
    d = g.game.get_dispute(dispute)
    assert d.stage == Stage.SETTLED and d.verdict == Verdict.DEFENDER_WRONG


@pytest.mark.parametrize("silent", ["defender-bisect", "challenger-bisect", "defender-leaf", "challenger-open"])
def test_silence_past_a_deadline_loses(g: GameEnv, silent: str) -> None:
    graph, honest, wrong = _parties(g, n=13, diverge_at=9)
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    node, liar = Party(g.nodes[0], honest), Party(g.nodes[1], wrong)
    # The silent party is always the dishonest one (the honest side must win); a silent honest
    # party losing is the rule too, checked in test_an_honest_party_that_stops_answering_loses.
    defender, challenger = (faulty, verifier) if silent.startswith("defender") else (node, liar)
    job = g.run_job(graph, [defender])
    dispute = g.challenge(job, 0, challenger)
    quiet = defender if silent.startswith("defender") else challenger
    stop = {"defender-bisect": Stage.BISECT, "challenger-bisect": None, "defender-leaf": Stage.REVEAL_LEAF, "challenger-open": Stage.OPEN_LEAF}[silent]
    if silent == "challenger-bisect":
        g.play(dispute, defender, challenger, graph, silent=challenger.account)
    elif stop == Stage.BISECT:
        pass  # the defender's very first move
    else:
        g.play(dispute, defender, challenger, graph, stop_at=stop)
    d = g.game.get_dispute(dispute)
    assert g.game.to_move(dispute) == quiet.account
    with reverts("MoveDeadlineNotPassed"):
        g.game.timeout(g.nodes[5], dispute)
    g.travel_to(d.deadline)
    # A late answer is refused.
    with pytest.raises(Exception) as late:
        g.play(dispute, defender, challenger, graph)
    assert "MoveDeadlinePassed" in str(late.value)
    g.game.timeout(g.nodes[5], dispute)
    d = g.game.get_dispute(dispute)
    assert d.by_timeout and d.winner != quiet.account
    g.finalize(job)
    j = g.market.get_job(job)
    assert j.accepted == (defender.execution is honest)


def test_an_honest_party_that_stops_answering_loses(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=8, diverge_at=3)
    node, liar = Party(g.nodes[0], honest), Party(g.nodes[1], wrong)
    job = g.run_job(graph, [node])
    dispute = g.challenge(job, 0, liar)
    g.travel_to(g.game.get_dispute(dispute).deadline)
    g.game.timeout(g.nodes[5], dispute)
    assert g.game.get_dispute(dispute).verdict == Verdict.DEFENDER_WRONG  # liveness: silence loses


def test_a_colluding_committee_minority_does_not_decide(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=13, diverge_at=5)
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    _, dispute, _ = _played_one_slot_dispute(g, graph, faulty, verifier)
    panel = g.committee.get_panel(dispute)
    stakes = _stakes(g, *panel.members)
    # The minority votes the faulty digest (it colludes with the defender).
    g.record("vote", g.committee.vote(panel.members[0], dispute, wrong.digests[5]))
    for member in panel.members[1:]:
        g.committee.vote(member, dispute, honest.digests[5])
    g.resolve(dispute)
    assert g.game.get_dispute(dispute).verdict == Verdict.DEFENDER_WRONG
    after = _stakes(g, *panel.members)
    assert after[0] == stakes[0] - TERMS.member_stake_wei
    assert after[1:] == stakes[1:]
    share = TERMS.member_stake_wei // 2
    assert [g.market.credits(m) for m in panel.members[1:]] == [share, TERMS.member_stake_wei - share]


def test_a_silent_committee_gives_no_verdict_and_slashes_no_party(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=5, diverge_at=2)
    faulty, verifier = Party(g.nodes[0], wrong), Party(g.nodes[1], honest)
    job, dispute, _ = _played_one_slot_dispute(g, graph, faulty, verifier)
    before = _stakes(g, faulty.account, verifier.account)
    with reverts("VotingNotOver"):
        g.committee.resolve(g.nodes[5], dispute)
    panel = g.committee.get_panel(dispute)
    g.travel_to(panel.deadline)
    with reverts("VotingOver"):  # a late vote
        g.committee.vote(panel.members[0], dispute, honest.digests[2])
    g.resolve(dispute)
    assert g.game.get_dispute(dispute).verdict == Verdict.NO_VERDICT
    assert _stakes(g, faulty.account, verifier.account) == before
    assert g.market.credits(verifier.account) == BOND + TERMS.committee_size * TERMS.member_stake_wei
    g.finalize(job)
    assert not g.market.get_job(job).accepted  # fail closed: an undecided result is not accepted


def test_a_griefing_challenger_pays_a_bond_per_dispute_and_cannot_stall_the_job(g: GameEnv) -> None:
    graph, honest, _ = _parties(g, n=9)
    node = Party(g.nodes[0], honest)
    job = g.run_job(graph, [node])
    griefers = [Party(g.nodes[i], diverging(honest, i - 1, tag=f"grief{i}")) for i in (1, 2, 3)]
    disputes = [g.challenge(job, 0, p) for p in griefers]
    with reverts("AlreadyChallenging"):
        g.challenge(job, 0, griefers[0])
    for dispute, p in zip(disputes, griefers, strict=True):
        g.play(dispute, node, p, graph, silent=p.account)  # the defender answers; griefers walk away
    g.travel_to(max(g.market.get_job(job).challenge_deadline, *(g.game.get_dispute(d).deadline for d in disputes)))
    with reverts("DisputesOpen"):
        g.market.finalize(g.deployer, job)
    for dispute in disputes:
        g.game.timeout(g.nodes[6], dispute)
    before = g.stake(node.account)
    g.finalize(job)
    assert g.market.get_job(job).accepted
    assert g.stake(node.account) == before
    assert g.market.credits(node.account) == 10**18 + 3 * BOND


def test_who_may_challenge_and_when(g: GameEnv) -> None:
    graph, honest, wrong = _parties(g, n=4)
    node = Party(g.nodes[0], wrong)
    job = g.run_job(graph, [node], reveal=False)
    with reverts("NotRevealed"):
        g.challenge(job, 0, Party(g.nodes[1], honest))
    g.market.reveal(node.account, job, wrong.result, digest("t"), wrong.op_trace_root)
    with reverts("CannotChallengeOwnSlot"):
        g.challenge(job, 0, Party(node.account, honest))
    with reverts("SameExecution"):
        g.challenge(job, 0, Party(g.nodes[1], wrong))
    with reverts("NotAllowedToChallenge"):
        g.game.challenge(g.deployer, job, 0, honest.result, honest.op_trace_root, BOND)
    with reverts("WrongBond"):
        g.game.challenge(g.nodes[1], job, 0, honest.result, honest.op_trace_root, BOND - 1)
    # The submitter may challenge without being a node.
    dispute = g.challenge(job, 0, Party(g.submitter, honest))
    assert g.game.get_dispute(dispute).challenger == g.submitter
    g.travel_to(g.market.get_job(job).challenge_deadline)
    with reverts("ChallengeWindowOver"):
        g.challenge(job, 0, Party(g.nodes[1], honest))


def test_a_job_without_traced_instructions_disputes_its_result(g: GameEnv) -> None:
    graph = synthetic_graph(0, 4)
    honest = honest_execution(0, 4)
    wrong = diverging(honest, 0)
    job = g.run_job(graph, [Party(g.nodes[0], wrong)])
    with reverts("NotEmptyTrace"):
        g.game.challenge(g.nodes[1], job, 0, honest.result, digest("x"), BOND)
    dispute = g.challenge(job, 0, Party(g.nodes[1], honest))
    d = g.game.get_dispute(dispute)
    assert d.stage == Stage.OPEN_LEAF and d.position == 0
    g.play(dispute, Party(g.nodes[0], wrong), Party(g.nodes[1], honest), graph)
    g.vote_all(dispute, honest.result)
    g.resolve(dispute)
    assert g.game.get_dispute(dispute).verdict == Verdict.DEFENDER_WRONG
