"""Lowering a verified module to kernels and an execution plan.

Every array value gets a buffer (buffer_assignment.py later lets values share memory). The
lowering walks each computation in execution order and hands every instruction to the
emitter of its op family (elementwise.py, data_movement.py, reductions.py, dot_conv.py,
control_flow.py, sort_gather_scatter.py: the grouping of compiler/hlo/opcodes.py and of the
reference evaluator); parameters are bound here, as the reference evaluator binds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from attest.digests import canonical_tensor_bytes
from compiler.codegen import plan as P
from compiler.codegen import reuse
from compiler.codegen.kernel import KernelModule
from compiler.config import CompilerConfig
from compiler.hlo.errors import HloUnsupportedError
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.opcodes import NOT_TRACED
from compiler.hlo.printer import canonical_names
from compiler.hlo.shape import ArrayShape, Shape, TupleShape

Ref = P.Ref
Emitter = Callable[["Lowering", Instruction, list[Ref], list[P.Step]], Ref]



@dataclass
class Lowering:
    """State of one module's lowering: the LLVM module, the plan's buffers, the arena size.
    `emitters` maps an opcode to the function of its op family that emits it."""

    config: CompilerConfig
    emitters: dict[str, Emitter]
    kernels: KernelModule = field(init=False)
    buffers: list[P.Buffer] = field(default_factory=list)
    arena_bytes: int = 0
    # (output, operand) buffer pairs a kernel may compute in place (see buffer_assignment).
    in_place: list[tuple[int, int]] = field(default_factory=list)
    # The while bodies being lowered, innermost last: the buffers that hold the same value in
    # every iteration (state the body passes through unchanged, and what is computed from
    # such buffers alone) and the steps before the loop.
    _loops: list[tuple[set[int], list[P.Step]]] = field(default_factory=list)
    # Whether an instruction emitted like an earlier one gets that one's emission replayed
    # (reuse.py) instead of being emitted again; the same IR and plan either way.
    replay_repeats: bool = True
    _emissions: dict[tuple, reuse.Emission | None] = field(default_factory=dict)
    _structure: reuse.Structure = field(default_factory=reuse.Structure)

    def __post_init__(self) -> None:
        self.kernels = KernelModule(self.config)

    # --- buffers --------------------------------------------------------------------------
    def new_buffer(self, shape: ArrayShape) -> int:
        """A fresh arena buffer for an array of `shape` (row-major)."""
        nbytes = shape.byte_size
        offset = self.arena_bytes
        self.arena_bytes += P.aligned_size(nbytes)
        return self._add(P.Buffer(len(self.buffers), "arena", shape.dtype.name, shape.dims, nbytes, offset=offset))

    def new_buffers(self, shape: Shape) -> Ref:
        if isinstance(shape, TupleShape):
            return tuple(self.new_buffers(e) for e in shape.elements)
        return self.new_buffer(shape)

    def new_buffer_like(self, buffer: P.Buffer) -> int:
        """A fresh arena buffer of `buffer`'s type, dimensions and size."""
        offset = self.arena_bytes
        self.arena_bytes += P.aligned_size(buffer.nbytes)
        return self._add(dataclasses.replace(buffer, id=len(self.buffers), offset=offset))

    def input_buffer(self, shape: ArrayShape, index: int) -> int:
        return self._add(P.Buffer(len(self.buffers), "input", shape.dtype.name, shape.dims, shape.byte_size, input_index=index))

    def constant_buffer(self, shape: ArrayShape, data: bytes, hint: str) -> int:
        symbol = self.kernels.unique(f"const_{hint}")
        self.kernels.constant_bytes(symbol, data)
        return self._add(P.Buffer(len(self.buffers), "constant", shape.dtype.name, shape.dims, shape.byte_size, symbol=symbol))

    def scratch_buffer(self, nbytes: int) -> int:
        offset = self.arena_bytes
        self.arena_bytes += P.aligned_size(nbytes)
        return self._add(P.Buffer(len(self.buffers), "arena", "u8", (nbytes,), nbytes, offset=offset))

    def _add(self, buffer: P.Buffer) -> int:
        self.buffers.append(buffer)
        return buffer.id

    def buffer(self, buffer_id: int) -> P.Buffer:
        return self.buffers[buffer_id]

    # --- loops ----------------------------------------------------------------------------
    @property
    def in_loop(self) -> bool:
        """Whether a while body is being lowered."""
        return bool(self._loops)

    @contextmanager
    def loop_body(self, invariant: frozenset[int], before: list[P.Step]) -> Iterator[None]:
        """While a loop body is lowered: `invariant` buffers keep their values through every
        iteration, and `before` holds the steps that run before the loop."""
        self._loops.append((set(invariant), before))
        try:
            yield
        finally:
            self._loops.pop()

    def hoisted(self, sources: list[int], steps: list[P.Step]) -> list[P.Step]:
        """Where steps that read only `sources` (and write only fresh buffers of their own)
        may go: before every enclosing loop in whose iterations the sources do not change
        (inputs and constants never do), so they run once; else `steps`."""
        target = steps
        for invariant, before in reversed(self._loops):
            if not all(self.buffers[s].kind != "arena" or s in invariant for s in sources):
                break
            target = before
        return target

    # --- computations ---------------------------------------------------------------------
    def lower_computation(self, computation: Computation, parameters: list[Ref], trace: list[P.TracePoint] | None = None) -> tuple[list[P.Step], Ref]:
        """Steps that compute `computation` with its parameters bound to `parameters`. With
        `trace`, a trace point is recorded for every instruction that computes a value (not
        parameters, constants and the tuple plumbing, whose values are other values)."""
        steps: list[P.Step] = []
        values: dict[int, Ref] = {}
        names = canonical_names(computation) if trace is not None else {}
        for instruction in computation.execution_order():
            operands = [values[id(op)] for op in instruction.operands]
            if instruction.opcode == "parameter":
                result = parameters[instruction.parameter_number]  # type: ignore[index]
            else:
                result = self.lower_instruction(instruction, operands, steps)
            values[id(instruction)] = result
            if trace is not None and instruction.opcode not in NOT_TRACED:
                trace.append(P.TracePoint(len(steps), names[id(instruction)], instruction.opcode, tuple(flatten_ref(result))))
        return steps, values[id(computation.root)]

    def lower_instruction(self, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref:
        """The value of one instruction, emitted by its op family's module. Inside a loop
        body, an instruction whose operands keep their values through every iteration is
        computed once, before the loop (every op is a function of its operands alone, and
        its steps write only buffers of its own), and its value joins the invariant ones."""
        emitter = self.emitters.get(instruction.opcode)
        if emitter is None:
            raise HloUnsupportedError(f"the LLVM backend cannot compile {instruction.opcode} yet", instruction.location, instruction.name)
        sources = [buffer for ref in operands for buffer in flatten_ref(ref)]
        target = self.hoisted(sources, steps) if sources else steps
        key = reuse.emission_key(self, self._structure, instruction, operands) if self.replay_repeats else None
        emission = self._emissions.get(key) if key is not None else None
        if emission is not None:
            result = emission.replay(self, instruction, operands, target)
        else:
            before = reuse.mark(self, target)
            result = emitter(self, instruction, operands, target)
            if key is not None and key not in self._emissions:
                self._emissions[key] = reuse.recorded(self, before, instruction, operands, target, result)
        if target is not steps:
            self._mark_invariant(target, flatten_ref(result))
        return result

    def _mark_invariant(self, target: list[P.Step], buffers: list[int]) -> None:
        """Buffers computed by steps placed in `target`: invariant in every loop inside it."""
        inside = False
        for invariant, before in self._loops:
            if before is target:
                inside = True
            if inside:
                invariant.update(buffers)

    def constant(self, instruction: Instruction) -> int:
        """The constant buffer holding a constant instruction's literal (canonical bytes)."""
        shape = instruction.array_shape
        assert instruction.literal is not None
        data = canonical_tensor_bytes(np.asarray(instruction.literal))
        return self.constant_buffer(shape, data, instruction.name)

    def copy_into(self, source: Ref, target: Ref) -> P.CopyStep:
        sources, targets = flatten_ref(source), flatten_ref(target)
        return P.CopyStep(tuple(sources), tuple(targets))


def _with_buffers(step: P.Step, kernels: KernelModule) -> P.Step:
    """The step with every kernel step's slots filled in and its kernel resolved to the
    one it calls."""
    if isinstance(step, P.KernelStep):
        return dataclasses.replace(step, kernel=kernels.kernel_of(step.kernel), buffers=kernels.kernel_buffers[step.kernel])
    if isinstance(step, P.WhileStep):
        return dataclasses.replace(
            step,
            condition=tuple(_with_buffers(s, kernels) for s in step.condition),
            body=tuple(_with_buffers(s, kernels) for s in step.body),
        )
    if isinstance(step, P.ConditionalStep):
        return dataclasses.replace(step, branches=tuple(tuple(_with_buffers(s, kernels) for s in b) for b in step.branches))
    return step


def flatten_ref(ref: Ref) -> list[int]:
    if isinstance(ref, tuple):
        out: list[int] = []
        for element in ref:
            out.extend(flatten_ref(element))
        return out
    return [ref]


def lower_module(
    module: Module,
    config: CompilerConfig,
    emitters: dict[str, Emitter],
    *,
    replay_repeats: bool = True,
    attach: Callable[[KernelModule], None] | None = None,
) -> tuple[Lowering, P.Plan]:
    """The kernels (in lowering.kernels) and the plan of `module`'s entry computation
    (`replay_repeats`: see Lowering; `attach` is given the kernel module first)."""
    lowering = Lowering(config, emitters, replay_repeats=replay_repeats)
    if attach is not None:
        attach(lowering.kernels)
    inputs = []
    for index, parameter in enumerate(module.entry.parameters):
        if not isinstance(parameter.shape, ArrayShape):
            raise HloUnsupportedError("entry parameters must be arrays, not tuples", parameter.location, parameter.name)
        inputs.append(lowering.input_buffer(parameter.shape, index))
    trace: list[P.TracePoint] = []
    steps, result = lowering.lower_computation(module.entry, list(inputs), trace)
    plan = P.Plan(
        buffers=lowering.buffers,
        steps=[_with_buffers(s, lowering.kernels) for s in steps],
        inputs=inputs,
        outputs=flatten_ref(result),
        arena_bytes=lowering.arena_bytes,
        trace_points=trace,
    )
    return lowering, plan
