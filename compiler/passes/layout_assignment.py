"""Layout assignment.

Under the numerics contract (section 4) every op except `bitcast` is defined on logical,
row-major indices, and the backend and the reference evaluator compute that way whatever
the layouts say; the only op that reads layouts is `bitcast`, which reinterprets the
operand's buffer in memory order. The entry's parameter and result layouts are the program's
declared signature. So this pass:

1. rewrites every `bitcast` into ops defined on logical indices, using the layouts it sees
   now: `transpose` of the operand into its memory order (major to minor), then
   `bitcast-convert` when the element type changes (same width: a plain reinterpretation
   of each element's bits), then `reshape` to the result's memory-order dimensions, then
   `transpose` back to the result's logical order. Steps that do nothing are left out; when
   all are, the bitcast becomes a `reshape` (to the same or other dimensions). Element k of
   the operand's memory order is element k of the result's memory order, exactly the
   contract's definition, and every step only moves or reinterprets bits;
2. then gives every instruction the default (descending) layout, except the entry's
   parameters and the entry's root, whose shapes are the declared signature.

After step 1 no instruction reads a layout, so step 2 cannot change a result bit. The point
is canonical form: every later pass (and CSE in particular) sees one layout per logical
shape, and the backend never needs a strided bitcast kernel. The pass is idempotent.
"""

from __future__ import annotations

from compiler.hlo.editing import NameAllocator
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.shape import ArrayShape
from compiler.passes.base import SimplePass


def _new(
    names: NameAllocator,
    hint: str,
    opcode: str,
    shape: ArrayShape,
    operand: Instruction,
    attrs: dict | None = None,
) -> Instruction:
    return Instruction(
        names.fresh(hint), opcode, shape, [operand], dict(attrs or {}), location=operand.location
    )


def lower_bitcast(bitcast: Instruction, names: NameAllocator) -> list[Instruction]:
    """Rewrites one `bitcast` in place into logical-index ops (see the module docstring);
    returns the new instructions that must be listed before it."""
    source = bitcast.operands[0].array_shape
    target = bitcast.array_shape
    source_major_to_minor = tuple(reversed(source.minor_to_major))
    target_major_to_minor = tuple(reversed(target.minor_to_major))
    target_physical = tuple(target.dims[d] for d in target_major_to_minor)
    # The steps as (opcode, shape, attrs); the last one becomes the bitcast instruction.
    steps: list[tuple[str, ArrayShape, dict]] = []
    dims = tuple(source.dims[d] for d in source_major_to_minor)
    if source_major_to_minor != tuple(range(source.rank)):
        steps.append(
            ("transpose", ArrayShape.of(source.dtype, dims), {"dimensions": source_major_to_minor})
        )
    if source.dtype != target.dtype:
        steps.append(("bitcast-convert", ArrayShape.of(target.dtype, dims), {}))
    if dims != target_physical:
        steps.append(("reshape", ArrayShape.of(target.dtype, target_physical), {}))
    inverse = tuple(target_major_to_minor.index(d) for d in range(target.rank))
    if inverse != tuple(range(target.rank)):
        steps.append(
            ("transpose", ArrayShape.of(target.dtype, target.dims), {"dimensions": inverse})
        )
    if not steps:
        steps.append(("reshape", ArrayShape.of(target.dtype, target.dims), {}))
    current = bitcast.operands[0]
    added: list[Instruction] = []
    for opcode, shape, attrs in steps[:-1]:
        current = _new(names, bitcast.name, opcode, shape, current, attrs)
        added.append(current)
    opcode, _, attrs = steps[-1]
    bitcast.opcode = opcode
    bitcast.operands = [current]
    bitcast.attrs = dict(attrs)
    return added


def lower_bitcasts(computation: Computation, names: NameAllocator) -> bool:
    """Rewrites every bitcast of `computation` as logical ops; returns whether there was one."""
    if not any(i.opcode == "bitcast" for i in computation.instructions):
        return False
    instructions: list[Instruction] = []
    for instruction in computation.instructions:
        if instruction.opcode == "bitcast":
            instructions.extend(lower_bitcast(instruction, names))
        instructions.append(instruction)
    computation.instructions = instructions
    return True


def assign_default_layouts(module: Module) -> bool:
    """Gives every value the default layout but the entry's parameters and root (pinned by
    the caller); returns whether any layout changed."""
    changed = False
    for computation in module.computations:
        for instruction in computation.instructions:
            pinned = computation is module.entry and (instruction.opcode == "parameter" or instruction is computation.root)
            default = instruction.shape.with_default_layout()
            if not pinned and default != instruction.shape:
                instruction.shape = default
                changed = True
    return changed


class LayoutAssignment(SimplePass, name="layout-assignment", version=1):
    """Lowers bitcasts to logical ops, then gives every unpinned value the default layout."""

    def run(self, module: Module) -> bool:
        """Returns whether any bitcast was rewritten or any layout changed."""
        names = NameAllocator(module)
        lowered = any([lower_bitcasts(computation, names) for computation in module.computations])
        return assign_default_layouts(module) or lowered
