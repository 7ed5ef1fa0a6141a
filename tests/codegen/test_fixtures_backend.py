"""The LLVM backend against the reference evaluator, bit for bit, on every fixture: for
thread counts 1, 2 and 4, on the target a node of this host compiles for by default (the widest
it runs) and, each fixture in turn, on one of the other pinned targets this host runs
(x86-64-v2 without FMA, v3, v4 where the host has AVX-512; every fixture on every AArch64
target under emulation, `make test-arm64`); and in a second process. Every compile is held
against the committed golden manifest (tests/fixtures/golden_hashes.json, `make golden`). A
target this host cannot run is compiled and checked without running for a rotating share of
the fixtures (each fixture on one such target in every COMPILE_ONLY_SHARE).
`make test-every` runs every fixture on every target this host runs, and `python
tools/golden_hashes.py --check` compiles every fixture for every target against the
manifest."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import numpy as np
import pytest

from attest.digests import tensor_digest
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from compiler.reference import evaluate
from compiler.targets import ARCHITECTURES
from harness.fixture_data import FIXTURE_NAMES, GOLDEN_HASHES_PATH, Fixture
from harness.sampling import every, one_each
from harness.targets import ALL, DEFAULT, RUNNABLE, check_without_running, runnable, session_cache

TARGETS = list(ALL)
# Compile-only checks are cold compiles (about 2 s a fixture and target): each fixture is
# checked on the compile-only targets whose place in TARGETS matches its own modulo this.
COMPILE_ONLY_SHARE = 4
_REFERENCE: dict[str, list[np.ndarray]] = {}


def reference_outputs(fixture: Fixture) -> list[np.ndarray]:
    if fixture.name not in _REFERENCE:
        _REFERENCE[fixture.name] = evaluate(load_program(fixture.module_text).module, fixture.inputs())
    return _REFERENCE[fixture.name]


@cache
def golden() -> dict:
    return json.loads(GOLDEN_HASHES_PATH.read_text())


def assert_golden(name: str, target: str, hashes: dict[str, str]) -> None:
    """The compile's hashes are the manifest's; a change must be deliberate: bump the version
    of the pass that changed the graph (or, for the code generator, say so in the commit) and
    regenerate the manifest with `make golden`."""
    manifest = golden()
    pinned = load_config()
    assert manifest["pipeline_id"] == pinned.pipeline_id, (
        f"{GOLDEN_HASHES_PATH.name} was made with pipeline_id {manifest['pipeline_id'][:16]}..., this "
        f"compiler has {pinned.pipeline_id[:16]}...: regenerate it with `make golden`"
    )
    entry = manifest["fixtures"][name]
    recorded = {"hlo_hash": entry["hlo_hash"], **entry["targets"][target]}
    for key, value in recorded.items():
        assert hashes[key] == value, (
            f"{name} on {target}: {key} is {hashes[key][:16]}..., the manifest has {value[:16]}... "
            f"with the same pipeline_id: the {'optimized graph' if key == 'graph_hash' else 'machine code or its plan' if key == 'binary_hash' else 'canonical text'} "
            "changed without a pass version bump (if on purpose: bump it and run `make golden`)"
        )


def test_the_golden_manifest_covers_every_fixture_and_target() -> None:
    manifest = golden()
    assert sorted(manifest["fixtures"]) == sorted(FIXTURE_NAMES)
    assert all(sorted(entry["targets"]) == sorted(TARGETS) for entry in manifest["fixtures"].values())
    pinned = load_config()
    assert (manifest["llvm_version"], manifest["llvmlite_version"]) == (pinned.llvm_version, pinned.llvmlite_version)
    assert manifest["linkers"] == {row.name: f"{row.linker.name} {row.linker.version}" for row in ARCHITECTURES.values() if row.linker}


def assert_identical(outputs: list[np.ndarray], expected: list[np.ndarray], label: str) -> None:
    assert len(outputs) == len(expected), label
    for index, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        assert got.dtype == want.dtype and got.shape == want.shape, f"{label} out{index}"
        if got.tobytes() != want.tobytes():
            bits = {2: np.uint16, 4: np.uint32, 8: np.uint64, 1: np.uint8}[got.dtype.itemsize]
            bad = np.flatnonzero(got.reshape(-1).view(bits) != want.reshape(-1).view(bits))
            raise AssertionError(
                f"{label} out{index}: {bad.size} elements differ, first at {bad[:5].tolist()}: "
                f"got {got.reshape(-1)[bad[:5]]} want {want.reshape(-1)[bad[:5]]}"
            )


def _cases() -> list[tuple[str, str]]:
    """Every fixture on DEFAULT, each on one other runnable target in turn, and the rotating
    share of the compile-only targets."""
    others = [t for t in RUNNABLE if t != DEFAULT]
    run = {(n, DEFAULT) for n in FIXTURE_NAMES if DEFAULT in RUNNABLE} | set(one_each(FIXTURE_NAMES, others))
    share = 1 if every() else COMPILE_ONLY_SHARE
    checked = {(n, t) for n in FIXTURE_NAMES for t in TARGETS if not runnable(t) and FIXTURE_NAMES.index(n) % share == TARGETS.index(t) % share}
    return [(n, t) for n in FIXTURE_NAMES for t in TARGETS if (n, t) in run | checked]


def test_every_runnable_target_runs_fixtures() -> None:
    covered = {t for _, t in _cases()}
    assert set(RUNNABLE) <= covered


@pytest.mark.parametrize(("name", "target"), _cases())
def test_backend_is_bit_identical_to_the_reference(name: str, target: str) -> None:
    fixture = Fixture(name)
    if not runnable(target):
        assert_golden(name, target, check_without_running(fixture.module_text, target).hashes)
        return
    executable = compile_program(load_program(fixture.module_text), load_config().with_target(cpu=target), cache_dir=session_cache())
    assert_golden(name, target, executable.hashes)
    expected = reference_outputs(fixture)
    assert [tensor_digest(o) for o in expected] == golden()["fixtures"][name]["output_digests"], f"{name}: the reference's outputs are not the manifest's"
    for threads in (1, 2, 4):
        assert_identical(executable.run(*fixture.inputs(), threads=threads), expected, f"{name} {target} threads={threads}")


def test_compiling_in_two_processes_gives_the_same_bytes_and_bits(tmp_path) -> None:
    fixture = Fixture("transformer_block")
    script = (
        "import json, sys\n"
        "from compiler.config import load_config\n"
        "from compiler.driver import compile_program\n"
        "from compiler.program import load_program\n"
        "from attest.digests import tensor_digest\n"
        "from harness.fixture_data import Fixture\n"
        "f = Fixture('transformer_block')\n"
        "exe = compile_program(load_program(f.module_text), load_config(), cache_dir=False)\n"
        "print(json.dumps({'hashes': exe.hashes, 'outputs': [tensor_digest(o) for o in exe.run(*f.inputs())]}))\n"
    )
    root = fixture.directory.parents[2]
    runs = [json.loads(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=root).stdout) for _ in range(2)]
    assert runs[0] == runs[1]
    here = compile_program(load_program(fixture.module_text), load_config(), cache_dir=False)
    assert here.hashes == runs[0]["hashes"]
