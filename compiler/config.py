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
from compiler.numerics import CONTRACT_VERSION
from compiler.passes.pipeline import pipeline_named

# The pinned configuration, package data of `compiler` (configs/compiler.toml links to it).
PINNED_CONFIG_NAME = "pinned.toml"

X86_64_TRIPLE = "x86_64-unknown-linux-gnu"
AARCH64_TRIPLE = "aarch64-unknown-linux-gnu"
NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
# Architectures whose code runs on a GPU through a driver (compiler/codegen/backend.py): the
# plan's kernels become grid kernels, and the bytes hashed are the device's code object.
GPU_ARCHES = frozenset({"nvptx64"})
# The PTX ISA version of the assembly LLVM writes for NVIDIA targets (7.8: the first with
# sm_90), and the nvJitLink release that turns it into a cubin: another nvJitLink may emit
# other machine code from the same PTX, so it is part of a GPU config's identity and a
# different one is refused (compiler/codegen/nvptx.py), as another LLVM would be.
PTX_ISA = "ptx78"
NVJITLINK_VERSION = "13.5"


@dataclass(frozen=True)
class TargetCpu:
    """A target the compiler may pin, a CPU or a GPU architecture: its triple, the LLVM
    features its code may use (every one must be on a host before that code runs there) and
    its vector register width. A GPU target also names LLVM's processor (`llvm_cpu`) and the
    features always passed to LLVM (`llvm_features`: the PTX ISA version its assembly is
    written in), both part of the compiler's identity through the target's name."""

    name: str
    triple: str
    features: frozenset[str]
    vector_bits: int
    description: str
    llvm_cpu: str = ""
    llvm_features: str = ""

    @property
    def arch(self) -> str:
        return self.triple.split("-", 1)[0]

    @property
    def is_gpu(self) -> bool:
        return self.arch in GPU_ARCHES

    @property
    def processor(self) -> str:
        """The CPU (processor) name LLVM is given."""
        return self.llvm_cpu or self.name


# The feature sets are LLVM's definitions of these CPUs (the x86-64 psABI levels; Arm's
# Neoverse cores), in LLVM's feature names, which are also what host detection reports. The
# AArch64 sets leave out the cores' system-control features (SSBS, DIT, SPE, RAS): they
# change no instruction the code generator emits, and hosts (QEMU among them) need not
# report them.
_X86_64_V2 = frozenset({"64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2", "cx16", "sahf", "crc32",
                        "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2"})  # fmt: skip
_X86_64_V3 = _X86_64_V2 | {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"}
_X86_64_V4 = _X86_64_V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
_NEOVERSE_N1 = frozenset({"fp-armv8", "neon", "crc", "lse", "rdm", "rcpc", "dotprod", "fullfp16",
                          "aes", "sha2", "ccpp"})  # fmt: skip
_NEOVERSE_V1 = _NEOVERSE_N1 | {"sve", "bf16", "i8mm", "fp16fml", "jsconv", "complxnum", "flagm",
                               "rcpc-immo", "sha3", "rand"}  # fmt: skip

TARGET_CPUS: dict[str, TargetCpu] = {
    cpu.name: cpu
    for cpu in (
        TargetCpu("x86-64-v2", X86_64_TRIPLE, _X86_64_V2, 128, "SSE4.2, no FMA"),
        TargetCpu("x86-64-v3", X86_64_TRIPLE, _X86_64_V3, 256, "AVX2 and FMA"),
        TargetCpu("x86-64-v4", X86_64_TRIPLE, _X86_64_V4, 512, "AVX-512"),
        TargetCpu("neoverse-n1", AARCH64_TRIPLE, _NEOVERSE_N1, 128, "Armv8.2 with NEON (Graviton2, Ampere Altra)"),
        TargetCpu("neoverse-v1", AARCH64_TRIPLE, _NEOVERSE_V1, 128, "Armv8.4 with SVE (Graviton3); SVE code gives the same bits at every vector length"),
        # GPU features are the compute capability the device must report exactly: a cubin
        # holds machine code for one architecture. Vector width 32: one f32 lane per thread.
        TargetCpu("nvptx-sm90", NVPTX_TRIPLE, frozenset({"sm_90"}), 32, "NVIDIA Hopper (H100, H200), compute capability 9.0", "sm_90", f"+{PTX_ISA}"),
        TargetCpu("nvptx-sm80", NVPTX_TRIPLE, frozenset({"sm_80"}), 32, "NVIDIA Ampere (A100), compute capability 8.0", "sm_80", f"+{PTX_ISA}"),
    )
}
# A configuration's `cpu = "widest"` selects the widest pinned target this host runs
# (compiler/host.py): x86-64-v4 with AVX-512, x86-64-v3 with AVX2, neoverse-v1 with SVE. Every
# target computes the same bits; the machine code, and so binary_hash, is the target's
# (docs/backend.md). The loaded config names the target chosen, so a trace records it.
WIDEST = "widest"
# The target a config has when it names none, and what `widest` gives on a host that runs
# no pinned target (another architecture): compiling and hashing work on any host; running
# there is refused, naming what is missing.
DEFAULT_CPU = "x86-64-v3"

# Feature names a `features` string may add or remove, by architecture.
_KNOWN_FEATURES = {
    "x86_64": _X86_64_V4 | {"avx512vnni", "avx512bf16", "avx512fp16", "avx512vbmi", "avx512vbmi2", "avx512ifma",
                            "avx512bitalg", "avx512vpopcntdq", "avxvnni", "gfni", "vaes", "vpclmulqdq", "adx",
                            "aes", "pclmul", "sha", "prfchw", "fma4", "xop", "sse4a", "tbm"},
    "aarch64": _NEOVERSE_V1 | {"sve2", "sme", "mte", "pauth", "bti", "sb", "sm4", "lse2", "ssbs", "dit"},
    "nvptx64": frozenset(),  # a GPU target's code is fixed by its name: no feature may change it
}  # fmt: skip


def chosen_cpu(name: str) -> str:
    """`name`, or for `widest` the widest pinned CPU this host runs (DEFAULT_CPU where it
    runs none): the one place a configuration's or a node's `widest` becomes a target."""
    if name != WIDEST:
        return name
    # Imported here: compiler/host.py reads the target table of this module.
    from compiler.host import widest_cpu_here

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
    # GPU targets only (left out of as_dict for CPU ones): the nvJitLink release that makes
    # the cubin, derived from the code when not given; a recorded other one is refused.
    nvjitlink_version: str = ""

    def __post_init__(self) -> None:
        if self.cpu in TARGET_CPUS and TARGET_CPUS[self.cpu].is_gpu:
            if not self.nvjitlink_version:
                object.__setattr__(self, "nvjitlink_version", NVJITLINK_VERSION)
            elif self.nvjitlink_version != NVJITLINK_VERSION:
                raise ConfigError(
                    f"this compiler links GPU code with nvJitLink {NVJITLINK_VERSION}, not the recorded "
                    f"{self.nvjitlink_version}: a different vxla version made it"
                )
        elif self.nvjitlink_version:
            raise ConfigError(f"nvjitlink_version {self.nvjitlink_version!r} is for GPU targets only, not {self.cpu}")
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
        """The triple's architecture: x86_64, aarch64 or nvptx64."""
        return self.triple.split("-", 1)[0]

    @property
    def is_gpu(self) -> bool:
        """Whether the code runs on a GPU (grid kernels, a driver, a device code object)."""
        return self.arch in GPU_ARCHES

    @property
    def required_features(self) -> frozenset[str]:
        """The LLVM features this target's code may use: the CPU's set with the `features`
        string's additions; removals are not subtracted (LLVM may still use what depends on a
        removed feature), so the set errs towards refusing a host."""
        added = {name for enable, name in feature_flags(self.features) if enable}
        return self.target_cpu.features | added

    @property
    def has_fma(self) -> bool:
        """Whether `llvm.fma` is one instruction (AArch64 always has it; on x86 it needs
        FMA3, else the backend emulates fma exactly, since LLVM would call libm's fma)."""
        if any(name == "fma" and not enable for enable, name in feature_flags(self.features)):
            return False
        return self.arch in ("aarch64", "nvptx64") or "fma" in self.required_features

    @property
    def vector_bits(self) -> int:
        """The width of the vector registers the backend fills (results never depend on it)."""
        if self.arch != "x86_64":
            return self.target_cpu.vector_bits
        removed = {name for enable, name in feature_flags(self.features) if not enable}
        usable = self.required_features - removed
        if "avx512f" in usable:
            return 512
        return 256 if "avx2" in usable else 128

    @property
    def vector_registers(self) -> int:
        """How many vector registers the code may use: 32 on AArch64 and with AVX-512, else 16
        (register blocking sizes its tiles to them; results never depend on it). A GPU thread
        has scalar registers only: 16 keeps a work item's accumulators few."""
        return 32 if self.arch == "aarch64" or self.vector_bits >= 512 else 16

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
        gpu = target_cpu(cpu).is_gpu
        features = features if features is not None else ("" if gpu or self.is_gpu else self.features)
        config = replace(self, triple=target_cpu(cpu).triple, cpu=cpu, features=features, nvjitlink_version=NVJITLINK_VERSION if gpu else "")
        validate_target(config)
        return config

    def as_dict(self) -> dict:
        data = asdict(self)
        if not self.schedule_perturbation:
            del data["schedule_perturbation"]  # off: the identity of a compiler without it
        if not self.nvjitlink_version:
            del data["nvjitlink_version"]  # a CPU target: the identity it had before GPU targets
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
        if name not in _KNOWN_FEATURES[cpu.arch]:
            raise ConfigError(f"unknown {cpu.arch} feature {name!r} in {config.features!r}")
