"""Fusibility: which instructions the fusion passes may put in one kernel, how a fused
computation reads its values (at the output's own position or elsewhere), and whether a
fusion instruction is emitted as one fused kernel (fused_kernel). The passes decide with
these (compiler/passes/backend_decisions.py records fused_kernel for every fusion) and
compiler/codegen/fusion.py emits what was decided, relying on the same answers.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler.hlo.editing import NameAllocator
from compiler.hlo.ir import Computation, Instruction
from compiler.hlo.opcodes import COMPUTED_PER_ELEMENT, CONTRACTIONS, INDEX_MAPPING
from compiler.hlo.shape import ArrayShape
from compiler.numerics.order import accumulation_type


def _shape(instruction: Instruction) -> ArrayShape:
    return instruction.array_shape


def is_fusible(instruction: Instruction) -> bool:
    """Whether the loop fusion codegen can compute `instruction` per output element."""
    if not isinstance(instruction.shape, ArrayShape):
        return False
    if any(not isinstance(op.shape, ArrayShape) for op in instruction.operands):
        return False
    opcode = instruction.opcode
    if opcode == "bitcast-convert":
        return _same_width_bitcast(instruction)
    if opcode in COMPUTED_PER_ELEMENT or opcode in INDEX_MAPPING:
        return True
    return opcode == "constant" and instruction.array_shape.rank == 0


def _same_width_bitcast(instruction: Instruction) -> bool:
    """Whether a bitcast-convert keeps its element width: only then is it elementwise
    (otherwise it changes the shape)."""
    return _shape(instruction.operands[0]).dtype.bits == _shape(instruction).dtype.bits


def is_duplicable(instruction: Instruction) -> bool:
    """Cheap producers copied into every group that reads them (see compiler/passes/loop_fusion.py)."""
    opcode = instruction.opcode
    if opcode == "constant":
        return isinstance(instruction.shape, ArrayShape) and instruction.array_shape.rank == 0
    if opcode == "iota":
        return True
    if opcode == "broadcast":
        operand = instruction.operands[0]
        return isinstance(operand.shape, ArrayShape) and operand.array_shape.rank == 0 and operand.opcode in ("constant", "parameter")
    return False


class StandIns:
    """A new fused computation's stand-ins for the values computed outside it, made as the
    fused instructions are gathered: a duplicable value is copied into `body` (its operands'
    stand-ins first); any other becomes a parameter of the body, and the value an argument
    of the fusion instruction. Each outside value gets one stand-in."""

    def __init__(self, names: NameAllocator, body: list[Instruction]) -> None:
        self.names = names
        self.body = body
        self.parameters: list[Instruction] = []
        self.arguments: list[Instruction] = []
        self._made: dict[int, Instruction] = {}

    def of(self, value: Instruction) -> Instruction:
        made = self._made.get(id(value))
        if made is not None:
            return made
        if is_duplicable(value):
            made = Instruction(self.names.fresh(value.name), value.opcode, value.shape, [self.of(op) for op in value.operands],
                               dict(value.attrs), value.literal, location=value.location)  # fmt: skip
            self.body.append(made)
        else:
            made = Instruction(self.names.fresh("param"), "parameter", value.shape, parameter_number=len(self.parameters))
            self.parameters.append(made)
            self.arguments.append(value)
        self._made[id(value)] = made
        return made


def read_at_own_position(computation: Computation, target: Instruction) -> bool:
    """Whether the root reads `target` only at the root's own flat index (through
    same-shape elementwise ops and reshapes), never moved, broadcast or as a scalar."""
    pending: list[tuple[Instruction, bool]] = [(computation.root, True)]
    seen: set[tuple[int, bool]] = set()
    while pending:
        instruction, same = pending.pop()
        if (id(instruction), same) in seen:
            continue
        seen.add((id(instruction), same))
        if instruction is target:
            if not same:
                return False
            continue
        keeps = instruction.opcode in COMPUTED_PER_ELEMENT or instruction.opcode == "reshape"
        for operand in instruction.operands:
            moved = not keeps or (instruction.opcode != "reshape" and _shape(operand).dims != _shape(instruction).dims)
            pending.append((operand, same and not moved))
    return True


def flat_identity(computation: Computation, root: Instruction | None = None, opaque: Instruction | None = None) -> tuple[bool, list[int]]:
    """Whether every value the root reads at a non-scalar position is read at the root's own
    flat index (the vector path needs this), and the parameters read only that way: their
    element at a position is read just before the output's element there is written, so
    they may share the output's memory. A parameter also read at a fixed position (under a
    rank-0 value) may not: a later element would read what an earlier one wrote."""
    identity = True
    at_position: list[int] = []
    elsewhere: set[int] = set()
    pending: list[tuple[Instruction, bool]] = [(root or computation.root, True)]
    seen: set[tuple[int, bool]] = set()
    while pending:
        instruction, positional = pending.pop()
        positional = positional and _shape(instruction).rank > 0
        if (id(instruction), positional) in seen:
            continue
        seen.add((id(instruction), positional))
        opcode = instruction.opcode
        if instruction is opaque:
            continue  # a stored value, read at the position like a parameter
        if opcode == "parameter":
            number = instruction.parameter_number
            if not positional:
                elsewhere.add(number)  # type: ignore[arg-type]
            elif number not in at_position:
                at_position.append(number)  # type: ignore[arg-type]
            continue
        scalar_broadcast = opcode == "broadcast" and _shape(instruction.operands[0]).rank == 0
        if positional and opcode in INDEX_MAPPING and opcode != "reshape" and not scalar_broadcast:
            identity = False
        pending.extend((operand, positional) for operand in instruction.operands)
    safe = [n for n in sorted(at_position) if n not in elsewhere] if identity else []
    return identity, safe


def element_generated(computation: Computation, root_opcode: str | None = None, stored: Instruction | None = None) -> bool:
    """Whether every instruction of a fused computation has an element generator in the
    backend (the root excepted when `root_opcode` names what it must be instead, and
    `stored`: a value another kernel part stores, read from its buffer)."""
    root = computation.root
    if root_opcode is not None:
        if root.opcode != root_opcode:
            return False
    elif root.opcode == "tuple":
        # Multi-output: one loop over the one shape of all results.
        results = root.operands
        if not results or any(not isinstance(r.shape, ArrayShape) or r.array_shape.dims != results[0].array_shape.dims for r in results):
            return False
    elif not isinstance(root.shape, ArrayShape) or root.opcode == "parameter":
        return False
    for instruction in computation.post_order():
        if instruction is root and (root_opcode is not None or root.opcode == "tuple"):
            continue
        if instruction is stored:
            continue
        if not isinstance(instruction.shape, ArrayShape):
            return False
        opcode = instruction.opcode
        if opcode in ("parameter", "constant") or opcode in INDEX_MAPPING:
            continue
        if opcode == "bitcast-convert":
            if not _same_width_bitcast(instruction):
                return False
            continue
        if opcode not in COMPUTED_PER_ELEMENT:
            return False
    return True


def dot_takes_epilogue(dot: Instruction) -> bool:
    """Whether a dot's kernel can compute an epilogue: its result is an array of its own
    accumulation type (an f16/bf16 dot rounds its f32 chains in a separate step, which the
    epilogue would have to follow) and not complex (complex dots run a loop nest of their
    own, without the gemm's work items an epilogue ends)."""
    if not isinstance(dot.shape, ArrayShape):
        return False
    dtype = dot.array_shape.dtype
    return accumulation_type(dtype) == dtype and not dtype.is_complex


def _called(fusion: Instruction) -> Computation | None:
    """The fused computation, when every operand is an array (a fused kernel reads each
    operand from one buffer; a tuple-shaped operand is inlined with the fusion)."""
    computation = fusion.attrs.get("calls")
    if not isinstance(computation, Computation) or any(not isinstance(op.shape, ArrayShape) for op in fusion.operands):
        return None
    return computation


def loop_kernel(fusion: Instruction) -> bool:
    """A kLoop fusion is one loop over its output elements when every instruction in it has
    an element generator."""
    computation = _called(fusion)
    return computation is not None and element_generated(computation)


def input_kernel(fusion: Instruction) -> bool:
    """A kInput fusion is its root reduce's kernels reading generated inputs when the root
    is a reduce and everything below it has element generators."""
    computation = _called(fusion)
    return computation is not None and element_generated(computation, "reduce")


def epilogue_dot(computation: Computation) -> Instruction | None:
    """The one dot of a kOutput fusion's computation, or None when it holds none or several."""
    dots = [i for i in computation.post_order() if i.opcode in CONTRACTIONS]
    return dots[0] if len(dots) == 1 else None


def output_kernel(fusion: Instruction) -> bool:
    """A kOutput fusion is its dot's kernels computing the rest (the epilogue) at the end
    of each gemm work item when: it holds one dot, of parameters, that takes an epilogue;
    the root is one array of the dot's shape that reads the dot only at its own position
    (a work item has computed just its own elements); every other instruction has an
    element generator."""
    computation = _called(fusion)
    dot = epilogue_dot(computation) if computation is not None else None
    if computation is None or dot is None:
        return False
    root = computation.root
    if root.opcode == "tuple" or dot is root or not element_generated(computation, stored=dot):
        return False
    if any(op.opcode != "parameter" for op in dot.operands) or not dot_takes_epilogue(dot):
        return False
    return dot.array_shape.dims == root.array_shape.dims and read_at_own_position(computation, dot)


# The condition each fusion kind's fused kernel needs.
_FUSED_KERNELS: dict[str, Callable[[Instruction], bool]] = {"kLoop": loop_kernel, "kInput": input_kernel, "kOutput": output_kernel}


def fused_kernel(fusion: Instruction) -> str | None:
    """The kind of the one kernel a fusion instruction is emitted as, or None when it is
    inlined op by op (a kind without a fused kernel, or contents its kernel cannot compute:
    fusions in the input text may hold anything)."""
    kind = str(fusion.attrs.get("kind"))
    condition = _FUSED_KERNELS.get(kind)
    return kind if condition is not None and condition(fusion) else None
