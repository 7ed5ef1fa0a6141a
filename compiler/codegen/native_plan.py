"""The plan as native code: one generated entry point runs the steps (kernels, buffer copies,
while loops, conditionals) of the entry computation, so a run costs one call from Python
however many steps and loop iterations it has.

    i32 vxla_run(ptr table, ptr control, i64 thread, i64 threads, i64 first, i64 last)

runs the top-level steps [first, last) (a traced run calls it once per stretch between trace
points, plan.TracePoint.after_step). Every one of `threads` workers makes the
same call with its own `thread` index; at each step a worker computes the kernel's work items
of its share, by the same deterministic partition as compiler/runtime/threads.py, so the bits
never depend on the thread count. Between steps the workers meet at a barrier in the control
block; buffer copies are made by worker 0. All workers see the same predicates, selectors
and stop decisions (read after a barrier), so they take the same path. A stretch of steps
that would all run on worker 0 anyway (kernels too small to split, copies, and loops and
conditionals made only of such steps: `runs_alone`) is run by worker 0 alone while the
others wait at one barrier after it, so a loop of small steps costs no barrier per step.
Consecutive top-level kernel steps are rows of a constant table that one loop runs
(`kernel_table`), not code of their own: the entry's IR grows with the plan's control flow,
not with its length.

The control block (CONTROL_WORDS i64 words, `Control`) also carries the run's deadline (a
CLOCK_MONOTONIC time in ns, checked before every step and every loop iteration through the
clock function whose address the runtime puts there), the while-loop iteration limit, and,
when the run stops early, where it stopped (`Status` is the return value). Everything here
is the same for every target but for the floating-point environment the entry sets once.

Schedule perturbation (CompilerConfig.schedule_perturbation, for tests): every worker calls
`vxla.perturb` before each barrier arrival and before its share of each step, which waits a
seeded random time (nothing, a short or long spin, or a few yields of the processor) drawn
from a generator of its own, seeded by Control.PERTURB_SEED, its thread index and the first
step of the call. The delays reorder the workers as a loaded machine would, so a step whose
shares depend on each other shows it on a quiet one; they change no value. Off, none of this
is emitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from llvmlite import ir

from compiler.codegen import plan as P
from compiler.codegen.kernel import KERNEL_TYPE, KernelModule
from compiler.codegen.llvm_ir import I8, I32, I64, PTR, call_pointer, counted_loop

ENTRY_SYMBOL = "vxla_run"
ENTRY_TYPE = ir.FunctionType(I32, [PTR, PTR, I64, I64, I64, I64])
NO_DEADLINE = (1 << 63) - 1
NO_LIMIT = -1
# Busy-wait rounds at a barrier before each yield of the processor (threads may outnumber
# cores).
SPINS_BEFORE_YIELD = 200
CLOCK_MONOTONIC = 1  # Linux's clock id, the clock of Python's time.monotonic()
# A plan of more top-level steps than this gets its entry in pieces of about this many, each
# a function of its own that LLVM works on alone (partition.py puts them in parts): one
# function of every step of a large model was a long pole of its compile (the diffusers
# UNet's, 16,000 lines of IR, took LLVM 1.6 to 3.5 s on one core).
PIECE_STEPS = 96


class Control(IntEnum):
    """Word offsets in the control block. The barrier's counters have cache lines of their
    own."""

    ARRIVED = 0
    GENERATION = 8
    DECISION = 16
    DEADLINE_NS = 17
    CLOCK_FUNCTION = 18  # int clock_gettime(int clock, struct timespec *)
    YIELD_FUNCTION = 19  # int sched_yield(void)
    WHILE_LIMIT = 20
    STOPPED_SITE = 21  # where the run stopped: a site index (`sites`)
    STOPPED_LOOP = 22  # the innermost while loop around it (its site), or -1
    STOPPED_ITERATION = 23  # that loop's iteration, or -1
    SOLO_STATUS = 24  # how worker 0 left a solo stretch (a Status), read by all after it
    PERTURB_SEED = 25  # the seed of a perturbed schedule's delays (read by perturbed builds only)


CONTROL_WORDS = 26
# A perturbed schedule's delays: an LCG step per draw (Knuth's MMIX constants), its high bits
# deciding. Of 8 draws, 4 wait not at all, 2 spin up to 2^10 rounds, 1 up to 2^16 rounds
# (tens of microseconds: longer than many steps' shares) and 1 yields the processor 1 to 4
# times (which lets another worker run where threads outnumber cores).
PERTURB_MULTIPLIER = 6364136223846793005
PERTURB_INCREMENT = 1442695040888963407
PERTURB_SHORT_SPIN_BITS = 10
PERTURB_LONG_SPIN_BITS = 16
PERTURB_MAX_YIELDS = 4


class Status(IntEnum):
    """What the entry returns."""

    DONE = 0
    DEADLINE = 1  # past the deadline, before STOPPED_SITE
    WHILE_LIMIT = 2  # the loop at STOPPED_LOOP reached the iteration limit


def sites(steps: list[P.Step]) -> list[P.Step]:
    """Every step the entry can stop before, in the order the code generator numbers them:
    the flat top-level steps, each followed by the steps nested in it (a while loop's
    condition then body, a conditional's branches in order)."""
    return list(P.walk(steps))


def runs_alone(step: P.Step) -> bool:
    """Whether every part of `step` runs on one worker for any thread count: a kernel whose
    extent is below twice its grain (threads.partition gives it one range), a copy, or a loop
    or conditional made only of such steps."""
    if isinstance(step, P.KernelStep):
        return step.extent < 2 * max(step.grain, 1)
    if isinstance(step, P.CopyStep):
        return True
    if isinstance(step, P.WhileStep):
        return all(runs_alone(s) for s in (*step.condition, *step.body))
    return all(runs_alone(s) for branch in step.branches for s in branch)


@dataclass
class _Loop:
    site: int
    iteration: ir.Value  # an i64 stack slot


class _EntryEmitter:
    """Emits one function of the entry's body for one plan: the top-level steps of
    `segments` (each a list of (index, step), a stretch that runs alone or one step), whose
    first site is `first_site`."""

    def __init__(self, kernels: KernelModule, plan: P.Plan, staging_offset: int, name: str, segments: list[list], first_site: int) -> None:
        self.kernels = kernels
        self.plan = plan
        self.staging_offset = staging_offset
        self.segments = segments
        module = kernels.module
        self.function = ir.Function(module, ENTRY_TYPE, name)
        self.function.linkage = "internal"
        self.function.attributes.add("nounwind")
        self.table, self.control, self.thread, self.threads, self.first, self.last = self.function.args
        self.prologue = self.function.append_basic_block("prologue")
        self._slots = ir.IRBuilder(self.prologue)
        self.builder = ir.IRBuilder(self.function.append_basic_block("start"))
        self.sync = _sync_function(module)
        self.copy = _copy_function(module)
        self.launch = _launch_function(module)
        self.record_stop = _record_function(module)
        self.direct_outputs = set(P.direct_outputs(plan))
        self.next_site = first_site
        self.loops: list[_Loop] = []
        # Inside a stretch worker 0 runs alone: where it goes when it stops early.
        self.solo_exit: ir.Block | None = None
        # The slots of a kernel call, sized for the kernel step with the most buffers.
        self.slot_count = 1
        self.slot_array = self._slots.alloca(PTR, size=I64(1), name="kernel_slots")
        self.perturb_state = self._perturb_state() if kernels.config.schedule_perturbation else None

    def _perturb_state(self) -> ir.Value:
        """This worker's delay generator (a stack slot), seeded once per call."""
        b = self._slots
        state = b.alloca(I64, name="perturb_state")
        seed = b.load(b.gep(self.control, [I64(Control.PERTURB_SEED)], source_etype=I64), typ=I64)
        mixed = b.xor(seed, b.mul(b.add(self.thread, I64(1)), I64(0x9E3779B97F4A7C15)))
        b.store(b.xor(mixed, b.mul(self.first, I64(0xBF58476D1CE4E5B9))), state)
        return state

    def perturb(self) -> None:
        """A seeded random delay here (perturbed builds only)."""
        if self.perturb_state is not None:
            self.builder.call(_perturb_function(self.kernels.module), [self.perturb_state, self.control])

    def barrier(self, threads: ir.Value) -> ir.Value:
        """vxla.sync (the barrier and stop decision), after a perturbed build's delay."""
        self.perturb()
        return self.builder.call(self.sync, [self.control, threads])

    def emit(self) -> ir.Function:
        b = self.builder
        single: list = []  # consecutive segments of one step each, run by every worker
        for segment in self.segments:
            if len(segment) == 1 and (not runs_alone(segment[0][1]) or _tabled(segment[0][1])):
                single.extend(segment)
                continue
            self.top_level(single)
            single = []
            self.alone(segment, guarded=True)
        self.top_level(single)
        b.ret(I32(Status.DONE))
        self._slots.branch(self.function.blocks[1])
        return self.function

    def _wanted(self, index: int | ir.Value) -> ir.Value:
        """Whether top-level step `index` is in this call's [first, last)."""
        b = self.builder
        value = index if isinstance(index, ir.Value) else I64(index)
        return b.and_(b.icmp_signed("<=", self.first, value), b.icmp_signed(">", self.last, value))

    def steps(self, steps) -> None:
        if self.solo_exit is not None:
            for step in steps:
                self.step(step)
            return
        for group in _stretches(list(steps), runs_alone):
            if runs_alone(group[0]):
                self.alone([(None, step) for step in group], guarded=False)
            else:
                for step in group:
                    self.step(step)

    def alone(self, group: list, guarded: bool) -> None:
        """Worker 0 runs the steps (each guarded by the [first, last) range at the top level)
        once every worker has finished the step before; then every worker meets at a barrier
        and leaves if worker 0 stopped."""
        b = self.builder
        self.barrier(self.threads)  # the steps' checks decide on stops
        solo = b.append_basic_block("alone")
        after = b.append_basic_block("alone.done")
        b.cbranch(b.icmp_signed("==", self.thread, I64(0)), solo, after)
        b.position_at_end(solo)
        self.solo_exit = after
        if guarded:
            self.top_level(group)
        else:
            for _, step in group:
                self.step(step)
        if not b.block.is_terminated:
            b.branch(after)
        self.solo_exit = None
        b.position_at_end(after)
        self.barrier(self.threads)  # the next step decides on stops
        status = b.load(self.word(Control.SOLO_STATUS), typ=I64)
        with b.if_then(b.icmp_signed("!=", status, I64(Status.DONE)), likely=False):
            b.ret(b.trunc(status, I32))

    def top_level(self, items: list) -> None:
        """Top-level steps (index, step), each run if its index is in [first, last): a run
        of TABLE_STEPS or more kernel steps as one loop over a table of them
        (`kernel_table`), the others as code of their own."""
        b = self.builder
        for group in _stretches(items, lambda item: _tabled(item[1])):
            if _tabled(group[0][1]) and len(group) >= TABLE_STEPS:
                self.kernel_table(group)
                continue
            for index, step in group:
                with b.if_then(self._wanted(index)):
                    self.step(step)

    def kernel_table(self, items: list) -> None:
        """Kernel steps (index, step) as rows of a constant table (the kernel, the step's
        index, extent, grain and where its buffers' ids start and end in a second table)
        and one loop that runs each row as `step` runs a kernel step: the same sites in the
        same order, checks, barriers and launches. A step as code was about 20 lines of IR
        for LLVM to optimize, a row is data: the diffusers UNet's entry fell from 15,800
        lines of IR to 4,600, BERT's from 4,500 to 650."""
        b = self.builder
        kernels = self.kernels
        first_site = self.next_site
        self.next_site += len(items)
        buffer_ids: list[int] = []
        rows = []
        for index, step in items:
            bounds = (len(buffer_ids), len(buffer_ids) + len(step.buffers))
            buffer_ids.extend(step.buffers)
            rows.append(ir.Constant(_ROW, [kernels.module.globals[step.kernel], *(I64(v) for v in (index, step.extent, max(step.grain, 1), *bounds))]))
            self._slots_for(len(step.buffers))
        table = kernels.global_constant("vxla." + kernels.unique("steps"), ir.ArrayType(_ROW, len(rows)), ir.Constant(ir.ArrayType(_ROW, len(rows)), rows))
        ids_type = ir.ArrayType(I64, max(len(buffer_ids), 1))
        ids = kernels.global_constant("vxla." + kernels.unique("step_buffers"), ids_type, ir.Constant(ids_type, [I64(i) for i in buffer_ids or [0]]))

        def field(row: ir.Value, number: int, type_: ir.Type) -> ir.Value:
            return b.load(b.gep(table, [I64(0), row, I32(number)], source_etype=ir.ArrayType(_ROW, len(rows))), typ=type_)

        with counted_loop(b, I64(0), I64(len(rows)), 1, "row") as row, b.if_then(self._wanted(field(row, 1, I64))):
            site = b.add(I64(first_site), row)
            decision = self.barrier(self.share_of)
            with b.if_then(b.icmp_signed("!=", decision, I64(0)), likely=False):
                self.record(site)
                self.stop(Status.DEADLINE)
            self.perturb()
            with counted_loop(b, field(row, 4, I64), field(row, 5, I64), 1, "slot") as number:
                buffer_id = b.load(b.gep(ids, [I64(0), number], source_etype=ids_type), typ=I64)
                pointer = b.load(b.gep(self.table, [buffer_id], source_etype=PTR), typ=PTR)
                b.store(pointer, b.gep(self.slot_array, [b.sub(number, field(row, 4, I64))], source_etype=PTR))
            arguments = [field(row, 0, PTR), self.slot_array, field(row, 2, I64), field(row, 3, I64), self.thread, self.share_of]
            b.call(self.launch, arguments)

    @property
    def share_of(self) -> ir.Value:
        """The thread count a step's work is split by: 1 while worker 0 runs alone."""
        return I64(1) if self.solo_exit is not None else self.threads

    def stop(self, status: Status) -> None:
        """Leaves the entry (or, running alone, the stretch) with `status`."""
        b = self.builder
        if self.solo_exit is None:
            b.ret(I32(status))
            return
        b.store(I64(status), self.word(Control.SOLO_STATUS))
        b.branch(self.solo_exit)

    def step(self, step: P.Step) -> None:
        site = self.next_site
        self.next_site += 1
        self.check(site)
        if isinstance(step, P.KernelStep):
            self.kernel(step)
        elif isinstance(step, P.CopyStep):
            self.copies(step.sources, step.targets)
        elif isinstance(step, P.WhileStep):
            self.while_loop(step, site)
        else:
            self.conditional(step)

    def check(self, site: int) -> None:
        """The barrier before a step, and the stop decision it returns: on a stop, worker 0
        records where and every worker returns."""
        b = self.builder
        decision = self.barrier(self.share_of)
        with b.if_then(b.icmp_signed("!=", decision, I64(0)), likely=False):
            self.record(I64(site))
            self.stop(Status.DEADLINE)

    def record(self, site: ir.Value) -> None:
        loop = self.loops[-1] if self.loops else None
        where = (site, I64(loop.site if loop else -1), self.builder.load(loop.iteration) if loop else I64(-1))
        self.builder.call(self.record_stop, [self.control, self.thread, *where])

    def word(self, word: Control) -> ir.Value:
        return self.builder.gep(self.control, [I64(word)], source_etype=I64)

    def pointer(self, buffer_id: int) -> ir.Value:
        slot = self.builder.gep(self.table, [I64(buffer_id)], source_etype=PTR)
        return self.builder.load(slot, typ=PTR)

    def kernel(self, step: P.KernelStep) -> None:
        """This worker's share of the step's work items (vxla.launch)."""
        if step.extent <= 0:
            return
        body = self.kernels.module.globals[step.kernel]
        self.perturb()
        arguments = [body, self.kernel_slots(step.buffers), I64(step.extent), I64(max(step.grain, 1)), self.thread, self.share_of]
        self.builder.call(self.launch, arguments)

    def _slots_for(self, count: int) -> None:
        """Grows the slot array to hold `count` pointers."""
        if count > self.slot_count:
            self.slot_count = count
            self.slot_array.operands[0] = I64(self.slot_count)  # the alloca's element count

    def kernel_slots(self, buffers: tuple[int, ...]) -> ir.Value:
        """This worker's slot array (on its stack) filled with the pointers of `buffers`."""
        self._slots_for(len(buffers))
        b = self.builder
        for number, buffer_id in enumerate(buffers):
            b.store(self.pointer(buffer_id), b.gep(self.slot_array, [I64(number)], source_etype=PTR))
        return self.slot_array

    def copies(self, sources, targets) -> None:
        """Worker 0 copies every source to its target, all reads before any write (through
        the staging area when a target overlaps another pair's source)."""
        b = self.builder
        plan = self.plan
        pairs = [(s, t) for s, t in zip(sources, targets, strict=True) if not P.same_memory(plan, s, t, self.direct_outputs)]
        if not pairs:
            return
        with b.if_then(b.icmp_signed("==", self.thread, I64(0))):
            if P.needs_staging(plan, P.CopyStep(tuple(sources), tuple(targets))):
                arena = None
                offset = self.staging_offset
                staged = []
                for source, _ in pairs:
                    arena = arena or self._arena_base()
                    place = b.gep(arena, [I64(offset)], source_etype=I8)
                    b.call(self.copy, [place, self.pointer(source), I64(plan.buffers[source].nbytes)])
                    staged.append(place)
                    offset += P.aligned_size(plan.buffers[source].nbytes)
                for (source, target), place in zip(pairs, staged, strict=True):
                    b.call(self.copy, [self.pointer(target), place, I64(plan.buffers[source].nbytes)])
            else:
                for source, target in pairs:
                    b.call(self.copy, [self.pointer(target), self.pointer(source), I64(plan.buffers[source].nbytes)])

    def _arena_base(self) -> ir.Value:
        """The arena's start: an arena buffer's pointer less its offset."""
        buffer = next(buf for buf in self.plan.buffers if buf.kind == "arena")
        return self.builder.gep(self.pointer(buffer.id), [I64(-buffer.offset)], source_etype=I8)

    def while_loop(self, step: P.WhileStep, site: int) -> None:
        b = self.builder
        iteration = self._slots.alloca(I64, name="iteration")
        b.store(I64(0), iteration)
        self.loops.append(_Loop(site, iteration))
        header = b.append_basic_block("while.header")
        done = b.append_basic_block("while.done")
        b.branch(header)
        b.position_at_end(header)
        self.steps(step.condition)
        self.check(site)  # the predicate is read after every worker has finished the condition
        predicate = b.load(self.pointer(step.predicate), typ=I8)
        continuing = b.append_basic_block("while.body")
        b.cbranch(b.icmp_signed("!=", predicate, I8(0)), continuing, done)
        b.position_at_end(continuing)
        limit = b.load(self.word(Control.WHILE_LIMIT), typ=I64)
        reached = b.and_(b.icmp_signed(">=", limit, I64(0)), b.icmp_signed(">=", b.load(iteration), limit))
        with b.if_then(reached, likely=False):
            self.record(I64(site))
            self.stop(Status.WHILE_LIMIT)
        self.steps(step.body)
        self.check(site)
        self.copies(step.body_results, step.state)
        b.store(b.add(b.load(iteration), I64(1)), iteration)
        b.branch(header)
        b.position_at_end(done)
        self.loops.pop()

    def conditional(self, step: P.ConditionalStep) -> None:
        b = self.builder
        raw = self.pointer(step.selector)
        if step.selector_is_pred:
            index = b.select(b.icmp_signed("!=", b.load(raw, typ=I8), I8(0)), I32(0), I32(1))
        else:
            selector = b.load(raw, typ=I32)
            inside = b.and_(b.icmp_signed(">=", selector, I32(0)), b.icmp_signed("<", selector, I32(len(step.branches))))
            index = b.select(inside, selector, I32(len(step.branches) - 1))
        after = b.append_basic_block("conditional.done")
        blocks = [b.append_basic_block(f"branch{number}") for number in range(len(step.branches))]
        switch = b.switch(index, blocks[-1])
        for number, block in enumerate(blocks[:-1]):
            switch.add_case(I32(number), block)
        for block, branch in zip(blocks, step.branches, strict=True):
            b.position_at_end(block)
            self.steps(branch)
            b.branch(after)
        b.position_at_end(after)


# A row of a kernel table (`_EntryEmitter.kernel_table`): the kernel, the step's index,
# extent and grain, and its buffer ids' range in the table of ids.
_ROW = ir.LiteralStructType([PTR, I64, I64, I64, I64, I64])
# The fewest consecutive kernel steps run from a table (fewer are code of their own).
TABLE_STEPS = 3


def _tabled(step: P.Step) -> bool:
    """Whether a top-level step may be a row of a kernel table: a kernel step with work."""
    return isinstance(step, P.KernelStep) and step.extent > 0


def _among_parallel(group: list) -> bool:
    """Whether a stretch of steps that run alone is one or two kernel steps, which run as
    every worker's steps instead: worker 0 gets every work item either way (threads.partition
    makes one range of an extent below twice the grain), a stretch run alone costs two
    barriers and a step one, and the steps join their neighbours' kernel table."""
    return len(group) <= 2 and all(_tabled(step) for _, step in group)


def _stretches(items: list, alone) -> list[list]:
    """`items` cut into maximal runs of consecutive items with the same `alone(item)`."""
    groups: list[list] = []
    for item in items:
        if groups and alone(groups[-1][-1]) == alone(item):
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups


def _launch_function(module: ir.Module) -> ir.Function:
    """void vxla.launch(ptr kernel, ptr slots, i64 extent, i64 grain, i64 thread, i64 share):
    calls `kernel` on worker `thread`'s range of [0, extent) when split among `share`
    workers by threads.partition's rule (at most extent // grain ranges, at least one; the
    first extent % count ranges one item longer). One function for every step keeps the
    entry small, which is most of what LLVM spends on it."""
    name = "vxla.launch"
    if name in module.globals:
        return module.globals[name]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I64, I64, I64]), name)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    function.attributes.add("noinline")
    kernel, slots, extent, grain, thread, share = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    most = b.udiv(extent, grain)
    count = b.select(b.icmp_signed("<", share, most), share, most)
    count = b.select(b.icmp_signed("<", count, I64(1)), I64(1), count)
    base, extra = b.udiv(extent, count), b.urem(extent, count)
    with b.if_then(b.icmp_signed("<", thread, count)):
        before = b.select(b.icmp_signed("<", thread, extra), thread, extra)
        begin = b.add(b.mul(thread, base), before)
        longer = b.zext(b.icmp_signed("<", thread, extra), I64)
        call_pointer(b, kernel, KERNEL_TYPE, [slots, begin, b.add(begin, b.add(base, longer))])
    b.ret_void()
    return function


def _record_function(module: ir.Module) -> ir.Function:
    """void vxla.record(ptr control, i64 thread, i64 site, i64 loop, i64 iteration): worker 0
    writes where the run stopped into the control block."""
    name = "vxla.record"
    if name in module.globals:
        return module.globals[name]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64, I64]), name)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    function.attributes.add("noinline")
    control, thread, *where = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    with b.if_then(b.icmp_signed("==", thread, I64(0))):
        for word, value in zip((Control.STOPPED_SITE, Control.STOPPED_LOOP, Control.STOPPED_ITERATION), where, strict=True):
            b.store(value, b.gep(control, [I64(word)], source_etype=I64))
    b.ret_void()
    return function


def _sync_function(module: ir.Module) -> ir.Function:
    """i64 vxla.sync(ptr control, i64 threads): waits until every worker has arrived (with
    more than one) and returns the stop decision: 1 when the deadline has passed. The last
    worker to arrive takes the decision for all; a single worker takes its own."""
    name = "vxla.sync"
    if name in module.globals:
        return module.globals[name]
    function = ir.Function(module, ir.FunctionType(I64, [PTR, I64]), name)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    function.attributes.add("noinline")  # called before every step: once in the object
    control, threads = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    stop = _stop_function(module)

    def word(index: Control) -> ir.Value:
        return b.gep(control, [I64(index)], source_etype=I64)

    with b.if_then(b.icmp_signed("==", threads, I64(1))):
        b.ret(b.call(stop, [control]))
    generation = b.load_atomic(word(Control.GENERATION), "acquire", 8, typ=I64)
    arrived = b.atomic_rmw("add", word(Control.ARRIVED), I64(1), "acq_rel")
    with b.if_then(b.icmp_signed("==", arrived, b.sub(threads, I64(1)))):
        decision = b.call(stop, [control])
        # Atomic stores as exchanges (llvmlite's store_atomic wants typed pointers).
        b.atomic_rmw("xchg", word(Control.DECISION), decision, "monotonic")
        b.atomic_rmw("xchg", word(Control.ARRIVED), I64(0), "monotonic")
        b.atomic_rmw("xchg", word(Control.GENERATION), b.add(generation, I64(1)), "release")
        b.ret(decision)
    with counted_loop(b, I64(0), I64(NO_DEADLINE), 1, "spin") as spin:
        now = b.load_atomic(word(Control.GENERATION), "acquire", 8, typ=I64)
        with b.if_then(b.icmp_signed("!=", now, generation)):
            b.ret(b.load_atomic(word(Control.DECISION), "monotonic", 8, typ=I64))
        with b.if_then(b.icmp_signed("==", b.urem(spin, I64(SPINS_BEFORE_YIELD)), I64(SPINS_BEFORE_YIELD - 1))):
            yield_function = b.load(word(Control.YIELD_FUNCTION), typ=PTR)
            call_pointer(b, yield_function, ir.FunctionType(I32, []), [])
    b.unreachable()
    return function


def _perturb_function(module: ir.Module) -> ir.Function:
    """void vxla.perturb(ptr state, ptr control): one draw of the worker's generator at
    `state`, and the delay it decides (see PERTURB_MULTIPLIER). A spin round is an atomic
    load, which LLVM keeps."""
    name = "vxla.perturb"
    if name in module.globals:
        return module.globals[name]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR]), name)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    function.attributes.add("noinline")
    state, control = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    drawn = b.add(b.mul(b.load(state, typ=I64), I64(PERTURB_MULTIPLIER)), I64(PERTURB_INCREMENT))
    b.store(drawn, state)
    bits = b.lshr(drawn, I64(32))
    kind = b.and_(bits, I64(7))
    amount = b.lshr(bits, I64(3))
    seed_word = b.gep(control, [I64(Control.PERTURB_SEED)], source_etype=I64)
    with b.if_then(b.icmp_unsigned("<", kind, I64(4))):
        b.ret_void()

    def spin(bits: int) -> None:
        with counted_loop(b, I64(0), b.and_(amount, I64((1 << bits) - 1)), 1, "spin"):
            b.load_atomic(seed_word, "monotonic", 8, typ=I64)
        b.ret_void()

    with b.if_then(b.icmp_unsigned("<", kind, I64(6))):
        spin(PERTURB_SHORT_SPIN_BITS)
    with b.if_then(b.icmp_unsigned("==", kind, I64(6))):
        spin(PERTURB_LONG_SPIN_BITS)
    yield_function = b.load(b.gep(control, [I64(Control.YIELD_FUNCTION)], source_etype=I64), typ=PTR)
    with counted_loop(b, I64(0), b.add(b.urem(amount, I64(PERTURB_MAX_YIELDS)), I64(1)), 1, "yield"):
        call_pointer(b, yield_function, ir.FunctionType(I32, []), [])
    b.ret_void()
    return function


def _stop_function(module: ir.Module) -> ir.Function:
    """i64 vxla.stop(ptr control): 1 when the deadline in the control block has passed."""
    name = "vxla.stop"
    if name in module.globals:
        return module.globals[name]
    function = ir.Function(module, ir.FunctionType(I64, [PTR]), name)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    (control,) = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    deadline = b.load(b.gep(control, [I64(Control.DEADLINE_NS)], source_etype=I64), typ=I64)
    with b.if_then(b.icmp_signed("==", deadline, I64(NO_DEADLINE))):
        b.ret(I64(0))
    timespec = b.alloca(ir.ArrayType(I64, 2))
    clock = b.load(b.gep(control, [I64(Control.CLOCK_FUNCTION)], source_etype=I64), typ=PTR)
    call_pointer(b, clock, ir.FunctionType(I32, [I32, PTR]), [I32(CLOCK_MONOTONIC), timespec])
    seconds = b.load(b.gep(timespec, [I64(0), I32(0)], source_etype=ir.ArrayType(I64, 2)), typ=I64)
    nanoseconds = b.load(b.gep(timespec, [I64(0), I32(1)], source_etype=ir.ArrayType(I64, 2)), typ=I64)
    now = b.add(b.mul(seconds, I64(1_000_000_000)), nanoseconds)
    b.ret(b.zext(b.icmp_signed(">", now, deadline), I64))
    return function


def _copy_function(module: ir.Module) -> ir.Function:
    """void vxla.copy(ptr target, ptr source, i64 bytes): a byte loop LLVM vectorizes (the
    module is built without builtins, so it never becomes a call to memcpy)."""
    name = "vxla.copy"
    if name in module.globals:
        return module.globals[name]
    function = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, PTR, I64]), name)
    function.linkage = "internal"
    function.attributes.add("nounwind")
    function.attributes.add("noinline")
    target, source, count = function.args
    b = ir.IRBuilder(function.append_basic_block("entry"))
    with counted_loop(b, I64(0), count, 1, "byte") as index:
        value = b.load(b.gep(source, [index], source_etype=I8), typ=I8)
        b.store(value, b.gep(target, [index], source_etype=I8))
    b.ret_void()
    return function


def emit_entry(kernels: KernelModule, plan: P.Plan) -> None:
    """Adds the plan's entry point to the module and the arena space its copies stage
    through to the plan."""
    staging = P.staging_bytes(plan)
    offset = P.aligned_size(plan.arena_bytes)
    if staging:
        plan.arena_bytes = offset + staging
    segments: list[list] = []
    pieced = len(plan.steps) > PIECE_STEPS
    for group in _stretches(list(enumerate(plan.steps)), lambda item: runs_alone(item[1])):
        if not runs_alone(group[0][1]) or _among_parallel(group):
            segments.extend([item] for item in group)  # each step stands alone
        elif pieced:  # a stretch run alone is framed by its barriers: cut, it is two stretches
            segments.extend(group[start : start + PIECE_STEPS] for start in range(0, len(group), PIECE_STEPS))
        else:
            segments.append(group)
    pieces = _pieces(segments)
    if len(pieces) == 1:
        body = _EntryEmitter(kernels, plan, offset, f"{ENTRY_SYMBOL}.body", segments, 0).emit()
    else:
        functions, site = [], 0
        for number, piece in enumerate(pieces):
            emitter = _EntryEmitter(kernels, plan, offset, f"{ENTRY_SYMBOL}.body.{number}", piece, site)
            functions.append(emitter.emit())
            functions[-1].attributes.add("noinline")  # a piece LLVM works on alone, in its part
            kernels.add_unit(functions[-1].name)
            site = emitter.next_site
        body = _in_turn(kernels.module, functions)
    kernels.export(ENTRY_SYMBOL, body)


def _pieces(segments: list[list]) -> list[list[list]]:
    """The segments cut into consecutive pieces of at least PIECE_STEPS top-level steps (the
    last may have fewer)."""
    pieces: list[list[list]] = [[]]
    steps = 0
    for segment in segments:
        if steps >= PIECE_STEPS:
            pieces.append([])
            steps = 0
        pieces[-1].append(segment)
        steps += len(segment)
    return pieces


def _in_turn(module: ir.Module, pieces: list[ir.Function]) -> ir.Function:
    """The entry's body that calls its pieces in turn, each with the call's arguments, and
    returns the first status that is not DONE (a piece that stops, stops the run)."""
    function = ir.Function(module, ENTRY_TYPE, f"{ENTRY_SYMBOL}.body")
    function.linkage = "internal"
    function.attributes.add("nounwind")
    b = ir.IRBuilder(function.append_basic_block("start"))
    for piece in pieces:
        status = b.call(piece, list(function.args))
        with b.if_then(b.icmp_signed("!=", status, I32(Status.DONE)), likely=False):
            b.ret(status)
    b.ret(I32(Status.DONE))
    return function
