"""A dot whose rhs is already (batch, K, N) row-major in the accumulation type, with N a
multiple of the panel width, reads it in place instead of packing it: the same values in the
same chains, so the reference's bits, on every target."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.dot_conv import reads_rhs_in_place
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from core.dtypes import F32
from harness.targets import NATIVE, run_everywhere
from tests.codegen.test_op_families import values


@pytest.mark.parametrize("batch,m,k,n", [(1, 7, 33, 32), (2, 5, 16, 64), (1, 1, 1, 96), (3, 9, 20, 128)])
def test_dots_reading_the_rhs_in_place_keep_the_reference_bits(batch: int, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(batch * 1000 + n)
    if batch > 1:
        text = f"""HloModule t
ENTRY e {{
  a = f32[{batch},{m},{k}] parameter(0)
  w = f32[{batch},{k},{n}] parameter(1)
  ROOT d = f32[{batch},{m},{n}] dot(a, w), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}
}}
"""
        arrays = [values(rng, "f32", (batch, m, k)), values(rng, "f32", (batch, k, n))]
    else:
        text = f"""HloModule t
ENTRY e {{
  a = f32[{m},{k}] parameter(0)
  w = f32[{k},{n}] parameter(1)
  ROOT d = f32[{m},{n}] dot(a, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"""
        arrays = [values(rng, "f32", (m, k)), values(rng, "f32", (k, n))]
    run_everywhere(text, arrays)
    for target in NATIVE:
        config = load_config().with_target(cpu=target)
        executable = compile_program(load_program(text), config, cache_dir=False)
        packed = not reads_rhs_in_place(config, F32, m, n)
        # Only the gemm kernel (and a packing kernel when N is not a multiple of the panel).
        assert len(executable.plan_kernels()) == 1 + packed, (target, executable.plan_kernels())
