"""The blocked gemm (compiler/codegen/dot_conv.py, GemmBlocking) keeps every output element's
one fma chain in increasing k: shapes that take several contraction blocks (each chain stored
and reloaded between them), several work items with a tail of rows, and a last panel that is
partly outside N give the reference's bits on every target with 1, 2 and 4 threads."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.codegen.dot_conv import GemmBlocking
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from core.dtypes import F32, F64
from harness.targets import NATIVE, config, run_everywhere

NUMPY = {"f32": np.float32, "f64": np.float64, "s32": np.int32, "bf16": None}


def spread_values(rng: np.random.Generator, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values over six decades (so that any change of summation order changes bits), with a
    few NaNs, infinities and signed zeros."""
    size = int(np.prod(shape))
    if dtype == "s32":
        return rng.integers(-(2**31), 2**31, size=size, dtype=np.int64).astype(np.int32).reshape(shape)
    values = rng.standard_normal(size) * 10.0 ** rng.integers(-3, 4, size)
    positions = rng.choice(size, size=max(1, size // 2000), replace=False)
    values[positions] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0]), len(positions))
    return values.astype(NUMPY[dtype]).reshape(shape)


def dot_text(dtype: str, batch: int, m: int, k: int, n: int) -> str:
    lead = f"{batch}," if batch > 1 else ""
    batch_dims = ("lhs_batch_dims={0}, ", "rhs_batch_dims={0}, ") if batch > 1 else ("", "")
    axis = 1 if batch > 1 else 0
    return f"""HloModule gemm
ENTRY e {{
  a = {dtype}[{lead}{m},{k}] parameter(0)
  w = {dtype}[{lead}{k},{n}] parameter(1)
  ROOT d = {dtype}[{lead}{m},{n}] dot(a, w), {batch_dims[0]}lhs_contracting_dims={{{axis + 1}}}, {batch_dims[1]}rhs_contracting_dims={{{axis}}}
}}
"""


@pytest.mark.parametrize(
    "dtype,batch,m,k,n",
    [
        ("f32", 1, 61, 700, 45),  # three contraction blocks on every target, a row tail, a partial panel
        ("f32", 2, 29, 300, 32),  # batched, two contraction blocks
        ("f64", 1, 40, 530, 19),
        ("s32", 1, 27, 260, 40),
    ],
)
def test_blocked_gemm_keeps_the_reference_bits(dtype: str, batch: int, m: int, k: int, n: int) -> None:
    rng = np.random.default_rng(m * k + n)
    lead = (batch,) if batch > 1 else ()
    arrays = [spread_values(rng, dtype, (*lead, m, k)), spread_values(rng, dtype, (*lead, k, n))]
    run_everywhere(dot_text(dtype, batch, m, k, n), arrays)


def test_the_shapes_above_take_several_blocks_and_items() -> None:
    # What the test above relies on: the blocking it exercises exists on every native target.
    for target in NATIVE:
        f32 = GemmBlocking.of(config(target), F32, 1, 61, 700, 45)
        assert -(-700 // f32.depth) >= 2, (target, f32)
        assert -(-61 // f32.item_rows) >= 2 and 61 % f32.rows, (target, f32)
        assert 45 % f32.panel, (target, f32)
        f64 = GemmBlocking.of(config(target), F64, 1, 40, 530, 19)
        assert -(-530 // f64.depth) >= 2, (target, f64)


def test_column_items_with_an_epilogue_keep_the_reference_bits() -> None:
    """Items that split the columns (a short lhs against a wide rhs): a partial last panel
    in the last column item, a row tail, and a fused bias + relu epilogue run per item on
    the columns it finished."""
    m, k, n = 13, 300, 16 * 9 + 5
    text = f"""HloModule gemm
ENTRY e {{
  a = f32[{m},{k}] parameter(0)
  w = f32[{k},{n}] parameter(1)
  c = f32[{n}] parameter(2)
  d = f32[{m},{n}] dot(a, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bc = f32[{m},{n}] broadcast(c), dimensions={{1}}
  s = f32[{m},{n}] add(d, bc)
  z = f32[] constant(0)
  zb = f32[{m},{n}] broadcast(z), dimensions={{}}
  ROOT r = f32[{m},{n}] maximum(s, zb)
}}
"""
    rng = np.random.default_rng(5)
    arrays = [spread_values(rng, "f32", (m, k)), spread_values(rng, "f32", (k, n)), spread_values(rng, "f32", (n,))]
    run_everywhere(text, arrays)
    for target in NATIVE:
        blocking = GemmBlocking.of(config(target), F32, 1, m, k, n)
        assert blocking.column_items >= 2 and n % blocking.panel, (target, blocking)
        assert blocking.column_items * blocking.item_panels >= -(-n // blocking.panel) > (blocking.column_items - 1) * blocking.item_panels


def test_a_short_lhs_reads_the_rhs_in_few_passes() -> None:
    """GPT-2's MLP projection (128 rows, 3072 x 768 weight): the items split the columns, so
    the weight is read by at most three row items (it used to be eleven)."""
    for target in NATIVE:
        blocking = GemmBlocking.of(config(target), F32, 1, 128, 3072, 768)
        assert blocking.row_items <= 3 and blocking.items_per_batch >= 8, (target, blocking)


@pytest.mark.parametrize(
    "dtype,batch,m,k,n",
    [
        ("f32", 1, 384, 64, 8),  # a GRU's gates: weight (384, 64) against the batch's (8, 64) inputs
        ("f32", 2, 17, 45, 37),  # batched, a partial panel
        ("f64", 1, 9, 30, 21),
        ("s32", 1, 5, 19, 70),
    ],
)
def test_an_rhs_stored_as_columns_packs_to_the_reference_bits(dtype: str, batch: int, m: int, k: int, n: int) -> None:
    """An rhs whose contracting dimension is its minor one, (B, N, K) row-major, is packed by
    reading its rows side by side (pack_columns), not by the general rearrangement."""
    lead = f"{batch}," if batch > 1 else ""
    axis = 1 if batch > 1 else 0
    batch_dims = ("lhs_batch_dims={0}, ", "rhs_batch_dims={0}, ") if batch > 1 else ("", "")
    text = f"""HloModule gemm
ENTRY e {{
  a = {dtype}[{lead}{m},{k}] parameter(0)
  w = {dtype}[{lead}{n},{k}] parameter(1)
  ROOT d = {dtype}[{lead}{m},{n}] dot(a, w), {batch_dims[0]}lhs_contracting_dims={{{axis + 1}}}, {batch_dims[1]}rhs_contracting_dims={{{axis + 1}}}
}}
"""
    rng = np.random.default_rng(m + k + n)
    shape = (batch,) if batch > 1 else ()
    arrays = [spread_values(rng, dtype, (*shape, m, k)), spread_values(rng, dtype, (*shape, n, k))]
    kernels = run_everywhere(text, arrays)
    assert kernels, kernels
    executable = compile_program(load_program(text), load_config(), cache_dir=False)
    names = [s.kernel for s in executable.plan.steps if s.kind == "kernel"]
    assert any("pack_columns" in name for name in names) and not any("rearrange" in name for name in names), names


def test_a_gpu_gemm_has_a_work_item_per_register_block() -> None:
    """On a GPU a work item is a thread: every rows x panel block of outputs is one (the CPU's
    items are as few as keep its cores busy). The bits are the emulated grid's tests'."""
    gpu = load_config().with_target(cpu="nvptx-sm90")
    blocking = GemmBlocking.of(gpu, F32, 3, 37, 65, 29)
    assert (blocking.rows, blocking.panel) == (6, 2)
    assert (blocking.item_rows, blocking.row_items, blocking.item_panels, blocking.column_items) == (6, 7, 1, 15)
    assert GemmBlocking.of(gpu, F32, 1, 4096, 4096, 4096).items_per_batch == 683 * 2048
