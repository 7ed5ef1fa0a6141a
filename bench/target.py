"""The target vxla's rows of a benchmark run on: `--target host` (the default) takes the
widest vector target this host runs, as an operator of such a host would pin it in
configs/compiler.toml; `--target pinned` takes the pinned one; any other value names a CPU.
Every target computes the same bits, so the choice moves only the timings. An AVX2 host is
had on an AVX-512 one with `--target x86-64-v3` (its code never uses a 512-bit register)."""

from __future__ import annotations

import argparse

from compiler.config import CompilerConfig, load_config
from compiler.runtime.host import this_host, widest_runnable_cpu

CHOICES_HELP = "host (default: the widest target this host runs), pinned (configs/compiler.toml), or a CPU name such as x86-64-v3"


def add_target_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--target", default="host", metavar="CPU", help=f"vxla's target: {CHOICES_HELP}"
    )


def resolve_target(value: str) -> CompilerConfig:
    """The compiler configuration for `--target VALUE`, checked runnable here."""
    config = load_config()
    if value == "pinned":
        cpu = config.cpu
    elif value == "host":
        cpu = widest_runnable_cpu(this_host())
    else:
        cpu = value
    config = config.with_target(cpu=cpu)
    this_host().check(config)
    return config
