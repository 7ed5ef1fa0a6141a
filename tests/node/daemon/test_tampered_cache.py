"""A node whose compile cache was edited between jobs by whoever can write it (the confined
execution process can): an entry's plan made to read another buffer as its last output, and
its record resealed as the cache seals records.
The node never signs the honest graph_hash and binary_hash with other outputs: a record that
states the honest binary_hash is refused and rebuilt (the honest job again), and one that
states the edited plan's runs under that binary_hash, which a verifier's recompilation
refuses."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from attest.keys import generate_private_key
from compiler.codegen.plan import Plan, binary_hash
from harness.fixture_data import Fixture
from node.daemon.config import NodeConfig
from node.daemon.server import NodeServer
from node.daemon.store import DONE
from node.sdk import Client
from node.tracing.verify import verify_trace

KEY = generate_private_key()
MLP = Fixture("mlp_softmax")


def signed_job(data_dir: Path) -> tuple[str, dict]:
    """The trace and signed execution record of one MLP job on a node started afresh over
    `data_dir` (a new execution process: nothing held in memory from an earlier job)."""
    server = NodeServer(NodeConfig(port=0, data_dir=data_dir, threads=1), KEY, log_level="warning")
    server.start_in_thread()
    try:
        with Client(server.url, trusted_keys=[KEY.public_key()]) as client:
            job = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=120)
            assert job.state == DONE, job.info
            envelope = job.trace()
    finally:
        server.stop()
    report = verify_trace(envelope, [KEY.public_key()])
    assert report.statement is not None
    return envelope, report.statement.predicate.deterministic.to_dict()


def edit_entries(cache: Path, stated: str) -> int:
    """Makes every entry's plan read its last output from another buffer of that type and
    shape (an intermediate) and reseals its record as an attacker would, stating `stated`
    ("honest": the record's binary_hash as it was; "edited": the edited plan's, computed as
    the compiler computes it)."""
    edited = 0
    for path in cache.glob("*.json"):
        record = json.loads(path.read_bytes()[65:])
        plan = record["plan"]
        last = plan["buffers"][plan["outputs"][-1]]
        plan["outputs"][-1] = next(b[0] for b in plan["buffers"] if b[0] != last[0] and b[2:4] == last[2:4])
        if stated == "edited":
            record["binary_hash"] = binary_hash((cache / f"{path.stem}.o").read_bytes(), Plan.from_json(plan))
        content = json.dumps(record).encode()
        path.write_bytes(hashlib.sha256(content).hexdigest().encode() + b"\n" + content)
        edited += 1
    return edited


@pytest.mark.parametrize("stated", ["honest", "edited"])
def test_a_resealed_cache_entry_is_never_signed_under_the_honest_hashes(tmp_path: Path, stated: str) -> None:
    _, honest = signed_job(tmp_path)
    assert edit_entries(tmp_path / "compile-cache", stated) >= 1
    envelope, signed = signed_job(tmp_path)
    same_identity = (signed["graph_hash"], signed["binary_hash"]) == (honest["graph_hash"], honest["binary_hash"])
    assert signed["outputs"] == honest["outputs"] or not same_identity
    if stated == "honest":
        assert same_identity and signed["outputs"] == honest["outputs"]  # refused, rebuilt
    else:
        assert signed["binary_hash"] != honest["binary_hash"] and signed["outputs"] != honest["outputs"]
        report = verify_trace(envelope, [KEY.public_key()], module_source=MLP.module_text, inputs=MLP.inputs())
        assert [c.name for c in report.failed] == ["binary_hash"]
