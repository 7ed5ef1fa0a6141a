"""The execution plan: what the runtime does with the compiled object.

The code generator turns a module into object code (one function per kernel) and this plan:
the buffers (their sizes and where they live), and the steps that run kernels, copy buffers,
and drive while loops and conditionals. The plan is plain data and serializes to JSON, so the
compile cache can store it beside the object bytes.

The object bytes alone do not say what a run computes: the plan decides which kernels run,
in what order, and which buffers are read back as the outputs. So binary_hash, the identity
of the code that runs in every trace, covers both (`binary_hash`, the one place it is made).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Literal

BufferKind = Literal["arena", "input", "constant"]

# Every arena buffer starts at a multiple of this many bytes from the arena's start, the arena
# itself is so aligned when it runs, and constant buffers are aligned the same: one cache line,
# and the widest vector (AVX-512) any kernel loads.
BUFFER_ALIGNMENT = 64

# A lowered value: a buffer id, or a tuple of them (nested as the value's tuple shape).
Ref = int | tuple


def aligned_size(nbytes: int) -> int:
    """`nbytes` rounded up to a multiple of BUFFER_ALIGNMENT (the space a buffer takes)."""
    return (nbytes + BUFFER_ALIGNMENT - 1) // BUFFER_ALIGNMENT * BUFFER_ALIGNMENT


@dataclass(frozen=True)
class Buffer:
    """One array's storage. Arena buffers live at `offset` in the execution's arena; input
    buffers are the caller's arrays; constant buffers are globals of the object file."""

    id: int
    kind: BufferKind
    dtype: str
    dims: tuple[int, ...]
    nbytes: int
    offset: int = 0
    input_index: int = -1
    symbol: str = ""


@dataclass(frozen=True)
class KernelStep:
    """Call `kernel(slots, begin, end)` over work items [0, extent), split across threads in
    contiguous ranges of at least `grain` items, with `slots` pointing at `buffers` in order.
    Any split computes the same bits."""

    kernel: str
    extent: int
    grain: int
    instruction: str
    buffers: tuple[int, ...] = ()  # every buffer the kernel reads or writes, in its slot order
    kind: Literal["kernel"] = "kernel"


@dataclass(frozen=True)
class CopyStep:
    """Copy whole buffers, `sources[i]` to `targets[i]`, all reads before any write."""

    sources: tuple[int, ...]
    targets: tuple[int, ...]
    kind: Literal["copy"] = "copy"


@dataclass(frozen=True)
class WhileStep:
    """Run `condition` and read the pred buffer `predicate`; while it is true run `body`,
    then copy `body_results` onto `state` (the loop's buffers)."""

    condition: tuple[Step, ...]
    predicate: int
    body: tuple[Step, ...]
    state: tuple[int, ...]
    body_results: tuple[int, ...]
    instruction: str
    kind: Literal["while"] = "while"


@dataclass(frozen=True)
class ConditionalStep:
    """Read the selector buffer (pred, or s32 branch index with out-of-range meaning the last
    branch) and run that branch's steps (which end by copying its results to the outputs)."""

    selector: int
    selector_is_pred: bool
    branches: tuple[tuple[Step, ...], ...]
    instruction: str
    kind: Literal["conditional"] = "conditional"


Step = KernelStep | CopyStep | WhileStep | ConditionalStep


def walk(steps) -> Iterator[Step]:
    """Every step, each followed by the steps nested in it (a while loop's condition then body,
    a conditional's branches in order)."""
    for step in steps:
        yield step
        if isinstance(step, WhileStep):
            yield from walk(step.condition)
            yield from walk(step.body)
        elif isinstance(step, ConditionalStep):
            for branch in step.branches:
                yield from walk(branch)


def finest_split(steps) -> list[Step]:
    """The steps with every kernel's grain 1, so that any two of its work items may run on
    different workers: the plan of a perturbed schedule (CompilerConfig.schedule_perturbation),
    which tests that no work item depends on another of its step."""
    split: list[Step] = []
    for step in steps:
        if isinstance(step, KernelStep):
            step = replace(step, grain=1)
        elif isinstance(step, WhileStep):
            step = replace(step, condition=tuple(finest_split(step.condition)), body=tuple(finest_split(step.body)))
        elif isinstance(step, ConditionalStep):
            step = replace(step, branches=tuple(tuple(finest_split(branch)) for branch in step.branches))
        split.append(step)
    return split


def touched(step: Step) -> list[int]:
    """Every buffer a step (with its nested steps) reads or writes, sorted."""
    found: set[int] = set()
    if isinstance(step, KernelStep):
        found.update(step.buffers)
    elif isinstance(step, CopyStep):
        found.update(step.sources)
        found.update(step.targets)
    elif isinstance(step, WhileStep):
        found.add(step.predicate)
        found.update(step.state)
        found.update(step.body_results)
        for inner in step.condition + step.body:
            found.update(touched(inner))
    else:
        found.add(step.selector)
        for branch in step.branches:
            for inner in branch:
                found.update(touched(inner))
    return sorted(found)


def direct_outputs(plan: Plan) -> list[int]:
    """The output buffers a run points at fresh arrays instead of the arena, so that kernels
    write the outputs in place: arena buffers that appear once among the outputs. Such a
    buffer's memory is not its arena range, which buffers sharing that range do not see."""
    counts: dict[int, int] = {}
    for buffer_id in plan.outputs:
        counts[buffer_id] = counts.get(buffer_id, 0) + 1
    return [buffer_id for buffer_id, count in counts.items() if count == 1 and plan.buffers[buffer_id].kind == "arena"]


# --- how a GPU target's runtime launches a plan's kernels (compiler/codegen/grid.py) --------

# Threads per block of every launch. Results never depend on it; 128 threads keep four warps
# per block, so small steps still spread over the SMs.
GRID_BLOCK_SIZE = 128


def grid_symbol(kernel: str) -> str:
    """The exported grid entry of `kernel`: `void (ptr slots, i64 extent)`."""
    return f"vxla_grid_{kernel}"


def grid_blocks(extent: int) -> int:
    """Blocks of GRID_BLOCK_SIZE threads that cover `extent` work items."""
    return (extent + GRID_BLOCK_SIZE - 1) // GRID_BLOCK_SIZE


def staging_offset(plan: Plan) -> int:
    """Where in the arena copies stage: the last staging_bytes(plan) bytes."""
    return plan.arena_bytes - staging_bytes(plan)


# --- copies that overwrite their own sources (both runtimes stage them) ---------------------

def staging_bytes(plan: Plan) -> int:
    """Arena space the entry needs past the plan's buffers to stage the copies that would
    otherwise overwrite a source before reading it (a loop whose state swaps)."""
    largest = 0
    for step in walk(plan.steps):
        copy = CopyStep(step.body_results, step.state) if isinstance(step, WhileStep) else step
        if isinstance(copy, CopyStep) and needs_staging(plan, copy):
            largest = max(largest, sum(aligned_size(plan.buffers[s].nbytes) for s in copy.sources))
    return largest


def needs_staging(plan: Plan, step: CopyStep) -> bool:
    def extent(buffer_id: int) -> tuple[str, int, int]:
        buffer = plan.buffers[buffer_id]
        if buffer.kind == "arena":
            return ("arena", buffer.offset, buffer.offset + buffer.nbytes)
        return (f"{buffer.kind}{buffer_id}", 0, buffer.nbytes)

    for index, target in enumerate(step.targets):
        space, start, stop = extent(target)
        for other, source in enumerate(step.sources):
            if other == index:
                continue
            source_space, source_start, source_stop = extent(source)
            if source_space == space and start < source_stop and source_start < stop:
                return True
    return False


def same_memory(plan: Plan, first: int, second: int, direct_outputs: set[int]) -> bool:
    """Whether two buffers are one range of memory (a copy between them moves nothing): the
    same buffer, or arena buffers at the same place that no run points elsewhere."""
    if first == second:
        return True
    if first in direct_outputs or second in direct_outputs:
        return False
    a, b = plan.buffers[first], plan.buffers[second]
    return a.kind == b.kind == "arena" and a.offset == b.offset and a.nbytes == b.nbytes


@dataclass(frozen=True)
class TracePoint:
    """An entry instruction whose value is final once `after_step` top-level steps have run
    and before any later step can overwrite its
    buffers: where an op-level trace takes its digest. `name` is its name in the optimized
    graph's canonical text."""

    after_step: int
    name: str
    opcode: str
    buffers: tuple[int, ...]


@dataclass
class Plan:
    """Buffers, the steps of the entry computation, and which buffers are the inputs and the
    flattened outputs."""

    buffers: list[Buffer] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    arena_bytes: int = 0
    no_reuse_bytes: int = 0  # the arena without reuse: what buffer assignment saved
    trace_points: list[TracePoint] = field(default_factory=list)

    def to_json(self) -> dict:
        """The plan as JSON data. A buffer is a list of its fields in declaration order (the
        plans of large models have thousands; a hit in the compile cache decodes them all)."""
        return {
            "buffers": [[b.id, b.kind, b.dtype, list(b.dims), b.nbytes, b.offset, b.input_index, b.symbol] for b in self.buffers],
            "steps": [_step_to_json(s) for s in self.steps],
            "inputs": self.inputs,
            "outputs": self.outputs,
            "arena_bytes": self.arena_bytes,
            "no_reuse_bytes": self.no_reuse_bytes,
            "trace_points": [[t.after_step, t.name, t.opcode, list(t.buffers)] for t in self.trace_points],
        }

    @staticmethod
    def from_json(data: dict) -> Plan:
        buffers = [Buffer(i, k, t, tuple(d), n, o, x, y) for i, k, t, d, n, o, x, y in data["buffers"]]
        return Plan(
            buffers=buffers,
            steps=[_step_from_json(s) for s in data["steps"]],
            inputs=list(data["inputs"]),
            outputs=list(data["outputs"]),
            arena_bytes=int(data["arena_bytes"]),
            no_reuse_bytes=int(data.get("no_reuse_bytes", 0)),
            trace_points=[TracePoint(int(a), str(n), str(o), tuple(b)) for a, n, o, b in data.get("trace_points", [])],
        )

    def canonical_bytes(self) -> bytes:
        """The plan's canonical JSON (sorted keys, no whitespace, ASCII): equal plans give equal
        bytes in any process, and a plan read back from JSON gives the bytes it was written
        from. Non-finite numbers are refused: no honest plan has one."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


# The domain of binary_hash's framing: another version of the framing is another hash.
BINARY_HASH_DOMAIN = b"vxla.binary.v1"


def binary_hash(object_bytes: bytes, plan: Plan) -> str:
    """binary_hash: the SHA-256 of the object bytes and the plan that drives them, each framed
    by its length after the domain, so no two (object, plan) pairs share their framed bytes.
    The compiler makes it, the compile cache recomputes it on every load (a record's stated
    hash is never believed), and a GPU bundle's cubin and plan are checked against it: an
    edited plan (a step removed, another buffer read as an output) is another binary_hash,
    never the honest one that a verifier's recompilation gives."""
    plan_bytes = plan.canonical_bytes()
    digest = hashlib.sha256(BINARY_HASH_DOMAIN + b"\n")
    for part in (object_bytes, plan_bytes):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def _step_to_json(step: Step) -> dict:
    # Field by field, not dataclasses.asdict: asdict deep-copies every nested step, and every
    # compile and cache hit serializes the whole plan for binary_hash.
    data = {name: getattr(step, name) for name in _STEP_FIELDS[type(step)]}
    if isinstance(step, WhileStep):
        data["condition"] = [_step_to_json(s) for s in step.condition]
        data["body"] = [_step_to_json(s) for s in step.body]
    elif isinstance(step, ConditionalStep):
        data["branches"] = [[_step_to_json(s) for s in branch] for branch in step.branches]
    return data


_STEP_FIELDS = {kind: tuple(f.name for f in fields(kind)) for kind in (KernelStep, CopyStep, WhileStep, ConditionalStep)}


def _step_from_json(data: dict) -> Step:
    kind = data["kind"]
    if kind == "kernel":
        return KernelStep(data["kernel"], data["extent"], data["grain"], data["instruction"], tuple(data["buffers"]))
    if kind == "copy":
        return CopyStep(tuple(data["sources"]), tuple(data["targets"]))
    if kind == "while":
        return WhileStep(
            condition=tuple(_step_from_json(s) for s in data["condition"]),
            predicate=data["predicate"],
            body=tuple(_step_from_json(s) for s in data["body"]),
            state=tuple(data["state"]),
            body_results=tuple(data["body_results"]),
            instruction=data["instruction"],
        )
    if kind == "conditional":
        return ConditionalStep(
            selector=data["selector"],
            selector_is_pred=data["selector_is_pred"],
            branches=tuple(tuple(_step_from_json(s) for s in b) for b in data["branches"]),
            instruction=data["instruction"],
        )
    raise ValueError(f"unknown step kind {kind!r}")
