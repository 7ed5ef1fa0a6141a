"""The contract's pinned orders of accumulation (docs/numerics.md), owned here and followed by
the reference evaluator and the LLVM backend alike.

reduce: for each output element the reduced elements, in row-major logical order, form a
sequence x0..x(n-1), cut into blocks of REDUCE_BLOCK elements. Inside a block, lane l (of
REDUCE_LANES) folds x(l), x(l+REDUCE_LANES), ... left to right; the non-empty lanes are
combined by a pairwise tree ((0,1),(2,3),..., an odd one out passing up unchanged); the block
results are combined by the same tree; finally reducer(init, result). n = 0 gives init. The
lanes are logical: no machine's vector width changes them.

dot and convolution: each output element is one fma chain over the contraction in increasing
index order, in the accumulation type (f32 for f16 and bf16, s8 and u8 for s4 and u4, the
type itself otherwise), rounded (or, for s4 and u4, wrapped) to the result type once at the
end.
"""

from __future__ import annotations

from core.dtypes import BF16, F16, F32, PRED, S64, DType

REDUCE_LANES = 16
REDUCE_BLOCK = 4096


def accumulation_type(result: DType) -> DType:
    """The type a dot's or convolution's chain accumulates in for a `result` type (a pred
    result counts its true products in s64 and is whether any was true)."""
    return {F16: F32, BF16: F32, PRED: S64}.get(result, result.holder)
