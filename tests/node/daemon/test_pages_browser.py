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

import io
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import expect

from attest.keys import generate_private_key
from compiler.config import load_config
from compiler.driver import optimized_plan
from compiler.hlo.printer import canonical_names
from compiler.program import load_program
from harness.fixture_data import Fixture
from harness.hlo_fragments import layered_module
from node.daemon.config import Limits, NodeConfig
from node.daemon.server import NodeServer
from node.graphs import scope_of
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


def test_a_job_page_links_its_bytes_previews_and_serves_its_outputs_and_says_times_as_people_do(browser, node: NodeServer) -> None:  # noqa: ANN001
    client = Client(node.url)
    job = client.submit(MLP.module_text, MLP.inputs()).wait(timeout=60)
    outputs = job.outputs()
    visit = Visit(browser, node.url)
    page = visit.go(f"/jobs/{job.id}")
    # Times as people say them, the exact UTC time on hover; a finished job does not reload.
    queued = page.locator("tr", has=page.locator("th", has_text="queued")).locator("time")
    assert re.fullmatch(r"(just now|[0-9.]+ (s|min) ago)", queued.inner_text()), queued.inner_text()
    assert queued.get_attribute("title").endswith(" UTC")
    assert "took " in page.locator("tr", has=page.locator("th", has_text="finished")).inner_text()
    assert page.locator("meta[http-equiv=refresh]").count() == 0
    # Every digest of bytes links to them: the module, the inputs, the trace.
    info = job.info
    module_link = page.locator(f"a[href='/v1/blobs/{info['module_digest']}']")
    assert page.request.get(visit.base + module_link.get_attribute("href")).body() == MLP.module_text.encode()
    for number, digest in enumerate(info["input_digests"]):
        data = page.request.get(f"{visit.base}/v1/blobs/{digest}").body()
        assert page.locator(f"a[href='/v1/blobs/{digest}']").count() == 1
        np.testing.assert_array_equal(np.load(io.BytesIO(data)), MLP.inputs()[number])
    trace = page.request.get(visit.base + page.locator("a", has_text="the signed trace").get_attribute("href"))
    assert trace.ok and trace.body() == job.trace().encode()
    # Each output: its first values, read from the stored bytes, and a download of them.
    rows = page.locator("h2:text-is('Outputs') + table tr")
    for number, array in enumerate(outputs):
        row = rows.nth(number + 1)
        first = [f"{float(v):.6g}" for v in array.reshape(-1)[:8]]
        assert row.locator("pre.preview").inner_text().startswith("[" + ", ".join(first)), (row.inner_text(), first)
        with page.expect_download() as download:
            row.locator("a", has_text="download .npy").click()
        saved = download.value
        assert saved.suggested_filename == f"{job.id}-out{number}.npy"
        np.testing.assert_array_equal(np.load(saved.path()), array)
    visit.shot("job-outputs")
    # Unknown things are pages that say so, not the API's JSON.
    for path, words in ((f"/jobs/{'0' * 32}", "No job"), ("/market", "No market"), ("/chain/jobs/7", "No chain job 7")):
        response = page.goto(visit.base + path)
        assert response is not None and response.status == 404 and response.headers["content-type"].startswith("text/html")
        assert page.locator("h1").inner_text().startswith(words)
    visit.close()


def test_a_running_job_s_page_updates_itself_until_it_is_done(browser, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    # This node finds no Graphviz (as on a machine without it): its page says so in place of a picture.
    monkeypatch.setattr("node.daemon.drawing.shutil.which", lambda program: None)
    server = NodeServer(NodeConfig(port=0, data_dir=tmp_path / "node"), generate_private_key(), log_level="warning")
    start_workers = server.pool.start
    server.pool.start = lambda: None  # the job stays queued until the workers start below
    server.start_in_thread()
    try:
        job = Client(server.url).submit(MLP.module_text, MLP.inputs())
        visit = Visit(browser, server.url)
        page = visit.go(f"/jobs/{job.id}")
        assert page.locator("tr", has_text="state").locator(".state").inner_text() == "queued"
        assert page.locator("meta[http-equiv=refresh]").count() == 1
        assert "reloads until it is done" in page.locator("body").inner_text()
        start_workers()
        # No navigation by the test: the page reloads itself and shows the job done, and its trace.
        expect(page.locator("tr", has_text="state").locator(".state")).to_have_text("done", timeout=90_000)
        expect(page.locator("h2", has_text="Outputs")).to_have_count(1)
        assert page.locator("meta[http-equiv=refresh]").count() == 0
        assert page.locator("img[alt='the optimized graph']").count() == 0
        assert "No picture: this node cannot draw graphs: Graphviz's dot program is not installed" in page.locator("body").inner_text()
        visit.close()
    finally:
        server.stop()


BIG = Fixture("remat_transformer_train_step")  # 853 instructions, as JAX emits a training step


def test_the_graph_viewer_pans_zooms_and_finds_instructions_of_a_large_graph(browser, node: NodeServer) -> None:  # noqa: ANN001
    digest = Client(node.url).put_blob(BIG.module_text.encode())
    visit = Visit(browser, node.url)
    page = visit.go(f"/graphs/{digest}")
    viewer = page.locator("#viewer[data-ready=yes]")  # the script ran: the page's policy allows it
    expect(viewer).to_have_count(1, timeout=60_000)
    svg = viewer.locator("svg")
    whole = svg.get_attribute("viewBox")
    # Coloured by op family: the legend names the families, and the matrix products share a fill.
    legend = page.locator("#viewer svg > g.graph > text").all_text_contents()
    assert "dot conv" in legend and "elementwise" in legend, legend
    dot_fills = set(page.locator("#viewer g.node:has(text:text-is('dot')) path").evaluate_all("ps => ps.map(p => p.getAttribute('fill'))"))
    assert len(dot_fills) == 1, dot_fills
    # Zoom with the wheel and the buttons, pan by dragging: the view changes, fit restores it.
    box = svg.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -400)
    zoomed = svg.get_attribute("viewBox")
    assert _width(zoomed) < _width(whole)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] / 2 + 120, box["y"] + box["height"] / 2 + 80)
    page.mouse.up()
    panned = svg.get_attribute("viewBox")
    assert _width(panned) == _width(zoomed) and panned.split()[:2] != zoomed.split()[:2]
    page.click("#zoom-fit")
    assert svg.get_attribute("viewBox") == whole
    visit.shot("graph-viewer-large")
    # Search: every instruction whose name, opcode or shape matches is outlined; Enter goes to each.
    page.fill("#find", "dot")
    found = page.locator("#viewer g.found")
    assert found.count() >= 10, found.count()
    assert page.locator("#found").inner_text().startswith(f"{found.count()} found")
    page.press("#find", "Enter")
    assert page.locator("#found").inner_text().startswith(f"1 of {found.count()}: ")
    assert _width(svg.get_attribute("viewBox")) < _width(whole)
    visit.shot("graph-viewer-search")
    page.fill("#find", "no-such-instruction")
    assert page.locator("#viewer g.found").count() == 0 and page.locator("#found").inner_text() == "0 found"
    visit.close()


def test_the_viewer_draws_a_model_s_layers_as_one_box_each(browser, node: NodeServer) -> None:  # noqa: ANN001
    digest = Client(node.url).put_blob(layered_module(6).encode())
    visit = Visit(browser, node.url)
    page = visit.go(f"/graphs/{digest}")
    expect(page.locator("#viewer[data-ready=yes]")).to_have_count(1, timeout=60_000)
    grouping = page.locator("#grouping")
    assert grouping.locator("strong").inner_text() == "none"
    ungrouped = page.locator("#viewer g.node").count()
    grouping.locator("a", has_text="depth 3").click()
    page.wait_for_load_state("networkidle")
    expect(page.locator("#viewer[data-ready=yes]")).to_have_count(1, timeout=60_000)
    assert page.locator("#grouping strong").inner_text().startswith("depth 3")
    boxes = page.locator("#viewer g.node title").all_text_contents()
    assert [b for b in boxes if b.startswith("scope ")] == [f"scope jit(apply)/Model/block_{n}" for n in range(6)], boxes
    assert page.locator("#viewer g.node").count() < ungrouped
    # Search finds a layer's box by its scope (and its weights, by their pytree path).
    page.fill("#find", "block_4")
    found = page.locator("#viewer g.found > title").all_text_contents()
    assert "scope jit(apply)/Model/block_4" in found and len(found) == 2, found
    visit.shot("graph-viewer-layers")
    # Highlighted, an instruction is named in the user's code, and its layer's box is red.
    program = load_program(layered_module(6))
    module, _ = optimized_plan(program, load_config())
    names = canonical_names(module.entry)
    [name, *_] = [names[id(i)] for i in module.entry.instructions if scope_of(i)[:3] == ("jit(apply)", "Model", "block_4")]
    page = visit.go(f"/graphs/{digest}?depth=3&highlight={name}")
    expect(page.locator("#viewer[data-ready=yes]")).to_have_count(1, timeout=60_000)
    assert re.search(rf"{re.escape(name)} is jit\(apply\)/Model/block_4/\S+ at model\.py:14 in your code", page.locator("body").inner_text())
    visit.close()


def _width(view_box: str) -> float:
    return float(view_box.split()[2])


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
    # Deadlines as people say them, and links to this node's own run of the job.
    assert page.locator("tr", has=page.locator("th", has_text="challenges until")).locator("time").count() == 1
    run = page.locator("tr", has=page.locator("th", has_text="this node's run"))
    record = honest.chain.executor.record(devnet.deployment.market.address, int(job.id))
    assert record is not None and run.locator(f"a[href='/v1/blobs/{record.module_digest}']").count() == 1
    assert page.request.get(honest.url + f"/v1/chain/jobs/{job.id}/trace").ok
    # Its inputs, described as a local job's are (by parameter, with their type), and linked.
    described = job.inputs()
    assert [d["digest"] for d in described] == record.input_digests and all(re.fullmatch(r"\w+\[[0-9,]*\]", d["type"]) for d in described), described
    for item in described:
        assert run.locator(f"a[href='/v1/blobs/{item['digest']}']", has_text=item["name"]).count() == 1
    # The instruction links to the graph viewer at it.
    assert page.locator("a:has(mark.divergent)").get_attribute("href") == f"/graphs/{record.module_digest}?highlight={fault.instruction}"
    visit.shot("chain-job-divergence")
    # The market: every registered node with its stake and its slot in this job.
    page = visit.go("/market")
    nodes = page.locator("h2:text-is('Nodes') + table tr")
    registry = devnet.deployment.registry
    assert nodes.count() == 1 + registry.node_count() >= 1 + len(servers)
    for server in servers:
        assert server.chain is not None
        row = nodes.filter(has=page.locator("code", has_text=server.chain.address))
        stake = registry.get_node(server.chain.address).stake
        assert f"{stake / 10**18:.4g} ETH" in row.inner_text() and "1 claimed" in row.inner_text(), row.inner_text()
    assert "this node" in nodes.filter(has=page.locator("code", has_text=honest.chain.address)).inner_text()
    assert page.locator(f"a[href='/chain/jobs/{job.id}']").count() == 1
    visit.shot("market")
    visit.close()
