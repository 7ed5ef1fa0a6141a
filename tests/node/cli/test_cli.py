"""The vxla command line: output formats, written files and exit statuses."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from attest.digests import tensor_digest
from compiler.hlo import load_module
from compiler.reference import evaluate
from harness.fixture_data import Fixture
from harness.hlo_fragments import debug_tables
from node.cli import main

MLP = Fixture("mlp_softmax")


def _run_json(capsys, argv: list[str]) -> dict:
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_inspect_json(capsys) -> None:
    report = _run_json(capsys, ["inspect", str(MLP.directory / "module.hlo"), "--json"])
    assert set(report) >= {"source_hash", "hlo_hash", "opcode_counts", "parameters", "result"}
    assert len(report["hlo_hash"]) == 64 and report["hlo_hash"] == report["hlo_hash"].lower()
    assert report["opcode_counts"]["dot"] == 2


def test_run_json_and_out_file(tmp_path, capsys) -> None:
    out_path = tmp_path / "out.npz"
    argv = ["run", str(MLP.directory / "module.hlo"), *map(str, MLP.input_paths()), "--backend", "reference", "--out", str(out_path), "--json"]
    report = _run_json(capsys, argv)
    expected = evaluate(load_module(MLP.module_text), MLP.inputs())
    assert [o["name"] for o in report["outputs"]] == [f"out{i}" for i in range(len(expected))]
    with np.load(out_path, allow_pickle=False) as archive:
        for record, array in zip(report["outputs"], expected, strict=True):
            assert record["digest"] == tensor_digest(array)
            assert record["dtype"] == "f32" and record["shape"] == list(array.shape)
            assert archive[record["name"]].tobytes() == array.tobytes()
    assert not [p for p in tmp_path.iterdir() if p.name != "out.npz"]  # no temporary left


def test_run_human_output(capsys) -> None:
    assert main(["run", str(MLP.directory / "module.hlo"), *map(str, MLP.input_paths())]) == 0
    out = capsys.readouterr().out
    assert "hlo_hash" in out and "out0" in out


def _bad_npy(tmp_path):
    path = tmp_path / "bad.npy"
    path.write_bytes(b"not an npy file")
    return path


def _reshaped(tmp_path, path):
    target = tmp_path / "flat.npy"
    np.save(target, np.load(path).reshape(-1))
    return target


def _pickled(tmp_path):
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return path


@pytest.mark.parametrize(
    ("make_args", "fragment"),
    [
        (lambda d, m, ins: ["run", str(d / "missing.hlo")], "no such file"),
        (lambda d, m, ins: ["run", str(d)], "is a directory"),
        (lambda d, m, ins: ["run", m, *ins[:-1]], "takes 2 inputs, got 1"),
        (lambda d, m, ins: ["run", m, ins[1], ins[0]], "parameter 0 expects f32[8,16], got an array of int32"),
        (lambda d, m, ins: ["run", m, str(_reshaped(d, ins[0])), ins[1]], "parameter 0 expects f32[8,16], got an array of float32[128]"),
        (lambda d, m, ins: ["run", m, str(_bad_npy(d)), ins[1]], "not a readable .npy"),
        (lambda d, m, ins: ["run", m, str(_pickled(d)), ins[1]], "not a readable .npy"),
        (lambda d, m, ins: ["run", m, *ins, "--backend", "magic"], "invalid choice"),
        (lambda d, m, ins: ["run", m, *ins, "--max-while-iterations", "0"], "positive integer"),
        (lambda d, m, ins: ["frobnicate"], "invalid choice"),
        (lambda d, m, ins: ["jobs", "--node", "127.0.0.1:9", "--frobnicate"], "usage: vxla jobs"),
        (lambda d, m, ins: ["jobs", "--node", "127.0.0.1:9", "--frobnicate"], "vxla jobs: error: unrecognized arguments: --frobnicate"),
        (lambda d, m, ins: ["verify", ins[0]], "an .npy array, not a signed trace (TRACE.json, from vxla run --trace)"),
        (lambda d, m, ins: ["verify", m], "not a signed trace: envelope: not valid JSON"),
        (lambda d, m, ins: ["compile", m, "--pipeline", "magic"], "unknown pass pipeline 'magic'; known: default, none"),
        (lambda d, m, ins: ["submit", "--node", "127.0.0.1:9", m, *ins, "--challenge-window", "5"], "--challenge-window: only a job posted on chain"),
        (lambda d, m, ins: ["submit", "--node", "127.0.0.1:9", m, *ins, "--challenge-window", "0"], "positive integer"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, make_args, fragment) -> None:
    inputs = [str(p) for p in Fixture("argmax").input_paths()]
    module = str(Fixture("argmax").directory / "module.hlo")
    argv = make_args(tmp_path, module, inputs)
    if argv[0] == "run":
        argv += ["--out", str(tmp_path / "out.npz")]
    assert main(argv) == 2
    assert fragment in capsys.readouterr().err
    assert not (tmp_path / "out.npz").exists()


def test_wrong_dtype_is_named(tmp_path, capsys) -> None:
    inputs = Fixture("argmax").inputs()
    paths = []
    for index, array in enumerate(inputs):
        path = tmp_path / f"in{index}.npy"
        np.save(path, array.astype(np.float64) if array.dtype == np.float32 else array)
        paths.append(str(path))
    assert main(["run", str(Fixture("argmax").directory / "module.hlo"), *paths]) == 2
    assert "expects f32" in capsys.readouterr().err


def test_while_limit(capsys) -> None:
    fixture = Fixture("fori_loop")
    argv = ["run", str(fixture.directory / "module.hlo"), *map(str, fixture.input_paths()), "--max-while-iterations", "1"]
    assert main(argv) == 2
    assert "past the limit of 1 iterations" in capsys.readouterr().err


def test_console_script_help_and_exit_status() -> None:
    result = subprocess.run([sys.executable, "-m", "node.cli", "--help"], capture_output=True, text=True, check=False)
    assert result.returncode == 0 and "inspect" in result.stdout and "run" in result.stdout
    result = subprocess.run([sys.executable, "-m", "node.cli"], capture_output=True, text=True, check=False)
    assert result.returncode == 2


def test_version_and_an_array_given_as_the_module(tmp_path, capsys) -> None:
    from node.version import vxla_version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"vxla {vxla_version()}"
    inputs = [str(p) for p in Fixture("argmax").input_paths()]
    for command in (["run"], ["inspect"], ["submit", "--node", "127.0.0.1:9"]):
        assert main([*command, inputs[0], inputs[1]] if command[0] != "inspect" else [*command, inputs[0]]) == 2
        assert "an .npy array, not a program; give the module first, then its inputs" in capsys.readouterr().err


def test_node_urls_as_users_type_them(capsys) -> None:
    from node.urls import node_url

    assert node_url("127.0.0.1:8700") == "http://127.0.0.1:8700"
    assert node_url(" https://node.example/ ") == "https://node.example"
    for bad, why in [("ftp://x", "a node speaks http or https, not ftp"), ("http://", "names no host"), ("host:port", "the port is not a number")]:
        with pytest.raises(ValueError, match=why):
            node_url(bad)
        assert main(["submit", "--node", bad, str(Fixture("argmax").directory / "module.hlo")]) == 2
        assert why in capsys.readouterr().err


def test_the_command_line_loads_no_chain_library_until_a_command_needs_it() -> None:
    # The compile/run/verify commands run where web3 is not installed (the AArch64 runtime
    # environment of make arm64 has only the runtime dependencies).
    script = "import sys, node.cli; print(sorted(m for m in ('web3', 'eth_account', 'node.chain') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


STABLEHLO = 'module @jit_f {\n  func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32> {\n    return %arg0 : tensor<2xf32>\n  }\n}\n'


@pytest.fixture
def without_jax(monkeypatch: pytest.MonkeyPatch) -> None:
    """JAX made unimportable, whatever this environment has (`make test-jax` covers the
    extra when it is there)."""
    monkeypatch.setitem(sys.modules, "jax", None)


@pytest.mark.parametrize("command", ["convert", "inspect", "compile", "run"])
@pytest.mark.usefixtures("without_jax")
def test_stablehlo_without_the_jax_extra_names_the_extra(tmp_path, capsys, command: str) -> None:
    """Without JAX, a StableHLO file is refused with exit 2 and the way to install what
    reads it."""
    path = tmp_path / "f.mlir"
    path.write_text(STABLEHLO)
    assert main([command, str(path)]) == 2
    err = capsys.readouterr().err
    assert "not HLO text" in err and "pip install 'vxla[jax]'" in err


@pytest.mark.usefixtures("without_jax")
def test_submitting_a_function_without_the_jax_extra_names_the_extra() -> None:
    from node.jax_programs import JaxNotInstalled
    from node.sdk import Client

    with Client("http://127.0.0.1:9") as client, pytest.raises(JaxNotInstalled, match=r"pip install 'vxla\[jax\]'"):
        client.submit(lambda x: x, np.ones(2, np.float32))


PROFILED = """HloModule jit_block, entry_computation_layout={(f32[4,4]{1,0})->f32[4,4]{1,0}}

""" + debug_tables("model.py", "block", 7) + """
ENTRY main.1 {
  x.1 = f32[4,4]{1,0} parameter(0), metadata={op_name="x"}
  dot.1 = f32[4,4]{1,0} dot(x.1, x.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(block)/dot_general" stack_frame_id=1}
  ROOT tanh.1 = f32[4,4]{1,0} tanh(dot.1), metadata={op_name="jit(block)/tanh" stack_frame_id=1}
}
"""


def test_a_profile_opens_as_a_chrome_trace_with_the_compile_the_run_and_each_step(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("VXLA_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "block.hlo").write_text(PROFILED)
    np.save(tmp_path / "x.npy", np.arange(16, dtype=np.float32).reshape(4, 4) / 16)
    run = ["run", str(tmp_path / "block.hlo"), str(tmp_path / "x.npy"), "--profile"]
    assert main([*run, str(tmp_path / "cold.json")]) == 0
    events = json.loads((tmp_path / "cold.json").read_text())["traceEvents"]
    tracks = {e["args"]["name"]: e["tid"] for e in events if e["name"] == "thread_name"}
    spans = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    compile_spans = [e["name"] for e in spans if e["tid"] == tracks["compile"]]
    assert "pass loop-fusion" in compile_spans and "pass scheduling" in compile_spans and "lowering" in compile_spans
    assert any(name.startswith("generating machine code for ") for name in compile_spans)
    assert [e["name"] for e in spans if e["tid"] == tracks["run"]] == ["run"]
    steps = [e for e in spans if e["tid"] == tracks["steps"]]
    assert steps and all("op" in e["args"] for e in steps)
    # Each step is named as traces name instructions, with the user's source where the HLO has it.
    assert any(e["args"].get("source", "").endswith("at model.py:7 (block)") for e in steps), steps
    # A kernel's step says how many threads its work items were split among.
    kernels = [e for e in steps if "threads" in e["args"]]
    assert kernels and all(re.fullmatch(r"\d+ of \d+", e["args"]["threads"]) and int(e["args"]["work items"]) >= 1 for e in kernels), kernels
    # Compiled before: the compile track says it came from the cache.
    assert main([*run, str(tmp_path / "warm.json")]) == 0
    warm = json.loads((tmp_path / "warm.json").read_text())["traceEvents"]
    assert [e["name"] for e in warm if e["ph"] == "X" and e["tid"] == tracks["compile"]] == ["cached (compiled before: read from the compile cache)"]
    capsys.readouterr()
    assert main([*run, str(tmp_path / "ref.json"), "--backend", "reference"]) == 2
    assert "--profile needs the llvm backend" in capsys.readouterr().err and not (tmp_path / "ref.json").exists()


COUNTING = """HloModule jit_count, entry_computation_layout={(s32[])->s32[]}

""" + debug_tables("model.py", "count", 12) + """
cond.1 {
  p.1 = s32[] parameter(0)
  c.1 = s32[] constant(100)
  ROOT lt.1 = pred[] compare(p.1, c.1), direction=LT
}

body.2 {
  p.2 = s32[] parameter(0)
  one.2 = s32[] constant(1)
  ROOT add.2 = s32[] add(p.2, one.2)
}

ENTRY main.3 {
  x.3 = s32[] parameter(0)
  ROOT while.3 = s32[] while(x.3), condition=cond.1, body=body.2, metadata={op_name="jit(count)/while" stack_frame_id=1}
}
"""


@pytest.mark.parametrize("backend", ["llvm", "reference"])
def test_a_loop_past_its_limit_names_the_users_source(tmp_path, capsys, backend: str) -> None:
    (tmp_path / "count.hlo").write_text(COUNTING)
    np.save(tmp_path / "zero.npy", np.int32(0))
    argv = ["run", str(tmp_path / "count.hlo"), str(tmp_path / "zero.npy"), "--max-while-iterations", "5", "--backend", backend]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert "ran past the limit of 5 iterations" in error and "jit(count)/while at model.py:12 (count))" in error, error
