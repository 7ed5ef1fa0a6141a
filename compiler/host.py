"""The machine code runs on: its architecture and CPU features, which pinned targets may run
here (fail closed: code runs only where the host has every feature its target may use), and
the widest of them, which a configuration's `cpu = "widest"` selects (compiler/config.py).

x86 features come from CPUID through LLVM's host detection. AArch64 features come from the
kernel's hardware capability words (getauxval AT_HWCAP/AT_HWCAP2): under QEMU user mode those
describe the emulated CPU, while LLVM's host detection reads /proc/cpuinfo, which there
describes the x86 machine underneath.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import llvmlite.binding as llvm

from compiler.errors import TargetNotRunnable
from compiler.targets import TARGET_CPUS

# Restricts what this host is taken to have (comma-separated LLVM feature names to treat as
# absent), e.g. to keep a node off AVX-512. It can only remove features, never add them.
HOST_MASK_ENV = "VXLA_HOST_WITHOUT"

# Linux arm64 hwcap bits (arch/arm64/include/uapi/asm/hwcap.h) by LLVM feature name: a
# feature is present when all of its bits are set.
_AT_HWCAP = 16
_AT_HWCAP2 = 26
_HWCAP_BITS = {
    "fp-armv8": [0], "neon": [1], "aes": [3, 4], "sha2": [6], "crc": [7], "lse": [8],
    "fullfp16": [9, 10], "rdm": [12], "jsconv": [13], "complxnum": [14], "rcpc": [15],
    "ccpp": [16], "sha3": [17], "sm4": [18, 19], "dotprod": [20], "sve": [22], "fp16fml": [23],
    "dit": [24], "lse2": [25], "rcpc-immo": [26], "flagm": [27], "ssbs": [28], "sb": [29],
    "pauth": [30, 31],
}  # fmt: skip
_HWCAP2_BITS = {"sve2": [1], "i8mm": [13], "bf16": [14], "rand": [16], "bti": [17], "mte": [18]}


class CodeTarget(Protocol):
    """What the host check reads of a configuration (compiler/config.py CompilerConfig,
    which chooses its `widest` target here)."""

    cpu: str
    triple: str

    @property
    def arch(self) -> str: ...

    @property
    def required_features(self) -> frozenset[str]: ...


@dataclass(frozen=True)
class Host:
    """The executing machine: architecture (x86_64 or aarch64), LLVM feature names it has,
    and a human-readable CPU model."""

    arch: str
    features: frozenset[str]
    cpu_model: str

    def missing(self, config: CodeTarget) -> list[str]:
        """The features `config`'s code may use that this host lacks (all of them, sorted),
        or the architecture when it differs."""
        if config.arch != self.arch:
            return [config.arch]
        return sorted(config.required_features - self.features)

    def can_run(self, config: CodeTarget) -> bool:
        return not self.missing(config)

    def check(self, config: CodeTarget) -> None:
        """TargetNotRunnable unless `config`'s code may run here."""
        missing = self.missing(config)
        if not missing:
            return
        runnable = runnable_cpus(self)
        hint = f"; this host runs {', '.join(runnable)}" if runnable else ""
        reason = f"needs an {config.arch} host" if config.arch != self.arch else f"needs {', '.join(missing)}, which this host lacks"
        raise TargetNotRunnable(
            f"target {config.cpu} ({config.triple}) cannot run here: it {reason} "
            f"(this host: {self.arch}, {self.cpu_model}){hint}. Compiling and hashing for {config.cpu} work on any host."
        )


def runnable_cpus(host: Host) -> list[str]:
    """The pinned CPU names whose code may run on `host`, in table order."""
    return [
        name for name, cpu in TARGET_CPUS.items() if cpu.arch == host.arch and cpu.features <= host.features
    ]


def widest_runnable_cpu(host: Host) -> str:
    """The runnable pinned CPU name with the widest vectors (of equals, the later in table
    order, which adds features): what an operator of this host pins for speed. The bits are
    the same on every target."""
    runnable = runnable_cpus(host)
    if not runnable:
        raise TargetNotRunnable(f"no pinned target runs on this host ({host.arch})")
    return max(reversed(runnable), key=lambda name: TARGET_CPUS[name].vector_bits)


def widest_cpu_here(fallback: str) -> str:
    """The widest pinned CPU this machine runs (its features less VXLA_HOST_WITHOUT), or
    `fallback` where it runs none."""
    host = this_host()
    return widest_runnable_cpu(host) if runnable_cpus(host) else fallback


def _aarch64_features() -> frozenset[str]:
    libc = ctypes.CDLL(None)
    libc.getauxval.restype = ctypes.c_ulong
    libc.getauxval.argtypes = [ctypes.c_ulong]
    words = {_AT_HWCAP: libc.getauxval(_AT_HWCAP), _AT_HWCAP2: libc.getauxval(_AT_HWCAP2)}
    present = set()
    for word, table in ((_AT_HWCAP, _HWCAP_BITS), (_AT_HWCAP2, _HWCAP2_BITS)):
        for name, bits in table.items():
            if all(words[word] >> bit & 1 for bit in bits):
                present.add(name)
    return frozenset(present)


def _cpu_model(arch: str) -> str:
    """The model line of /proc/cpuinfo (x86), else the implementer/part (Arm), else LLVM's
    name for the host CPU."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    fields = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if arch == "x86_64" and fields.get("model name"):
        return fields["model name"]
    if arch == "aarch64" and fields.get("CPU part"):
        return f"implementer {fields.get('CPU implementer', '?')} part {fields['CPU part']}"
    return llvm.get_host_cpu_name() or platform.machine()


def _mask() -> frozenset[str]:
    return frozenset(filter(None, (name.strip() for name in os.environ.get(HOST_MASK_ENV, "").split(","))))


@functools.cache
def _detected() -> Host:
    machine = platform.machine().lower()
    if machine in ("aarch64", "arm64"):
        return Host("aarch64", _aarch64_features(), _cpu_model("aarch64"))
    if machine in ("x86_64", "amd64"):
        llvm.initialize_native_target()
        features = frozenset(name for name, present in llvm.get_host_cpu_features().items() if present)
        return Host("x86_64", features, _cpu_model("x86_64"))
    return Host(machine, frozenset(), machine)


def this_host() -> Host:
    """This machine, less any features named in VXLA_HOST_WITHOUT."""
    detected = _detected()
    return Host(detected.arch, detected.features - _mask(), detected.cpu_model)
