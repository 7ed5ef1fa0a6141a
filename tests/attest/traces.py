"""Synthetic, deterministic execution traces and keys for the attest tests."""

from __future__ import annotations

import hashlib

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import (
    CompilerIdentity,
    Execution,
    OpTrace,
    Predicate,
    ProgramRecord,
    RunMetadata,
    Statement,
    Target,
    TensorRecord,
    key_id,
    tensor_digest,
    text_digest,
)

CHAIN_ID = 31337
CONTRACT = "0x" + "5fbdb2315678afecb367f032d93f642f64180aa3"
JOB_ID = "job-0001"


def node_key(name: str) -> Ed25519PrivateKey:
    """A fixed Ed25519 key per name (seed = SHA-256 of the name), so runs are reproducible."""
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(name.encode()).digest())


def tensor(name: str, array: np.ndarray) -> TensorRecord:
    return TensorRecord(
        name=name,
        dtype={"float32": "f32", "int32": "s32"}[array.dtype.name],
        shape=tuple(array.shape),
        digest=tensor_digest(array),
    )


def instruction_digests(count: int, diverge_at: int | None = None) -> list[tuple[str, str, str]]:
    """(name, opcode, digest) per instruction; from `diverge_at` on the digests change, as
    when one node computes a different value that then propagates."""
    opcodes = ["parameter", "add", "multiply", "exponential", "reduce", "dot", "tanh", "fusion"]
    records = []
    for i in range(count):
        tag = "bad" if diverge_at is not None and i >= diverge_at else "good"
        records.append(
            (f"op.{i}", opcodes[i % len(opcodes)], text_digest(f"{tag} value of op {i}"))
        )
    return records


def make_predicate(
    key: Ed25519PrivateKey,
    *,
    instructions: int | None = 8,
    diverge_at: int | None = None,
    job_id: str = JOB_ID,
    chain_id: int | None = CHAIN_ID,
    contract: str | None = CONTRACT,
    binary_hash: str | None = None,
    threads: int = 4,
) -> Predicate:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = np.ones((3,), dtype=np.int32)
    out = x * 2 if diverge_at is None else x * 3
    trace = None
    if instructions is not None:
        trace = OpTrace.from_instructions(instruction_digests(instructions, diverge_at))
    return Predicate(
        job_id=job_id,
        chain_id=chain_id,
        contract=contract,
        key_id=key_id(key),
        deterministic=Execution(
            program=ProgramRecord(source_hash=text_digest("source"), hlo_hash=text_digest("hlo")),
            compiler=CompilerIdentity(
                vxla_version="0.1.0",
                numerics_contract="numerics.v1",
                pipeline_id="pipeline.v3",
                passes=("simplify", "cse", "fusion"),
                target=Target(
                    triple="x86_64-unknown-linux-gnu", cpu="x86-64-v3", features="+avx2,+fma"
                ),
                llvmlite_version="0.50.0",
                llvm_version="20.1.0",
                opt_level=3,
            ),
            graph_hash=text_digest("graph"),
            binary_hash=binary_hash or text_digest("binary"),
            inputs=(tensor("in0", x), tensor("in1", w)),
            outputs=(tensor("out0", out), tensor("out1", w + 1)),
            op_trace=trace,
        ),
        run=RunMetadata(threads=threads, timings_ns={"compile": 1_500_000, "execute": 250_000}),
    )


def make_statement(key: Ed25519PrivateKey, **options: object) -> Statement:
    return Statement.build(make_predicate(key, **options))  # type: ignore[arg-type]
