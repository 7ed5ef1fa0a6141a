"""A hostile node against a submitter and a verifier: the SDK and `vxla verify --node` against
a real HTTP server on 127.0.0.1 that answers the routes a node serves (node/daemon/api.py)
as a real node would for one done job, except for the one answer each test makes hostile.
Every hostile answer ends in the SDK's own error (AnswerRefused, IntegrityError, JobTimeout:
all NodeError) within bounds of bytes and time, and in the CLI's exit status with one line
on stderr, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import node.sdk as sdk
from attest import Statement, key_id, sign_statement
from attest.digests import sha256_hex
from attest.dsse import PAYLOAD_TYPE, sign_payload
from attest.keys import generate_private_key, raw_public_key
from compiler.api import compile_program, load_program
from core.errors import VxlaError
from node.chain import ContractRevert
from node.cli import main
from node.errors import NodeError
from node.sdk import AnswerLimits, AnswerRefused, Client, IntegrityError, Job, JobTimeout
from node.tensors import NPY_HEADER_BYTES, npy_bytes
from node.tracing.statement import build_statement

ROOT = Path(__file__).resolve().parents[2]
KEY = generate_private_key()
JOB = "0123456789abcdef" * 2  # a node's own job id: 32 hex digits
MODULE = """HloModule add

ENTRY main {
  x = f32[2,3] parameter(0)
  y = f32[2,3] parameter(1)
  ROOT s = f32[2,3] add(x, y)
}
"""
MiB = 1 << 20
# What each test's client takes at most: small, so a test proves the bounds in a few MiB and
# a few seconds (the defaults are the same code with larger numbers).
LIMITS = AnswerLimits(json_bytes=64 * 1024, trace_bytes=1 * MiB, module_bytes=1 * MiB, tensor_bytes=1 * MiB, transfer_seconds=1.5)
ENDLESS = 64 * MiB  # what a hostile answer offers: far past every bound above
SENT_AT_MOST = 24 * MiB  # what may leave the server before the client stops it (socket buffers)
DRIP_SECONDS = 12.0  # how long a dripped answer goes on before the server gives up
TOO_LONG = 8.0  # a call cut at LIMITS' 1.5 s deadline returns well before this

Answer = Callable[["Handler", "HostileNode"], None]


# --- the honest job ----------------------------------------------------------------------


@dataclass(frozen=True)
class HonestJob:
    """One done job as a node records and serves it: module, inputs, outputs, signed trace."""

    module: bytes
    inputs: list[np.ndarray]
    outputs: list[np.ndarray]
    statement: Statement

    @property
    def blobs(self) -> dict[str, bytes]:
        return {sha256_hex(b): b for b in [self.module, *map(npy_bytes, self.inputs), *map(npy_bytes, self.outputs)]}

    def record(self) -> dict[str, Any]:
        """GET /v1/jobs/{id}, as node.daemon.store.Job.to_dict gives it."""
        return {
            "id": JOB, "state": "done", "module_digest": sha256_hex(self.module),
            "input_digests": [sha256_hex(npy_bytes(a)) for a in self.inputs],
            "output_digests": [sha256_hex(npy_bytes(a)) for a in self.outputs],
            "statement_digest": "0" * 64, "envelope_digest": "0" * 64, "error": None,
            "created_at": 0.0, "updated_at": 0.0, "deaths": 0,
        }  # fmt: skip

    def trace(self, statement: Statement | None = None) -> bytes:
        return sign_statement(statement or self.statement, KEY).to_json().encode()


@pytest.fixture(scope="module")
def honest() -> HonestJob:
    program = load_program(MODULE)
    executable = compile_program(program)
    inputs = [np.arange(6, dtype=np.float32).reshape(2, 3), np.full((2, 3), 0.5, np.float32)]
    run = executable.run_traced(*inputs)
    statement = build_statement(
        program, executable, inputs, run, job_id=JOB, chain_id=None, contract=None,
        key_id=key_id(KEY), threads=1, timings_ns={}, op_level=True,
    )  # fmt: skip
    return HonestJob(MODULE.encode(), inputs, list(run.outputs), statement)


# --- the node ------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    node: HostileNode  # set on each server's own subclass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.node.answer(self)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's name
        pass


class HostileNode:
    """An HTTP server on 127.0.0.1, in threads: `routes` maps a path to its answer; every byte
    it writes is counted in `sent` by path, and `finished[path]` is set when an answer ends."""

    def __init__(self, job: HonestJob) -> None:
        self.routes: dict[str, Answer] = {
            "/v1/key": body(json.dumps({"key_id": key_id(KEY), "public_key": raw_public_key(KEY.public_key()).hex()}).encode()),
            f"/v1/jobs/{JOB}": body(json.dumps(job.record()).encode()),
            f"/v1/jobs/{JOB}/trace": body(job.trace()),
            **{f"/v1/blobs/{d}": body(b, "application/octet-stream") for d, b in job.blobs.items()},
        }
        self.asked: list[str] = []
        self.sent: dict[str, int] = defaultdict(int)
        self.finished: dict[str, threading.Event] = defaultdict(threading.Event)
        handler = type("BoundHandler", (Handler,), {"node": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def answer(self, handler: Handler) -> None:
        path = handler.path.split("?")[0]
        self.asked.append(path)
        try:
            self.routes.get(path, body(b'{"detail": "unknown"}', status=404))(handler, self)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up: what a bound is for
        finally:
            self.finished[path].set()

    def write(self, handler: Handler, data: bytes) -> None:
        handler.wfile.write(data)
        handler.wfile.flush()
        self.sent[handler.path] += len(data)

    def sent_when_done(self, path: str) -> int:
        assert self.finished[path].wait(10), f"{path}: the server is still sending"
        return self.sent[path]

    def client(self, **options: Any) -> Client:
        return Client(self.url, limits=LIMITS, **options)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def node(honest: HonestJob) -> Iterator[HostileNode]:
    server = HostileNode(honest)
    yield server
    server.close()


def body(data: bytes, content_type: str = "application/json", status: int = 200, headers: dict[str, str] | None = None) -> Answer:
    def answer(handler: Handler, node: HostileNode) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            handler.send_header(name, value)
        handler.end_headers()
        node.write(handler, data)

    return answer


def endless(declare_length: bool) -> Answer:
    """ENDLESS bytes, declared in Content-Length or not (then the end is the connection's)."""

    def answer(handler: Handler, node: HostileNode) -> None:
        handler.send_response(200)
        if declare_length:
            handler.send_header("Content-Length", str(ENDLESS))
        handler.end_headers()
        chunk = b"x" * 65536
        for _ in range(ENDLESS // len(chunk)):
            node.write(handler, chunk)

    return answer


def dripped(data: bytes, status_line_too: bool = False) -> Answer:
    """`data` a byte a second (the status line and headers too, if asked), for DRIP_SECONDS."""

    def answer(handler: Handler, node: HostileNode) -> None:
        head = f"HTTP/1.0 200 OK\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        if not status_line_too:
            node.write(handler, head)
        given_up = time.monotonic() + DRIP_SECONDS
        for byte in (head if status_line_too else b"") + data:
            if time.monotonic() > given_up:
                return
            node.write(handler, bytes([byte]))
            time.sleep(1.0)

    return answer


def redirect(to: str) -> Answer:
    return body(b"", status=302, headers={"Location": to})


def signed_payload(payload: bytes) -> bytes:
    return sign_payload(payload, KEY, PAYLOAD_TYPE).to_json().encode()


def wrong_shape(job: HonestJob) -> bytes:
    """A trace that records out0 as f32[3,2], over the digest of the f32[2,3] it serves."""
    data = job.statement.to_dict()
    data["predicate"]["deterministic"]["outputs"][0]["shape"] = [3, 2]
    return job.trace(Statement.from_dict(data))


DEEP_JSON = b"[" * 20_000 + b"]" * 20_000  # past any parser's recursion, within every bound

# A route's hostile answer, and what the SDK's error says of it.
HOSTILE_JOB_ANSWERS = {
    "deep JSON": (body(DEEP_JSON), "not JSON"),
    "not JSON": (body(b"<html>a node?</html>", "text/html"), "not JSON"),
    "not an object": (body(b"[1, 2]"), "not a JSON object"),
    "a redirect": (redirect("/v1/elsewhere"), "answered 302 to /v1/elsewhere"),
    "a huge answer": (endless(declare_length=False), "answer over its bound of 65536 bytes"),
}


def hostile_traces(job: HonestJob) -> dict[str, tuple[Answer, str]]:
    canonical = job.statement.to_json_bytes()
    return {
        "a non-canonical payload": (body(signed_payload(json.dumps(json.loads(canonical), indent=1).encode())), "not canonical JSON"),
        "a deep JSON payload": (body(signed_payload(DEEP_JSON)), "not valid JSON"),
        "deep JSON": (body(DEEP_JSON), "not valid JSON"),
        "not JSON": (body(b"\xff\xfe not text"), "not UTF-8"),
        "a huge trace, its length declared": (endless(declare_length=True), f"trace over its bound of {1 * MiB} bytes"),
        "a huge trace, its length undeclared": (endless(declare_length=False), f"trace over its bound of {1 * MiB} bytes"),
        "a dripped trace": (dripped(job.trace()), "trace not complete within 1.5 s"),
        "a dripped status line": (dripped(job.trace(), status_line_too=True), "trace not complete within 1.5 s"),
    }


# --- the SDK ---------------------------------------------------------------------------------


def test_the_honest_node_verifies(node: HostileNode, honest: HonestJob) -> None:
    """The baseline every other test breaks one answer of."""
    client = node.client(trusted_keys=[KEY.public_key()])
    job = client.job(JOB)
    for got, want in zip(job.outputs(), honest.outputs, strict=True):
        assert got.tobytes() == want.tobytes() and got.shape == want.shape
    assert job.verify(threads=1).verified


@pytest.mark.parametrize("case", list(HOSTILE_JOB_ANSWERS))
def test_a_job_answer_that_is_not_a_jobs_json_is_refused(node: HostileNode, case: str) -> None:
    answer, message = HOSTILE_JOB_ANSWERS[case]
    node.routes[f"/v1/jobs/{JOB}"] = answer
    with pytest.raises(AnswerRefused, match=message) as raised:
        node.client().job(JOB)
    assert isinstance(raised.value, NodeError) and isinstance(raised.value, VxlaError)
    assert "/v1/elsewhere" not in node.asked  # a redirect is never followed
    assert node.sent_when_done(f"/v1/jobs/{JOB}") < SENT_AT_MOST


@pytest.mark.parametrize("case", ["a non-canonical payload", "a deep JSON payload", "deep JSON", "not JSON",
                                  "a huge trace, its length declared", "a huge trace, its length undeclared",
                                  "a dripped trace", "a dripped status line"])  # fmt: skip
def test_a_trace_past_its_bounds_or_not_a_signed_statement_is_refused(node: HostileNode, honest: HonestJob, case: str) -> None:
    answer, message = hostile_traces(honest)[case]
    path = f"/v1/jobs/{JOB}/trace"
    node.routes[path] = answer
    job = node.client(trusted_keys=[KEY.public_key()]).job(JOB)
    started = time.monotonic()
    with pytest.raises(AnswerRefused, match=message):
        job.outputs()
    assert time.monotonic() - started < TOO_LONG
    if "huge" in case:
        assert node.sent_when_done(path) < SENT_AT_MOST
    if "dripped" not in case:  # verify() takes the same trace the same way
        with pytest.raises(AnswerRefused, match=message):
            job.verify(execute=False)


@pytest.mark.parametrize("declare_length", [True, False])
def test_an_output_blob_past_the_size_its_record_implies_is_refused(node: HostileNode, honest: HonestJob, declare_length: bool) -> None:
    """out0 is f32[2,3]: 24 bytes and an .npy header, whatever the client's larger limit."""
    path = f"/v1/blobs/{sha256_hex(npy_bytes(honest.outputs[0]))}"
    node.routes[path] = endless(declare_length)
    with pytest.raises(AnswerRefused, match=f"blob over its bound of {NPY_HEADER_BYTES + 24} bytes"):
        node.client(trusted_keys=[KEY.public_key()]).job(JOB).outputs()
    assert node.sent_when_done(path) < SENT_AT_MOST


def test_an_output_whose_shape_is_not_the_statements_is_refused(node: HostileNode, honest: HonestJob) -> None:
    """The node signs out0 as f32[3,2] with the digest of the f32[2,3] blob it serves."""
    node.routes[f"/v1/jobs/{JOB}/trace"] = body(wrong_shape(honest))
    for client in (node.client(trusted_keys=[KEY.public_key()]), node.client()):  # the key it serves too
        with pytest.raises(IntegrityError, match=r"out0 is float32\[2, 3\], its record says f32\[3, 2\]"):
            client.job(JOB).outputs()


def test_wait_ends_at_its_deadline_when_finalizing_keeps_reverting(node: HostileNode) -> None:
    """A chain job past its challenge deadline that the chain will not finalize (an idle
    devnet's clock): wait pauses between tries and raises JobTimeout at its deadline."""
    tries = []

    def finalize(account: object, job_id: int) -> None:
        tries.append(job_id)
        if len(tries) > 200:  # a loop that neither pauses nor looks at its deadline
            raise RuntimeError("finalize tried 200 times in a row")
        raise ContractRevert("ChallengeWindowOpen", {}, b"")

    state = {"job_id": 7, "phase": "open", "accepted": False, "result_digest": "0" * 64, "k": 1, "claimed": 1,
             "committed": 1, "revealed": 0, "commit_deadline": 100, "reveal_deadline": 200, "chain_time": 250,
             "challenge_window": 10, "challenge_deadline": 210, "open_disputes": 0,
             "slots": [], "local": None, "node": None}  # fmt: skip
    node.routes["/v1/chain/jobs/7"] = body(json.dumps(state).encode())
    chain = SimpleNamespace(market=SimpleNamespace(finalize=finalize), account="0x" + "1" * 40)
    job = Job(node.client(chain=chain), "7", on_chain=True)
    started = time.monotonic()
    with pytest.raises(JobTimeout, match="job 7 still open after 1.0 s") as raised:
        job.wait(timeout=1.0)
    assert 1.0 <= time.monotonic() - started < TOO_LONG
    assert isinstance(raised.value, TimeoutError) and 1 <= len(tries) < 50


def test_wait_ends_at_its_deadline_when_the_node_drips_its_answer(node: HostileNode, honest: HonestJob) -> None:
    """A wait shorter than a request's deadline times out at its own; a longer one ends at the
    request's deadline, the answer refused."""
    running = json.dumps({**honest.record(), "state": "running"}).encode()
    node.routes[f"/v1/jobs/{JOB}"] = body(running)
    job = node.client().job(JOB)
    node.routes[f"/v1/jobs/{JOB}"] = dripped(running)
    for timeout, error in ((1.0, JobTimeout), (60.0, AnswerRefused)):
        started = time.monotonic()
        with pytest.raises(error):
            job.wait(timeout=timeout)
        assert time.monotonic() - started < TOO_LONG


# --- the command line --------------------------------------------------------------------------


def verify_cli(node: HostileNode, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str]:
    """`vxla verify --node URL --job ID` in this process: exit status and stderr."""
    status = main(["verify", "--node", node.url, "--job", JOB, "--threads", "1", *options])
    return status, capsys.readouterr().err


def assert_one_line(stderr: str, message: str) -> None:
    assert "Traceback" not in stderr and stderr.strip().count("\n") == 0, stderr
    assert message in stderr, stderr


@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's clients take the SDK's default limits: these, for the tests' sake."""
    monkeypatch.setattr(sdk, "DEFAULT_LIMITS", LIMITS)


def test_the_cli_verifies_the_honest_node(node: HostileNode, capsys: pytest.CaptureFixture[str], small_limits: None) -> None:
    status, _ = verify_cli(node, capsys)
    assert status == 0


@pytest.mark.parametrize(
    ("route", "case"),
    [("job", "deep JSON"), ("job", "not JSON"), ("job", "a redirect"), ("job", "a huge answer"),
     ("trace", "a non-canonical payload"), ("trace", "a huge trace, its length undeclared"), ("trace", "a dripped trace"),
     ("module", "huge")],
)  # fmt: skip
def test_the_cli_exits_2_naming_a_refused_answer(
    node: HostileNode, honest: HonestJob, capsys: pytest.CaptureFixture[str], small_limits: None, route: str, case: str
) -> None:
    if route == "job":
        node.routes[f"/v1/jobs/{JOB}"], message = HOSTILE_JOB_ANSWERS[case]
    elif route == "trace":
        node.routes[f"/v1/jobs/{JOB}/trace"], message = hostile_traces(honest)[case]
    else:
        node.routes[f"/v1/blobs/{sha256_hex(honest.module)}"] = endless(declare_length=False)
        message = f"blob over its bound of {1 * MiB} bytes"
    started = time.monotonic()
    status, stderr = verify_cli(node, capsys)
    assert status == 2 and time.monotonic() - started < TOO_LONG
    assert_one_line(stderr, message)
    assert stderr.startswith(f"vxla verify: error: --node {node.url}: answer refused: ")


def test_the_cli_exits_1_when_the_trace_records_another_output_shape(
    node: HostileNode, honest: HonestJob, capsys: pytest.CaptureFixture[str], small_limits: None
) -> None:
    """Re-executed, the output is not the tensor the trace records: verification fails."""
    node.routes[f"/v1/jobs/{JOB}/trace"] = body(wrong_shape(honest))
    status = main(["verify", "--node", node.url, "--job", JOB, "--threads", "1"])
    out, err = capsys.readouterr()
    assert status == 1 and "Traceback" not in err
    assert "result: DIFFERENT" in out, out


def test_the_installed_cli_refuses_a_trace_declared_past_the_default_bound(node: HostileNode) -> None:
    """The real command, its default limits: a trace declared at 1 GiB is refused on its
    headers, with one line and exit 2, before the body is read."""
    path = f"/v1/jobs/{JOB}/trace"

    def declared_huge(handler: Handler, node: HostileNode) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(1 << 30))
        handler.end_headers()
        chunk = b"x" * 65536
        for _ in range(ENDLESS // len(chunk)):
            node.write(handler, chunk)

    node.routes[path] = declared_huge
    result = subprocess.run(
        [sys.executable, "-m", "node.cli", "verify", "--node", node.url, "--job", JOB, "--no-execute"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert_one_line(result.stderr, f"trace over its bound of {sdk.DEFAULT_LIMITS.trace_bytes} bytes")
    assert node.sent_when_done(path) < SENT_AT_MOST
