"""Load test of one node: starts `vxla node run` as a child process on a free loopback port
(temporary data directory and encrypted key), submits many small distinct jobs from
`--concurrency` client threads, waits for all of them and checks that none is lost; prints
jobs per second, submit-to-done latency percentiles and where the CPU time went.

    python bench/load.py [--jobs 200] [--concurrency 8] [--workers 1] [--sdk-client] [--json]

The load generator shares the host's cores with the node it measures, so it costs as little
as it can: the measured jobs are the SDK's own requests (`node.sdk.inline_job_request`),
encoded before the measured window and posted on keep-alive connections. `--sdk-client`
submits them through `Client.submit` instead, which encodes each job as it is sent (a few
milliseconds of the load generator's CPU a job, taken from the node). Results are checked
through the SDK either way.

A job is lost when it is missing, not `done`, shares a trace digest with another job (two
distinct jobs never have the same deterministic trace), or its outputs do not match the
digests its trace records. A sample of traces is also verified end to end (signature with
the node's public key, recompile, re-execute). Exit status 0 when none is lost, 1 otherwise.

Latency is measured by the node's own clock: from the moment the job is stored (its
`created_at`) to the moment it is marked done (`updated_at`), so client polling does not
inflate it. Throughput is jobs / (last job done - first submission started). Before that,
a warm-up that is not counted runs one job of each fixture per worker: the measured jobs
find the execution processes started and their executables compiled, the node's steady
state.

Where the time goes: the CPU seconds of the node, of its execution processes and of the
load generator over the measured window, per job, and the share of the host's cores left
idle (`cpu` in the report).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.client
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Run from a checkout without installing: the repository root holds `node` and `harness`.
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402
import numpy as np  # noqa: E402
import psutil  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey  # noqa: E402

from attest import init_key_files, load_private_key  # noqa: E402
from harness.fixture_data import Fixture  # noqa: E402
from node.sdk import Client, inline_job_request  # noqa: E402
from node.tensors import npy_bytes  # noqa: E402
from node.tracing.verify import verify_trace  # noqa: E402

# Small fixtures: one float model and one integer module, so both kinds of kernels run.
FIXTURES = ("mlp_softmax", "integer_arith")
PASSPHRASE = "load-bench"


@dataclass
class NodeProcess:
    """A `vxla node run` child process and what is needed to restart it on the same data."""

    directory: Path
    config: Path
    public_key: Ed25519PublicKey
    process: subprocess.Popen[bytes] | None = None
    url: str = ""
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.directory / "node.log"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def start(self, timeout: float = 60.0) -> str:
        """Starts the node (again, on the same data dir and key); returns its URL. The log
        goes to a file, not a pipe: a pipe nobody reads fills up and blocks the node."""
        env = {**os.environ, "VXLA_KEY_PASSPHRASE": PASSPHRASE}
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "node.cli", "node", "run", "--config", str(self.config)],
                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log.read_bytes()[offset:].decode("utf-8", "replace")
            match = re.search(r"serving (http://\S+)", text)
            if match:
                self.url = match.group(1)
                return self.url
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"the node did not report its URL; log:\n{self.log.read_text()[-4000:]}")

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM (clean shutdown), SIGKILL if it does not stop in time; the exit status."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode


def new_node(directory: Path, *, workers: int = 1, limits: str = "", auth: bool = False) -> NodeProcess:
    """A node config under `directory` (loopback, port 0: the OS picks a free port), with a
    new passphrase-encrypted key; `limits` is extra TOML for a [limits] table; `auth`: the
    node requires tokens (`[auth] required`)."""
    directory.mkdir(parents=True, exist_ok=True)
    keys = init_key_files(directory / "keys", passphrase=PASSPHRASE.encode())
    config = directory / "node.toml"
    config.write_text(
        f'[node]\nhost = "127.0.0.1"\nport = 0\ndata_dir = "{directory / "data"}"\n'
        f'key_file = "{keys.private_path}"\nworkers = {workers}\n'
        + (f"\n[limits]\n{limits}\n" if limits else "")
        + ("\n[auth]\nrequired = true\n" if auth else "")
    )
    public_key = load_private_key(keys.private_path, PASSPHRASE.encode()).public_key()
    return NodeProcess(directory, config, public_key)


@functools.cache
def base_inputs(fixture: Fixture) -> tuple[np.ndarray, ...]:
    """The fixture's inputs, read from disk once (the load generator must cost the machine
    as little as it can: it shares the cores with the node it measures)."""
    return tuple(fixture.inputs())


def varied_inputs(fixture: Fixture, seed: int) -> list[np.ndarray]:
    """The fixture's inputs with their values replaced from `seed` (same dtypes and shapes),
    so every job is a distinct computation with its own trace digest."""
    rng = np.random.default_rng(seed)
    arrays = []
    for base in base_inputs(fixture):
        if np.issubdtype(base.dtype, np.integer):
            info = np.iinfo(base.dtype)
            arrays.append(
                rng.integers(info.min, info.max, size=base.shape, dtype=base.dtype, endpoint=True)
            )
        else:
            arrays.append((base + rng.normal(0.0, 0.1, size=base.shape)).astype(base.dtype))
    return arrays


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds so far of the node, its execution processes and this load generator,
    and the host's idle seconds (all cores), at one moment."""

    node: float
    execution: dict[int, float]
    load_generator: float
    host_idle: float
    at: float

    @classmethod
    def take(cls, node_pid: int) -> CpuSample:
        node = psutil.Process(node_pid)
        execution = {}
        for child in node.children(recursive=True):
            with contextlib.suppress(psutil.Error):  # one that ended meanwhile
                execution[child.pid] = _busy(child.cpu_times())
        idle = psutil.cpu_times().idle
        return cls(_busy(node.cpu_times()), execution, _busy(psutil.Process().cpu_times()), idle, time.monotonic())

    def since(self, earlier: CpuSample, jobs: int) -> dict[str, float]:
        """Milliseconds of CPU a job by process between the two samples, the share of the
        host's cores left idle, and how many execution processes were sampled. The kernel
        counts CPU in clock ticks (10 ms), so a few small warm jobs can show 0 ms."""
        execution = sum(v - earlier.execution.get(pid, 0.0) for pid, v in self.execution.items())
        cores = psutil.cpu_count() or 1
        per_job = 1000 / max(jobs, 1)
        return {
            "node_ms_per_job": (self.node - earlier.node) * per_job,
            "execution_processes_ms_per_job": execution * per_job,
            "load_generator_ms_per_job": (self.load_generator - earlier.load_generator) * per_job,
            "host_idle_share": (self.host_idle - earlier.host_idle) / max(cores * (self.at - earlier.at), 1e-9),
            "execution_processes": len(self.execution),
        }


def _busy(times: Any) -> float:
    return float(times.user + times.system)


@dataclass(frozen=True)
class Planned:
    """One job of the load: which fixture, and the seed of its inputs."""

    index: int
    fixture: str
    seed: int


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p90": 0.0, "p99": 0.0, "max": 0.0}
    array = np.asarray(values, dtype=np.float64)
    return {
        "p50": float(np.percentile(array, 50)),
        "p90": float(np.percentile(array, 90)),
        "p99": float(np.percentile(array, 99)),
        "max": float(array.max()),
    }


def run_load(
    node: NodeProcess, jobs: int, concurrency: int, *, seed: int = 0, verify_sample: int = 4,
    timeout: float = 600.0, workers: int = 1, lean: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Submits `jobs` jobs to the running `node` from `concurrency` threads, waits for all,
    checks them and returns the report (see the module docstring). `lean`: the measured jobs
    are posted as request bodies encoded beforehand (False: through `Client.submit`)."""
    fixtures = {name: Fixture(name) for name in FIXTURES}
    modules = {name: fixture.module_text for name, fixture in fixtures.items()}
    plan = [Planned(i, FIXTURES[i % len(FIXTURES)], seed * 1_000_003 + i) for i in range(jobs)]
    clients = [Client(node.url, trusted_keys=[node.public_key]) for _ in range(concurrency)]

    def submit(planned: Planned) -> str:
        client = clients[planned.index % concurrency]
        fixture = fixtures[planned.fixture]
        return client.submit(modules[planned.fixture], varied_inputs(fixture, planned.seed)).id

    def request_body(planned: Planned) -> bytes:
        inputs = [npy_bytes(a) for a in varied_inputs(fixtures[planned.fixture], planned.seed)]
        return json.dumps(inline_job_request(modules[planned.fixture], inputs)).encode()

    address = urllib.parse.urlsplit(node.url)
    connections = threading.local()
    opened: list[http.client.HTTPConnection] = []

    def post(body: bytes) -> str:
        """POST /v1/jobs on this thread's keep-alive connection: the SDK's request, encoded
        before the measured window (see the module docstring)."""
        connection = getattr(connections, "http", None)
        if connection is None:
            connection = connections.http = http.client.HTTPConnection(address.hostname, address.port, timeout=timeout)
            opened.append(connection)
        connection.request("POST", "/v1/jobs", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = response.read()
        if response.status != 201:
            raise RuntimeError(f"POST /v1/jobs answered {response.status}: {answer[:500]!r}")
        return str(json.loads(answer)["id"])

    # Warm-up, not counted: one job of each fixture per worker, so the measured jobs find
    # the execution processes started and the executables compiled (small jobs with cache
    # hits, the node's steady state).
    warm_up = time.time()
    warm_plan = [Planned(jobs + i, FIXTURES[i % len(FIXTURES)], seed * 1_000_003 + jobs + i) for i in range(len(FIXTURES) * workers)]
    with ThreadPoolExecutor(concurrency) as pool:
        for job in list(pool.map(lambda p: clients[p.index % concurrency].job(submit(p)), warm_plan)):
            job.wait(timeout=timeout, poll_seconds=0.05)
    bodies = [request_body(planned) for planned in plan] if lean else []
    assert node.process is not None
    cpu_before = CpuSample.take(node.process.pid)
    started = time.time()
    try:
        with ThreadPoolExecutor(concurrency) as pool:
            ids = list(pool.map(post, bodies) if lean else pool.map(submit, plan))
        submitted = time.time()
        # Wait on the node's counts (one request per poll) rather than polling every job.
        deadline = time.monotonic() + timeout
        while True:
            counts = httpx.get(f"{node.url}/readyz", timeout=30).json()["jobs"]
            if counts["done"] + counts["failed"] >= jobs + len(warm_plan) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        cpu = CpuSample.take(node.process.pid).since(cpu_before, jobs)
        with ThreadPoolExecutor(concurrency) as pool:
            infos = list(pool.map(lambda i: clients[0].job(i).info, ids))
        problems: list[str] = []
        if len(set(ids)) != jobs:
            problems.append(f"{jobs - len(set(ids))} duplicate job id(s)")
        not_done = [info["id"] for info in infos if info["state"] != "done"]
        problems += [f"job {job_id} not done" for job_id in not_done]
        traces = [info["statement_digest"] for info in infos if info["state"] == "done"]
        if len(set(traces)) != len(traces):
            problems.append(f"{len(traces) - len(set(traces))} done job(s) share a trace digest")

        def check_outputs(job_id: str) -> str | None:
            try:
                # Each output's bytes against its blob digest and its array against the trace.
                clients[0].job(job_id).outputs()
            except Exception as error:  # any failure is a lost job; name it and go on
                return f"job {job_id}: {type(error).__name__}: {error}"
            return None

        done_ids = [info["id"] for info in infos if info["state"] == "done"]
        with ThreadPoolExecutor(concurrency) as pool:
            problems += [p for p in pool.map(check_outputs, done_ids) if p is not None]
        verified = 0
        for planned, job_id in list(zip(plan, ids, strict=True))[
            :: max(1, jobs // max(1, verify_sample))
        ][:verify_sample]:
            if job_id not in done_ids:
                continue
            fixture = fixtures[planned.fixture]
            report = verify_trace(
                clients[0].job(job_id).trace(), [node.public_key],
                module_source=fixture.module_text, inputs=varied_inputs(fixture, planned.seed),
            )  # fmt: skip
            if (
                report.ok
                and report.statement is not None
                and report.statement.predicate.job_id == job_id
            ):
                verified += 1
            else:
                problems.append(
                    f"job {job_id}: trace does not verify: {[c.message for c in report.failed]}"
                )
    finally:
        for client in clients:
            client.close()
        for connection in opened:
            connection.close()
    finished = max(
        (info["updated_at"] for info in infos if info["state"] == "done"), default=time.time()
    )
    wall = max(finished - started, 1e-9)
    latencies = [
        info["updated_at"] - info["created_at"] for info in infos if info["state"] == "done"
    ]
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "done": len(done_ids),
        # Lost: submitted and not done. Other problems (mismatched outputs, shared traces,
        # traces that do not verify) are listed in `problems` and fail the run as well.
        "lost": jobs - len(done_ids),
        "problems": problems,
        "traces_verified": verified,
        "warm_up_seconds": started - warm_up,
        "submit_seconds": submitted - started,
        "wall_seconds": wall,
        "jobs_per_second": len(done_ids) / wall,
        "latency_seconds": percentiles(latencies),
        # Where the time went in the measured window (psutil; the host's cores are shared by
        # the node, its execution processes and this load generator).
        "cpu": cpu,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=200, help="jobs to submit (default 200)")
    parser.add_argument(
        "--concurrency", type=int, default=8, help="client threads submitting (default 8)"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="the node's worker threads (default 1)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the jobs' inputs (default 0)")
    parser.add_argument(
        "--verify-sample", type=int, default=4, help="traces verified end to end (default 4)"
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for all jobs (default 600)"
    )
    parser.add_argument(
        "--sdk-client", action="store_true",
        help="submit the measured jobs through Client.submit (encoding each job as it is sent) "
        "instead of posting request bodies encoded beforehand",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.concurrency < 1 or args.workers < 1:
        parser.error("--jobs, --concurrency and --workers must be at least 1")
    with tempfile.TemporaryDirectory(prefix="vxla-load-") as directory:
        node = new_node(Path(directory), workers=args.workers)
        node.start()
        try:
            report = run_load(
                node, args.jobs, args.concurrency, seed=args.seed,
                verify_sample=args.verify_sample, timeout=args.timeout, workers=args.workers,
                lean=not args.sdk_client,
            )  # fmt: skip
        finally:
            report_exit = node.stop()
    report["node_exit_status"] = report_exit
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        latency = report["latency_seconds"]
        print(
            f"{report['done']}/{report['jobs']} jobs done, {report['lost']} lost, "
            f"{report['traces_verified']} traces verified"
        )
        print(
            f"{report['jobs_per_second']:.1f} jobs/s over {report['wall_seconds']:.2f} s "
            f"(concurrency {report['concurrency']}, submitting took {report['submit_seconds']:.2f} s, "
            f"after a warm-up of {report['warm_up_seconds']:.2f} s)"
        )
        print(
            "submit-to-done latency: "
            + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in latency.items())
        )
        cpu = report["cpu"]
        print(
            f"CPU a job: node {cpu['node_ms_per_job']:.2f} ms, execution processes "
            f"{cpu['execution_processes_ms_per_job']:.2f} ms, load generator "
            f"{cpu['load_generator_ms_per_job']:.2f} ms; host cores idle {cpu['host_idle_share']:.0%}"
        )
        for problem in report["problems"]:
            print(f"  problem: {problem}")
    return 0 if report["lost"] == 0 and not report["problems"] else 1


if __name__ == "__main__":
    sys.exit(main())
