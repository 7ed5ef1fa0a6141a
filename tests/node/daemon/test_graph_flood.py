"""The graphs a node draws for its pages cannot be turned against it (node/daemon/drawing.py),
against a real `vxla node run` with `[auth] required = true`, one drawing at a time and two
waiting: a graph needs a token; a flood of graph requests gets drawings or 503s with
Retry-After while /healthz keeps answering at once; a failed drawing is kept, so asking again
starts no process; the drawing process is confined as an execution process is; and a
request whose client has gone before its turn is dropped, not drawn. And a drawing process
past its wall time or memory is stopped and says so."""

from __future__ import annotations

import re
import shutil
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from attest.digests import sha256_hex
from compiler.api import canonical_names, load_config, load_program, optimized_plan
from harness.fixture_data import Fixture
from node.daemon.auth import TokenStore
from node.daemon.confinement import execution_user
from node.daemon.drawing import DrawingRequest, draw_in_a_process
from node.sdk import Client
from tests.node.cli.test_daemon_cli import start_node, stop_node
from tests.node.daemon.test_execution_confinement import assert_confined, linux

MLP = Fixture("mlp_softmax")
LIMITS = "[auth]\nrequired = true\n\n[limits]\ngraph_drawings = 1\ngraph_queue = 2\n"


@dataclass
class Node:
    url: str
    token: str
    # One client for every request (thread-safe): a client made per request costs the
    # test's own threads more time than the node takes to answer.
    client: httpx.Client

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def upload(self, module: str) -> str:
        data = module.encode()
        digest = sha256_hex(data)
        assert self.client.put(f"{self.url}/v1/blobs/{digest}", content=data, headers=self.auth()).status_code == 201
        return digest

    def graph(self, digest: str, highlight: str | None = None, timeout: float = 120) -> httpx.Response:
        query = {"highlight": highlight} if highlight else {}
        return self.client.get(f"{self.url}/graphs/{digest}.svg", params=query, headers=self.auth(), timeout=timeout)

    def metric(self, name: str) -> float:
        text = self.client.get(f"{self.url}/metrics").text
        match = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
        return float(match.group(1)) if match else 0.0


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    directory = tmp_path_factory.mktemp("graphs")
    url, process = start_node(directory, LIMITS)
    # Its log read all along: a full pipe would stall the node, not the drawing.
    assert process.stderr is not None
    threading.Thread(target=process.stderr.read, daemon=True).start()
    tokens = TokenStore(directory / "data")
    token = tokens.add("pages")
    tokens.close()
    with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=64)) as client:
        yield Node(url, token, client)
    stop_node(process)


def chain(length: int) -> str:
    """A module whose optimized graph has about `length` / 3 entry instructions."""
    lines = ["HloModule chain", "", "ENTRY main {", "  p.0 = f32[4,4]{1,0} parameter(0)", "  p.1 = f32[4,4]{1,0} parameter(1)"]
    previous = "p.0"
    for i in range(length):
        operation = "dot(%s, p.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}" if i % 3 == 0 else "add(%s, p.1)"
        lines.append(f"  v.{i} = f32[4,4]{{1,0}} " + operation % previous)
        previous = f"v.{i}"
    return "\n".join([*lines, f"  ROOT r = f32[4,4]{{1,0}} add({previous}, p.0)", "}", ""])


def entry_names(module: str) -> list[str]:
    optimized, _ = optimized_plan(load_program(module), load_config())
    return list(canonical_names(optimized.entry).values())


def test_a_graph_needs_a_token_and_every_answer_forbids_framing_and_sniffing(node: Node) -> None:
    digest = node.upload(MLP.module_text)
    url = f"{node.url}/graphs/{digest}.svg"
    for headers in ({}, {"Authorization": "Bearer vxla_not-a-token"}):
        refused = node.client.get(url, params={"highlight": "fusion.9"}, headers=headers)
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    assert node.metric("vxla_graph_processes_started_total") == 0
    drawn = node.graph(digest)
    assert drawn.status_code == 200 and b"<svg" in drawn.content
    for answer in (drawn, refused, node.client.get(f"{node.url}/")):
        policy = answer.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "script-src" not in policy
        assert answer.headers["x-content-type-options"] == "nosniff" and answer.headers["x-frame-options"] == "DENY"
    # A job's page stays open (it shows what GET /v1/jobs/{id} and its trace show); without a
    # token it says where the graph is instead of asking for it.
    with Client(node.url, token=node.token) as client:
        job = client.submit(MLP.module_text, MLP.inputs())
        job.wait(timeout=120)
    page = node.client.get(f"{node.url}/jobs/{job.id}")
    assert page.status_code == 200 and "<img" not in page.text and "draws graphs only for requests with a token" in page.text
    assert "<img alt='the optimized graph'" in node.client.get(f"{node.url}/jobs/{job.id}", headers=node.auth()).text


def test_a_flood_of_graphs_gets_drawings_or_503_while_healthz_answers(node: Node) -> None:
    module = chain(150)
    digest = node.upload(module)
    names = entry_names(module)[:40]
    assert len(names) == 40
    latencies: list[float] = []
    flooding = threading.Event()

    def poll_healthz() -> None:
        with httpx.Client(timeout=30) as client:
            while flooding.is_set():
                began = time.monotonic()
                assert client.get(f"{node.url}/healthz").status_code == 200
                latencies.append(time.monotonic() - began)
                time.sleep(0.05)

    flooding.set()
    poller = threading.Thread(target=poll_healthz)
    poller.start()
    try:
        with ThreadPoolExecutor(len(names)) as pool:
            answers = list(pool.map(lambda name: node.graph(digest, name), names))
    finally:
        flooding.clear()
        poller.join()
    statuses = [answer.status_code for answer in answers]
    assert set(statuses) <= {200, 503}, statuses
    assert 1 <= statuses.count(200) <= 3  # one drawing and the two that waited: the rest refused at once
    assert all(answer.headers.get("retry-after") for answer in answers if answer.status_code == 503)
    assert len(latencies) >= 5 and max(latencies) < 1.0, latencies


def test_a_failed_drawing_is_kept_and_not_drawn_again(node: Node) -> None:
    digest = node.upload("HloModule broken\n\nENTRY main {\n  p.0 = f32[4]{0} parameter(0)\n  ROOT r = f32[4]{0} frobnicate(p.0)\n}\n")
    started = node.metric("vxla_graph_processes_started_total")
    first = node.graph(digest)
    assert first.status_code == 422 and "cannot draw the graph" in first.json()["detail"]
    assert node.metric("vxla_graph_processes_started_total") == started + 1
    for highlight in (None, "r", "another"):  # the module cannot be drawn, whatever is highlighted
        began = time.monotonic()
        again = node.graph(digest, highlight)
        assert (again.status_code, again.json()) == (first.status_code, first.json())
        assert time.monotonic() - began < 1.0
    assert node.metric("vxla_graph_processes_started_total") == started + 1


@linux
def test_the_drawing_process_is_confined_as_an_execution_process(node: Node) -> None:
    assert node.graph(node.upload(MLP.module_text)).status_code == 200
    drawing = node.client.get(f"{node.url}/readyz").json()["drawing"]
    assert_confined(drawing)
    assert any(Path(program).name != "ld-linux-x86-64.so.2" for program in drawing["executable"])  # dot, and nothing else


def test_a_request_whose_client_has_gone_is_dropped_before_its_turn(node: Node) -> None:
    module = chain(900)  # about 2 s to draw: long enough for the next client to give up
    digest = node.upload(module)
    first, second = entry_names(module)[2:4]
    started = node.metric("vxla_graph_processes_started_total")
    dropped = node.metric('vxla_graph_requests_total{answer="dropped"}')
    with ThreadPoolExecutor(1) as pool:
        drawing = pool.submit(node.graph, digest, first)
        time.sleep(0.3)  # the first drawing holds the one turn
        with pytest.raises(httpx.TimeoutException):
            node.graph(digest, second, timeout=0.5)  # waits for a turn, then its client goes
        assert drawing.result().status_code == 200
    deadline = time.monotonic() + 30
    while node.metric('vxla_graph_requests_total{answer="dropped"}') == dropped:
        assert time.monotonic() < deadline, "the abandoned request was never dropped"
        time.sleep(0.1)
    assert node.metric("vxla_graph_processes_started_total") == started + 1  # the first only
    assert node.graph(digest, second).status_code == 200  # asked again, and waited for: drawn


def test_a_drawing_past_its_wall_time_or_memory_is_stopped_and_said_so() -> None:
    dot = shutil.which("dot")
    assert dot, "no Graphviz: make system-programs installs it"
    began = time.monotonic()
    slow = draw_in_a_process(DrawingRequest(chain(1200).encode(), None, 3.0, 1 << 30, dot, execution_user()))
    assert time.monotonic() - began < 6
    assert slow.outcome.status == 422 and "limits.graph_wall_seconds (3 s)" in slow.outcome.detail and slow.whole_module
    hungry = draw_in_a_process(DrawingRequest(chain(300).encode(), None, 30.0, 1 << 20, dot, execution_user()))
    assert hungry.outcome.status == 422 and "limits.graph_memory_bytes (1048576)" in hungry.outcome.detail
