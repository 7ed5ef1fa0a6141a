"""Reduction input fusion: a `reduce` whose input is computed by an elementwise or
index-mapping chain (a kLoop fusion, or one fusible instruction) used by nothing else reads
that chain's values as it goes instead of a buffer. The reduce and its producers become one
`fusion` with kind=kInput whose root is the reduce (compiler/codegen/fusion.py).

The reduction itself is unchanged: the same blocks, lane folds and pairwise trees of the
contract, in the same order, over the same input bits (a producer computes exactly the bits
it would have stored, every op being a pure function of its operands' bits), so the result
is bit-identical. Runs after loop fusion; scalar constants (init values, fills) are copied
into the fusion.
"""

from __future__ import annotations

from compiler.hlo.editing import (
    NameAllocator,
    bind_parameters,
    clone_computation,
    install_fusion,
    users,
)
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.passes.fusibility import StandIns, is_fusible
from compiler.passes.loop_fusion import FusionPass


def _absorbable(producer: Instruction, reduce: Instruction, computation: Computation, user_map: dict[int, list[Instruction]]) -> bool:
    """A kLoop fusion or a fusible non-constant instruction read by `reduce` alone."""
    if producer is computation.root or user_map.get(id(producer), []) != [reduce]:
        return False
    if producer.opcode == "fusion":
        return producer.attrs.get("kind") == "kLoop"
    return is_fusible(producer) and producer.opcode != "constant"


def fuse_reduce(module: Module, computation: Computation, reduce: Instruction, names: NameAllocator, user_map: dict[int, list[Instruction]]) -> bool:
    """Replaces `reduce` and its absorbable input producers by a kInput fusion; False if no
    input has a producer worth fusing."""
    half = len(reduce.operands) // 2
    absorbed = []
    for operand in reduce.operands[:half]:
        if _absorbable(operand, reduce, computation, user_map) and all(operand is not a for a in absorbed):
            absorbed.append(operand)
    if not absorbed:
        return False
    body: list[Instruction] = []
    stand_ins = StandIns(names, body)
    outside = stand_ins.of
    inner: dict[int, Instruction] = {}
    for producer in absorbed:
        if producer.opcode == "fusion":
            callee = producer.attrs["calls"]
            assert isinstance(callee, Computation)
            copy, mapping = clone_computation(callee, names)
            bindings = [(mapping[id(p)], outside(arg)) for p, arg in zip(callee.parameters, producer.operands, strict=True)]
            spliced, inner[id(producer)] = bind_parameters(copy, bindings)
            body.extend(spliced)
        else:
            producer.operands = [outside(op) for op in producer.operands]
            body.append(producer)
            inner[id(producer)] = producer
    fused_reduce = Instruction(names.fresh(reduce.name), "reduce", reduce.shape, [inner.get(id(op)) or outside(op) for op in reduce.operands],
                               dict(reduce.attrs), location=reduce.location)  # fmt: skip
    body.append(fused_reduce)
    install_fusion(module, computation, reduce, "kInput", "fused_reduction", stand_ins.arguments, stand_ins.parameters, body, fused_reduce, names)
    return True


class InputFusion(FusionPass, name="input-fusion", version=1):
    """Fuses the input producers of reduces into kInput fusions (module docstring)."""

    def fuse(self, module: Module, computation: Computation, names: NameAllocator) -> bool:
        reduces = [i for i in computation.post_order() if i.opcode == "reduce"]
        # Users are recomputed for each: an earlier fusion replaced instructions.
        return any([fuse_reduce(module, computation, reduce, names, users(computation)) for reduce in reduces])
