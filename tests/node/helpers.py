"""Helpers shared by the node's tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from compiler.hlo.commitment import GraphCommitment
from harness.dispute_game import WINDOW, GameEnv
from harness.fixture_data import Fixture
from node.chain.watcher import JobPending
from node.daemon.store import JobStore
from node.protocol import chain_digests, inputs_manifest
from node.tensors import npy_bytes

T = TypeVar("T")


def settled(get: Callable[[], T], timeout: float = 120.0) -> T:
    """What `get` gives once it stops raising JobPending (the executor's work in the
    background); fails the test past `timeout` seconds."""
    give_up = time.monotonic() + timeout
    while True:
        try:
            return get()
        except JobPending:
            assert time.monotonic() < give_up, "still pending"
            time.sleep(0.05)


def post_fixture_job(g: GameEnv, store: JobStore, fixture: Fixture, commitment: GraphCommitment) -> tuple[int, bytes, list[str]]:
    """Posts the fixture's job (one slot, the dispute game's challenge window) with its graph
    commitment, as a submitter does, after putting its module, inputs and inputs manifest in
    `store` for the node to fetch: (the job id, the program digest, the input digests)."""
    input_digests = [store.blobs.put(npy_bytes(x)) for x in fixture.inputs()]
    module = fixture.module_text.encode()
    store.blobs.put(module)
    store.blobs.put(inputs_manifest(input_digests))
    program_digest, inputs_digest = chain_digests(module, input_digests)
    now = g.now()
    job_id = g.market.post_job(
        g.submitter, program_digest, inputs_digest, 1, now + 1_000, now + 2_000, 10**18,
        graph_root=bytes.fromhex(commitment.root), trace_leaves=commitment.trace_leaves, challenge_window=WINDOW,
    )  # fmt: skip
    return job_id, program_digest, input_digests
