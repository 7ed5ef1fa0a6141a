"""The node's HTTP API (FastAPI): jobs, blobs, traces, health and metrics, and with a chain
role the `/v1/chain/...` endpoints: `GET /v1/chain/jobs/{id}` (on-chain state, its disputes
and this node's record), `.../trace` (this node's envelope) and `.../divergence` (the report naming
where other nodes' traces part from ours).

Refusals are 4xx with a `detail` naming the problem: 400 bad input (with line:col for HLO),
401 no known token and 403 over its quota (when the node requires tokens, node.daemon.auth),
404 unknown, 409 not done yet, 413 too large, 422 too much work, 429 over the token's rate.
A refused job stores nothing: the module text of a job is stored only after every check
passed.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from attest import Statement, key_id
from attest.digests import sha256_hex
from attest.keys import public_key_pem, raw_public_key
from core.lru import Lru
from node.chain import DisputeGame, fetch_events
from node.chain.disputes import DisputeSummary, summarize
from node.chain.errors import ContractRevert
from node.chain.state import JobState
from node.chain.step_play import step_case_summary
from node.daemon.auth import Gate, Refused, Token
from node.daemon.chain_executor import ExecutedChainJob, ServedLeaf
from node.daemon.chain_role import ChainRole
from node.daemon.config import Limits
from node.daemon.drawing import Drawings
from node.daemon.intake import BodyTooLarge, Intake, IntakeRoute, admitted_token, refusal_headers
from node.daemon.job_checks import ModuleSummary, check_inputs
from node.daemon.pages import SecurityHeaders, pages_routes
from node.daemon.store import DONE, STATES, BlobDamaged, BlobError, JobStore
from node.daemon.worker import Metrics, WorkerPool
from node.errors import JobRejected
from node.protocol import INLINE_INPUT_BYTES, JobRequest, is_digest
from node.sqlite import STORAGE_RETRY_AFTER_S, StorageError
from node.tracing.verify import parse_envelope

MAX_PAGE = 1000  # the most jobs one list request returns
MAX_LEAVES_ALSO = 64  # the most other leaves one leaf request asks to be copied out with it
T = TypeVar("T")


def _problem(status: int, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail=message)


def _refusal(refused: Refused) -> HTTPException:
    """The answer to a request its credentials do not allow."""
    return HTTPException(status_code=refused.status, detail=str(refused), headers=refusal_headers(refused) or None)


def _admitted(request: Request) -> Token | None:
    """The request's token, as the intake admitted it before the body was read
    (node/daemon/intake.py): an unauthenticated request never reaches a route."""
    return admitted_token(request.scope.get("state", {}))


AdmittedToken = Annotated[Token | None, Depends(_admitted)]


def _charged(
    gate: Gate, token: Token | None, store: Callable[[], T], *, jobs: int = 0, nbytes: int = 0,
    withdraw: Callable[[T], bool] | None = None,
) -> T:  # fmt: skip
    """`store()` and the token's charge for it, as one unit (Gate.charged): 403 past a quota,
    StorageError (507/503) with nothing stored and nothing charged when either store fails."""
    try:
        return gate.charged(token, store, jobs=jobs, nbytes=nbytes, withdraw=withdraw)
    except Refused as refused:
        raise _refusal(refused) from None


def _inline_inputs(encoded: list[str]) -> list[bytes]:
    """The .npy bytes of a request's `input_data`; 400 for what is not base64, 413 past
    INLINE_INPUT_BYTES (larger inputs are uploaded as blobs)."""
    inputs, total = [], 0
    for index, text in enumerate(encoded):
        try:
            data = base64.b64decode(text, validate=True)
        except binascii.Error as error:
            raise _problem(400, f"input_data[{index}]: not base64 ({error})") from None
        total += len(data)
        if total > INLINE_INPUT_BYTES:
            raise _problem(413, f"input_data: over {INLINE_INPUT_BYTES} bytes in all: upload larger inputs as blobs")
        inputs.append(data)
    return inputs


def _blob(store: JobStore, digest: str, what: str) -> bytes:
    if not is_digest(digest):
        raise _problem(400, f"{what}: {digest!r} is not a lower-case hex SHA-256")
    try:
        return store.blobs.get(digest)
    except BlobDamaged as error:
        raise _problem(503, f"{what}: {error}") from None
    except BlobError as error:
        raise _problem(400, f"{what}: {error}") from None


def _checked_module(pool: WorkerPool | None, module_bytes: bytes) -> ModuleSummary:
    """The module's summary from the pool's checker processes (the daemon parses no module)."""
    if pool is None:
        raise JobRejected("this node runs no workers: it takes no jobs", 503)
    return pool.check_module(module_bytes)


def job_inputs(store: JobStore, pool: WorkerPool | None, module_digest: str, input_digests: Sequence[str]) -> list[dict[str, Any]]:
    """Each input of a job (its module and input blobs) as a user reads it: its name in the
    job's trace (`in0`, ...), the parameter it binds as the user knows it (JAX's pytree path,
    `params['w']`, where the module's metadata says; else the parameter's name in the module),
    its type and the digest of its bytes. JobRejected when the module cannot be checked now."""
    summary = _checked_module(pool, store.blobs.get(module_digest))
    names = summary.parameter_names or tuple("" for _ in summary.parameter_shapes)
    return [
        {"name": f"in{number}", "parameter": name or None, "type": shape.str_without_layout(), "digest": digest}
        for number, (shape, name, digest) in enumerate(zip(summary.parameter_shapes, names, input_digests, strict=False))
    ]


def _inputs_answer(store: JobStore, pool: WorkerPool | None, module_digest: str, input_digests: Sequence[str]) -> dict[str, Any]:
    """The answer of the inputs routes: `job_inputs`, or the problem that kept the module
    from being checked now."""
    try:
        return {"inputs": job_inputs(store, pool, module_digest, input_digests)}
    except JobRejected as error:
        raise _problem(error.status, str(error)) from None


def create_app(
    store: JobStore,
    limits: Limits,
    signer: Ed25519PublicKey,
    pool: WorkerPool | None = None,
    chain: ChainRole | None = None,
    gate: Gate | None = None,
) -> FastAPI:
    """The API over `store`, refusing jobs over `limits`; `signer` is the public key the node
    signs its traces with.
    `pool` checks modules and is woken when a job is queued (None: no workers, jobs are refused). `chain`: the
    node's chain role, which adds the `/v1/chain/...` endpoints. `gate`: who may post jobs
    and upload blobs (None: anyone who reaches the API)."""
    gate = gate or Gate(required=False, tokens=None)
    metrics = pool.metrics if pool is not None else Metrics()
    limits_bytes = blob_limit(limits)
    # The API's own docs page (node/daemon/pages.py) loads nothing from elsewhere, unlike
    # FastAPI's Swagger UI and ReDoc pages, whose scripts come from a CDN.
    app = FastAPI(title="vxla node", version="1", description="Verifiable execution of HLO jobs", docs_url=None, redoc_url=None)
    app.add_middleware(Intake, gate=gate, routes=intake_routes(limits))
    app.add_middleware(SecurityHeaders)  # outermost: the intake's refusals carry the headers too
    drawings = Drawings(store, limits, metrics.registry)

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, error: HTTPException) -> JSONResponse:
        return JSONResponse({"detail": error.detail}, status_code=error.status_code, headers=error.headers)

    @app.exception_handler(BodyTooLarge)
    async def _too_large(request: Request, error: BodyTooLarge) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=413)

    @app.exception_handler(StorageError)
    async def _storage_failed(request: Request, error: StorageError) -> JSONResponse:
        # The node's trouble, said as such: 507 full, 503 otherwise (retry later).
        return JSONResponse({"detail": str(error)}, status_code=error.status, headers={"Retry-After": str(STORAGE_RETRY_AFTER_S)})

    app.include_router(blob_routes(store, limits_bytes, gate))
    app.include_router(job_routes(store, limits, pool, gate))
    disputes = None if chain is None else ChainDisputes(chain, store)
    app.include_router(chain_routes(store, chain, disputes, pool))
    app.include_router(node_routes(store, signer, metrics, pool, chain, drawings))
    app.include_router(pages_routes(store, chain, key_id(signer), app.openapi, drawings, gate, None if disputes is None else disputes.of_job,
                                    inputs=lambda module, digests: job_inputs(store, pool, module, digests)))  # fmt: skip
    return app


def blob_limit(limits: Limits) -> int:
    """The most bytes a blob may have: it is a module or a tensor."""
    return max(limits.max_module_bytes, limits.max_tensor_bytes)


def intake_routes(limits: Limits) -> list[IntakeRoute]:
    """The routes that store or compute, each with its body limit: what the intake checks
    before a body is read. A JSON job carries the module text (escaped: up to twice its
    bytes) and maybe small inputs in base64."""
    job_body = 2 * limits.max_module_bytes + 65536 + 4 * INLINE_INPUT_BYTES // 3
    return [
        IntakeRoute("POST", re.compile(r"/v1/jobs"), job_body, json_body=True, jobs=1),
        IntakeRoute("PUT", re.compile(r"/v1/blobs/[^/]*"), blob_limit(limits)),
        # Drawing a graph is computing on the module: the same credentials as a job (no body).
        IntakeRoute("GET", re.compile(r"/graphs/[^/]*"), 0),
    ]


def blob_routes(store: JobStore, limits_bytes: int, gate: Gate) -> APIRouter:
    """`PUT` and `GET /v1/blobs/{digest}`: content-addressed bytes, at most `limits_bytes`."""
    router = APIRouter()

    @router.put("/v1/blobs/{digest}", status_code=201)
    async def put_blob(digest: str, request: Request, token: AdmittedToken) -> dict[str, Any]:
        """Store bytes under their SHA-256; the body must hash to `digest`."""
        if not is_digest(digest):
            raise _problem(400, f"blob digest {digest!r} is not a lower-case hex SHA-256")
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limits_bytes:
            raise _problem(413, f"blob: {declared} bytes, over the blob limit ({limits_bytes})")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            # Counted as it arrives: a body without Content-Length cannot exceed it either.
            if size > limits_bytes:
                raise _problem(413, f"blob: over the blob limit ({limits_bytes} bytes)")
            chunks.append(chunk)
        data = b"".join(chunks)
        actual = sha256_hex(data)
        if actual != digest:
            raise _problem(400, f"blob: body hashes to {actual}, not {digest}")
        await run_in_threadpool(lambda: _charged(gate, token, lambda: store.blobs.put(data), nbytes=size))
        return {"digest": digest, "size": size}

    @router.get("/v1/blobs/{digest}", response_class=Response)
    def get_blob(digest: str) -> Response:
        """The bytes stored under `digest` (checked against it before they are served)."""
        if not is_digest(digest):
            raise _problem(400, f"blob digest {digest!r} is not a lower-case hex SHA-256")
        if not store.blobs.has(digest):
            raise _problem(404, f"blob {digest}: unknown")
        try:
            return Response(store.blobs.get(digest), media_type="application/octet-stream")
        except BlobError as error:  # damaged (it was there a moment ago): the node's trouble
            raise _problem(503, str(error)) from None
    return router


def job_routes(store: JobStore, limits: Limits, pool: WorkerPool | None, gate: Gate) -> APIRouter:
    """`POST /v1/jobs`, `GET /v1/jobs/{id}` and its trace: local jobs, checked before queued."""
    router = APIRouter()

    @router.post("/v1/jobs", status_code=201)
    def post_job(body: JobRequest, token: AdmittedToken) -> dict[str, Any]:
        """Queue a job after checking the credentials, the module, the inputs and the limits."""
        if (body.module is None) == (body.module_digest is None):
            raise _problem(400, "give exactly one of module (HLO text) or module_digest")
        if body.redundancy != 1:
            raise _problem(
                422,
                f"redundancy {body.redundancy}: POST /v1/jobs runs a job on this node only; a job for "
                "several nodes is posted on chain (SDK ChainSubmitter, vxla submit --devnet)",
            )
        if body.module is not None:
            module_bytes = body.module.encode("utf-8")
        else:
            module_bytes = _blob(store, body.module_digest or "", "module_digest")
        # The module's parameter count bounds the input list before any input is read: a
        # small body listing one large stored blob N times would otherwise make the node
        # load and decode N copies of it.
        try:
            module = _checked_module(pool, module_bytes)
        except JobRejected as error:
            raise _problem(error.status, str(error)) from None
        parameters = len(module.parameter_shapes)
        if body.inputs and body.input_data:
            raise _problem(400, "give the inputs as digests (inputs) or as bytes (input_data), not both")
        given = len(body.input_data or body.inputs)
        if given != parameters:
            raise _problem(400, f"module takes {parameters} inputs, got {given}")
        if body.input_data:
            inputs = _inline_inputs(body.input_data)
        else:
            inputs = [_blob(store, d, f"inputs[{i}]") for i, d in enumerate(body.inputs)]
        try:
            check_inputs(module.parameter_shapes, inputs, limits)
        except JobRejected as error:
            raise _problem(error.status, str(error)) from None
        uploaded = (len(module_bytes) if body.module is not None else 0) + (sum(map(len, inputs)) if body.input_data else 0)
        # Only now is anything stored: the job with its module and inline inputs, at once,
        # and the token charged for it only once it is (nothing charged if the store fails).
        inline = inputs if body.input_data else []
        job = _charged(
            gate, token, lambda: store.add_job(module.source_hash, [sha256_hex(d) for d in inline] or body.inputs, [module_bytes, *inline]),
            jobs=1, nbytes=uploaded, withdraw=lambda stored: store.withdraw(stored.id),
        )  # fmt: skip
        if pool is not None:
            pool.notify()
        return job.to_dict()

    @router.get("/v1/jobs")
    def list_jobs(state: str | None = None, limit: int = 50, before: str | None = None) -> dict[str, Any]:
        """This node's jobs, newest first: `state` (queued, running, done, failed) filters,
        `limit` (1 to 1000) caps the page, `before` (a job id, the page's `next`) continues
        from there."""
        if state is not None and state not in STATES:
            raise _problem(400, f"state {state!r}: one of {', '.join(STATES)}")
        if not 1 <= limit <= MAX_PAGE:
            raise _problem(400, f"limit {limit}: from 1 to {MAX_PAGE}")
        if before is not None and store.get(before) is None:
            raise _problem(400, f"before: job {before} unknown")
        jobs = store.recent_jobs(limit + 1, state, before)
        page = jobs[:limit]
        return {"jobs": [job.to_dict() for job in page], "next": page[-1].id if len(jobs) > limit else None}

    @router.get("/v1/jobs/{job_id}")
    def get_job(job_id: str) -> dict[str, Any]:
        """The job's state, output blob digests, statement and envelope digests, and error."""
        job = store.get(job_id)
        if job is None:
            raise _problem(404, f"job {job_id}: unknown")
        return job.to_dict()

    @router.get("/v1/jobs/{job_id}/inputs")
    def get_inputs(job_id: str) -> dict[str, Any]:
        """The job's inputs: each one's name in the trace, the parameter it binds as the user
        knows it (a JAX pytree path where the module's metadata says), its type and the
        digest of its bytes."""
        job = store.get(job_id)
        if job is None:
            raise _problem(404, f"job {job_id}: unknown")
        return _inputs_answer(store, pool, job.module_digest, job.input_digests)

    @router.get("/v1/jobs/{job_id}/trace", response_class=Response)
    def get_trace(job_id: str) -> Response:
        """The signed DSSE envelope of a done job (409 while it is not done)."""
        job = store.get(job_id)
        if job is None:
            raise _problem(404, f"job {job_id}: unknown")
        if job.state != DONE or job.envelope_digest is None:
            reason = f": {job.error}" if job.error else ""
            raise _problem(409, f"job {job_id} is {job.state}{reason}")
        return Response(store.blobs.get(job.envelope_digest), media_type="application/json")
    return router


class ChainDisputes:
    """The disputes of chain jobs as the node shows them (the chain job API answer, its page
    and `vxla job`): each one's `DisputeSummary` (node/chain/disputes.py) as it stands on
    chain, with the instruction the walk reached named (`instruction_name`,
    `instruction_opcode`) when this node can name it.

    A job's disputes are found from the game's DisputeOpened logs, read once each from the
    node's start block on (the node's `chain.start_block`): the logs of all but the newest
    `REREAD_BLOCKS` blocks are indexed by job, those are read again at every call (a reorg
    may redo them), and a dispute whose record now names another job is left out. A call
    reads the chain for the job's disputes only.

    The instruction's name is its graph record's name, which is the name of the op-trace
    leaf at the same index in this node's signed trace of the job (the records are the trace
    points, docs/disputes.md): read from that trace when the node executed the job and still
    holds it, kept per (contract, job), else None (index n is the result record, "result").
    The node parses no module to name it (its checkers and execution processes do that)."""

    REREAD_BLOCKS = 64
    SHOWN = 100  # the most disputes of one job an answer summarizes (the newest)
    TRACES_KEPT = 64  # jobs whose instruction names are kept

    def __init__(self, role: ChainRole, store: JobStore) -> None:
        self.role = role
        self.store = store
        self._lock = threading.Lock()
        self._next_block: int | None = None  # the first block not yet indexed
        self._indexed: dict[int, list[int]] = {}  # job id -> dispute ids, from blocks below _next_block
        self._names: Lru[tuple[str, int], tuple[tuple[str, str], ...]] = Lru(self.TRACES_KEPT)

    def of_job(self, job_id: int) -> tuple[list[dict[str, Any]], int]:
        """The job's disputes, oldest first, each `DisputeSummary.to_dict()` with
        `instruction_name` and `instruction_opcode` (None while the walk has not reached an
        instruction, or when this node cannot name it) and `steps_uncovered` (why a contract
        cannot evaluate that opcode's elements step by step, docs/disputes.md; None when it
        can or the opcode is unknown) and `step_case` (under the step referee, its case:
        node.chain.step_play.step_case_summary; None otherwise), and how many were opened: past
        `SHOWN` only the newest `SHOWN` are summarized (each is read from the chain)."""
        game = self.role.dispute_game()
        if game is None:
            return [], 0
        ids = self._dispute_ids(game, job_id)
        shown = []
        for dispute_id in ids[-self.SHOWN :]:
            summary = summarize(game, dispute_id)
            if summary.job_id != job_id:  # a reorg gave the id to another job's dispute
                continue
            name, opcode = self._instruction(job_id, summary)
            referee = self.role.step_referee()
            case = None if referee is None or summary.instruction is None else step_case_summary(referee, dispute_id)
            shown.append({
                **summary.to_dict(), "instruction_name": name, "instruction_opcode": opcode,
                "steps_uncovered": steps_uncovered(opcode), "step_case": case,
            })  # fmt: skip
        return shown, len(ids)

    def _dispute_ids(self, game: DisputeGame, job_id: int) -> list[int]:
        client = self.role.client
        head = client.block_number()
        with self._lock:
            if self._next_block is None:
                self._next_block = self.role.executor.state.start_block
            settled = head - self.REREAD_BLOCKS
            if settled >= self._next_block:
                for dispute_id, job in self._opened(game, self._next_block, settled):
                    self._indexed.setdefault(job, []).append(dispute_id)
                self._next_block = settled + 1
            ids = list(self._indexed.get(job_id, []))
            recent_from = self._next_block
        if head >= recent_from:
            ids += [dispute_id for dispute_id, job in self._opened(game, recent_from, head) if job == job_id]
        return sorted(set(ids))

    @staticmethod
    def _opened(game: DisputeGame, from_block: int, to_block: int) -> list[tuple[int, int]]:
        """(dispute id, job id) of each DisputeOpened in [from_block, to_block]."""
        events = fetch_events(game.client, game.contract, from_block, to_block, names=("DisputeOpened",))
        return [(int(e.args["disputeId"]), int(e.args["jobId"])) for e in events]

    def _instruction(self, job_id: int, summary: DisputeSummary) -> tuple[str | None, str | None]:
        """The name and opcode of the graph record the dispute reached, when known here."""
        if summary.instruction is None:
            return None, None
        if summary.result_leaf:
            return "result", "result"
        leaves = self._trace_leaves(job_id)
        if leaves is None or summary.instruction >= len(leaves):
            return None, None
        return leaves[summary.instruction]

    def _trace_leaves(self, job_id: int) -> tuple[tuple[str, str], ...] | None:
        """(name, opcode) of each op-trace leaf of this node's signed trace of the job."""
        key = (self.role.market.address, job_id)
        with self._lock:
            kept = self._names.get(key)
        if kept is not None:
            return kept
        record = self.role.executor.record(*key)
        if record is None or not self.store.blobs.has(record.envelope_digest):
            return None  # asked again next time: the node may execute the job later
        try:
            envelope = self.store.blobs.get(record.envelope_digest)
            op_trace = Statement.from_json_bytes(parse_envelope(envelope).payload).predicate.deterministic.op_trace
        except (BlobError, ValueError):
            return None
        leaves = () if op_trace is None else tuple((leaf.name, leaf.opcode) for leaf in op_trace.instructions)
        with self._lock:
            self._names.put(key, leaves)
        return leaves


def chain_routes(store: JobStore, chain: ChainRole | None, disputes: ChainDisputes | None = None, pool: WorkerPool | None = None) -> APIRouter:
    """`GET /v1/chain/jobs/{id}`, its trace and divergence report (404 without a chain role)."""
    router = APIRouter()

    @contextmanager
    def _chain_reads() -> Iterator[None]:
        # The node's RPC endpoint failing is the node's trouble, not a bad request: 503,
        # said in words, rather than an unhandled exception.
        try:
            yield
        except (HTTPException, ContractRevert):
            raise
        except Exception as exc:  # any transport failure of the RPC
            raise _problem(503, f"this node cannot reach its chain RPC now ({type(exc).__name__}); try again") from exc

    def _chain_job_id(job_id: str) -> tuple[ChainRole, int]:
        if chain is None:
            raise _problem(404, f"no chain job {job_id}: this node follows no chain (chain.rpc_url is empty); its own jobs have 32-hex-digit ids (GET /v1/jobs lists them)")
        if not job_id.isdigit():
            raise _problem(400, f"chain job id {job_id!r} is not a number")
        return chain, int(job_id)

    @router.get("/v1/chain/jobs")
    def list_chain_jobs(state: str | None = None, limit: int = 50, before: int | None = None) -> dict[str, Any]:
        """The chain jobs this node has seen, newest first, each with this node's state of it
        (seen, claimed, executed, committed, revealed, done; skipped, expired or failed) and
        why (`note`): `state` filters, `limit` (1 to 1000) caps the page, `before` (a job id,
        the page's `next`) continues below it."""
        if chain is None:
            raise _problem(404, "this node follows no chain (chain.rpc_url is empty)")
        names = [s.value for s in JobState]
        if state is not None and state not in names:
            raise _problem(400, f"state {state!r}: one of {', '.join(names)}")
        if not 1 <= limit <= MAX_PAGE:
            raise _problem(400, f"limit {limit}: from 1 to {MAX_PAGE}")
        jobs = chain.executor.state.recent_jobs(limit + 1, None if state is None else JobState(state), before)
        page = jobs[:limit]
        return {"jobs": [job.to_dict() for job in page], "next": page[-1].job_id if len(jobs) > limit else None}

    @router.get("/v1/chain/jobs/{job_id}")
    def get_chain_job(job_id: str) -> dict[str, Any]:
        """A chain job: its on-chain state and, when this node executed it, its record."""
        role, number = _chain_job_id(job_id)
        with _chain_reads():
            if not 1 <= number <= role.market.job_count():
                raise _problem(404, f"chain job {number}: unknown")
            job = role.market.get_job(number)
            slots = role.market.get_slots(number)
            chain_time = role.client.next_block_time()
            shown, opened = ([], 0) if disputes is None else disputes.of_job(number)
        record = role.executor.record(role.market.address, number)
        tracked = role.executor.state.job(number)  # this node's own view, with why
        return {
            "job_id": number,
            "contract": role.market.address,
            "phase": job.phase.name.lower(),
            "accepted": job.accepted,
            "result_digest": job.result.hex(),
            "k": job.k,
            "claimed": job.claimed,
            "committed": job.committed,
            "revealed": job.revealed,
            "commit_deadline": job.commit_deadline,
            "reveal_deadline": job.reveal_deadline,
            # The graph commitment the job names, and its challenge window: finalize runs once
            # the chain's time reaches challenge_deadline with no dispute open.
            "graph_root": job.graph_root.hex(),
            "trace_leaves": job.trace_leaves,
            "challenge_window": job.challenge_window,
            "challenge_deadline": job.challenge_deadline,
            "open_disputes": job.open_disputes,
            # The disputes opened on the job, oldest first (the newest ChainDisputes.SHOWN of
            # dispute_count): each one's stage, the bisection moves made, the instruction
            # reached (named when this node holds its trace of the job), who moves next and
            # by when, and once settled the verdict and the winner.
            "disputes": shown,
            "dispute_count": opened,
            "chain_time": chain_time,  # the time a transaction sent now runs at
            "slots": [
                {
                    "node": slot.node,
                    "committed": slot.committed,
                    "revealed": slot.revealed,
                    "refuted": slot.refuted,
                    "undecided": slot.undecided,
                    "result_digest": slot.result_digest.hex(),
                    "envelope_digest": slot.envelope_digest.hex(),
                    "op_trace_root": slot.op_trace_root.hex(),
                }
                for slot in slots
            ],
            "local": None if record is None else record.to_dict(),
            "node": None if tracked is None else {"state": tracked.state.value, "note": tracked.note},
        }

    @router.get("/v1/chain/jobs/{job_id}/inputs")
    def get_chain_inputs(job_id: str) -> dict[str, Any]:
        """The inputs of a chain job this node executed, described as `GET /v1/jobs/{id}/inputs`
        describes a job's (404 when it has not executed it)."""
        role, number = _chain_job_id(job_id)
        record = role.executor.record(role.market.address, number)
        if record is None:
            raise _problem(404, f"chain job {number}: not executed by this node")
        return _inputs_answer(store, pool, record.module_digest, record.input_digests)

    @router.get("/v1/chain/jobs/{job_id}/trace", response_class=Response)
    def get_chain_trace(job_id: str) -> Response:
        """This node's signed DSSE envelope of a chain job: 404 if it has not executed it,
        409 while the job's commit phase is open (the trace shows the result, which a node
        that has not committed yet could copy instead of computing)."""
        role, number = _chain_job_id(job_id)
        record = _executed_after_commit_phase(role, number, "the trace is")
        return Response(store.blobs.get(record.envelope_digest), media_type="application/json")

    def _executed_after_commit_phase(role: ChainRole, number: int, served: str) -> ExecutedChainJob:
        """This node's record of a chain job it executed, once the job's commit phase is
        over: 404 if it has not executed it, 409 while the phase is open (what it serves shows
        the result, which a node that has not committed yet could copy instead of computing)."""
        record = role.executor.record(role.market.address, number)
        if record is None:
            raise _problem(404, f"chain job {number}: not executed by this node")
        with _chain_reads():
            job = role.market.get_job(number)
            over = job.commit_phase_over(role.client.next_block_time())
        if not over:
            raise _problem(
                409,
                f"chain job {number}: commit phase open ({job.committed} of {job.k} slots committed, "
                f"deadline {job.commit_deadline}); {served} served once it is over",
            )
        return record

    def _served_leaf(job_id: str, index: str, also: str = "") -> ServedLeaf:
        role, number = _chain_job_id(job_id)
        if not index.isdigit():
            raise _problem(400, f"leaf index {index!r} is not a number")
        others = [part.strip() for part in also.split(",") if part.strip()] if also else []
        if len(others) > MAX_LEAVES_ALSO or not all(part.isdigit() for part in others):
            raise _problem(400, f"also: at most {MAX_LEAVES_ALSO} op-trace indices, comma-separated")
        _executed_after_commit_phase(role, number, "leaf values are")
        try:
            return role.executor.leaf(role.market.address, number, int(index), [int(part) for part in others])
        except JobRejected as error:
            raise _problem(error.status, str(error)) from None

    @router.get("/v1/chain/jobs/{job_id}/leaves/{index}")
    def get_chain_leaf(job_id: str, index: str, also: str = "") -> dict[str, Any]:
        """The value of op-trace leaf `index` of a chain job this node executed, for a
        dispute's committee (docs/disputes.md: a member evaluates the disputed instruction from
        the values of the leaves it reads, fetched from the parties by digest): `{job_id,
        index, digest, buffers: [{dtype, shape, bytes}]}`, the leaf's flat output buffers in
        order (element type as HLO names it, dimensions, .npy size), whose digest
        (`compiler.api.leaf_digest`) is `digest`, this node's signed trace's digest at `index`;
        `.../leaves/{index}/{buffer}` serves each buffer's .npy bytes.

        The node runs the job again to copy the values out (once for several requests: `also`,
        comma-separated op-trace indices the caller asks for next, at most 64, are copied in
        the same run, and values are kept a while) and checks each against its trace before
        serving it. 404: a job this node has not executed, or an index outside 0..n-1 (the
        result record n has no value of its own); 409 while the job's commit phase is open
        (as for the trace: values show the execution, which a node that has not committed
        could copy); 500 when the run again gives another value than the trace holds; 503
        when it fails (try again)."""
        return _served_leaf(job_id, index, also).describe()

    @router.get("/v1/chain/jobs/{job_id}/leaves/{index}/{buffer}", response_class=Response)
    def get_chain_leaf_buffer(job_id: str, index: str, buffer: str, also: str = "") -> Response:
        """The .npy bytes of flat buffer `buffer` (0-based) of op-trace leaf `index`'s value
        (see `.../leaves/{index}`: the same refusals, and 404 for a buffer the leaf has not)."""
        leaf = _served_leaf(job_id, index, also)
        if not buffer.isdigit() or int(buffer) >= len(leaf.buffers):
            raise _problem(404, f"chain job {leaf.job_id}: leaf {leaf.index} has {len(leaf.buffers)} buffer(s), not {buffer!r}")
        return Response(leaf.buffers[int(buffer)].data, media_type="application/octet-stream")

    @router.get("/v1/chain/jobs/{job_id}/divergence")
    def get_divergence(job_id: str) -> dict[str, Any]:
        """The divergence report of a chain job: the other nodes whose result differs from
        ours and the first instruction where their trace parts from ours."""
        role, number = _chain_job_id(job_id)
        report = role.monitor.report(role.market.address, number)
        if report is None:
            return {"job_id": number, "contract": role.market.address, "divergences": [], "recorded_block": None}
        return report.to_dict()
    return router


def node_routes(
    store: JobStore, signer: Ed25519PublicKey, metrics: Metrics, pool: WorkerPool | None, chain: ChainRole | None, drawings: Drawings | None = None
) -> APIRouter:
    """`GET /v1/key`, `/healthz`, `/readyz` and `/metrics`: the node itself."""
    router = APIRouter()
    signer_id = key_id(signer)
    signer_pem = public_key_pem(signer).decode("ascii")

    @router.get("/v1/key")
    def get_key() -> dict[str, str]:
        """The public key this node signs traces with (raw Ed25519 in hex, and the same key as
        PEM, the form `vxla keys init` writes; `--trusted-key` reads either) and its key id,
        the SHA-256 of the raw key, which the node registers on chain: a peer checks one
        against the other before it trusts a trace of this node."""
        return {"key_id": signer_id, "public_key": raw_public_key(signer).hex(), "public_key_pem": signer_pem}

    @router.get("/healthz")
    async def healthz() -> dict[str, Any]:
        """The process answers (from the event loop itself: no busy thread delays it)."""
        return {"ok": True}

    @router.get("/readyz")
    def readyz() -> JSONResponse:
        """Ready to take jobs: the store answers and takes a write, and the signing key is
        loaded; also what
        confines the execution processes (node/daemon/confinement.py)."""
        checks: dict[str, Any] = {"key": signer_id, "workers": pool is not None}
        if pool is not None and pool.executions.confinement is not None:
            checks["execution"] = pool.executions.confinement  # what confines the execution processes
        if drawings is not None and drawings.confinement is not None:
            checks["drawing"] = drawings.confinement  # and the graph drawing processes, once one ran
        try:
            checks["jobs"] = store.counts()
            store.check_writable()
            ok = True
        except Exception as error:  # any store failure means not ready, with the reason
            checks["store"] = str(error)
            ok = False
        if chain is not None:
            try:
                checks["chain"] = {"block": chain.client.block_number(), "account": chain.address}
            except Exception as error:  # an unreachable chain means not ready, with the reason
                checks["chain"] = {"error": str(error)}
                ok = False
        return JSONResponse({"ok": ok, **checks}, status_code=200 if ok else 503)

    @router.get("/metrics", response_class=Response)
    def metrics_endpoint() -> Response:
        """Prometheus metrics."""
        metrics.update_jobs(store)
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)
    return router


def steps_uncovered(opcode: str | None) -> str | None:
    """Why the step referee cannot evaluate elements of `opcode` (compiler.api.UNCOVERED),
    None when it can or the opcode is unknown here; the result record is not evaluated."""
    from compiler.api import UNCOVERED

    if opcode == "result":
        return "the result record: the result digests differ, no instruction computes them"
    return UNCOVERED.get(opcode) if opcode is not None else None
