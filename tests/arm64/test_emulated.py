"""Proof under AArch64 emulation (`make test-arm64`, after `make arm64`): every fixture gives
the x86 run's output and op-level digests on emulated neoverse-n1 (NEON) and neoverse-v1 with
SVE at 128, 256 and 512 bits; LLVM emits the same aarch64 bytes emulated and native; SVE code
is refused on a CPU without SVE; and traces verify across the two ISAs in both directions,
a faulty one rejected.

The objects run under emulation are compiled natively into a compile cache the emulated
process reads (the bytes are identical either way, as one test shows), so the emulated time
goes to executing, not to LLVM."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from pathlib import Path

import pytest

from attest import Envelope
from compiler.driver import compile_program
from compiler.program import load_program
from harness.fixture_data import FIXTURE_NAMES, Fixture
from harness.targets import DEFAULT, config, session_cache
from node.cli import main
from tests.arm64.runner import describe

REPO = Path(__file__).resolve().parents[2]
ARM64_BIN = REPO / ".arm64" / "bin"
# Emulated CPU (QEMU_CPU) and the target run on it.
EMULATED = {
    "neon": ("max,sve=off", "neoverse-n1"),
    "sve128": ("max,sve-default-vector-length=16", "neoverse-v1"),
    "sve256": ("max,sve-default-vector-length=32", "neoverse-v1"),
    "sve512": ("max,sve-default-vector-length=64", "neoverse-v1"),
}
MLP = Fixture("mlp_softmax")
MODULE = str(MLP.directory / "module.hlo")
INPUTS = [str(p) for p in MLP.input_paths()]
EMULATION_SECONDS = 900


def emulated(command: list[str], qemu_cpu: str, cache: Path, check: bool = True) -> subprocess.CompletedProcess:
    """Runs `command` (`python` or `vxla` of .arm64/bin plus arguments) under emulation."""
    if not (ARM64_BIN / "python").exists():
        pytest.fail("no emulated AArch64 Python: run `make arm64` (make test-arm64 does)")
    env = {**os.environ, "QEMU_CPU": qemu_cpu, "VXLA_CACHE_DIR": str(cache)}
    env.pop("VXLA_HOST_WITHOUT", None)
    done = subprocess.run(
        [str(ARM64_BIN / command[0]), *command[1:]], cwd=REPO, env=env, capture_output=True, text=True, timeout=EMULATION_SECONDS, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"{command} under QEMU_CPU={qemu_cpu} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


@pytest.fixture(scope="session")
def cache() -> Path:
    """The compile cache the emulated processes read: the session's, which the pytest-xdist
    workers share; `natively_compiled` fills it."""
    return session_cache()


def natively_compiled(cache: Path, cpu: str) -> dict[str, str]:
    """Every fixture's binary_hash on `cpu`, its object compiled natively into `cache` once
    per session: under the lock, the first worker compiles and the others hit its entries."""
    with open(cache / f"{cpu}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return {
            name: compile_program(load_program(Fixture(name).module_text), config(cpu), cache_dir=cache).hashes["binary_hash"]
            for name in FIXTURE_NAMES
        }


@pytest.fixture(scope="module")
def native() -> dict[str, dict]:
    """Every fixture run natively on this host's default x86 target."""
    return {name: describe(DEFAULT, name) for name in FIXTURE_NAMES}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("keys")
    assert main(["keys", "init", "--dir", str(directory)]) == 0
    return directory


@pytest.mark.parametrize("emulation", sorted(EMULATED))
def test_every_fixture_gives_the_x86_digests(emulation: str, cache: Path, native: dict[str, dict]) -> None:
    qemu_cpu, cpu = EMULATED[emulation]
    binary_hashes = natively_compiled(cache, cpu)
    done = emulated(["python", "tests/arm64/runner.py", cpu, *FIXTURE_NAMES], qemu_cpu, cache)
    runs = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["fixture"] for r in runs] == list(FIXTURE_NAMES)
    for run in runs:
        name = run["fixture"]
        here = native[name]
        assert run["binary_hash"] == binary_hashes[name], f"{name}: the emulated run loaded other bytes"
        assert run["hlo_hash"] == here["hlo_hash"]
        assert run["outputs"] == here["outputs"], f"{name} on {cpu} ({emulation}): outputs differ from {DEFAULT}"
        differing = [(a[0], a[1]) for a, b in zip(run["instructions"], here["instructions"], strict=True) if a != b]
        assert not differing and len(run["instructions"]) == len(here["instructions"]), f"{name} on {cpu} ({emulation}): {differing[:3]}"


def test_emulated_llvm_emits_the_native_bytes(tmp_path: Path) -> None:
    for cpu in ("neoverse-n1", "neoverse-v1"):
        done = emulated(["vxla", "compile", MODULE, "--target", cpu, "--json"], "max", tmp_path / "empty-cache")
        here = compile_program(load_program(MLP.module_text), config(cpu), cache_dir=False)
        assert json.loads(done.stdout)["binary_hash"] == here.hashes["binary_hash"], cpu


def test_sve_code_is_refused_without_sve_and_x86_code_on_arm(cache: Path) -> None:
    natively_compiled(cache, "neoverse-v1")
    done = emulated(["vxla", "run", MODULE, *INPUTS, "--target", "neoverse-v1"], "neoverse-n1", cache, check=False)
    assert done.returncode == 2, done.stderr
    assert "neoverse-v1" in done.stderr and "sve" in done.stderr and "this host runs neoverse-n1" in done.stderr
    done = emulated(["vxla", "run", MODULE, *INPUTS, "--target", "x86-64-v3"], "max", cache, check=False)
    assert done.returncode == 2 and "needs an x86_64 host" in done.stderr, done.stderr


def _verify_natively(trace: Path, keys: Path, capsys) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["verify", str(trace), "--module", MODULE, "--inputs", *INPUTS, "--trusted-key", str(keys / "node.pub"), "--json"])
    return code, json.loads(capsys.readouterr().out)


def _checks(report: dict) -> dict[str, str]:
    return {c["name"]: c["message"] for c in report["checks"] if c["ok"]}


def test_an_emulated_aarch64_trace_verifies_on_x86(cache: Path, keys: Path, tmp_path: Path, capsys) -> None:
    trace = tmp_path / "arm.json"
    natively_compiled(cache, "neoverse-v1")
    emulated(["vxla", "run", MODULE, *INPUTS, "--target", "neoverse-v1", "--trace", str(trace), "--key", str(keys / "node.key"), "--op-level"], EMULATED["sve256"][0], cache)
    code, report = _verify_natively(trace, keys, capsys)
    assert code == 0 and report["ok"], report
    assert _checks(report)["target"] == f"executed on {DEFAULT}; the trace's target neoverse-v1 was compiled and its binary_hash checked"
    host = json.loads(Envelope.from_json(trace.read_text()).payload)["predicate"]["run"]["host"]
    assert host["arch"] == "aarch64" and "sve" in host["features"]


def test_an_x86_trace_verifies_under_emulated_aarch64(cache: Path, keys: Path, tmp_path: Path) -> None:
    trace = tmp_path / "x86.json"
    # The verifier compiles the trace's x86 target under emulation (not from the cache): the
    # x86 bytes an AArch64 host emits must be the ones the x86 node ran.
    natively_compiled(cache, "neoverse-n1")
    assert main(["run", MODULE, *INPUTS, "--target", DEFAULT, "--trace", str(trace), "--key", str(keys / "node.key"), "--op-level", "--json"]) == 0
    done = emulated(["vxla", "verify", str(trace), "--module", MODULE, "--inputs", *INPUTS, "--trusted-key", str(keys / "node.pub"), "--json"], "max,sve=off", cache)
    report = json.loads(done.stdout)
    assert report["ok"], report
    assert _checks(report)["target"] == f"executed on neoverse-n1; the trace's target {DEFAULT} was compiled and its binary_hash checked"


def test_a_faulty_aarch64_trace_is_rejected_on_x86(cache: Path, keys: Path, tmp_path: Path, capsys) -> None:
    honest = describe(DEFAULT, MLP.name)
    first = honest["instructions"][0][0]
    trace = tmp_path / "faulty.json"
    natively_compiled(cache, "neoverse-n1")
    emulated(["vxla", "run", MODULE, *INPUTS, "--target", "neoverse-n1", "--trace", str(trace), "--key", str(keys / "node.key"), "--op-level", "--fault", f"{first}:2"], "max,sve=off", cache)
    code, report = _verify_natively(trace, keys, capsys)
    assert code == 1 and not report["ok"]
    assert report["first_divergence"]["name"] == first and report["first_divergence"]["proofs_ok"]
