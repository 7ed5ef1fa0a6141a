"""The node's web pages in a real browser: Playwright driving Debian's headless Chromium
against real nodes with real jobs. The job list renders with each job's state and why, a
job's page shows its trace's hashes and its graph, the API page lists the operations, a
chain job whose nodes diverged highlights the first differing instruction in its graph, no
request leaves the machine, and the node's Content-Security-Policy refuses nothing the pages
use.

Chromium is Debian's (`apt-get install chromium`; Playwright's own browser download needs a
network): `make test` installs it where it can. Without it these tests fail, saying so: they
never pass or skip silently.
`VXLA_SCREENSHOTS=DIR` saves each page as a PNG there (docs/images holds the ones shown in
docs/web.md).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from attest.keys import generate_private_key
from harness.fixture_data import Fixture
from node.daemon.config import Limits, NodeConfig
from node.daemon.server import NodeServer
from node.sdk import Client, JobFailed
from tests.contracts.test_anvil import anvil  # noqa: F401  (the fixture)
from tests.node.test_e2e_devnet import _visible_fault, devnet, nodes_factory, submit  # noqa: F401  (fixtures)

MLP = Fixture("mlp_softmax")
FORI = Fixture("fori_loop")
CHROMIUM_FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps",
]  # fmt: skip


# The outline colours of each entry instruction's box or fusion cluster in the inline graph,
# by instruction name (Graphviz titles a cluster `cluster_<name>`, an inner node `<fusion>/<op>`).
STROKES_BY_INSTRUCTION = """() => Object.fromEntries(
  [...document.querySelectorAll('.graph svg g.node, .graph svg g.cluster')]
    .map(g => [g.querySelector('title').textContent.replace(/^cluster_/, ''), g])
    .filter(([name]) => !name.includes('/'))
    .map(([name, g]) => [name, [...g.children].filter(e => e.hasAttribute('stroke')).map(e => e.getAttribute('stroke'))]))"""


def chromium_path() -> str:
    """Chromium's path: a missing browser fails these tests, saying so (make test installs it)."""
    found = os.environ.get("VXLA_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("no Chromium on this machine: install Debian's (apt-get install chromium, or make test); the web pages were not tested")
    return found


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    executable = chromium_path()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS, headless=True)
        yield launched
        launched.close()


class Visit:
    """A page of one browser context that records every request it makes and every
    Content-Security-Policy violation the browser reports."""

    def __init__(self, browser, base: str) -> None:  # noqa: ANN001
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.page = self.context.new_page()
        self.base = base
        self.requests: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.refused: list[str] = []
        self.page.on("console", lambda message: self.refused.append(message.text) if "Content Security Policy" in message.text else None)

    def go(self, path: str):  # noqa: ANN201
        response = self.page.goto(self.base + path)
        assert response is not None and response.ok, (path, response and response.status)
        self.page.wait_for_load_state("networkidle")
        return self.page

    def shot(self, name: str) -> None:
        directory = os.environ.get("VXLA_SCREENSHOTS")
        if directory:
            Path(directory).mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(Path(directory) / f"{name}.png"), full_page=True)

    def close(self) -> None:
        strangers = [url for url in self.requests if not url.startswith(self.base + "/")]
        self.context.close()
        assert strangers == [], f"requests that left the node: {strangers}"
        assert self.refused == [], f"what the node's Content-Security-Policy refused: {self.refused}"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeServer]:
    limits = Limits(max_while_iterations=2)  # fori_loop runs longer: a failed job with a reason
    server = NodeServer(NodeConfig(port=0, data_dir=tmp_path_factory.mktemp("node"), limits=limits), generate_private_key(), log_level="warning")
    server.start_in_thread()
    yield server
    server.stop()


def test_the_job_list_a_jobs_trace_and_the_api_page(browser, node: NodeServer) -> None:  # noqa: ANN001
    client = Client(node.url)
    done = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    with pytest.raises(JobFailed):
        client.submit(FORI.module_text, FORI.inputs()).wait(timeout=60)
    [failed] = client.jobs("failed")
    visit = Visit(browser, node.url)
    page = visit.go("/")
    assert page.title() == "vxla node"
    done_row = page.locator("tr", has=page.locator(f"a[href='/jobs/{done.id}']"))
    assert done_row.locator(".state").inner_text() == "done"
    failed_row = page.locator("tr", has=page.locator(f"a[href='/jobs/{failed['id']}']"))
    assert failed_row.locator(".state").inner_text() == "failed"
    assert "past the limit of 2 iterations" in failed_row.inner_text()
    visit.shot("jobs")

    page.click(f"a[href='/jobs/{done.id}']")
    page.wait_for_load_state("networkidle")
    statement = done.verify(execute=False).statement
    assert statement is not None
    execution = statement.predicate.deterministic
    text = page.locator("body").inner_text()
    for digest in (execution.program.hlo_hash, execution.graph_hash, execution.binary_hash, *(o.digest for o in execution.outputs)):
        assert digest in text
    assert statement.predicate.key_id in text  # the signature's key id
    graph = page.locator("img[alt='the optimized graph']")
    graph.scroll_into_view_if_needed()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=graph.element_handle(), timeout=60_000)
    visit.shot("job")

    page = visit.go("/docs")
    assert page.locator("td code", has_text="/v1/jobs/{job_id}/trace").count() == 1
    visit.close()


def test_a_divergent_chain_job_highlights_its_first_differing_instruction(browser, devnet, nodes_factory) -> None:  # noqa: ANN001, F811
    fault = _visible_fault()
    servers = nodes_factory({2: fault})
    _, job = submit(devnet, servers[0])
    job.wait(timeout=60, poll_seconds=0.2)
    honest = servers[0]
    assert honest.chain is not None
    deadline = time.monotonic() + 30
    while not (report := honest.chain.monitor.report(devnet.deployment.market.address, int(job.id))) or not report.divergences:
        assert time.monotonic() < deadline, "no divergence report"
        time.sleep(0.2)
    visit = Visit(browser, honest.url)
    page = visit.go(f"/chain/jobs/{job.id}")
    section = page.locator("body").inner_text()
    assert "first differing instruction" in section and fault.instruction in section
    assert page.locator("mark.divergent").inner_text() == fault.instruction
    [divergence] = report.divergences
    assert divergence.our_digest in section and divergence.their_digest in section
    # The graph: the instruction (a fusion's cluster, or an instruction's box) drawn in red,
    # and no other instruction.
    strokes = page.evaluate(STROKES_BY_INSTRUCTION)
    assert "#cc0000" in strokes[fault.instruction], strokes.get(fault.instruction)
    assert [name for name, colours in strokes.items() if "#cc0000" in colours] == [fault.instruction]
    assert page.locator("tr", has_text="path in the graph").locator("mark").inner_text() == fault.instruction
    assert page.locator("tr", has_text="committed").count() >= 1
    # The dispute game's side: the challenge deadline, and each slot's op-trace root and refutation.
    assert "challenges until" in section and "0 dispute(s) open" in section
    assert page.locator("th", has_text="op-trace root").count() == 1 and page.locator("th", has_text="refuted").count() == 1
    visit.shot("chain-job-divergence")
    visit.close()
