"""The column pack (compiler/codegen/dot_conv.py `_pack_columns`): a dot's rhs stored
(free, contracting) is packed into panels by one gather per panel row, for every element
type a real dot takes, and the dot has the reference's bits, the lanes past N included
(N = 70 leaves a partial panel)."""

from __future__ import annotations

import numpy as np
import pytest

import compiler.codegen.dot_conv as dot_conv
from harness.targets import run_everywhere

DTYPES = {"f32": np.float32, "f64": np.float64, "bf16": None, "s8": np.int8, "s32": np.int32, "s4": None}


def _module(dtype: str) -> str:
    return f"""HloModule m
ENTRY e {{
  a = {dtype}[20,24] parameter(0)
  b = {dtype}[70,24] parameter(1)
  ROOT d = {dtype}[20,70] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{1}}
}}
"""


def _array(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == "s4":
        import ml_dtypes

        return rng.integers(-8, 7, shape, endpoint=True).astype(ml_dtypes.int4)
    if dtype in ("s8", "s32"):
        info = np.iinfo(DTYPES[dtype])
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(DTYPES[dtype])
    values = rng.standard_normal(shape).astype(np.float32)
    values[rng.random(shape) < 0.03] = np.nan
    if dtype == "bf16":
        return (values.view(np.uint32) >> 16).astype(np.uint16)  # the top half: a bf16 value
    return values.astype(DTYPES[dtype])


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_a_packed_column_major_rhs_gives_the_references_bits(dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    used = []
    original = dot_conv._pack_columns_gathered
    monkeypatch.setattr(dot_conv, "_pack_columns_gathered", lambda *args: used.append(args[3]) or original(*args))
    rng = np.random.default_rng(len(dtype))
    arrays = [_array(rng, dtype, (20, 24)), _array(rng, dtype, (70, 24))]
    if dtype == "bf16":
        import ml_dtypes

        arrays = [a.view(ml_dtypes.bfloat16) for a in arrays]
    run_everywhere(_module(dtype), arrays)
    assert used, "the rhs was not column-packed"
