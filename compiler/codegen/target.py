"""The pinned compilation target: CompilerConfig, the LLVM target machine, and object emission.

Everything that can change the emitted bytes is in CompilerConfig, and the compile cache and
every trace record all of it.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

from attest.digests import text_digest
from compiler.numerics import CONTRACT_VERSION

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parents[2] / "configs" / "compiler.toml"

# x86-64 CPU names whose instruction set has FMA3 (then `llvm.fma` is one instruction; on
# other CPUs the backend emulates fma exactly, since LLVM would call libm's fma).
_FMA_CPUS = frozenset({"x86-64-v3", "x86-64-v4", "haswell", "broadwell", "skylake", "skylake-avx512",
                       "icelake-server", "sapphirerapids", "znver1", "znver2", "znver3", "znver4", "znver5"})  # fmt: skip
KNOWN_X86_LEVELS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4")


class ConfigError(ValueError):
    """A compiler configuration that cannot be used; the message names the key."""


@dataclass(frozen=True)
class CompilerConfig:
    """Everything that determines the machine code for a given optimized module."""

    triple: str = "x86_64-unknown-linux-gnu"
    cpu: str = "x86-64-v3"
    features: str = ""
    opt_level: int = 3
    llvmlite_version: str = llvmlite.__version__
    llvm_version: str = ".".join(str(v) for v in llvm.llvm_version_info)
    contract_version: int = CONTRACT_VERSION
    # The pass pipeline by name (compiler/passes/pipeline.py) and its id, derived from the
    # code when not given; a recorded config whose id the code does not reproduce is refused.
    pipeline: str = "default"
    pipeline_id: str = ""

    def __post_init__(self) -> None:
        from compiler.passes.pipeline import pipeline_named

        try:
            expected = pipeline_named(self.pipeline).pipeline_id
        except KeyError as exc:
            raise ConfigError(str(exc.args[0])) from None
        if not self.pipeline_id:
            object.__setattr__(self, "pipeline_id", expected)
        elif self.pipeline_id != expected:
            raise ConfigError(
                f"pipeline {self.pipeline!r} has id {expected[:16]}... in this compiler, not the "
                f"recorded {self.pipeline_id[:16]}...: a different vxla version made it"
            )

    @property
    def has_fma(self) -> bool:
        feature_flags = self.features.split(",") if self.features else []
        if "-fma" in feature_flags:
            return False
        return self.cpu in _FMA_CPUS or "+fma" in feature_flags

    def with_pipeline(self, name: str) -> CompilerConfig:
        """This config with another pass pipeline (its id recomputed)."""
        return replace(self, pipeline=name, pipeline_id="")

    def with_target(self, cpu: str | None = None, features: str | None = None) -> CompilerConfig:
        return replace(self, cpu=cpu if cpu is not None else self.cpu, features=features if features is not None else self.features)

    def as_dict(self) -> dict:
        return asdict(self)

    def digest(self) -> str:
        """SHA-256 of the canonical JSON of this config (a cache and identity key)."""
        text = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":"))
        return text_digest(text)


def load_config(path: str | Path = DEFAULT_CONFIG_PATH) -> CompilerConfig:
    """The compiler configuration from a TOML file (configs/compiler.toml by default)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
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
    for key, kind in (("triple", str), ("cpu", str), ("features", str), ("opt_level", int)):
        if key in target:
            value = target[key]
            if not isinstance(value, kind) or isinstance(value, bool):
                raise ConfigError(f"{path}: target.{key} must be a {kind.__name__}")
            config = replace(config, **{key: value})
    if not 0 <= config.opt_level <= 3:
        raise ConfigError(f"{path}: target.opt_level must be 0..3")
    validate_target(config)
    return config


@lru_cache(maxsize=1)
def _initialize() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


# x86-64 CPU names accepted for a target; LLVM silently treats unknown names as a generic
# CPU, which would make a typo look like a different binary.
KNOWN_X86_CPUS = (frozenset(KNOWN_X86_LEVELS) - {"x86-64"}) | _FMA_CPUS | {"nehalem", "westmere", "sandybridge", "ivybridge"}


def validate_target(config: CompilerConfig) -> None:
    """Raises ConfigError unless LLVM knows the triple and the CPU name is a known one."""
    _initialize()
    try:
        llvm.Target.from_triple(config.triple)
    except RuntimeError as exc:
        raise ConfigError(f"unknown target triple {config.triple!r}: {exc}") from None
    if not config.triple.startswith("x86_64"):
        raise ConfigError(f"target triple {config.triple!r} is not supported yet (only x86_64)")
    if config.cpu == "x86-64":
        raise ConfigError("x86-64 (v1) lacks SSE4.1 rounding instructions; use x86-64-v2 or later")
    if config.cpu not in KNOWN_X86_CPUS:
        raise ConfigError(f"unknown CPU {config.cpu!r}; use one of {', '.join(sorted(KNOWN_X86_CPUS))}")


def target_machine(config: CompilerConfig) -> llvm.TargetMachine:
    """The LLVM target machine for `config` (position-independent code)."""
    _initialize()
    target = llvm.Target.from_triple(config.triple)
    return target.create_target_machine(cpu=config.cpu, features=config.features, opt=config.opt_level, reloc="pic", codemodel="default")


def optimize(module: llvm.ModuleRef, config: CompilerConfig) -> None:
    """Runs LLVM's standard pipeline at the configured level (no fast-math exists in the IR,
    so no pass may change a floating-point value)."""
    machine = target_machine(config)
    tuning = llvm.create_pipeline_tuning_options(speed_level=config.opt_level)
    builder = llvm.create_pass_builder(machine, tuning)
    builder.getModulePassManager().run(module, builder)


def compile_ir(ir_text: str, config: CompilerConfig) -> bytes:
    """Parses, verifies, optimizes and emits LLVM IR text as object-file bytes."""
    _initialize()
    module = llvm.parse_assembly(ir_text)
    module.triple = config.triple
    machine = target_machine(config)
    module.data_layout = str(machine.target_data)
    module.verify()
    optimize(module, config)
    return machine.emit_object(module)


def assembly(ir_text: str, config: CompilerConfig) -> str:
    """The optimized assembly for IR text (for inspection and tests)."""
    _initialize()
    module = llvm.parse_assembly(ir_text)
    module.triple = config.triple
    machine = target_machine(config)
    module.data_layout = str(machine.target_data)
    optimize(module, config)
    return machine.emit_assembly(module)
