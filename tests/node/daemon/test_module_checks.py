"""The daemon never parses a module: a checker process does, bounded in number, time and
memory, and the daemon keeps the summary it answers (node/daemon/job_checks.py). A module
that costs a lot to parse then costs a checker process, not the daemon's threads or memory."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from attest.keys import generate_private_key
from compiler import program as program_module
from compiler.config import load_config
from harness.fixture_data import Fixture
from node.daemon import worker
from node.daemon.config import Limits, NodeConfig
from node.daemon.job_checks import ModuleSummary, checked_module
from node.daemon.sandbox import ExecutionProcesses, ModuleCheckRequest
from node.daemon.server import NodeServer
from node.daemon.worker import LARGE_MODULE_BYTES
from node.errors import JobRejected
from node.protocol import JobRequest
from node.sdk import Client
from node.tensors import npy_bytes

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


def chain_module(target_bytes: int) -> str:
    """A valid module of about `target_bytes` of text: a chain of adds on one f32[4]
    parameter (parsing and checking it takes about a second a megabyte)."""
    lines = ["HloModule chain", "", "ENTRY main {", "  p = f32[4] parameter(0)"]
    previous, size = "p", 0
    while size < target_bytes:
        name = f"add.{len(lines)}"
        lines.append(f"  {name} = f32[4] add({previous}, {previous})")
        size += len(lines[-1]) + 1
        previous = name
    return "\n".join([*lines, f"  ROOT out = f32[4] negate({previous})", "}", ""])


def post(url: str, module: str) -> httpx.Response:
    body = JobRequest.inline(module, [npy_bytes(np.ones(4, np.float32))]).body()
    return httpx.post(f"{url}/v1/jobs", json=body, timeout=120)


def test_large_modules_leave_a_checker_to_small_jobs(node: NodeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large modules (over LARGE_MODULE_BYTES) take at most all checkers but one: while the
    large modules' share is taken, another large one gets 503 naming it, and a small job is
    checked and taken at once."""
    large, small = chain_module(LARGE_MODULE_BYTES + 4096), chain_module(2048)
    monkeypatch.setattr(worker, "MODULE_CHECK_WAIT_S", 0.5)
    assert node.pool._large_checks.acquire(timeout=5)  # a large module is being checked
    try:
        refused = post(node.url, large)
        assert refused.status_code == 503 and "checking other large modules" in refused.json()["detail"]
        assert post(node.url, small).status_code == 201
    finally:
        node.pool._large_checks.release()
    assert post(node.url, large).status_code == 201


def test_a_small_job_is_answered_while_two_large_modules_are_checked(node: NodeServer) -> None:
    """Two large modules posted at once, then a small job: the small job's answer comes
    before either large module's (before, the two held both checkers and it waited)."""
    answers: list[tuple[str, int]] = []

    def submit(what: str, module: str) -> None:
        answers.append((what, post(node.url, module).status_code))

    threads = [threading.Thread(target=submit, args=(f"large{i}", chain_module(3 * LARGE_MODULE_BYTES // 2 + i))) for i in range(2)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # both large modules are in the node, one checked, one waiting its turn
    submit("small", chain_module(2048))
    for thread in threads:
        thread.join()
    assert answers[0] == ("small", 201), answers
    assert sorted(answers[1:]) == [("large0", 201), ("large1", 201)]
