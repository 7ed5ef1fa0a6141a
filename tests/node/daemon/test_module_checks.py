"""The daemon never parses a module: a checker process does, bounded in number, time and
memory, and the daemon keeps the summary it answers (node/daemon/job_checks.py). A module
that costs a lot to parse then costs a checker process, not the daemon's threads or memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from attest.keys import generate_private_key
from compiler import program as program_module
from compiler.config import load_config
from harness.fixture_data import Fixture
from node.daemon.config import Limits, NodeConfig
from node.daemon.job_checks import ModuleSummary, checked_module
from node.daemon.sandbox import ExecutionProcesses, ModuleCheckRequest
from node.daemon.server import NodeServer
from node.errors import JobRejected
from node.sdk import Client

MLP = Fixture("mlp_softmax")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeServer]:
    server = NodeServer(NodeConfig(port=0, data_dir=tmp_path_factory.mktemp("checks")), generate_private_key(), log_level="warning")
    server.start_in_thread()
    yield server
    server.stop()


def test_the_daemon_takes_jobs_without_parsing_a_module(node: NodeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsing is made impossible in this process, the daemon's: jobs are still checked
    (a bad module still gets its located 400) and run, by the checker and execution
    processes."""

    def no_parsing(*_args, **_kwargs):
        raise AssertionError("the daemon parsed a module")

    monkeypatch.setattr(program_module, "load_module", no_parsing)
    with Client(node.url) as client:
        job = client.submit(MLP.module_text, MLP.inputs())
        job.wait(timeout=120)
        assert job.state == "done", job.info
    bad = httpx.post(f"{node.url}/v1/jobs", json={"module": "HloModule m\nENTRY e {\n  ROOT r = f32[] bogus()\n}\n", "inputs": []}, timeout=60)
    assert bad.status_code == 400 and "line 3, column 18: unknown opcode 'bogus'" in bad.json()["detail"]
    assert node.pool.checkers.pids(), "no checker process runs"


def test_a_summary_round_trips_what_the_daemon_needs() -> None:
    summary = ModuleSummary.of(*checked_module(MLP.module_text.encode(), Limits()))
    again = ModuleSummary.from_json(summary.to_json())
    assert again == summary and len(again.parameter_shapes) == len(MLP.inputs())


def test_when_every_checker_is_busy_a_request_gets_503_not_a_queue(tmp_path: Path) -> None:
    checkers = ExecutionProcesses(load_config(), tmp_path / "cache", 1 << 30, count=1)
    try:
        assert checkers._free.acquire(timeout=1)  # the one checker is taken
        with pytest.raises(JobRejected) as refused:
            checkers.check_module(ModuleCheckRequest(MLP.module_text.encode(), Limits()), wait_s=0.2)
        assert refused.value.status == 503 and "checker processes busy" in str(refused.value)
        checkers._free.release()
        summary = checkers.check_module(ModuleCheckRequest(MLP.module_text.encode(), Limits()), wait_s=5)
        assert summary.hlo_hash == ModuleSummary.of(*checked_module(MLP.module_text.encode(), Limits())).hlo_hash
    finally:
        checkers.close()
