"""The node over real HTTP: a uvicorn server on a free loopback port, jobs submitted through
the SDK, outputs bit-identical to a local compiled run, traces that verify with the node's
public key, bad requests refused with a 4xx naming the problem and leaving the store
unchanged, and a job left running by a crash redone with the same trace digest."""

from __future__ import annotations

import base64
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from attest import Statement, key_id
from attest.digests import sha256_hex
from attest.keys import generate_private_key, raw_public_key
from compiler.config import load_config
from compiler.driver import compile_program
from compiler.program import load_program
from harness.fixture_data import Fixture
from node.daemon.api import intake_routes
from node.daemon.config import Limits, NodeConfig
from node.daemon.server import NodeServer
from node.daemon.store import DONE, FAILED, QUEUED, JobStore
from node.protocol import INLINE_INPUT_BYTES, statement_digest
from node.sdk import Client, Download, JobFailed, RequestRefused
from node.tensors import npy_bytes
from node.tracing.verify import parse_envelope, verify_trace

KEY = generate_private_key()
LIMITS = Limits(
    max_module_bytes=64 * 1024,
    max_tensor_bytes=64 * 1024,
    max_flops=10**8,
    max_while_iterations=2,  # fori_loop runs longer: the loop-limit case
    job_wall_seconds=60.0,
)
JOB_FIXTURES = ["mlp_softmax", "argmax", "bf16_mlp"]
MLP = Fixture("mlp_softmax")
FORI = Fixture("fori_loop")


def start_node(data_dir: Path, limits: Limits = LIMITS) -> NodeServer:
    server = NodeServer(NodeConfig(port=0, data_dir=data_dir, limits=limits), KEY, log_level="warning")
    server.start_in_thread()
    return server


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeServer]:
    server = start_node(tmp_path_factory.mktemp("node"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(node: NodeServer) -> Iterator[Client]:
    with Client(node.url, trusted_keys=[KEY.public_key()]) as sdk:
        yield sdk


def snapshot(server: NodeServer) -> tuple[list[Any], int]:
    """Everything a refused request must leave as it was."""
    return [j.to_dict() for j in server.store.jobs()], server.store.blobs.count()


@pytest.mark.parametrize("name", JOB_FIXTURES)
def test_job_outputs_and_trace(client: Client, node: NodeServer, name: str) -> None:
    fixture = Fixture(name)
    inputs = fixture.inputs()
    states: list[str] = []
    job = client.submit(fixture.module_text, inputs).wait(timeout=60, progress=lambda j: states.append(j.state))
    assert states[-1] == DONE
    program = load_program(fixture.module_text)
    expected = compile_program(program, cache_dir=node.store.data_dir / "compile-cache").run(*inputs)
    outputs = job.outputs()
    assert len(outputs) == len(expected)
    for got, want in zip(outputs, expected, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    envelope = job.trace()
    report = verify_trace(envelope, [KEY.public_key()], module_source=fixture.module_text, inputs=inputs)
    assert report.ok, [c.message for c in report.failed]
    assert report.statement is not None and report.statement.predicate.job_id == job.id
    assert job.info["statement_digest"] == statement_digest(report.statement)
    assert client.verify(envelope, fixture.module_text, inputs).ok
    # A verifier with nothing but the node's URL and the job id: the key the node serves,
    # the job's own module and inputs fetched by digest, re-executed here.
    with Client(node.url) as stranger:
        report = stranger.job(job.id).verify()
    assert report.ok and report.verified and report.re_executed, [c.message for c in report.failed]


def test_vxla_verify_a_nodes_job_by_url_and_id(client: Client, node: NodeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """`vxla verify --node URL --job ID`: 0 when re-executed and every check passed (a URL
    without its scheme understood), 3 with --no-execute, 1 against another trusted key given
    in hex as GET /v1/key gives it, 2 for a URL that cannot be a node's or a job not done."""
    from node.cli import main

    job = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    address = node.url.removeprefix("http://")
    assert main(["verify", "--node", address, "--job", job.id]) == 0
    out = capsys.readouterr().out
    assert "against the key" in out and "verified" in out
    assert main(["verify", "--node", node.url, "--job", job.id, "--no-execute"]) == 3
    served = client.node_key()
    assert key_id(served) == key_id(KEY.public_key())
    other = raw_public_key(generate_private_key().public_key()).hex()
    capsys.readouterr()
    assert main(["verify", "--node", node.url, "--job", job.id, "--trusted-key", other]) == 1
    assert main(["verify", "--node", node.url, "--job", job.id, "--trusted-key", raw_public_key(served).hex()]) == 0
    capsys.readouterr()
    assert main(["verify", "--node", "ftp://example.org", "--job", job.id]) == 2
    assert "a node speaks http or https, not ftp" in capsys.readouterr().err
    assert main(["verify", "--node", node.url, "--job", "0" * 32]) == 2
    assert "unknown" in capsys.readouterr().err
    assert main(["verify", "--job", job.id]) == 2
    assert "--node URL (or --devnet DIR) and --job ID go together" in capsys.readouterr().err


def test_same_job_same_statement_digest(client: Client) -> None:
    first = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    second = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    assert first.id != second.id
    assert first.info["statement_digest"] == second.info["statement_digest"]
    assert first.info["output_digests"] == second.info["output_digests"]


def test_tampered_trace_does_not_verify(client: Client) -> None:
    job = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    other = generate_private_key()
    report = client.verify(job.trace(), MLP.module_text, MLP.inputs(), trusted_keys=[other.public_key()])
    assert not report.ok and report.failed[0].name == "signatures"


def test_a_download_of_outputs_tells_its_progress(client: Client) -> None:
    job = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    heard: list[Download] = []
    outputs = job.outputs(progress=heard.append)
    total = sum(o.nbytes for o in outputs)
    assert heard and heard[-1] == Download("", len(outputs), len(outputs), total, total)
    assert [d.received for d in heard] == sorted(d.received for d in heard) and all(d.total == total for d in heard)
    assert [d.name for d in heard[:-1]] == sorted(d.name for d in heard[:-1]) and {d.name for d in heard[:-1]} == {f"out{n}" for n in range(len(outputs))}
    np.testing.assert_array_equal(outputs[0], job.outputs()[0])


def test_a_job_stopped_in_a_loop_names_the_users_source(client: Client) -> None:
    """A node's failed job says where in the user's code it stopped, as `vxla run` does,
    where the HLO's metadata says (JAX's op_name and file:line), and the setting that stopped it."""
    from tests.node.cli.test_cli import COUNTING

    with pytest.raises(JobFailed) as failed:
        client.submit(COUNTING, [np.int32(0)]).wait(timeout=60)
    error = str(failed.value)
    assert "ran past the limit of 2 iterations" in error and "(%while" in error, error
    assert "is jit(count)/while at model.py:12 (count))" in error and "limits.max_while_iterations = 2" in error, error


def test_the_job_list_pages_filters_and_refuses_bad_queries(client: Client, node: NodeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """GET /v1/jobs: newest first, filtered by state, paged with `next`; `vxla jobs` and `vxla
    job` show state, timings and a failed job's error; bad queries are a 400 naming why."""
    from node.cli import main

    done = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    with pytest.raises(JobFailed):
        client.submit(FORI.module_text, FORI.inputs()).wait(timeout=60)  # over the loop limit
    everything = client.jobs(limit=1000)
    assert everything == [j.to_dict() for j in reversed(node.store.jobs())]
    failed = client.jobs("failed", limit=1000)
    assert failed and all(j["state"] == "failed" for j in failed)
    assert [j["id"] for j in failed] == [j["id"] for j in everything if j["state"] == "failed"]
    first = httpx.get(f"{node.url}/v1/jobs", params={"limit": 1}).json()
    second = httpx.get(f"{node.url}/v1/jobs", params={"limit": 1, "before": first["next"]}).json()
    assert [j["id"] for j in first["jobs"] + second["jobs"]] == [j["id"] for j in everything[:2]]
    for params, why in [({"state": "lost"}, "state 'lost': one of queued"), ({"limit": 0}, "limit 0: from 1 to 1000"), ({"before": "f" * 32}, "unknown")]:
        answer = httpx.get(f"{node.url}/v1/jobs", params=params)
        assert answer.status_code == 400 and why in answer.json()["detail"]
    capsys.readouterr()
    assert main(["jobs", "--node", node.url, "--state", "failed", "--limit", "1"]) == 0
    listed = capsys.readouterr().out
    assert failed[0]["id"] in listed and "past the limit of 2 iterations" in listed
    assert main(["job", done.id, "--node", node.url]) == 0
    shown = capsys.readouterr().out
    assert f"job          {done.id}" in shown and "state        done" in shown and "took" in shown
    assert main(["job", "0" * 32, "--node", node.url]) == 2
    assert "unknown" in capsys.readouterr().err
    # A number names a chain job, which a node without a chain does not have: said so, with
    # what its own jobs' ids look like.
    assert main(["job", "5", "--node", node.url]) == 2
    assert "no chain job 5: this node follows no chain (chain.rpc_url is empty); its own jobs have 32-hex-digit ids" in capsys.readouterr().err


def _post(node: NodeServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{node.url}/v1/jobs", json=body, timeout=30)


def _base64(array: np.ndarray) -> str:
    return base64.b64encode(npy_bytes(array)).decode("ascii")


def _upload(node: NodeServer, array: np.ndarray) -> str:
    data = npy_bytes(array)
    digest = sha256_hex(data)
    assert httpx.put(f"{node.url}/v1/blobs/{digest}", content=data).status_code == 201
    return digest


BAD_HLO = "HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[2] bogus(p)\n}\n"
HUGE = "HloModule m\nENTRY e {\n  c = f32[] constant(1)\n  ROOT b = f32[100000,100000] broadcast(c), dimensions={}\n}\n"


def _job_body_limit() -> int:
    return next(route.body_limit for route in intake_routes(LIMITS) if route.path.pattern == "/v1/jobs")


@pytest.mark.parametrize(
    ("case", "status", "named"),
    [
        ("malformed HLO", 400, "line 4, column 19: unknown opcode 'bogus'"),
        ("no module", 400, "exactly one of module"),
        ("wrong input count", 400, "takes 5 inputs, got 0"),
        ("wrong dtype", 400, "parameter 0 expects f32"),
        ("wrong shape", 400, "parameter 1 expects"),
        ("unknown input digest", 400, "inputs[0]: blob"),
        ("not a digest", 400, "inputs[0]"),
        ("over max_flops", 422, "limits.max_flops"),
        ("module over max_module_bytes", 413, "limits.max_module_bytes"),
        ("body over the limit", 413, "over this route's limit"),
        ("redundancy", 422, "redundancy 3"),
        ("input_data not base64", 400, "input_data[1]: not base64"),
        ("input_data and inputs", 400, "not both"),
        ("input_data too few", 400, "takes 5 inputs, got 4"),
        ("input_data wrong dtype", 400, "parameter 0 expects f32"),
        ("input_data over the inline limit", 413, "upload larger inputs as blobs"),
    ],
)
def test_bad_jobs_refused_store_unchanged(node: NodeServer, case: str, status: int, named: str) -> None:
    inputs = MLP.inputs()
    assert len(inputs) == 5
    # Every blob a body names is uploaded before the snapshot: the refused job is what must
    # leave no trace, not the uploads.
    digests = [_upload(node, a) for a in inputs]
    inline = [_base64(a) for a in inputs]
    bodies: dict[str, dict[str, Any]] = {
        "malformed HLO": {"module": BAD_HLO, "inputs": []},
        "no module": {"inputs": []},
        "wrong input count": {"module": MLP.module_text, "inputs": []},
        "wrong dtype": {"module": MLP.module_text, "inputs": [_upload(node, inputs[0].astype(np.float64)), *digests[1:]]},
        "wrong shape": {"module": MLP.module_text, "inputs": [digests[0], _upload(node, np.zeros((1, 1), inputs[1].dtype)), *digests[2:]]},
        "unknown input digest": {"module": MLP.module_text, "inputs": ["ab" * 32, *digests[1:]]},
        "not a digest": {"module": MLP.module_text, "inputs": ["../../etc/passwd", *digests[1:]]},
        "over max_flops": {"module": HUGE, "inputs": []},
        "module over max_module_bytes": {"module": MLP.module_text + " " * LIMITS.max_module_bytes, "inputs": digests},
        # Past what a job body may carry: the module's JSON and inline inputs.
        "body over the limit": {"module": MLP.module_text + " " * _job_body_limit(), "inputs": digests},
        "redundancy": {"module": MLP.module_text, "inputs": digests, "redundancy": 3},
        "input_data not base64": {"module": MLP.module_text, "input_data": [inline[0], "not base64!", *inline[2:]]},
        "input_data and inputs": {"module": MLP.module_text, "inputs": digests, "input_data": inline},
        "input_data too few": {"module": MLP.module_text, "input_data": inline[1:]},
        "input_data wrong dtype": {"module": MLP.module_text, "input_data": [_base64(inputs[0].astype(np.float64)), *inline[1:]]},
        "input_data over the inline limit": {
            "module": MLP.module_text, "input_data": [_base64(np.zeros(INLINE_INPUT_BYTES // 4, np.float32)), *inline[1:]],
        },
    }
    before = snapshot(node)
    response = _post(node, bodies[case])
    assert response.status_code == status, response.text
    assert named in response.json()["detail"]
    assert snapshot(node) == before
    assert httpx.get(f"{node.url}/healthz").status_code == 200


def test_blob_endpoints(node: NodeServer) -> None:
    data = b"some bytes"
    digest = sha256_hex(data)
    wrong = httpx.put(f"{node.url}/v1/blobs/{'0' * 64}", content=data)
    assert wrong.status_code == 400 and digest in wrong.json()["detail"]
    before = snapshot(node)
    big = b"x" * (LIMITS.max_module_bytes + 1)
    too_big = httpx.put(f"{node.url}/v1/blobs/{sha256_hex(big)}", content=big)
    assert too_big.status_code == 413
    # Without a Content-Length (chunked), the limit is enforced while reading.
    chunked = httpx.put(f"{node.url}/v1/blobs/{sha256_hex(big)}", content=iter([big[:1000], big[1000:]]))
    assert chunked.status_code == 413
    assert snapshot(node) == before
    assert httpx.get(f"{node.url}/v1/blobs/{digest}").status_code == 404
    assert httpx.get(f"{node.url}/v1/blobs/xyz").status_code == 400
    assert httpx.put(f"{node.url}/v1/blobs/{digest}", content=data).status_code == 201
    fetched = httpx.get(f"{node.url}/v1/blobs/{digest}")
    assert fetched.status_code == 200 and fetched.content == data


def test_unknown_job(node: NodeServer, client: Client) -> None:
    for path in ("/v1/jobs/nope", "/v1/jobs/nope/trace"):
        response = httpx.get(node.url + path)
        assert response.status_code == 404 and "nope" in response.json()["detail"]
    with pytest.raises(RequestRefused) as raised:
        client.job("nope")
    assert raised.value.status == 404


def test_loop_limit_fails_the_job(client: Client, node: NodeServer) -> None:
    fixture = Fixture("fori_loop")
    job = client.submit(fixture.module_text, fixture.inputs())
    with pytest.raises(JobFailed, match="limits.max_while_iterations"):
        job.wait(timeout=60)
    assert job.state == FAILED
    response = httpx.get(f"{node.url}/v1/jobs/{job.id}/trace")
    assert response.status_code == 409 and "failed" in response.json()["detail"]
    with pytest.raises(JobFailed, match="limits.max_while_iterations"):
        job.outputs()  # outputs() waits for the job, and it failed


def test_service_endpoints(node: NodeServer, client: Client) -> None:
    for _ in range(2):  # the second run of a module reuses its executable: a cache hit
        client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    ready = httpx.get(f"{node.url}/readyz").json()
    assert ready["ok"] and ready["key"] == node.pool.key_id
    metrics = httpx.get(f"{node.url}/metrics").text
    # The per-state gauge is read from the store when scraped.
    assert f'vxla_jobs{{state="done"}} {float(node.store.counts()[DONE])}' in metrics
    assert "vxla_execution_seconds_count" in metrics
    assert 'vxla_compile_cache_total{outcome="hit"}' in metrics
    paths = httpx.get(f"{node.url}/openapi.json").json()["paths"]
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/jobs/{job_id}/trace", "/v1/blobs/{digest}"} <= set(paths)


def test_running_job_redone_after_restart(tmp_path: Path) -> None:
    """A crash mid-job (the store says running, nothing finished) loses nothing: the next
    start requeues the job and it finishes with the trace digest of an uninterrupted run."""
    store = JobStore(tmp_path)
    module = store.blobs.put(MLP.module_text.encode())
    inputs = [store.blobs.put(npy_bytes(a)) for a in MLP.inputs()]
    job = store.add_job(module, inputs)
    claimed = store.claim_next()
    assert claimed is not None and claimed.id == job.id
    store.close()  # the process "dies" here

    assert JobStore(tmp_path).get(job.id).state == QUEUED  # type: ignore[union-attr]
    server = start_node(tmp_path)
    try:
        with Client(server.url) as sdk:
            redone = sdk.job(job.id).wait(timeout=60)
            fresh = sdk.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
            assert redone.info["statement_digest"] == fresh.info["statement_digest"]
            statement = Statement.from_json_bytes(parse_envelope(redone.trace()).payload)
            assert statement.predicate.job_id == job.id
            assert [j.state for j in server.store.jobs()] == [DONE, DONE]
    finally:
        server.stop()


def test_inputs_inline_and_uploaded_give_the_same_execution(node: NodeServer, client: Client) -> None:
    """A job whose inputs come in the request runs as the same job with uploaded inputs:
    the same statement, its inputs stored as the same blobs."""
    inline = _post(node, {"module": MLP.module_text, "input_data": [_base64(a) for a in MLP.inputs()]})
    assert inline.status_code == 201, inline.text
    uploaded = _post(node, {"module": MLP.module_text, "inputs": [_upload(node, a) for a in MLP.inputs()]})
    first, second = (client.job(r.json()["id"]).wait(timeout=60) for r in (inline, uploaded))
    assert first.info["input_digests"] == second.info["input_digests"]
    assert first.info["statement_digest"] == second.info["statement_digest"]
    assert all(node.store.blobs.get(d) == npy_bytes(a) for d, a in zip(first.info["input_digests"], MLP.inputs(), strict=True))


def test_job_by_module_digest(node: NodeServer, client: Client) -> None:
    module = MLP.module_text.encode()
    digest = client.put_blob(module)
    inputs = [client.put_blob(npy_bytes(a)) for a in MLP.inputs()]
    response = _post(node, {"module_digest": digest, "inputs": inputs})
    assert response.status_code == 201, response.text
    job = client.job(response.json()["id"]).wait(timeout=60)
    assert job.info["module_digest"] == digest
    before = snapshot(node)
    unknown = _post(node, {"module_digest": "cd" * 32, "inputs": inputs})
    assert unknown.status_code == 400 and "module_digest" in unknown.json()["detail"]
    assert snapshot(node) == before


def test_wall_time_limit_fails_the_job(tmp_path: Path) -> None:
    server = start_node(tmp_path, Limits(job_wall_seconds=1e-9))
    try:
        with Client(server.url) as sdk:
            job = sdk.submit(MLP.module_text, MLP.inputs())
            with pytest.raises(JobFailed, match="limits.job_wall_seconds"):
                job.wait(timeout=60)
    finally:
        server.stop()


def test_wall_time_limit_stops_a_long_loop_mid_run(tmp_path: Path) -> None:
    """The limit preempts a run (at a while-loop iteration), not only judges it afterwards."""
    trips = 50_000_000  # minutes of loop if it ran to the end; the limit stops it after 2 s
    # The limit covers compiling too: fill the node's compile cache first (with both jobs'
    # programs and the kernel libraries they call), so each run starts well inside the limit
    # even on a loaded machine.
    for fixture in (FORI, MLP):
        compile_program(load_program(fixture.module_text), load_config(), cache_dir=tmp_path / "compile-cache")
    server = start_node(tmp_path, Limits(job_wall_seconds=2.0, max_while_iterations=10**8))
    try:
        with Client(server.url) as sdk:
            arrays = FORI.inputs()
            arrays[3] = np.array(trips, dtype=np.int32)
            job = sdk.submit(FORI.module_text, arrays)
            with pytest.raises(JobFailed, match=r"limits.job_wall_seconds.*in iteration \d+ of while loop") as caught:
                job.wait(timeout=120)
            stopped_at = int(str(caught.value).split("in iteration ")[1].split()[0])
            assert 0 < stopped_at < trips
            # The node goes on serving: a short job right after finishes.
            assert sdk.submit(MLP.module_text, MLP.inputs()).wait(timeout=60).state == "done"
    finally:
        server.stop()


def test_stop_leaves_no_job_running(tmp_path: Path) -> None:
    """Stopping with jobs in flight: each is done or back in the queue, never stuck
    `running`, and the next start finishes them all."""
    server = start_node(tmp_path)
    with Client(server.url) as sdk:
        ids = [sdk.submit(MLP.module_text, MLP.inputs()).id for _ in range(4)]
    server.stop()
    # Read with sqlite3, not JobStore: opening a JobStore would requeue a stuck job itself.
    with sqlite3.connect(tmp_path / "jobs.sqlite3") as db:
        states = dict(db.execute("SELECT id, state FROM jobs").fetchall())
    assert set(states) == set(ids) and set(states.values()) <= {DONE, QUEUED}
    server = start_node(tmp_path)
    try:
        with Client(server.url) as sdk:
            digests = {sdk.job(i).wait(timeout=60).info["statement_digest"] for i in ids}
        assert len(digests) == 1
    finally:
        server.stop()


def test_a_failing_store_does_not_end_a_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store failing (an I/O error, a full disk: injected here) as a worker takes a job or
    records its outcome is logged, and the worker goes on with the next job; a job whose
    outcome could not be recorded (its finish, then its failure, refused) goes back to the
    queue and is done once the store takes writes again: never left running."""
    server = start_node(tmp_path)
    store = server.store
    failures = {"claim_next": 1, "finish": 1, "fail": 1}

    def failing(name: str) -> Any:
        real = getattr(store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            if failures[name]:
                failures[name] -= 1
                raise sqlite3.OperationalError(f"disk I/O error (injected into {name})")
            return real(*args, **kwargs)

        return call

    for name in failures:
        monkeypatch.setattr(store, name, failing(name))
    try:
        with Client(server.url) as sdk:
            lost = sdk.submit(MLP.module_text, MLP.inputs())
            # The first claim failed and the finish and the fail of the first job too.
            deadline = time.monotonic() + 60
            while failures != {"claim_next": 0, "finish": 0, "fail": 0}:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert sdk.submit(MLP.module_text, MLP.inputs()).wait(timeout=60).state == DONE
            assert lost.wait(timeout=60).state == DONE
    finally:
        server.stop()
    assert JobStore(tmp_path).get(lost.id).state == DONE  # type: ignore[union-attr]
