#!/usr/bin/env python3
"""Export XLA:CPU's rng-bit-generator results as test vectors: tests/fixtures/rng_bit_generator_xla.json.

Development tool only (JAX/jaxlib from tools/requirements-fixtures.txt, as
tools/export_fixtures.py). Each case is one module (algorithm, state size, element type,
shape), a random state (some with counters about to wrap) and XLA:CPU's new state and bits
(as unsigned integers of the element's width). tests/reference/test_random_bits.py checks
the reference evaluator and the LLVM backend against them. Deterministic: a fixed seed.

    .venv-tools/bin/python tools/export_rng_cases.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

try:
    import jax
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc
except ImportError as exc:  # pragma: no cover - tool-only dependency
    sys.exit(f"export_rng_cases.py needs JAX ({exc}); see tools/export_fixtures.py")

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_enable_x64", True)  # u64 states stay u64 on the way in

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "rng_bit_generator_xla.json"
ALGORITHMS = [("rng_three_fry", 2), ("rng_philox", 2), ("rng_philox", 3), ("rng_default", 2), ("rng_default", 3)]
TYPES = ["u32", "u64", "u8", "u16", "s32", "s64"]
SHAPES = [(), (1,), (5,), (3, 5), (4, 3), (3, 3, 3), (2, 7, 1), (0, 3)]


def run_on_xla_cpu(text: str, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Compiles HLO text with XLA:CPU and runs it (TOOLCHAIN: XLA:CPU on HLO text)."""
    device = jax.devices("cpu")[0]
    module = xc.hlo.hlo_module_from_text(text)
    stablehlo = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    executable = device.client.compile_and_load(stablehlo, xc.DeviceList((device,)), xc.CompileOptions())
    outputs = executable.execute_sharded([jax.device_put(a, device) for a in arrays])
    return [np.asarray(r[0]) for r in outputs.disassemble_into_single_device_arrays()]


def main() -> None:
    rng = np.random.default_rng(20261201)
    cases = []
    for algorithm, words in ALGORITHMS:
        for dtype in TYPES:
            for dims in SHAPES:
                state = rng.integers(0, 2**64, size=words, dtype=np.uint64)
                if len(cases) % 7 == 0:
                    state[1] = np.uint64(2**64 - 3)  # the counter wraps inside the block range
                if len(cases) % 11 == 0 and words == 3:
                    state[2] = np.uint64(2**64 - 1)
                shape = f"{dtype}[{','.join(map(str, dims))}]"
                text = f"HloModule r\nENTRY e {{\n  s = u64[{words}] parameter(0)\n  ROOT r = (u64[{words}], {shape}) rng-bit-generator(s), algorithm={algorithm}\n}}\n"
                new_state, bits = run_on_xla_cpu(text, [state])
                unsigned = bits.reshape(-1).view(np.dtype(f"u{bits.dtype.itemsize}"))
                cases.append({"hlo": text, "state": [int(v) for v in state], "new_state": [int(v) for v in new_state], "bits": [int(v) for v in unsigned]})
    OUT.write_text(json.dumps({"jax_version": jax.__version__, "cases": cases}, indent=None) + "\n")
    print(f"wrote {len(cases)} cases to {OUT}")


if __name__ == "__main__":
    main()
