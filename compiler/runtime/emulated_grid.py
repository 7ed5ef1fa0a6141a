"""A GPU target's grid, run on the host's CPU: the grid logic tested without a GPU.

The module is generated exactly as for the GPU (the same config, so the same plan, kernels,
register blocks, alignments and grid bodies, compiler/codegen/grid.py), but its grid entries
are host functions (grid.HostGrid) that loop over every block and thread, last block and
last thread first, and call the grid body with those indices: what the special registers
give on the device. compiler.driver.compile_emulated_grid builds such an executable.
The IR is compiled for the host's most basic runnable CPU target and driven by the same plan
runner (grid_runner.py) as the device, over host memory. So a wrong work-item index, a tile
edge, a slot table, a staged copy or a loop the runner drives wrongly shows here, bit for bit
against the reference, while what only the device decides (its instruction selection, the
cubin) is held by the PTX checks and the golden cubin hashes, and by the device check on a
GPU (tools/gpu_check.py).

An emulated executable is for tests: it names the GPU target but runs host code, so its
binary_hash is of that host object, and no statement is ever signed of it.
"""

from __future__ import annotations

import ctypes

import numpy as np

from compiler.config import CompilerConfig, load_config
from compiler.errors import BackendError, TargetNotRunnable
from compiler.host import runnable_cpus, this_host
from compiler.runtime.loader import LoadedObject

# The host grid entries' signature (compiler/codegen/grid.py HostGrid).
_HOST_ENTRY = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)


def host_config() -> CompilerConfig:
    """What the emulation's code is compiled for: the host's most basic runnable CPU target
    with a fused multiply-add instruction (a GPU target's IR calls llvm.fma directly, as
    GPUs have one; without the instruction LLVM would call libm's fma)."""
    configs = [load_config().with_target(cpu=name) for name in runnable_cpus(this_host())]
    with_fma = [config for config in configs if config.has_fma]
    if not with_fma:
        raise TargetNotRunnable("emulating a GPU target's grid needs a host target with a fused multiply-add instruction, and this host runs none")
    return with_fma[0]


class EmulatedDevice:
    """Host memory standing in for device memory, and the host-compiled grid entries.
    `block_size`: launch every grid with blocks of this many threads instead of the runner's
    (tests: the bits must not depend on it, and a wrong index shows at an odd size)."""

    def __init__(self, loaded: LoadedObject, block_size: int | None = None) -> None:
        self._loaded = loaded
        self.block_size = block_size
        self._memory: dict[int, np.ndarray] = {}
        self._entries: dict[str, ctypes._CFuncPtr] = {}

    def allocate(self, nbytes: int) -> int:
        storage = np.empty(max(nbytes, 1) + 256, dtype=np.uint8)
        address = storage.ctypes.data + (-storage.ctypes.data) % 256  # as cuMemAlloc aligns
        self._memory[address] = storage
        return address

    def free(self, address: int) -> None:
        self._memory.pop(address, None)

    def upload(self, address: int, data: np.ndarray) -> None:
        ctypes.memmove(address, data.ctypes.data, data.nbytes)

    def download(self, address: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        ctypes.memmove(out.ctypes.data, address, nbytes)
        return out

    def copy(self, target: int, source: int, nbytes: int) -> None:
        ctypes.memmove(target, source, nbytes)

    def launch(self, symbol: str, blocks: int, block_size: int, slots: int, extent: int) -> None:
        entry = self._entries.get(symbol)
        if entry is None:
            entry = self._entries[symbol] = _HOST_ENTRY(self._loaded.address(symbol))
        if self.block_size is not None:
            block_size = self.block_size
            blocks = (extent + block_size - 1) // block_size
        entry(slots, extent, blocks, block_size)

    def constant_address(self, symbol: str) -> int:
        address = self._loaded.engine.get_global_value_address(symbol)
        if not address:
            raise BackendError(f"emulated grid object has no constant {symbol!r}")
        return address

    def synchronize(self) -> None:
        pass

    def replay(self, key: object, issue) -> None:
        issue()
