"""The store against disk faults: a damaged blob is repaired by storing it again; a damaged
database is refused at open, naming it; a full disk gives 507s naming it and /readyz 503
until space is back; a job whose outcome the store cannot record is tried again, then put
back in the queue, never left running; a read-only data directory at start is a clear error.

Full and read-only disks are real ones: small tmpfs mounts (which needs root, as CI has)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from attest.digests import sha256_hex
from attest.keys import generate_private_key
from harness.fixture_data import Fixture
from node.cli import main
from node.daemon.config import NodeConfig
from node.daemon.server import NodeServer
from node.daemon.store import SMALL_BLOB_BYTES, BlobDamaged, JobStore
from node.sdk import Client
from node.sqlite import StorageError
from tests.node.cli.test_daemon_cli import write_config

MLP = Fixture("mlp_softmax")
KEY = generate_private_key()
needs_root = pytest.mark.skipif(os.geteuid() != 0 or not sys.platform.startswith("linux"), reason="mounting a small filesystem needs root on Linux")


def fill(path: Path) -> None:
    """Writes `path` until its filesystem has no room left."""
    with path.open("wb") as handle:
        try:
            while True:
                handle.write(bytes(64 * 1024))
                handle.flush()
        except OSError:
            pass


@contextmanager
def mounted(directory: Path, options: str) -> Iterator[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)], check=True)
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=False)


def test_a_damaged_blob_is_repaired_by_storing_it_again(tmp_path: Path) -> None:
    store = JobStore(tmp_path)
    try:
        small, large = b"s" * 100, b"L" * (SMALL_BLOB_BYTES + 1)
        digests = store.blobs.put_all([small, large])
        # Bit rot: the row's bytes and the file's bytes change under their digests.
        with store._database.transaction() as db:
            db.execute("UPDATE blobs SET data = ? WHERE digest = ?", (b"t" * 100, digests[0]))
        path = store.blobs.path(digests[1])
        path.write_bytes(b"M" + large[1:])
        for digest in digests:
            with pytest.raises(BlobDamaged, match="damaged"):
                store.blobs.get(digest)
        assert store.blobs.put_all([small, large]) == digests  # a client uploads them again
        assert [store.blobs.get(d) for d in digests] == [small, large]
    finally:
        store.close()


def test_a_damaged_database_is_refused_at_open_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = JobStore(tmp_path / "data")
    digest = store.blobs.put(b"x" * 1000)
    for _ in range(200):
        store.add_job(digest, [])
    store.close()
    database = tmp_path / "data" / "jobs.sqlite3"
    data = bytearray(database.read_bytes())
    page = 4096
    assert len(data) > 8 * page
    data[3 * page : 5 * page] = b"\xa5" * (2 * page)  # two pages of b-tree overwritten
    database.write_bytes(bytes(data))
    with pytest.raises(StorageError, match="jobs.sqlite3: the database is damaged"):
        JobStore(tmp_path / "data")
    keys = tmp_path / "keys"
    assert main(["keys", "init", "--dir", str(keys)]) == 0
    config = write_config(tmp_path, keys / "node.key")
    capsys.readouterr()
    assert main(["node", "run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert "node.data_dir" in err and "damaged" in err and "jobs.sqlite3" in err


@needs_root
def test_a_read_only_data_dir_at_start_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = tmp_path / "keys"
    assert main(["keys", "init", "--dir", str(keys)]) == 0
    with mounted(tmp_path / "data", "ro,size=1m"):
        config = write_config(tmp_path, keys / "node.key")
        capsys.readouterr()
        assert main(["node", "run", "--config", str(config)]) == 2
        err = capsys.readouterr().err
        assert "node.data_dir" in err and "cannot be written" in err and "Traceback" not in err


@needs_root
def test_a_full_disk_is_a_507_and_not_ready_until_space_is_back(tmp_path: Path) -> None:
    with mounted(tmp_path / "data", "size=3m"):
        server = NodeServer(NodeConfig(port=0, data_dir=tmp_path / "data"), KEY, log_level="warning")
        server.start_in_thread()
        filler = tmp_path / "data" / "filler"
        try:
            assert httpx.get(f"{server.url}/readyz", timeout=30).status_code == 200
            fill(filler)  # the disk fills up
            data = os.urandom(SMALL_BLOB_BYTES * 3)
            answer = httpx.put(f"{server.url}/v1/blobs/{sha256_hex(data)}", content=data, timeout=30)
            assert answer.status_code == 507, answer.text
            assert "storage is full" in answer.json()["detail"]
            ready = httpx.get(f"{server.url}/readyz", timeout=30)
            assert ready.status_code == 503 and "full" in ready.json()["store"]
            filler.unlink()  # space is back
            assert httpx.get(f"{server.url}/readyz", timeout=30).status_code == 200
            assert httpx.put(f"{server.url}/v1/blobs/{sha256_hex(data)}", content=data, timeout=30).status_code == 201
            with Client(server.url) as client:
                job = client.submit(MLP.module_text, MLP.inputs())
                job.wait(timeout=120)
                assert job.state == "done"
        finally:
            server.stop()


def test_an_outcome_the_store_refuses_is_tried_again_then_the_job_is_queued(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from node.daemon import worker as worker_module

    monkeypatch.setattr(worker_module, "RECORD_FIRST_WAIT_S", 0.05)
    server = NodeServer(NodeConfig(port=0, data_dir=tmp_path / "data"), KEY, log_level="warning")
    store = server.store
    real_finish = store.finish
    failures = {"left": 2}

    def failing_finish(*args, **kwargs):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise StorageError("data: the node's storage is full (injected)", 507)
        return real_finish(*args, **kwargs)

    monkeypatch.setattr(store, "finish", failing_finish)
    server.start_in_thread()
    try:
        with Client(server.url) as client:
            # Two failures, then the store takes it: the job is done, its outcome recorded once.
            job = client.submit(MLP.module_text, MLP.inputs())
            job.wait(timeout=120)
            assert job.state == "done" and failures["left"] == 0
            # The store refuses every try: the job is not left running, it is queued again
            # (and runs once the store takes the outcome).
            failures["left"] = worker_module.RECORD_TRIES
            real_requeue = store.requeue
            requeued: list[str] = []
            monkeypatch.setattr(store, "requeue", lambda job_id: (requeued.append(job_id), real_requeue(job_id))[1])
            second = client.submit(MLP.module_text, [a + 1 for a in MLP.inputs()])
            second.wait(timeout=120)
            assert second.state == "done" and requeued == [second.id]
    finally:
        server.stop()
