"""`vxla node run` as a real process (started, serving, stopped by SIGTERM with exit 0) and
`vxla submit` against it: outputs, JSON report, and exit status 2 naming the problem."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from attest import init_key_files
from compiler.driver import compile_program
from compiler.program import load_program
from harness.fixture_data import Fixture
from node.cli import main
from node.tensors import load_npy

REPO = Path(__file__).resolve().parents[3]
MLP = Fixture("mlp_softmax")


def write_config(directory: Path, key_file: Path, extra: str = "") -> Path:
    config = directory / "node.toml"
    config.write_text(
        f'[node]\nhost = "127.0.0.1"\nport = 0\ndata_dir = "{directory / "data"}"\n'
        f'key_file = "{key_file}"\n{extra}'
    )
    return config


def start_node(directory: Path, extra: str = "") -> tuple[str, subprocess.Popen]:
    """`vxla node run` in a child process (encrypted key, passphrase from the environment,
    `extra` TOML after the [node] table); returns its URL, read from its log, and the process."""
    keys = init_key_files(directory / "keys", passphrase=b"secret")
    config = write_config(directory, keys.private_path, extra)
    env = {**os.environ, "VXLA_KEY_PASSPHRASE": "secret"}
    process = subprocess.Popen(
        [sys.executable, "-m", "node.cli", "node", "run", "--config", str(config)],
        cwd=REPO, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    url = None
    deadline = time.monotonic() + 30
    while url is None and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        match = re.search(r"serving (http://\S+)", line)
        url = match.group(1) if match else None
    if url is None:
        process.kill()
        raise AssertionError("the node did not report its URL")
    return url, process


@pytest.fixture(scope="module")
def node_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen]]:
    url, process = start_node(tmp_path_factory.mktemp("node"))
    yield url, process
    stop_node(process)


def stop_node(process: subprocess.Popen) -> None:
    """Kills a node started by start_node and closes its stderr pipe."""
    process.kill()
    process.wait()
    assert process.stderr is not None
    process.stderr.close()


def test_submit_wait_json(node_process: tuple[str, subprocess.Popen], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url, _ = node_process
    out = tmp_path / "out.npz"
    argv = ["submit", "--node", url, str(MLP.directory / "module.hlo"), *map(str, MLP.input_paths())]
    assert main([*argv, "--wait", "--json", "--timeout", "60", "--out", str(out)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["job"]["state"] == "done" and len(report["job"]["statement_digest"]) == 64
    program = load_program(MLP.module_text)
    expected = compile_program(program).run(*[load_npy(p) for p in MLP.input_paths()])
    with np.load(out, allow_pickle=False) as archive:
        for index, want in enumerate(expected):
            assert archive[f"out{index}"].tobytes() == want.tobytes()
    assert [o["name"] for o in report["outputs"]] == [f"out{i}" for i in range(len(expected))]


def test_submit_without_wait_prints_the_job(node_process: tuple[str, subprocess.Popen], capsys: pytest.CaptureFixture[str]) -> None:
    url, _ = node_process
    assert main(["submit", "--node", url, str(MLP.directory / "module.hlo"), *map(str, MLP.input_paths())]) == 0
    text = capsys.readouterr().out
    job_id = re.search(r"job\s+(\S+)", text)
    assert job_id is not None
    assert httpx.get(f"{url}/v1/jobs/{job_id.group(1)}").status_code == 200


# A JAX function of a pytree, as JAX lowers it: each parameter's op_name is the argument's path.
PYTREE_MODULE = (
    "HloModule jit_f, entry_computation_layout={(f32[4]{0}, f32[3,4]{1,0}, f32[2,3]{1,0})->f32[2,4]{1,0}}\n\n"
    "ENTRY main.1 {\n"
    "  params__b__.1 = f32[4]{0} parameter(0), metadata={op_name=\"params[\\'b\\']\"}\n"
    "  params__w__.1 = f32[3,4]{1,0} parameter(1), metadata={op_name=\"params[\\'w\\']\"}\n"
    "  x.1 = f32[2,3]{1,0} parameter(2), metadata={op_name=\"x\"}\n"
    "  dot.1 = f32[2,4]{1,0} dot(x.1, params__w__.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  broadcast.1 = f32[2,4]{1,0} broadcast(params__b__.1), dimensions={1}\n"
    "  ROOT add.1 = f32[2,4]{1,0} add(dot.1, broadcast.1)\n"
    "}\n"
)


def test_vxla_job_names_each_input_by_its_pytree_path_with_its_type(node_process: tuple[str, subprocess.Popen], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url, _ = node_process
    module = tmp_path / "f.hlo"
    module.write_text(PYTREE_MODULE)
    arrays = [np.zeros(4, np.float32), np.ones((3, 4), np.float32), np.ones((2, 3), np.float32)]
    paths = []
    for number, array in enumerate(arrays):
        paths.append(tmp_path / f"in{number}.npy")
        np.save(paths[-1], array)
    assert main(["submit", "--node", url, str(module), *map(str, paths)]) == 0
    found = re.search(r"job\s+(\S+)", capsys.readouterr().out)
    assert found is not None
    assert main(["job", found.group(1), "--node", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name, parameter, shape in (("in0", "params['b']", "f32[4]"), ("in1", "params['w']", "f32[3,4]"), ("in2", "x", "f32[2,3]")):
        [line] = [line for line in lines if line.startswith(name + " ")]
        assert re.fullmatch(rf"{name}\s+{re.escape(parameter)}\s+{re.escape(shape)}\s+[0-9a-f]{{64}}", line), line
    assert main(["job", found.group(1), "--node", url, "--json"]) == 0
    described = json.loads(capsys.readouterr().out)["job"]["inputs"]
    assert [item["parameter"] for item in described] == ["params['b']", "params['w']", "x"]


def test_submit_wait_shows_the_download_of_the_outputs_on_a_terminal(node_process: tuple[str, subprocess.Popen], tmp_path: Path) -> None:
    from tests.node.cli.test_progress import _run_on_a_terminal

    url, _ = node_process
    out = tmp_path / "out.npz"
    arguments = ["submit", "--node", url, "--wait", str(MLP.directory / "module.hlo"), *map(str, MLP.input_paths()), "--out", str(out)]
    status, stdout, shown = _run_on_a_terminal(arguments, {**os.environ, "COLUMNS": "200", "TERM": "xterm"})
    assert status == 0 and f"wrote {out}" in stdout, shown
    assert "downloading the outputs: done" in shown and re.search(r"\d+(\.\d+)?/\d+(\.\d+)? (bytes|kB)", shown), shown


def test_submit_bad_input_exit_2(node_process: tuple[str, subprocess.Popen], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    url, _ = node_process
    bad = tmp_path / "bad.hlo"
    bad.write_text("HloModule m\nENTRY e {\n  ROOT r = f32[2] bogus()\n}\n")
    assert main(["submit", "--node", url, str(bad)]) == 2
    assert "line 3, column" in capsys.readouterr().err
    assert main(["submit", "--node", url, str(MLP.directory / "module.hlo")]) == 2
    assert "takes 5 inputs, got 0" in capsys.readouterr().err
    assert main(["submit", "--node", url, str(tmp_path / "missing.hlo")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["submit", "--node", "http://127.0.0.1:9", str(MLP.directory / "module.hlo")]) == 2
    assert "cannot reach the node" in capsys.readouterr().err


def test_node_run_refuses_bad_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = init_key_files(tmp_path / "keys")
    config = write_config(tmp_path, keys.private_path, "workerz = 2\n")
    assert main(["node", "run", "--config", str(config)]) == 2
    assert "node.workerz: unknown key" in capsys.readouterr().err
    config = write_config(tmp_path, tmp_path / "nokey.pem")
    assert main(["node", "run", "--config", str(config)]) == 2
    assert "node.key_file" in capsys.readouterr().err


def test_sigterm_stops_cleanly(tmp_path: Path) -> None:
    url, process = start_node(tmp_path)
    try:
        assert httpx.get(f"{url}/readyz").json()["ok"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert process.stderr is not None
        assert "stopped" in process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stderr.close()
