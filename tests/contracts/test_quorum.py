"""Settlement among the surviving slots for k = 1, 2, 3, 5: unanimous, majority, tie, no
reveal, late reveal, refuted slots.

A scenario is one letter per claimed slot, in claim order:
  A, B, C  commit, then reveal that result digest;
  R, Q     commit and reveal A (R) or B (Q), then lose a dispute (the submitter challenges,
           the defender never answers, the timeout refutes the slot);
  -        commit, never reveal;
  L        commit, try to reveal after the reveal deadline (refused: counts as no reveal);
  x        claim, never commit.
Slots beyond the scenario's length stay unclaimed. The survivors are the slots that revealed
and were not refuted; the digest of a strict majority of them wins (docs/disputes.md). Each
case states the expected outcome by hand (the winning letter or a refund, and which slots
finalize slashes); the amounts follow the contract's rules: pool = reward + slashes * SLASH,
split evenly among winners with the division remainder to the first winner, or credited whole
to the submitter. A refuted slot's stake went to its challenger (here the submitter, with its
bond back) when the dispute settled, and finalize leaves it alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from node.chain import Event, Phase, fetch_events
from tests.contracts.conftest import BOND, ETHER, OP_ROOT, SLASH, Env
from tests.contracts.helpers import reverts

DIGESTS = {"A": b"\xaa" * 32, "B": b"\xbb" * 32, "C": b"\xcc" * 32}
REVEALS = {**DIGESTS, "R": DIGESTS["A"], "Q": DIGESTS["B"]}
REFUTED = "RQ"
OTHER_ROOT = b"\x0f" * 32  # the challengers' op-trace root
STAKE = 2 * ETHER
REWARD = ETHER + 1  # odd on purpose: shares leave a remainder


@dataclass(frozen=True)
class Case:
    k: int
    slots: str
    accepted: bool
    slashed: tuple[int, ...]  # by finalize
    winner: str = "A"


CASES = [
    # k = 1: the optimistic job; its one slot carries it unless refuted
    Case(1, "A", True, ()),
    Case(1, "-", False, (0,)),
    Case(1, "L", False, (0,)),
    Case(1, "x", False, (0,)),
    Case(1, "", False, ()),
    Case(1, "R", False, ()),
    # k = 2: a disagreement between two survivors is a tie; a lone survivor carries the job
    Case(2, "AA", True, ()),
    Case(2, "AB", False, ()),
    Case(2, "A-", True, (1,)),
    Case(2, "--", False, (0, 1)),
    Case(2, "AR", True, ()),
    Case(2, "BR", True, (), "B"),
    # k = 3
    Case(3, "AAA", True, ()),
    Case(3, "AAB", True, (2,)),
    Case(3, "ABC", False, ()),
    Case(3, "AA-", True, (2,)),
    Case(3, "A--", True, (1, 2)),
    Case(3, "AB-", False, (2,)),
    Case(3, "AA", True, ()),
    Case(3, "AAQ", True, ()),
    Case(3, "ABQ", False, ()),
    Case(3, "RBB", True, (), "B"),
    Case(3, "RR-", False, (2,)),
    Case(3, "A-Q", True, (1,)),
    # k = 5 (each rule once more with more slots; the cheaper k <= 3 cases cover the rest)
    Case(5, "AAABB", True, (3, 4)),
    Case(5, "AABBC", False, ()),
    Case(5, "AAxL-", True, (2, 3, 4)),
    Case(5, "AB---", False, (2, 3, 4)),
    Case(5, "ABB--", True, (0, 3, 4), "B"),
    Case(5, "AARRB", True, (4,)),
]


def _run(env: Env, case: Case, reward: int = REWARD) -> tuple[int, list[str], list[Event]]:
    """Drive one job through the scenario; returns the job id, slot nodes, finalize events."""
    nodes = env.register_nodes(len(case.slots), stake=STAKE)
    job = env.post(case.k, reward=reward)
    for node, role in zip(nodes, case.slots, strict=True):
        env.market.claim_slot(node, job)
        if role != "x":
            env.market.commit_result(node, job, REVEALS.get(role, b"\x99" * 32), OP_ROOT)
    j = env.market.get_job(job)
    if j.committed < case.k:
        env.travel_to(j.commit_deadline)
    for node, role in zip(nodes, case.slots, strict=True):
        if role in REVEALS:
            env.market.reveal(node, job, REVEALS[role], role.encode() * 32, OP_ROOT)
    disputes = [
        env.game.challenge(env.submitter, job, i, REVEALS[role], OTHER_ROOT, BOND)
        for i, role in enumerate(case.slots)
        if role in REFUTED
    ]
    with reverts("ChallengeWindowOpen", jobId=job):
        env.market.finalize(env.outsider, job)
    if env.market.get_job(job).revealed < case.k:
        env.travel_to(j.reveal_deadline)
    for node, role in zip(nodes, case.slots, strict=True):
        if role == "L":
            with reverts("RevealPhaseOver", jobId=job):
                env.market.reveal(node, job, b"\x99" * 32, b"\x00" * 32, OP_ROOT)
    for dispute in disputes:
        env.travel_to(env.game.get_dispute(dispute).deadline)
        env.game.timeout(env.outsider, dispute)
    assert [s.refuted for s in env.market.get_slots(job)] == [r in REFUTED for r in case.slots]
    env.close_window(job)
    result = env.market.finalize(env.outsider, job)
    return job, nodes, env.market.events(result)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"k{c.k}-{c.slots or 'none'}")
def test_quorum(env: Env, case: Case) -> None:
    market_before = env.client.balance(env.market.address)
    job, nodes, events = _run(env, case)
    revealed = [i for i, r in enumerate(case.slots) if r in REVEALS]
    refuted = [i for i, r in enumerate(case.slots) if r in REFUTED]
    winners = [i for i in revealed if case.accepted and case.slots[i] == case.winner]
    pool = REWARD + len(case.slashed) * SLASH
    assert not set(refuted) & set(case.slashed)

    expected_credit = {node: 0 for node in nodes}
    submitter_credit = len(refuted) * (BOND + SLASH)  # each refutation: the bond back, the stake
    if case.accepted:
        share = pool // len(winners)
        for n, i in enumerate(winners):
            expected_credit[nodes[i]] = share + (pool - share * len(winners) if n == 0 else 0)
    else:
        submitter_credit += pool
    assert sum(expected_credit.values()) + submitter_credit == pool + len(refuted) * (BOND + SLASH)

    j = env.market.get_job(job)
    assert j.phase == Phase.FINALIZED and j.accepted == case.accepted
    assert j.result == (DIGESTS[case.winner] if case.accepted else b"\x00" * 32)
    assert j.revealed == len(revealed) and j.open_disputes == 0
    for i, node in enumerate(nodes):
        assert env.market.credits(node) == expected_credit[node], (i, case)
        info = env.registry.get_node(node)
        assert info.locked == 0
        lost = i in case.slashed or i in refuted
        assert info.stake == STAKE - (SLASH if lost else 0), (i, case)
    assert env.market.credits(env.submitter) == submitter_credit

    # The events tell the same story, so a watcher can settle its books from logs alone.
    by_name: dict[str, list[Event]] = {}
    for e in events:
        by_name.setdefault(e.name, []).append(e)
    rewarded = [(e.args["node"], e.args["amount"]) for e in by_name.get("Rewarded", [])]
    assert rewarded == [(nodes[i], expected_credit[nodes[i]]) for i in winners]
    slashed = [(e.args["node"], e.args["amount"]) for e in by_name.get("Slashed", [])]
    assert slashed == [(nodes[i], SLASH) for i in case.slashed]
    refunds = [(e.args["submitter"], e.args["amount"]) for e in by_name.get("Refunded", [])]
    assert refunds == ([] if case.accepted else [(env.submitter, pool)])
    [fin] = by_name["Finalized"]
    assert fin.args == {
        "jobId": job,
        "accepted": case.accepted,
        "resultDigest": j.result,
        "winners": len(winners),
        "revealed": len(revealed),
        "pool": pool,
    }
    refutations = fetch_events(env.client, env.market.contract, 0, names=("Refuted",))
    assert [
        (e.args["node"], e.args["slot"], e.args["challenger"], e.args["amount"])
        for e in refutations
    ] == [(nodes[i], i, env.submitter, SLASH) for i in refuted]

    # Escrow plus slashed stake is now exactly the credits; pulling them empties the market.
    assert env.client.balance(env.market.address) == market_before + pool + len(refuted) * (
        BOND + SLASH
    )
    assert env.client.balance(env.game.address) == 0  # every bond was paid out
    for account in [*nodes, env.submitter]:
        if env.market.credits(account):
            env.market.withdraw(account)
    assert env.client.balance(env.market.address) == market_before
    assert env.client.balance(env.registry.address) == sum(
        env.registry.get_node(n).stake for n in nodes
    )
    env.check_conservation()


def test_remainder_goes_to_the_first_winner(env: Env) -> None:
    job, nodes, _ = _run(env, Case(3, "AAA", True, ()), reward=100)
    assert [env.market.credits(n) for n in nodes] == [34, 33, 33]
    del job


def test_remainder_with_slashed_stake(env: Env) -> None:
    # pool = 100 + SLASH (10**17): 10**17 + 100 split between slots 1 and 2.
    _, nodes, _ = _run(env, Case(3, "BAA", True, (0,)), reward=100)
    pool = 100 + SLASH
    assert [env.market.credits(n) for n in nodes] == [0, pool - pool // 2, pool // 2]


def test_a_watcher_rebuilds_the_job_from_logs(env: Env) -> None:
    job, nodes, _ = _run(env, Case(3, "AAB", True, (2,)))
    events = fetch_events(env.client, env.market.contract, 0, chunk=3)  # several chunks
    names = [e.name for e in events if e.args.get("jobId") == job]
    assert names == [
        "JobPosted",
        "JobCommitment",
        *["SlotClaimed", "Committed"] * 3,
        *["Revealed"] * 3,
        "Rewarded",
        "Rewarded",
        "Slashed",
        "Finalized",
    ]
    claimed = [e.args["node"] for e in events if e.name == "SlotClaimed"]
    assert claimed == nodes
    only = fetch_events(env.client, env.market.contract, 0, names=("Revealed",))
    assert [e.args["resultDigest"] for e in only] == [DIGESTS[c] for c in "AAB"]
    assert [e.args["opTraceRoot"] for e in only] == [OP_ROOT] * 3
    blocks = [e.block_number for e in events]
    assert blocks == sorted(blocks)
