"""Buffer assignment: arena offsets with liveness-based reuse and in-place updates.

It runs on the lowered plan, where every buffer is concrete (instruction outputs and the
kernels' scratch buffers alike). A buffer is live from the first to the last top-level step
that touches it; a while loop or a conditional counts as one step that touches everything its
nested steps touch, so nothing inside a loop is reused while the loop runs. Outputs live to
the end. Buffers are placed in order of their first use, each at the lowest offset where it
overlaps no live buffer (first fit on a sorted list of busy ranges), so the result is
deterministic.

In place: an elementwise kernel or a dynamic-update-slice may write its output over an
operand whose last use it is (same size; each element is read before it is written at the
same position), so the two share one range. Inside a while body, a dynamic-update-slice of a
loop state buffer whose result becomes that same state element shares the state's range when
nothing later in the body reads the old state: the update lands in the state, and neither
the slice's copy nor the loop's copy of its result moves a byte (a scan's stacked outputs).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from compiler.codegen import plan as P

VERSION = 3


@dataclass(frozen=True)
class Interval:
    """Top-level steps [first, last] during which a buffer holds a value."""

    first: int
    last: int

    def overlaps(self, other: Interval) -> bool:
        return self.first <= other.last and other.first <= self.last


def liveness(plan: P.Plan) -> dict[int, Interval]:
    """Live interval of every arena buffer the plan touches."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for index, step in enumerate(plan.steps):
        for buffer_id in P.touched(step):
            first.setdefault(buffer_id, index)
            last[buffer_id] = index
    end = len(plan.steps)
    for buffer_id in plan.outputs:
        first.setdefault(buffer_id, end)
        last[buffer_id] = end
    return {b: Interval(first[b], last[b]) for b in first if plan.buffers[b].kind == "arena"}


@dataclass
class Assignment:
    """Where each arena buffer lives, and the figures a user sees."""

    offsets: dict[int, int]
    intervals: dict[int, Interval]
    peak_bytes: int
    no_reuse_bytes: int
    in_place: list[tuple[int, int]]


def assign(plan: P.Plan, in_place_candidates: list[tuple[int, int]]) -> Assignment:
    """Offsets for every arena buffer of `plan` (see the module docstring)."""
    intervals = liveness(plan)
    outputs = set(plan.outputs)
    # In-place merges: the output takes over the operand's range.
    shares: dict[int, int] = {}
    claimed: set[int] = set()
    merged: list[tuple[int, int]] = []
    for output, operand in in_place_candidates:
        if output not in intervals or operand not in intervals or operand in outputs or operand in claimed or output in shares:
            continue
        if plan.buffers[output].nbytes != plan.buffers[operand].nbytes:
            continue
        step = intervals[output].first
        if intervals[operand].last != step or intervals[operand].first >= step:
            continue
        if not isinstance(plan.steps[step], P.KernelStep | P.CopyStep):
            continue  # inside a loop or a branch the operand may be read again
        shares[output] = operand
        claimed.add(operand)
        merged.append((output, operand))
    # A loop's result lives only inside the loop, so it may share the state's range even when
    # a step after the loop takes that range over in place.
    for output, state in _loop_state_updates(plan, in_place_candidates, intervals):
        if output in shares or output in outputs or state in outputs:
            # A run points an output at a fresh array (plan.direct_outputs): the update would
            # land in the arena, not there.
            continue
        shares[output] = state
        merged.append((output, state))
    groups: dict[int, list[int]] = {}
    for buffer_id in sorted(intervals):
        root = buffer_id
        while root in shares:
            root = shares[root]
        groups.setdefault(root, []).append(buffer_id)
    spans = {root: Interval(min(intervals[m].first for m in members), max(intervals[m].last for m in members)) for root, members in groups.items()}
    order = sorted(spans, key=lambda r: (spans[r].first, -plan.buffers[r].nbytes, r))
    placed: list[tuple[int, int, Interval]] = []  # (offset, size, interval)
    root_offsets: dict[int, int] = {}
    peak = 0
    for root in order:
        size = P.aligned_size(plan.buffers[root].nbytes)
        busy = sorted((o, o + s) for o, s, i in placed if i.overlaps(spans[root]))
        offset = 0
        for start, stop in busy:
            if offset + size <= start:
                break
            offset = max(offset, stop)
        placed.append((offset, size, spans[root]))
        root_offsets[root] = offset
        peak = max(peak, offset + size)
    offsets = {member: root_offsets[root] for root, members in groups.items() for member in members}
    no_reuse = sum(P.aligned_size(plan.buffers[b].nbytes) for b in intervals)
    return Assignment(offsets, intervals, peak, no_reuse, merged)


def _loop_state_updates(plan: P.Plan, candidates: list[tuple[int, int]], intervals: dict[int, Interval]) -> list[tuple[int, int]]:
    """(body result, state) pairs of while loops anywhere in the plan where the result is an
    in-place update of that state buffer made by a top-level step of the body (a copy of the
    state, as a dynamic-update-slice starts), and no later body step, no other body result and
    nothing outside the loop touches the state's old value or the result."""
    allowed = set(candidates)
    found: list[tuple[int, int]] = []
    for loop in _loops(plan.steps):
        for result, state in zip(loop.body_results, loop.state, strict=True):
            if result == state or (result, state) not in allowed or result not in intervals or state not in intervals:
                continue
            if plan.buffers[result].nbytes != plan.buffers[state].nbytes:
                continue
            if state in loop.body_results or loop.state.count(state) > 1 or loop.body_results.count(result) > 1:
                continue
            if any(result in P.touched(step) for step in loop.condition):
                continue
            writer = next((i for i, step in enumerate(loop.body) if result in P.touched(step)), None)
            if writer is None or not isinstance(loop.body[writer], P.CopyStep):
                continue
            copy = loop.body[writer]
            if (state, result) not in zip(copy.sources, copy.targets, strict=True) or copy.sources.count(state) > 1:  # type: ignore[union-attr]
                continue
            if any(state in P.touched(step) for step in loop.body[writer + 1 :]):
                continue
            # The result lives only in this loop's body.
            if any(result in P.touched(s) for s in _outside(plan.steps, loop)):
                continue
            found.append((result, state))
    return found


def _loops(steps) -> list[P.WhileStep]:
    return [step for step in P.walk(steps) if isinstance(step, P.WhileStep)]


def _outside(steps, loop: P.WhileStep) -> list[P.Step]:
    """Every step of the plan that is not `loop` nor inside it (the loops and branches around
    it only by their own parts)."""
    found: list[P.Step] = []
    for step in steps:
        if step is loop:
            continue
        if isinstance(step, P.WhileStep):
            if any(inner is loop for inner in _loops(step.condition + step.body)):
                found.extend(_outside(step.condition + step.body, loop))
                found.append(P.CopyStep(step.body_results, step.state))
                continue
        elif isinstance(step, P.ConditionalStep) and any(inner is loop for branch in step.branches for inner in _loops(branch)):
            for branch in step.branches:
                found.extend(_outside(branch, loop))
            continue
        found.append(step)
    return found


def apply(plan: P.Plan, assignment: Assignment) -> P.Plan:
    """The plan with the assigned offsets and arena size."""
    buffers = [dataclasses.replace(b, offset=assignment.offsets.get(b.id, 0)) if b.kind == "arena" else b for b in plan.buffers]
    return dataclasses.replace(plan, buffers=buffers, arena_bytes=assignment.peak_bytes)


def conflicts(plan: P.Plan, assignment: Assignment) -> list[tuple[int, int]]:
    """Pairs of buffers that are live at the same time and overlap in memory (must be empty;
    in-place pairs, which share a range by design, are not conflicts)."""
    allowed = {frozenset(pair) for pair in assignment.in_place}
    ids = sorted(assignment.intervals)
    found = []
    for position, a in enumerate(ids):
        for b in ids[position + 1 :]:
            if frozenset((a, b)) in allowed:
                continue
            if not assignment.intervals[a].overlaps(assignment.intervals[b]):
                continue
            a_start, b_start = assignment.offsets[a], assignment.offsets[b]
            a_stop, b_stop = a_start + plan.buffers[a].nbytes, b_start + plan.buffers[b].nbytes
            if a_start < b_stop and b_start < a_stop and plan.buffers[a].nbytes and plan.buffers[b].nbytes:
                found.append((a, b))
    return found


def describe(plan: P.Plan) -> str:
    """The buffer assignment as text (part of the optimized graph that graph_hash covers)."""
    lines = [f"BufferAssignment version={VERSION} arena_bytes={plan.arena_bytes}"]
    for b in plan.buffers:
        place = {"arena": f"offset={b.offset}", "input": f"input={b.input_index}", "constant": f"constant={b.symbol}"}[b.kind]
        lines.append(f"  buffer {b.id} {b.dtype}[{','.join(map(str, b.dims))}] {place}")
    return "\n".join(lines) + "\n"
