"""Loop fusion: chains of elementwise and index-mapping ops become one `fusion` instruction
(kind=kLoop) whose called computation the backend computes in a single loop over the output
elements, without intermediate buffers (compiler/codegen/fusion.py).

Grouping is the classic single-output producer/consumer rule. Instructions are visited from
the root back (reverse post order, so every user is decided before its producer); a fusible
instruction joins the group of its users when all of its users belong to one group and it is
not the computation's root, otherwise it starts a group of its own. Only a group's root has
users outside the group, so a group can never reach itself through an outside instruction: no
cycles.

A group holds chains of at most MAX_GROUP_DEPTH ops; a deeper producer starts a group of its
own.

Cheap producers are duplicated instead: a scalar constant, an iota, or a broadcast of a scalar
used by several groups is copied into every group that reads it. Recomputing a value is
bit-exact under the numerics contract (docs/numerics.md), because every op's result is a pure
function of its operands' bits: the copy computes exactly the bits the original would have.
Expensive ops (transcendental math, divide, power, ...) are never duplicated; they fuse only
into a group that holds all of their users.

Only computations that run as steps are rewritten (the entry, while conditions and bodies,
conditional branches, called computations); scalar computations (reducers, comparators, map
and scatter computations) are emitted inline and keep their plain form, and existing
fusions' computations are left as they are. Reduce, dot, convolution, sort, gather, scatter,
while and conditional are never fused.
"""

from __future__ import annotations

from compiler.hlo.editing import (
    NameAllocator,
    add_computation_before,
    remove_dead,
    remove_unreachable_computations,
    replace_all_uses,
    users,
)
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.numerics.mathlib import UNARY_OPCODES
from compiler.passes.base import SimplePass
from compiler.passes.fusibility import StandIns, is_fusible

# The opcodes the math library computes (compiler/numerics/mathlib): a call per element.
MATH_OPCODES = frozenset(UNARY_OPCODES) | {"power", "atan2"}

# The longest chain of ops one group holds. The backend generates a fused element by
# recursing through the chain (compiler/codegen/fusion.py, a few Python frames an op), so a
# group stays far below the interpreter's recursion limit; a longer chain (an unrolled loop
# of elementwise steps) is cut into several fusions, with the same bits (each op's result is
# a function of its operands' bits alone).
MAX_GROUP_DEPTH = 64

# Attributes of the control-flow ops whose computations run as steps of the plan.
_STEP_COMPUTATIONS = ("condition", "body", "true_computation", "false_computation", "branch_computations")


class FusionPass(SimplePass):
    """The frame of every fusion pass: `fuse` (which says whether it changed the computation)
    runs on each step computation; then what it left dead goes, and the computations nothing
    calls any more."""

    def fuse(self, module: Module, computation: Computation, names: NameAllocator) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def run(self, module: Module) -> bool:
        names = NameAllocator(module)
        changed = False
        for computation in step_computations(module):
            if self.fuse(module, computation, names):
                remove_dead(computation)
                changed = True
        if changed:
            remove_unreachable_computations(module)
        return changed


def step_computations(module: Module) -> list[Computation]:
    """Computations that run as plan steps, in module order: the entry and what while,
    conditional and call instructions in them call (never reducers or comparators, which
    the backend inlines as scalar code, nor fusions' computations)."""
    chosen: dict[int, Computation] = {}
    pending = [module.entry]
    while pending:
        computation = pending.pop()
        if id(computation) in chosen:
            continue
        chosen[id(computation)] = computation
        for instruction in computation.instructions:
            keys = _STEP_COMPUTATIONS + (("to_apply", "calls") if instruction.opcode == "call" else ())
            for key in keys:
                value = instruction.attrs.get(key)
                callees = value if isinstance(value, tuple) else (value,)
                pending.extend(c for c in callees if isinstance(c, Computation))
    # A computation also used as a scalar computation stays as it is.
    scalar_ids = {id(c) for c in _scalar_computations(module)}
    return [c for c in module.computations if id(c) in chosen and id(c) not in scalar_ids]


def _scalar_computations(module: Module) -> list[Computation]:
    """Computations called by anything but call/while/conditional (reducers, comparators,
    map and scatter computations, fusions), and everything they call."""
    found: list[Computation] = []
    seen: set[int] = set()
    pending: list[Computation] = []
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode in ("while", "conditional", "call"):
                continue
            pending.extend(instruction.called_computations())
    while pending:
        computation = pending.pop(0)
        if id(computation) in seen:
            continue
        seen.add(id(computation))
        found.append(computation)
        for instruction in computation.instructions:
            pending.extend(instruction.called_computations())
    return found


def group_instructions(computation: Computation) -> list[list[Instruction]]:
    """The fusion groups of `computation`: each a list of instructions in post order whose
    last element is the group's root. Groups worth fusing only (two or more ops that are not
    constants)."""
    order = computation.post_order()
    user_map = users(computation)
    group_of: dict[int, int] = {}
    depth_of: dict[int, int] = {}  # ops between an instruction and its group's root
    members: list[list[Instruction]] = []
    for instruction in reversed(order):
        if not is_fusible(instruction):
            continue
        its_users = user_map.get(id(instruction), [])
        user_groups = {group_of.get(id(u), -1) for u in its_users}
        depth = 1 + max((depth_of.get(id(u), 0) for u in its_users), default=0)
        joins = (
            its_users
            and instruction is not computation.root
            and len(user_groups) == 1
            and -1 not in user_groups
            and depth < MAX_GROUP_DEPTH
            and not _minor_transpose_under_math(instruction, members[next(iter(user_groups))])
        )
        if joins:
            group = user_groups.pop()
        else:
            group, depth = len(members), 0
            members.append([])
        group_of[id(instruction)] = group
        depth_of[id(instruction)] = depth
        members[group].append(instruction)
    groups = []
    for group in members:
        group.reverse()  # post order: operands before users, root last
        if sum(1 for i in group if i.opcode != "constant") >= 2:
            groups.append(group)
    # Deterministic order: by the position of the group's root in the post order.
    position = {id(i): n for n, i in enumerate(order)}
    groups.sort(key=lambda g: position[id(g[-1])])
    return groups


def _minor_transpose_under_math(instruction: Instruction, group: list[Instruction]) -> bool:
    """A transpose that moves the minor dimension, below a group that calls the math library:
    fused, it would make the group's loop run one element at a time (the backend's vector
    loops keep rows of the minor dimension), and each math call would run on one lane. Left
    out, it is a transpose kernel of its own (tiled) and the group runs vector loops."""
    if instruction.opcode != "transpose":
        return False
    permutation = tuple(instruction.attrs.get("dimensions", ()))  # type: ignore[arg-type]
    if not permutation or permutation[-1] == len(permutation) - 1:
        return False
    return any(member.opcode in MATH_OPCODES for member in group)


def fuse_group(module: Module, computation: Computation, group: list[Instruction], names: NameAllocator) -> Instruction:
    """Replaces `group` (post order, root last) by a kLoop fusion instruction calling a new
    computation; returns the fusion instruction."""
    inside = {id(i) for i in group}
    root = group[-1]
    fused: list[Instruction] = []
    stand_ins = StandIns(names, fused)
    for instruction in group:
        instruction.operands = [op if id(op) in inside else stand_ins.of(op) for op in instruction.operands]
        fused.append(instruction)
    called = Computation(names.fresh("fused_computation"), stand_ins.parameters + fused, root, computation.location)
    fusion = Instruction(names.fresh("fusion"), "fusion", root.shape, stand_ins.arguments, {"kind": "kLoop", "calls": called}, location=root.location)
    position = next(n for n, i in enumerate(computation.instructions) if i is root)
    computation.instructions[position] = fusion
    computation.instructions = [i for i in computation.instructions if id(i) not in inside]
    replace_all_uses(computation, root, fusion)
    add_computation_before(module, computation, called)
    return fusion


# versions: 2: groups hold chains of at most MAX_GROUP_DEPTH ops; 3: a minor-dimension
# transpose stays out of a group with math calls
class LoopFusion(FusionPass, name="loop-fusion", version=3):
    """Fuses elementwise and index-mapping chains into kLoop fusions (module docstring)."""

    def fuse(self, module: Module, computation: Computation, names: NameAllocator) -> bool:
        groups = group_instructions(computation)
        for group in groups:
            fuse_group(module, computation, group, names)
        return bool(groups)
