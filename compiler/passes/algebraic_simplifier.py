"""Algebraic simplification, restricted to rewrites that are bit-exact under the numerics
contract for every input: NaNs with any payload or sign, +-0, +-inf, subnormals and the
extreme integers.

Every rewrite replaces an instruction by one of its operands (an existing value), and only
when the two shapes are equal including the layout, so users see the same shape. "c" below
is a constant, or a broadcast of a constant, whose elements all equal the value shown.

Integers (two's complement, wrapping; contract section 2) -- never floats:
- `x + 0`, `0 + x`, `x - 0`, `x * 1`, `1 * x`, `x / 1` -> `x`: exact in modular arithmetic
  (`INT_MIN / 1 = INT_MIN`, no overflow).
- `x * 0`, `0 * x` -> the zero operand.
- `shift-left`/`shift-right-logical`/`shift-right-arithmetic` by 0 -> `x`.
- `negate(negate(x))` -> `x`: wrapping negation is an involution (`-INT_MIN = INT_MIN`).
Integers and pred (bitwise, or logical for pred):
- `x & all-ones`, `x | 0`, `x ^ 0` (either operand order) -> `x`;
- `x & 0` -> the zero operand, `x | all-ones` -> the all-ones operand;
- `not(not(x))` -> `x`;
- `x & x`, `x | x`, `maximum(x, x)`, `minimum(x, x)` -> `x` (bitwise, or an order on
  integers: the same value either way);
- `convert` to the same element type -> `x` (integer to integer is a wrap to the same
  width, pred to pred is `x != 0`: both the identity).
Any element type (these only move or select bits, which the contract keeps exactly,
NaN payloads included):
- `select(true, a, b)` -> `a`, `select(false, a, b)` -> `b`, `select(p, a, a)` -> `a`;
- `select(not(p), a, b)` -> `select(p, b, a)` (rewritten in place; `not` of pred is logical);
- `select(p, true, false)` -> `p` for a pred result of p's shape (a pred holds only 0 or 1);
- `slice` of the whole operand with stride 1, `concatenate` of one operand, `pad` with
  all-zero low/high/interior, `reverse` of no dimensions -> the operand.

Deliberately NOT done (each would change bits for some input):
- float `x * 1.0`, `x + (-0.0)`, `x - 0.0`, `x / 1.0`: the arithmetic result of a NaN is
  the canonical NaN, so a NaN input with a payload or a sign would come out differently;
- float `x + 0.0`: also changes `-0` to `+0`;
- float `negate(negate(x))`: negate canonicalizes a NaN result, so a payload is lost;
- float `convert` to the same type: docs/numerics.md section 2 says a float-to-float
  convert gives the canonical NaN for a NaN (the reference evaluator copies a same-type
  convert unchanged; until the two agree, the rewrite is not made);
- float `x * 0` -> 0 (NaN, inf and the sign of zero), `x - x` -> 0 (NaN, inf);
- float `maximum(x, x)`, `minimum(x, x)` -> `x`: a NaN comes out canonical.
"""

from __future__ import annotations

import numpy as np

from compiler.hlo import attributes as attr
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.opcodes import Algebra, algebra, holds_on, law_value
from compiler.hlo.shape import ArrayShape
from compiler.passes.base import ComputationPass
from compiler.passes.forwarding import rewrite_in_post_order


def uniform_constant(instruction: Instruction) -> np.ndarray | None:
    """The elements of a constant (or a broadcast of a constant), flattened, if all are
    equal; None otherwise."""
    source = instruction
    if source.opcode == "broadcast" and source.operands[0].opcode == "constant":
        source = source.operands[0]
    if source.opcode != "constant" or source.literal is None:
        return None
    flat = np.asarray(source.literal).reshape(-1)
    if flat.size == 0:
        return None
    view = flat.view(np.uint8).reshape(flat.size, -1)  # compare bits, not values
    if not (view == view[0]).all():
        return None
    return flat


def _is(instruction: Instruction, kind: str) -> bool:
    """Whether `instruction` is a uniform constant of `kind`, a law's element name
    (compiler/hlo/opcodes.py law_value), compared by bits."""
    flat = uniform_constant(instruction)
    if flat is None or not isinstance(instruction.shape, ArrayShape):
        return False
    expected = law_value(kind, instruction.shape.dtype)
    if expected is None:
        return False
    return flat[:1].tobytes() == expected.astype(flat.dtype).tobytes()


def _integer(instruction: Instruction) -> bool:
    shape = instruction.shape
    return isinstance(shape, ArrayShape) and shape.dtype.is_integer


def _bits(instruction: Instruction) -> bool:
    shape = instruction.shape
    return isinstance(shape, ArrayShape) and (shape.dtype.is_integer or shape.dtype.is_pred)


def _either(instruction: Instruction, kind: str) -> tuple[Instruction, Instruction] | None:
    """(the constant of `kind`, the other operand) for a binary op, if one operand is one."""
    a, b = instruction.operands
    if _is(b, kind):
        return b, a
    if _is(a, kind):
        return a, b
    return None


# The law elements this pass rewrites by. maximum's and minimum's identities (the type's
# extremes) would be exact too, but version 4 of the pass does not rewrite by them, and a new
# rewrite changes optimized graphs: it belongs to a new pass version.
_REWRITTEN_ELEMENTS = ("zero", "one", "ones")


def _by_laws(instruction: Instruction, laws: Algebra) -> Instruction | None:
    """A binary op by its laws in the registry (compiler/hlo/opcodes.py), on the types where
    they hold exactly: `x op x`, an identity on either side or the right, an absorbing
    operand."""
    shape = instruction.shape
    if not isinstance(shape, ArrayShape) or not holds_on(laws.laws_on, shape.dtype):
        return None
    left, right = instruction.operands
    if laws.idempotent and left is right:
        return left
    pair = _either(instruction, laws.identity) if laws.identity in _REWRITTEN_ELEMENTS else None
    if pair:
        return pair[1]
    if laws.right_identity and _is(right, laws.right_identity):
        return left
    pair = _either(instruction, laws.absorbing) if laws.absorbing else None
    return pair[0] if pair else None


def simplified(instruction: Instruction) -> Instruction | None:
    """An existing value bit-identical to `instruction` for every input, or None."""
    op = instruction.opcode
    operands = instruction.operands
    laws = algebra(op)
    if laws != Algebra():
        return _by_laws(instruction, laws)
    if op == "negate":
        inner = operands[0]
        return inner.operands[0] if _integer(instruction) and inner.opcode == "negate" else None
    if op == "not":
        inner = operands[0]
        return inner.operands[0] if _bits(instruction) and inner.opcode == "not" else None
    if op == "convert":
        source = operands[0].shape
        if (
            _bits(instruction)
            and isinstance(source, ArrayShape)
            and source.dtype == instruction.array_shape.dtype
        ):
            return operands[0]
        return None
    if op == "select":
        predicate, on_true, on_false = operands
        if on_true is on_false:
            return on_true
        if _is(predicate, "ones"):
            return on_true
        if _is(predicate, "zero"):
            return on_false
        if instruction.array_shape.dtype.is_pred and _is(on_true, "ones") and _is(on_false, "zero"):
            return predicate
        return None
    if op == "slice":
        spec = instruction.attrs["slice"]
        assert isinstance(spec, tuple)
        dims = operands[0].array_shape.dims
        if all(
            d.start == 0 and d.limit == n and d.stride == 1 for d, n in zip(spec, dims, strict=True)
        ):
            return operands[0]
        return None
    if op == "concatenate":
        return operands[0] if len(operands) == 1 else None
    if op == "pad":
        config = instruction.attrs["padding"]
        assert isinstance(config, tuple)
        if all(
            isinstance(p, attr.PadDim) and p.low == 0 and p.high == 0 and p.interior == 0
            for p in config
        ):
            return operands[0]
        return None
    if op == "reverse":
        return operands[0] if not instruction.attrs.get("dimensions") else None
    return None


def swap_negated_select(instruction: Instruction) -> bool:
    """`select(not(p), a, b)` becomes `select(p, b, a)` in place; True if it did."""
    if instruction.opcode != "select":
        return False
    predicate, on_true, on_false = instruction.operands
    if predicate.opcode != "not":
        return False
    instruction.operands = [predicate.operands[0], on_false, on_true]
    return True


def _simplify_one(instruction: Instruction) -> Instruction | bool:
    """The in-place rewrite while it applies, then the identity that replaces the instruction
    (rewrite_in_post_order's protocol)."""
    if swap_negated_select(instruction):
        return True
    replacement = simplified(instruction)
    if replacement is not None and replacement is not instruction and replacement.shape == instruction.shape:
        return replacement
    return False


def simplify(computation: Computation) -> bool:
    """Applies the rewrites in post order; returns whether any applied."""
    return rewrite_in_post_order(computation, _simplify_one)


class AlgebraicSimplifier(ComputationPass, name="algebraic-simplifier", version=4):
    """Bit-exact algebraic identities (see the module docstring for the list and the ones
    left out on purpose); replaced instructions are left to dead code elimination."""

    def rewrite(self, computation: Computation, module: Module) -> bool:
        return simplify(computation)
