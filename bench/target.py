"""The target vxla's rows of a benchmark run on: `--target host` (the default) takes the
widest vector target this host runs, as an operator of such a host would pin it in
configs/compiler.toml; `--target pinned` takes the configuration's (the same, unless it
pins one); any other value names a CPU.
Every target computes the same bits, so the choice moves only the timings. An AVX2 host is
had on an AVX-512 one with `--target x86-64-v3` (its code never uses a 512-bit register);
XLA:CPU is then held to the same instruction set (XLA_FLAGS=--xla_cpu_max_isa), so both
sides of every ratio run as on an AVX2 host."""

from __future__ import annotations

import argparse
import os

from compiler.api import CompilerConfig, load_config, this_host, widest_runnable_cpu

# XLA:CPU's name (--xla_cpu_max_isa) for the vector instruction set of a narrower x86 target.
XLA_ISA = {"x86-64-v2": "SSE4_2", "x86-64-v3": "AVX2"}

CHOICES_HELP = "host (default: the widest target this host runs), pinned (configs/compiler.toml), or a CPU name such as x86-64-v3"


def add_target_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target", default="host", metavar="CPU", help=f"vxla's target: {CHOICES_HELP}"
    )


def resolve_target(value: str) -> CompilerConfig:
    """The compiler configuration for `--target VALUE`, checked runnable here."""
    config, host = load_config(), this_host()
    widest = widest_runnable_cpu(host)
    cpu = {"pinned": config.cpu, "host": widest}.get(value, value)
    config = config.with_target(cpu=cpu)
    host.check(config)
    if cpu != widest:
        hold_xla_to(cpu)
    return config


def xla_flags(cpu: str, flags: str) -> str:
    """XLA_FLAGS `flags` with XLA:CPU held to `cpu`'s instruction set (unchanged for a CPU
    XLA has no name for)."""
    if cpu not in XLA_ISA or "--xla_cpu_max_isa" in flags:
        return flags
    return f"{flags} --xla_cpu_max_isa={XLA_ISA[cpu]}".strip()


def hold_xla_to(cpu: str) -> None:
    """Holds XLA:CPU in this process and its children to `cpu`'s instruction set (before JAX
    starts: it reads XLA_FLAGS once)."""
    os.environ["XLA_FLAGS"] = xla_flags(cpu, os.environ.get("XLA_FLAGS", ""))
