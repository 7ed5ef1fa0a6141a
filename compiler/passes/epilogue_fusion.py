"""Dot epilogue fusion: a `dot` whose only user is a loop fusion (bias, activation, residual,
scaling...) that reads the dot's result only at its own output position becomes one
`fusion` with kind=kOutput: the epilogue is computed inside the dot's kernel, right after
each block of rows is accumulated, instead of in a second pass over memory
(compiler/codegen/fusion.py, compiler/codegen/dot_conv.py).

The dot's fma chains are untouched and the epilogue computes each element with the same
per-element code as the loop fusion, from the same bits, so the result is bit-identical.
Only dots whose result is their accumulation type fuse (an f16/bf16 dot rounds its f32
chains in a separate step); convolutions are not fused. Runs after loop fusion.
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
from compiler.hlo.opcodes import CONTRACTIONS
from compiler.hlo.shape import ArrayShape
from compiler.passes.fusibility import dot_takes_epilogue, read_at_own_position
from compiler.passes.loop_fusion import FusionPass


def _epilogue_of(dot: Instruction, computation: Computation, user_map: dict[int, list[Instruction]]) -> Instruction | None:
    """The single-output loop fusion that is the dot's only user and reads it in place."""
    its_users = user_map.get(id(dot), [])
    if dot is computation.root or not dot_takes_epilogue(dot) or len(its_users) != 1:
        return None
    fusion = its_users[0]
    if fusion.opcode != "fusion" or fusion.attrs.get("kind") != "kLoop" or not isinstance(fusion.shape, ArrayShape):
        return None
    callee = fusion.attrs["calls"]
    assert isinstance(callee, Computation)
    if fusion.array_shape.dims != dot.array_shape.dims or callee.root.opcode == "parameter":
        return None
    reads = [p for p, argument in zip(callee.parameters, fusion.operands, strict=True) if argument is dot]
    return fusion if all(read_at_own_position(callee, p) for p in reads) else None


def fuse_epilogue(module: Module, computation: Computation, dot: Instruction, fusion: Instruction, names: NameAllocator) -> Instruction:
    """Replaces `dot` and its epilogue `fusion` by one kOutput fusion."""
    callee = fusion.attrs["calls"]
    assert isinstance(callee, Computation)
    copy, mapping = clone_computation(callee, names)
    arguments: list[Instruction] = []
    parameters: list[Instruction] = []

    def parameter_for(value: Instruction) -> Instruction:
        for argument, parameter in zip(arguments, parameters, strict=True):
            if argument is value:
                return parameter
        parameter = Instruction(names.fresh("param"), "parameter", value.shape, parameter_number=len(parameters))
        arguments.append(value)
        parameters.append(parameter)
        return parameter

    inner_dot = Instruction(names.fresh(dot.name), dot.opcode, dot.shape, [parameter_for(op) for op in dot.operands], dict(dot.attrs), location=dot.location)
    bindings = [
        (mapping[id(parameter)], inner_dot if argument is dot else parameter_for(argument))
        for parameter, argument in zip(callee.parameters, fusion.operands, strict=True)
    ]
    body, root = bind_parameters(copy, bindings)
    return install_fusion(module, computation, fusion, "kOutput", "fused_output", arguments, parameters, [inner_dot, *body], root, names)


class EpilogueFusion(FusionPass, name="epilogue-fusion", version=1):
    """Fuses a dot's elementwise epilogue into the dot (module docstring)."""

    def fuse(self, module: Module, computation: Computation, names: NameAllocator) -> bool:
        fused_here = False
        for dot in [i for i in computation.post_order() if i.opcode in CONTRACTIONS]:
            epilogue = _epilogue_of(dot, computation, users(computation))
            if epilogue is not None:
                fuse_epilogue(module, computation, dot, epilogue, names)
                fused_here = True
        return fused_here
