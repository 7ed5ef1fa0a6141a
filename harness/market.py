"""The market state machine, shared by its sample in `make test`
(tests/contracts/test_stateful.py) and the long campaigns (tools/market_campaign.py).

Random sequences of register/stake/post/claim/commit/reveal/challenge/timeout/finalize/withdraw
by several accounts against a Python model of the contracts (docs/disputes.md for the
challenge window, disputes and the survivor tally); the invariants hold after every step.

The model predicts each action's outcome: success (then the chain must agree on credits,
stakes, locks, jobs and disputes) or the custom error the contract must revert with. Deadlines
set at posting sit far from the times the machine jumps to; deadlines that follow from when
something happened (the challenge deadline after the k-th reveal, a dispute's move deadline)
can land anywhere, so an action within MARGIN seconds of one is skipped as too close to call.

Disputes here settle by timeout only (the bisection and the referee are the dispute tests'):
a challenge that states another op-trace root leaves the defender to move first, and its
timeout refutes the slot; one that states the defender's op-trace root with another result
digest goes straight to the leaf, where the challenger must move, and its timeout gives the
defender the bond.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from web3 import Web3

from harness.evm import in_process_web3
from node.chain import (
    ChainClient,
    Committee,
    ContractRevert,
    DisputeGame,
    GameTerms,
    JobMarket,
    NodeRegistry,
    Phase,
    deploy,
)

# The market's deployment parameters (the contract tests' fixtures deploy with them too,
# tests/contracts/conftest.py).
ETHER = 10**18
MIN_STAKE = 1 * ETHER
UNBONDING_DELAY = 3_600
SLASH = ETHER // 10
TERMS = GameTerms()  # the defaults: min challenge window 10 s, bond 0.1 ether, 30 s moves
MIN_WINDOW = TERMS.min_challenge_window_s
BOND = TERMS.challenge_bond_wei
MOVE_WINDOW = TERMS.move_window_s

# The graph commitment jobs post (the market does not check it) and the op-trace root every
# node reveals; challengers state OTHER_ROOT, or OP_ROOT with the other result digest.
GRAPH_ROOT = b"\x47" * 32
TRACE_LEAVES = 4
OP_ROOT = b"\x0e" * 32
OTHER_ROOT = b"\x0f" * 32

DIGESTS = (b"\xaa" * 32, b"\xbb" * 32)
COMMIT_IN, REVEAL_IN, STEP = 300, 600, 400  # deadlines stay >= 100 s away from jump points
WINDOWS = (MIN_WINDOW - 1, MIN_WINDOW, 120)  # challenge windows posted (the first is refused)
MARGIN = 5  # seconds around a derived deadline where the machine does not predict


@dataclass
class _Chain:
    w3: Web3
    registry: str
    market: str
    game: str
    committee: str
    snapshot: int


_CHAIN: list[_Chain] = []


def deployed_chain() -> _Chain:
    """One deployed chain per process, reused through snapshots (deploying costs seconds)."""
    if not _CHAIN:
        w3 = in_process_web3()
        client = ChainClient(w3)
        d = deploy(
            client,
            client.accounts()[0],
            min_stake_wei=MIN_STAKE,
            unbonding_delay_s=UNBONDING_DELAY,
            slash_amount_wei=SLASH,
            terms=TERMS,
        )
        snap = w3.provider.ethereum_tester.take_snapshot()
        _CHAIN.append(
            _Chain(
                w3, d.registry.address, d.market.address, d.game.address, d.committee.address, snap
            )
        )
    return _CHAIN[0]


@dataclass
class MNode:
    stake: int = 0
    locked: int = 0
    unbonding: int = 0
    unlock_at: int = 0
    registered: bool = False


@dataclass
class MSlot:
    node: str
    digest: bytes | None = None
    committed: bool = False
    revealed: bool = False
    refuted: bool = False
    undecided: bool = False  # a dispute without a verdict (never here: only timeouts settle)


@dataclass
class MJob:
    submitter: str
    reward: int
    k: int
    commit_deadline: int
    reveal_deadline: int
    window: int
    reveal_end: int = 0  # when the k-th slot revealed
    open_disputes: int = 0
    slots: list[MSlot] = field(default_factory=list)
    finalized: bool = False

    def slot(self, node: str) -> MSlot | None:
        return next((s for s in self.slots if s.node == node), None)

    @property
    def challenge_deadline(self) -> int:
        return (self.reveal_end or self.reveal_deadline) + self.window


@dataclass
class MDispute:
    job_id: int
    slot: int
    challenger: str
    defender: str
    deadline: int
    defender_to_move: bool  # who loses on timeout
    settled: bool = False


def survives(s: MSlot) -> bool:
    """Whether a slot counts in the tally: revealed, and neither refuted nor undecided."""
    return s.revealed and not s.refuted and not s.undecided


def survivor_tally(slots: list[MSlot]) -> bytes | None:
    """The contract's tally: the digest a strict majority of the surviving slots revealed, or
    None."""
    survivors = [s.digest for s in slots if survives(s)]
    counts = Counter(survivors)
    return next((d for d, c in counts.items() if 2 * c > len(survivors)), None)


class MarketMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        chain = deployed_chain()
        chain.w3.provider.ethereum_tester.revert_to_snapshot(chain.snapshot)
        self.client = ChainClient(chain.w3)
        self.registry = NodeRegistry(self.client, chain.registry)
        self.market = JobMarket(self.client, chain.market)
        self.game = DisputeGame(self.client, chain.game)
        self.committee = Committee(self.client, chain.committee)
        accounts = self.client.accounts()
        self.nodes = accounts[1:5]
        self.submitters = accounts[5:7]
        self.caller = accounts[9]
        self.model = {a: MNode() for a in self.nodes}
        self.jobs: dict[int, MJob] = {}
        self.disputes: dict[int, MDispute] = {}
        self.credits: Counter[str] = Counter()
        self.tracked = [*accounts, chain.registry, chain.market, chain.game, chain.committee]
        self.start_total = self._total()
        # Three nodes start registered and one job open, so that short runs reach the later
        # phases (commit, reveal, challenge, finalize) often; the fourth node exercises
        # registration.
        for node in self.nodes[:3]:
            self.registry.register(node, b"\x01" * 32, "http://n", MIN_STAKE + SLASH)
            self.model[node] = MNode(stake=MIN_STAKE + SLASH, registered=True)
        self.post(0, 2, 10**6 + 1, 1)

    # -- helpers ---------------------------------------------------------------------------

    def _total(self) -> int:
        balances = sum(self.client.balance(a) for a in self.tracked)
        return balances + sum(self.client.fees_paid.values())

    def _next_ts(self) -> int:
        # py-evm stamps the pending block when it mines the one before (the wall clock, or
        # the latest block's time + 1 once the chain travelled past the clock): the next
        # transaction runs at exactly this time.
        return self.client.next_block_time()

    def _expect(self, error: str | None, action: Callable[[], object], what: str = "") -> bool:
        """Run `action`; it must succeed when `error` is None, else revert with `error`."""
        if error is None:
            action()
            event(f"{what} ok")
            return True
        try:
            action()
        except ContractRevert as exc:
            assert exc.name == error, (exc, error)
            event(error)
            return False
        raise AssertionError(f"expected {error}, the action succeeded")

    def _job_error(self, job_id: int) -> str | None:
        if job_id not in self.jobs:
            return "UnknownJob"
        if self.jobs[job_id].finalized:
            return "JobFinalized"
        return None

    def _open_dispute(self, job_id: int, slot: int, challenger: str) -> bool:
        return any(
            not d.settled and (d.job_id, d.slot, d.challenger) == (job_id, slot, challenger)
            for d in self.disputes.values()
        )

    # -- rules -----------------------------------------------------------------------------

    @rule(i=st.integers(0, 3), stake=st.sampled_from([MIN_STAKE - 1, MIN_STAKE, MIN_STAKE + SLASH]))
    def register(self, i: int, stake: int) -> None:
        node = self.nodes[i]
        m = self.model[node]
        error = (
            "AlreadyRegistered" if m.registered else ("StakeTooLow" if stake < MIN_STAKE else None)
        )
        if self._expect(
            error, lambda: self.registry.register(node, b"\x01" * 32, "http://n", stake), "register"
        ):
            m.registered, m.stake = True, stake

    @rule(i=st.integers(0, 3), amount=st.sampled_from([0, 1, SLASH]))
    def add_stake(self, i: int, amount: int) -> None:
        node = self.nodes[i]
        m = self.model[node]
        error = "NotRegistered" if not m.registered else ("ZeroAmount" if amount == 0 else None)
        if self._expect(error, lambda: self.registry.add_stake(node, amount), "add_stake"):
            m.stake += amount

    @rule(i=st.integers(0, 3), amount=st.sampled_from([1, SLASH, MIN_STAKE]))
    def request_withdrawal(self, i: int, amount: int) -> None:
        node = self.nodes[i]
        m = self.model[node]
        error = None
        if not m.registered:
            error = "NotRegistered"
        elif amount > m.stake - m.locked:
            error = "InsufficientFreeStake"
        ts = self._next_ts()
        if self._expect(
            error, lambda: self.registry.request_withdrawal(node, amount), "request_withdrawal"
        ):
            m.stake -= amount
            m.unbonding += amount
            m.unlock_at = self.registry.get_node(node).unlock_at
            assert ts <= m.unlock_at - UNBONDING_DELAY <= ts + 5

    @rule(i=st.integers(0, 3))
    def withdraw_stake(self, i: int) -> None:
        node = self.nodes[i]
        m = self.model[node]
        ts = self._next_ts()
        if m.unbonding and abs(ts - m.unlock_at) < 10:
            return  # too close to call
        error = None
        if m.unbonding == 0:
            error = "NothingUnbonding"
        elif ts < m.unlock_at:
            error = "UnbondingNotOver"
        if self._expect(error, lambda: self.registry.withdraw_stake(node), "withdraw_stake"):
            m.unbonding = 0

    @rule(
        s=st.integers(0, 1),
        k=st.integers(1, 3),
        reward=st.sampled_from([1, 10**6 + 1, ETHER]),
        w=st.integers(0, len(WINDOWS) - 1),
    )
    def post(self, s: int, k: int, reward: int, w: int) -> None:
        window = WINDOWS[w]
        now = self.client.timestamp()
        error = "ChallengeWindowTooShort" if window < MIN_WINDOW else None
        posted: list[int] = []

        def action() -> None:
            posted.append(
                self.market.post_job(
                    self.submitters[s],
                    b"\x01" * 32,
                    b"\x02" * 32,
                    k,
                    now + COMMIT_IN,
                    now + REVEAL_IN,
                    reward,
                    graph_root=GRAPH_ROOT,
                    trace_leaves=TRACE_LEAVES,
                    challenge_window=window,
                )
            )

        if not self._expect(error, action, "post"):
            return
        [job_id] = posted
        j = self.market.get_job(job_id)
        assert (j.graph_root, j.trace_leaves, j.challenge_window, j.reveal_end) == (
            GRAPH_ROOT,
            TRACE_LEAVES,
            window,
            0,
        )
        self.jobs[job_id] = MJob(
            self.submitters[s], reward, k, j.commit_deadline, j.reveal_deadline, window
        )

    @rule(i=st.integers(0, 3), job_id=st.integers(1, 3))
    def claim(self, i: int, job_id: int) -> None:
        node = self.nodes[i]
        m = self.model[node]
        error = self._job_error(job_id)
        j = self.jobs.get(job_id)
        if error is None and j is not None:
            if self._next_ts() >= j.commit_deadline:
                error = "CommitPhaseOver"
            elif not m.registered:
                error = "NotRegistered"
            elif j.slot(node) is not None:
                error = "AlreadyClaimed"
            elif len(j.slots) >= j.k:
                error = "AllSlotsClaimed"
            elif m.stake < MIN_STAKE:
                error = "StakeTooLow"
            elif m.stake - m.locked < SLASH:
                error = "InsufficientFreeStake"
        if self._expect(error, lambda: self.market.claim_slot(node, job_id), "claim"):
            assert j is not None
            j.slots.append(MSlot(node))
            m.locked += SLASH

    @rule(i=st.integers(0, 3), job_id=st.integers(1, 3), d=st.integers(0, 1))
    def commit(self, i: int, job_id: int, d: int) -> None:
        node = self.nodes[i]
        error = self._job_error(job_id)
        j = self.jobs.get(job_id)
        slot = j.slot(node) if j is not None else None
        if error is None and j is not None:
            if self._next_ts() >= j.commit_deadline:
                error = "CommitPhaseOver"
            elif slot is None:
                error = "NoSlot"
            elif slot.committed:
                error = "AlreadyCommitted"
        if self._expect(
            error, lambda: self.market.commit_result(node, job_id, DIGESTS[d], OP_ROOT), "commit"
        ):
            assert slot is not None
            slot.committed, slot.digest = True, DIGESTS[d]

    @rule(i=st.integers(0, 3), job_id=st.integers(1, 3))
    def reveal(self, i: int, job_id: int) -> None:
        node = self.nodes[i]
        error = self._job_error(job_id)
        j = self.jobs.get(job_id)
        slot = j.slot(node) if j is not None else None
        ts = self._next_ts()
        if error is None and j is not None:
            committed = sum(s.committed for s in j.slots)
            if ts < j.commit_deadline and committed < j.k:
                error = "CommitPhaseNotOver"
            elif ts >= j.reveal_deadline:
                error = "RevealPhaseOver"
            elif slot is None:
                error = "NoSlot"
            elif not slot.committed:
                error = "NotCommitted"
            elif slot.revealed:
                error = "AlreadyRevealed"
        digest = slot.digest if slot is not None and slot.digest is not None else DIGESTS[0]
        if self._expect(
            error, lambda: self.market.reveal(node, job_id, digest, b"\x03" * 32, OP_ROOT), "reveal"
        ):
            assert slot is not None and j is not None
            slot.revealed = True
            if sum(s.revealed for s in j.slots) == j.k:
                # The k-th reveal ends the reveal phase: the challenge window starts now.
                j.reveal_end = self.market.get_job(job_id).reveal_end
                assert ts <= j.reveal_end <= ts + MARGIN
                event("reveal phase ended early")

    @rule(
        c=st.integers(0, 5),
        job_id=st.integers(1, 3),
        slot=st.integers(0, 2),
        kind=st.sampled_from(["refute", "fail", "same"]),
    )
    def challenge(self, c: int, job_id: int, slot: int, kind: str) -> None:
        """A node or a submitter challenges a slot, stating: another op-trace root ("refute":
        the defender moves first), the defender's root with the other result digest ("fail":
        the challenger moves first), or the defender's own execution ("same": refused)."""
        challenger = [*self.nodes, *self.submitters][c]
        j = self.jobs.get(job_id)
        s = j.slots[slot] if j is not None and slot < len(j.slots) else None
        ts = self._next_ts()
        error = "AlreadyChallenging" if self._open_dispute(job_id, slot, challenger) else None
        error = error or self._job_error(job_id)
        if error is None and j is not None:
            if s is None:
                error = "NoSuchSlot"
            elif not s.revealed:
                error = "NotRevealed"
            elif s.refuted:
                error = "SlotRefuted"
            elif abs(ts - j.challenge_deadline) < MARGIN:
                return  # too close to call
            elif ts >= j.challenge_deadline:
                error = "ChallengeWindowOver"
            elif challenger == s.node:
                error = "CannotChallengeOwnSlot"
            elif challenger != j.submitter and not (
                challenger in self.model and self.model[challenger].registered
            ):
                error = "NotAllowedToChallenge"
            elif kind == "same":
                error = "SameExecution"
        defended = s.digest if s is not None and s.digest is not None else DIGESTS[0]
        stated = {
            "refute": (defended, OTHER_ROOT),
            "fail": (DIGESTS[1] if defended == DIGESTS[0] else DIGESTS[0], OP_ROOT),
            "same": (defended, OP_ROOT),
        }[kind]
        opened: list[int] = []

        def action() -> None:
            opened.append(self.game.challenge(challenger, job_id, slot, *stated, BOND))

        if not self._expect(error, action, "challenge"):
            return
        assert j is not None and s is not None
        [dispute_id] = opened
        d = self.game.get_dispute(dispute_id)
        assert ts <= d.deadline - MOVE_WINDOW <= ts + MARGIN
        assert (d.job_id, d.slot, d.challenger, d.defender) == (job_id, slot, challenger, s.node)
        refutable = kind == "refute"
        self.disputes[dispute_id] = MDispute(
            job_id, slot, challenger, s.node, d.deadline, defender_to_move=refutable
        )
        assert self.game.to_move(dispute_id) == (s.node if refutable else challenger)
        j.open_disputes += 1

    @rule(dispute_id=st.integers(1, 3))
    def timeout(self, dispute_id: int) -> None:
        """Anyone ends a dispute whose party missed its move: that party loses."""
        d = self.disputes.get(dispute_id)
        error = None
        if d is None:
            error = "UnknownDispute"
        elif d.settled:
            error = "WrongStage"
        else:
            ts = self._next_ts()
            if abs(ts - d.deadline) < MARGIN:
                return  # too close to call
            if ts < d.deadline:
                error = "MoveDeadlineNotPassed"
        if not self._expect(error, lambda: self.game.timeout(self.caller, dispute_id), "timeout"):
            return
        assert d is not None
        d.settled = True
        j = self.jobs[d.job_id]
        j.open_disputes -= 1
        s = j.slots[d.slot]
        if d.defender_to_move:
            # DefenderWrong: the bond returns to the challenger, and the slot (unless an
            # earlier dispute refuted it already) is refuted, its stake going to the challenger.
            self.credits[d.challenger] += BOND
            if not s.refuted:
                s.refuted = True
                self.credits[d.challenger] += SLASH
                m = self.model[s.node]
                m.locked -= SLASH
                m.stake -= SLASH
            event("timeout refuted the slot")
        else:
            self.credits[d.defender] += BOND  # DefenderRight: the bond goes to the defender

    @rule(job_id=st.integers(1, 3))
    def finalize(self, job_id: int) -> None:
        error = self._job_error(job_id)
        j = self.jobs.get(job_id)
        if error is None and j is not None:
            ts = self._next_ts()
            if abs(ts - j.challenge_deadline) < MARGIN:
                return  # too close to call
            if ts < j.challenge_deadline:
                error = "ChallengeWindowOpen"
            elif j.open_disputes:
                error = "DisputesOpen"
        if not self._expect(error, lambda: self.market.finalize(self.caller, job_id), "finalize"):
            return
        assert j is not None
        j.finalized = True
        winner = survivor_tally(j.slots)
        slashed = [
            s
            for s in j.slots
            if not s.revealed or (survives(s) and winner is not None and s.digest != winner)
        ]
        pool = j.reward + SLASH * len(slashed)
        for s in j.slots:
            if s.refuted:
                continue  # its lock went with the dispute that refuted it
            m = self.model[s.node]
            m.locked -= SLASH
            if s in slashed:
                m.stake -= SLASH
        if winner is None:
            self.credits[j.submitter] += pool
        else:
            winners = [s.node for s in j.slots if survives(s) and s.digest == winner]
            share = pool // len(winners)
            for n, node in enumerate(winners):
                self.credits[node] += share + (pool - share * len(winners) if n == 0 else 0)
        event("finalize accepted" if winner is not None else "finalize refunded")

    @rule(a=st.integers(0, 5))
    def withdraw(self, a: int) -> None:
        account = [*self.nodes, *self.submitters][a]
        error = None if self.credits[account] else "NothingToWithdraw"
        if self._expect(error, lambda: self.market.withdraw(account), "withdraw"):
            self.credits[account] = 0

    @rule(
        k=st.integers(1, 3),
        digests=st.lists(st.integers(0, 1), min_size=3, max_size=3),
        reveals=st.lists(st.booleans(), min_size=3, max_size=3),
        dispute=st.sampled_from([None, "refute", "fail"]),
    )
    def lifecycle(
        self, k: int, digests: list[int], reveals: list[bool], dispute: str | None
    ) -> None:
        """A whole job in one step (post, claims, commits, reveals, maybe a dispute the
        submitter opens on slot 0 and a timeout ends, finalize), through the same predicted
        paths as the single rules, so short runs still settle jobs."""
        self.post(1, k, ETHER + 1, len(WINDOWS) - 1)
        job_id = max(self.jobs)
        for i in range(k):
            self.claim(i, job_id)
            self.commit(i, job_id, digests[i])
        self.advance(1)  # past the commit deadline, before the reveal deadline
        for i in range(k):
            if reveals[i]:
                self.reveal(i, job_id)
        if dispute is not None:
            self.challenge(5, job_id, 0, dispute)
            self.advance(1)  # past the move deadline
            self.timeout(max(self.disputes, default=1))
        j = self.jobs[job_id]
        while self._next_ts() < j.challenge_deadline + MARGIN:
            self.advance(1)
        self.finalize(job_id)

    @rule(steps=st.integers(1, 3))
    def advance(self, steps: int) -> None:
        self.client.advance_time(STEP * steps)

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def chain_matches_model(self) -> None:
        for node, m in self.model.items():
            info = self.registry.get_node(node)
            assert (info.registered, info.stake, info.locked, info.unbonding) == (
                m.registered,
                m.stake,
                m.locked,
                m.unbonding,
            )
            assert info.locked <= info.stake
        for account in [*self.nodes, *self.submitters]:
            assert self.market.credits(account) == self.credits[account]

    @invariant()
    def jobs_match_model(self) -> None:
        for job_id, m in self.jobs.items():
            j = self.market.get_job(job_id)
            assert (j.phase, j.revealed, j.reveal_end, j.open_disputes) == (
                Phase.FINALIZED if m.finalized else Phase.OPEN,
                sum(s.revealed for s in m.slots),
                m.reveal_end,
                m.open_disputes,
            )
            assert j.challenge_deadline == m.challenge_deadline
            slots = self.market.get_slots(job_id)
            assert [(s.node, s.revealed, s.refuted, s.undecided) for s in slots] == [
                (s.node, s.revealed, s.refuted, s.undecided) for s in m.slots
            ]
            if m.finalized:
                winner = survivor_tally(m.slots)
                assert (j.accepted, j.result) == (winner is not None, winner or b"\x00" * 32)

    @invariant()
    def contracts_hold_exactly_what_they_owe(self) -> None:
        bonded = sum(m.stake + m.unbonding for m in self.model.values())
        assert self.client.balance(self.registry.address) == bonded
        escrow = sum(j.reward for j in self.jobs.values() if not j.finalized)
        owed = sum(self.credits.values())
        assert self.client.balance(self.market.address) == escrow + owed
        bonds = BOND * sum(not d.settled for d in self.disputes.values())
        assert self.client.balance(self.game.address) == bonds
        # No dispute here reaches the referee, which holds ether only inside a resolve.
        assert self.client.balance(self.committee.address) == 0

    @invariant()
    def ether_is_conserved(self) -> None:
        assert self._total() == self.start_total


def campaign_settings(examples: int, steps: int, derandomize: bool = True) -> settings:
    """Hypothesis settings for `examples` runs of up to `steps` actions each."""
    return settings(
        max_examples=examples,
        stateful_step_count=steps,
        deadline=None,
        derandomize=derandomize,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
