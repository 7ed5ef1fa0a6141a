"""ChainWatcher on the py-evm chain: three watcher-driven nodes and a submitter.

Every scenario is driven by `step()` in a fixed order, with chain time moved explicitly, so
nothing depends on the wall clock. Duplicate transactions are counted two ways: the market's
events per (job, node) and each account's transaction count (its nonce).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from web3 import Web3

from attest import key_id, sign_statement, verify
from attest.digests import digest_of_digests, sha256_hex, tensor_digest
from attest.keys import generate_private_key
from compiler.config import load_config
from compiler.driver import compile_program, graph_commitment
from compiler.program import load_program
from compiler.runtime.executable import Executable
from harness.evm import in_process_web3
from harness.fixture_data import Fixture
from node.chain import (
    ChainClient,
    DisputeGame,
    GameTerms,
    JobMarket,
    NodeRegistry,
    Phase,
    deploy,
    fetch_events,
)
from node.chain.errors import ChainError
from node.chain.state import ChainState, JobState
from node.chain.watcher import (
    AcceptancePolicy,
    ChainJob,
    ChainWatcher,
    ExecutionOutcome,
    JobPending,
    StepReport,
    WatcherConfig,
)
from node.daemon.chain_executor import BlobFetcher, ChainExecutor, op_trace_root_of
from node.daemon.config import Limits
from node.daemon.store import JobStore
from node.daemon.worker import WorkerPool
from node.errors import JobRejected
from node.protocol import (
    chain_digests,
    envelope_digest_of,
    inputs_manifest,
    result_digest_of,
    seal_of,
)
from node.tensors import npy_bytes
from node.tracing.statement import build_statement

ETHER = 10**18
STAKE = 2 * ETHER
SLASH = ETHER // 10
REWARD = 3 * ETHER + 1  # a remainder on purpose
PROGRAM = b"\x01" * 32
INPUTS = b"\x02" * 32
HONEST = bytes.fromhex(sha256_hex(b"honest result"))
WRONG = bytes.fromhex(sha256_hex(b"wrong result"))
# The graph commitment and challenge window of the synthetic jobs (MapExecutor checks
# nothing of the graph: the daemon's executor does, see the last tests).
GRAPH = bytes.fromhex(sha256_hex(b"the jobs' graph"))
LEAVES = 4
WINDOW = GameTerms().min_challenge_window_s


def op_trace_root(result: bytes) -> bytes:
    """The op-trace root of a MapExecutor's execution reaching `result` (equal for equal
    results, as honest executions' are)."""
    return bytes.fromhex(sha256_hex(b"op trace of " + result))


class Crash(BaseException):
    """A simulated kill: not an Exception, so nothing in the watcher swallows it."""


@dataclass
class MapExecutor:
    """Results by program digest; a trace digest per node; optional transient failures."""

    results: dict[bytes, bytes]
    name: str
    fail_transiently: bool = False
    pending: int = 0  # answers of "still running" before the result
    calls: list[int] = field(default_factory=list)

    def check(self, job: ChainJob) -> None:
        if job.program_digest not in self.results:
            raise JobRejected("unknown program")

    def execute(self, job: ChainJob) -> ExecutionOutcome:
        self.calls.append(job.job_id)
        if self.fail_transiently:
            raise RuntimeError("worker busy")
        if self.pending > 0:
            self.pending -= 1
            raise JobPending
        result = self.results[job.program_digest]
        trace = bytes.fromhex(sha256_hex(self.name.encode() + result + job.job_id.to_bytes(32, "big")))
        return ExecutionOutcome(result, trace, op_trace_root(result))


@dataclass
class _Chain:
    w3: Web3
    registry: str
    market: str
    game: str
    block: int
    snapshot: int


@pytest.fixture(scope="module")
def _chain() -> _Chain:
    w3 = in_process_web3()
    client = ChainClient(w3)
    d = deploy(client, client.accounts()[0], min_stake_wei=ETHER, unbonding_delay_s=3_600, slash_amount_wei=SLASH)
    return _Chain(w3, d.registry.address, d.market.address, d.game.address, d.block, w3.provider.ethereum_tester.take_snapshot())


@dataclass
class Net:
    chain: _Chain
    client: ChainClient
    registry: NodeRegistry
    market: JobMarket
    nodes: list[str]
    submitter: str
    tmp: Path

    def watcher(
        self,
        i: int,
        executor: object,
        *,
        market: JobMarket | None = None,
        config: WatcherConfig | None = None,
        policy: object = None,
    ) -> ChainWatcher:
        """A watcher for node `i` over its own state file (the same file on every call)."""
        return ChainWatcher(
            market if market is not None else self.market,
            self.nodes[i],
            executor,  # type: ignore[arg-type]
            self.tmp / f"node{i}.sqlite",
            config=config,
            policy=policy,  # type: ignore[arg-type]
            start_block=self.chain.block,
        )

    def post(
        self, k: int = 3, commit_in: int = 1_000, reveal_in: int = 2_000, program: bytes = PROGRAM, window: int = WINDOW
    ) -> int:
        now = self.client.timestamp()
        return self.market.post_job(
            self.submitter, program, INPUTS, k, now + commit_in, now + reveal_in, REWARD,
            graph_root=GRAPH, trace_leaves=LEAVES, challenge_window=window,
        )  # fmt: skip

    def close_challenges(self, job_id: int) -> None:
        """Move chain time to the job's challenge deadline: the next block may finalize it."""
        self.travel_to(self.market.get_job(job_id).challenge_deadline)

    def travel_to(self, timestamp: int) -> None:
        now = self.client.timestamp()
        if timestamp > now:
            self.client.advance_time(timestamp - now)

    def mine(self, blocks: int) -> None:
        """Mine empty blocks (py-evm's tester; time travel alone mines none here)."""
        self.chain.w3.provider.ethereum_tester.mine_blocks(blocks)

    def nonce(self, account: str) -> int:
        return int(self.client.w3.eth.get_transaction_count(account))

    def events(self, name: str, job_id: int, node: str | None = None) -> list:
        found = fetch_events(self.client, self.market.contract, self.chain.block, names=(name,))
        return [e for e in found if e.args.get("jobId") == job_id and (node is None or e.args.get("node") == node)]


@pytest.fixture
def net(_chain: _Chain, tmp_path: Path) -> Iterator[Net]:
    _chain.w3.provider.ethereum_tester.revert_to_snapshot(_chain.snapshot)
    client = ChainClient(_chain.w3)  # fresh nonce counts: the snapshot rewound them
    accounts = client.accounts()
    registry = NodeRegistry(client, _chain.registry)
    market = JobMarket(client, _chain.market)
    nodes = accounts[1:4]
    for i, node in enumerate(nodes):
        registry.register(node, (i + 1).to_bytes(32, "big"), f"http://node{i}.example", STAKE)
    yield Net(_chain, client, registry, market, nodes, accounts[8], tmp_path)


def drive(watchers: list[ChainWatcher], rounds: int = 6) -> list[StepReport]:
    """Step every watcher in order, `rounds` times."""
    reports = []
    for _ in range(rounds):
        for w in watchers:
            reports.append(w.step())
    return reports


def honest(i: int) -> MapExecutor:
    return MapExecutor({PROGRAM: HONEST}, f"node{i}")


def _assert_one_each(net: Net, job_id: int, node: str, names: tuple[str, ...]) -> None:
    for name in names:
        assert len(net.events(name, job_id, node)) == 1, (name, node)


def test_honest_job_is_claimed_committed_revealed_finalized_and_paid(net: Net) -> None:
    watchers = [net.watcher(i, honest(i)) for i in range(3)]
    nonces = [net.nonce(n) for n in net.nodes]
    balances = [net.client.balance(n) for n in net.nodes]
    fees_before = dict(net.client.fees_paid)
    job_id = net.post()

    drive(watchers)
    net.close_challenges(job_id)
    drive(watchers, rounds=2)

    job = net.market.get_job(job_id)
    assert job.phase == Phase.FINALIZED and job.accepted and job.result == HONEST
    for i, (w, node) in enumerate(zip(watchers, net.nodes, strict=True)):
        record = w.state.job(job_id)
        assert record is not None and record.state == JobState.DONE
        assert record.note == "finalized: our result won"
        _assert_one_each(net, job_id, node, ("SlotClaimed", "Committed", "Revealed"))
        info = net.registry.get_node(node)
        assert info.stake == STAKE and info.locked == 0  # stake unlocked, nothing slashed
        assert net.market.credits(node) == 0  # withdrawn
        fee = net.client.fees_paid.get(node, 0) - fees_before.get(node, 0)
        share = REWARD // 3 + (REWARD % 3 if i == 0 else 0)  # first winner gets the remainder
        assert net.client.balance(node) == balances[i] - fee + share
    assert len(net.events("Finalized", job_id)) == 1
    # claim + commit + reveal + withdraw each, and one finalize between them: nothing more.
    assert sum(net.nonce(n) - before for n, before in zip(net.nodes, nonces, strict=True)) == 3 * 4 + 1


def test_faulty_node_is_outvoted_and_slashed(net: Net) -> None:
    executors = [honest(0), honest(1), MapExecutor({PROGRAM: WRONG}, "node2")]
    watchers = [net.watcher(i, e) for i, e in enumerate(executors)]
    job_id = net.post()

    drive(watchers)
    net.close_challenges(job_id)
    drive(watchers, rounds=2)

    job = net.market.get_job(job_id)
    assert job.accepted and job.result == HONEST
    slashed = net.events("Slashed", job_id)
    assert [e.args["node"] for e in slashed] == [net.nodes[2]]
    assert net.registry.get_node(net.nodes[2]).stake == STAKE - SLASH
    for node in net.nodes:
        assert net.registry.get_node(node).locked == 0
    rewarded = {e.args["node"]: e.args["amount"] for e in net.events("Rewarded", job_id)}
    pool = REWARD + SLASH
    assert rewarded == {net.nodes[0]: pool // 2 + pool % 2, net.nodes[1]: pool // 2}
    faulty = watchers[2].state.job(job_id)
    assert faulty is not None and faulty.note == "finalized: another result won"


class _CrashingMarket(JobMarket):
    """A market binding that dies right after one kind of transaction was mined."""

    crash_after = ""

    def claim_slot(self, sender, job_id):  # noqa: ANN001, ANN201
        result = super().claim_slot(sender, job_id)
        if self.crash_after == "claim":
            raise Crash
        return result

    def commit(self, sender, job_id, seal):  # noqa: ANN001, ANN201
        result = super().commit(sender, job_id, seal)
        if self.crash_after == "commit":
            raise Crash
        return result

    def reveal(self, sender, job_id, result_digest, envelope_digest, op_trace_root):  # noqa: ANN001, ANN201
        result = super().reveal(sender, job_id, result_digest, envelope_digest, op_trace_root)
        if self.crash_after == "reveal":
            raise Crash
        return result


@pytest.mark.parametrize("crash_after", ["claim", "commit", "reveal"])
def test_restarted_node_finishes_without_duplicate_transactions(net: Net, crash_after: str) -> None:
    executor0 = honest(0)
    crashing = _CrashingMarket(net.client, net.market.address)
    crashing.crash_after = crash_after
    doomed = net.watcher(0, executor0, market=crashing)
    others = [net.watcher(i, honest(i)) for i in (1, 2)]
    nonce0 = net.nonce(net.nodes[0])
    job_id = net.post()

    # Nodes 1 and 2 go first, so node 0's commit closes the commit phase and its reveal
    # comes in the same step: every crash point is reached on node 0's first step.
    drive(others, rounds=1)
    with pytest.raises(Crash):
        drive([doomed], rounds=1)
    recorded = doomed.state.job(job_id)
    assert recorded is not None
    # The state file lags the chain by the one transaction that was mined: the worst case.
    expected_lag = {"claim": JobState.SEEN, "commit": JobState.EXECUTED, "reveal": JobState.COMMITTED}
    assert recorded.state == expected_lag[crash_after]

    # A new process: new client (nonces from the chain), new watcher, the same state file.
    client = ChainClient(net.chain.w3)
    restarted = net.watcher(0, executor0, market=JobMarket(client, net.market.address))
    reports = drive([restarted, *others])
    net.close_challenges(job_id)
    reports += drive([restarted, *others], rounds=2)
    finalized_by_0 = any((job_id, "finalize") in r.transactions for r in reports[0::3])

    job = net.market.get_job(job_id)
    assert job.accepted and job.result == HONEST
    _assert_one_each(net, job_id, net.nodes[0], ("SlotClaimed", "Committed", "Revealed"))
    slot0 = [s for s in net.market.get_slots(job_id) if s.node == net.nodes[0]][0]
    assert slot0.result_digest == HONEST
    # Executed once: a crash at the claim comes before execution, a later one after the
    # result was stored, so the restarted node does not run the job again.
    assert len(executor0.calls) == 1
    final = restarted.state.job(job_id)
    assert final is not None and final.state == JobState.DONE
    assert len(net.events("Finalized", job_id)) == 1
    # claim, commit, reveal, withdraw, and the finalize if it was node 0's: never a repeat.
    assert net.nonce(net.nodes[0]) - nonce0 == 4 + int(finalized_by_0)
    assert net.registry.get_node(net.nodes[0]).locked == 0


def test_commit_phase_over_before_claim_expires_the_job_without_transactions(net: Net) -> None:
    watchers = [net.watcher(i, honest(i)) for i in range(3)]
    nonces = [net.nonce(n) for n in net.nodes]
    job_id = net.post(commit_in=100, reveal_in=200)
    net.travel_to(net.market.get_job(job_id).commit_deadline + 1)

    drive(watchers, rounds=2)

    for w in watchers:
        record = w.state.job(job_id)
        assert record is not None and record.state == JobState.EXPIRED
    assert [net.nonce(n) for n in net.nodes] == nonces


def test_node_that_cannot_commit_in_time_fails_the_job_and_is_slashed(net: Net) -> None:
    slow = MapExecutor({PROGRAM: HONEST}, "node2", fail_transiently=True)
    watchers = [net.watcher(0, honest(0)), net.watcher(1, honest(1)), net.watcher(2, slow)]
    job_id = net.post(commit_in=500, reveal_in=1_000)

    drive(watchers, rounds=2)
    record = watchers[2].state.job(job_id)
    assert record is not None and record.state == JobState.CLAIMED and "worker busy" in record.note
    assert len(slow.calls) == 2  # retried on the next step

    job = net.market.get_job(job_id)
    net.travel_to(job.commit_deadline)
    drive(watchers, rounds=1)
    record = watchers[2].state.job(job_id)
    assert record is not None and record.state == JobState.FAILED
    assert len(slow.calls) == 2  # not executed once the deadline had passed
    assert net.market.get_job(job_id).revealed == 2

    net.close_challenges(job_id)  # not every slot revealed: the reveal deadline plus the window
    drive(watchers, rounds=2)
    job = net.market.get_job(job_id)
    assert job.phase == Phase.FINALIZED and job.accepted and job.result == HONEST
    assert [e.args["node"] for e in net.events("Slashed", job_id)] == [net.nodes[2]]
    for w in watchers:
        done = w.state.job(job_id)
        assert done is not None and done.state == JobState.DONE
    assert net.events("Committed", job_id, net.nodes[2]) == []


@dataclass
class DiesWhenRun(MapExecutor):
    """Passes the check before the claim; its run kills the execution process, as a program
    that crashes native code only while running does."""

    def execute(self, job: ChainJob) -> ExecutionOutcome:
        self.calls.append(job.job_id)
        raise JobRejected("execution: the execution process died (killed by SIGSEGV)", 500)


def test_a_job_whose_run_kills_the_execution_process_fails_and_is_never_run_or_claimed_again(net: Net) -> None:
    dying = DiesWhenRun({PROGRAM: HONEST}, "node2")
    watchers = [net.watcher(0, honest(0)), net.watcher(1, honest(1)), net.watcher(2, dying)]
    job_id = net.post(commit_in=500, reveal_in=1_000)

    drive(watchers, rounds=3)
    record = watchers[2].state.job(job_id)
    assert record is not None and record.state == JobState.FAILED
    assert record.note == "refused after claim: execution: the execution process died (killed by SIGSEGV)"
    assert dying.calls == [job_id]
    # Restarted on the same state file: neither run again nor claimed again.
    watchers[2] = net.watcher(2, dying)
    drive(watchers, rounds=3)
    assert dying.calls == [job_id]
    assert len(net.events("SlotClaimed", job_id, net.nodes[2])) == 1

    # The honest two settle it; the slot that could not reveal is slashed (docs/threat-model.md).
    job = net.market.get_job(job_id)
    net.travel_to(job.commit_deadline)
    drive(watchers, rounds=1)
    assert job.revealed == 0 and net.market.get_job(job_id).revealed == 2
    net.close_challenges(job_id)
    drive(watchers, rounds=2)
    job = net.market.get_job(job_id)
    assert job.phase == Phase.FINALIZED and job.accepted and job.result == HONEST
    assert [e.args["node"] for e in net.events("Slashed", job_id)] == [net.nodes[2]]
    assert dying.calls == [job_id]


def test_run_before_claim_skips_a_job_whose_run_kills_the_process_with_no_stake_on_it(net: Net) -> None:
    first = WatcherConfig(run_before_claim=True)
    dying = DiesWhenRun({PROGRAM: HONEST}, "node2")
    runs_first = honest(0)
    watchers = [net.watcher(0, runs_first, config=first), net.watcher(1, honest(1)), net.watcher(2, dying, config=first)]
    job_id = net.post(commit_in=500, reveal_in=1_000)

    drive(watchers, rounds=3)
    record = watchers[2].state.job(job_id)
    assert record is not None and record.state == JobState.SKIPPED
    assert record.note == "refused when run before the claim: execution: the execution process died (killed by SIGSEGV)"
    assert net.events("SlotClaimed", job_id, net.nodes[2]) == []
    assert net.registry.get_node(net.nodes[2]).locked == 0
    # The honest node that runs first claims and commits with the result it had in hand.
    assert runs_first.calls[:2] == [job_id, job_id]
    _assert_one_each(net, job_id, net.nodes[0], ("SlotClaimed", "Committed"))

    job = net.market.get_job(job_id)
    net.travel_to(job.commit_deadline)
    drive(watchers, rounds=1)
    net.close_challenges(job_id)
    drive(watchers, rounds=2)
    job = net.market.get_job(job_id)
    assert job.phase == Phase.FINALIZED and job.accepted and job.result == HONEST and job.revealed == 2
    assert net.events("Slashed", job_id) == []
    assert dying.calls == [job_id]


def test_pending_execution_keeps_the_claim_and_finishes_on_a_later_step(net: Net) -> None:
    executor = MapExecutor({PROGRAM: HONEST}, "node0", pending=1)
    watcher = net.watcher(0, executor)
    job_id = net.post(k=1)

    first = watcher.step()
    assert first.transactions == [(job_id, "claim")]
    record = watcher.state.job(job_id)
    assert record is not None and record.state == JobState.CLAIMED and record.note == ""

    second = watcher.step()
    # k=1: the one commit ends the commit phase and the one reveal the reveal phase; the
    # challenge window follows.
    assert second.transactions == [(job_id, "commit"), (job_id, "reveal")]
    assert len(executor.calls) == 2
    net.close_challenges(job_id)
    assert watcher.step().transactions == [(job_id, "finalize"), (0, "withdraw")]
    assert net.market.get_job(job_id).accepted


class _FlakyCheck(MapExecutor):
    """Admission fails with an unexpected error for one program (a store not reachable)."""

    def check(self, job: ChainJob) -> None:
        if job.program_digest == b"\x07" * 32:
            raise OSError("blob store unreachable")
        super().check(job)


def test_a_job_whose_check_fails_is_retried_and_does_not_hold_up_others(net: Net) -> None:
    watcher = net.watcher(0, _FlakyCheck({PROGRAM: HONEST, b"\x07" * 32: HONEST}, "node0"))
    flaky = net.post(program=b"\x07" * 32)
    fine = net.post()

    report = watcher.step()
    assert [e[0] for e in report.errors] == [flaky] and "unreachable" in report.errors[0][1]
    assert report.transactions == [(fine, "claim"), (fine, "commit")]
    record = watcher.state.job(flaky)
    assert record is not None and record.state == JobState.SEEN  # decided on a later step
    assert watcher.step().errors == [(flaky, "check: blob store unreachable")]


def test_a_chain_error_leaves_the_job_as_it_was(net: Net) -> None:
    # A gas cap below what a claim costs: GasCapExceeded is a chain error, not a revert.
    capped = JobMarket(ChainClient(net.chain.w3, gas_cap=50_000), net.market.address)
    watcher = net.watcher(0, honest(0), market=capped)
    nonce = net.nonce(net.nodes[0])
    job_id = net.post()

    report = watcher.step()
    assert report.transactions == [] and [e[0] for e in report.errors] == [job_id]
    assert "gas" in report.errors[0][1].lower()
    record = watcher.state.job(job_id)
    assert record is not None and record.state == JobState.SEEN
    assert net.nonce(net.nodes[0]) == nonce

    watcher.close()
    fixed = net.watcher(0, honest(0))  # the same state file, a working client
    assert fixed.step().transactions == [(job_id, "claim"), (job_id, "commit")]


@dataclass
class _StopAfterExecuting(MapExecutor):
    """Sets the daemon's stop event from inside a step: `run` then returns after it."""

    stop: threading.Event = field(default_factory=threading.Event)

    def execute(self, job: ChainJob) -> ExecutionOutcome:
        self.stop.set()
        return super().execute(job)


def test_run_steps_until_stopped(net: Net) -> None:
    executor = _StopAfterExecuting({PROGRAM: HONEST}, "node0")
    watcher = net.watcher(0, executor, config=WatcherConfig(poll_interval_s=0.0))
    job_id = net.post()

    watcher.run(executor.stop)  # returns once the step that executed is over

    record = watcher.state.job(job_id)
    assert record is not None and record.state == JobState.COMMITTED
    assert executor.calls == [job_id]


def test_unknown_program_and_policy_refusals_do_not_claim(net: Net) -> None:
    picky = net.watcher(0, honest(0), policy=AcceptancePolicy(min_reward_wei=REWARD + 1))
    other = net.watcher(1, honest(1))
    unknown = net.post(program=b"\x09" * 32)
    cheap = net.post()
    nonces = [net.nonce(n) for n in net.nodes[:2]]

    drive([picky, other], rounds=1)

    rec = picky.state.job(cheap)
    assert rec is not None and rec.state == JobState.SKIPPED and rec.note.startswith("reward")
    rec = other.state.job(unknown)
    assert rec is not None and rec.state == JobState.SKIPPED and "unknown program" in rec.note
    assert net.nonce(net.nodes[0]) == nonces[0]
    # Only the job it knows: claimed and committed (the commit phase stays open for k=3).
    assert net.nonce(net.nodes[1]) == nonces[1] + 2
    _assert_one_each(net, cheap, net.nodes[1], ("SlotClaimed", "Committed"))
    assert net.events("SlotClaimed", unknown) == []


def test_a_reveal_window_too_short_to_count_on_is_declined_before_any_claim(net: Net) -> None:
    """A slot claimed and never revealed is slashed; when fewer than k nodes take a job, the
    reveal runs only after the commit deadline, so a reveal window of a few seconds can pass
    with no block in it. The default policy declines such a job, with no transaction sent."""
    watcher = net.watcher(0, honest(0))
    minimum = AcceptancePolicy().min_reveal_window_s
    tight = net.post(k=5, commit_in=500, reveal_in=500 + minimum - 1)
    enough = net.post(k=5, commit_in=500, reveal_in=500 + minimum)
    nonce = net.nonce(net.nodes[0])

    drive([watcher], rounds=1)

    rec = watcher.state.job(tight)
    assert rec is not None and rec.state == JobState.SKIPPED
    assert rec.note == f"{minimum - 1}s to reveal in, need {minimum}"
    assert net.events("SlotClaimed", tight) == []
    rec = watcher.state.job(enough)
    assert rec is not None and rec.state == JobState.COMMITTED
    assert net.nonce(net.nodes[0]) == nonce + 2  # the second job's claim and commit only


def test_a_challenge_window_longer_than_the_policy_allows_is_declined_before_any_claim(net: Net) -> None:
    """The slot's stake stays locked through the challenge window: the default policy
    declines a job asking for more than a day of it."""
    watcher = net.watcher(0, honest(0))
    longest = AcceptancePolicy().max_challenge_window_s
    too_long = net.post(k=5, window=longest + 1)
    drive([watcher], rounds=1)
    rec = watcher.state.job(too_long)
    assert rec is not None and rec.state == JobState.SKIPPED
    assert rec.note == f"challenge window {longest + 1}s, longer than {longest}s of locked stake"
    assert net.events("SlotClaimed", too_long) == []


def test_log_polling_is_bounded_trails_the_head_and_applies_each_log_once(net: Net) -> None:
    def decline(job: ChainJob, now: int) -> str | None:
        return "observer"

    config = WatcherConfig(confirmations=2, max_blocks_per_step=3, log_chunk=2)
    watcher = net.watcher(0, honest(0), config=config, policy=decline)
    jobs = [net.post() for _ in range(4)]
    net.mine(6)
    head = net.client.block_number()

    reports = []
    while watcher.state.next_block() <= head - 2:
        report = watcher.step()
        assert report.to_block - report.from_block + 1 <= 3
        assert report.to_block <= net.client.block_number() - 2
        reports.append(report)
    assert len(reports) >= 3  # more blocks than one step or one chunk reads
    assert sum(r.new_jobs for r in reports) == 4
    assert [r.job_id for r in watcher.state.jobs()] == jobs

    # Trailing: a job in the head block is not seen until two blocks are on top of it.
    late = net.post()
    assert watcher.step().new_jobs == 0
    assert watcher.state.job(late) is None
    net.mine(1)
    assert watcher.step().new_jobs == 0
    net.mine(1)
    assert watcher.step().new_jobs == 1
    assert watcher.state.job(late) is not None

    # Reading the same logs again (a cursor written back, as after a crash before the
    # cursor moved) applies nothing twice.
    seen = watcher.state.seen_log_count()
    assert seen == 5
    watcher.close()
    db = sqlite3.connect(net.tmp / "node0.sqlite")
    db.execute("UPDATE cursors SET next_block = ? WHERE reader = 'watcher'", (net.chain.block,))
    db.commit()
    db.close()
    reopened = net.watcher(0, honest(0), config=config, policy=decline)
    again = [reopened.step() for _ in range(8)]
    assert sum(r.new_jobs for r in again) == 0
    assert reopened.state.seen_log_count() == seen
    assert all(j.state == JobState.SKIPPED for j in reopened.state.jobs())


def test_state_file_is_bound_to_its_account(net: Net) -> None:
    w = net.watcher(0, honest(0))
    w.close()
    with pytest.raises(Exception, match="chain database"):
        ChainWatcher(net.market, net.nodes[1], honest(1), net.tmp / "node0.sqlite", start_block=net.chain.block)



class TraceExecutor:
    """A real executor: compiles and runs a fixture module, signs the trace, and returns the
    digests the watcher commits to and reveals."""

    def __init__(self, fixture: Fixture, executable: Executable, key: Ed25519PrivateKey) -> None:
        self.program = load_program(fixture.module_text)
        self.executable = executable
        self.inputs = fixture.inputs()
        self.key = key
        self.program_digest = bytes.fromhex(self.program.hlo_hash)
        self.inputs_digest = bytes.fromhex(digest_of_digests([tensor_digest(x) for x in self.inputs]))
        self.envelopes: dict[int, str] = {}

    def check(self, job: ChainJob) -> None:
        if job.program_digest != self.program_digest:
            raise JobRejected("unknown program")
        if job.inputs_digest != self.inputs_digest:
            raise JobRejected("unknown inputs")

    def execute(self, job: ChainJob) -> ExecutionOutcome:
        run = self.executable.run_traced(*self.inputs)
        statement = build_statement(
            self.program,
            self.executable,
            self.inputs,
            run,
            job_id=str(job.job_id),
            chain_id=job.chain_id,
            contract=job.contract,
            key_id=key_id(self.key),
            threads=1,
            timings_ns={"execute": 0},  # fixed: the trace digest must not depend on timing
            op_level=True,
        )
        envelope = sign_statement(statement, self.key).to_json()
        self.envelopes[job.job_id] = envelope
        return ExecutionOutcome(
            result_digest_of([tensor_digest(o) for o in run.outputs]), envelope_digest_of(envelope), op_trace_root_of(statement)
        )


def post_traced(net: Net, executor: TraceExecutor, k: int = 1) -> int:
    """Posts the job a TraceExecutor runs, naming its program's graph commitment."""
    graph = graph_commitment(executor.program, load_config())
    now = net.client.timestamp()
    return net.market.post_job(
        net.submitter, executor.program_digest, executor.inputs_digest, k, now + 1_000, now + 2_000, REWARD,
        graph_root=bytes.fromhex(graph.root), trace_leaves=graph.trace_leaves, challenge_window=WINDOW,
    )  # fmt: skip


def test_real_execution_three_nodes_agree_on_the_result_and_reveal_their_traces(net: Net) -> None:
    fixture = Fixture("integer_arith")
    executable = compile_program(load_program(fixture.module_text), load_config())
    executors = [TraceExecutor(fixture, executable, generate_private_key()) for _ in range(3)]
    watchers = [net.watcher(i, e) for i, e in enumerate(executors)]
    first = executors[0]
    graph = graph_commitment(first.program, load_config())
    job_id = post_traced(net, first, k=3)

    drive(watchers, rounds=3)
    net.close_challenges(job_id)
    drive(watchers, rounds=2)

    job = net.market.get_job(job_id)
    assert job.accepted
    # The committed result is the digest of the outputs XLA itself computed (integers: exact).
    assert job.result == result_digest_of([tensor_digest(o) for o in fixture.xla_outputs()])
    slots = {s.node: s for s in net.market.get_slots(job_id)}
    for node, executor in zip(net.nodes, executors, strict=True):
        envelope = executor.envelopes[job_id]
        assert slots[node].envelope_digest == envelope_digest_of(envelope)
        # A trace bound to this job, chain and contract, signed by this node's key.
        statement = verify(
            envelope,
            [executor.key.public_key()],
            job_id=str(job_id),
            chain_id=net.client.chain_id,
            contract=net.market.address,
        )
        assert statement.predicate.key_id == key_id(executor.key)
        # The reveal carries the op-trace root of that signed trace: the execution commitment
        # a dispute walks, one leaf per instruction of the job's graph.
        op_trace = statement.predicate.deterministic.op_trace
        assert op_trace is not None and len(op_trace.instructions) == graph.trace_leaves
        assert slots[node].op_trace_root.hex() == op_trace.merkle_root
    assert len({slots[n].envelope_digest for n in net.nodes}) == 3  # one signed trace per node
    assert len({slots[n].op_trace_root for n in net.nodes}) == 1  # one honest execution


def test_finalize_waits_for_the_challenge_deadline_without_sending_anything_before(net: Net) -> None:
    """Every slot revealed ends the reveal phase; the job settles only once the challenge
    window after it is over (the contract refuses finalize before), and the watchers send no
    transaction that the contract would refuse meanwhile."""
    watchers = [net.watcher(i, honest(i)) for i in range(3)]
    job_id = net.post(window=600)

    drive(watchers, rounds=3)
    job = net.market.get_job(job_id)
    assert job.revealed == 3 and job.reveal_end > 0 and job.challenge_deadline == job.reveal_end + 600
    assert all(w.state.job(job_id).state == JobState.REVEALED for w in watchers)  # type: ignore[union-attr]
    nonces = [net.nonce(n) for n in net.nodes]
    net.travel_to(job.challenge_deadline - 1)  # the next block: one second short
    reports = drive(watchers, rounds=2)
    assert all(r.transactions == [] and r.errors == [] for r in reports)
    assert [net.nonce(n) for n in net.nodes] == nonces  # nothing sent, nothing reverted
    assert net.market.get_job(job_id).phase == Phase.OPEN

    net.close_challenges(job_id)
    drive(watchers, rounds=2)
    assert net.market.get_job(job_id).phase == Phase.FINALIZED
    assert len(net.events("Finalized", job_id)) == 1
    assert all(w.state.job(job_id).state == JobState.DONE for w in watchers)  # type: ignore[union-attr]


def test_finalize_waits_while_a_dispute_is_open_and_a_refuted_slot_is_noted(net: Net) -> None:
    """A dispute open on the job holds its settlement past the challenge deadline; once it is
    over (the defender, whose watcher plays no game, times out and is refuted), the job
    settles among the surviving slots and the refuted node's record says so."""
    watchers = [net.watcher(i, honest(i)) for i in range(3)]
    game = DisputeGame(net.client, net.chain.game)
    job_id = net.post()
    drive(watchers, rounds=3)
    assert net.market.get_slots(job_id)[0].node == net.nodes[0]

    # The submitter challenges slot 0 with another execution of the same result.
    dispute_id = game.challenge(net.submitter, job_id, 0, HONEST, op_trace_root(WRONG), game.challenge_bond())
    assert net.market.get_job(job_id).open_disputes == 1
    net.close_challenges(job_id)
    nonces = [net.nonce(n) for n in net.nodes]
    reports = drive(watchers, rounds=2)
    assert all(r.transactions == [] for r in reports) and [net.nonce(n) for n in net.nodes] == nonces
    assert net.market.get_job(job_id).phase == Phase.OPEN

    net.travel_to(game.get_dispute(dispute_id).deadline)
    game.timeout(net.submitter, dispute_id)
    assert net.market.get_slots(job_id)[0].refuted
    drive(watchers, rounds=2)
    job = net.market.get_job(job_id)
    assert job.phase == Phase.FINALIZED and job.accepted and job.result == HONEST
    assert watchers[0].state.job(job_id).note == "finalized: our slot was refuted by a dispute"  # type: ignore[union-attr]
    assert watchers[1].state.job(job_id).note == "finalized: our result won"  # type: ignore[union-attr]


def test_the_daemons_executor_refuses_another_graph_before_the_claim_and_reveals_its_traces_root(net: Net) -> None:
    """The node's own executor (node.daemon.chain_executor) behind the watcher: a job whose
    graph commitment is not the one this node's compile of its program gives is refused by
    the check, before any claim, naming both roots; a job that names the right one is run,
    and its commit and reveal carry the op-trace root of the trace the node signed."""
    fixture = Fixture("integer_arith")
    module = fixture.module_text.encode()
    store = JobStore(net.tmp / "node0")
    pool = WorkerPool(store, generate_private_key(), Limits())
    state_path = net.tmp / "node0.sqlite"
    state = ChainState(state_path, chain_id=net.client.chain_id, contract=net.market.address, account=net.nodes[0], start_block=net.chain.block)
    executor = ChainExecutor(pool, BlobFetcher(store, lambda: []), state)
    try:
        inputs = [store.blobs.put(npy_bytes(x)) for x in fixture.inputs()]
        store.blobs.put(module)
        store.blobs.put(inputs_manifest(inputs))
        program, inputs_digest = chain_digests(module, inputs)
        graph = graph_commitment(load_program(fixture.module_text), load_config(), fixture.inputs())
        other = bytes.fromhex(sha256_hex(b"another graph"))
        now = net.client.timestamp()

        def post(root: bytes) -> int:
            return net.market.post_job(
                net.submitter, program, inputs_digest, 1, now + 1_000, now + 2_000, REWARD,
                graph_root=root, trace_leaves=graph.trace_leaves, challenge_window=WINDOW,
            )  # fmt: skip

        refused, taken = post(other), post(bytes.fromhex(graph.root))
        watcher = net.watcher(0, executor)
        nonce = net.nonce(net.nodes[0])
        for _ in range(600):  # the check and the run answer JobPending until done
            watcher.step()
            states = (watcher.state.job(refused).state, watcher.state.job(taken).state)  # type: ignore[union-attr]
            if states == (JobState.SKIPPED, JobState.REVEALED):
                break
            time.sleep(0.05)
        record = watcher.state.job(refused)
        assert record is not None and record.state == JobState.SKIPPED
        assert record.note.startswith("refused: graph commitment differs")
        assert other.hex() in record.note and graph.root in record.note
        assert net.events("SlotClaimed", refused) == []
        # The other job: claimed, committed and revealed, and nothing else sent.
        assert net.nonce(net.nodes[0]) == nonce + 3
        [slot] = net.market.get_slots(taken)
        envelope = store.blobs.get(slot.envelope_digest.hex())
        statement = verify(envelope, [pool.signing_key.public_key()], job_id=str(taken), chain_id=net.client.chain_id, contract=net.market.address)
        op_trace = statement.predicate.deterministic.op_trace
        assert op_trace is not None and len(op_trace.instructions) == graph.trace_leaves
        assert slot.op_trace_root.hex() == op_trace.merkle_root
        assert watcher.state.job(taken).op_trace_root == slot.op_trace_root  # type: ignore[union-attr]
        assert executor.record(net.market.address, taken).op_trace_root == op_trace.merkle_root  # type: ignore[union-attr]
        assert slot.seal == seal_of(net.nodes[0], taken, slot.result_digest, slot.op_trace_root)
        # A record made before op-trace roots were recorded: the root is read from its trace.
        older = state.execution(net.market.address, taken)
        assert older is not None and older.pop("op_trace_root") == op_trace.merkle_root
        state.record_execution(net.market.address, taken, older)
        outcome = executor.execute(watcher.chain_job(watcher.state.job(taken)))  # type: ignore[arg-type]
        assert outcome.op_trace_root == slot.op_trace_root
        assert state.execution(net.market.address, taken)["op_trace_root"] == op_trace.merkle_root  # type: ignore[index]
        watcher.close()
    finally:
        executor.close()
        pool.executions.close()
        pool.checkers.close()
        state.close()
        store.close()


class _CommitFailsOnce(JobMarket):
    """A market binding whose first commit fails as an unreachable node would."""

    failed = False

    def commit(self, sender, job_id, seal):  # noqa: ANN001, ANN201
        if not self.failed:
            self.failed = True
            raise ChainError("the RPC endpoint went away")
        return super().commit(sender, job_id, seal)


def test_a_job_recorded_without_its_op_trace_root_is_read_again_or_failed_with_a_note(net: Net) -> None:
    """Rows from before op-trace roots were recorded (schema 4): a job executed but not
    committed gets its outcome, root included, from the executor again; one committed under a
    seal without a root cannot be revealed here, and says so instead of trying."""
    executor = honest(0)
    flaky = _CommitFailsOnce(net.client, net.market.address)
    watcher = net.watcher(0, executor, market=flaky)
    executed, committed = net.post(), net.post()
    report = watcher.step()
    assert [state for _, state in report.transactions] == ["claim", "claim", "commit"]
    assert watcher.state.job(executed).state == JobState.EXECUTED  # type: ignore[union-attr]
    assert watcher.state.job(committed).state == JobState.COMMITTED  # type: ignore[union-attr]
    with sqlite3.connect(net.tmp / "node0.sqlite") as db:  # what a schema 4 file migrated holds
        db.execute("UPDATE jobs SET op_trace_root = NULL")
    db.close()

    assert watcher.step().transactions == [(executed, "commit")]
    again = watcher.state.job(executed)
    assert again is not None and again.state == JobState.COMMITTED and again.op_trace_root == op_trace_root(HONEST)
    assert executor.calls == [executed, committed, executed]  # read again, once
    failed = watcher.state.job(committed)
    assert failed is not None and failed.state == JobState.FAILED
    assert failed.note.startswith("committed before op-trace roots were recorded")
