"""The pinned targets and the host check: CPU names and their triples, feature strings, and
the refusal to load code whose target needs features the host lacks (never an illegal
instruction). Compiling and hashing work for every target on any host."""

from __future__ import annotations

from pathlib import Path

import pytest

from compiler.codegen.backends import backend_for
from compiler.codegen.target import assembly
from compiler.config import (
    DEFAULT_CPU,
    WIDEST,
    CompilerConfig,
    ConfigError,
    load_config,
    validate_target,
)
from compiler.driver import compile_program, generate
from compiler.errors import TargetNotRunnable
from compiler.host import HOST_MASK_ENV, Host, runnable_cpus, this_host, widest_runnable_cpu
from compiler.program import load_program
from compiler.runtime.loader import load_object
from compiler.targets import AARCH64_TRIPLE, TARGET_CPUS, X86_64_TRIPLE
from harness.fixture_data import Fixture
from harness.targets import ALL, RUNNABLE, config

MLP = Fixture("mlp_softmax")


def test_the_triple_follows_from_the_cpu_name() -> None:
    base = load_config()
    assert base.with_target(cpu="neoverse-n1").triple == AARCH64_TRIPLE
    assert base.with_target(cpu="neoverse-v1").triple == AARCH64_TRIPLE
    assert base.with_target(cpu="neoverse-v1").with_target(cpu="x86-64-v2").triple == X86_64_TRIPLE


def test_config_file_takes_an_aarch64_cpu(tmp_path) -> None:
    path = tmp_path / "compiler.toml"
    path.write_text('[target]\ncpu = "neoverse-v1"\n')
    assert (load_config(path).triple, load_config(path).cpu) == (AARCH64_TRIPLE, "neoverse-v1")
    path.write_text('[target]\ntriple = "x86_64-unknown-linux-gnu"\ncpu = "neoverse-n1"\n')
    with pytest.raises(ConfigError, match="neoverse-n1.*aarch64-unknown-linux-gnu.*not 'x86_64"):
        load_config(path)


@pytest.mark.parametrize(
    "cpu,features,message",
    [
        ("skylake-ish", "", "unknown CPU 'skylake-ish'; use one of x86-64-v2"),
        ("x86-64", "", "lacks SSE4.1"),
        ("x86-64-v3", "avx512f", "write \\+name or -name"),
        ("x86-64-v3", "+avx9000", "unknown x86_64 feature 'avx9000'"),
        ("neoverse-n1", "+avx2", "unknown aarch64 feature 'avx2'"),
    ],
)
def test_bad_targets_are_named(cpu: str, features: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config().with_target(cpu=cpu, features=features)


def test_a_triple_that_is_not_the_cpus_is_refused() -> None:
    with pytest.raises(ConfigError, match="belongs to triple"):
        validate_target(CompilerConfig(triple=AARCH64_TRIPLE, cpu="x86-64-v3"))


def test_added_features_are_required_of_the_host() -> None:
    target = load_config().with_target(cpu="x86-64-v3", features="+avx512vnni")
    assert "avx512vnni" in target.required_features and "avx2" in target.required_features
    assert target.vector_bits == 256
    assert load_config().with_target(cpu="x86-64-v4", features="-avx512f").vector_bits == 256


def _host(features: set[str], arch: str = "x86_64") -> Host:
    return Host(arch, frozenset(features), "test CPU")


def test_a_host_without_avx512_refuses_v4_and_names_the_features() -> None:
    avx2_host = _host(set(TARGET_CPUS["x86-64-v3"].features))
    assert runnable_cpus(avx2_host) == ["x86-64-v2", "x86-64-v3"]
    assert avx2_host.missing(config("x86-64-v4")) == ["avx512bw", "avx512cd", "avx512dq", "avx512f", "avx512vl"]
    with pytest.raises(TargetNotRunnable, match="needs avx512bw, avx512cd, avx512dq, avx512f, avx512vl, which this host lacks.*runs x86-64-v2, x86-64-v3"):
        avx2_host.check(config("x86-64-v4"))
    avx2_host.check(config("x86-64-v3"))


def test_the_cpu_name_alone_is_not_trusted() -> None:
    """A host missing one feature of a level (here FMA) does not run that level."""
    host = _host(set(TARGET_CPUS["x86-64-v3"].features) - {"fma"})
    assert host.missing(config("x86-64-v3")) == ["fma"]
    assert runnable_cpus(host) == ["x86-64-v2"]


def test_aarch64_hosts_need_sve_for_neoverse_v1() -> None:
    neon_host = _host(set(TARGET_CPUS["neoverse-n1"].features), arch="aarch64")
    assert runnable_cpus(neon_host) == ["neoverse-n1"]
    assert neon_host.missing(config("neoverse-v1"))[:3] == ["bf16", "complxnum", "flagm"]
    assert "sve" in neon_host.missing(config("neoverse-v1"))
    with pytest.raises(TargetNotRunnable, match="needs an x86_64 host"):
        neon_host.check(config("x86-64-v2"))


def test_the_widest_runnable_target_is_what_a_host_of_each_kind_pins_for_speed() -> None:
    assert widest_runnable_cpu(_host(set(TARGET_CPUS["x86-64-v4"].features))) == "x86-64-v4"
    assert widest_runnable_cpu(_host(set(TARGET_CPUS["x86-64-v3"].features))) == "x86-64-v3"
    # Same vector width: the later entry, which adds SVE.
    assert (
        widest_runnable_cpu(_host(set(TARGET_CPUS["neoverse-v1"].features), arch="aarch64"))
        == "neoverse-v1"
    )
    assert (
        widest_runnable_cpu(_host(set(TARGET_CPUS["neoverse-n1"].features), arch="aarch64"))
        == "neoverse-n1"
    )
    with pytest.raises(TargetNotRunnable, match="no pinned target runs on this host"):
        widest_runnable_cpu(_host(set(), arch="riscv64"))


# The host masks that step `widest` down one target at a time, by architecture.
_STEPS_DOWN = {
    "x86_64": (("avx512f", "x86-64-v3"), ("avx2", "x86-64-v2"), ("sse4.2", DEFAULT_CPU)),
    "aarch64": (("sve", "neoverse-n1"), ("neon", DEFAULT_CPU)),
}


def test_the_configuration_compiles_for_the_widest_target_this_host_runs(monkeypatch, tmp_path) -> None:
    """The pinned configuration says `widest`; loading it names the target chosen here (what
    a trace records), and a host without some features gets the next narrower target, or,
    running none, the default one, which it refuses to run."""
    monkeypatch.delenv(HOST_MASK_ENV, raising=False)
    assert 'cpu = "widest"' in (Path(__file__).parents[2] / "configs" / "compiler.toml").read_text()
    assert load_config().cpu == widest_runnable_cpu(this_host()) != WIDEST
    path = tmp_path / "compiler.toml"
    path.write_text('[target]\ncpu = "widest"\nopt_level = 2\n')
    for mask, expected in _STEPS_DOWN[this_host().arch]:
        monkeypatch.setenv(HOST_MASK_ENV, mask)
        chosen = load_config(path)
        assert (chosen.cpu, chosen.triple, chosen.opt_level) == (expected, TARGET_CPUS[expected].triple, 2), mask
    with pytest.raises(TargetNotRunnable, match="cannot run here"):
        this_host().check(load_config())
    # A pinned name is taken as written, runnable or not.
    path.write_text('[target]\ncpu = "x86-64-v4"\n')
    assert load_config(path).cpu == "x86-64-v4"


def test_the_mask_only_removes_features(monkeypatch) -> None:
    monkeypatch.delenv(HOST_MASK_ENV, raising=False)
    full = this_host()
    monkeypatch.setenv(HOST_MASK_ENV, "avx2, sve, a-feature-no-cpu-has")
    masked = this_host()
    assert masked.features == full.features - {"avx2", "sve"}
    assert (masked.arch, masked.cpu_model) == (full.arch, full.cpu_model)


@pytest.mark.parametrize("cpu", ALL)
def test_every_target_compiles_anywhere(cpu: str) -> None:
    """Compiling and hashing need no run: every target's object builds, references no
    undefined symbol and has stable bytes, on any host."""
    program = load_program(MLP.module_text)
    first = compile_program(program, config(cpu), cache_dir=False)
    second = compile_program(program, config(cpu), cache_dir=False)
    assert first.object_bytes == second.object_bytes and first.hashes == second.hashes
    assert backend_for(config(cpu)).unresolved_symbols(first.object_bytes) == []
    if cpu not in RUNNABLE:
        with pytest.raises(TargetNotRunnable, match=cpu):
            first.run(*MLP.inputs())
        with pytest.raises(TargetNotRunnable):
            load_object(first.object_bytes, config(cpu))


def test_binaries_differ_by_target_and_outputs_do_not() -> None:
    hashes = {cpu: compile_program(load_program(MLP.module_text), config(cpu), cache_dir=False).hashes["binary_hash"] for cpu in ALL}
    assert len(set(hashes.values())) == len(ALL)


def test_aarch64_kernels_set_and_restore_the_fpcr() -> None:
    ir_text, _, _ = generate(load_program(MLP.module_text), config("neoverse-n1"))
    assert "llvm.aarch64.set.fpcr" in ir_text and "mxcsr" not in ir_text
    asm = assembly(ir_text, config("neoverse-n1"))
    assert asm.count("msr\tFPCR") >= 2 and "mrs\tx" in asm
    x86_ir, _, _ = generate(load_program(MLP.module_text), config("x86-64-v3"))
    assert "llvm.x86.sse.ldmxcsr" in x86_ir and "fpcr" not in x86_ir
