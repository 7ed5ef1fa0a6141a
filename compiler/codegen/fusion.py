"""Loop fusions (kind=kLoop): one kernel, one loop over the fusion's output elements, no
intermediate buffers.

Every instruction of the fused computation is an element generator: given an index into its
own shape it produces its value there. Parameters load from their buffers, elementwise ops
apply the element emitter of elementwise.py to their operands' values at the same index, and
index-mapping ops (broadcast, reshape, transpose, reverse, slice, pad, concatenate, iota) map
the index onto their operands. Each value is computed by the same per-element code as the
unfused kernels, so the bits are the same; only the memory traffic changes.

When every index map on the way from the root is the identity on flat indices (same-shape
elementwise ops, reshape, broadcasts of scalars) the loop runs W lanes at a time like the
elementwise kernels, plus a scalar tail; otherwise it runs one element at a time. A value is
computed once per index (generators are memoized per index object), and concatenate branches
so only the operand that owns an element is computed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from llvmlite import ir

from compiler.codegen import numerics_ir as nir
from compiler.codegen import plan as P
from compiler.codegen.dot_conv import emit_dot
from compiler.codegen.elementwise import (
    DEFERRED_CANONICAL_NAN,
    NAN_BLIND_OPERANDS,
    ElementEmitter,
    vector_width,
)
from compiler.codegen.kernel import Kernel, pad_source, ravel, row_major_strides, unravel
from compiler.codegen.llvm_ir import I32, I64, storage_type, vector_of
from compiler.codegen.lower import Lowering, Ref
from compiler.codegen.reductions import Inputs, emit_reduce
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.opcodes import COMPUTED_PER_ELEMENT, INDEX_MAPPING
from compiler.hlo.shape import ArrayShape
from compiler.numerics.order import REDUCE_LANES
from compiler.passes.fusibility import (
    element_generated,
    epilogue_dot,
    flat_identity,
    read_at_own_position,
)
from core.dtypes import F32, F64, S64


class Index:
    """A position in an array of shape `dims`: its flat row-major index and/or multi-index,
    each computed on demand (and then kept, so callers must use an index only in blocks its
    values dominate). `lanes` > 1 means `lanes` consecutive flat positions."""

    def __init__(self, builder: ir.IRBuilder, dims: tuple[int, ...], flat: ir.Value | None = None,
                 multi: list[ir.Value] | None = None, lanes: int = 1, row: bool = False) -> None:  # fmt: skip
        self.builder = builder
        self.dims = dims
        self._flat = flat
        self._multi = multi
        self.lanes = lanes
        # The lanes lie along the last dimension inside one row: the multi-index of the first
        # lane, plus the lane number on the last dimension, is every lane's position.
        self.row = row

    def flat(self) -> ir.Value:
        if self._flat is None:
            assert self._multi is not None
            self._flat = ravel(self.builder, self._multi, row_major_strides(self.dims))
        return self._flat

    def multi(self) -> list[ir.Value]:
        if self._multi is None:
            assert self._flat is not None and (self.lanes == 1 or self.row), "multi-indices exist on the scalar and row paths only"
            self._multi = unravel(self.builder, self._flat, self.dims)
        return self._multi


def _shape(instruction: Instruction) -> ArrayShape:
    return instruction.array_shape


def _is_scalar_operand(user: Instruction, operand: Instruction) -> bool:
    """An elementwise operand of rank 0 that stands for every element (select, clamp)."""
    return _shape(operand).rank == 0 and _shape(user).rank > 0


def row_vectorizable(computation: Computation, width: int, root: Instruction | None = None, opaque: Instruction | None = None) -> bool:
    """Whether `width` consecutive positions along the root's last dimension, inside one row,
    map to `width` consecutive positions along the last dimension of every value read in
    row mode (or to a single position of a value read in scalar mode, which is then splat):
    then the loop can run a vector per row chunk instead of one element at a time.

    Broadcasts keep row mode when the output's last dimension comes from the operand's last
    dimension, and switch the operand to scalar mode when it does not come from the operand
    at all; transposes must keep the last dimension last, slices must have stride 1 on it,
    reverse must not flip it, pad must not pad it, concatenate must not join along it, and a
    reshape must keep its size (or both sizes must be multiples of `width`, so an aligned
    chunk never crosses a row of the operand)."""
    pending: list[tuple[Instruction, bool]] = [(root or computation.root, True)]
    seen: set[tuple[int, bool]] = set()
    while pending:
        instruction, in_row = pending.pop()
        shape = _shape(instruction)
        in_row = in_row and shape.rank > 0
        if (id(instruction), in_row) in seen:
            continue
        seen.add((id(instruction), in_row))
        if instruction is opaque or instruction.opcode in ("parameter", "constant") or not in_row:
            if not in_row:
                pending.extend((operand, False) for operand in instruction.operands)
            continue
        opcode = instruction.opcode
        last = shape.rank - 1
        operands = instruction.operands
        if opcode == "broadcast":
            dims = tuple(instruction.attrs.get("dimensions", ()))  # type: ignore[arg-type]
            if last in dims and dims[-1] != last:
                return False
            pending.append((operands[0], last in dims))
            continue
        if opcode == "reshape":
            source = _shape(operands[0]).dims
            if source and (source[-1] == shape.dims[-1] or (source[-1] % width == 0 and shape.dims[-1] % width == 0)):
                pending.append((operands[0], True))
                continue
            return False
        if opcode == "transpose" and tuple(instruction.attrs["dimensions"])[-1] != last:  # type: ignore[arg-type]
            return False
        if opcode == "slice" and instruction.attrs["slice"][last].stride != 1:  # type: ignore[index]
            return False
        if opcode == "reverse" and last in tuple(instruction.attrs["dimensions"]):  # type: ignore[arg-type]
            return False
        if opcode == "pad":
            padding = instruction.attrs.get("padding", ())[last]  # type: ignore[index]
            if (padding.low, padding.high, padding.interior) != (0, 0, 0):
                return False
            pending.append((operands[0], True))
            pending.append((operands[1], False))
            continue
        if opcode == "concatenate" and instruction.attrs["dimensions"][0] == last:  # type: ignore[index]
            return False
        for operand in operands:
            pending.append((operand, not _is_scalar_operand(instruction, operand)))
    return True


def uncanonical_values(computation: Computation) -> frozenset[int]:
    """The instructions (by id) whose NaN results may stay as their IEEE instruction made
    them: f32/f64 ops of DEFERRED_CANONICAL_NAN, not a result of the fusion, whose every user
    in it reads them NaN-blind (elementwise.NAN_BLIND_OPERANDS). A stored value, and every
    operand of any other op, is canonical as before; the bits of every result are the same."""
    results = {id(r) for r in results_of(computation)} | {id(computation.root)}
    users: dict[int, list[Instruction]] = {}
    for instruction in computation.instructions:
        for operand in instruction.operands:
            users.setdefault(id(operand), []).append(instruction)

    def blind(user: Instruction) -> bool:
        return user.opcode in NAN_BLIND_OPERANDS and not (user.opcode == "compare" and user.attrs.get("type") == "TOTALORDER")

    return frozenset(
        id(instruction)
        for instruction in computation.instructions
        if instruction.opcode in DEFERRED_CANONICAL_NAN
        and isinstance(instruction.shape, ArrayShape)
        and instruction.shape.dtype in (F32, F64)
        and id(instruction) not in results
        and users.get(id(instruction))
        and all(blind(user) for user in users[id(instruction)])
    )


@dataclass
class FusionEmitter:
    """Emits the element generators of one fused computation inside one kernel."""

    kernel: Kernel
    lowering: Lowering
    computation: Computation
    parameters: list[int]  # the buffer of each parameter, by parameter number

    def __post_init__(self) -> None:
        self.builder = self.kernel.builder
        self.elements = ElementEmitter(self.kernel)
        self.memo: dict[tuple[int, int], ir.Value] = {}
        # Index objects stay referenced while their ids key the memo.
        self.indices: list[Index] = []
        self.constants: dict[int, int] = {}
        self.scalars: dict[int, ir.Value] = {}
        self._scalar_index: Index | None = None
        # Instructions whose values another kernel part already stored (a kOutput fusion's
        # dot): buffer ids, read at the instruction's flat index like parameters.
        self.stored: dict[int, int] = {}
        self.uncanonical = uncanonical_values(self.computation)
        # The row path's values that do not vary along a row, computed once per row in the
        # block before the row's loops (set by _emit_row_path): that block, the ids of the
        # values defined there (the row's outer index), and the values by (operand, dims).
        self.row_block: ir.Block | None = None
        self.row_defined: set[int] = set()
        self.row_values: dict[tuple[int, tuple[int, ...]], ir.Value] = {}

    def preload_scalars(self) -> None:
        """Loads rank-0 parameters once, before the loops (read before anything is written)."""
        for parameter in self.computation.parameters:
            if _shape(parameter).rank == 0 and _shape(parameter).element_count:
                base = self.kernel.buffer(self.parameters[parameter.parameter_number])  # type: ignore[index]
                self.scalars[id(parameter)] = self.kernel.load(base, _shape(parameter).dtype, I64(0))

    def scalar_index(self) -> Index:
        """The one position of rank-0 values (shared, so their values are computed once)."""
        if self._scalar_index is None:
            self._scalar_index = self.new_index((), I64(0), [])
        return self._scalar_index

    def new_index(self, dims: tuple[int, ...], flat: ir.Value | None = None, multi: list[ir.Value] | None = None, lanes: int = 1, row: bool = False) -> Index:
        index = Index(self.builder, dims, flat, multi, lanes, row)
        self.indices.append(index)
        return index

    def reset(self) -> None:
        """Forgets computed values (a new loop body: earlier values do not dominate it)."""
        self.memo = {}
        self.indices = []
        self._scalar_index = None

    def value(self, instruction: Instruction, index: Index) -> ir.Value:
        """The value of `instruction` at `index` (memoized per index object)."""
        if index.lanes > 1 and _shape(instruction).rank == 0:
            # A rank-0 value (a rank-0 result of the fusion, in the vector body) has one
            # position whatever the lanes: computed there once, then splat.
            return self.elements.splat(self.value(instruction, self.scalar_index()), index.lanes)
        key = (id(instruction), id(index))
        if key not in self.memo:
            self.memo[key] = self._generate(instruction, index)
        return self.memo[key]

    def _generate(self, instruction: Instruction, index: Index) -> ir.Value:
        opcode = instruction.opcode
        shape = _shape(instruction)
        if id(instruction) in self.stored:
            return self.kernel.load(self.kernel.buffer(self.stored[id(instruction)]), shape.dtype, index.flat(), index.lanes)
        if opcode == "parameter":
            return self._parameter(instruction, index)
        if opcode == "constant":
            return self._constant(instruction, index)
        if opcode in COMPUTED_PER_ELEMENT:
            return self._elementwise(instruction, index)
        b = self.builder
        operand = instruction.operands[0] if instruction.operands else None
        if opcode == "reshape":
            assert operand is not None
            return self.value(operand, self.new_index(_shape(operand).dims, index.flat(), lanes=index.lanes, row=index.row))
        if opcode == "broadcast":
            assert operand is not None
            if _shape(operand).rank == 0:
                return self.elements.splat(self.value(operand, self.scalar_index()), index.lanes)
            dims = tuple(instruction.attrs.get("dimensions", ()))  # type: ignore[arg-type]
            multi = index.multi()
            mapped_multi = [multi[d] for d in dims]
            if index.lanes > 1 and shape.rank - 1 not in dims:
                # Row mode, and the operand does not vary along the row: one value, splat.
                return self.elements.splat(self._along_the_row(operand, dims, mapped_multi), index.lanes)
            return self.value(operand, self.new_index(_shape(operand).dims, multi=mapped_multi, lanes=index.lanes, row=index.row))
        multi = index.multi()
        lanes_here = {"lanes": index.lanes, "row": index.row}
        if opcode == "transpose":
            assert operand is not None
            perm = instruction.attrs["dimensions"]
            mapped: list[ir.Value] = [I64(0)] * shape.rank
            for position, source in enumerate(perm):  # type: ignore[arg-type]
                mapped[source] = multi[position]
            return self.value(operand, self.new_index(_shape(operand).dims, multi=mapped, **lanes_here))
        if opcode == "reverse":
            assert operand is not None
            flipped = set(instruction.attrs["dimensions"])  # type: ignore[arg-type]
            dims = _shape(operand).dims
            mapped = [b.sub(I64(dims[d] - 1), m) if d in flipped else m for d, m in enumerate(multi)]
            return self.value(operand, self.new_index(dims, multi=mapped, **lanes_here))
        if opcode == "slice":
            assert operand is not None
            spec = instruction.attrs["slice"]
            mapped = [b.add(I64(d.start), b.mul(m, I64(d.stride))) for d, m in zip(spec, multi, strict=True)]  # type: ignore[arg-type]
            return self.value(operand, self.new_index(_shape(operand).dims, multi=mapped, **lanes_here))
        if opcode == "iota":
            dimension = instruction.attrs["iota_dimension"]
            position = multi[dimension]  # type: ignore[index]
            if index.lanes > 1:
                position = self.elements.splat(position, index.lanes)
                if dimension == shape.rank - 1:
                    position = b.add(position, ir.Constant(position.type, list(range(index.lanes))))
            return nir.convert(b, position, S64, shape.dtype, self.kernel.config)
        if opcode == "pad":
            return self._pad(instruction, multi, index)
        if opcode == "concatenate":
            return self._concatenate(instruction, multi, index)
        raise AssertionError(f"no element generator for {opcode}")

    def _along_the_row(self, operand: Instruction, dims: tuple[int, ...], multi: list[ir.Value]) -> ir.Value:
        """The value of `operand` at `multi`, a position that stays the same along the row:
        computed once per row before the row's loops where its index is known there and its
        expression is straight-line code, else here."""
        hoisted = (
            self.row_block is not None
            and all(isinstance(v, ir.Constant) or id(v) in self.row_defined for v in multi)
            and _straight_line(operand)
        )
        if not hoisted:
            return self.value(operand, self.new_index(_shape(operand).dims, multi=multi))
        key = (id(operand), dims)
        if key not in self.row_values:
            # Generated with memos of its own: a value memoized in the loop body does not
            # dominate the block before the loop.
            saved = self.memo, self.indices, self._scalar_index
            self.memo, self.indices, self._scalar_index = {}, [], None
            with self.builder.goto_block(self.row_block):
                self.row_values[key] = self.value(operand, self.new_index(_shape(operand).dims, multi=multi))
            self.memo, self.indices, self._scalar_index = saved
        return self.row_values[key]

    def _parameter(self, instruction: Instruction, index: Index) -> ir.Value:
        if id(instruction) in self.scalars:
            return self.elements.splat(self.scalars[id(instruction)], index.lanes)
        base = self.kernel.buffer(self.parameters[instruction.parameter_number])  # type: ignore[index]
        return self.kernel.load(base, _shape(instruction).dtype, index.flat(), index.lanes)

    def _constant(self, instruction: Instruction, index: Index) -> ir.Value:
        if _shape(instruction).rank == 0:
            return self.elements._splat_literal(instruction, index.lanes)
        if id(instruction) not in self.constants:
            self.constants[id(instruction)] = self.lowering.constant(instruction)
        base = self.kernel.buffer(self.constants[id(instruction)])
        return self.kernel.load(base, _shape(instruction).dtype, index.flat(), index.lanes)

    def _elementwise(self, instruction: Instruction, index: Index) -> ir.Value:
        values = []
        for operand in instruction.operands:
            if _is_scalar_operand(instruction, operand):
                values.append(self.elements.splat(self.value(operand, self.scalar_index()), index.lanes))
            else:
                values.append(self.value(operand, index))
        deferred = id(instruction) in self.uncanonical
        value = self.elements.emit(instruction, values, canonical=not deferred)
        if instruction.opcode == "select" and not deferred and any(id(o) in self.uncanonical for o in instruction.operands[1:]):
            value = nir.canonicalize_nan(self.builder, value, _shape(instruction).dtype)  # it passed a NaN on as made
        return value

    def _pad(self, instruction: Instruction, multi: list[ir.Value], index: Index) -> ir.Value:
        """The operand's element where the output position is on the grid, else the fill
        value; the operand is read at a clamped (valid) index either way, then selected. (In
        row mode the last dimension is not padded, so the choice is the same for all lanes.)"""
        b = self.builder
        source = _shape(instruction.operands[0])
        fill = self.elements.splat(self.value(instruction.operands[1], self.scalar_index()), index.lanes)
        if source.element_count == 0:
            return fill
        inside, safe = pad_source(b, multi, instruction.attrs.get("padding", ()), source.dims)
        value = self.value(instruction.operands[0], self.new_index(source.dims, multi=safe, lanes=index.lanes, row=index.row))
        return b.select(inside, value, fill)

    def _concatenate(self, instruction: Instruction, multi: list[ir.Value], index: Index) -> ir.Value:
        """Branches on the position along the axis: only the owning operand is computed."""
        b = self.builder
        axis = instruction.attrs["dimensions"][0]  # type: ignore[index]
        parts = [(op, _shape(op)) for op in instruction.operands if _shape(op).dims[axis]]
        merge = b.append_basic_block("concat.merge")
        incoming: list[tuple[ir.Value, ir.Block]] = []
        offset = 0
        saved = self.memo
        for number, (operand, shape) in enumerate(parts):
            end = offset + shape.dims[axis]
            last = number == len(parts) - 1
            if not last:
                here = b.append_basic_block("concat.part")
                rest = b.append_basic_block("concat.rest")
                b.cbranch(b.icmp_signed("<", multi[axis], I64(end)), here, rest)
                b.position_at_end(here)
            # Values computed in a branch do not dominate the merge: a scoped memo.
            self.memo = dict(saved)
            mapped = list(multi)
            mapped[axis] = b.sub(multi[axis], I64(offset)) if offset else multi[axis]
            incoming.append((self.value(operand, self.new_index(shape.dims, multi=mapped, lanes=index.lanes, row=index.row)), b.block))
            b.branch(merge)
            if not last:
                b.position_at_end(rest)
            offset = end
        self.memo = saved
        b.position_at_end(merge)
        phi = b.phi(vector_of(storage_type(_shape(instruction).dtype), index.lanes))
        for value, block in incoming:
            phi.add_incoming(value, block)
        return phi


# Opcodes whose element generators emit straight-line code, so that an expression of them can
# be emitted in a block that already has its terminator: all but those that branch or loop
# (concatenate branches to the owning operand, pad to the fill, remainder is a loop).
_STRAIGHT_LINE = (COMPUTED_PER_ELEMENT | INDEX_MAPPING | {"parameter", "constant"}) - {"remainder", "concatenate", "pad"}


def _straight_line(instruction: Instruction) -> bool:
    pending, seen = [instruction], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current.opcode not in _STRAIGHT_LINE:
            return False
        pending.extend(current.operands)
    return True


def results_of(computation: Computation) -> list[Instruction]:
    """The instructions computing a loop fusion's results: the root, or its tuple's operands."""
    root = computation.root
    return list(root.operands) if root.opcode == "tuple" else [root]


LoopMode = Literal["flat", "row", "scalar"]


def loop_mode(computation: Computation, results: list[Instruction], width: int, opaque: Instruction | None = None) -> LoopMode:
    """How a fusion's element loop runs: W flat positions at a time when every index map is
    the flat identity, W positions along the last dimension of a row when the maps keep
    rows (row_vectorizable) and rows are at least W long, else one element at a time."""
    if all(flat_identity(computation, r, opaque)[0] for r in results):
        return "flat"
    dims = results[0].array_shape.dims
    if dims and dims[-1] >= width and all(row_vectorizable(computation, width, r, opaque) for r in results):
        return "row"
    return "scalar"


def emit_element_loop(emitter: FusionEmitter, results: list[Instruction], bases: list[ir.Value], begin: ir.Value, end: ir.Value, mode: LoopMode) -> None:
    """The loop computing every result at each flat output index in [begin, end), and only
    there, and storing it (all results computed before any is stored): W lanes at a time plus
    a scalar tail on the flat path; on the row path, the range's part of each row it meets,
    W lanes along the last dimension plus a scalar tail; one element at a time otherwise.

    Any range is allowed in every mode. A kernel's work items may share rows (a gemm item
    owns some columns of its rows), and an element computed outside the range would read
    values another worker may still be writing."""
    if mode == "row":
        length = results[0].array_shape.dims[-1]
        b = emitter.kernel.builder
        first_row = b.udiv(begin, I64(length))
        stop_row = b.udiv(b.add(end, I64(length - 1)), I64(length))

        def columns(row_start: ir.Value) -> tuple[ir.Value, ir.Value]:
            # All of the row but in the range's first and last rows.
            row_stop = b.add(row_start, I64(length))
            first = b.select(b.icmp_unsigned(">", begin, row_start), begin, row_start)
            stop = b.select(b.icmp_unsigned("<", end, row_stop), end, row_stop)
            return b.sub(first, row_start), b.sub(stop, row_start)

        _emit_row_path(emitter, results, bases, first_row, stop_row, columns)
        return
    kernel = emitter.kernel
    b = kernel.builder
    shape = results[0].array_shape
    width = vector_width(kernel.config)

    def body(flat: ir.Value, lanes: int) -> None:
        emitter.reset()
        # The scalar path unravels the output index once, before any branch.
        multi = unravel(b, flat, shape.dims) if mode == "scalar" else None
        _store(emitter, results, bases, emitter.new_index(shape.dims, flat, multi, lanes), flat)

    if mode == "flat":
        vector_end = _vector_stop(b, begin, end, width)
        with kernel.loop(begin, vector_end, width, "v") as index:
            body(index, width)
        with kernel.loop(vector_end, end, 1, "s") as index:
            body(index, 1)
    else:
        with kernel.loop(begin, end, 1, "i") as index:
            body(index, 1)


def emit_row_loop(emitter: FusionEmitter, results: list[Instruction], bases: list[ir.Value], first_row: ir.Value, stop_row: ir.Value) -> None:
    """emit_element_loop's row path over whole rows [first_row, stop_row) of the results
    (rows along their last dimension): the column bounds are constants."""
    length = results[0].array_shape.dims[-1]
    _emit_row_path(emitter, results, bases, first_row, stop_row, lambda row_start: (I64(0), I64(length)))


def _emit_row_path(emitter: FusionEmitter, results: list[Instruction], bases: list[ir.Value], first_row: ir.Value, stop_row: ir.Value,
                   columns: Callable[[ir.Value], tuple[ir.Value, ir.Value]]) -> None:  # fmt: skip
    """Rows [first_row, stop_row), in each the columns [first, stop) that columns(row's flat
    start) gives: W lanes along the last dimension, then a scalar tail."""
    kernel = emitter.kernel
    b = kernel.builder
    shape = results[0].array_shape
    width = vector_width(kernel.config)
    with kernel.loop(first_row, stop_row, 1, "row") as row:
        outer = unravel(b, row, shape.dims[:-1])
        row_start = b.mul(row, I64(shape.dims[-1]))
        first, stop = columns(row_start)
        vector_stop = _vector_stop(b, first, stop, width)
        emitter.row_block, emitter.row_defined, emitter.row_values = b.block, {id(v) for v in outer}, {}
        for start, finish, lanes in ((first, vector_stop, width), (vector_stop, stop, 1)):
            if isinstance(start, ir.Constant) and isinstance(finish, ir.Constant) and start.constant == finish.constant:
                continue
            with kernel.loop(start, finish, lanes, "j" if lanes > 1 else "t") as j:
                emitter.reset()
                flat = b.add(row_start, j)
                _store(emitter, results, bases, emitter.new_index(shape.dims, flat, [*outer, j], lanes, row=lanes > 1), flat)
        emitter.row_block, emitter.row_defined, emitter.row_values = None, set(), {}


def _store(emitter: FusionEmitter, results: list[Instruction], bases: list[ir.Value], index: Index, flat: ir.Value) -> None:
    """Every result at `index`, all computed before any is stored at `flat`."""
    values = [emitter.value(r, index) for r in results]
    for value, base, r in zip(values, bases, results, strict=True):
        emitter.kernel.store(value, base, r.array_shape.dtype, flat)


def _vector_stop(b: ir.IRBuilder, begin: ir.Value, end: ir.Value, width: int) -> ir.Value:
    """The end of the whole W-lane vectors from `begin` towards `end`."""
    if isinstance(begin, ir.Constant) and isinstance(end, ir.Constant):
        return I64(begin.constant + (end.constant - begin.constant) // width * width)
    return b.add(begin, b.mul(b.udiv(b.sub(end, begin), I64(width)), I64(width)))


def _decided(instruction: Instruction, kind: str) -> Computation | None:
    """The fused computation when the passes decided `instruction` is one `kind` kernel
    (compiler/passes/backend_decisions.py), else None: the lowering inlines it op by op."""
    decided = instruction.decisions
    if decided is None or decided.fused_kernel != kind:
        return None
    computation = instruction.attrs.get("calls")
    assert isinstance(computation, Computation), f"%{instruction.name}: a {kind} kernel without a fused computation"
    return computation


def _assert_buffers(instruction: Instruction, operands: list[Ref]) -> None:
    """A fused kernel reads each operand from one buffer (fusibility.fused_kernel: its
    operands are arrays)."""
    assert all(isinstance(ref, int) for ref in operands), f"%{instruction.name}: a fused kernel with a tuple operand"


def emit_loop_fusion(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref | None:
    """A kLoop fusion as one kernel over its output elements (every result of a
    multi-output fusion at each position), or None when the passes decided it is inlined
    op by op (fusibility.loop_kernel: an op without an element generator)."""
    computation = _decided(instruction, "kLoop")
    if computation is None:
        return None
    assert element_generated(computation), f"%{instruction.name}: an op without an element generator"
    _assert_buffers(instruction, operands)
    results = results_of(computation)
    result: Ref = lowering.new_buffers(instruction.shape)
    outputs = [result] if computation.root.opcode != "tuple" else list(result)  # type: ignore[arg-type]
    shape = results[0].array_shape
    count = shape.element_count
    if count == 0:
        return result
    maps = [flat_identity(computation, r) for r in results]
    mode = loop_mode(computation, results, vector_width(lowering.config))
    # On the row path a work item is a row of the last dimension (rows are never split).
    row = shape.dims[-1] if mode == "row" else 1
    with lowering.kernels.kernel("fusion") as kernel:
        emitter = FusionEmitter(kernel, lowering, computation, operands)  # type: ignore[arg-type]
        emitter.preload_scalars()
        bases = [kernel.buffer(output) for output in outputs]  # type: ignore[arg-type]
        if mode == "row":
            emit_row_loop(emitter, results, bases, kernel.begin, kernel.end)
        else:
            emit_element_loop(emitter, results, bases, kernel.begin, kernel.end, mode)
    grain = {"flat": 16384, "row": 8192, "scalar": 4096}[mode]
    steps.append(P.KernelStep(kernel.name, count // row, grain=max(1, grain // row), instruction=instruction.name))
    if len(results) == 1:
        # Those operands' elements are read at the output element's own flat position,
        # before it is written: a same-size one may share the output's memory. (Not with
        # several results: two of them could be given the same operand's memory.)
        for number in maps[0][1]:
            ref = operands[number]
            if isinstance(ref, int) and lowering.buffer(ref).nbytes == shape.byte_size:
                lowering.in_place.append((outputs[0], ref))  # type: ignore[arg-type]
    return result


class GeneratedInputs(Inputs):
    """A fused reduce's inputs and init values computed by their generators. Each element is
    generated afresh (the reduction emits loops and branches, so no value is reused across
    reads); W consecutive elements are generated as one vector when the input's chain is
    the identity on flat indices, lane by lane otherwise."""

    def __init__(self, emitter: FusionEmitter, reduce: Instruction) -> None:
        self.emitter = emitter
        self.reduce = reduce
        self.half = len(reduce.operands) // 2
        self.vector = [flat_identity(emitter.computation, op)[0] for op in reduce.operands[: self.half]]
        # Vectors of 16 consecutive elements start at multiples of 16 (the contract's lanes),
        # so they never cross a row whose length is a multiple of 16: the row path applies.
        self.row = [
            bool(_shape(op).dims) and _shape(op).dims[-1] % REDUCE_LANES == 0 and row_vectorizable(emitter.computation, REDUCE_LANES, op)
            for op in reduce.operands[: self.half]
        ]

    def element(self, number: int, offset: ir.Value, count: int = 1) -> ir.Value:
        emitter = self.emitter
        operand = self.reduce.operands[number]
        dims = _shape(operand).dims
        if count == 1 or self.vector[number]:
            emitter.reset()
            return emitter.value(operand, emitter.new_index(dims, offset, lanes=count))
        if count == REDUCE_LANES and self.row[number]:
            emitter.reset()
            return emitter.value(operand, emitter.new_index(dims, offset, lanes=count, row=True))
        b = emitter.builder
        vector = ir.Constant(vector_of(storage_type(_shape(operand).dtype), count), ir.Undefined)
        for lane in range(count):
            emitter.reset()
            element = emitter.value(operand, emitter.new_index(dims, b.add(offset, I64(lane))))
            vector = b.insert_element(vector, element, I32(lane))
        return vector

    def init(self, number: int) -> ir.Value:
        self.emitter.reset()
        return self.emitter.value(self.reduce.operands[self.half + number], self.emitter.scalar_index())


def emit_input_fusion(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref | None:
    """A kInput fusion (a reduce over generated inputs): the reduce's kernels, unchanged in
    order, reading each input element from its generator instead of a buffer. None when the
    passes decided it is inlined op by op (fusibility.input_kernel)."""
    computation = _decided(instruction, "kInput")
    if computation is None:
        return None
    assert element_generated(computation, "reduce"), f"%{instruction.name}: not a reduce over element generators"
    _assert_buffers(instruction, operands)
    reduce = computation.root

    def make_inputs(kernel: Kernel) -> Inputs:
        emitter = FusionEmitter(kernel, lowering, computation, operands)  # type: ignore[arg-type]
        emitter.preload_scalars()
        return GeneratedInputs(emitter, reduce)

    return emit_reduce(lowering, reduce, steps, make_inputs)


def emit_output_fusion(lowering: Lowering, instruction: Instruction, operands: list[Ref], steps: list[P.Step]) -> Ref | None:
    """A kOutput fusion (a dot and an elementwise epilogue): the dot's kernels, unchanged,
    with the epilogue computed at the end of each gemm work item over the elements that item
    has just accumulated (compiler/codegen/dot_conv.py). None when the passes decided it is
    inlined op by op (fusibility.output_kernel)."""
    computation = _decided(instruction, "kOutput")
    if computation is None:
        return None
    _assert_buffers(instruction, operands)
    dot, root = epilogue_dot(computation), computation.root
    # What the epilogue relies on: the dot reads parameters, and the root reads the dot only
    # at the elements the work item has just computed.
    assert dot is not None and dot is not root and all(op.opcode == "parameter" for op in dot.operands), f"%{instruction.name}: not one dot of parameters"
    assert read_at_own_position(computation, dot), f"%{instruction.name}: the epilogue reads the dot elsewhere"
    output = lowering.new_buffer(root.array_shape)
    mode = loop_mode(computation, [root], vector_width(lowering.config), opaque=dot)

    def epilogue(kernel: Kernel, accumulated: int, begin: ir.Value, end: ir.Value) -> None:
        emitter = FusionEmitter(kernel, lowering, computation, operands)  # type: ignore[arg-type]
        emitter.stored[id(dot)] = accumulated
        emitter.preload_scalars()
        emit_element_loop(emitter, [root], [kernel.buffer(output)], begin, end, mode)

    emit_dot(lowering, dot, [operands[p.parameter_number] for p in dot.operands], steps, epilogue)  # type: ignore[index]
    return output
