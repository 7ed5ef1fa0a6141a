"""The node's web pages: plain HTML rendered here, with nothing loaded from elsewhere (the
machine may be offline, and a verifier's page must not call out).

- `/`: the node's jobs and the chain jobs it has seen, each with its state and why;
- `/jobs/{id}`: a job and its signed trace: program, compiler identity, hashes, inputs,
  outputs, signatures, and the optimized graph (`/graphs/{module digest}.svg`, which takes
  `?highlight=NAME`);
- `/chain/jobs/{id}`: a chain job's phases and each node's commitment and reveal, its
  disputes (challenger and defender, stage, bisection rounds, the instruction reached, who
  moves next and by when, the verdict and winner), and the divergence view: for each node whose result differs, the first differing instruction,
  both digests, the path to it in the graph and the graph with it highlighted;
- `/docs`: the API's operations, from its OpenAPI schema (instead of a page whose scripts
  come from a CDN).

Graphs are drawn in confined, bounded child processes, a few at a time, and every outcome is
kept (node/daemon/drawing.py). Drawing is computing: with `[auth] required = true` a graph is
drawn only for a request with a token (the intake checks `/graphs/...` as it checks the API's
routes that compute), and a page fetched without one shows a note in place of the graph. The
pages themselves show what the API's reads show, and are open as those are.

Every answer carries a strict Content-Security-Policy (`SecurityHeaders`): no script, no
frame, nothing from elsewhere; the one style sheet is allowed by its hash.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio.from_thread
from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.responses import HTMLResponse

from attest import Statement
from node.chain.contracts import Phase
from node.daemon.auth import Gate, Refused
from node.daemon.chain_role import ChainRole
from node.daemon.drawing import Drawings, Outcome
from node.daemon.store import STATES, JobStore, StoredJob
from node.protocol import is_digest
from node.tracing.verify import parse_envelope

PAGE_JOBS = 100  # jobs listed on the front page, newest first
RELOAD_S = 3  # how often the job list reloads while a job is queued or running

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
    """ASGI middleware: `SECURITY_HEADERS` on every answer of the app (pages, SVGs, the API)."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict]], send: Callable[[dict], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
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
) -> APIRouter:
    """The pages and the graphs; `drawings` draws the graphs, `gate` says whether a request
    may have one drawn (with `[auth] required`, only with a token); `disputes` lists a chain
    job's disputes as the API answers them (node.daemon.api.ChainDisputes.of_job; None: the
    page shows none)."""
    router = APIRouter(include_in_schema=False)

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
        # While a job is still queued or running, look again shortly (a meta refresh: no script).
        return _page("vxla node", "".join(body), reload_s=RELOAD_S if running else None)

    @router.get("/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(job_id: str, request: Request) -> HTMLResponse:
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
            if _may_draw(gate, request):
                picture = f"<p class=graph><img alt='the optimized graph' src='/graphs/{_e(job.module_digest)}.svg'></p>"
            else:
                picture = f"<p class=note>{_token_needed(job.module_digest)}</p>"
            body.append(f"<h2>Optimized graph</h2>{picture}")
        return _page(f"Job {job.id}", "".join(body))

    @router.get("/graphs/{module_digest}.svg")
    async def graph(module_digest: str, request: Request, highlight: str | None = None) -> Response:
        # Async, and drawn by `drawings` in threads of its own: the event loop and the
        # threads of the other routes are never held by a drawing.
        if not is_digest(module_digest):
            raise HTTPException(404, f"module {module_digest}: not stored on this node")
        outcome = await drawings.answer(module_digest, highlight, request.is_disconnected)
        if not outcome.ok:
            retry = {"Retry-After": str(outcome.retry_after_s)} if outcome.retry_after_s else None
            raise HTTPException(outcome.status, outcome.detail, headers=retry)
        return Response(outcome.svg, media_type="image/svg+xml")

    def draw_in_the_loop(module_digest: str, highlight: str) -> Outcome:
        """A graph for a page rendered in a worker thread, drawn (or refused) as the graph
        route's are."""
        return anyio.from_thread.run(drawings.answer, module_digest, highlight, _staying)

    @router.get("/chain/jobs/{job_id}", response_class=HTMLResponse)
    def chain_job_page(job_id: int, request: Request) -> HTMLResponse:
        if chain is None:
            raise HTTPException(404, "this node follows no chain")
        try:
            if not 1 <= job_id <= chain.market.job_count():
                raise HTTPException(404, f"chain job {job_id}: unknown")
            job = chain.market.get_job(job_id)
            slots = chain.market.get_slots(job_id)
            now = chain.client.next_block_time()
            shown, opened = ([], 0) if disputes is None else disputes(job_id)
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
            ["challenges until", _relative(job.challenge_deadline, now)
             + f" <span class=note>({job.challenge_window} s after the reveal phase; {job.open_disputes} dispute(s) open)</span>"],
            ["graph", f"{_digest(job.graph_root.hex())} <span class=note>{job.trace_leaves} op-trace leaves</span>"],
        ]
        if tracked is not None:
            rows.append(["this node", _state(tracked.state.value) + (f" <span class=note>{_e(tracked.note)}</span>" if tracked.note else "")])
        if job.accepted:
            rows.append(["result", _digest(job.result.hex())])
        body = [_table([], rows), "<h2>Commitments</h2>"]
        slot_rows = [
            [_e(s.node), "yes" if s.committed else "no", "yes" if s.revealed else "no",
             _state("refuted") if s.refuted else _state("undecided") if s.undecided else "no",
             _digest(s.result_digest.hex()) if s.revealed else "", _digest(s.envelope_digest.hex()) if s.revealed else "",
             _digest(s.op_trace_root.hex()) if s.revealed else ""]
            for s in slots
        ]  # fmt: skip
        headers = ["node", "committed", "revealed", "refuted", "result", "trace", "op-trace root"]
        body.append(_table(headers, slot_rows) if slot_rows else "<p>No slot claimed yet.</p>")
        if shown:
            more = f"<p class=note>The newest {len(shown)} of {opened} disputes.</p>" if opened > len(shown) else ""
            body.append("<h2>Disputes</h2>" + more + _disputes_table(shown, now))
        report = chain.monitor.report(chain.market.address, job_id)
        if report is not None and report.divergences:
            module_digest = record.module_digest if record is not None else None
            draw = draw_in_the_loop if _may_draw(gate, request) else None
            body.append("<h2>Divergence</h2>")
            for divergence in report.divergences:
                body.append(_divergence_section(divergence, module_digest, draw))
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
    url = f"/graphs/{_e(module_digest)}.svg"
    return (f"This node draws graphs only for requests with a token: fetch <a href='{url}'>{url}</a> with "
            "<code>Authorization: Bearer TOKEN</code>, or draw it yourself with <code>vxla graph</code> from the "
            f"module (<code>GET /v1/blobs/{_e(module_digest)}</code>).")  # fmt: skip


def _divergence_section(divergence: Any, module_digest: str | None, draw: Callable[[str, str], Outcome] | None) -> str:  # noqa: ANN401 - a NodeDivergence
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
    if module_digest is not None and draw is None:
        rows.append(["graph", _token_needed(module_digest)])
    elif module_digest is not None:
        outcome = draw(module_digest, name)
        if outcome.ok:
            steps = [f"<mark>{_e(step)}</mark>" if step == name else _e(step) for step in outcome.path]
            rows.append(["path in the graph", " &rarr; ".join(steps)])
            full = f"/graphs/{_e(module_digest)}.svg?highlight={_e(name)}"
            picture = f"<div class=graph>{_inline_svg(outcome.svg)}</div><p><a href='{full}'>The graph at full size</a></p>"
        else:
            rows.append(["graph", _e(outcome.detail)])
    return _table([], rows) + picture


def _disputes_table(disputes: list[dict[str, Any]], now: int) -> str:
    """One row per dispute, as the API answers it (node.daemon.api.ChainDisputes)."""
    rows = []
    for d in disputes:
        moves = int(d["moves"])
        rounds = f"{moves // 2} round(s)" + (", the defender moved in the next" if moves % 2 else "")
        rows.append([
            str(d["dispute_id"]),
            _code(d["challenger"]),
            f"{_code(d['defender'])} <span class=note>slot {d['slot']}</span>",
            _state(d["stage"]),
            f"{rounds} <span class=note>({moves} bisection move(s))</span>",
            _dispute_instruction(d),
            _dispute_next(d, now),
            _dispute_verdict(d),
        ])  # fmt: skip
    headers = ["dispute", "challenger", "defender", "stage", "bisection", "instruction", "next move", "verdict"]
    return _table(headers, rows)


def _dispute_instruction(d: dict[str, Any]) -> str:
    index = d["instruction"]
    if index is None:
        return "<span class=note>not reached yet</span>"
    if d["result_leaf"]:
        return f"<mark class=disputed>result</mark> <span class=note>the result record (index {index}): the result digests differ, not an instruction's</span>"
    name = d.get("instruction_name")
    if name is None:
        return f"op-trace leaf {index} <span class=note>(this node holds no trace of the job to name it)</span>"
    opcode = d.get("instruction_opcode")
    uncovered = d.get("steps_uncovered")
    note = f" <span class=note>no element steps: {_e(uncovered)}</span>" if uncovered else ""
    return f"<mark class=disputed>{_e(name)}</mark>" + (f" ({_e(opcode)})" if opcode else "") + f", op-trace leaf {index}" + note


def _dispute_next(d: dict[str, Any], now: int) -> str:
    mover = d["to_move"]
    if mover is not None:
        role = "defender" if mover == d["defender"] else "challenger"
        return f"the {role} {_code(mover)}, until {_relative(int(d['deadline']), now)}"
    if d["stage"] == "referee":
        return "the referee rules on the instruction"
    return ""


def _dispute_verdict(d: dict[str, Any]) -> str:
    verdict = d["verdict"]
    if verdict is None:
        return _state("open")
    timeout = " by timeout" if d["by_timeout"] else ""
    if verdict == "no-verdict":
        return f"{_state('no-verdict')}{timeout} <span class=note>bond returned, the slot no longer counts</span>"
    who = "defender" if d["winner"] == d["defender"] else "challenger"
    loser = "slot refuted, defender slashed" if verdict == "defender-wrong" else "the challenger's bond goes to the defender"
    return f"{_state(verdict)}: the {who} won{timeout} <span class=note>{loser}</span>"


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
    if compiler.linker is not None:
        identity.append(["linker", _e(f"{compiler.linker.name} {compiler.linker.version}")])
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


def _page(title: str, body: str, reload_s: int | None = None) -> HTMLResponse:
    reload = f"<meta http-equiv=refresh content={reload_s}>" if reload_s else ""
    document = (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>{reload}"
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


def _code(text: object) -> str:
    return f"<code>{_e(text)}</code>"


def _when(seconds: float) -> str:
    return _e(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds)))


def _relative(deadline: int, now: int) -> str:
    return f"{deadline} (in {deadline - now} s)" if deadline > now else f"{deadline} ({now - deadline} s ago)"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)
