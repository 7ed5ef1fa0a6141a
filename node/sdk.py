"""The client SDK: submit a job to a node, wait for it, fetch outputs checked against their
digests, fetch the signed trace and verify it locally.

    client = Client("http://127.0.0.1:8700", trusted_keys=[node_public_key])
    job = client.submit("model.hlo", [x, w])
    job.wait(timeout=60)
    outputs = job.outputs()
    report = client.verify(job.trace(), "model.hlo", [x, w])

From JAX (the optional extra, `pip install 'vxla[jax]'`), a function and its example
arguments are a job: the SDK exports the HLO text itself, flattens the arguments in
parameter order and returns the outputs in the function's own structure; `connect` takes a
node's URL or a devnet directory (its chain included):

    client = node.sdk.connect(".devnet")
    logits = client.submit(model.apply, params, x, redundancy=3).outputs()

With a chain (`Client(url, chain=ChainSubmitter(market, account))`), `submit(..., redundancy=k)`
compiles the module here for its graph commitment (the pass pipeline only, no machine code:
docs/disputes.md), uploads the module, the inputs and the inputs manifest to the node, posts
the job on the JobMarket with the submitter's account (digests as `node.chain_executor`
defines them, the graph commitment and a challenge window: `challenge_window=` seconds, else
the submitter's `challenge_window_s`), and returns a chain job: `wait` follows it to
finalization through the node's `GET /v1/chain/jobs/{id}` (finalizing it itself once the
challenge window is over and no dispute is open), and `outputs` are checked against the
finalized result digest too.

The node is not trusted with the client's memory or time either (node.transfers): every
answer streams in within a bound of what it should hold (`AnswerLimits`: JSON and traces by a
protocol maximum, each input and output blob by the .npy size its recorded element type and
shape imply), every request, answer included, ends by one deadline, and redirects are not
followed. The errors are the SDK's own, all `node.errors.NodeError`: `RequestRefused` (the
node's 4xx or 5xx and why), `NodeUnreachable` (no answer), `AnswerRefused` (an answer past
its bound or deadline, a redirect, not the JSON or signed trace the route serves),
`IntegrityError` (bytes that are not what the trace records: digest, element type, shape; a
signature that does not verify), `JobFailed`, and `JobTimeout` (also a TimeoutError).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from web3 import HTTPProvider, Web3

from attest import KeyFileError, Statement, key_id, parse_public_key, verify_signatures
from attest.digests import sha256_hex
from attest.errors import AttestError, VerificationError
from attest.statement import TensorRecord
from attest.verify import TrustedKeys
from node.chain import ChainClient, ContractRevert, JobMarket, Sender
from node.chain.client import _address as _address_of
from node.chain.disputes import DisputeSummary, Execution, GraphLeaves
from node.devnet_state import DevnetState
from node.errors import NodeError
from node.jax_programs import ExportedFunction, export_function
from node.protocol import (
    INLINE_INPUT_BYTES,
    JobRequest,
    chain_digests,
    inputs_manifest,
    is_digest,
    result_digest_of,
)
from node.tensors import NPY_HEADER_BYTES, npy_bytes, npy_size_bound, read_npy, recorded_array
from node.tracing.statement import TraceInputError
from node.tracing.verify import VerifyReport, parse_envelope, verify_trace
from node.transfers import AnswerRefused, deadline_transport, fetch
from node.urls import node_url

# Where `connect` and `vxla submit` find the bearer token of a node that requires one.
TOKEN_ENV = "VXLA_TOKEN"

TensorLike = np.ndarray | np.generic | str | Path


class RequestRefused(NodeError):
    """The node refused a request; `status` is the HTTP status, `detail` its message."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"node answered {status}: {detail}")
        self.status = status
        self.detail = detail


class NodeUnreachable(NodeError):
    """No answer from the node: refused connection, unknown host, timeout, broken transfer.
    The message names the URL and the cause."""


class JobFailed(NodeError):
    """The job ended `failed`; the message is the node's error."""


class IntegrityError(NodeError):
    """Bytes from the node that are not what they were asked for: a blob that does not hash
    to its digest, an input or output whose digest, element type or shape is not the one the
    trace records, a trace whose signature does not verify."""


@dataclass(frozen=True)
class Download:
    """Where a download of a job's outputs stands (what `Job.outputs(progress=)` hears):
    output `number` of `count` (named `name`; `number == count` once all are in), and the
    bytes of the outputs' elements received so far of `total`."""

    name: str
    number: int
    count: int
    received: int
    total: int


def _download_heard(progress: Callable[[Download], None], name: str, number: int, count: int, before: int, total: int) -> Callable[[int], None]:
    """What hears output `number`'s bytes arrive (`before`: the bytes of the outputs before
    it) and tells `progress` where the whole download stands."""
    return lambda size: progress(Download(name, number, count, min(before + size, total), total))


class JobTimeout(NodeError, TimeoutError):
    """`Job.wait` reached its timeout before the job ended; the message says its last state."""


MiB = 1 << 20


@dataclass(frozen=True)
class AnswerLimits:
    """The most a client takes from a node: an answer past its bound is dropped as it streams
    in (AnswerRefused), so no node makes the client hold more than this or wait longer."""

    # A job's state, a page of jobs, the node's key, the answer to an upload: small objects.
    json_bytes: int = 8 * MiB
    # A signed trace: a few hundred bytes per traced instruction over a few KiB, so this is
    # far more than the largest module a node takes by default (16 MiB) traces to.
    trace_bytes: int = 128 * MiB
    # A module blob (`Job.verify`): nodes take at most 16 MiB by default; room for more.
    module_bytes: int = 64 * MiB
    # Any one input or output blob (each is bounded first by the .npy size its recorded type
    # and shape imply): a job's outputs live in its memory, at most 8 GiB on a default node.
    tensor_bytes: int = 8 << 30
    # Every request, from connecting to the answer's last byte (a node's timeout per read
    # would let an answer dripped a byte at a time go on without end).
    transfer_seconds: float = 300.0


# What a Client takes when given no limits (read at each Client's creation).
DEFAULT_LIMITS = AnswerLimits()


def _module_bytes(module: str | Path | bytes) -> bytes:
    """Module text, or the file it names: a Path, or a one-line str that is not HLO text
    (which begins with `HloModule`). A file that is not there is FileNotFoundError naming it,
    never text for the node to refuse as HLO."""
    if isinstance(module, bytes):
        return module
    if isinstance(module, Path) or ("\n" not in module and not module.lstrip().startswith("HloModule")):
        try:
            return Path(module).read_bytes()
        except FileNotFoundError:
            raise FileNotFoundError(f"{module}: no such module file (give HLO text, a Path, or the file's name)") from None
    return module.encode("utf-8")


def _tensor_bytes(tensor: TensorLike) -> bytes:
    if isinstance(tensor, np.ndarray | np.generic):  # a numpy scalar is a 0-d input
        return npy_bytes(np.asarray(tensor))
    return Path(tensor).read_bytes()


def inline_job_request(module_text: str, input_npy: Sequence[bytes], redundancy: int = 1) -> dict[str, Any]:
    """The body of a `POST /v1/jobs` that carries the module and the inputs themselves (each
    input's .npy bytes, in base64), as `Client.submit` sends a small job."""
    return JobRequest.inline(module_text, input_npy, redundancy).body()


def _as_array(tensor: TensorLike) -> np.ndarray:
    if isinstance(tensor, np.ndarray | np.generic):
        return np.asarray(tensor)
    return np.load(Path(tensor), allow_pickle=False)


@dataclass(repr=False)
class Job:
    """A job on a node, as last seen (`info` is the node's JSON for it)."""

    client: Client
    id: str
    info: dict[str, Any] = field(default_factory=dict)
    on_chain: bool = False  # a JobMarket job (id = the chain job id), settled by quorum
    function: ExportedFunction | None = None  # the JAX function the job runs, if one

    def __repr__(self) -> str:
        # One line: the module, the inputs and the node's whole record stay out of it.
        kind = "chain job" if self.on_chain else "job"
        return f"<Job {kind} {self.id} on {self.client.url}: {self.stage}>"

    @property
    def _path(self) -> str:
        return f"/v1/chain/jobs/{self.id}" if self.on_chain else f"/v1/jobs/{self.id}"

    @property
    def state(self) -> str:
        """queued/running/done/failed; a chain job is `open` until finalized, then `done`
        when a majority agreed (`failed`: refunded without a majority)."""
        if not self.on_chain:
            return str(self.info.get("state", "unknown"))
        phase = str(self.info.get("phase", "unknown"))
        if phase != "finalized":
            return phase
        return "done" if self.info.get("accepted") else "failed"

    @property
    def stage(self) -> str:
        """The state in words, with a chain job's progress while it is open: how many of its
        k slots are claimed, committed and revealed."""
        info = self.info
        if self.on_chain and self.state == "open" and "k" in info:
            return f"open: {info.get('claimed')} claimed, {info.get('committed')} committed, {info.get('revealed')} revealed of {info['k']}"
        return self.state

    def refresh(self) -> Job:
        """Fetches the job's current state from the node."""
        return self._refresh()

    def _refresh(self, max_seconds: float | None = None) -> Job:
        self.info = self.client._json("GET", self._path, max_seconds=max_seconds)
        return self

    def wait(
        self,
        timeout: float | None = None,
        progress: Callable[[Job], None] | None = None,
        poll_seconds: float = 0.05,
    ) -> Job:
        """Polls until the job is done; `progress` is called on every change of its `stage`
        (a chain job's claims, commitments and reveals included). Raises JobFailed when it
        failed and JobTimeout (a TimeoutError) once `timeout` seconds have passed, whatever
        the node or the chain does meanwhile (a last look at the node may take a second
        more)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = None
        delay = poll_seconds
        while True:
            self._look(deadline, timeout)
            if self.stage != seen:
                seen = self.stage
                if progress is not None:
                    progress(self)
            if self.state == "done":
                return self
            if self.state == "failed":
                reason = "finalized without a majority" if self.on_chain else self.info.get("error")
                raise JobFailed(f"job {self.id} failed: {reason}")
            finalized = self.on_chain and self._settle_if_over()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise self._timed_out(timeout)
            if finalized:
                continue  # finalized just now: its result is there to see at once
            time.sleep(delay if left is None else min(delay, left))
            delay = min(delay * 1.5, 1.0)  # quick for small jobs, gentle for long ones

    def _look(self, deadline: float | None, timeout: float | None) -> None:
        """`refresh`, within what is left of a wait: a node slow to answer runs the wait
        out at its deadline, not at the client's deadline per request."""
        if deadline is None:
            self.refresh()
            return
        try:
            self._refresh(max_seconds=min(self.client.limits.transfer_seconds, max(deadline - time.monotonic(), 1.0)))
        except (AnswerRefused, NodeUnreachable):
            if time.monotonic() >= deadline:
                raise self._timed_out(timeout) from None
            raise

    def _timed_out(self, timeout: float | None) -> JobTimeout:
        return JobTimeout(f"job {self.id} still {self.state} after {timeout} s")

    def _settle_if_over(self) -> bool:
        """For an open chain job whose time is up, on the chain's clock: JobFailed when no node
        committed before the commit deadline (nothing can finalize it with a result); once
        its challenge deadline has passed with no dispute open (the contract's rule), the
        job finalized by this submitter (anyone may): True when that went through, to look
        again at once. False while the nodes or challengers still have time, while a dispute
        is open, or when the chain refused (finalized meanwhile by someone else, or its own
        clock not there yet): the wait looks again after its pause, its deadline checked
        first."""
        info = self.info
        if "chain_time" not in info or self.state != "open":
            return False
        now, commit_deadline, challenge_deadline, open_disputes, committed, claimed, k = self._chain_numbers(
            "chain_time", "commit_deadline", "challenge_deadline", "open_disputes", "committed", "claimed", "k"
        )
        if now >= commit_deadline and committed == 0:
            view = info.get("node") or {}
            said = f"; the node: {view.get('state')}, {view['note']}" if isinstance(view, dict) and view.get("note") else ""
            raise JobFailed(
                f"job {self.id} expired: no node committed a result before its commit deadline "
                f"({claimed} of {k} slots claimed; the chain's time is "
                f"{now - commit_deadline} s past it{said})"
            )
        if now < challenge_deadline or open_disputes > 0:
            return False
        submitter = self.client.chain
        if submitter is None:
            raise JobFailed(f"job {self.id}: its challenge window is over and it is not finalized yet; anyone may finalize it")
        try:
            submitter.market.finalize(submitter.account, int(self.id))
        except ContractRevert:
            # Finalized by someone else meanwhile (the next look shows it), or not yet
            # finalizable on the chain's own clock: look again after the usual pause.
            return False
        return True

    def _chain_numbers(self, *names: str) -> list[int]:
        """The integer fields `names` of the node's answer for a chain job."""
        try:
            return [int(self.info[name]) for name in names]
        except (KeyError, TypeError, ValueError):
            raise AnswerRefused(f"{self.client.url}{self._path}: not a chain job's state (it needs integer {', '.join(names)})") from None

    def inputs(self) -> list[dict[str, Any]]:
        """The job's inputs as the node describes them (a chain job's, once the node has
        executed it): each one's `name` in the trace (`in0`, ...), the `parameter` it binds
        as the user knows it (a JAX pytree path, `params['w']`, where the module's metadata
        says; else its name in the module), its `type` (`f32[3,4]`) and the `digest` of its
        bytes."""
        answer = self.client._json("GET", f"{self._path}/inputs").get("inputs")
        if not isinstance(answer, list) or not all(isinstance(item, dict) for item in answer):
            raise AnswerRefused(f"{self.client.url}{self._path}/inputs: not a list of inputs")
        return answer

    def trace(self) -> str:
        """The signed DSSE envelope (JSON text) of the done job, at most the client's
        `limits.trace_bytes` long."""
        path = f"{self._path}/trace"
        data = self.client._request("GET", path, max_bytes=self.client.limits.trace_bytes, what="trace")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise AnswerRefused(f"{self.client.url}{path}: not UTF-8 text, so not a trace") from None

    def _statement(self, envelope: str) -> Statement:
        """The statement the node's trace carries (its signature not checked here);
        AnswerRefused when the trace is not a DSSE envelope of a canonical statement."""
        try:
            return Statement.from_json_bytes(parse_envelope(envelope).payload)
        except (TraceInputError, AttestError) as exc:
            raise AnswerRefused(f"job {self.id}: the node's trace is not a signed statement ({exc})") from None

    def _record(self) -> dict[str, Any]:
        """The node's record of the job (a chain job's `local` part): digests of its blobs."""
        record = (self.info.get("local") or {}) if self.on_chain else self.info
        if not isinstance(record, dict):
            raise AnswerRefused(f"{self.client.url}{self._path}: the job's record is not a JSON object")
        return record

    def _digests(self, values: Any, what: str) -> list[str]:
        """The node's list of blob digests `what`, each a lower-case hex SHA-256."""
        if not isinstance(values, list) or not all(isinstance(v, str) and is_digest(v) for v in values):
            raise AnswerRefused(f"{self.client.url}{self._path}: {what} is not a list of SHA-256 digests")
        return values

    def _recorded_blob(self, digest: str, record: TensorRecord, version: str, on_bytes: Callable[[int], None] | None = None) -> np.ndarray:
        """The blob `digest` as the tensor `record` describes, downloaded within the .npy
        size its element type and shape imply and checked against it: digest (of `version`,
        the trace's tensor digest version), element type and shape."""
        bound = npy_size_bound(record)
        limit = self.client.limits.tensor_bytes
        if bound > limit:
            raise AnswerRefused(
                f"job {self.id}: the trace records {record.name} as {record.dtype}{list(record.shape)}, "
                f"{bound} bytes as .npy, over this client's limit of {limit} (AnswerLimits.tensor_bytes)"
            )
        try:
            return recorded_array(self.client.get_blob(digest, max_bytes=bound, on_bytes=on_bytes), record, version)
        except ValueError as exc:
            raise IntegrityError(f"job {self.id}: {exc}") from None

    def outputs(self, timeout: float | None = 600.0, progress: Callable[[Download], None] | None = None) -> Any:
        """The output arrays (waiting up to `timeout` seconds for the job to finish), from a
        trace whose signature verifies (Client.verification_keys), each checked twice: its
        bytes against the blob digest, and the array against the tensor digest the trace
        records (so bfloat16 comes back typed). `verify()` re-executes too. A list in the module's
        result order, or for a JAX function, the function's own output structure. `progress`
        hears the download as it goes (a `Download`: which output, bytes so far of how many)."""
        if self.state != "done":
            self.wait(timeout=timeout)
        arrays = self._checked_outputs(progress)
        return self.function.unflatten(arrays) if self.function is not None else arrays

    def verify(
        self,
        *,
        execute: bool = True,
        trusted_keys: TrustedKeys | None = None,
        threads: int = 0,
        execute_on: str | None = None,
        timeout: float | None = 600.0,
        dispute: bool = False,
        cache_dir: bool | str | None = False,
        chain_id: int | None = None,
        contract: str | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> VerifyReport:
        """Verifies the job here, trusting nothing the node computed (waiting up to `timeout`
        seconds for it to finish; `progress` hears the compilation's stages and the
        re-execution, as verify_trace's does): the trace's signature, then the job's own module and
        inputs (fetched by digest, each checked) recompiled against the trace's hashes and,
        unless `execute=False`, re-executed on this machine with every output compared bit
        for bit (`execute_on`, `threads`: see `Client.verify`). The signature is checked
        against `trusted_keys`, else the client's, else the key the node serves (GET
        /v1/key): that binds the trace to this node, and the re-execution is what shows the
        result right. `report.ok` is False on any failed check; `report.verified` when it was
        also re-executed. `cache_dir`: this machine's compile cache to use (True: the default
        directory; False, the default: none), so a program compiled here before costs about
        one run to verify.

        A chain job's trace is also held to its binding (this job's number, `contract`,
        else the market the node names, and `chain_id`, else the client's chain's), and its
        result to the chain's: the result the chain finalized, and each revealed slot's
        (checks "chain result" and "slots", the slot that differs named).

        `dispute` (a chain job, with this client's chain submitter): verify as soon as the
        node's trace is served, before the job settles, and when the re-execution differs,
        challenge every revealed slot whose execution is not this one and play the disputes
        to their verdicts (`dispute`); `report.disputes` lists them."""
        disputing = dispute and self.on_chain
        if disputing:
            self._wait_for_trace(timeout)
        elif self.state != "done":
            self.wait(timeout=timeout)
        trace = self.trace()
        statement = self._statement(trace)
        record = self._record()
        if not record.get("module_digest"):
            raise IntegrityError(f"job {self.id}: the node has no record of its module")
        [module_digest] = self._digests([record["module_digest"]], "module_digest")
        module = self.client.get_blob(module_digest, max_bytes=self.client.limits.module_bytes)
        inputs = None
        if execute:
            recorded = statement.predicate.deterministic.inputs
            digests = self._digests(record.get("input_digests", []), "input_digests")
            if len(digests) != len(recorded):
                raise IntegrityError(f"job {self.id}: {len(digests)} input blobs, the trace records {len(recorded)}")
            version = statement.predicate.deterministic.digest_version
            inputs = [self._recorded_blob(d, r, version) for d, r in zip(digests, recorded, strict=True)]
        keys = trusted_keys if trusted_keys is not None else self.client.verification_keys()
        if self.on_chain:
            contract = contract or self.info.get("contract")
            chain = self.client.chain
            chain_id = chain_id if chain_id is not None else None if chain is None else chain.market.client.chain_id
        report = verify_trace(
            trace, keys, module_source=module, inputs=inputs, job_id=self.id,
            chain_id=chain_id, contract=contract, threads=threads, execute_on=execute_on, cache_dir=cache_dir, progress=progress,
        )  # fmt: skip
        if self.on_chain and report.ok:
            self._check_against_the_chain(report, statement)
        if disputing and report.reexecution is not None and not report.ok:
            summaries = self.dispute(
                execution_of(report.reexecution), graph_leaves_of(module, inputs=inputs), timeout=timeout, module=module, inputs=inputs
            )
            report.disputes = [s.to_dict() for s in summaries]
        return report

    def _check_against_the_chain(self, report: VerifyReport, statement: Statement) -> None:
        """The chain's word on this job, as the node reports the chain (or as the client's
        chain submitter reads it): whether the trace's result (the re-execution's, when it
        ran) is the one the chain finalized, and which revealed slots committed another."""
        checked = report.reexecution or statement
        result = result_digest_of([o.digest for o in checked.predicate.deterministic.outputs]).hex()
        whose = "the re-executed result" if report.reexecution is not None else "the trace's result"
        phase, chain_result = self.info.get("phase"), self.info.get("result_digest")
        if phase != "finalized":
            report.not_checked.append(f"chain result (job {self.id} is {phase}: the chain has finalized nothing yet)")
        elif not self.info.get("accepted"):
            report.not_checked.append(f"chain result (job {self.id} finalized with no accepted result: no majority)")
        else:
            same = chain_result == result
            said = "is the one the chain finalized" if same else f"is not the one the chain finalized ({str(chain_result)[:16]}...)"
            report.add("chain result", same, f"{whose} {result[:16]}... {said} for job {self.id}")
        slots = [s for s in self.info.get("slots") or [] if isinstance(s, dict) and s.get("revealed")]
        if not slots:
            report.not_checked.append(f"slots (no slot of job {self.id} has revealed a result)")
            return
        differ = [f"slot {i} ({s.get('node')})" for i, s in enumerate(slots) if s.get("result_digest") != result and not s.get("refuted")]
        refuted = [f"slot {i} ({s.get('node')})" for i, s in enumerate(slots) if s.get("refuted")]
        note = f"; refuted by a dispute: {', '.join(refuted)}" if refuted else ""
        if differ:
            report.add("slots", False, f"{', '.join(differ)} revealed another result than {whose} {result[:16]}...{note}")
        else:
            report.add("slots", True, f"every revealed slot that stands ({len(slots) - len(refuted)} of {len(slots)}) revealed {whose} {result[:16]}...{note}")

    def _wait_for_trace(self, timeout: float | None) -> None:
        """Until the node serves the chain job's trace (once it executed the job and the
        commit phase is over)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.refresh()
            if (self.info.get("local") or {}).get("envelope_digest") and self.info.get("revealed"):
                return
            if deadline is not None and time.monotonic() > deadline:
                raise self._timed_out(timeout or 0.0)
            time.sleep(0.25)

    def dispute(
        self, execution: Execution, graph: GraphLeaves, *, timeout: float | None = 600.0, poll_seconds: float = 0.5,
        module: bytes | None = None, inputs: Sequence[np.ndarray] | None = None,
    ) -> list[DisputeSummary]:  # fmt: skip
        """Challenges every revealed slot of this chain job whose execution differs from
        `execution` (the submitter's own: op-trace digests and result digest, e.g. from a
        re-execution), posting the game's bond from the chain submitter's account, and plays
        each dispute until its verdict: the bisection moves and the leaf opening are made
        here, then the step referee's moves (the contract evaluates one scalar operation) or
        the committee of staked nodes decides the instruction. `graph`: the job's graph
        leaves from this machine's compile (`graph_leaves_of`); `module` and `inputs`: the
        job's, from which the step referee's moves are computed here (the reference's element
        steps; without them, a dispute the step referee has is lost by the clock). Stays until
        every dispute it opened settled, or `timeout` (JobTimeout; the disputes go on without
        this side and are lost by the clock). Returns the disputes as they ended."""
        import tempfile

        from node.chain import DisputeGame, NodeRegistry, referees
        from node.chain.dispute_role import DisputeConfig, DisputeRole
        from node.chain.disputes import job_dispute_ids, summarize
        from node.chain.state import ChainState

        chain = self.client.chain
        if not self.on_chain or chain is None:
            raise ValueError("dispute needs a chain job and a client with a chain submitter")
        market = chain.market
        client = market.client
        registry = NodeRegistry(client, market.registry())
        game = DisputeGame(client, registry.game())
        job_id = int(self.id)
        start = client.block_number()
        knowledge = _SubmitterKnowledge(
            job_id, execution, graph, module, None if inputs is None else [np.asarray(x) for x in inputs]
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        with tempfile.TemporaryDirectory(prefix="vxla-dispute-") as scratch:
            me = _address_of(chain.account)
            state = ChainState(Path(scratch) / "chain.sqlite3", chain_id=client.chain_id, contract=market.address, account=me, start_block=start)
            try:
                committee, step_referee = referees(client, registry)
                role = DisputeRole(client, market, game, committee, chain.account, knowledge, state, DisputeConfig(), step_referee)
                while True:
                    role.step()
                    mine = [summarize(game, d) for d in job_dispute_ids(game, job_id, start) if game.get_dispute(d).challenger == me]
                    if mine and all(s.verdict is not None for s in mine):
                        return mine
                    if deadline is not None and time.monotonic() > deadline:
                        raise self._timed_out(timeout or 0.0)
                    time.sleep(poll_seconds)
            finally:
                state.close()

    def _checked_outputs(self, progress: Callable[[Download], None] | None = None) -> list[np.ndarray]:
        envelope = self.trace()
        statement = self._statement(envelope)
        try:
            verify_signatures(envelope, self.client.verification_keys())
        except VerificationError as exc:
            raise IntegrityError(f"job {self.id}: the trace's signature does not verify ({exc})") from None
        records = statement.predicate.deterministic.outputs
        digests = self._digests(self._record().get("output_digests", []), "output_digests")
        # The node's outputs must be the ones the quorum settled on.
        if self.on_chain and result_digest_of([r.digest for r in records]).hex() != self.info.get("result_digest"):
            raise IntegrityError(f"chain job {self.id}: the node's outputs are not the finalized result")
        if len(digests) != len(records):
            raise IntegrityError(f"job {self.id}: {len(digests)} output blobs, the trace records {len(records)}")
        version = statement.predicate.deterministic.digest_version
        sizes = [npy_size_bound(record) - NPY_HEADER_BYTES for record in records]  # each output's element bytes
        total, arrays = sum(sizes), []
        for number, (digest, record) in enumerate(zip(digests, records, strict=True)):
            heard = None if progress is None else _download_heard(progress, record.name, number, len(records), sum(sizes[:number]), total)
            arrays.append(self._recorded_blob(digest, record, version, heard))
        if progress is not None:
            progress(Download("", len(records), len(records), total, total))
        return arrays


# Seconds after the reveal phase in which a job's results may be challenged, unless the
# submitter or the call says otherwise (at least the market's minChallengeWindow).
DEFAULT_CHALLENGE_WINDOW_S = 60


@dataclass(frozen=True)
class GraphCommitment:
    """What a job posts of its program's graph (docs/disputes.md): the root and n, the
    op-trace leaves."""

    root: bytes
    trace_leaves: int


def _compiled_graph(module: str | Path | bytes, config: Any, inputs: Sequence[TensorLike] | None = None) -> Any:
    """compiler.api's graph commitment of an HLO module (text or its file) on the job's
    `inputs` (the element programs of the instructions reading them hold their digests;
    without them those instructions have none), computed here: its pass pipeline runs
    (`config`: a compiler config, default configs/compiler.toml's, which the nodes pin too),
    no machine code is made. The inputs are read as a node reads them (their .npy bytes bound
    to the parameters). ValueError naming the problem when the module does not parse or
    compile, or an input does not fit its parameter."""
    from compiler.api import (
        ArrayShape,
        CompilerError,
        bind_arguments,
        graph_commitment,
        load_config,
        load_program,
    )

    try:
        program = load_program(_module_bytes(module).decode("utf-8"))
        arrays = None
        if inputs is not None:
            parameters = program.parameter_shapes
            arrays = []
            for k, tensor in enumerate(inputs):
                shape = parameters[k] if k < len(parameters) else None
                dtype, dims = (shape.dtype.numpy, shape.dims) if isinstance(shape, ArrayShape) else (None, None)
                arrays.append(read_npy(_tensor_bytes(tensor), dtype, dims))
            arrays = bind_arguments(parameters, arrays)
        return graph_commitment(program, config if config is not None else load_config(), arrays)
    except UnicodeDecodeError:
        raise ValueError("module: not UTF-8 text") from None
    except CompilerError as exc:
        raise ValueError(f"module: {exc}") from None


def graph_commitment_of(module: str | Path | bytes, config: Any = None, inputs: Sequence[TensorLike] | None = None) -> GraphCommitment:
    """The graph commitment of an HLO module (text or its file) on the job's `inputs`,
    computed here (see `_compiled_graph`): what a chain job posts."""
    commitment = _compiled_graph(module, config, inputs)
    return GraphCommitment(bytes.fromhex(commitment.root), commitment.trace_leaves)


def graph_leaves_of(module: str | Path | bytes, config: Any = None, inputs: Sequence[TensorLike] | None = None) -> GraphLeaves:
    """The graph leaves of an HLO module on the job's `inputs` (what a dispute opens a leaf
    with), computed here like `graph_commitment_of`."""
    leaves = [record.leaf() for record in _compiled_graph(module, config, inputs).records]
    return GraphLeaves(tuple(leaves[:-1]), leaves[-1])


def execution_of(statement: Statement) -> Execution:
    """The execution a statement commits to on chain: its op-trace digests (none without an op
    trace) and its result digest."""
    op_trace = statement.predicate.deterministic.op_trace
    digests = () if op_trace is None else tuple(bytes.fromhex(i.digest) for i in op_trace.instructions)
    return Execution(digests, result_digest_of([o.digest for o in statement.predicate.deterministic.outputs]))


@dataclass(frozen=True)
class _SubmitterKnowledge:
    """What a submitter disputing its job knows: its own execution and the graph, and the
    module and inputs it answers the step referee from."""

    job_id: int
    mine: Execution
    graph_leaves: GraphLeaves
    module: bytes | None = None  # the job's, to answer the step referee (with `inputs`)
    inputs: list[np.ndarray] | None = None
    sides: dict[int, Any] = field(default_factory=dict)

    def executed_jobs(self) -> list[int]:
        return [self.job_id]

    def execution(self, job_id: int) -> Execution | None:
        return self.mine if job_id == self.job_id else None

    def graph(self, job: Any, job_id: int) -> GraphLeaves:
        return self.graph_leaves

    def vote(self, job: Any, job_id: int, index: int) -> bytes:
        raise NodeError("a submitter is not a committee member")

    def instruction(self, job: Any, job_id: int, index: int) -> Any:
        """What the submitter holds of instruction `index` under the step referee: the
        reference's run of its module on its inputs, here (node/step_holding.py)."""
        if self.module is None or self.inputs is None:
            raise NodeError("the step referee has the instruction: disputing needs the job's module and inputs (verify(dispute=True) passes them)")
        if index not in self.sides:
            from compiler.api import graph_commitment, load_config, load_program, optimize
            from node.step_holding import reference_side

            program = load_program(self.module.decode("utf-8"))
            config = load_config()
            record = graph_commitment(program, config, self.inputs).records[index]
            if record.leaf() != self.graph_leaves.leaf(index):
                raise NodeError(f"instruction {index}: this machine's graph leaf is not the job's")
            self.sides[index] = reference_side(optimize(program, config), record, self.inputs, index)
        return self.sides[index]


@dataclass
class ChainSubmitter:
    """How a submitter posts jobs on chain: the market, its own account, the reward it
    escrows, how long nodes get to commit and then to reveal, and how long after that the
    results may be challenged."""

    market: JobMarket
    account: Sender
    reward_wei: int = 10**16
    commit_window_s: int = 60
    reveal_window_s: int = 60
    challenge_window_s: int = DEFAULT_CHALLENGE_WINDOW_S

    def post(
        self, program_digest: bytes, inputs_digest: bytes, k: int, graph: GraphCommitment, challenge_window_s: int | None = None
    ) -> int:
        """Posts the job with deadlines from the chain's clock (the time its post runs at,
        however long the chain sat idle), naming `graph` and a challenge window of
        `challenge_window_s` (default: this submitter's); returns its id."""
        now = self.market.client.next_block_time()
        commit = now + self.commit_window_s
        window = self.challenge_window_s if challenge_window_s is None else challenge_window_s
        return self.market.post_job(
            self.account, program_digest, inputs_digest, k, commit, commit + self.reveal_window_s, self.reward_wei,
            graph_root=graph.root, trace_leaves=graph.trace_leaves, challenge_window=window,
        )  # fmt: skip


class Client:
    """An HTTP client for one node. `trusted_keys` (public keys) are what `verify` checks
    signatures against by default."""

    def __init__(
        self,
        url: str,
        *,
        trusted_keys: TrustedKeys | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        chain: ChainSubmitter | None = None,
        token: str | None = None,
        limits: AnswerLimits | None = None,
    ) -> None:
        """`timeout`: seconds one read from the node may wait; `limits`: the most an answer
        may hold and how long one request may take in all (default: DEFAULT_LIMITS);
        `transport` replaces the network (httpx.MockTransport in tests, or an ASGI app: the
        deadline is then checked as each chunk arrives); `chain`: post jobs with redundancy
        on this market (see the module docstring); `token`: the bearer token a node that
        requires one gave you (`vxla tokens add`)."""
        self.url = url.rstrip("/")
        self.chain = chain
        self.trusted_keys = trusted_keys
        self.limits = limits if limits is not None else DEFAULT_LIMITS
        self._node_key: Ed25519PublicKey | None = None
        headers = {"Authorization": f"Bearer {token}"} if token else None
        transport = transport if transport is not None else deadline_transport()
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport, headers=headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(
        self, method: str, path: str, *, max_bytes: int, what: str, max_seconds: float | None = None, on_bytes: Callable[[int], None] | None = None, **kwargs: Any
    ) -> bytes:
        """The body of the node's 2xx answer, at most `max_bytes` (`what` it should be names
        it in errors), all of it within `max_seconds` (default: the limits' transfer_seconds).
        RequestRefused for a 4xx or 5xx, AnswerRefused for an answer past its bounds or a
        redirect (never followed), NodeUnreachable for no answer."""
        seconds = self.limits.transfer_seconds if max_seconds is None else max_seconds
        try:
            answer = fetch(self._http, method, path, max_bytes=max_bytes, max_seconds=seconds, what=what, on_bytes=on_bytes, **kwargs)
        except httpx.HTTPError as exc:  # the SDK's own error, with the URL, not httpx's
            raise NodeUnreachable(f"cannot reach the node at {self.url} ({type(exc).__name__}: {exc})") from exc
        if answer.status >= 400:
            raise RequestRefused(answer.status, _refusal_detail(answer.body))
        if not 200 <= answer.status < 300:
            location = answer.headers.get("location")
            to = f" to {location}" if location else ""
            raise AnswerRefused(f"{self.url}{path}: answered {answer.status}{to}; a node's routes do not redirect, and the client follows no redirect")
        return answer.body

    def _json(self, method: str, path: str, *, max_seconds: float | None = None, **kwargs: Any) -> dict[str, Any]:
        body = self._request(method, path, max_bytes=self.limits.json_bytes, what="answer", max_seconds=max_seconds, **kwargs)
        try:
            answer = json.loads(body)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep to parse
            raise AnswerRefused(f"{self.url}{path}: not JSON ({exc})") from None
        if not isinstance(answer, dict):
            raise AnswerRefused(f"{self.url}{path}: not a JSON object")
        return answer

    def put_blob(self, data: bytes) -> str:
        """Uploads `data`; returns its digest."""
        digest = sha256_hex(data)
        self._request("PUT", f"/v1/blobs/{digest}", content=data, max_bytes=self.limits.json_bytes, what="answer")
        return digest

    def get_blob(self, digest: str, max_bytes: int | None = None, on_bytes: Callable[[int], None] | None = None) -> bytes:
        """The bytes stored under `digest`, checked against it: at most `max_bytes` (default:
        the client's `limits.tensor_bytes`), AnswerRefused past that; `on_bytes` hears how
        many have arrived, as they do."""
        bound = self.limits.tensor_bytes if max_bytes is None else max_bytes
        data = self._request("GET", f"/v1/blobs/{digest}", max_bytes=bound, what="blob", on_bytes=on_bytes)
        if sha256_hex(data) != digest:
            raise IntegrityError(f"blob {digest}: the node sent bytes with another digest")
        return data

    def submit(
        self,
        program: str | Path | bytes | Callable[..., Any],
        *arguments: Any,
        redundancy: int = 1,
        challenge_window: int | None = None,
        debug_info: bool = False,
    ) -> Job:
        """Runs `program` on a node: HLO text (or its file) with one sequence of inputs
        (arrays or .npy paths, in parameter order), `submit("m.hlo", [x, w])`; or a JAX
        function with its arguments, `submit(f, params, x)` (the jax extra), exported to
        HLO text here, each input named by its pytree path; `debug_info=True` keeps JAX's
        metadata in it (op names, and the files and lines of your code), so that the node's
        errors and pictures point at your code, at the cost of showing the node those paths. Small inputs (INLINE_INPUT_BYTES in all) go in the job request with
        the module, so the job is one request and a refused one leaves nothing on the node;
        larger ones are uploaded as blobs first. With a chain configured, the job is posted
        on chain for `redundancy` nodes instead, with its graph commitment (computed here)
        and `challenge_window` seconds after its reveal phase for challenges (default: the
        ChainSubmitter's `challenge_window_s`); without a chain a challenge window is an
        error (ValueError)."""
        if challenge_window is not None and self.chain is None:
            raise ValueError("challenge_window: only a job posted on chain has one (configure a ChainSubmitter)")
        function = None
        if callable(program):
            function = export_function(program, *arguments, debug_info=debug_info)
            module, inputs = function.hlo_text.encode("utf-8"), list(function.arguments)
        else:
            if len(arguments) > 1:
                raise TypeError("submit(module, inputs): give the inputs as one sequence")
            if debug_info:
                raise TypeError("debug_info: only for a JAX function, which is exported here (HLO text is sent as it is)")
            module, inputs = _module_bytes(program), list(arguments[0]) if arguments else []
        job = self._submit(module, inputs, redundancy, challenge_window)
        job.function = function
        return job

    def _submit(self, module: bytes, inputs: Sequence[TensorLike], redundancy: int, challenge_window: int | None = None) -> Job:
        data = [_tensor_bytes(t) for t in inputs]
        try:
            text = module.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError("module: not UTF-8 text") from None
        if self.chain is None and sum(map(len, data)) <= INLINE_INPUT_BYTES:
            # Small inputs travel in the job request: one request, and nothing is stored
            # unless the job is taken.
            return self._new_job(self._json("POST", "/v1/jobs", json=inline_job_request(text, data, redundancy)))
        # Before anything is uploaded: a module that does not compile is refused here.
        graph = graph_commitment_of(module, inputs=inputs) if self.chain is not None else None
        digests = [self.put_blob(d) for d in data]
        if self.chain is not None:
            assert graph is not None
            self.put_blob(module)
            self.put_blob(inputs_manifest(digests))
            job_id = self.chain.post(*chain_digests(module, digests), redundancy, graph, challenge_window)
            # The job is on chain and paid for: its id is the caller's even if the node
            # cannot tell its state just now (posting again would pay twice).
            job = Job(self, str(job_id), on_chain=True)
            with contextlib.suppress(NodeUnreachable, RequestRefused, AnswerRefused):
                job.refresh()
            return job
        return self._new_job(self._json("POST", "/v1/jobs", json=JobRequest.stored(text, digests, redundancy).body()))

    def _new_job(self, info: dict[str, Any]) -> Job:
        """The job a node's answer to `POST /v1/jobs` describes."""
        if not isinstance(info.get("id"), str) or not info["id"]:
            raise AnswerRefused(f"{self.url}/v1/jobs: the answer names no job id")
        return Job(self, info["id"], info)

    def job(self, job_id: str | int) -> Job:
        """A job by id, its current state fetched: a chain job's id is its number on the
        JobMarket, a node's own job's the 32 hex digits the node gave it."""
        text = str(job_id)
        return Job(self, text, on_chain=is_chain_job_id(text)).refresh()

    def jobs(self, state: str | None = None, limit: int = 50, *, chain: bool = False) -> list[dict[str, Any]]:
        """The node's jobs, newest first, as it records them (GET /v1/jobs): `state` filters,
        `limit` caps the count (pages are followed). `chain=True`: the chain jobs the node has
        seen instead, each with its state of it and why (GET /v1/chain/jobs)."""
        path = "/v1/chain/jobs" if chain else "/v1/jobs"
        found: list[dict[str, Any]] = []
        before: str | int | None = None
        while len(found) < limit:
            params: dict[str, Any] = {"limit": min(limit - len(found), 1000)}
            if state is not None:
                params["state"] = state
            if before is not None:
                params["before"] = before
            page = self._json("GET", path, params=params)
            if not isinstance(page.get("jobs"), list):
                raise AnswerRefused(f"{self.url}{path}: not a page of jobs")
            found.extend(page["jobs"])
            before = page.get("next")
            if before is None:
                break
        return found

    def verification_keys(self) -> TrustedKeys:
        """What traces from this node are checked against: the client's trusted keys, else
        the key the node serves (asked once)."""
        if self.trusted_keys is not None:
            return self.trusted_keys
        if self._node_key is None:
            self._node_key = self.node_key()
        return [self._node_key]

    def node_key(self) -> Ed25519PublicKey:
        """The public key the node signs its traces with (GET /v1/key), checked against the
        key id it serves beside it."""
        answer = self._json("GET", "/v1/key")
        try:
            key = parse_public_key(str(answer.get("public_key", "")))
        except KeyFileError as exc:
            raise IntegrityError(f"{self.url}: /v1/key: {exc}") from None
        if key_id(key) != answer.get("key_id"):
            raise IntegrityError(f"{self.url}: /v1/key: the key id is not the key's")
        return key

    def verify(
        self,
        trace: str | bytes,
        module: str | Path | bytes,
        inputs: Sequence[TensorLike] = (),
        *,
        trusted_keys: TrustedKeys | None = None,
        threads: int = 0,
        execute_on: str | None = None,
    ) -> VerifyReport:
        """Verifies `trace` here, without trusting the node: signatures against the trusted
        keys, then recompiling `module` for the trace's target and re-executing it on
        `inputs` on a target this host runs (`execute_on`, see node.tracing.verify.verify_trace)."""
        keys = trusted_keys if trusted_keys is not None else self.trusted_keys
        if keys is None:
            raise ValueError("verify needs trusted_keys (the node's public key)")
        return verify_trace(
            trace, keys, module_source=_module_bytes(module),
            inputs=[_as_array(t) for t in inputs], threads=threads, execute_on=execute_on,
        )  # fmt: skip


def _refusal_detail(body: bytes) -> str:
    """What a node's refusal says: the `detail` of its JSON, else its text."""
    try:
        answer = json.loads(body)
        if isinstance(answer, dict) and "detail" in answer:
            return str(answer["detail"])
    except (ValueError, RecursionError):
        pass
    return body.decode("utf-8", errors="replace")


def is_chain_job_id(job_id: str) -> bool:
    """Whether `job_id` names a chain job (its JobMarket number) rather than a node's own
    job (32 hex digits, see node.daemon.store)."""
    return job_id.isdigit() and len(job_id) < 32


def connect(target: str | Path, *, trusted_keys: TrustedKeys | None = None, timeout: float = 60.0, token: str | None = None) -> Client:
    """A client for `target`: a node's URL (`http://...`, or `host:port`), or a devnet directory (`vxla
    devnet up`), whose first node it talks to and whose chain it posts jobs on (so
    `redundancy` above 1 works), with the devnet's submitter account. `token`: the node's
    bearer token, by default $VXLA_TOKEN (none when unset)."""
    token = token if token is not None else os.environ.get(TOKEN_ENV) or None
    text = str(target)
    if "://" in text or re.fullmatch(r"[\w.-]+:\d+/?", text):  # a URL, or host:port
        return Client(node_url(text), trusted_keys=trusted_keys, timeout=timeout, token=token)
    state = DevnetState.load(Path(target))
    url = state.first_node_url()
    chain = ChainClient(Web3(HTTPProvider(state.rpc_url, request_kwargs={"timeout": 30})))
    submitter = ChainSubmitter(JobMarket(chain, state.job_market), state.submitter)
    return Client(url, trusted_keys=trusted_keys, timeout=timeout, chain=submitter, token=token)
