"""The market state machine, shared by its sample in `make test`
(tests/contracts/test_stateful.py) and the long campaigns (tools/market_campaign.py).

Random sequences of register/stake/post/claim/commit/reveal/finalize/withdraw by several
accounts against a Python model of the contracts; the invariants hold after every step.

The model predicts each action's outcome: success (then the chain must agree on credits,
stakes and locks) or the custom error the contract must revert with. Deadlines sit far from
the times the machine jumps to, so block-timestamp jitter never decides an outcome.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from web3 import EthereumTesterProvider, Web3

from node.chain import ChainClient, ContractRevert, JobMarket, NodeRegistry, deploy

# The market's deployment parameters (the contract tests' fixtures deploy with them too,
# tests/contracts/conftest.py).
ETHER = 10**18
MIN_STAKE = 1 * ETHER
UNBONDING_DELAY = 3_600
SLASH = ETHER // 10

DIGESTS = (b"\xaa" * 32, b"\xbb" * 32)
COMMIT_IN, REVEAL_IN, STEP = 300, 600, 400  # deadlines stay >= 100 s away from jump points


@dataclass
class _Chain:
    w3: Web3
    registry: str
    market: str
    snapshot: int


_CHAIN: list[_Chain] = []


def deployed_chain() -> _Chain:
    """One deployed chain per process, reused through snapshots (deploying costs seconds)."""
    if not _CHAIN:
        w3 = Web3(EthereumTesterProvider())
        client = ChainClient(w3)
        d = deploy(
            client,
            client.accounts()[0],
            min_stake_wei=MIN_STAKE,
            unbonding_delay_s=UNBONDING_DELAY,
            slash_amount_wei=SLASH,
        )
        snap = w3.provider.ethereum_tester.take_snapshot()
        _CHAIN.append(_Chain(w3, d.registry.address, d.market.address, snap))
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


@dataclass
class MJob:
    submitter: str
    reward: int
    k: int
    commit_deadline: int
    reveal_deadline: int
    slots: list[MSlot] = field(default_factory=list)
    finalized: bool = False

    def slot(self, node: str) -> MSlot | None:
        return next((s for s in self.slots if s.node == node), None)


class MarketMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        chain = deployed_chain()
        chain.w3.provider.ethereum_tester.revert_to_snapshot(chain.snapshot)
        self.client = ChainClient(chain.w3)
        self.registry = NodeRegistry(self.client, chain.registry)
        self.market = JobMarket(self.client, chain.market)
        accounts = self.client.accounts()
        self.nodes = accounts[1:5]
        self.submitters = accounts[5:7]
        self.caller = accounts[9]
        self.model = {a: MNode() for a in self.nodes}
        self.jobs: dict[int, MJob] = {}
        self.credits: Counter[str] = Counter()
        self.tracked = [*accounts, chain.registry, chain.market]
        self.start_total = self._total()
        # Three nodes start registered and one job open, so that short runs reach the later
        # phases (commit, reveal, finalize) often; the fourth node exercises registration.
        for node in self.nodes[:3]:
            self.registry.register(node, b"\x01" * 32, "http://n", MIN_STAKE + SLASH)
            self.model[node] = MNode(stake=MIN_STAKE + SLASH, registered=True)
        self.post(0, 2, 10**6 + 1)

    # -- helpers ---------------------------------------------------------------------------

    def _total(self) -> int:
        balances = sum(self.client.balance(a) for a in self.tracked)
        return balances + sum(self.client.fees_paid.values())

    def _next_ts(self) -> int:
        return self.client.timestamp() + 1

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

    @rule(s=st.integers(0, 1), k=st.integers(1, 3), reward=st.sampled_from([1, 10**6 + 1, ETHER]))
    def post(self, s: int, k: int, reward: int) -> None:
        now = self.client.timestamp()
        job_id = self.market.post_job(
            self.submitters[s],
            b"\x01" * 32,
            b"\x02" * 32,
            k,
            now + COMMIT_IN,
            now + REVEAL_IN,
            reward,
        )
        j = self.market.get_job(job_id)
        self.jobs[job_id] = MJob(
            self.submitters[s], reward, k, j.commit_deadline, j.reveal_deadline
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
            error, lambda: self.market.commit_result(node, job_id, DIGESTS[d]), "commit"
        ):
            assert slot is not None
            slot.committed, slot.digest = True, DIGESTS[d]

    @rule(i=st.integers(0, 3), job_id=st.integers(1, 3))
    def reveal(self, i: int, job_id: int) -> None:
        node = self.nodes[i]
        error = self._job_error(job_id)
        j = self.jobs.get(job_id)
        slot = j.slot(node) if j is not None else None
        if error is None and j is not None:
            ts = self._next_ts()
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
            error, lambda: self.market.reveal(node, job_id, digest, b"\x03" * 32), "reveal"
        ):
            assert slot is not None
            slot.revealed = True

    @rule(job_id=st.integers(1, 3))
    def finalize(self, job_id: int) -> None:
        error = self._job_error(job_id)
        j = self.jobs.get(job_id)
        if error is None and j is not None:
            revealed = sum(s.revealed for s in j.slots)
            if self._next_ts() < j.reveal_deadline and revealed < j.k:
                error = "RevealPhaseNotOver"
        if not self._expect(error, lambda: self.market.finalize(self.caller, job_id), "finalize"):
            return
        assert j is not None
        j.finalized = True
        counts = Counter(s.digest for s in j.slots if s.revealed)
        winner = next((d for d, c in counts.items() if 2 * c > j.k), None)
        slashed = [
            s for s in j.slots if not s.revealed or (winner is not None and s.digest != winner)
        ]
        pool = j.reward + SLASH * len(slashed)
        for s in j.slots:
            m = self.model[s.node]
            m.locked -= SLASH
            if s in slashed:
                m.stake -= SLASH
        if winner is None:
            self.credits[j.submitter] += pool
        else:
            winners = [s.node for s in j.slots if s.revealed and s.digest == winner]
            share = pool // len(winners)
            for n, node in enumerate(winners):
                self.credits[node] += share + (pool - share * len(winners) if n == 0 else 0)

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
    )
    def lifecycle(self, k: int, digests: list[int], reveals: list[bool]) -> None:
        """A whole job in one step (post, claims, commits, reveals, finalize), through the
        same predicted paths as the single rules, so short runs still settle jobs."""
        self.post(1, k, ETHER + 1)
        job_id = max(self.jobs)
        for i in range(k):
            self.claim(i, job_id)
            self.commit(i, job_id, digests[i])
        self.advance(1)  # past the commit deadline, before the reveal deadline
        for i in range(k):
            if reveals[i]:
                self.reveal(i, job_id)
        self.advance(1)  # past the reveal deadline
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
    def contracts_hold_exactly_what_they_owe(self) -> None:
        bonded = sum(m.stake + m.unbonding for m in self.model.values())
        assert self.client.balance(self.registry.address) == bonded
        escrow = sum(j.reward for j in self.jobs.values() if not j.finalized)
        owed = sum(self.credits.values())
        assert self.client.balance(self.market.address) == escrow + owed

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
