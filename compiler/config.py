"""The compiler configuration: the pinned target CPUs and CompilerConfig, everything that can
change the emitted bytes, loaded from TOML. The compile cache and every trace record all of it.

The LLVM side of a target (the target machine, object emission) is compiler/codegen/target.py.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, replace
from importlib import resources
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from attest.digests import text_digest
from compiler.errors import ConfigError
from compiler.host import widest_cpu_here
from compiler.numerics import CONTRACT_VERSION
from compiler.passes.pipeline import pipeline_named
from compiler.targets import (
    ARCHITECTURES,
    TARGET_CPUS,
    X86_64_TRIPLE,
    Architecture,
    TargetCpu,
)

# The pinned configuration, package data of `compiler` (configs/compiler.toml links to it).
PINNED_CONFIG_NAME = "pinned.toml"

# A configuration's `cpu = "widest"` selects the widest pinned target this host runs
# (compiler/host.py): x86-64-v4 with AVX-512, x86-64-v3 with AVX2, neoverse-v1 with SVE. Every
# target computes the same bits; the machine code, and so binary_hash, is the target's
# (docs/backend.md). The loaded config names the target chosen, so a trace records it.
WIDEST = "widest"
# The target a config has when it names none, and what `widest` gives on a host that runs
# no pinned target (another architecture): compiling and hashing work on any host; running
# there is refused, naming what is missing.
DEFAULT_CPU = "x86-64-v3"

def chosen_cpu(name: str) -> str:
    """`name`, or for `widest` the widest pinned CPU this host runs (DEFAULT_CPU where it
    runs none): the one place a configuration's or a node's `widest` becomes a target."""
    if name != WIDEST:
        return name
    return widest_cpu_here(DEFAULT_CPU)


def target_cpu(name: str) -> TargetCpu:
    """The pinned definition of CPU `name`; ConfigError naming the known ones otherwise."""
    if name == "x86-64":
        raise ConfigError("x86-64 (v1) lacks SSE4.1 rounding instructions; use x86-64-v2 or later")
    try:
        return TARGET_CPUS[name]
    except KeyError:
        raise ConfigError(f"unknown CPU {name!r}; use one of {', '.join(TARGET_CPUS)}") from None


def feature_flags(features: str) -> list[tuple[bool, str]]:
    """The (enable, name) pairs of an LLVM feature string such as "+avx2,-avx512f"."""
    flags = []
    for item in filter(None, (part.strip() for part in features.split(","))):
        if item[0] not in "+-" or len(item) < 2:
            raise ConfigError(f"feature {item!r}: write +name or -name (e.g. +avx2,-avx512f)")
        flags.append((item[0] == "+", item[1:]))
    return flags


@dataclass(frozen=True)
class CompilerConfig:
    """Everything that determines the machine code for a given optimized module."""

    triple: str = X86_64_TRIPLE
    cpu: str = DEFAULT_CPU
    features: str = ""
    opt_level: int = 3
    llvmlite_version: str = llvmlite.__version__
    llvm_version: str = ".".join(str(v) for v in llvm.llvm_version_info)
    contract_version: int = CONTRACT_VERSION
    # The pass pipeline by name (compiler/passes/pipeline.py) and its id, derived from the
    # code when not given; a recorded config whose id the code does not reproduce is refused.
    pipeline: str = "default"
    pipeline_id: str = ""
    # Tests only: the plan's entry calls a seeded random delay (spins or yields) at every
    # barrier arrival and step boundary (compiler/codegen/native_plan.py), so a race between
    # workers shows on a quiet machine too; no result bit may change. Off, it emits nothing
    # and is left out of as_dict (the digest, the cache key and the bytes are those of a
    # compiler without it); on, it is part of the config's identity, cannot be set from a
    # config file, and no trace is signed of such a build (node/tracing/statement.py).
    schedule_perturbation: bool = False
    # Targets linked by an external program only (left out of as_dict for the others): the
    # linker and its release (compiler/targets.py Linker), derived from the target's row when
    # not given; a recorded other one is refused.
    linker: str = ""
    linker_version: str = ""

    def __post_init__(self) -> None:
        pinned = TARGET_CPUS[self.cpu].architecture.linker if self.cpu in TARGET_CPUS else None
        if pinned is not None:
            if not self.linker and not self.linker_version:
                object.__setattr__(self, "linker", pinned.name)
                object.__setattr__(self, "linker_version", pinned.version)
            elif (self.linker, self.linker_version) != (pinned.name, pinned.version):
                raise ConfigError(
                    f"this compiler links {self.cpu} code with {pinned.name} {pinned.version}, not the recorded "
                    f"{self.linker} {self.linker_version}: a different vxla version made it"
                )
        elif self.linker or self.linker_version:
            raise ConfigError(f"linker {self.linker} {self.linker_version} recorded for {self.cpu}, whose code vxla links itself")
        expected = pipeline_named(self.pipeline).pipeline_id
        if not self.pipeline_id:
            object.__setattr__(self, "pipeline_id", expected)
        elif self.pipeline_id != expected:
            raise ConfigError(
                f"pipeline {self.pipeline!r} has id {expected[:16]}... in this compiler, not the "
                f"recorded {self.pipeline_id[:16]}...: a different vxla version made it"
            )

    @property
    def target_cpu(self) -> TargetCpu:
        return target_cpu(self.cpu)

    @property
    def arch(self) -> str:
        """The triple's architecture, as LLVM names it (a key of compiler/targets.py
        ARCHITECTURES)."""
        return self.triple.split("-", 1)[0]

    @property
    def architecture(self) -> Architecture:
        """The row of the triple's architecture: the capabilities the backend and the
        runtime read (compiler/targets.py)."""
        try:
            return ARCHITECTURES[self.arch]
        except KeyError:
            raise ConfigError(f"unknown architecture {self.arch!r} (triple {self.triple!r}); use one of {', '.join(ARCHITECTURES)}") from None

    @property
    def runs_on_host(self) -> bool:
        """Whether the code runs in this process on the host's CPU (else on a device through
        its driver: grid kernels and a device code object)."""
        return self.architecture.runs_on_host

    @property
    def required_features(self) -> frozenset[str]:
        """The LLVM features this target's code may use: the CPU's set with the `features`
        string's additions; removals are not subtracted (LLVM may still use what depends on a
        removed feature), so the set errs towards refusing a host."""
        added = {name for enable, name in feature_flags(self.features) if enable}
        return self.target_cpu.features | added

    def _usable_features(self) -> frozenset[str]:
        removed = {name for enable, name in feature_flags(self.features) if not enable}
        return self.required_features - removed

    @property
    def has_fma(self) -> bool:
        """Whether `llvm.fma` is one instruction: always where the architecture's row names no
        FMA feature, else with that feature (without it the backend emulates fma exactly,
        since LLVM would call libm's fma)."""
        feature = self.architecture.fma_feature
        return not feature or feature in self._usable_features()

    @property
    def vector_bits(self) -> int:
        """The width of the vector registers the backend fills (results never depend on it):
        the widest of the row's wide vector features the config may use, else its narrow
        width (the CPU's where the row gives none)."""
        row = self.architecture
        usable = self._usable_features() if row.wide_vectors else frozenset()
        for feature, bits in row.wide_vectors:
            if feature in usable:
                return bits
        return row.narrow_vector_bits or self.target_cpu.vector_bits

    @property
    def vector_registers(self) -> int:
        """How many vector registers the code may use (register blocking sizes its tiles to
        them; results never depend on it): the row's count, its wide count at 512 bits."""
        row = self.architecture
        return row.wide_vector_registers if self.vector_bits >= 512 else row.vector_registers

    def with_pipeline(self, name: str) -> CompilerConfig:
        """This config with another pass pipeline (its id recomputed)."""
        return replace(self, pipeline=name, pipeline_id="")

    def with_schedule_perturbation(self, on: bool = True) -> CompilerConfig:
        """This config with the test-only schedule perturbation on (or off)."""
        return replace(self, schedule_perturbation=on)

    def with_target(self, cpu: str | None = None, features: str | None = None) -> CompilerConfig:
        """This config for another CPU (its triple follows from the name; `widest` is chosen
        here, chosen_cpu) or feature string; ConfigError for an unknown CPU or a bad feature
        string."""
        cpu = chosen_cpu(cpu) if cpu is not None else self.cpu
        row = target_cpu(cpu).architecture
        # A feature string belongs to one architecture: another's starts without one.
        features = features if features is not None else (self.features if row.name == self.arch else "")
        config = replace(self, triple=target_cpu(cpu).triple, cpu=cpu, features=features, linker="", linker_version="")
        validate_target(config)
        return config

    def as_dict(self) -> dict:
        data = asdict(self)
        if not self.schedule_perturbation:
            del data["schedule_perturbation"]  # off: the identity of a compiler without it
        if not self.linker:
            del data["linker"], data["linker_version"]  # linked by vxla: the identity it had before linkers
        return data

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of this config (a cache and identity key)."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return text_digest(text)


def load_config(path: str | Path | None = None) -> CompilerConfig:
    """The compiler configuration from a TOML file; by default the pinned one, which the
    package carries (compiler/pinned.toml, also found as configs/compiler.toml)."""
    if path is None:
        path, text = Path(PINNED_CONFIG_NAME), resources.files("compiler").joinpath(PINNED_CONFIG_NAME).read_text(encoding="utf-8")
    else:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    target = data.get("target", {})
    if not isinstance(target, dict):
        raise ConfigError(f"{path}: [target] must be a table")
    passes = data.get("passes", {})
    if not isinstance(passes, dict):
        raise ConfigError(f"{path}: [passes] must be a table")
    unknown = sorted(set(passes) - {"pipeline"})
    if unknown:
        raise ConfigError(f"{path}: unknown key passes.{unknown[0]}")
    pipeline = passes.get("pipeline", "default")
    if not isinstance(pipeline, str):
        raise ConfigError(f"{path}: passes.pipeline must be a str")
    unknown = sorted(set(target) - {"triple", "cpu", "features", "opt_level"})
    if unknown:
        raise ConfigError(f"{path}: unknown key target.{unknown[0]}")
    try:
        config = CompilerConfig(pipeline=pipeline)
    except ConfigError as exc:
        raise ConfigError(f"{path}: passes.pipeline: {exc}") from None
    if "cpu" in target:
        target = {**target, "cpu": chosen_cpu(target["cpu"])}
    for key, kind in (("triple", str), ("cpu", str), ("features", str), ("opt_level", int)):
        if key in target:
            value = target[key]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ConfigError(f"{path}: target.{key} must be a {kind.__name__}")
            config = replace(config, **{key: value})
    if "cpu" in target and "triple" not in target and config.cpu in TARGET_CPUS:
        # The triple follows from the CPU name unless the file spells both out.
        config = replace(config, triple=TARGET_CPUS[config.cpu].triple)
    if not 0 <= config.opt_level <= 3:
        raise ConfigError(f"{path}: target.opt_level must be 0..3")
    try:
        validate_target(config)
    except ConfigError as exc:
        raise ConfigError(f"{path}: target: {exc}") from None
    return config


def validate_target(config: CompilerConfig) -> None:
    """Raises ConfigError unless the CPU is a pinned one, the triple is the CPU's and the
    feature string names known features of that architecture."""
    cpu = target_cpu(config.cpu)
    if config.triple != cpu.triple:
        raise ConfigError(f"CPU {config.cpu!r} belongs to triple {cpu.triple!r}, not {config.triple!r}")
    for _, name in feature_flags(config.features):
        if name not in cpu.architecture.known_features:
            raise ConfigError(f"unknown {cpu.arch} feature {name!r} in {config.features!r}")
