"""XLA on HLO text (jaxlib), for the tools and benchmarks that compare vxla with it: the same
module text both compilers get, compiled by XLA's own pipeline for the CPU (XLA:CPU) or, in
the GPU device check, for the GPU (XLA:GPU). Needs JAX (the bench and tools venvs, or the
GPU machine's own); vxla never imports it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class XlaExecutable:
    """A module compiled by XLA, with the device it runs on."""

    executable: object
    device: object

    def run(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        """The module's flattened outputs on `arrays` (waits for them)."""
        return [np.asarray(output) for output in self.run_on_device(self.put(arrays))]

    def put(self, arrays: list[np.ndarray]) -> list[object]:
        """The inputs as device arrays (for timing runs without the host transfer)."""
        import jax

        return [jax.device_put(a, self.device) for a in arrays]

    def run_on_device(self, device_arrays: list[object]) -> list[object]:
        """The outputs as device arrays, ready (block_until_ready)."""
        outputs = self.executable.execute_sharded(device_arrays)  # type: ignore[attr-defined]
        results = [r[0] for r in outputs.disassemble_into_single_device_arrays()]
        for result in results:
            result.block_until_ready()
        return results


def compile_hlo_text(text: str, platform: str = "cpu") -> XlaExecutable:
    """XLA's executable for HLO text (its parser, then its whole pipeline for `platform`:
    "cpu", or "gpu" for XLA:GPU on the first GPU)."""
    import jax
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc

    device = jax.devices(platform)[0]
    module = xc.hlo.hlo_module_from_text(text)
    stablehlo = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    executable = device.client.compile_and_load(stablehlo, xc.DeviceList((device,)), xc.CompileOptions())
    return XlaExecutable(executable, device)
