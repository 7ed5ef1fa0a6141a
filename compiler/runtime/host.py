"""Whether a target's code may run on this machine: a CPU target's features on this host
(compiler/host.py), a GPU target's device and driver (cuda_device.py)."""

from __future__ import annotations

from compiler.config import CompilerConfig
from compiler.host import this_host
from compiler.runtime.cuda_device import probe


def check_runnable(config: CompilerConfig) -> None:
    """TargetNotRunnable, naming what is missing, unless this machine can run `config`'s code:
    a CPU target's features on this host, or a GPU target's GPU and driver (cuda_device.py)."""
    if config.is_gpu:
        probe(config)
    else:
        this_host().check(config)
