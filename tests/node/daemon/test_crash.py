"""Crash tests: a real `vxla node run` child process is killed with SIGKILL at points of the
jobs' lives chosen from a seed (mid-execution with other jobs queued, twice in a row, and
right after a job finished), restarted on the same data directory each time, and then:

- every submitted job is done, exactly once: one store row per submission, no other row;
- a job finished before a kill is not run again (its row is untouched by the restart);
- every blob under its digest's name still hashes to that digest, and each done job's
  outputs and envelope are there;
- the trace digest (the deterministic part of the statement) of each job equals the one of
  the same job run again without interruption, and the envelope names the job's own id;
- the SQLite store passes `PRAGMA integrity_check` after every kill.

The state at each kill is read from the store file after the process is dead, so the test
fails if a kill did not land where it was meant to.
"""

from __future__ import annotations

import json
import random
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from attest import Statement
from attest.digests import sha256_hex
from harness.bench_load import bench
from harness.fixture_data import Fixture
from node.sdk import Client, NodeError
from node.tracing.verify import parse_envelope, verify_trace

SEED = 20261130
# Trip count of the long job's runtime-bounded loop: 0.5 to 5 s of execution (20 to 200 ns an
# iteration, by host: a node's runs check their deadline in every iteration), so a kill drawn
# in its first 0.3 s lands mid-execution.
LONG_TRIPS = 25_000_000
KILL_WITHIN_S = 0.3
FORI = Fixture("fori_loop")
MLP = Fixture("mlp_softmax")




def long_inputs(trips: int) -> list[np.ndarray]:
    arrays = FORI.inputs()
    arrays[3] = np.array(trips, dtype=np.int32)
    return arrays


def short_inputs(seed: int) -> list[np.ndarray]:
    return bench.varied_inputs(MLP, seed)


def job_state(url: str, job_id: str) -> str:
    return str(httpx.get(f"{url}/v1/jobs/{job_id}", timeout=10).json()["state"])


def wait_state(url: str, job_id: str, state: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while job_state(url, job_id) != state:
        assert time.monotonic() < deadline, f"job {job_id} never became {state}"
        time.sleep(0.01)


def rows(data_dir: Path) -> dict[str, dict[str, Any]]:
    """The store's rows by job id, read with sqlite3 from a dead node's files (a JobStore
    would requeue running jobs on open and hide what the kill left)."""
    with sqlite3.connect(data_dir / "jobs.sqlite3") as db:
        db.row_factory = sqlite3.Row
        return {r["id"]: dict(r) for r in db.execute("SELECT * FROM jobs ORDER BY seq")}


def integrity(data_dir: Path) -> str:
    with sqlite3.connect(data_dir / "jobs.sqlite3") as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def check_blobs(data_dir: Path) -> set[str]:
    """Every blob, a row of the database or a file under a digest name, hashes to its digest;
    returns the digests."""
    with sqlite3.connect(data_dir / "jobs.sqlite3") as db:
        stored = {digest: bytes(data) for digest, data in db.execute("SELECT digest, data FROM blobs")}
    for path in (data_dir / "blobs").glob("??/*"):
        if len(path.name) == 64 and not path.name.startswith("."):
            stored[path.name] = path.read_bytes()
    for digest, data in stored.items():
        assert sha256_hex(data) == digest, f"blob {digest}: bytes do not match"
    return set(stored)


def kill_and_check(node: Any) -> dict[str, dict[str, Any]]:
    node.kill()
    assert integrity(node.data_dir) == "ok"
    check_blobs(node.data_dir)
    return rows(node.data_dir)


def test_sigkill_at_seeded_points_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    node = bench.new_node(tmp_path / "node", workers=1, limits=f"max_while_iterations = {2 * LONG_TRIPS}")
    submitted: dict[str, list[np.ndarray]] = {}
    try:
        url = node.start()
        with Client(url) as client:
            long_id = client.submit(FORI.module_text, long_inputs(LONG_TRIPS)).id
            submitted[long_id] = long_inputs(LONG_TRIPS)
            # One worker: these wait behind the long job.
            for _ in range(3):
                seed = rng.randrange(1 << 30)
                submitted[client.submit(MLP.module_text, short_inputs(seed)).id] = short_inputs(seed)

        # Kill 1: mid-execution of the long job, the short ones still queued.
        wait_state(url, long_id, "running")
        time.sleep(rng.uniform(0.05, KILL_WITHIN_S))
        state = kill_and_check(node)
        assert state[long_id]["state"] == "running", "the kill did not land mid-execution"
        assert [state[i]["state"] for i in submitted if i != long_id] == ["queued"] * 3
        assert set(state) == set(submitted)

        # Kill 2: the redone long job killed mid-execution again, at another drawn point.
        url = node.start()
        wait_state(url, long_id, "running")
        time.sleep(rng.uniform(0.05, KILL_WITHIN_S))
        state = kill_and_check(node)
        assert state[long_id]["state"] == "running", "the second kill did not land mid-execution"
        assert set(state) == set(submitted)

        # Kill 3: right after a drawn short job finished.
        url = node.start()
        target = rng.choice([i for i in submitted if i != long_id])
        wait_state(url, target, "done", timeout=120)
        state = kill_and_check(node)
        assert state[target]["state"] == "done" and state[long_id]["state"] == "done"
        finished_before = {i: row for i, row in state.items() if row["state"] == "done"}

        # Restart and let everything finish.
        url = node.start()
        with Client(url, trusted_keys=[node.public_key]) as client:
            jobs = {i: client.job(i).wait(timeout=120) for i in submitted}
            final = {i: job.info for i, job in jobs.items()}
            # The uninterrupted runs: the same jobs again on this node, not killed.
            reference = {
                i: client.submit(FORI.module_text if i == long_id else MLP.module_text, arrays).wait(timeout=120).info
                for i, arrays in submitted.items()
            }
            for job_id, info in final.items():
                assert info["statement_digest"] == reference[job_id]["statement_digest"], job_id
                assert info["output_digests"] == reference[job_id]["output_digests"], job_id
                statement = Statement.from_json_bytes(parse_envelope(jobs[job_id].trace()).payload)
                assert statement.predicate.job_id == job_id
                jobs[job_id].outputs()  # blobs against the digests the trace records
            # One short job's trace verified end to end (signature, recompile, re-execute).
            short_id = next(i for i in submitted if i != long_id)
            report = verify_trace(
                jobs[short_id].trace(), [node.public_key], module_source=MLP.module_text, inputs=submitted[short_id]
            )
            assert report.ok, [c.message for c in report.failed]
        assert node.stop() == 0
    finally:
        node.kill()

    state = rows(node.data_dir)
    assert integrity(node.data_dir) == "ok"
    # One row per submission (the crashed ones plus the reference runs), every one done once.
    assert len(state) == 2 * len(submitted)
    assert set(submitted) <= set(state)
    assert all(row["state"] == "done" and row["error"] is None for row in state.values())
    assert len({row["seq"] for row in state.values()}) == len(state)
    # Jobs finished before the last kill were not run again after it.
    for job_id, row in finished_before.items():
        assert state[job_id] == row, f"job {job_id} changed after it was done"
    blobs = check_blobs(node.data_dir)
    for row in state.values():
        for digest in [*json.loads(row["output_digests"]), row["envelope_digest"], row["module_digest"]]:
            assert digest in blobs


def test_sigkill_during_a_burst_of_submissions(tmp_path: Path) -> None:
    """Killed while clients are submitting: every job the node acknowledged (201) is in the
    store after the kill, the store is intact, and after a restart every stored job finishes
    with outputs matching its trace and the trace digest of an uninterrupted run."""
    rng = random.Random(SEED + 1)
    node = bench.new_node(tmp_path / "node", workers=1)
    acked: dict[str, int] = {}
    lock = threading.Lock()
    seeds = iter(range(10_000))

    def submitter() -> None:
        # Submits until the node is gone; the submission in flight at the kill fails.
        with Client(node.url, timeout=10) as client:
            while True:
                with lock:
                    seed = next(seeds)
                try:
                    job_id = client.submit(MLP.module_text, short_inputs(seed)).id
                except (httpx.HTTPError, NodeError):
                    return
                with lock:
                    acked[job_id] = seed

    try:
        node.start()
        threads = [threading.Thread(target=submitter) for _ in range(4)]
        for thread in threads:
            thread.start()
        # Killed a moment into the burst: once the node (its checker process up) takes jobs.
        deadline = time.monotonic() + 60
        while not acked and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(0.2, 1.0))
        state = kill_and_check(node)
        for thread in threads:
            thread.join(30)
        assert acked, "no submission was acknowledged before the kill"
        missing = set(acked) - set(state)
        assert not missing, f"acknowledged jobs lost by the kill: {sorted(missing)}"
        assert {row["state"] for row in state.values()} <= {"queued", "running", "done"}

        url = node.start()
        with Client(url, trusted_keys=[node.public_key]) as client:
            jobs = {i: client.job(i).wait(timeout=120) for i in state}
            for job in jobs.values():
                job.outputs()
            traces = [job.info["statement_digest"] for job in jobs.values()]
            assert len(set(traces)) == len(traces)  # distinct inputs, distinct executions
            for job_id in rng.sample(sorted(acked), min(2, len(acked))):
                again = client.submit(MLP.module_text, short_inputs(acked[job_id])).wait(timeout=120)
                assert again.info["statement_digest"] == jobs[job_id].info["statement_digest"]
        assert node.stop() == 0
    finally:
        node.kill()
    final = rows(node.data_dir)
    assert integrity(node.data_dir) == "ok"
    assert set(state) <= set(final) and all(row["state"] == "done" for row in final.values())
    check_blobs(node.data_dir)


def children_of(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def test_a_killed_node_leaves_no_execution_process_running(tmp_path: Path) -> None:
    trips = 2_000_000_000  # a run of half a minute or more: an orphan would outlive the check
    node = bench.new_node(tmp_path / "node", workers=1, limits=f"max_while_iterations = {trips}")
    try:
        url = node.start()
        with Client(url) as client:
            long_id = client.submit(FORI.module_text, long_inputs(trips)).id
        wait_state(url, long_id, "running")
        assert node.process is not None
        # Compiled and running: on a loaded machine the compile can take seconds, with the
        # child's main thread asleep while LLVM's threads work, so it is watched, not timed.
        deadline = time.monotonic() + 60.0
        while True:
            children = children_of(node.process.pid)
            if any(_status(pid).startswith("r") for pid in children):
                break
            assert time.monotonic() < deadline, f"the job runs in a child process: {[(pid, _status(pid)) for pid in children]}"
            time.sleep(0.05)
        node.kill()
        deadline = time.monotonic() + 5.0
        while any(Path(f"/proc/{pid}").exists() and "zombie" not in _status(pid) for pid in children):
            assert time.monotonic() < deadline, f"execution processes {children} outlived the node"
            time.sleep(0.05)
    finally:
        node.kill()


def _status(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/status").read_text().split("State:", 1)[1].split("\n", 1)[0].strip().lower()
    except (OSError, IndexError):
        return "zombie"
