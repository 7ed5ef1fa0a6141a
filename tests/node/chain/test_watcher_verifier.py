"""The verifier role: re-execution of other nodes' revealed jobs, sampling, restarts."""

from __future__ import annotations

from dataclasses import dataclass, field

from node.chain import Phase
from node.chain.state import VerificationStatus
from node.chain.verifier import ChainVerifier, VerifierConfig
from node.chain.watcher import ChainJob, ExecutionOutcome, JobPending
from tests.node.chain.test_watcher import (  # noqa: F401  (_chain and net are fixtures)
    HONEST,
    PROGRAM,
    WRONG,
    MapExecutor,
    Net,
    _chain,
    drive,
    honest,
    net,
)


@dataclass
class SlowFirst:
    """An executor whose first answer is 'still running' (a worker pool), then honest."""

    inner: MapExecutor
    pending: int = 1
    calls: list[int] = field(default_factory=list)

    def check(self, job: ChainJob) -> None:
        self.inner.check(job)

    def execute(self, job: ChainJob) -> ExecutionOutcome:
        self.calls.append(job.job_id)
        if self.pending > 0:
            self.pending -= 1
            raise JobPending
        return self.inner.execute(job)


def _verifier(net: Net, executor: object, fraction: float = 1.0) -> ChainVerifier:  # noqa: F811
    return ChainVerifier(
        net.market,
        net.client.accounts()[5],
        executor,  # type: ignore[arg-type]
        net.tmp / "verifier.sqlite",
        config=VerifierConfig(fraction=fraction),
        start_block=net.chain.block,
    )


def test_verifier_records_the_faulty_commitment_before_any_reveal(net: Net) -> None:  # noqa: F811
    executors = [honest(0), honest(1), MapExecutor({PROGRAM: WRONG}, "node2")]
    watchers = [net.watcher(i, e) for i, e in enumerate(executors)]
    verifier_executor = SlowFirst(honest(9))
    verifier = _verifier(net, verifier_executor)
    job_id = net.post(commit_in=500, reveal_in=1_000)
    watchers[2].step()  # the faulty node claims and commits first

    assert verifier.step() == []  # the re-execution is still running
    (decided,) = verifier.step()
    assert (decided.node, decided.status) == (net.nodes[2], VerificationStatus.MISMATCH)
    # Known from the seal alone, while the commit phase is still open: nothing revealed.
    job = net.market.get_job(job_id)
    assert job.phase == Phase.OPEN and job.committed == 1 and job.revealed == 0
    assert WRONG.hex() not in decided.note and HONEST.hex() in decided.note  # only the seal is public

    drive(watchers[:2], rounds=1)  # the honest commitments
    assert {(r.node, r.status) for r in verifier.step()} == {
        (net.nodes[0], VerificationStatus.MATCH),
        (net.nodes[1], VerificationStatus.MATCH),
    }
    drive(watchers, rounds=3)  # reveals
    net.close_challenges(job_id)
    drive(watchers, rounds=2)  # finalize
    assert net.market.get_job(job_id).phase == Phase.FINALIZED
    assert verifier.step() == []  # reveals and finalize add nothing to check
    (bad,) = verifier.mismatches()
    assert bad.node == net.nodes[2] and bad.local_result == HONEST
    assert bad.seal == net.market.get_slots(job_id)[0].seal  # the faulty node claimed slot 0
    assert len(verifier_executor.calls) == 2  # one pending answer, then one run for all three

    # A restart re-reads nothing twice and keeps the records.
    verifier.close()
    again = _verifier(net, honest(9))
    assert again.step() == []
    assert len(again.state.verifications()) == 3 and len(again.mismatches()) == 1


def test_verifier_samples_a_fraction_of_jobs(net: Net) -> None:  # noqa: F811
    watcher = net.watcher(0, honest(0))
    jobs = [net.post(k=1) for _ in range(8)]  # k=1: one reveal per job, fewer transactions
    executor = honest(9)
    verifier = _verifier(net, executor, fraction=0.5)
    drive([watcher], rounds=2)
    assert len(verifier.step()) == len(jobs)

    chosen = {j for j in jobs if verifier.sampled(j)}
    assert 0 < len(chosen) < len(jobs)  # 8 jobs at one half: both kinds (fixed by the address)
    assert sorted(set(executor.calls)) == sorted(chosen)
    for r in verifier.state.verifications():
        expected = VerificationStatus.MATCH if r.job_id in chosen else VerificationStatus.NOT_SAMPLED
        assert r.status == expected
