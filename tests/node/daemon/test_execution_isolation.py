"""Jobs that cannot take the node down: compile and run happen in an execution process the
daemon kills past the wall limit (even inside one kernel), a job over the memory limit fails
naming it, and a dead execution process fails its job (the second time for good) while the
node answers and runs the next job. (A node killed mid-job redoes it: tests/node/daemon/test_crash.py.)"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from attest.keys import generate_private_key
from harness.fixture_data import Fixture
from harness.hlo_fragments import ADD_F32
from node.daemon.config import Limits, NodeConfig
from node.daemon.server import NodeServer
from node.daemon.store import DONE, FAILED
from node.sdk import Client

KEY = generate_private_key()
MLP = Fixture("mlp_softmax")
WALL_SECONDS = 5.0
# One reduce-window step of 1.1e12 additions (a 1024x1024 window at each of 1025x1025
# places) over 16 MB: a single kernel that runs for minutes on any CPU, from an input of 4
# bytes.
LONG_KERNEL = "HloModule one_long_kernel\n\n" + ADD_F32 + """
ENTRY main {
  x = f32[] parameter(0)
  zero = f32[] constant(0)
  big = f32[2048,2048] broadcast(x), dimensions={}
  ROOT sums = f32[1025,1025] reduce-window(big, zero), window={size=1024x1024}, to_apply=add
}
"""
BIG_ARENA = """HloModule big_arena

ENTRY main {
  x = f32[] parameter(0)
  ROOT b = f32[32768,16384] broadcast(x), dimensions={}
}
"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeServer]:
    limits = Limits(max_flops=10**13, job_wall_seconds=WALL_SECONDS, max_job_memory_bytes=1536 * 1024 * 1024)
    server = NodeServer(NodeConfig(port=0, data_dir=tmp_path_factory.mktemp("isolation"), limits=limits, threads=1), KEY, log_level="warning")
    server.start_in_thread()
    yield server
    server.stop()


def scalar(path: Path) -> Path:
    import numpy as np

    np.save(path, np.float32(1.5))
    return path


def finished(client: Client, job_id: str, timeout: float = 120.0) -> dict:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        info = client.job(job_id).info
        if info["state"] in (DONE, FAILED):
            return info
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


class HealthWatch:
    """Asks /healthz every 50 ms in a thread; every answer must be 200."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.answers.append(httpx.get(f"{self.url}/healthz", timeout=5).status_code)
            except httpx.HTTPError:
                self.answers.append(0)
            time.sleep(0.05)

    def __enter__(self) -> HealthWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def test_a_long_kernel_is_stopped_within_a_second_of_the_limit(node: NodeServer, tmp_path: Path) -> None:
    with Client(node.url) as client, HealthWatch(node.url) as health:
        warm = client.submit(MLP.module_text, MLP.inputs())  # the execution process is up
        assert finished(client, warm.id)["state"] == DONE
        long = client.submit(LONG_KERNEL, [scalar(tmp_path / "x.npy")])
        info = finished(client, long.id)
        assert info["state"] == FAILED
        assert "limits.job_wall_seconds (5.0)" in info["error"] and "killed" in info["error"]
        assert info["updated_at"] - info["created_at"] < WALL_SECONDS + 1.0
        after = client.submit(MLP.module_text, MLP.inputs())
        assert finished(client, after.id)["state"] == DONE
    assert health.answers and set(health.answers) == {200}


def test_a_job_over_the_memory_limit_fails_naming_it(node: NodeServer, tmp_path: Path) -> None:
    with Client(node.url) as client:
        job = client.submit(BIG_ARENA, [scalar(tmp_path / "x.npy")])
        info = finished(client, job.id)
        assert info["state"] == FAILED and "limits.max_job_memory_bytes (1610612736)" in info["error"]
        assert finished(client, client.submit(MLP.module_text, MLP.inputs()).id)["state"] == DONE


def _kill_the_execution_process(node: NodeServer, job_id: str, deaths: int) -> None:
    """SIGKILLs the execution process once the job runs after `deaths` deaths."""
    give_up = time.monotonic() + 60
    while time.monotonic() < give_up:
        job = node.store.get(job_id)
        pids = node.pool.executions.pids()
        if job is not None and job.state == "running" and job.deaths == deaths and pids:
            time.sleep(0.3)  # inside the run
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            return
        time.sleep(0.02)
    raise AssertionError("the job did not start")


def test_a_dead_execution_process_fails_its_job_the_second_time_and_the_node_goes_on(node: NodeServer, tmp_path: Path) -> None:
    with Client(node.url) as client, HealthWatch(node.url) as health:
        job = client.submit(LONG_KERNEL, [scalar(tmp_path / "x.npy")])
        _kill_the_execution_process(node, job.id, 0)  # queued once more
        _kill_the_execution_process(node, job.id, 1)  # failed for good
        info = finished(client, job.id)
        assert info["state"] == FAILED and info["deaths"] == 2
        assert "died (killed by SIGKILL" in info["error"] and "second time" in info["error"]
        assert finished(client, client.submit(MLP.module_text, MLP.inputs()).id)["state"] == DONE
    assert set(health.answers) == {200}


# 6 GiB of output: within the request's memory limit (16 GiB, so the check from the plan,
# which counts the output and its .npy copy, passes), past the execution process's address-space cap (its memory limit, 64 MiB, plus
# sandbox.ADDRESS_SPACE_HEADROOM). Without the cap the allocation would succeed (the kernel
# overcommits) and the job would write 6 GiB.
PAST_THE_CAP = """HloModule past_the_cap

ENTRY main {
  x = f32[] parameter(0)
  ROOT b = f32[49152,32768] broadcast(x), dimensions={}
}
"""


def test_an_allocation_past_the_address_space_cap_fails_the_job_not_the_process(tmp_path: Path) -> None:
    import numpy as np

    from compiler.config import load_config
    from node.daemon.sandbox import ExecutionProcess, ExecutionRequest
    from node.errors import JobRejected
    from node.tensors import npy_bytes
    from node.tracing.statement import tensor_records

    process = ExecutionProcess(load_config(), tmp_path / "cache", memory_limit=64 * 1024 * 1024)
    try:
        limits = Limits(max_flops=10**13, max_job_memory_bytes=16 * 1024**3, job_wall_seconds=60)

        def request(module: str, inputs: list[np.ndarray]) -> ExecutionRequest:
            records = tensor_records([np.asarray(a) for a in inputs], "in")
            return ExecutionRequest(module.encode(), [npy_bytes(a) for a in inputs], limits, 1, None, "j", None, None, "00" * 32, records)

        with pytest.raises(JobRejected, match=r"over limits.max_job_memory_bytes .*an allocation failed"):
            process.execute(request(PAST_THE_CAP, [np.float32(1.0)]))
        # The same process runs the next job.
        answer = process.execute(request(MLP.module_text, MLP.inputs()))
        assert len(answer.outputs) == len(answer.statement.predicate.deterministic.outputs) >= 1
    finally:
        process.close()
