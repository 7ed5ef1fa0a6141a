"""Where a target's code runs, chosen by the target row's `device` capability
(compiler/targets.py): "host" code is an ELF object loaded into this process
(loader.py) and run by the native entry; any other device is reached through its driver
module here, which finds the device, says what is missing when there is none, and loads the
code object into a `grid_runner.Device`. A new kind of device is one more entry of
`DRIVERS`."""

from __future__ import annotations

from typing import Protocol

from compiler.config import CompilerConfig
from compiler.errors import TargetNotRunnable
from compiler.host import this_host
from compiler.runtime import cuda_device
from compiler.runtime.grid_runner import Device


class DeviceDriver(Protocol):
    """A device kind's driver module."""

    def probe(self, config: CompilerConfig) -> object:
        """The device that would run `config`'s code (what a statement may record of it);
        TargetNotRunnable naming what is missing."""
        ...

    def open_device(self, config: CompilerConfig, code: bytes) -> Device:
        """The device with `code`, made for `config`'s target, loaded."""
        ...


DRIVERS: dict[str, DeviceDriver] = {"cuda": cuda_device}


def driver_of(config: CompilerConfig) -> DeviceDriver:
    """The driver of the device `config`'s code runs on (TargetNotRunnable for host code,
    which no driver runs)."""
    device = config.architecture.device
    if device not in DRIVERS:
        raise TargetNotRunnable(f"{config.cpu} code runs on the host, not through a device driver")
    return DRIVERS[device]


def check_runnable(config: CompilerConfig) -> None:
    """TargetNotRunnable, naming what is missing, unless this machine can run `config`'s code:
    a host target's features on this host, or another device and its driver."""
    if config.runs_on_host:
        this_host().check(config)
    else:
        driver_of(config).probe(config)
