"""Transposes that make the operand's contiguous dimension the result's second to last run in
tiles (compiler/codegen/data_movement.py): partial tiles, leading dimensions and every element
width give the reference's bytes on every target and thread count."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.data_movement import TRANSPOSE_TILE
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from harness.targets import run_everywhere


@pytest.mark.parametrize(
    "dtype,numpy_type,dims,perm",
    [
        ("f32", np.float32, (37, 45), (1, 0)),
        ("s8", np.int8, (3, 33, 70), (0, 2, 1)),
        ("f16", np.float16, (5, 64, 3), (1, 2, 0)),
        ("f64", np.float64, (2, 3, 31, 9), (1, 0, 3, 2)),
        ("pred", np.bool_, (65, 1), (1, 0)),
    ],
)
def test_tiled_transposes_keep_the_reference_bytes(dtype: str, numpy_type, dims: tuple[int, ...], perm: tuple[int, ...]) -> None:
    out_dims = tuple(dims[p] for p in perm)
    shape = lambda d: f"{dtype}[{','.join(map(str, d))}]"  # noqa: E731
    text = f"""HloModule t
ENTRY e {{
  x = {shape(dims)} parameter(0)
  ROOT t = {shape(out_dims)} transpose(x), dimensions={{{','.join(map(str, perm))}}}
}}
"""
    rng = np.random.default_rng(len(dims))
    values = (rng.standard_normal(dims) * 50).astype(numpy_type) if dtype != "pred" else rng.random(dims) < 0.5
    run_everywhere(text, [values])
    executable = compile_program(load_program(text), load_config(), cache_dir=False)
    assert [s.kernel.split("_")[1] for s in executable.plan.steps] == ["transpose"]
    assert executable.plan.steps[0].extent == int(np.prod(out_dims[:-2])) * -(-out_dims[-2] // TRANSPOSE_TILE) * -(-out_dims[-1] // TRANSPOSE_TILE)
