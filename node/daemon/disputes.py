"""What a node knows of a job for its disputes (node/chain/dispute_role.py's
DisputeKnowledge), from its chain executor: its own execution (the signed trace it stored),
the graph leaves of its own compile (in an execution process, never in the daemon), and the
digest it votes as a committee member.

A member decides one instruction (docs/disputes.md, "The committee referee"):

- If it holds its own execution of the job (it ran a slot or verified it), it votes its own
  digest at the instruction: that costs nothing more.
- Otherwise, the fast path: it reads the committee's CommitteeDrawn event (the instruction's
  graph leaf and the digests of the op-trace leaves it reads, which the challenger proved on
  chain; found among the events of the vote window only), fetches each operand's value from
  the two parties (`GET /v1/chain/jobs/{id}/leaves/{index}` on the endpoints they registered,
  with the node's peer address policy and bounded transfers), takes a value only when its
  digest (`compiler.api.leaf_digest`) is the one on chain, and evaluates that one instruction
  from them in an execution process (`compiler.api.evaluate_leaf`, under its own compile,
  whose graph leaf at the index must be the dispute's). It votes that digest.
- When neither party serves a valid value of some operand (an error status, a timeout, a
  digest that is not the chain's, an address the policy refuses), it says so in one line
  naming the dispute, the operand and why each party failed, and decides by re-executing the
  whole job in an execution process and voting its own digest at the instruction, as it does
  when the event cannot be found or the evaluation is refused.

The issue's rule was "whoever withholds them loses". With this fallback, withholding an
operand does not help the withholder (the members still vote, from the whole job), it only
makes them spend a full run; and an honest party whose endpoint is down a moment is not
punished for it. Fetching is bounded by a share of the time left to vote, so a party that
answers slowly cannot make the members miss the vote deadline.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from attest import Statement
from attest.commitment import commitment_root
from node.chain import (
    Committee,
    DisputeGame,
    JobMarket,
    NodeRegistry,
    OnChainJob,
    Stage,
    fetch_events,
)
from node.chain.disputes import Execution, GraphLeaves
from node.chain.watcher import ChainJob, JobPending
from node.daemon.chain_executor import ChainExecutor, leaf_digest_of
from node.daemon.peer_addresses import PeerAddressRefused
from node.daemon.sandbox import MAX_LEAVES, LeafBuffer
from node.daemon.step_disputes import ServedInstruction
from node.errors import JobRejected, NodeError
from node.tracing.verify import parse_envelope
from node.transfers import AnswerRefused, fetch

log = logging.getLogger("vxla.node.disputes")

# Blocks read per request when looking back for a committee's CommitteeDrawn event; the look
# stops at the first block older than the vote window.
DRAWN_CHUNK = 256
# The share of the time left to vote that fetching operands may take (the rest is left to
# evaluate, or to re-execute the whole job when fetching fails), and its floor.
FETCH_SHARE = 1 / 3
MIN_FETCH_S = 5.0
# A leaf's JSON description, and the buffers one leaf may have.
DESCRIPTION_BYTES = 1 << 20
MAX_BUFFERS = 4096
# Instructions remembered as decided by the whole job, by (job, instruction).
FALLBACKS_KEPT = 256


@dataclass(frozen=True)
class DrawnLeaf:
    """What a committee decides, as its CommitteeDrawn event says: the instruction's graph
    leaf and its op-trace operands (trace index, digest proved on chain), the parties (each
    with its part, e.g. "challenger in dispute 3") and the vote deadline (chain time). Where
    several committees this node may vote in decide the same instruction of the same job from
    the same operands (a vote is the same in each), one DrawnLeaf stands for them all: their
    disputes newest first, every party of theirs (any of them may serve the values, which are
    checked by digest), the earliest deadline."""

    disputes: tuple[int, ...]
    index: int
    graph_leaf: bytes
    operands: tuple[tuple[int, bytes], ...]
    parties: tuple[tuple[str, str], ...]  # (part, address)
    deadline: int

    @property
    def named(self) -> str:
        """The dispute(s), for a log line."""
        return ("dispute " if len(self.disputes) == 1 else "disputes ") + ", ".join(map(str, self.disputes))


class LeafUnavailable(NodeError):
    """A party did not serve a valid value of an operand; the message says why."""


class ExecutorKnowledge:
    """DisputeKnowledge from the daemon's ChainExecutor. `account`: this node's chain address,
    to pick its own committees among those drawn on the same instruction (without it, a
    committee on the same instruction of the same job with other operands makes the node
    decide by re-executing the whole job)."""

    def __init__(self, executor: ChainExecutor, market: JobMarket, chain_id: int, account: str | None = None) -> None:
        self.executor = executor
        self.market = market
        self.chain_id = chain_id
        self.account = account
        self._executions: dict[str, Execution] = {}  # by the signed trace's envelope digest
        self._registry: NodeRegistry | None = None
        self._game: DisputeGame | None = None
        self._committee: Committee | None = None
        self._vote_window: int | None = None
        self._lock = threading.Lock()
        self._voting: dict[tuple[int, int], Future[bytes | None]] = {}  # fast paths under way
        self._fallback: set[tuple[int, int]] = set()  # (job, instruction) decided by the whole job
        self._instructions: dict[tuple[int, int], ServedInstruction] = {}  # under the step referee
        self._threads = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vxla-leaf-vote")

    @property
    def contract(self) -> str:
        return self.market.address

    def executed_jobs(self) -> list[int]:
        return self.executor.state.executed_job_ids(self.contract)

    def execution(self, job_id: int) -> Execution | None:
        record = self.executor.record(self.contract, job_id)
        if record is None:
            return None
        known = self._executions.get(record.envelope_digest)
        if known is not None:
            return known
        blobs = self.executor.store.blobs
        if not blobs.has(record.envelope_digest):
            raise JobRejected(f"the signed trace of chain job {job_id} is no longer stored")
        statement = Statement.from_json_bytes(parse_envelope(blobs.get(record.envelope_digest)).payload)
        op_trace = statement.predicate.deterministic.op_trace
        digests = () if op_trace is None else tuple(bytes.fromhex(i.digest) for i in op_trace.instructions)
        execution = self._executions[record.envelope_digest] = Execution(digests, bytes.fromhex(record.result_digest))
        return execution

    def graph(self, job: OnChainJob, job_id: int) -> GraphLeaves:
        summary = self.executor.graph(self.chain_job(job, job_id))
        leaves = summary.leaves
        graph = GraphLeaves(tuple(leaves[:-1]), leaves[-1])
        if graph.root.hex() != summary.root or commitment_root(list(leaves[:-1]), leaves[-1]) != summary.root:
            raise JobRejected(f"job {job_id}: the graph leaves of this node's compile do not give its own root")
        return graph

    def vote(self, job: OnChainJob, job_id: int, index: int) -> bytes:
        """This node's digest at instruction `index` (n: the result): from its own execution
        when it holds one, else from the instruction alone evaluated from the operands the
        parties serve, else from its own execution of the job run now (the module
        docstring). JobPending while either is under way (in the background)."""
        if self.executor.record(self.contract, job_id) is None and (job_id, index) not in self._fallback:
            digest = self._fast_vote(job, job_id, index)  # JobPending while under way
            if digest is not None:
                return digest
            with self._lock:
                self._fallback.add((job_id, index))
                while len(self._fallback) > FALLBACKS_KEPT:
                    self._fallback.pop()
        if self.executor.record(self.contract, job_id) is None:
            self.executor.execute(self.chain_job(job, job_id))  # JobPending until recorded
        execution = self.execution(job_id)
        if execution is None:
            raise JobRejected(f"job {job_id} ran but left no record")
        if not 0 <= index <= len(execution.digests):
            raise JobRejected(f"job {job_id}: instruction {index} is not in this node's trace of {len(execution.digests)}")
        return execution.digest_at(index)

    def instruction(self, job: OnChainJob, job_id: int, index: int) -> ServedInstruction:
        """What this node holds of instruction `index` for the step referee (node/daemon/
        step_disputes.py); JobPending while the graph of its compile is computed."""
        key = (job_id, index)
        with self._lock:
            known = self._instructions.get(key)
        if known is not None:
            return known
        execution = self.execution(job_id)
        if execution is None:
            raise JobRejected(f"job {job_id}: this node holds no execution of it")
        if not 0 <= index < len(execution.digests):
            raise JobRejected(f"job {job_id}: instruction {index} is not in this node's trace of {len(execution.digests)}")
        graph_leaf = self.graph(job, job_id).leaf(index)  # JobPending while compiling
        chain_job = self.chain_job(job, job_id)

        def ask(element: int | None, step: int | None) -> tuple[dict, list[bytes]]:
            return self.executor.steps(chain_job, index, graph_leaf, element, step)

        known = ServedInstruction(job_id, index, execution.digest_at(index), ask, self._threads)
        with self._lock:
            self._instructions[key] = known
            while len(self._instructions) > FALLBACKS_KEPT:
                self._instructions.pop(next(iter(self._instructions)))
        return known

    # -- the fast path: one instruction from the parties' operand values -------------------------

    def _fast_vote(self, job: OnChainJob, job_id: int, index: int) -> bytes | None:
        """The fast path's digest, None to fall back; the first call reads the chain (here,
        in the caller's thread) and starts the fetch and evaluation in the background:
        JobPending until they are done."""
        key = (job_id, index)
        with self._lock:
            future = self._voting.get(key)
        if future is None:
            drawn = self._drawn(job_id, index)
            if drawn is None:
                return None
            registry = self._bindings()[0]
            endpoints = {party: registry.get_node(party).endpoint for _, party in drawn.parties}
            seconds_left = drawn.deadline - self.market.client.next_block_time()
            budget = max(MIN_FETCH_S, seconds_left * FETCH_SHARE)
            chain_job = self.chain_job(job, job_id)
            with self._lock:
                self._voting[key] = self._threads.submit(self._decide, chain_job, drawn, endpoints, budget)
            raise JobPending()
        if not future.done():
            raise JobPending()
        with self._lock:
            self._voting.pop(key, None)
        try:
            return future.result()
        except Exception as error:  # an internal error of the fast path: the whole job decides
            log.warning("instruction %d of job %d: evaluating it alone failed (%s); re-executing the whole job instead", index, job_id, error)
            return None

    def _decide(self, job: ChainJob, drawn: DrawnLeaf, endpoints: dict[str, str], budget_s: float) -> bytes | None:
        """Fetches the operands and evaluates the instruction (in a background thread)."""
        give_up = time.monotonic() + budget_s
        values: dict[int, list[LeafBuffer]] = {}
        left = self.executor.pool.limits.max_job_memory_bytes  # operand bytes, all together
        indices = [j for j, _ in drawn.operands]
        for position, (j, digest) in enumerate(drawn.operands):
            failures = []
            also = indices[position + 1 :][: MAX_LEAVES // 4]
            parties = drawn.parties
            for turn, (part, party) in enumerate(parties):
                endpoint = endpoints.get(party, "")
                # Each party gets its share of the time left: a slow one leaves the other time.
                share = time.monotonic() + (give_up - time.monotonic()) / (len(parties) - turn)
                try:
                    buffers = self._fetch_leaf(endpoint, job.job_id, j, digest, also, share, left)
                except LeafUnavailable as why:
                    failures.append(f"{part} {party} at {endpoint or '(no endpoint)'}: {why}")
                    continue
                values[j] = buffers
                left -= sum(len(b.data) for b in buffers)
                break
            if j not in values:
                log.warning(
                    "%s: no party served operand %d (digest %s) of instruction %d of job %d (%s); "
                    "deciding by re-executing the whole job instead",
                    drawn.named, j, digest.hex(), drawn.index, job.job_id, "; ".join(failures),
                )  # fmt: skip
                return None
        try:
            digest = self.executor.evaluate_leaf(job, drawn.index, drawn.graph_leaf, values, {j: d.hex() for j, d in drawn.operands})
        except (JobRejected, ValueError) as error:
            log.warning(
                "%s: instruction %d of job %d could not be evaluated alone (%s); deciding by re-executing the whole job instead",
                drawn.named, drawn.index, job.job_id, error,
            )  # fmt: skip
            return None
        log.info("%s: instruction %d of job %d evaluated alone from %d operand value(s): %s", drawn.named, drawn.index, job.job_id, len(values), digest.hex()[:16])
        return digest

    def _fetch_leaf(self, endpoint: str, job_id: int, index: int, digest: bytes, also: list[int], give_up: float, max_bytes: int) -> list[LeafBuffer]:
        """Leaf `index`'s value from the node at `endpoint`, whose digest must be `digest`;
        LeafUnavailable saying why not."""
        if not endpoint:
            raise LeafUnavailable("it registered no endpoint")
        base = f"{endpoint.rstrip('/')}/v1/chain/jobs/{job_id}/leaves/{index}"
        query = f"?also={','.join(map(str, also))}" if also else ""
        description = self._get(base + query, DESCRIPTION_BYTES, give_up, "leaf description")
        try:
            described = json.loads(description)
            shapes = [(str(b["dtype"]), tuple(int(d) for d in b["shape"])) for b in described["buffers"]]
            if not 1 <= len(shapes) <= MAX_BUFFERS or any(d < 0 for _, shape in shapes for d in shape):
                raise ValueError("buffer count or dimensions out of range")
            bounds = [LeafBuffer.bound(dtype, shape) for dtype, shape in shapes]
        except (ValueError, KeyError, TypeError) as error:
            raise LeafUnavailable(f"its description of the leaf is not one ({type(error).__name__})") from None
        if sum(bounds) > max_bytes:
            raise LeafUnavailable(f"the value described takes {sum(bounds)} bytes, over the {max_bytes} left of limits.max_job_memory_bytes")
        buffers = []
        for k, ((dtype, shape), bound) in enumerate(zip(shapes, bounds, strict=True)):
            data = self._get(f"{base}/{k}", bound, give_up, f"buffer {k}")
            buffer = LeafBuffer(dtype, shape, data)
            try:
                buffer.array()
            except ValueError as error:
                raise LeafUnavailable(f"buffer {k} is not {dtype}{list(shape)} in .npy ({error})") from None
            buffers.append(buffer)
        served = leaf_digest_of(buffers)
        if served != digest.hex():
            raise LeafUnavailable(f"digest mismatch: it served a value of digest {served}, the chain holds {digest.hex()}")
        return buffers

    def _get(self, url: str, max_bytes: int, give_up: float, what: str) -> bytes:
        """A 200 answer's body within bounds, else LeafUnavailable saying why."""
        fetcher = self.executor.fetcher
        seconds = give_up - time.monotonic()
        if seconds <= 0:
            raise LeafUnavailable("no time left to fetch (a share of the vote window)")
        try:
            fetcher.policy.check(url)
            answer = fetch(
                fetcher.http, "GET", url, max_bytes=max_bytes, max_seconds=seconds, what=what,
                on_answer=fetcher.policy.check_connected, timeout=seconds,
            )  # fmt: skip
        except PeerAddressRefused as error:
            raise LeafUnavailable(f"address refused: {error}") from None
        except AnswerRefused as error:
            raise LeafUnavailable(str(error)) from None
        except httpx.TimeoutException:
            raise LeafUnavailable(f"timed out asking for the {what}") from None
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            raise LeafUnavailable(f"unreachable ({type(error).__name__}: {error})") from None
        if answer.status != 200:
            raise LeafUnavailable(f"HTTP {answer.status} for the {what}{_detail(answer.body)}")
        return answer.body

    # -- the committee's event -------------------------------------------------------------------

    def _bindings(self) -> tuple[NodeRegistry, DisputeGame, Committee]:
        """The registry, game and committee the market is wired to (read once)."""
        if self._registry is None or self._game is None or self._committee is None:
            client = self.market.client
            registry = NodeRegistry(client, self.market.registry())
            self._game = DisputeGame(client, registry.game())
            self._committee = Committee(client, registry.committee())
            self._registry = registry
        return self._registry, self._game, self._committee

    def _drawn(self, job_id: int, index: int) -> DrawnLeaf | None:
        """The committee on instruction `index` of the job that this node may still vote in,
        from the CommitteeDrawn events of the vote window (looked for from the newest block
        back, DRAWN_CHUNK blocks a read, to the first block older than the window or the
        node's start block); None, said, when there is none or several with other operands."""
        _, game, committee = self._bindings()
        client = self.market.client
        if self._vote_window is None:
            self._vote_window = committee.vote_window()
        now = client.next_block_time()
        since = now - self._vote_window  # a committee drawn before this is past its deadline
        floor = max(0, self.executor.state.start_block)
        found: dict[tuple[bytes, tuple[tuple[int, bytes], ...]], list[DrawnLeaf]] = {}
        stop = client.block_number()
        while stop >= floor:
            start = max(floor, stop - DRAWN_CHUNK + 1)
            for event in fetch_events(client, committee.contract, start, stop, names=("CommitteeDrawn",)):
                drawn = self._candidate(event.args, game, job_id, index, now)
                if drawn is not None:
                    found.setdefault((drawn.graph_leaf, drawn.operands), []).append(drawn)
            if start == floor or int(client.w3.eth.get_block(start)["timestamp"]) < since:
                break
            stop = start - 1
        if len(found) == 1:
            same = sorted(next(iter(found.values())), key=lambda drawn: drawn.disputes, reverse=True)
            parties = {}  # by address, the first part named
            for drawn in same:
                for part, address in drawn.parties:
                    parties.setdefault(address, part)
            first = same[0]
            return DrawnLeaf(
                tuple(dict.fromkeys(d for drawn in same for d in drawn.disputes)), index, first.graph_leaf, first.operands,
                tuple((part, address) for address, part in parties.items()), min(drawn.deadline for drawn in same),
            )  # fmt: skip
        reason = "no committee on it found in the vote window" if not found else f"{len(found)} committees on it with other operands"
        log.warning("instruction %d of job %d: %s; deciding by re-executing the whole job instead", index, job_id, reason)
        return None

    def _candidate(self, args: dict, game: DisputeGame, job_id: int, index: int, now: int) -> DrawnLeaf | None:
        """The committee an event draws, if it is one this node may vote in on the instruction."""
        members = [str(m).lower() for m in args["members"]]
        if int(args["index"]) != index or int(args["deadline"]) <= now:
            return None
        if self.account is not None and self.account.lower() not in members:
            return None
        dispute_id = int(args["disputeId"])
        d = game.get_dispute(dispute_id)
        if d.job_id != job_id or d.stage != Stage.REFEREE:
            return None
        graph_leaf, digests = bytes(args["graphLeaf"]), [bytes(o) for o in args["operands"]]
        tail = graph_leaf[32:]
        if len(graph_leaf) < 32 or len(tail) % 4 or len(tail) // 4 != len(digests):
            return None  # the game checks this; a log that says otherwise is not ours to read
        operands = tuple((int.from_bytes(tail[4 * k : 4 * k + 4], "big"), digest) for k, digest in enumerate(digests))
        parties = ((f"challenger in dispute {dispute_id}", d.challenger), (f"defender in dispute {dispute_id}", d.defender))
        return DrawnLeaf((dispute_id,), index, graph_leaf, operands, parties, int(args["deadline"]))

    def chain_job(self, job: OnChainJob, job_id: int) -> ChainJob:
        """The executor's view of an on-chain job."""
        return ChainJob(
            job_id=job_id,
            submitter=job.submitter,
            program_digest=job.program_digest,
            inputs_digest=job.inputs_digest,
            reward=job.reward,
            k=job.k,
            commit_deadline=job.commit_deadline,
            reveal_deadline=job.reveal_deadline,
            chain_id=self.chain_id,
            contract=self.contract,
            graph_root=job.graph_root,
            trace_leaves=job.trace_leaves,
            challenge_window=job.challenge_window,
        )


def _detail(body: bytes) -> str:
    """A refusal's `detail`, shortened, for a log line."""
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return ""
    return f" ({str(detail)[:200]})" if detail else ""

