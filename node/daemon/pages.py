"""The node's web pages: plain HTML rendered here, with nothing loaded from elsewhere (the
machine may be offline, and a verifier's page must not call out). They are a live view:
a page whose job may still change reloads itself (a meta refresh: no script), times are
said as people say them ("finalized 2 min ago", the exact time on hover), and every digest
links to what it names.

- `/`: the node's jobs and the chain jobs it has seen, each with its state and why;
- `/jobs/{id}`: a job and its signed trace: program, compiler identity, hashes, inputs (with
  their bytes), outputs (shape, type, the first values, a download), signatures, and the
  optimized graph;
- `/jobs/{id}/outputs/{n}.npy`: output `n` as a file to download;
- `/graphs/{module digest}`: the graph viewer (node/daemon/graph_viewer.py: pan, zoom,
  search, grouping by the user's layers), `/graphs/{module digest}.svg` the picture alone;
  both take `?highlight=NAME` and `?depth=N` (node.graphs.graph_picture);
- `/chain/jobs/{id}`: a chain job's phases and each node's commitment and reveal, its
  disputes (challenger and defender, stage, bisection rounds, the instruction reached, who
  moves next and by when, the verdict and winner), and the divergence view: for each node whose result differs, the first differing instruction,
  both digests, the path to it in the graph and the graph with it highlighted;
- `/market`: the market this node follows: every registered node's stake, its slots in the
  recent jobs and its slashes, and the recent jobs;
- `/docs`: the API's operations, from its OpenAPI schema (instead of a page whose scripts
  come from a CDN).
An unknown job is a page that says so (404), not the API's JSON.

Graphs are drawn in confined, bounded child processes, a few at a time, and every outcome is
kept (node/daemon/drawing.py). Drawing is computing: with `[auth] required = true` a graph is
drawn only for a request with a token (the intake checks `/graphs/...` as it checks the API's
routes that compute), and a page fetched without one shows a note in place of the graph. The
pages themselves show what the API's reads show, and are open as those are.

Every answer carries a strict Content-Security-Policy (`SecurityHeaders`): no script, no
frame, nothing from elsewhere; the one style sheet is allowed by its hash. The graph viewer
alone also runs its own inline script, allowed by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any
from urllib.parse import urlencode

import anyio.from_thread
import numpy as np
from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse

from attest import Statement
from node.chain.contracts import OnChainJob, Phase
from node.chain.events import fetch_events
from node.daemon.auth import Gate, Refused
from node.daemon.chain_role import ChainRole
from node.daemon.drawing import Drawings, Outcome
from node.daemon.graph_viewer import viewer_body, viewer_policy
from node.daemon.page_parts import (
    badge,
    blob,
    code,
    digest,
    duration,
    e,
    note,
    relative,
    table,
    utc,
    when,
)
from node.daemon.store import STATES, JobStore, StoredJob
from node.protocol import is_digest
from node.tensors import recorded_array
from node.tracing.verify import parse_envelope

PAGE_JOBS = 100  # jobs listed on the front page, newest first
RELOAD_S = 3  # how often a page reloads while what it shows may still change
MARKET_JOBS = 50  # the market page's recent jobs (each costs two reads of the chain)
MARKET_LOG_BLOCKS = 100_000  # how far back the market page looks for slashes
PREVIEW_VALUES = 8  # an output's first values shown on its job's page
PREVIEW_BYTES = 16 * 1024 * 1024  # outputs larger than this are not read for a preview

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; padding: 0 1em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .5em 0; } td, th { padding: .2em .8em .2em 0; text-align: left; vertical-align: top; }
th { color: #555; font-weight: 600; } code, .digest { font: 12px ui-monospace, monospace; word-break: break-all; }
.state { font-weight: 600; } .done, .accepted, .finalized { color: #1a7f37; } .failed, .expired, .diverged, .refuted { color: #c00; }
.skipped, .queued, .running, .open { color: #9a6700; } nav a { margin-right: 1em; }
mark { background: #fdd; color: #c00; font-weight: 600; } .graph svg { max-width: 100%; height: auto; }
.note { color: #555; } time { border-bottom: 1px dotted #999; } .live { color: #9a6700; }
pre.preview { margin: 0; font: 12px ui-monospace, monospace; white-space: pre-wrap; }
.viewer { border: 1px solid #ccc; } .viewer svg { display: block; width: 100%; height: 75vh; cursor: grab; touch-action: none; }
.viewer g.found path, .viewer g.found polygon, .viewer g.found ellipse { stroke: #e69500; stroke-width: 4px; }
.toolbar button { margin-left: .3em; min-width: 2.2em; }
"""
# The pages run no script and load nothing from elsewhere; their one style sheet is inline,
# allowed by its hash. No page may be framed (clickjacking), and an SVG, a JSON answer or a
# blob is never sniffed into something a browser would run.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; img-src 'self'; "
    f"style-src 'sha256-{base64.b64encode(hashlib.sha256(STYLE.encode()).digest()).decode()}'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
]


class SecurityHeaders:
    """ASGI middleware: `SECURITY_HEADERS` on every answer of the app (pages, SVGs, the API).
    An answer that sets its own Content-Security-Policy (the graph viewer's, which adds its
    script to the pages' policy) keeps it: two policies would both have to allow."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                own = {name.lower() for name, _ in headers}
                message = {**message, "headers": headers + [(n, v) for n, v in SECURITY_HEADERS if n not in own]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def pages_routes(
    store: JobStore,
    chain: ChainRole | None,
    signer_id: str,
    openapi: Callable[[], dict[str, Any]],
    drawings: Drawings,
    gate: Gate,
    disputes: Callable[[int], tuple[list[dict[str, Any]], int]] | None = None,
    inputs: Callable[[str, Sequence[str]], list[dict[str, Any]]] | None = None,
) -> APIRouter:
    """The pages and the graphs; `drawings` draws the graphs, `gate` says whether a request
    may have one drawn (with `[auth] required`, only with a token); `disputes` lists a chain
    job's disputes as the API answers them (node.daemon.api.ChainDisputes.of_job; None: the
    page shows none); `inputs` describes a job's inputs as `GET /v1/jobs/{id}/inputs` does
    (node.daemon.api.job_inputs; None: by the trace's names only)."""
    router = APIRouter(include_in_schema=False)

    @router.get("/", response_class=HTMLResponse)
    def front(state: str | None = None) -> HTMLResponse:
        if state is not None and state not in STATES:
            raise HTTPException(400, f"state {state!r}: one of {', '.join(STATES)}")
        now = time.time()
        jobs = store.recent_jobs(PAGE_JOBS, state)
        filters = " ".join(f'<a href="/?state={s}">{s}</a>' for s in STATES)
        body = [f"<p class=note>Signing key id <code>{e(signer_id)}</code>. Newest first; show only: {filters} <a href='/'>all</a></p>"]
        body.append("<h2>Jobs</h2>" + (_jobs_table(jobs, now) if jobs else "<p>No jobs yet.</p>"))
        changing = any(job.state in ("queued", "running") for job in jobs)
        if chain is not None:
            tracked = chain.executor.state.recent_jobs(PAGE_JOBS)
            rows = [[f'<a href="/chain/jobs/{t.job_id}">{t.job_id}</a>', badge(t.state.value), str(t.k), e(t.note)] for t in tracked]
            body.append("<h2>Chain jobs</h2><p class=note>The market's nodes and stakes: <a href='/market'>market</a>.</p>"
                        + (table(["job", "this node", "k", "why"], rows) if rows else "<p>No chain jobs seen yet.</p>"))
        return _page("vxla node", "".join(body), reload_s=RELOAD_S if changing else None)

    @router.get("/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(job_id: str, request: Request) -> HTMLResponse:
        job = store.get(job_id)
        if job is None:
            return _not_found(f"No job {job_id} on this node", "Its jobs are listed on <a href='/'>the front page</a>; a chain job's page is /chain/jobs/N.")
        now = time.time()
        changing = job.state in ("queued", "running")
        rows = [["state", badge(job.state) + (note("<span class=live>this page reloads until it is done</span>") if changing else "")],
                ["queued", when(job.created_at, now)]]  # fmt: skip
        if job.state in ("done", "failed"):
            rows.append(["finished", when(job.updated_at, now) + note(f"took {duration(job.updated_at - job.created_at)}")])
        if job.error:
            rows.append(["why", e(job.error)])
        rows.append(["module", blob(job.module_digest) + note("the HLO text")])
        if job.envelope_digest is not None:
            rows.append(["trace", f"<a href='/v1/jobs/{e(job.id)}/trace'>the signed trace</a>" + note("a DSSE envelope; <code>vxla verify</code> checks it")])
        body = [table([], rows)]
        if job.envelope_digest is not None:
            body.append(_trace_sections(store, job, [d.get("parameter") or "" for d in _described(inputs, job.module_digest, job.input_digests)]))
            body.append("<h2>Optimized graph</h2>" + _graph_figure(job.module_digest, drawings, gate, request))
        return _page(f"Job {job.id}", "".join(body), reload_s=RELOAD_S if changing else None)

    @router.get("/jobs/{job_id}/outputs/{number}.npy")
    def output_file(job_id: str, number: int) -> Response:
        job = store.get(job_id)
        if job is None or not 0 <= number < len(job.output_digests):
            raise HTTPException(404, f"job {job_id}: no output {number}")
        disposition = f'attachment; filename="{job.id}-out{number}.npy"'
        return Response(store.blobs.get(job.output_digests[number]), media_type="application/octet-stream", headers={"Content-Disposition": disposition})

    @router.get("/graphs/{module_digest}.svg")
    async def graph(module_digest: str, request: Request, highlight: str | None = None, depth: int | None = None) -> Response:
        # Async, and drawn by `drawings` in threads of its own: the event loop and the
        # threads of the other routes are never held by a drawing.
        if not is_digest(module_digest):
            raise HTTPException(404, f"module {module_digest}: not stored on this node")
        outcome = await drawings.answer(module_digest, highlight, request.is_disconnected, depth)
        if not outcome.ok:
            retry = {"Retry-After": str(outcome.retry_after_s)} if outcome.retry_after_s else None
            raise HTTPException(outcome.status, outcome.detail, headers=retry)
        return Response(outcome.svg, media_type="image/svg+xml")

    @router.get("/graphs/{module_digest}", response_class=HTMLResponse)
    async def graph_viewer(module_digest: str, request: Request, highlight: str | None = None, depth: int | None = None) -> HTMLResponse:
        if not is_digest(module_digest):
            return _not_found(f"No module {module_digest} on this node", "A graph is named by its module's SHA-256 (a job page links to it).")
        title = f"Graph of {module_digest[:12]}…"
        if not _may_draw(gate, request):
            return _page(title, f"<p class=note>{_token_needed(module_digest)}</p>")
        outcome = await drawings.answer(module_digest, highlight, request.is_disconnected, depth)
        if not outcome.ok:
            page = _page(title, f"<p>{e(outcome.detail)}</p>" + f"<p class=note>The module: {blob(module_digest)}</p>")
            page.status_code = outcome.status
            return page
        path = ""
        if outcome.path:
            steps = [f"<mark>{e(step)}</mark>" if step == highlight else e(step) for step in outcome.path]
            path = f"<p>Path from a parameter: {' &rarr; '.join(steps)}</p>"
            if outcome.source:
                path += f"<p>{e(highlight)} is <span class=source>{e(outcome.source)}</span> in your code.</p>"
        alone = f"/graphs/{e(module_digest)}.svg" + (f"?depth={depth}" if depth else "")
        body = f"<p class=note>The module: {blob(module_digest)}; the picture alone: <a href='{alone}'>SVG</a></p>{path}"
        body += _grouping(module_digest, highlight, depth, outcome.groups)
        page = _page(title, body + viewer_body(_inline_svg(outcome.svg), highlight))
        page.headers["content-security-policy"] = viewer_policy(CONTENT_SECURITY_POLICY)
        return page

    def draw_in_the_loop(module_digest: str, highlight: str) -> Outcome:
        """A graph for a page rendered in a worker thread, drawn (or refused) as the graph
        route's are."""
        return anyio.from_thread.run(drawings.answer, module_digest, highlight, _staying)

    @router.get("/chain/jobs/{job_id}", response_class=HTMLResponse)
    def chain_job_page(job_id: int, request: Request) -> HTMLResponse:
        if chain is None:
            return _not_found(f"No chain job {job_id}", "This node follows no chain; its own jobs are on <a href='/'>the front page</a>.")
        try:
            if not 1 <= job_id <= chain.market.job_count():
                return _not_found(f"No chain job {job_id}", f"The market at <code>{e(chain.market.address)}</code> has jobs 1 to {chain.market.job_count()}.")
            job = chain.market.get_job(job_id)
            slots = chain.market.get_slots(job_id)
            now = chain.client.next_block_time()
            shown, opened = ([], 0) if disputes is None else disputes(job_id)
        except Exception as exc:  # the RPC's trouble, said as such
            raise HTTPException(503, f"this node cannot reach its chain RPC now ({type(exc).__name__}); try again") from exc
        tracked = chain.executor.state.job(job_id)
        record = chain.executor.record(chain.market.address, job_id)
        rows = [
            ["phase", _chain_phase(job)],
            ["slots", f"{job.claimed} claimed, {job.committed} committed, {job.revealed} revealed of {job.k}"],
            ["commit until", _deadline(job.commit_deadline, now, job.phase == Phase.FINALIZED or job.committed >= job.k)],
            ["reveal until", _deadline(job.reveal_deadline, now, job.phase == Phase.FINALIZED or job.revealed >= job.k)],
            ["challenges until", _deadline(job.challenge_deadline, now, job.phase == Phase.FINALIZED)
             + note(f"{duration(job.challenge_window)} after the reveal phase; {job.open_disputes} dispute(s) open")],
            ["graph", f"{digest(job.graph_root.hex())}" + note(f"{job.trace_leaves} op-trace leaves")],
        ]  # fmt: skip
        if tracked is not None:
            rows.append(["this node", badge(tracked.state.value) + (note(e(tracked.note)) if tracked.note else "")])
        if job.accepted:
            rows.append(["result", digest(job.result.hex())])
        if record is not None:
            links = [f"module {blob(record.module_digest)}", f"<a href='/graphs/{e(record.module_digest)}'>its graph</a>"]
            if job.commit_phase_over(now):
                links += [f"<a href='/v1/chain/jobs/{job_id}/trace'>this node's signed trace</a>",
                          f"<a href='/v1/chain/jobs/{job_id}/divergence'>the divergence report (JSON)</a>"]  # fmt: skip
            outputs = " ".join(f"<a href='/v1/blobs/{e(d)}' title='{e(d)}'>{n}</a>" for n, d in enumerate(record.output_digests))
            links.append(f"its outputs' bytes: {outputs}")
            described = _described(inputs, record.module_digest, record.input_digests)
            if described:
                parameters = ", ".join(f"<a href='/v1/blobs/{e(d['digest'])}'>{e(d['name'])}</a> {e(d['parameter'] or '')} {e(d['type'])}" for d in described)
                links.append(f"its inputs: {parameters}")
            rows.append(["this node's run", "<br>".join(links)])
        body = [table([], rows), "<h2>Commitments</h2>"]
        slot_rows = [
            [code(s.node), "yes" if s.committed else "no", "yes" if s.revealed else "no",
             badge("refuted") if s.refuted else badge("undecided") if s.undecided else "no",
             digest(s.result_digest.hex()) if s.revealed else "", digest(s.envelope_digest.hex()) if s.revealed else "",
             digest(s.op_trace_root.hex()) if s.revealed else ""]
            for s in slots
        ]  # fmt: skip
        headers = ["node", "committed", "revealed", "refuted", "result", "trace", "op-trace root"]
        body.append(table(headers, slot_rows) if slot_rows else "<p>No slot claimed yet.</p>")
        if shown:
            more = f"<p class=note>The newest {len(shown)} of {opened} disputes.</p>" if opened > len(shown) else ""
            body.append("<h2>Disputes</h2>" + more + _disputes_table(shown, now, record.module_digest if record is not None else None))
        report = chain.monitor.report(chain.market.address, job_id)
        if report is not None and report.divergences:
            module_digest = record.module_digest if record is not None else None
            draw = draw_in_the_loop if _may_draw(gate, request) else None
            body.append("<h2>Divergence</h2>")
            for divergence in report.divergences:
                body.append(_divergence_section(divergence, module_digest, draw))
        elif record is not None:
            body.append("<h2>Divergence</h2><p>No node's result differs from this node's (so far).</p>")
        changing = job.phase != Phase.FINALIZED or job.open_disputes > 0
        return _page(f"Chain job {job_id}", "".join(body), reload_s=RELOAD_S if changing else None)

    @router.get("/market", response_class=HTMLResponse)
    def market_page() -> HTMLResponse:
        if chain is None:
            return _not_found("No market", "This node follows no chain; its own jobs are on <a href='/'>the front page</a>.")
        try:
            body = _market_sections(chain)
        except Exception as exc:  # the RPC's trouble, said as such
            raise HTTPException(503, f"this node cannot reach its chain RPC now ({type(exc).__name__}); try again") from exc
        return _page("Market", body, reload_s=RELOAD_S * 5)

    @router.get("/docs", response_class=HTMLResponse)
    def docs() -> HTMLResponse:
        schema = openapi()
        rows = []
        for path, operations in sorted(schema.get("paths", {}).items()):
            for method, operation in operations.items():
                text = operation.get("description") or operation.get("summary") or ""
                rows.append([f"<code>{e(method.upper())}</code>", f"<code>{e(path)}</code>", e(text)])
        body = "<p>The schema itself: <a href='/openapi.json'>/openapi.json</a>.</p>" + table(["method", "path", "what"], rows)
        return _page(f"{e(schema.get('info', {}).get('title', 'API'))} API", body)

    return router


async def _staying() -> bool:
    """A page's own drawing is never dropped for its client's going."""
    return False


def _may_draw(gate: Gate, request: Request) -> bool:
    """Whether `request` may have graphs drawn: any request on a node that requires no
    token, else one whose token the gate admits (as the intake admits API requests)."""
    if not gate.required:
        return True
    try:
        return gate.admit(request.headers.get("authorization")) is not None
    except Refused:
        return False


def _token_needed(module_digest: str) -> str:
    """What a page shows for a graph when the node draws graphs only for token holders."""
    url = f"/graphs/{e(module_digest)}.svg"
    return (f"This node draws graphs only for requests with a token: fetch <a href='{url}'>{url}</a> with "
            "<code>Authorization: Bearer TOKEN</code>, or draw it yourself with <code>vxla graph</code> from the "
            f"module (<code>GET /v1/blobs/{e(module_digest)}</code>).")  # fmt: skip


def _grouping(module_digest: str, highlight: str | None, depth: int | None, groups: tuple[int, ...]) -> str:
    """The viewer's choice of grouping: each depth of the user's scopes at which the graph
    has fewer boxes than at the one before (a model's layers as a row of boxes), or why none."""
    if not groups:
        return ("<p class=note>Not grouped by layer: the module's metadata names no scopes of your code "
                "(the SDK keeps them with <code>submit(..., debug_info=True)</code>).</p>")  # fmt: skip
    def link(level: int | None) -> str:
        query = urlencode({k: v for k, v in (("highlight", highlight), ("depth", level)) if v is not None})
        return e(f"/graphs/{module_digest}" + (f"?{query}" if query else ""))

    choices = ["<strong>none</strong>" if depth is None else f"<a href='{link(None)}'>none</a>"]
    previous = None
    for level, boxes in enumerate(groups, start=1):
        if boxes == previous:
            continue
        previous = boxes
        words = f"depth {level} ({boxes} boxes)"
        choices.append(f"<strong>{words}</strong>" if level == depth else f"<a href='{link(level)}'>{words}</a>")
    return f"<p id=grouping>Group by the scopes of your code: {' · '.join(choices)}</p>"


def _graph_figure(module_digest: str, drawings: Drawings, gate: Gate, request: Request) -> str:
    """A job page's graph: the picture and a link to the viewer, or why there is none."""
    missing = drawings.cannot_draw()
    if missing is not None:
        return (f"<p class=note>No picture: {e(missing)}. Draw it where Graphviz is with <code>vxla graph</code> "
                f"from the module ({blob(module_digest)}).</p>")  # fmt: skip
    if not _may_draw(gate, request):
        return f"<p class=note>{_token_needed(module_digest)}</p>"
    viewer = f"/graphs/{e(module_digest)}"
    return (f"<p><a href='{viewer}'>Open it in the viewer</a> <span class=note>(pan, zoom, search by name)</span></p>"
            f"<p class=graph><a href='{viewer}'><img alt='the optimized graph' src='{viewer}.svg'></a></p>")  # fmt: skip


def _divergence_section(divergence: Any, module_digest: str | None, draw: Callable[[str, str], Outcome] | None) -> str:  # noqa: ANN401 - a NodeDivergence
    rows = [
        ["node", f"{e(divergence.node)}" + note(e(divergence.endpoint))],
        ["its result", digest(divergence.their_result)],
        ["this node's", digest(divergence.our_result)],
        ["summary", e(divergence.summary)],
    ]
    name = divergence.instruction_name
    if name is None:
        return table([], rows)
    marked = f"<mark class=divergent>{e(name)}</mark>"
    if module_digest is not None:
        marked = f"<a href='/graphs/{e(module_digest)}?{e(urlencode({'highlight': name}))}'>{marked}</a>"
    rows += [
        ["first differing instruction", f"{marked} ({e(divergence.instruction_opcode or '')}), schedule position {divergence.instruction_index}"],
        ["its digest there", digest(divergence.their_digest or "absent")],
        ["this node's digest", digest(divergence.our_digest or "absent")],
    ]
    picture = ""
    if module_digest is not None and draw is None:
        rows.append(["graph", _token_needed(module_digest)])
    elif module_digest is not None:
        outcome = draw(module_digest, name)
        if outcome.ok:
            steps = [f"<mark>{e(step)}</mark>" if step == name else e(step) for step in outcome.path]
            rows.append(["path in the graph", " &rarr; ".join(steps)])
            if outcome.source:
                rows.append(["in your code", f"<span class=source>{e(outcome.source)}</span>"])
            viewer = f"/graphs/{e(module_digest)}?highlight={e(name)}"
            picture = f"<div class=graph>{_inline_svg(outcome.svg)}</div><p><a href='{viewer}'>The graph in the viewer, at {e(name)}</a></p>"
        else:
            rows.append(["graph", e(outcome.detail)])
    return table([], rows) + picture


def _disputes_table(disputes: list[dict[str, Any]], now: int, module_digest: str | None = None) -> str:
    """One row per dispute, as the API answers it (node.daemon.api.ChainDisputes); the
    instruction each reached links to the graph viewer at it when this node holds the module."""
    rows = []
    for d in disputes:
        moves = int(d["moves"])
        rounds = f"{moves // 2} round(s)" + (", the defender moved in the next" if moves % 2 else "")
        rows.append([
            str(d["dispute_id"]),
            code(d["challenger"]),
            code(d["defender"]) + note(f"slot {d['slot']}"),
            badge(d["stage"]),
            rounds + note(f"({moves} bisection move(s))"),
            _dispute_instruction(d, module_digest),
            _dispute_next(d, now),
            _dispute_verdict(d),
        ])  # fmt: skip
    headers = ["dispute", "challenger", "defender", "stage", "bisection", "instruction", "next move", "verdict"]
    return table(headers, rows)


def _dispute_instruction(d: dict[str, Any], module_digest: str | None = None) -> str:
    index = d["instruction"]
    if index is None:
        return "<span class=note>not reached yet</span>"
    if d["result_leaf"]:
        return "<mark class=disputed>result</mark>" + note(f"the result record (index {index}): the result digests differ, not an instruction's")
    name = d.get("instruction_name")
    if name is None:
        return f"op-trace leaf {index}" + note("(this node holds no trace of the job to name it)")
    opcode = d.get("instruction_opcode")
    uncovered = d.get("steps_uncovered")
    marked = f"<mark class=disputed>{e(name)}</mark>"
    if module_digest is not None:
        marked = f"<a href='/graphs/{e(module_digest)}?{e(urlencode({'highlight': name}))}'>{marked}</a>"
    return marked + (f" ({e(opcode)})" if opcode else "") + f", op-trace leaf {index}" + (note(f"no element steps: {e(uncovered)}") if uncovered else "")


def _dispute_next(d: dict[str, Any], now: int) -> str:
    mover = d["to_move"]
    if mover is not None:
        role = "defender" if mover == d["defender"] else "challenger"
        return f"the {role} {code(mover)}, until {_deadline(int(d['deadline']), now, False)}"
    if d["stage"] == "referee":
        return "the referee rules on the instruction"
    return ""


def _dispute_verdict(d: dict[str, Any]) -> str:
    verdict = d["verdict"]
    if verdict is None:
        return badge("open")
    timeout = " by timeout" if d["by_timeout"] else ""
    if verdict == "no-verdict":
        return f"{badge('no-verdict')}{timeout}" + note("bond returned, the slot no longer counts")
    who = "defender" if d["winner"] == d["defender"] else "challenger"
    loser = "slot refuted, defender slashed" if verdict == "defender-wrong" else "the challenger's bond goes to the defender"
    return f"{badge(verdict)}: the {who} won{timeout}" + note(loser)


def _chain_phase(job: OnChainJob) -> str:
    if job.phase != Phase.FINALIZED:
        return badge(job.phase.name.lower())
    outcome = badge("accepted") if job.accepted else badge("failed") + " (no majority)"
    return f"{badge('finalized')}, {outcome}"


def _deadline(at: int, now: int, closed: bool) -> str:
    """A chain deadline (block time, seconds) from the next block's time `now`: how far off,
    or, once its phase is over, that it closed (early, when every slot moved before it)."""
    if closed and at > now:
        return f"<time title='{utc(at)}'>closed early</time>" + note(f"the deadline was {relative(at, now)}")
    return when(at, now, "closed " if closed or at <= now else "")


def _described(inputs: Callable[[str, Sequence[str]], list[dict[str, Any]]] | None, module_digest: str, input_digests: Sequence[str]) -> list[dict[str, Any]]:
    """A job's inputs as node.daemon.api.job_inputs describes them (none where it cannot)."""
    if inputs is None:
        return []
    try:
        return inputs(module_digest, input_digests)
    except Exception:  # noqa: BLE001 - the names are a help: a page shows the rest without them
        return []


def _trace_sections(store: JobStore, job: StoredJob, parameters: list[str]) -> str:
    assert job.envelope_digest is not None
    envelope = parse_envelope(store.blobs.get(job.envelope_digest))
    statement = Statement.from_json_bytes(envelope.payload)
    predicate = statement.predicate
    execution = predicate.deterministic
    compiler = execution.compiler
    target = compiler.target
    parts = ["<h2>Program</h2>", table([], [
        ["hlo_hash", digest(execution.program.hlo_hash)],
        ["source_hash", digest(execution.program.source_hash)],
        ["job", e(predicate.job_id)],
    ])]  # fmt: skip
    identity = [
        ["vxla", e(compiler.vxla_version)], ["numerics contract", e(compiler.numerics_contract)],
        ["pipeline", digest(compiler.pipeline_id)], ["target", e(f"{target.triple} cpu={target.cpu} features={target.features or '-'}")],
        ["LLVM", e(f"{compiler.llvm_version} (llvmlite {compiler.llvmlite_version}), -O{compiler.opt_level}")],
    ]  # fmt: skip
    if compiler.linker is not None:
        identity.append(["linker", e(f"{compiler.linker.name} {compiler.linker.version}")])
    parts += ["<h2>Compiler identity</h2>", table([], identity)]
    hashes = [["graph_hash", digest(execution.graph_hash)], ["binary_hash", digest(execution.binary_hash)]]
    if execution.op_trace is not None:
        hashes.append(["op-level root", digest(execution.op_trace.merkle_root) + note(f"({len(execution.op_trace.instructions)} instructions)")])
    parts += ["<h2>Hashes</h2>", table([], hashes)]
    named = parameters + [""] * (len(execution.inputs) - len(parameters))
    inputs = [[e(r.name), e(name), e(f"{r.dtype}{list(r.shape)}"), digest(r.digest), _file_link(f"/v1/blobs/{d}", "bytes (.npy)")]
              for r, name, d in zip(execution.inputs, named, job.input_digests, strict=False)]  # fmt: skip
    parts += ["<h2>Inputs</h2>", table(["name", "parameter", "type", "tensor digest", ""], inputs) if inputs else "<p>None.</p>"]
    outputs = []
    for number, (record, stored) in enumerate(zip(execution.outputs, job.output_digests, strict=False)):
        download = _file_link(f"/jobs/{e(job.id)}/outputs/{number}.npy", "download .npy")
        outputs.append([e(record.name), e(f"{record.dtype}{list(record.shape)}"), _preview(store, stored, record, execution.digest_version), digest(record.digest), download])
    parts += ["<h2>Outputs</h2>", table(["name", "type", "first values", "tensor digest", ""], outputs) if outputs else "<p>None.</p>"]
    signatures = [[digest(s.keyid), digest(s.sig.hex() if isinstance(s.sig, bytes) else str(s.sig))] for s in envelope.signatures]
    parts += ["<h2>Signatures</h2>", table(["key id", "Ed25519 signature"], signatures)]
    run = predicate.run
    host = run.host
    if host is not None:
        machine = f"{host.arch}, {host.cpu_model}" + (f", GPU {host.gpu.name} ({host.gpu.compute_capability})" if host.gpu else "")
        parts += ["<h2>Run</h2>", table([], [["machine", e(machine)], ["threads", str(run.threads)]])]
    parts.append(f"<details><summary>The statement (JSON)</summary><pre><code>{e(json.dumps(statement.to_dict(), indent=1))}</code></pre></details>")
    return "".join(parts)


def _file_link(href: str, words: str) -> str:
    return f"<a href='{href}'>{e(words)}</a>"


def _preview(store: JobStore, blob_digest: str, record: Any, version: str) -> str:  # noqa: ANN401 - a TensorRecord
    """An output's first values, read from its stored bytes and checked against the trace's
    record (nothing unchecked is shown); a note instead when it is too large or unreadable."""
    count = int(np.prod(record.shape, dtype=np.int64))
    if count * 16 > PREVIEW_BYTES:
        return note("too large to preview here; download it")
    try:
        array = recorded_array(store.blobs.get(blob_digest), record, version)
    except (ValueError, OSError) as error:
        return note(f"no preview: {e(error)}")
    flat = array.reshape(-1)[:PREVIEW_VALUES]
    values = ", ".join(_scalar(v) for v in flat.tolist()) if flat.dtype.kind in "biufc" else ", ".join(str(v) for v in flat)
    more = f", … ({count} values)" if count > PREVIEW_VALUES else ""
    return f"<pre class=preview>[{e(values)}{e(more)}]</pre>"


def _scalar(value: object) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _market_sections(chain: ChainRole) -> str:
    """The market page's body: the registered nodes (stake, locked, slots in the recent jobs,
    slashes), then the recent jobs."""
    registry, market = chain.registry, chain.market
    count = market.job_count()
    recent = range(count, max(0, count - MARKET_JOBS), -1)
    jobs = [(number, market.get_job(number), market.get_slots(number)) for number in recent]
    claimed: Counter[str] = Counter()
    revealed: Counter[str] = Counter()
    refuted: Counter[str] = Counter()
    for _, _, slots in jobs:
        for slot in slots:
            claimed[slot.node] += 1
            revealed[slot.node] += slot.revealed
            refuted[slot.node] += slot.refuted
    head = chain.client.block_number()
    slashes = fetch_events(chain.client, registry.contract, max(0, head - MARKET_LOG_BLOCKS), head, names=("Slashed",))
    slashed: Counter[str] = Counter()
    slashed_wei: Counter[str] = Counter()
    for event in slashes:
        slashed[event.args["node"]] += 1
        slashed_wei[event.args["node"]] += int(event.args["amount"])
    rows = []
    for index in range(registry.node_count()):
        address = registry.node_at(index)
        info = registry.get_node(address)
        who = code(address) + (note("this node") if address == chain.address else "")
        rows.append([
            who, e(info.endpoint), _ether(info.stake), _ether(info.locked), f"{claimed[address]} claimed, {revealed[address]} revealed",
            badge("refuted") + f" {refuted[address]}" if refuted[address] else "0",
            f"{slashed[address]} ({_ether(slashed_wei[address])})" if slashed[address] else "0",
        ])  # fmt: skip
    parts = [f"<p class=note>The market <code>{e(market.address)}</code> and its registry <code>{e(registry.address)}</code>; "
             f"slots over the newest {len(jobs)} of {count} jobs, slashes over the last {MARKET_LOG_BLOCKS} blocks. "
             f"This page reloads every {RELOAD_S * 5} s.</p>"]  # fmt: skip
    headers = ["node", "endpoint", "stake", "locked", "slots", "refuted", "slashed"]
    parts.append("<h2>Nodes</h2>" + (table(headers, rows) if rows else "<p>No node registered.</p>"))
    job_rows = [[f"<a href='/chain/jobs/{n}'>{n}</a>", _chain_phase(job), f"{job.revealed} of {job.k} revealed", _ether(job.reward),
                 ", ".join(code(s.node[:10] + "…") for s in slots) or note("none")] for n, job, slots in jobs]  # fmt: skip
    parts.append("<h2>Jobs</h2>" + (table(["job", "phase", "slots", "reward", "nodes"], job_rows) if job_rows else "<p>No job posted yet.</p>"))
    return "".join(parts)


def _ether(wei: int) -> str:
    return f"{wei / 10**18:.4g} ETH" if wei else "0"


def _jobs_table(jobs: Iterable[StoredJob], now: float) -> str:
    rows = []
    for job in jobs:
        took = duration(job.updated_at - job.created_at) if job.state in ("done", "failed") else ""
        rows.append([f'<a href="/jobs/{e(job.id)}"><code>{e(job.id)}</code></a>', badge(job.state), when(job.created_at, now), took, e(job.error or "")])
    return table(["job", "state", "queued", "took", "why"], rows)


def _page(title: str, body: str, reload_s: int | None = None, status: int = 200) -> HTMLResponse:
    reload = f"<meta http-equiv=refresh content={reload_s}>" if reload_s else ""
    document = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>{reload}"
        f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{STYLE}</style></head>"
        f"<body><nav><a href='/'>Jobs</a><a href='/market'>Market</a><a href='/docs'>API</a><a href='/metrics'>Metrics</a></nav>"
        f"<h1>{e(title)}</h1>{body}</body></html>"
    )
    return HTMLResponse(document, status_code=status)


def _not_found(title: str, body: str) -> HTMLResponse:
    """A page's 404: what is missing and where to look, as a page (not the API's JSON)."""
    return _page(title, f"<p>{body}</p>", status=404)


def _inline_svg(svg: bytes) -> str:
    """The SVG document as an element of the page (its XML prolog and doctype left out)."""
    text = svg.decode("utf-8", errors="replace")
    return text[text.index("<svg") :] if "<svg" in text else ""
