"""vxla works installed from a wheel, outside the checkout: the pinned compiler configuration,
the contracts' ABIs and bytecode and the node's default configuration are package data, not
files found next to the source tree.

The wheel is built from this checkout and installed, without its dependencies, into a fresh
virtual environment whose only other path is this environment's site-packages (for numpy,
llvmlite, web3...); `vxla run` then runs a fixture from a directory outside the checkout and
must give the digests the checkout gives, `vxla devnet up` starts a devnet there (with the
checkout's anvil named by --anvil) and `vxla node run` serves with no configuration file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from attest.digests import tensor_digest
from compiler import compile as compile_module
from harness.fixture_data import Fixture

ROOT = Path(__file__).resolve().parents[1]
# The pinned anvil a checkout installs (`make contracts`); an installed vxla is told where it is.
CHECKOUT_ANVIL = ROOT / "contracts/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil"
# The port of the shipped node defaults (node/daemon/node.toml).
DEFAULT_NODE_PORT = 8700


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the vxla wheel installed; its bin directory."""
    base = tmp_path_factory.mktemp("wheel")
    # Built from a copy of what the package is made of, so the build leaves nothing in the
    # checkout (setuptools writes build/ and egg-info beside the sources).
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("core", "compiler", "node", "attest"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = base / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", str(wheels), str(source)],
        check=True, capture_output=True, text=True, cwd=base,
    )  # fmt: skip
    (wheel,) = wheels.glob("vxla-*.whl")
    environment = base / "env"
    venv.EnvBuilder(with_pip=False).create(environment)
    python = environment / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, text=True, cwd=base,
    )  # fmt: skip
    # The dependencies come from this environment; a plain path entry (not a site dir), so its
    # .pth files (among them the checkout's editable install) are not read.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], check=True, capture_output=True, text=True).stdout.strip()
    (Path(site) / "vxla-test-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return environment / "bin"


def installed_env(cwd: Path) -> dict[str, str]:
    """This environment without what would point the installed vxla at the checkout or at
    this user's files: its cache and its home (keys, node data) are under `cwd`."""
    unset = ("PYTHONPATH", "VXLA_CACHE_DIR", "VXLA_HOME", "VXLA_ANVIL", "VXLA_KEY_PASSPHRASE", "VXLA_CHAIN_PRIVATE_KEY")
    env = {key: value for key, value in os.environ.items() if key not in unset}
    env["VXLA_CACHE_DIR"] = str(cwd / "cache")
    env["HOME"] = str(cwd / "home")
    return env


def run_installed(bin_dir: Path, *args: str, cwd: Path, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bin_dir / "vxla"), *args], capture_output=True, text=True, cwd=cwd, env=installed_env(cwd), check=False, timeout=timeout
    )  # fmt: skip


def test_vxla_run_from_a_wheel_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    fixture = Fixture("mlp_softmax")
    where = subprocess.run(
        [str(installed / "python"), "-c", "import compiler, node.chain.artifacts as a; print(compiler.__file__); print(a.load_artifact('JobMarket').name)"],
        capture_output=True, text=True, cwd=tmp_path, check=True,
    ).stdout.split()  # fmt: skip
    assert not Path(where[0]).is_relative_to(ROOT), f"the checkout was imported: {where[0]}"
    assert where[1] == "JobMarket"
    result = run_installed(installed, "run", str(fixture.directory / "module.hlo"), *map(str, fixture.input_paths()), "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    here = compile_module(fixture.module_text, cache_dir=False)
    assert {key: report[key] for key in here.hashes} == here.hashes
    assert [output["digest"] for output in report["outputs"]] == [tensor_digest(o) for o in here.run(*fixture.inputs())]


def test_an_installed_vxla_refuses_bad_input_the_same_way(installed: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT x = f32[2] add(\n}\n")
    result = run_installed(installed, "inspect", str(bad), cwd=tmp_path)
    assert result.returncode == 2 and "line" in result.stderr


def _stop_leftovers(state_file: Path) -> None:
    """Kills what a devnet state file names and still runs as started: the last resort when
    `vxla devnet down` could not run or failed, so a failing test leaves nothing behind."""
    from node.devnet_state import ProcessInfo

    state = json.loads(state_file.read_text(encoding="utf-8"))
    for entry in [state["anvil"], *(n["process"] for n in state["nodes"])]:
        process = ProcessInfo(entry["pid"], entry["argv"])
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes().split(b"\0")
            if [a.decode(errors="replace") for a in cmdline if a] == process.argv:
                os.killpg(process.pid, signal.SIGKILL)  # each devnet process leads its own session


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    return "\nState:\tZ" in status  # exited, waiting for its parent (not ours) to reap it


@pytest.mark.skipif(not CHECKOUT_ANVIL.is_file(), reason="anvil is installed by `make contracts` (npm ci in contracts/)")
def test_devnet_up_and_down_from_a_wheel_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    directory = tmp_path / "devnet"
    try:
        up = run_installed(installed, "devnet", "up", "--nodes", "1", "--anvil", str(CHECKOUT_ANVIL), "--dir", str(directory), "--json", cwd=tmp_path, timeout=120)
        assert up.returncode == 0, up.stderr
        state = json.loads(up.stdout)
        (node,) = state["nodes"]
        # The node is the installed vxla, run by the fresh environment's Python.
        assert Path(node["process"]["argv"][0]).is_relative_to(installed.parent)
        assert httpx.get(f"{node['url']}/readyz", timeout=10).status_code == 200
        down = run_installed(installed, "devnet", "down", "--dir", str(directory), cwd=tmp_path, timeout=60)
        assert down.returncode == 0, down.stderr
        assert "node0 (pid" in down.stdout and "anvil (pid" in down.stdout
        pids = [state["anvil"]["pid"], node["process"]["pid"]]
        deadline = time.monotonic() + 10
        while not all(map(_gone, pids)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(map(_gone, pids)), pids
    finally:
        if (directory / "state.json").is_file():
            _stop_leftovers(directory / "state.json")


def _wait_for_line(process: subprocess.Popen[str], pattern: str, timeout: float) -> tuple[re.Match[str] | None, str]:
    """The first line of the process's stderr that matches `pattern`, and what it wrote until
    then; None once the process exits or `timeout` passes without one."""
    assert process.stderr is not None
    seen: list[str] = []
    with selectors.DefaultSelector() as selector:
        selector.register(process.stderr, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            line = process.stderr.readline()
            if not line:
                break
            seen.append(line)
            if match := re.search(pattern, line):
                return match, "".join(seen)
    return None, "".join(seen)


@contextlib.contextmanager
def _node_process(bin_dir: Path, cwd: Path) -> Iterator[subprocess.Popen[str]]:
    """`vxla node run` with no --config, stopped by SIGTERM (then its whole session killed)."""
    process = subprocess.Popen(
        [str(bin_dir / "vxla"), "node", "run"], cwd=cwd, env=installed_env(cwd), stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=20)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # execution processes it may have left
        process.wait()
        assert process.stderr is not None
        process.stderr.close()


def test_node_run_from_a_wheel_with_no_config_in_the_directory(installed: Path, tmp_path: Path) -> None:
    keys = run_installed(installed, "keys", "init", cwd=tmp_path)  # ~/.vxla/keys, the default key_file's
    assert keys.returncode == 0, keys.stderr
    assert not (tmp_path / "configs").exists()
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", DEFAULT_NODE_PORT))
        except OSError:
            probe.close()
            # Something else holds the shipped defaults' port: the node read those defaults
            # if it refuses that very address, by name, with the usage exit status.
            refused = run_installed(installed, "node", "run", cwd=tmp_path, timeout=120)
            assert refused.returncode == 2, refused.stderr
            assert f"node.host/node.port 127.0.0.1:{DEFAULT_NODE_PORT}: cannot listen" in refused.stderr
            return
    with _node_process(installed, tmp_path) as process:
        match, log = _wait_for_line(process, r"serving (http://\S+)", timeout=40)
        assert match is not None, log
        url = match.group(1)
        assert url == f"http://127.0.0.1:{DEFAULT_NODE_PORT}"
        assert httpx.get(f"{url}/healthz", timeout=10).status_code == 200
        # The shipped defaults' data directory, under this test's home.
        assert (tmp_path / "home" / ".vxla" / "node").is_dir()
