"""What this node holds of a disputed instruction under the step referee
(node/chain/step_play.py's InstructionHolding), from its execution processes: the element
program, its output and an element's values of the steps come from the reference
evaluator's run of the job there (sandbox.StepsRequest), never from the daemon parsing the
job's HLO itself, and never from the backend.

Trust: the execution process answers in bytes; the output it gives must have the digest this
node committed in its signed trace at that instruction, or the node does not answer at all
(fail closed: a node whose execution differs from the reference there cannot defend it, and
says so once). Every other part is proved on chain, so a wrong answer costs a refused
transaction, never a wrong commitment.

Each part is computed in the background: asking raises JobPending until it is there, as the
chain loop's other questions do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from attest.tensor_proof import ChunkTree, ElementProof, chunk_tree
from node.chain.watcher import JobPending
from node.daemon.chain_executor import leaf_digest_of
from node.daemon.sandbox import LeafBuffer
from node.errors import JobRejected
from node.step_protocol import ElementValues, ProgramClaim, StepOpening

VALUE_BYTES = 32  # a value leaf: the value's bits, big-endian (compiler/reference/steps/program.py)

Ask = Callable[[int | None, int | None], tuple[dict, list[bytes]]]


class ServedInstruction:
    """One disputed instruction (`index` of job `job_id`) as this node holds it. `ask(element,
    step)` asks an execution process (ChainExecutor.steps); `digest` is this node's op-trace
    digest at the instruction."""

    def __init__(self, job_id: int, index: int, digest: bytes, ask: Ask, threads: ThreadPoolExecutor) -> None:
        self.job_id = job_id
        self.index = index
        self.digest = digest
        self._ask = ask
        self._threads = threads
        self._lock = threading.Lock()
        self._futures: dict[tuple[int | None, int | None], Future[Any]] = {}
        self._known: dict[tuple[int | None, int | None], Any] = {}

    # -- InstructionHolding ----------------------------------------------------------------

    @property
    def record_body(self) -> bytes:
        return self._instruction()[0]

    @property
    def program(self) -> ProgramClaim | None:
        return self._instruction()[1]

    @property
    def output(self) -> ChunkTree:
        tree = self._instruction()[2]
        if tree is None:
            raise JobRejected(f"job {self.job_id}: instruction {self.index} has no element program, so no output is opened")
        return tree

    def element(self, element: int) -> ElementValues:
        return self._part(element, None, lambda header, frames: _element_values(element, frames))

    def opening(self, element: int, step: int) -> StepOpening:
        return self._part(element, step, lambda header, frames: _opening(header))

    # -- the parts -------------------------------------------------------------------------

    def _instruction(self) -> tuple[bytes, ProgramClaim | None, ChunkTree | None]:
        return self._part(None, None, self._read_instruction)

    def _part(self, element: int | None, step: int | None, read: Callable[[dict, list[bytes]], Any]) -> Any:
        """The part, once its answer is read; JobPending while an execution process works on
        it; the refusal (JobRejected) of a failed one, kept (the process answers from the same
        job each time); any other failure is asked again next time."""
        key = (element, step)
        with self._lock:
            if key in self._known:
                known = self._known[key]
                if isinstance(known, JobRejected):
                    raise known
                return known
            future = self._futures.get(key)
            if future is None:
                self._futures[key] = self._threads.submit(lambda: read(*self._ask(element, step)))
                raise JobPending()
            if not future.done():
                raise JobPending()
            del self._futures[key]
        try:
            value = future.result()
        except JobRejected as refused:
            with self._lock:
                self._known[key] = refused
            raise
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise JobRejected(f"job {self.job_id}: an unreadable answer about instruction {self.index} ({type(error).__name__})") from None
        with self._lock:
            self._known[key] = value
        return value

    def _read_instruction(self, header: dict, frames: list[bytes]) -> tuple[bytes, ProgramClaim | None, ChunkTree | None]:
        record_body = bytes.fromhex(header["record_body"])
        program = header.get("program")
        if program is None:
            return record_body, None, None
        output_description, templates = header["output"], frames[1]
        buffer = LeafBuffer(str(output_description["dtype"]), tuple(int(d) for d in output_description["shape"]), frames[0])
        if leaf_digest_of([buffer]) != self.digest.hex():
            raise JobRejected(
                f"job {self.job_id}: the reference's output of instruction {self.index} is not the one this node's signed trace "
                "commits there; this node cannot answer for it under the step referee"
            )
        steps = int(header["steps"])
        if steps <= 0 or len(templates) % steps:
            raise JobRejected(f"job {self.job_id}: an unreadable element program of instruction {self.index}")
        width = len(templates) // steps
        claim = ProgramClaim(
            record_body=record_body,
            root=bytes.fromhex(program["root"]),
            result=int(program["result"]),
            elements=int(program["elements"]),
            header_hash=bytes.fromhex(program["header_hash"]),
            templates=tuple(templates[i : i + width] for i in range(0, len(templates), width)),
        )
        return record_body, claim, chunk_tree(buffer.array())


def _element_values(element: int, frames: list[bytes]) -> ElementValues:
    data = frames[0]
    if len(data) % VALUE_BYTES:
        raise JobRejected(f"element {element}: unreadable values")
    leaves = tuple(data[i : i + VALUE_BYTES] for i in range(0, len(data), VALUE_BYTES))
    return ElementValues(element, tuple(int.from_bytes(leaf, "big") for leaf in leaves), leaves)


def _opening(header: dict) -> StepOpening:
    load, entry = header.get("load"), header.get("entry")
    proof = None
    if load is not None:
        proof = ElementProof(
            header=str(load["header"]).encode(),
            chunk_index=int(load["chunk_index"]),
            chunk_count=int(load["chunk_count"]),
            chunk=bytes.fromhex(load["chunk"]),
            siblings=tuple(str(s) for s in load["siblings"]),
            offset=int(load["offset"]),
            width=int(load["width"]),
        )
    return StepOpening(
        tuple(int(a) for a in header["arguments"]),
        load=proof,
        entry=None if entry is None else (int(entry[0]), tuple(str(s) for s in entry[1])),
        parts=tuple(bytes.fromhex(p) for p in header.get("parts", ())),
    )
