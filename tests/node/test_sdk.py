"""node.sdk against a scripted node (httpx.MockTransport): what the client sends, and that it
refuses bytes that do not match their digests instead of returning them."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from types import SimpleNamespace

import httpx
import numpy as np
import pytest

from attest import key_id, sign_statement
from attest.digests import sha256_hex
from attest.keys import generate_private_key, raw_public_key
from compiler.config import load_config
from compiler.driver import compile_program, graph_commitment
from compiler.program import load_program
from harness.fixture_data import Fixture
from node.protocol import INLINE_INPUT_BYTES
from node.sdk import ChainSubmitter, Client, IntegrityError, JobFailed, RequestRefused
from node.tensors import npy_bytes
from node.tracing.statement import build_statement

MLP = Fixture("mlp_softmax")
KEY = generate_private_key()


class FakeNode:
    """Answers like a node that ran MLP: one done job, its outputs and its trace."""

    def __init__(self, tamper_output: bool = False, fail: bool = False, signer=KEY) -> None:  # noqa: ANN001
        program = load_program(MLP.module_text)
        executable = compile_program(program)
        inputs = MLP.inputs()
        run = executable.run_traced(*inputs)
        statement = build_statement(
            program, executable, inputs, run, job_id="j1", chain_id=None, contract=None,
            key_id=key_id(signer), threads=1, timings_ns={}, op_level=True,
        )  # fmt: skip
        self.outputs = run.outputs
        self.envelope = sign_statement(statement, signer).to_json()
        self.blobs = {sha256_hex(b): b for b in (npy_bytes(a) for a in run.outputs)}
        digests = list(self.blobs)
        if tamper_output:
            # A dishonest or corrupted node: other bytes under out0's digest.
            self.blobs[digests[0]] = npy_bytes(run.outputs[0] + 1)
        self.job = {"id": "j1", "state": "failed" if fail else "done", "output_digests": digests,
                    "statement_digest": "0" * 64, "error": "boom" if fail else None}  # fmt: skip
        self.requests: list[tuple[str, str, bytes]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path, request.content))
        path = request.url.path
        if request.method == "PUT" and path.startswith("/v1/blobs/"):
            return httpx.Response(201, json={"digest": path.rsplit("/", 1)[1]})
        if request.method == "POST" and path == "/v1/jobs":
            return httpx.Response(201, json={**self.job, "state": "queued"})
        if path == "/v1/key":  # the node's own key, whoever signed its traces
            return httpx.Response(200, json={"key_id": key_id(KEY), "public_key": raw_public_key(KEY.public_key()).hex()})
        if path == "/v1/jobs/j1":
            return httpx.Response(200, json=self.job)
        if path == "/v1/jobs/j1/trace":
            return httpx.Response(200, text=self.envelope)
        if path.startswith("/v1/blobs/"):
            digest = path.rsplit("/", 1)[1]
            if digest in self.blobs:
                return httpx.Response(200, content=self.blobs[digest])
            return httpx.Response(404, json={"detail": f"blob {digest}: unknown"})
        return httpx.Response(404, json={"detail": "no route"})


def client_for(node: FakeNode) -> Client:
    return Client("http://node.invalid", trusted_keys=[KEY.public_key()], transport=httpx.MockTransport(node))


def test_submit_sends_small_inputs_in_the_job_request(tmp_path: Path) -> None:
    node = FakeNode()
    path = tmp_path / "in0.npy"
    np.save(path, np.arange(3, dtype=np.float32))
    job = client_for(node).submit(str(MLP.directory / "module.hlo"), [np.ones(2, np.float32), path])
    assert job.id == "j1" and job.state == "queued"
    assert [r[0] for r in node.requests] == ["POST"]  # one request, no upload
    body = json.loads(node.requests[-1][2])
    assert body["module"] == MLP.module_text and "inputs" not in body and body["redundancy"] == 1
    sent = [base64.b64decode(d) for d in body["input_data"]]
    assert sent[1] == path.read_bytes() and np.array_equal(np.load(io.BytesIO(sent[0])), np.ones(2, np.float32))


def test_submit_uploads_larger_inputs_then_posts_module_text(tmp_path: Path) -> None:
    node = FakeNode()
    path = tmp_path / "in0.npy"
    np.save(path, np.arange(3, dtype=np.float32))
    large = np.zeros(INLINE_INPUT_BYTES // 4, np.float32)  # with its header, over the inline limit
    client_for(node).submit(str(MLP.directory / "module.hlo"), [large, path])
    puts = [r for r in node.requests if r[0] == "PUT"]
    assert [p[1] for p in puts] == [f"/v1/blobs/{sha256_hex(p[2])}" for p in puts]
    assert puts[1][2] == path.read_bytes()
    body = json.loads(node.requests[-1][2])
    assert body["module"] == MLP.module_text and "input_data" not in body
    assert body["inputs"] == [sha256_hex(p[2]) for p in puts] and body["redundancy"] == 1


def test_outputs_are_checked_and_trace_verifies() -> None:
    node = FakeNode()
    client = client_for(node)
    job = client.job("j1").wait(timeout=5)
    for got, want in zip(job.outputs(), node.outputs, strict=True):
        assert got.tobytes() == want.tobytes() and got.dtype == want.dtype
    assert client.verify(job.trace(), MLP.module_text, MLP.inputs()).ok
    with pytest.raises(ValueError, match="trusted_keys"):
        Client("http://x", transport=httpx.MockTransport(node)).verify(job.trace(), MLP.module_text, MLP.inputs())


def test_wrong_bytes_are_refused() -> None:
    client = client_for(FakeNode(tamper_output=True))
    with pytest.raises(IntegrityError, match="another digest"):
        client.job("j1").outputs()


def test_outputs_come_only_from_a_trace_whose_signature_verifies() -> None:
    """Without trusted keys the node's served key is used (one request); a trace signed by
    another key gives no outputs, with the trusted keys or the served one."""
    node = FakeNode()
    stranger = Client("http://node.invalid", transport=httpx.MockTransport(node))
    assert len(stranger.job("j1").outputs()) == len(node.outputs)
    assert [path for _, path, _ in node.requests].count("/v1/key") == 1
    forged = FakeNode(signer=generate_private_key())
    for client in (client_for(forged), Client("http://node.invalid", transport=httpx.MockTransport(forged))):
        with pytest.raises(IntegrityError, match="the trace's signature does not verify"):
            client.job("j1").outputs()


def test_failed_job_and_refusals() -> None:
    client = client_for(FakeNode(fail=True))
    with pytest.raises(JobFailed, match="boom"):
        client.job("j1").wait(timeout=5)
    with pytest.raises(RequestRefused) as raised:
        client.get_blob("ab" * 32)
    assert raised.value.status == 404 and "unknown" in raised.value.detail


def test_a_module_file_that_is_not_there_is_named_and_nothing_is_sent(tmp_path: Path) -> None:
    node = FakeNode()
    client = client_for(node)
    with pytest.raises(FileNotFoundError, match="nope.hlo: no such module file"):
        client.submit("nope.hlo", [])
    with pytest.raises(FileNotFoundError, match="no such module file"):
        client.submit(str(tmp_path / "gone" / "m.hlo"), [])
    assert node.requests == []


def test_a_job_prints_in_one_short_line() -> None:
    """repr(job) names the job, the node and its state: not the module, the inputs or the
    node's record (a JAX function's job holds all three)."""
    job = client_for(FakeNode()).submit(MLP.module_text, MLP.inputs()).wait(timeout=5)
    shown = repr(job)
    assert shown == "<Job job j1 on http://node.invalid: done>"


def test_an_unreachable_node_is_the_sdks_own_error() -> None:
    """No answer from a node is NodeUnreachable (a NodeError) naming the URL, not httpx's."""
    from node.errors import NodeError
    from node.sdk import NodeUnreachable, connect

    client = connect("127.0.0.1:9")  # no scheme: http, as a user types it
    assert client.url == "http://127.0.0.1:9"
    with pytest.raises(NodeUnreachable, match=r"cannot reach the node at http://127.0.0.1:9 \(ConnectError") as raised:
        client.job("0" * 32)
    assert isinstance(raised.value, NodeError)


class RecordingMarket:
    """A JobMarket binding that records what a job is posted with (no chain)."""

    def __init__(self) -> None:
        self.client = SimpleNamespace(next_block_time=lambda: 1_000)
        self.posted: list[tuple[tuple, dict]] = []

    def post_job(self, *args: object, **kwargs: object) -> int:
        self.posted.append((args, kwargs))
        return 7


def test_a_chain_job_posts_the_graph_commitment_computed_here_and_its_challenge_window() -> None:
    node = FakeNode()
    market = RecordingMarket()
    submitter = ChainSubmitter(market, "0x" + "1" * 40, challenge_window_s=30)  # type: ignore[arg-type]
    client = Client("http://node.invalid", transport=httpx.MockTransport(node), chain=submitter)
    expected = graph_commitment(load_program(MLP.module_text), load_config(), MLP.inputs())
    for window, posted in ((None, 30), (90, 90)):
        job = client.submit(MLP.module_text, MLP.inputs(), redundancy=3, challenge_window=window)
        assert job.on_chain and job.id == "7"
        args, kwargs = market.posted[-1]
        assert args[3:] == (3, 1_060, 1_120, submitter.reward_wei)  # k, deadlines from the chain's clock, reward
        assert kwargs == {"graph_root": bytes.fromhex(expected.root), "trace_leaves": expected.trace_leaves, "challenge_window": posted}
    # A module that does not compile is refused here, before anything is uploaded or posted.
    sent = len(node.requests)
    with pytest.raises(ValueError, match="module: "):
        client.submit("HloModule broken\n\nENTRY main {\n  ROOT x = f32[] nonsense()\n}\n", [])
    assert len(node.requests) == sent and len(market.posted) == 2
    # Without a chain a job has no challenge window.
    with pytest.raises(ValueError, match="challenge_window: only a job posted on chain"):
        client_for(node).submit(MLP.module_text, MLP.inputs(), challenge_window=30)
