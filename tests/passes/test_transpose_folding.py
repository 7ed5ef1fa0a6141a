"""Transpose folding (compiler/passes/transpose_folding.py): a dot of a transposed weight
reads the weight itself, with the same bits; transposes whose folding would reorder the
result or make the operand costly to read stay."""

from __future__ import annotations

import numpy as np
import pytest

from harness.targets import run_everywhere
from tests.passes.simplification_helpers import instructions_of, optimized_by_default


def _module(lhs: str, rhs: str, transposes: str, dot_attrs: str, result: str) -> str:
    return f"""HloModule m
ENTRY e {{
  a = {lhs} parameter(0)
  b = {rhs} parameter(1)
{transposes}
  ROOT d = {result} dot(ta, tb), {dot_attrs}
}}
"""


CASES = {
    # GPT-2's Conv1D: x @ W.T with W stored (out, in); the rhs becomes (N, K).
    "rhs out x in": (_module("f32[7,33]", "f32[45,33]", "  ta = f32[7,33] copy(a)\n  tb = f32[33,45] transpose(b), dimensions={1,0}",
                             "lhs_contracting_dims={1}, rhs_contracting_dims={0}", "f32[7,45]"), True),
    # Batched: the rhs is (B, N, K).
    "batched rhs": (_module("f32[3,5,16]", "f32[3,9,16]", "  ta = f32[3,5,16] copy(a)\n  tb = f32[3,16,9] transpose(b), dimensions={0,2,1}",
                            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}", "f32[3,5,9]"), True),
    # The rhs's batch dimension would not lead: not folded.
    "rhs batch inside": (_module("f32[3,5,16]", "f32[16,3,9]", "  ta = f32[3,5,16] copy(a)\n  tb = f32[3,16,9] transpose(b), dimensions={1,0,2}",
                                 "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}", "f32[3,5,9]"), False),
    # An lhs stored (K, M) would be read against its rows: not folded.
    "lhs transposed": (_module("f32[33,7]", "f32[33,45]", "  ta = f32[7,33] transpose(a), dimensions={1,0}\n  tb = f32[33,45] copy(b)",
                               "lhs_contracting_dims={1}, rhs_contracting_dims={0}", "f32[7,45]"), False),
    # The rhs's free dimensions would swap: the result's order would change.
    "free dims swapped": (_module("f32[4,6]", "f32[6,5,3]", "  ta = f32[4,6] copy(a)\n  tb = f32[6,3,5] transpose(b), dimensions={0,2,1}",
                                  "lhs_contracting_dims={1}, rhs_contracting_dims={0}", "f32[4,3,5]"), False),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_folding_keeps_the_bits_and_removes_only_cheap_transposes(name: str) -> None:
    text, folded = CASES[name]
    program, optimized = optimized_by_default(text)
    transposes = instructions_of(optimized, "transpose")
    assert (not transposes) == folded, transposes
    rng = np.random.default_rng(len(name))
    arrays = [(rng.standard_normal(p.array_shape.dims) * 10.0 ** rng.integers(-3, 4, p.array_shape.dims)).astype(np.float32)
              for p in program.module.entry.parameters]
    run_everywhere(text, arrays)
