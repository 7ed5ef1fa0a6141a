"""JobMarket: posting (with the graph commitment and the challenge window), claiming, sealed
commits that bind the op-trace root, reveals, the challenge window before finalize, the
module-only entry points, withdraw, events."""

from __future__ import annotations

import hashlib

import pytest

from node.chain import ChainError, Phase, fetch_events
from node.protocol import seal_of
from tests.contracts.conftest import (
    BOND,
    ETHER,
    GRAPH_ROOT,
    MIN_STAKE,
    MIN_WINDOW,
    OP_ROOT,
    SLASH,
    TRACE_LEAVES,
    WINDOW,
    Env,
)
from tests.contracts.helpers import reverts

A = b"\xaa" * 32
TRACE = b"\x7e" * 32
EMPTY_ROOT = hashlib.sha256(b"").digest()


def _post(
    env: Env,
    k: int,
    commit_at: int,
    reveal_at: int,
    reward: int = 1,
    *,
    graph_root: bytes = A,
    trace_leaves: int = TRACE_LEAVES,
    challenge_window: int = WINDOW,
) -> int:
    """postJob from the submitter with absolute deadlines."""
    return env.market.post_job(
        env.submitter,
        A,
        A,
        k,
        commit_at,
        reveal_at,
        reward,
        graph_root=graph_root,
        trace_leaves=trace_leaves,
        challenge_window=challenge_window,
    )


def test_post_job_records_escrow_commitment_and_events(env: Env) -> None:
    now = env.client.timestamp()
    job = env.market.post_job(
        env.submitter,
        b"\x01" * 32,
        b"\x02" * 32,
        3,
        now + 100,
        now + 200,
        5 * ETHER,
        graph_root=GRAPH_ROOT,
        trace_leaves=7,
        challenge_window=45,
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
    assert (j.graph_root, j.trace_leaves, j.challenge_window) == (GRAPH_ROOT, 7, 45)
    assert (j.claimed, j.committed, j.revealed, j.phase, j.accepted) == (0, 0, 0, Phase.OPEN, False)
    assert (j.reveal_end, j.open_disputes) == (0, 0)
    # Before the k-th reveal the challenge window starts at the reveal deadline.
    assert j.challenge_deadline == env.market.challenge_deadline(job) == now + 200 + 45
    [posted, commitment] = fetch_events(
        env.client, env.market.contract, 0, names=("JobPosted", "JobCommitment")
    )
    assert posted.args == {
        "jobId": 1,
        "submitter": env.submitter,
        "programDigest": b"\x01" * 32,
        "inputsDigest": b"\x02" * 32,
        "reward": 5 * ETHER,
        "k": 3,
        "commitDeadline": now + 100,
        "revealDeadline": now + 200,
    }
    assert commitment.name == "JobCommitment"
    assert commitment.args == {
        "jobId": 1,
        "graphRoot": GRAPH_ROOT,
        "traceLeaves": 7,
        "challengeWindow": 45,
    }
    assert commitment.tx_hash == posted.tx_hash
    assert env.post(1) == 2


def test_post_job_reverts(env: Env) -> None:
    now = env.client.timestamp()
    with reverts("BadRedundancy", k=0, maxK=16):
        _post(env, 0, now + 100, now + 200)
    with reverts("BadRedundancy", k=17):
        _post(env, 17, now + 100, now + 200)
    with reverts("NoReward"):
        _post(env, 1, now + 100, now + 200, reward=0)
    with reverts("BadDeadlines", commitDeadline=now, revealDeadline=now + 200):
        _post(env, 1, now, now + 200)
    with reverts("BadDeadlines"):
        _post(env, 1, now + 100, now + 100)
    with reverts("BadDeadlines"):
        _post(env, 1, now + 100, now + 50)
    _post(env, 16, now + 100, now + 101)  # the limits hold


def test_challenge_window_has_a_minimum(env: Env) -> None:
    assert env.market.min_challenge_window() == MIN_WINDOW == 10
    now = env.client.timestamp()
    with reverts("ChallengeWindowTooShort", challengeWindow=MIN_WINDOW - 1, minimum=MIN_WINDOW):
        _post(env, 1, now + 100, now + 200, challenge_window=MIN_WINDOW - 1)
    with reverts("ChallengeWindowTooShort", challengeWindow=0, minimum=MIN_WINDOW):
        _post(env, 1, now + 100, now + 200, challenge_window=0)
    job = _post(env, 1, now + 100, now + 200, challenge_window=MIN_WINDOW)
    assert env.market.get_job(job).challenge_window == MIN_WINDOW
    # The graph commitment is the submitter's to state: the market stores it unchecked.
    job = _post(env, 1, now + 100, now + 200, graph_root=b"\x00" * 32, trace_leaves=0)
    assert (env.market.get_job(job).graph_root, env.market.get_job(job).trace_leaves) == (
        b"\x00" * 32,
        0,
    )


def test_a_challenge_window_that_would_lock_stake_for_good_is_refused(env: Env) -> None:
    # Without a bound, reveal deadline + window overflowed the uint64 deadline: finalize and
    # every challenge reverted forever, the escrow and each claimed slot's stake locked for good.
    longest = env.market.max_challenge_window()
    assert longest == 30 * 24 * 3600
    now = env.client.timestamp()
    with reverts("ChallengeWindowTooLong", challengeWindow=2**64 - 1, maximum=longest):
        _post(env, 1, now + 100, now + 200, challenge_window=2**64 - 1)
    with reverts("ChallengeWindowTooLong", challengeWindow=longest + 1, maximum=longest):
        _post(env, 1, now + 100, now + 200, challenge_window=longest + 1)
    with reverts("BadDeadlines"):  # the deadline itself would not fit
        _post(env, 1, now + 100, 2**64 - 1 - longest + 1, challenge_window=longest)
    job = _post(env, 1, now + 100, now + 200, challenge_window=longest)
    assert env.market.challenge_deadline(job) == now + 200 + longest


def test_unknown_job(env: Env) -> None:
    [node] = env.register_nodes(1)
    for call in (
        lambda: env.market.claim_slot(node, 9),
        lambda: env.market.commit(node, 9, A),
        lambda: env.market.reveal(node, 9, A, TRACE, OP_ROOT),
        lambda: env.market.finalize(node, 9),
        lambda: env.market.get_job(9),
        lambda: env.market.get_slots(9),
        lambda: env.market.challenge_deadline(9),
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
    assert not any(s.committed or s.revealed or s.refuted for s in slots)
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
        env.market.commit_result(nodes[0], job, A, OP_ROOT)


def test_commit(env: Env) -> None:
    nodes = env.register_nodes(2)
    job = env.post(2)
    with reverts("NoSlot", jobId=job, node=nodes[0]):
        env.market.commit(nodes[0], job, A)
    env.market.claim_slot(nodes[0], job)
    with reverts("EmptySeal"):
        env.market.commit(nodes[0], job, b"\x00" * 32)
    seal = seal_of(nodes[0], job, A, OP_ROOT)
    assert env.market.seal_of(nodes[0], job, A, OP_ROOT) == seal
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
    env.market.commit_result(nodes[0], job, A, OP_ROOT)
    copied = env.market.get_slots(job)[0].seal
    env.market.commit(nodes[1], job, copied)
    env.market.reveal(nodes[0], job, A, TRACE, OP_ROOT)
    with reverts(
        "SealMismatch",
        jobId=job,
        node=nodes[1],
        expected=copied,
        actual=seal_of(nodes[1], job, A, OP_ROOT),
    ):
        env.market.reveal(nodes[1], job, A, TRACE, OP_ROOT)


def test_seal_binds_the_op_trace_root(env: Env) -> None:
    """A node cannot choose its execution commitment after the commit: revealing the sealed
    result digest with another op-trace root is a seal mismatch."""
    other_root = b"\x0f" * 32
    [node] = env.register_nodes(1)
    job = env.post(1)
    assert seal_of(node, job, A, OP_ROOT) != seal_of(node, job, A, other_root)
    for root in (OP_ROOT, other_root, EMPTY_ROOT):
        assert env.market.seal_of(node, job, A, root) == seal_of(node, job, A, root)
    env.market.claim_slot(node, job)
    sealed = seal_of(node, job, A, OP_ROOT)
    env.market.commit_result(node, job, A, OP_ROOT)
    with reverts(
        "SealMismatch",
        jobId=job,
        node=node,
        expected=sealed,
        actual=seal_of(node, job, A, other_root),
    ):
        env.market.reveal(node, job, A, TRACE, other_root)
    [event] = env.market.events(env.market.reveal(node, job, A, TRACE, OP_ROOT))
    assert event.args["opTraceRoot"] == OP_ROOT
    [slot] = env.market.get_slots(job)
    assert (slot.result_digest, slot.envelope_digest, slot.op_trace_root) == (A, TRACE, OP_ROOT)


def test_a_graph_without_traced_instructions_reveals_the_empty_root(env: Env) -> None:
    """traceLeaves == 0: the op-trace root must be the empty tree's, SHA-256 of b""."""
    nodes = env.register_nodes(2)
    job = env.post(2, trace_leaves=0)
    for node, root in ((nodes[0], OP_ROOT), (nodes[1], EMPTY_ROOT)):
        env.market.claim_slot(node, job)
        env.market.commit_result(node, job, A, root)
    # The seal matches, the root does not fit the graph.
    with reverts("NotEmptyTrace", jobId=job, opTraceRoot=OP_ROOT):
        env.market.reveal(nodes[0], job, A, TRACE, OP_ROOT)
    env.market.reveal(nodes[1], job, A, TRACE, EMPTY_ROOT)
    assert [s.revealed for s in env.market.get_slots(job)] == [False, True]
    # A graph with traced instructions takes any root (the dispute game checks it).
    job = env.post(1)
    env.market.claim_slot(nodes[0], job)
    env.market.commit_result(nodes[0], job, A, EMPTY_ROOT)
    env.market.reveal(nodes[0], job, A, TRACE, EMPTY_ROOT)


def test_reveal_phases_and_guards(env: Env) -> None:
    nodes = env.register_nodes(3)
    job = env.post(3, commit_in=100, reveal_in=200)
    for node in nodes[:2]:
        env.market.claim_slot(node, job)
        env.market.commit_result(node, job, A, OP_ROOT)
    env.market.claim_slot(nodes[2], job)  # claimed, never commits
    j = env.market.get_job(job)
    with reverts("CommitPhaseNotOver", jobId=job, commitDeadline=j.commit_deadline):
        env.market.reveal(nodes[0], job, A, TRACE, OP_ROOT)
    env.travel_to(j.commit_deadline)
    with reverts("NotCommitted", jobId=job, node=nodes[2]):
        env.market.reveal(nodes[2], job, A, TRACE, OP_ROOT)
    with reverts("NoSlot", node=env.outsider):
        env.market.reveal(env.outsider, job, A, TRACE, OP_ROOT)
    with reverts("SealMismatch"):
        env.market.reveal(nodes[0], job, b"\xbb" * 32, TRACE, OP_ROOT)
    [event] = env.market.events(env.market.reveal(nodes[0], job, A, TRACE, OP_ROOT))
    assert (event.name, event.args) == (
        "Revealed",
        {
            "jobId": job,
            "node": nodes[0],
            "resultDigest": A,
            "traceDigest": TRACE,
            "opTraceRoot": OP_ROOT,
        },
    )
    with reverts("AlreadyRevealed", jobId=job, node=nodes[0]):
        env.market.reveal(nodes[0], job, A, TRACE, OP_ROOT)
    slot = env.market.get_slots(job)[0]
    assert slot.revealed and slot.result_digest == A and slot.envelope_digest == TRACE
    assert env.market.get_job(job).reveal_end == 0  # not all k revealed
    closes = j.reveal_deadline + WINDOW
    with reverts("ChallengeWindowOpen", jobId=job, challengeDeadline=closes):
        env.market.finalize(env.outsider, job)
    env.travel_to(j.reveal_deadline)
    with reverts("RevealPhaseOver", jobId=job, revealDeadline=j.reveal_deadline):
        env.market.reveal(nodes[1], job, A, TRACE, OP_ROOT)
    with reverts("ChallengeWindowOpen", jobId=job, challengeDeadline=closes):
        env.market.finalize(env.outsider, job)  # the reveal phase is over, the window is not
    env.travel_to(closes)
    env.market.finalize(env.outsider, job)
    with reverts("JobFinalized", jobId=job):
        env.market.finalize(env.outsider, job)
    for call in (
        lambda: env.market.reveal(nodes[1], job, A, TRACE, OP_ROOT),
        lambda: env.market.commit(nodes[1], job, A),
        lambda: env.market.claim_slot(nodes[1], job),
    ):
        with reverts("JobFinalized"):
            call()


def test_the_kth_reveal_starts_the_challenge_window(env: Env) -> None:
    """All committed: reveals open early; the k-th reveal ends the reveal phase, and finalize
    waits exactly the challenge window after it, long before the reveal deadline."""
    nodes = env.register_nodes(2)
    job = env.post(2, window=WINDOW)
    for node in nodes:
        env.market.claim_slot(node, job)
        env.market.commit_result(node, job, A, OP_ROOT)
    env.market.reveal(nodes[0], job, A, TRACE, OP_ROOT)
    assert env.market.get_job(job).reveal_end == 0
    last = env.market.reveal(nodes[1], job, A, TRACE, OP_ROOT)
    revealed_at = env.w3.eth.get_block(last.receipt["blockNumber"])["timestamp"]
    j = env.market.get_job(job)
    assert j.reveal_end == revealed_at < j.commit_deadline  # all before any deadline
    assert j.challenge_deadline == env.market.challenge_deadline(job) == revealed_at + WINDOW
    with reverts("ChallengeWindowOpen", jobId=job, challengeDeadline=revealed_at + WINDOW):
        env.market.finalize(env.outsider, job)
    env.travel_to(revealed_at + WINDOW - 1)  # the next block is one second short
    with reverts("ChallengeWindowOpen"):
        env.market.finalize(env.outsider, job)
    env.travel_to(revealed_at + WINDOW)
    result = env.market.finalize(env.outsider, job)
    assert env.w3.eth.get_block(result.receipt["blockNumber"])["timestamp"] == revealed_at + WINDOW
    j = env.market.get_job(job)
    assert j.phase == Phase.FINALIZED and j.accepted and j.result == A


def test_finalize_waits_for_open_disputes(env: Env) -> None:
    """A dispute opened inside the window holds finalize past the window until it settles;
    here the defender never moves, so its timeout refutes the slot and the job refunds."""
    defender, challenger = env.register_nodes(2)
    job = env.post(1)
    env.market.claim_slot(defender, job)
    env.market.commit_result(defender, job, A, OP_ROOT)
    env.market.reveal(defender, job, A, TRACE, OP_ROOT)
    dispute = env.game.challenge(challenger, job, 0, A, b"\x0f" * 32, BOND)
    assert env.market.get_job(job).open_disputes == 1
    env.close_window(job)
    with reverts("DisputesOpen", jobId=job, openDisputes=1):
        env.market.finalize(env.outsider, job)
    env.travel_to(env.game.get_dispute(dispute).deadline)
    env.game.timeout(env.outsider, dispute)
    assert env.market.get_job(job).open_disputes == 0
    result = env.market.finalize(env.outsider, job)
    j = env.market.get_job(job)
    assert j.phase == Phase.FINALIZED and not j.accepted
    # The refuted slot was slashed by its dispute (to the challenger), not again by finalize.
    assert [e.name for e in env.market.events(result)] == ["Refunded", "Finalized"]
    assert env.market.credits(env.submitter) == ETHER
    assert env.market.credits(challenger) == BOND + SLASH
    assert env.registry.get_node(defender).stake == 2 * ETHER - SLASH
    assert env.registry.get_node(defender).locked == 0


def test_module_only_entry_points(env: Env) -> None:
    """Only the wired game opens and closes disputes; only a module credits accounts."""
    job = env.post(1)
    functions = env.market.contract.functions
    for fn, value in (
        (functions.openDispute(job, 0), 0),
        (functions.closeDispute(job, 0, True, False, env.outsider, env.outsider), 1),
        (functions.credit(env.outsider), 1),
    ):
        with reverts("NotModule", caller=env.outsider):
            env.client.transact(env.outsider, fn, value=value)
    assert env.market.credits(env.outsider) == 0


def test_withdraw_credits(env: Env) -> None:
    with reverts("NothingToWithdraw", account=env.submitter):
        env.market.withdraw(env.submitter)
    job = env.post(1, reward=7, commit_in=10, reveal_in=20)
    env.close_window(job)
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
