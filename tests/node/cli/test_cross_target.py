"""Targets a host cannot run, through the command line: `vxla run` refuses them (exit 2,
naming what is missing) while `vxla compile` works, and `vxla verify` checks a trace made
for such a target by compiling for it (graph_hash, binary_hash) and re-executing on a
target this host runs. The host is narrowed with VXLA_HOST_WITHOUT, which can only remove
features, so these run the same on an AVX2-only and an AVX-512 host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attest import Envelope
from compiler.host import HOST_MASK_ENV, runnable_cpus, this_host, widest_runnable_cpu
from harness.fixture_data import Fixture
from harness.targets import RUNNABLE
from node.cli import main

MLP = Fixture("mlp_softmax")
MODULE = str(MLP.directory / "module.hlo")
INPUTS = [str(p) for p in MLP.input_paths()]


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys")
    assert main(["keys", "init", "--dir", str(directory)]) == 0
    return directory


def _verify(trace: Path, keys: Path, capsys, *extra: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["verify", str(trace), "--module", MODULE, "--inputs", *INPUTS, "--trusted-key", str(keys / "node.pub"), "--json", *extra])
    return code, json.loads(capsys.readouterr().out)


def _checks(report: dict) -> dict[str, dict]:
    return {c["name"]: c for c in report["checks"]}


def test_run_refuses_a_target_the_host_lacks_and_compile_does_not(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setenv(HOST_MASK_ENV, "avx512f")
    out = tmp_path / "out.npz"
    assert main(["run", MODULE, *INPUTS, "--target", "x86-64-v4", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "x86-64-v4" in error and "avx512f" in error and "which this host lacks" in error
    assert not out.exists()
    assert main(["compile", MODULE, "--target", "x86-64-v4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["cpu"] == "x86-64-v4"


@pytest.mark.parametrize("cpu", ["neoverse-n1", "neoverse-v1"])
def test_run_refuses_aarch64_code_on_x86_and_compiles_it(cpu: str, capsys) -> None:
    if cpu in RUNNABLE:  # an AArch64 host: the other direction
        cpu = "x86-64-v2"
    assert main(["run", MODULE, *INPUTS, "--target", cpu]) == 2
    assert "cannot run here: it needs an" in capsys.readouterr().err
    assert main(["compile", MODULE, "--target", cpu, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["binary_hash"]


def test_bad_targets_exit_2(capsys) -> None:
    for target, message in (("pentium", "unknown CPU 'pentium'"), ("x86-64", "x86-64-v2 or later")):
        assert main(["compile", MODULE, "--target", target]) == 2
        assert message in capsys.readouterr().err


def _trace(tmp_path: Path, keys: Path, name: str, *extra: str) -> Path:
    trace = tmp_path / f"{name}.json"
    assert main(["run", MODULE, *INPUTS, "--trace", str(trace), "--key", str(keys / "node.key"), "--op-level", "--json", *extra]) == 0
    return trace


def test_a_trace_for_a_target_this_host_cannot_run_verifies_across_targets(capsys, monkeypatch, tmp_path, keys) -> None:
    trace = _trace(tmp_path, keys, "v3", "--target", "x86-64-v3")
    # A host without AVX2 cannot run x86-64-v3 (nor v4): the trace's target is compiled and
    # its hashes checked, the re-execution runs on x86-64-v2.
    monkeypatch.setenv(HOST_MASK_ENV, "avx2")
    code, report = _verify(trace, keys, capsys)
    checks = _checks(report)
    assert code == 0 and report["ok"], report
    assert checks["target"]["message"] == "executed on x86-64-v2; the trace's target x86-64-v3 was compiled and its binary_hash checked"
    assert checks["binary_hash"]["ok"] and checks["graph_hash"]["ok"]
    assert checks["outputs"]["ok"] and "instruction digests match" in checks["op_trace"]["message"]
    # A configured execution target, and one this host cannot run (bad input, exit 2).
    code, report = _verify(trace, keys, capsys, "--execute-on", "x86-64-v2")
    assert code == 0 and _checks(report)["target"]["message"].startswith("executed on x86-64-v2;")
    assert main(["verify", str(trace), "--module", MODULE, "--inputs", *INPUTS, "--trusted-key", str(keys / "node.pub"), "--execute-on", "x86-64-v4"]) == 2
    assert "execution target" in capsys.readouterr().err


def test_a_faulty_trace_is_rejected_across_targets(capsys, monkeypatch, tmp_path, keys) -> None:
    fault = _first_instruction(tmp_path, keys) + ":3"
    trace = _trace(tmp_path, keys, "faulty", "--target", "x86-64-v3", "--fault", fault)
    monkeypatch.setenv(HOST_MASK_ENV, "avx2")
    code, report = _verify(trace, keys, capsys)
    assert code == 1 and not report["ok"]
    assert not _checks(report)["outputs"]["ok"] or not _checks(report)["op_trace"]["ok"]
    assert report["first_divergence"] is not None and report["first_divergence"]["proofs_ok"]
    assert _checks(report)["target"]["message"].startswith("executed on x86-64-v2;")


def _first_instruction(tmp_path: Path, keys: Path) -> str:
    trace = _trace(tmp_path, keys, "honest")
    statement = json.loads(Envelope.from_json(trace.read_text()).payload)
    return statement["predicate"]["deterministic"]["op_trace"]["instructions"][0]["name"]


def test_the_trace_records_the_host_and_names_the_target(capsys, tmp_path, keys) -> None:
    capsys.readouterr()
    trace = _trace(tmp_path, keys, "host")
    predicate = json.loads(Envelope.from_json(trace.read_text()).payload)["predicate"]
    host = predicate["run"]["host"]
    assert host["arch"] in ("x86_64", "aarch64") and host["cpu_model"] and host["os"] and host["vxla_version"]
    assert set(host["features"]) and all(isinstance(f, str) for f in host["features"])
    # The target is the widest this host runs, named in the trace and in run's report.
    widest = widest_runnable_cpu(this_host())
    assert predicate["deterministic"]["compiler"]["target"]["cpu"] == widest
    assert json.loads(capsys.readouterr().out)["target"] == widest
    assert main(["run", MODULE, *INPUTS]) == 0
    assert f"target       {widest} (" in capsys.readouterr().out


def test_a_node_whose_pinned_target_the_host_cannot_run_does_not_start(capsys, monkeypatch, tmp_path) -> None:
    """Fail closed at start: no store, no claim, no job it could only fail."""
    pinned = "x86-64-v3" if this_host().arch == "x86_64" else "neoverse-v1"
    monkeypatch.setenv(HOST_MASK_ENV, "avx2,sve")
    config = tmp_path / "node.toml"
    config.write_text(f'[node]\ndata_dir = "{tmp_path / "data"}"\nkey_file = "{tmp_path / "missing.key"}"\nport = 0\ntarget = "{pinned}"\n')
    assert main(["node", "run", "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert f"node.target {pinned!r}" in error and "cannot run here" in error and ("avx2" in error or "sve" in error)
    assert not (tmp_path / "data").exists()
    # An unknown name is refused when the file is read, naming the key.
    config.write_text(f'[node]\ndata_dir = "{tmp_path / "data"}"\ntarget = "pentium"\n')
    assert main(["node", "run", "--config", str(config)]) == 2
    assert "node.target: unknown CPU 'pentium'" in capsys.readouterr().err
    assert not (tmp_path / "data").exists()


def test_a_node_compiles_for_the_widest_target_the_host_runs_unless_it_pins_one(monkeypatch) -> None:
    from node.daemon.worker import node_compiler_config

    monkeypatch.delenv(HOST_MASK_ENV, raising=False)
    widest = widest_runnable_cpu(this_host())
    assert node_compiler_config().cpu == node_compiler_config("widest").cpu == widest
    narrowest = runnable_cpus(this_host())[0]
    assert node_compiler_config(narrowest).cpu == narrowest
    # The host narrowed (an operator keeping a node off AVX-512, or off SVE): the next one.
    monkeypatch.setenv(HOST_MASK_ENV, "avx512f,sve")
    assert node_compiler_config().cpu == ("x86-64-v3" if this_host().arch == "x86_64" else "neoverse-n1")


def test_a_feature_string_the_host_lacks_is_refused(capsys, monkeypatch, tmp_path) -> None:
    compiler_config = tmp_path / "compiler.toml"
    compiler_config.write_text('[target]\ncpu = "x86-64-v3"\nfeatures = "+avx512vnni"\n')
    monkeypatch.setenv(HOST_MASK_ENV, "avx512vnni")
    assert main(["run", MODULE, *INPUTS, "--config", str(compiler_config)]) == 2
    assert "needs avx512vnni, which this host lacks" in capsys.readouterr().err
    compiler_config.write_text('[target]\ncpu = "x86-64-v3"\nfeatures = "avx512vnni"\n')
    assert main(["compile", MODULE, "--config", str(compiler_config)]) == 2
    assert "write +name or -name" in capsys.readouterr().err


def test_a_worker_pool_refuses_a_target_the_host_cannot_run(tmp_path, monkeypatch) -> None:
    """The library entry: a pool for an unrunnable target never takes a job."""
    from attest.keys import generate_private_key
    from compiler.config import load_config
    from compiler.errors import TargetNotRunnable
    from node.daemon.config import Limits
    from node.daemon.store import JobStore
    from node.daemon.worker import WorkerPool

    store = JobStore(tmp_path)
    foreign = "neoverse-v1" if "neoverse-v1" not in RUNNABLE else "x86-64-v3"
    with pytest.raises(TargetNotRunnable, match=foreign):
        WorkerPool(store, generate_private_key(), Limits(), compiler_config=load_config().with_target(cpu=foreign))
    monkeypatch.setenv(HOST_MASK_ENV, "avx2")
    with pytest.raises(TargetNotRunnable, match="avx2"):
        WorkerPool(store, generate_private_key(), Limits(), compiler_config=load_config().with_target(cpu="x86-64-v3"))


def test_a_gpu_trace_verifies_on_a_cpu_host(capsys, tmp_path, keys) -> None:
    """A GPU node's trace: the nvptx-sm90 cubin's hashes and nvJitLink's release in its
    identity, the GPU in its signed run metadata, and outputs and op-level digests from the
    GPU build's grid (here its host emulation, the same bits a GPU gives: tools/gpu_check.py).
    `vxla verify` compiles the cubin, checks its hashes and re-executes on this host's CPU."""
    from attest import GpuRecord, key_id, load_private_key, sign_statement
    from compiler.config import load_config
    from compiler.driver import compile_emulated_grid, compile_program
    from compiler.program import load_program
    from compiler.runtime.cuda_device import GpuInfo
    from compiler.targets import NVJITLINK_VERSION
    from node.tracing.statement import build_statement

    program = load_program(MLP.module_text)
    gpu_config = load_config().with_target(cpu="nvptx-sm90")
    cubin = compile_program(program, gpu_config, cache_dir=False)
    cubin.device = type("H200", (), {"info": GpuInfo("NVIDIA H200", "9.0", 132, "13.0")})()
    run = compile_emulated_grid(program, gpu_config).run_traced(*MLP.inputs())
    signer = load_private_key(keys / "node.key")
    statement = build_statement(program, cubin, MLP.inputs(), run, job_id="gpu-job", chain_id=None, contract=None, key_id=key_id(signer), threads=1, timings_ns={}, op_level=True)
    trace = tmp_path / "gpu.json"
    trace.write_text(sign_statement(statement, signer).to_json())
    predicate = json.loads(Envelope.from_json(trace.read_text()).payload)["predicate"]
    assert predicate["deterministic"]["compiler"]["target"]["cpu"] == "nvptx-sm90"
    assert predicate["deterministic"]["compiler"]["linker"] == {"name": "nvJitLink", "version": NVJITLINK_VERSION}
    assert GpuRecord.from_dict(predicate["run"]["host"]["gpu"]) == GpuRecord("NVIDIA H200", "9.0", 132, "13.0")
    code, report = _verify(trace, keys, capsys)
    checks = _checks(report)
    assert code == 0 and report["verified"], json.dumps(report["checks"])
    assert checks["target"]["message"].startswith("executed on x86-64-") and "nvptx-sm90 was compiled and its binary_hash checked" in checks["target"]["message"]
    assert checks["binary_hash"]["ok"] and checks["outputs"]["ok"] and "instruction digests match" in checks["op_trace"]["message"]


def test_a_node_pinned_to_a_gpu_target_does_not_start(capsys, tmp_path) -> None:
    """A node's jobs run in confined processes that cannot reach a GPU driver: a GPU target is
    refused at start, naming why, before anything is stored."""
    config = tmp_path / "node.toml"
    config.write_text(f'[node]\ndata_dir = "{tmp_path / "data"}"\nkey_file = "{tmp_path / "missing.key"}"\nport = 0\ntarget = "nvptx-sm90"\n')
    assert main(["node", "run", "--config", str(config)]) == 2
    error = capsys.readouterr().err
    assert "target nvptx-sm90: a node does not run its jobs on a GPU yet" in error
    assert not (tmp_path / "data").exists()
