"""An NVIDIA GPU through the CUDA driver API (NVIDIA's cuda-bindings): the cubin loaded as
it is, device memory, launches on one stream, and plans recorded as CUDA graphs.

Fail closed: `open_device` raises TargetNotRunnable, naming what is missing, when
cuda-bindings is not installed, the driver (libcuda) cannot be loaded, there is no GPU, or
the GPU's compute capability is not exactly the target's (a cubin holds one architecture's
machine code). The bytes loaded are the cubin that was hashed, never PTX for the driver to
compile.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from compiler.errors import ExecutionError, TargetNotRunnable

if TYPE_CHECKING:
    from compiler.config import CompilerConfig


class DeviceError(ExecutionError, RuntimeError):
    """A CUDA driver call that failed while running (not a missing GPU: TargetNotRunnable)."""


@dataclass(frozen=True)
class GpuInfo:
    """The GPU a run used, as traces record it."""

    name: str
    compute_capability: str  # "9.0"
    sm_count: int
    driver_version: str  # "13.0"


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:
        raise TargetNotRunnable("GPU targets run through NVIDIA's cuda-bindings, which is not installed: pip install 'vxla[gpu]'") from None
    return driver


def _check(driver, result, what: str, error: type[Exception] = DeviceError):
    """The values of a driver call's result tuple; `error` naming the CUDA error otherwise."""
    status, *values = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(status)
        raise error(f"{what}: {name.decode() if isinstance(name, bytes) else name}")
    return values[0] if len(values) == 1 else tuple(values)


def required_capability(processor: str) -> str:
    """The compute capability an architecture's cubin runs on: "9.0" for sm_90."""
    digits = processor.removeprefix("sm_")
    return f"{digits[:-1]}.{digits[-1]}"


def open_device(config: CompilerConfig, cubin: bytes) -> CudaDevice:
    """GPU 0 with `cubin` (made for `config`'s target) loaded; TargetNotRunnable naming what
    is missing."""
    return open_cuda(config.target_cpu.processor, config.cpu, cubin)


def open_cuda(processor: str, target: str, cubin: bytes) -> CudaDevice:
    """GPU 0 with `cubin` (for `processor`, e.g. sm_90, of target `target`) loaded."""
    driver, device, info = _find_gpu(processor, target)
    return CudaDevice(driver, device, info, cubin)


def probe(config: CompilerConfig) -> GpuInfo:
    """The GPU that would run `config`'s code; TargetNotRunnable naming what is missing (the
    check before anything is compiled or run)."""
    return _find_gpu(config.target_cpu.processor, config.cpu)[2]


def _find_gpu(processor: str, target_name: str):
    driver = _driver()
    needed = required_capability(processor)
    target = f"target {target_name} needs an NVIDIA GPU of compute capability {needed}"
    try:
        _check(driver, driver.cuInit(0), "cuInit", TargetNotRunnable)
    except TargetNotRunnable as exc:
        raise TargetNotRunnable(f"{target}, and the CUDA driver found none ({exc})") from None
    except Exception as exc:  # libcuda itself cannot be loaded: no NVIDIA driver installed
        raise TargetNotRunnable(f"{target}, and this host has no NVIDIA driver (libcuda: {exc})") from None
    count = _check(driver, driver.cuDeviceGetCount(), "cuDeviceGetCount", TargetNotRunnable)
    if count < 1:
        raise TargetNotRunnable(f"{target}, and this host has none")
    device = _check(driver, driver.cuDeviceGet(0), "cuDeviceGet", TargetNotRunnable)
    info = _gpu_info(driver, device)
    if info.compute_capability != needed:
        raise TargetNotRunnable(f"{target}; GPU 0 is {info.name}, of compute capability {info.compute_capability}")
    return driver, device, info


def _gpu_info(driver, device) -> GpuInfo:
    attribute = driver.CUdevice_attribute

    def get(which) -> int:
        return int(_check(driver, driver.cuDeviceGetAttribute(which, device), "cuDeviceGetAttribute"))

    name = _check(driver, driver.cuDeviceGetName(256, device), "cuDeviceGetName")
    version = int(_check(driver, driver.cuDriverGetVersion(), "cuDriverGetVersion"))
    major = get(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    minor = get(attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    return GpuInfo(
        name=bytes(name).split(b"\0", 1)[0].decode(errors="replace"),
        compute_capability=f"{major}.{minor}",
        sm_count=get(attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        driver_version=f"{version // 1000}.{version % 1000 // 10}",
    )


class CudaDevice:
    """One GPU's primary context, the loaded cubin and a stream. Every call is issued on the
    stream in order; `download` and `synchronize` wait for it."""

    def __init__(self, driver, device, info: GpuInfo, cubin: bytes) -> None:
        self._driver = driver
        self.info = info
        self._context = _check(driver, driver.cuDevicePrimaryCtxRetain(device), "cuDevicePrimaryCtxRetain")
        self._activate()
        self._module = _check(driver, driver.cuModuleLoadData(cubin), "cuModuleLoadData (the cubin)")
        self._stream = _check(driver, driver.cuStreamCreate(int(driver.CUstream_flags.CU_STREAM_NON_BLOCKING)), "cuStreamCreate")
        self._functions: dict[str, object] = {}
        self._graphs: dict[object, object] = {}
        # Whether stretches are recorded as CUDA graphs (replay); direct launches give the same
        # bits, so a driver that refuses a capture costs speed, never a result.
        self.use_graphs = True
        self.graph_error = ""

    def _activate(self) -> None:
        _check(self._driver, self._driver.cuCtxSetCurrent(self._context), "cuCtxSetCurrent")

    def allocate(self, nbytes: int) -> int:
        return int(_check(self._driver, self._driver.cuMemAlloc(max(nbytes, 1)), f"cuMemAlloc({nbytes})"))

    def free(self, address: int) -> None:
        _check(self._driver, self._driver.cuMemFree(address), "cuMemFree")

    def upload(self, address: int, data: np.ndarray) -> None:
        _check(self._driver, self._driver.cuMemcpyHtoDAsync(address, data.ctypes.data, data.nbytes, self._stream), "cuMemcpyHtoDAsync")
        self.synchronize()  # `data` may be freed once this returns

    def download(self, address: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, dtype=np.uint8)
        _check(self._driver, self._driver.cuMemcpyDtoHAsync(out.ctypes.data, address, nbytes, self._stream), "cuMemcpyDtoHAsync")
        self.synchronize()
        return out

    def copy(self, target: int, source: int, nbytes: int) -> None:
        _check(self._driver, self._driver.cuMemcpyDtoDAsync(target, source, nbytes, self._stream), "cuMemcpyDtoDAsync")

    def launch(self, symbol: str, blocks: int, block_size: int, slots: int, extent: int) -> None:
        function = self._functions.get(symbol)
        if function is None:
            function = self._functions[symbol] = _check(self._driver, self._driver.cuModuleGetFunction(self._module, symbol.encode()), f"cuModuleGetFunction({symbol})")
        slots_value, extent_value = ctypes.c_uint64(slots), ctypes.c_int64(extent)
        parameters = (ctypes.c_void_p * 2)(ctypes.addressof(slots_value), ctypes.addressof(extent_value))
        _check(
            self._driver,
            self._driver.cuLaunchKernel(function, blocks, 1, 1, block_size, 1, 1, 0, self._stream, ctypes.addressof(parameters), 0),
            f"cuLaunchKernel({symbol})",
        )

    def constant_address(self, symbol: str) -> int:
        address, _size = _check(self._driver, self._driver.cuModuleGetGlobal(self._module, symbol.encode()), f"cuModuleGetGlobal({symbol})")
        return int(address)

    def synchronize(self) -> None:
        _check(self._driver, self._driver.cuStreamSynchronize(self._stream), "cuStreamSynchronize")

    def replay(self, key: object, issue: Callable[[], None]) -> None:
        """Issues what `issue()` issues (launches and device copies only), recorded as a CUDA
        graph the first time and launched as one graph after: a stretch of many small
        kernels costs one launch. Valid while the memory it names stays allocated."""
        driver = self._driver
        if not self.use_graphs:
            issue()
            return
        executable = self._graphs.get(key)
        if executable is None:
            try:
                executable = self._record(issue)
            except DeviceError as exc:
                # Nothing of the capture ran: issue the same work directly from now on.
                self.use_graphs, self.graph_error = False, str(exc)
                self.synchronize()
                issue()
                return
            self._graphs[key] = executable
        _check(driver, driver.cuGraphLaunch(executable, self._stream), "cuGraphLaunch")

    def _record(self, issue: Callable[[], None]):
        driver = self._driver
        mode = driver.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
        _check(driver, driver.cuStreamBeginCapture(self._stream, mode), "cuStreamBeginCapture")
        try:
            issue()
        finally:
            graph = _check(driver, driver.cuStreamEndCapture(self._stream), "cuStreamEndCapture")
        return _check(driver, driver.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
