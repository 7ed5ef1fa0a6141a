"""An execution process holds nothing of the node's secrets (node/daemon/confinement.py):
against a real `vxla node run` process started with the key passphrase and a chain private key
in its environment, neither is in the node's environment once it serves nor in its execution
processes', and /readyz says what confines them; a process confined the same way runs a job
with its compile cache and cannot open the key file, read the daemon's /proc files, write
elsewhere, connect over TCP or signal the daemon."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from node.daemon.confinement import _readable_by_others, execution_user, landlock_abi
from tests.node.cli.test_daemon_cli import REPO, start_node, stop_node

CHAIN_KEY = "0x" + "ab" * 32
linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="confinement is Linux's (other systems: docs/threat-model.md)")


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, monkeypatch_module) -> Iterator[tuple[str, subprocess.Popen]]:
    monkeypatch_module.setenv("VXLA_CHAIN_PRIVATE_KEY", CHAIN_KEY)  # read, not used: no chain RPC is set
    url, process = start_node(tmp_path_factory.mktemp("confined"))
    yield url, process
    stop_node(process)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _execution_processes(pid: int) -> list[psutil.Process]:
    return [child for child in psutil.Process(pid).children() if "multiprocessing" in " ".join(child.cmdline())]


@linux
def test_no_secret_is_in_the_node_or_its_execution_processes(node: tuple[str, subprocess.Popen]) -> None:
    url, process = node
    assert httpx.get(f"{url}/readyz", timeout=30).status_code == 200
    children = _execution_processes(process.pid)
    assert children, "the node started no execution process"
    for pid in (process.pid, *(child.pid for child in children)):
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        for secret in (b"VXLA_KEY_PASSPHRASE=secret", CHAIN_KEY.encode()):
            assert secret not in environ, f"process {pid} still holds a secret in its environment"
        # The daemon's variables keep their names in its initial block, with their values overwritten.
        assert b"VXLA_KEY_PASSPHRASE" not in environ or pid == process.pid


@linux
def test_readyz_says_what_confines_the_execution_processes(node: tuple[str, subprocess.Popen]) -> None:
    url, _ = node
    deadline = time.monotonic() + 120
    while "execution" not in (ready := httpx.get(f"{url}/readyz", timeout=30).json()) and time.monotonic() < deadline:
        time.sleep(0.2)  # the first execution process is still starting
    assert_confined(ready["execution"])


def assert_confined(report: dict) -> None:
    """What a child process's report of its confinement must say on this host: Landlock
    where the kernel has it, and the execution user (or root without capabilities). The
    drawing processes are checked by it too (test_graph_flood.py)."""
    abi = landlock_abi()
    assert report["landlock_abi"] == abi and report["files_restricted"] == (abi > 0)
    assert report["network_denied"] == (abi >= 4)
    if os.geteuid() == 0:
        assert report["uid"] != 0 or report["no_capabilities"]
    assert report["uid"] == (execution_user() or (os.getuid(), os.getgid()))[0]


PROBE = """
import json, os, socket, sys, threading
from pathlib import Path
import compiler.driver
from compiler.codegen import llvm_workers, partition
from node.daemon.confinement import execution_user, hand_over
from node.daemon.sandbox import confine_execution
from harness.fixture_data import Fixture
fixture = Fixture("mlp_softmax")
text, inputs = fixture.module_text, fixture.inputs()  # read before confining
cache, key = Path(sys.argv[1]), Path(sys.argv[2])
user = execution_user()
hand_over(cache, user)
fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
confinement = confine_execution(fd, user)
outputs = compiler.compile(text, cache_dir=f"/proc/self/fd/{fd}").run(*inputs)
report = {"confinement": confinement.to_dict(), "ran": len(outputs), "cached": len(os.listdir(f"/proc/self/fd/{fd}"))}
# A program in parts: an LLVM worker process starts, confined as this one, and compiles some.
partition.PART_LINES, os.environ[llvm_workers.JOBS_ENV] = 300, "2"
compiler.compile(text, cache_dir=False).run(*inputs)
# On a busy machine this process may compile every part before the worker has started; the
# worker still starts (or fails to), and is idle again once its helper thread ends.
for thread in threading.enumerate():
    if thread.name.startswith("vxla-llvm-"):
        thread.join(120)
report["workers started"] = sum(worker.started for worker in llvm_workers._IDLE._workers)
attempts = {
    "key file": lambda: key.read_bytes(),
    "daemon environ": lambda: Path(f"/proc/{os.getppid()}/environ").read_bytes(),
    "write outside": lambda: Path(sys.argv[3]).write_text("x"),
    "tcp": lambda: socket.create_connection(("127.0.0.1", int(sys.argv[4])), timeout=2),
    "signal the daemon": lambda: os.kill(os.getppid(), 0),
}
for name, attempt in attempts.items():
    try:
        attempt()
        report[name] = "allowed"
    except OSError as error:
        report[name] = type(error).__name__
print(json.dumps(report))
"""


@linux
def test_a_confined_process_runs_a_job_and_reaches_nothing_else(tmp_path: Path) -> None:
    key = tmp_path / "keys" / "node.key"
    key.parent.mkdir(mode=0o700)
    key.write_bytes(b"the signing key")
    key.chmod(0o600)
    with __import__("socket").create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-c", PROBE, str(tmp_path / "cache"), str(key), str(tmp_path / "elsewhere"), str(port)],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout)
    confinement = report["confinement"]
    assert report["ran"] == 2 and report["cached"] >= 2  # the job ran (two outputs), its entry was written
    assert report["workers started"] == 1
    if confinement["files_restricted"] or confinement["uid"] != os.getuid():
        assert report["key file"] == "PermissionError"
    if confinement["files_restricted"]:
        assert report["daemon environ"] == "PermissionError"
        assert report["write outside"] == "PermissionError"
        assert not (tmp_path / "elsewhere").exists()
    if confinement["network_denied"]:
        assert report["tcp"] == "PermissionError"
    if confinement["signals_scoped"]:
        assert report["signal the daemon"] == "PermissionError"
    # What this host must give: Landlock where the kernel has it.
    assert confinement["landlock_abi"] == landlock_abi()


def test_nobody_is_used_only_where_it_can_read_python(tmp_path: Path) -> None:
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    closed = tmp_path / "closed" / "inner"
    closed.mkdir(parents=True)
    closed.parent.chmod(0o700)
    tmp_path.chmod(0o755)
    assert _readable_by_others(str(open_dir)) == all(os.stat(p).st_mode & stat.S_IXOTH for p in open_dir.parents)
    assert not _readable_by_others(str(closed))
    if os.geteuid() != 0:
        assert execution_user() is None
