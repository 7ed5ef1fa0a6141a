"""First divergence between two traces of the same job."""

from __future__ import annotations

import pytest

from attest import first_divergence, text_digest, verify_inclusion
from tests.attest.traces import instruction_digests, make_statement, node_key

A, B = node_key("node-a"), node_key("node-b")
COUNT = 13


def test_identical_runs_agree_whatever_the_key_threads_and_timings() -> None:
    result = first_divergence(
        make_statement(A, instructions=COUNT), make_statement(B, instructions=COUNT, threads=1)
    )
    assert result.identical and result.op_level
    assert result.differences == () and result.first_instruction is None
    assert result.summary() == "the traces agree on every compared field"


@pytest.mark.parametrize("index", [0, 1, 5, 8, COUNT - 1])
def test_first_differing_instruction_with_proofs(index: int) -> None:
    left = make_statement(A, instructions=COUNT)
    right = make_statement(B, instructions=COUNT, diverge_at=index)
    result = first_divergence(left, right)
    assert not result.identical and result.op_level
    assert result.upstream_differences == ()  # same program, compiler, binary, inputs
    first = result.first_instruction
    assert first is not None
    good, bad = (
        instruction_digests(COUNT)[index],
        instruction_digests(COUNT, diverge_at=index)[index],
    )
    assert (first.index, first.name, first.opcode) == (index, good[0], good[1])
    assert first.left_digest == good[2] == text_digest(f"good value of op {index}")
    assert first.right_digest == bad[2] == text_digest(f"bad value of op {index}")
    # Both records are proven against the roots the two nodes signed.
    left_trace, right_trace = (
        left.predicate.deterministic.op_trace,
        right.predicate.deterministic.op_trace,
    )
    assert left_trace is not None and right_trace is not None
    assert first.left_proof is not None and first.right_proof is not None
    assert verify_inclusion(
        bytes.fromhex(good[2]), first.left_proof, left_trace.merkle_root, leaf_count=COUNT
    )
    assert verify_inclusion(
        bytes.fromhex(bad[2]), first.right_proof, right_trace.merkle_root, leaf_count=COUNT
    )
    assert not verify_inclusion(bytes.fromhex(bad[2]), first.left_proof, left_trace.merkle_root)
    # The outputs and the root differ as a consequence, not as a cause.
    paths = [d.path for d in result.differences]
    assert "predicate.deterministic.op_trace.merkle_root" in paths
    assert "predicate.deterministic.outputs[0].digest" in paths
    assert f"first differing instruction: index {index} ({good[0]}, {good[1]})" in result.summary()
    # Symmetric.
    mirrored = first_divergence(right, left).first_instruction
    assert mirrored is not None and mirrored.index == index and mirrored.left_digest == bad[2]


def test_differences_before_execution_are_reported() -> None:
    left = make_statement(A, instructions=COUNT)
    right = make_statement(
        B, instructions=COUNT, diverge_at=3, binary_hash=text_digest("other binary")
    )
    result = first_divergence(left, right)
    upstream = result.upstream_differences
    assert [d.path for d in upstream] == ["predicate.deterministic.binary_hash"]
    assert upstream[0].left == text_digest("binary") and upstream[0].right == text_digest(
        "other binary"
    )
    assert result.first_instruction is not None and result.first_instruction.index == 3
    assert result.summary().startswith("they differ before execution: deterministic.binary_hash")
    other_job = first_divergence(left, make_statement(B, instructions=COUNT, job_id="job-0002"))
    assert [d.path for d in other_job.upstream_differences] == ["predicate.job_id"]


def test_without_op_level_data() -> None:
    left = make_statement(A, instructions=None)
    right = make_statement(B, instructions=None, diverge_at=0)
    result = first_divergence(left, right)
    assert not result.op_level and result.first_instruction is None and not result.identical
    assert "no op-level data" in result.summary()
    assert [d.path for d in result.differences] == ["predicate.deterministic.outputs[0].digest"]
    one_sided = first_divergence(make_statement(A, instructions=COUNT), right)
    assert not one_sided.op_level and one_sided.first_instruction is None
    assert "predicate.deterministic.op_trace" in [d.path for d in one_sided.differences]


def test_traces_of_different_lengths() -> None:
    result = first_divergence(
        make_statement(A, instructions=COUNT), make_statement(B, instructions=COUNT + 2)
    )
    first = result.first_instruction
    assert first is not None and first.index == COUNT
    assert first.left is None and first.left_proof is None and first.right_digest is not None
    assert first.name == f"op.{COUNT}"
