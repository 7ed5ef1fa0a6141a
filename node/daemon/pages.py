"""The node's web pages: plain HTML rendered here, with nothing loaded from elsewhere (the
machine may be offline, and a verifier's page must not call out).

- `/`: the node's jobs and the chain jobs it has seen, each with its state and why;
- `/jobs/{id}`: a job and its signed trace: program, compiler identity, hashes, inputs,
  outputs, signatures, and the optimized graph (`/graphs/{module digest}.svg`, which takes
  `?highlight=NAME`);
- `/chain/jobs/{id}`: a chain job's phases and each node's commitment and reveal, and the
  divergence view: for each node whose result differs, the first differing instruction,
  both digests, the path to it in the graph and the graph with it highlighted;
- `/docs`: the API's operations, from its OpenAPI schema (instead of a page whose scripts
  come from a CDN).

Graphs are drawn by `vxla graph` in a child process with its CPU time and memory capped (a
module is never compiled in the daemon's own process, see node/daemon/worker.py), one at a
time, and kept for the pages that show them again.
"""

from __future__ import annotations

import html
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Response
from fastapi.responses import HTMLResponse

from attest import Statement
from node.chain.contracts import Phase
from node.daemon.chain_role import ChainRole
from node.daemon.store import STATES, JobStore, StoredJob
from node.protocol import is_digest
from node.tracing.verify import parse_envelope

PAGE_JOBS = 100  # jobs listed on the front page, newest first
GRAPH_SECONDS = 120  # the most a graph may take to draw (wall clock, and CPU seconds)
GRAPH_MEMORY_BYTES = 4 << 30  # the address space a drawing process may have
GRAPHS_KEPT = 32

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: .2em .8em .2em 0; text-align: left; vertical-align: top; }
th { color: #555; font-weight: 600; } code, .digest { font: 12px ui-monospace, monospace; word-break: break-all; }
.state { font-weight: 600; } .done, .accepted { color: #1a7f37; } .failed, .expired, .diverged { color: #c00; }
.skipped, .queued, .running, .open { color: #9a6700; } nav a { margin-right: 1em; }
mark { background: #fdd; color: #c00; font-weight: 600; } .graph svg { max-width: 100%; height: auto; }
.note { color: #555; }
"""


def pages_routes(store: JobStore, chain: ChainRole | None, signer_id: str, openapi: Callable[[], dict[str, Any]]) -> APIRouter:
    router = APIRouter(include_in_schema=False)
    graphs = _Graphs(store)

    @router.get("/", response_class=HTMLResponse)
    def front(state: str | None = None) -> HTMLResponse:
        if state is not None and state not in STATES:
            raise HTTPException(400, f"state {state!r}: one of {', '.join(STATES)}")
        jobs = store.recent_jobs(PAGE_JOBS, state)
        filters = " ".join(f'<a href="/?state={s}">{s}</a>' for s in STATES)
        body = [f"<p class=note>Signing key id <code>{_e(signer_id)}</code>. Newest first; show only: {filters} <a href='/'>all</a></p>"]
        body.append("<h2>Jobs</h2>" + (_jobs_table(jobs) if jobs else "<p>No jobs yet.</p>"))
        if chain is not None:
            tracked = chain.executor.state.recent_jobs(PAGE_JOBS)
            rows = [[f'<a href="/chain/jobs/{t.job_id}">{t.job_id}</a>', _state(t.state.value), str(t.k), _e(t.note)] for t in tracked]
            body.append("<h2>Chain jobs</h2>" + (_table(["job", "this node", "k", "why"], rows) if rows else "<p>No chain jobs seen yet.</p>"))
        running = any(job.state in ("queued", "running") for job in jobs)
        # The one script: while a job is still queued or running, look again in 3 s.
        script = "<script>setTimeout(() => location.reload(), 3000)</script>" if running else ""
        return _page("vxla node", "".join(body) + script)

    @router.get("/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(job_id: str) -> HTMLResponse:
        job = store.get(job_id)
        if job is None:
            raise HTTPException(404, f"job {job_id}: unknown")
        rows = [["state", _state(job.state)], ["queued", _when(job.created_at)]]
        if job.state in ("done", "failed"):
            rows.append(["took", f"{job.updated_at - job.created_at:.3f} s"])
        if job.error:
            rows.append(["why", _e(job.error)])
        rows.append(["module", _digest(job.module_digest)])
        body = [_table([], rows)]
        if job.envelope_digest is not None:
            body.append(_trace_sections(store.blobs.get(job.envelope_digest)))
            body.append(f"<h2>Optimized graph</h2><p class=graph><img alt='the optimized graph' src='/graphs/{_e(job.module_digest)}.svg'></p>")
        return _page(f"Job {job.id}", "".join(body))

    @router.get("/graphs/{module_digest}.svg")
    def graph(module_digest: str, highlight: str | None = None) -> Response:
        if not is_digest(module_digest) or not store.blobs.has(module_digest):
            raise HTTPException(404, f"module {module_digest}: not stored on this node")
        svg, _ = graphs.draw(module_digest, highlight)
        return Response(svg, media_type="image/svg+xml")

    @router.get("/chain/jobs/{job_id}", response_class=HTMLResponse)
    def chain_job_page(job_id: int) -> HTMLResponse:
        if chain is None:
            raise HTTPException(404, "this node follows no chain")
        try:
            if not 1 <= job_id <= chain.market.job_count():
                raise HTTPException(404, f"chain job {job_id}: unknown")
            job = chain.market.get_job(job_id)
            slots = chain.market.get_slots(job_id)
            now = chain.client.next_block_time()
        except HTTPException:
            raise
        except Exception as exc:  # the RPC's trouble, said as such
            raise HTTPException(503, f"this node cannot reach its chain RPC now ({type(exc).__name__}); try again") from exc
        tracked = chain.executor.state.job(job_id)
        record = chain.executor.record(chain.market.address, job_id)
        phase = _state(job.phase.name.lower())
        if job.phase == Phase.FINALIZED:
            phase += ", " + (_state("accepted") if job.accepted else _state("failed") + " (no majority)")
        rows = [
            ["phase", phase],
            ["slots", f"{job.claimed} claimed, {job.committed} committed, {job.revealed} revealed of {job.k}"],
            ["commit until", _relative(job.commit_deadline, now)],
            ["reveal until", _relative(job.reveal_deadline, now)],
        ]
        if tracked is not None:
            rows.append(["this node", _state(tracked.state.value) + (f" <span class=note>{_e(tracked.note)}</span>" if tracked.note else "")])
        if job.accepted:
            rows.append(["result", _digest(job.result.hex())])
        body = [_table([], rows), "<h2>Commitments</h2>"]
        slot_rows = [
            [_e(s.node), "yes" if s.committed else "no", "yes" if s.revealed else "no",
             _digest(s.result_digest.hex()) if s.revealed else "", _digest(s.envelope_digest.hex()) if s.revealed else ""]
            for s in slots
        ]  # fmt: skip
        body.append(_table(["node", "committed", "revealed", "result", "trace"], slot_rows) if slot_rows else "<p>No slot claimed yet.</p>")
        report = chain.monitor.report(chain.market.address, job_id)
        if report is not None and report.divergences:
            module_digest = record.module_digest if record is not None else None
            body.append("<h2>Divergence</h2>")
            for divergence in report.divergences:
                body.append(_divergence_section(divergence, module_digest, graphs))
        elif record is not None:
            body.append("<h2>Divergence</h2><p>No node's result differs from this node's (so far).</p>")
        return _page(f"Chain job {job_id}", "".join(body))

    @router.get("/docs", response_class=HTMLResponse)
    def docs() -> HTMLResponse:
        schema = openapi()
        rows = []
        for path, operations in sorted(schema.get("paths", {}).items()):
            for method, operation in operations.items():
                text = operation.get("description") or operation.get("summary") or ""
                rows.append([f"<code>{_e(method.upper())}</code>", f"<code>{_e(path)}</code>", _e(text)])
        body = "<p>The schema itself: <a href='/openapi.json'>/openapi.json</a>.</p>" + _table(["method", "path", "what"], rows)
        return _page(f"{_e(schema.get('info', {}).get('title', 'API'))} API", body)

    return router


class _Graphs:
    """Graphs drawn by `vxla graph` in a child process, the last few kept."""

    def __init__(self, store: JobStore) -> None:
        self._store = store
        self._kept: OrderedDict[tuple[str, str | None], tuple[bytes, tuple[str, ...]]] = OrderedDict()
        self._lock = threading.Lock()
        self._drawing = threading.Lock()

    def draw(self, module_digest: str, highlight: str | None) -> tuple[bytes, tuple[str, ...]]:
        """(SVG, the path to `highlight` from a parameter) of the module stored under
        `module_digest`; 422 when it cannot be drawn (the reason said), 503 when it takes
        too long or Graphviz is missing."""
        key = (module_digest, highlight)
        with self._lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        with self._drawing:  # one drawing at a time: pages never take the node's cores
            drawn = self._draw(self._store.blobs.get(module_digest), highlight)
        with self._lock:
            self._kept[key] = drawn
            while len(self._kept) > GRAPHS_KEPT:
                self._kept.popitem(last=False)
        return drawn

    def _draw(self, module: bytes, highlight: str | None) -> tuple[bytes, tuple[str, ...]]:
        with tempfile.TemporaryDirectory(prefix="vxla-graph-") as directory:
            source, svg = Path(directory) / "module.hlo", Path(directory) / "graph.svg"
            source.write_bytes(module)
            argv = [sys.executable, "-c", DRAW, str(source), "--svg", str(svg)]
            if highlight:
                argv += ["--highlight", highlight]
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=GRAPH_SECONDS, check=False)
            except subprocess.TimeoutExpired:
                raise HTTPException(503, f"the graph took over {GRAPH_SECONDS} s to draw") from None
            if done.returncode != 0:
                reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit status {done.returncode}"
                status = 503 if "Graphviz" in reason else 422
                raise HTTPException(status, f"cannot draw the graph: {reason}")
            path = next((line.split(None, 1)[1] for line in done.stdout.splitlines() if line.startswith("path ")), "")
            return svg.read_bytes(), tuple(p.strip() for p in path.split("->") if p.strip())


# The drawing process caps its own CPU time and address space before it starts `vxla graph`,
# so a module that compiles slowly or hugely costs the node a bounded share (set in the child
# itself: a pre-exec hook is unsafe in the node's threaded process).
DRAW = (
    "import resource, sys\n"
    f"resource.setrlimit(resource.RLIMIT_CPU, ({GRAPH_SECONDS}, {GRAPH_SECONDS}))\n"
    f"resource.setrlimit(resource.RLIMIT_AS, ({GRAPH_MEMORY_BYTES}, {GRAPH_MEMORY_BYTES}))\n"
    "from node.cli import main\n"
    "sys.exit(main(['graph', *sys.argv[1:]]))\n"
)


def _divergence_section(divergence: Any, module_digest: str | None, graphs: _Graphs) -> str:  # noqa: ANN401 - a NodeDivergence
    rows = [
        ["node", f"{_e(divergence.node)} <span class=note>{_e(divergence.endpoint)}</span>"],
        ["its result", _digest(divergence.their_result)],
        ["this node's", _digest(divergence.our_result)],
        ["summary", _e(divergence.summary)],
    ]
    name = divergence.instruction_name
    if name is None:
        return _table([], rows)
    rows += [
        ["first differing instruction", f"<mark class=divergent>{_e(name)}</mark> ({_e(divergence.instruction_opcode or '')}), schedule position {divergence.instruction_index}"],
        ["its digest there", _digest(divergence.their_digest or "absent")],
        ["this node's digest", _digest(divergence.our_digest or "absent")],
    ]
    picture = ""
    if module_digest is not None:
        try:
            svg, path = graphs.draw(module_digest, name)
            steps = [f"<mark>{_e(step)}</mark>" if step == name else _e(step) for step in path]
            rows.append(["path in the graph", " &rarr; ".join(steps)])
            full = f"/graphs/{_e(module_digest)}.svg?highlight={_e(name)}"
            picture = f"<div class=graph>{_inline_svg(svg)}</div><p><a href='{full}'>The graph at full size</a></p>"
        except HTTPException as exc:
            rows.append(["graph", _e(str(exc.detail))])
    return _table([], rows) + picture


def _trace_sections(envelope_bytes: bytes) -> str:
    envelope = parse_envelope(envelope_bytes)
    statement = Statement.from_json_bytes(envelope.payload)
    predicate = statement.predicate
    execution = predicate.deterministic
    compiler = execution.compiler
    target = compiler.target
    parts = ["<h2>Program</h2>", _table([], [
        ["hlo_hash", _digest(execution.program.hlo_hash)],
        ["source_hash", _digest(execution.program.source_hash)],
        ["job", _e(predicate.job_id)],
    ])]  # fmt: skip
    identity = [
        ["vxla", _e(compiler.vxla_version)], ["numerics contract", _e(compiler.numerics_contract)],
        ["pipeline", _digest(compiler.pipeline_id)], ["target", _e(f"{target.triple} cpu={target.cpu} features={target.features or '-'}")],
        ["LLVM", _e(f"{compiler.llvm_version} (llvmlite {compiler.llvmlite_version}), -O{compiler.opt_level}")],
    ]  # fmt: skip
    if compiler.nvjitlink_version:
        identity.append(["nvJitLink", _e(compiler.nvjitlink_version)])
    parts += ["<h2>Compiler identity</h2>", _table([], identity)]
    hashes = [["graph_hash", _digest(execution.graph_hash)], ["binary_hash", _digest(execution.binary_hash)]]
    if execution.op_trace is not None:
        hashes.append(["op-level root", _digest(execution.op_trace.merkle_root) + f" <span class=note>({len(execution.op_trace.instructions)} instructions)</span>"])
    parts += ["<h2>Hashes</h2>", _table([], hashes)]
    for title, records in (("Inputs", execution.inputs), ("Outputs", execution.outputs)):
        rows = [[_e(r.name), _e(f"{r.dtype}{list(r.shape)}"), _digest(r.digest)] for r in records]
        parts += [f"<h2>{title}</h2>", _table(["name", "type", "digest"], rows) if rows else "<p>None.</p>"]
    signatures = [[_digest(s.keyid), _digest(s.sig.hex() if isinstance(s.sig, bytes) else str(s.sig))] for s in envelope.signatures]
    parts += ["<h2>Signatures</h2>", _table(["key id", "Ed25519 signature"], signatures)]
    run = predicate.run
    host = run.host
    if host is not None:
        machine = f"{host.arch}, {host.cpu_model}" + (f", GPU {host.gpu.name} ({host.gpu.compute_capability})" if host.gpu else "")
        parts += ["<h2>Run</h2>", _table([], [["machine", _e(machine)], ["threads", str(run.threads)]])]
    parts.append(f"<details><summary>The statement (JSON)</summary><pre><code>{_e(json.dumps(statement.to_dict(), indent=1))}</code></pre></details>")
    return "".join(parts)


def _jobs_table(jobs: Iterable[StoredJob]) -> str:
    rows = []
    for job in jobs:
        took = f"{job.updated_at - job.created_at:.3f} s" if job.state in ("done", "failed") else ""
        rows.append([f'<a href="/jobs/{_e(job.id)}"><code>{_e(job.id)}</code></a>', _state(job.state), _when(job.created_at), took, _e(job.error or "")])
    return _table(["job", "state", "queued", "took", "why"], rows)


def _page(title: str, body: str) -> HTMLResponse:
    document = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
        f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{STYLE}</style></head>"
        f"<body><nav><a href='/'>Jobs</a><a href='/docs'>API</a><a href='/metrics'>Metrics</a></nav>"
        f"<h1>{_e(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(document)


def _table(columns: list[str], rows: list[list[str]]) -> str:
    """A table of HTML cells: with `columns`, a header row; without, a key/value table whose
    first cell in each row is its heading."""
    head = "<tr>" + "".join(f"<th>{_e(c)}</th>" for c in columns) + "</tr>" if columns else ""
    lines = []
    for row in rows:
        cells = [f"<th>{cell}</th>" if not columns and i == 0 else f"<td>{cell}</td>" for i, cell in enumerate(row)]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table>{head}{''.join(lines)}</table>"


def _inline_svg(svg: bytes) -> str:
    """The SVG document as an element of the page (its XML prolog and doctype left out)."""
    text = svg.decode("utf-8", errors="replace")
    return text[text.index("<svg") :] if "<svg" in text else ""


def _state(state: str) -> str:
    return f"<span class='state {_e(state)}'>{_e(state)}</span>"


def _digest(digest: str) -> str:
    return f"<span class=digest>{_e(digest)}</span>"


def _when(seconds: float) -> str:
    return _e(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds)))


def _relative(deadline: int, now: int) -> str:
    return f"{deadline} (in {deadline - now} s)" if deadline > now else f"{deadline} ({now - deadline} s ago)"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
