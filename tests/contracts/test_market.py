"""JobMarket: posting, claiming, sealed commits, reveals, finalize guards, withdraw, events."""

from __future__ import annotations

import pytest

from node.chain import ChainError, Phase, fetch_events
from node.protocol import seal_of
from tests.contracts.conftest import ETHER, MIN_STAKE, SLASH, Env
from tests.contracts.helpers import reverts

A = b"\xaa" * 32
TRACE = b"\x7e" * 32


def test_post_job_records_escrow_and_event(env: Env) -> None:
    now = env.client.timestamp()
    job = env.market.post_job(
        env.submitter, b"\x01" * 32, b"\x02" * 32, 3, now + 100, now + 200, 5 * ETHER
    )
    assert job == 1 and env.market.job_count() == 1
    assert env.client.balance(env.market.address) == 5 * ETHER
    j = env.market.get_job(job)
    assert (j.submitter, j.reward, j.k, j.commit_deadline, j.reveal_deadline) == (
        env.submitter,
        5 * ETHER,
        3,
        now + 100,
        now + 200,
    )
    assert (j.claimed, j.committed, j.revealed, j.phase, j.accepted) == (0, 0, 0, Phase.OPEN, False)
    [event] = fetch_events(env.client, env.market.contract, 0, names=("JobPosted",))
    assert event.args == {
        "jobId": 1,
        "submitter": env.submitter,
        "programDigest": b"\x01" * 32,
        "inputsDigest": b"\x02" * 32,
        "reward": 5 * ETHER,
        "k": 3,
        "commitDeadline": now + 100,
        "revealDeadline": now + 200,
    }
    assert env.post(1) == 2


def test_post_job_reverts(env: Env) -> None:
    now = env.client.timestamp()
    with reverts("BadRedundancy", k=0, maxK=16):
        env.market.post_job(env.submitter, A, A, 0, now + 100, now + 200, 1)
    with reverts("BadRedundancy", k=17):
        env.market.post_job(env.submitter, A, A, 17, now + 100, now + 200, 1)
    with reverts("NoReward"):
        env.market.post_job(env.submitter, A, A, 1, now + 100, now + 200, 0)
    with reverts("BadDeadlines", commitDeadline=now, revealDeadline=now + 200):
        env.market.post_job(env.submitter, A, A, 1, now, now + 200, 1)
    with reverts("BadDeadlines"):
        env.market.post_job(env.submitter, A, A, 1, now + 100, now + 100, 1)
    with reverts("BadDeadlines"):
        env.market.post_job(env.submitter, A, A, 1, now + 100, now + 50, 1)
    env.market.post_job(env.submitter, A, A, 16, now + 100, now + 101, 1)  # the limits hold


def test_unknown_job(env: Env) -> None:
    [node] = env.register_nodes(1)
    for call in (
        lambda: env.market.claim_slot(node, 9),
        lambda: env.market.commit(node, 9, A),
        lambda: env.market.reveal(node, 9, A, TRACE),
        lambda: env.market.finalize(node, 9),
        lambda: env.market.get_job(9),
        lambda: env.market.get_slots(9),
    ):
        with reverts("UnknownJob", jobId=9):
            call()


def test_claim_slot(env: Env) -> None:
    nodes = env.register_nodes(3)
    job = env.post(2)
    with reverts("NotRegistered", node=env.outsider):
        env.market.claim_slot(env.outsider, job)
    result = env.market.claim_slot(nodes[0], job)
    [event] = env.market.events(result)
    assert (event.name, event.args) == ("SlotClaimed", {"jobId": job, "node": nodes[0], "slot": 0})
    with reverts("AlreadyClaimed", jobId=job, node=nodes[0]):
        env.market.claim_slot(nodes[0], job)
    env.market.claim_slot(nodes[1], job)
    with reverts("AllSlotsClaimed", jobId=job, k=2):
        env.market.claim_slot(nodes[2], job)
    slots = env.market.get_slots(job)
    assert [s.node for s in slots] == nodes[:2]
    assert not any(s.committed or s.revealed for s in slots)
    assert env.market.get_job(job).claimed == 2
    assert env.registry.get_node(nodes[0]).locked == SLASH


def test_claim_needs_min_stake(env: Env) -> None:
    [node] = env.register_nodes(1, stake=MIN_STAKE + SLASH)
    env.registry.request_withdrawal(node, SLASH + 1)  # bonded stake now just under the minimum
    job = env.post(1)
    with reverts("StakeTooLow", sent=MIN_STAKE - 1, minimum=MIN_STAKE):
        env.market.claim_slot(node, job)
    env.registry.add_stake(node, 1)
    env.market.claim_slot(node, job)


def test_claim_needs_free_stake(env: Env) -> None:
    """Each slot locks SLASH; the slot after the free stake runs out is refused."""
    [node] = env.register_nodes(1, stake=MIN_STAKE + SLASH // 2)
    fits = MIN_STAKE // SLASH  # slots whose locks fit: free stake left is SLASH / 2
    for _ in range(fits):
        env.market.claim_slot(node, env.post(1))
    assert env.registry.get_node(node).locked == fits * SLASH
    job = env.post(1)
    with reverts("InsufficientFreeStake", node=node, requested=SLASH, available=SLASH // 2):
        env.market.claim_slot(node, job)
    assert env.market.get_job(job).claimed == 0  # the revert undid the claim


def test_claim_and_commit_close_at_the_commit_deadline(env: Env) -> None:
    nodes = env.register_nodes(2)
    job = env.post(2, commit_in=100)
    env.market.claim_slot(nodes[0], job)
    env.travel_to(env.market.get_job(job).commit_deadline)
    deadline = env.market.get_job(job).commit_deadline
    with reverts("CommitPhaseOver", jobId=job, commitDeadline=deadline):
        env.market.claim_slot(nodes[1], job)
    with reverts("CommitPhaseOver"):
        env.market.commit_result(nodes[0], job, A)


def test_commit(env: Env) -> None:
    nodes = env.register_nodes(2)
    job = env.post(2)
    with reverts("NoSlot", jobId=job, node=nodes[0]):
        env.market.commit(nodes[0], job, A)
    env.market.claim_slot(nodes[0], job)
    with reverts("EmptySeal"):
        env.market.commit(nodes[0], job, b"\x00" * 32)
    seal = seal_of(nodes[0], job, A)
    assert env.market.seal_of(nodes[0], job, A) == seal
    [event] = env.market.events(env.market.commit(nodes[0], job, seal))
    assert (event.name, event.args) == ("Committed", {"jobId": job, "node": nodes[0], "seal": seal})
    with reverts("AlreadyCommitted", jobId=job, node=nodes[0]):
        env.market.commit(nodes[0], job, seal)
    [slot] = env.market.get_slots(job)
    assert slot.committed and slot.seal == seal and not slot.revealed
    assert env.market.get_job(job).committed == 1


def test_seal_binds_the_node(env: Env) -> None:
    """Copying another node's seal does not let a node reveal the copied result."""
    nodes = env.register_nodes(2)
    job = env.post(2)
    env.market.claim_slot(nodes[0], job)
    env.market.claim_slot(nodes[1], job)
    env.market.commit_result(nodes[0], job, A)
    copied = env.market.get_slots(job)[0].seal
    env.market.commit(nodes[1], job, copied)
    env.market.reveal(nodes[0], job, A, TRACE)
    with reverts(
        "SealMismatch", jobId=job, node=nodes[1], expected=copied, actual=seal_of(nodes[1], job, A)
    ):
        env.market.reveal(nodes[1], job, A, TRACE)


def test_reveal_phases_and_guards(env: Env) -> None:
    nodes = env.register_nodes(3)
    job = env.post(3, commit_in=100, reveal_in=200)
    for node in nodes[:2]:
        env.market.claim_slot(node, job)
        env.market.commit_result(node, job, A)
    env.market.claim_slot(nodes[2], job)  # claimed, never commits
    j = env.market.get_job(job)
    with reverts("CommitPhaseNotOver", jobId=job, commitDeadline=j.commit_deadline):
        env.market.reveal(nodes[0], job, A, TRACE)
    env.travel_to(j.commit_deadline)
    with reverts("NotCommitted", jobId=job, node=nodes[2]):
        env.market.reveal(nodes[2], job, A, TRACE)
    with reverts("NoSlot", node=env.outsider):
        env.market.reveal(env.outsider, job, A, TRACE)
    with reverts("SealMismatch"):
        env.market.reveal(nodes[0], job, b"\xbb" * 32, TRACE)
    [event] = env.market.events(env.market.reveal(nodes[0], job, A, TRACE))
    assert (event.name, event.args) == (
        "Revealed",
        {"jobId": job, "node": nodes[0], "resultDigest": A, "traceDigest": TRACE},
    )
    with reverts("AlreadyRevealed", jobId=job, node=nodes[0]):
        env.market.reveal(nodes[0], job, A, TRACE)
    slot = env.market.get_slots(job)[0]
    assert slot.revealed and slot.result_digest == A and slot.envelope_digest == TRACE
    with reverts("RevealPhaseNotOver", jobId=job, revealDeadline=j.reveal_deadline):
        env.market.finalize(env.outsider, job)
    env.travel_to(j.reveal_deadline)
    with reverts("RevealPhaseOver", jobId=job, revealDeadline=j.reveal_deadline):
        env.market.reveal(nodes[1], job, A, TRACE)
    env.market.finalize(env.outsider, job)
    with reverts("JobFinalized", jobId=job):
        env.market.finalize(env.outsider, job)
    for call in (
        lambda: env.market.reveal(nodes[1], job, A, TRACE),
        lambda: env.market.commit(nodes[1], job, A),
        lambda: env.market.claim_slot(nodes[1], job),
    ):
        with reverts("JobFinalized"):
            call()


def test_all_committed_opens_reveals_early_and_all_revealed_allows_finalize(env: Env) -> None:
    nodes = env.register_nodes(2)
    job = env.post(2)
    for node in nodes:
        env.market.claim_slot(node, job)
        env.market.commit_result(node, job, A)
    for node in nodes:
        env.market.reveal(node, job, A, TRACE)
    j = env.market.get_job(job)
    assert env.client.timestamp() < j.commit_deadline  # all before any deadline
    env.market.finalize(env.outsider, job)
    assert env.market.get_job(job).phase == Phase.FINALIZED


def test_withdraw_credits(env: Env) -> None:
    with reverts("NothingToWithdraw", account=env.submitter):
        env.market.withdraw(env.submitter)
    job = env.post(1, reward=7, commit_in=10, reveal_in=20)
    env.travel_to(env.market.get_job(job).reveal_deadline)
    env.market.finalize(env.outsider, job)
    assert env.market.credits(env.submitter) == 7
    balance = env.client.balance(env.submitter)
    result = env.market.withdraw(env.submitter)
    [event] = env.market.events(result)
    assert (event.name, event.args) == ("Withdrawn", {"account": env.submitter, "amount": 7})
    assert env.client.balance(env.submitter) == balance + 7 - result.fee_wei
    assert env.market.credits(env.submitter) == 0
    with reverts("NothingToWithdraw"):
        env.market.withdraw(env.submitter)


def test_market_refuses_plain_ether(env: Env) -> None:
    with reverts("UnexpectedEther", **{"from": env.outsider}):
        env.client.transact(env.outsider, to=env.market.address, value=1)


def test_registry_refuses_plain_ether(env: Env) -> None:
    # No receive function: stake only enters through register and addStake.
    with pytest.raises(ChainError):
        env.client.transact(env.outsider, to=env.registry.address, value=1)
