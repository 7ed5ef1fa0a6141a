"""A seeded chaos campaign on a devnet (harness/chaos.py): three node processes take four
chain jobs with redundancy 2 while nodes are killed and restarted, the RPC endpoint goes
away and comes back, the chain is reorganized shallower and deeper than `confirmations`,
and chain time jumps. Every fault kind is injected at least once. The long campaigns are
`tools/chaos_devnet.py`."""

from __future__ import annotations

from pathlib import Path

from harness.chaos import FAULTS, REORG_RACES, ChaosPlan, run_campaign


def test_every_job_settles_no_honest_slash_no_transaction_twice_and_nodes_match_the_chain(tmp_path: Path) -> None:
    # Five faults: each kind once, in FAULTS' order (the long campaigns draw more).
    plan = ChaosPlan(nodes=3, jobs=4, k=2, faults=len(FAULTS), seed=20261203)
    lines: list[str] = []
    report = run_campaign(tmp_path, plan, lines.append)
    print(report.summary())
    assert report.problems == [], "\n".join(lines + [report.summary()])
    assert all(report.injected[name] >= 1 for name in FAULTS), report.injected
    assert len(report.jobs) == plan.jobs and report.finalized == report.accepted == plan.jobs
    assert report.slashed == 0
    # Lost races between honest nodes; a step a reorg made early is one too, and the harness
    # excused each only where a reorg dropped a transaction of that job (problems is empty).
    assert set(report.lost_races) <= {"AllSlotsClaimed", "JobFinalized", *REORG_RACES}, report.lost_races
