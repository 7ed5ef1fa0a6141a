"""Sibling multi-output fusion: loop fusions of the same output shape that read a common
array operand become one kLoop fusion whose root is a tuple of their results, so the shared
operand is read once per element and one loop computes all of them
(compiler/codegen/fusion.py). Users read the results through get-tuple-element.

Each result is computed by its own generators exactly as before, so the bits do not change.
Two fusions merge only when neither depends on the other (otherwise the merged fusion would
depend on itself), and only when both run the same loop (both vector or both scalar:
merging a vector loop into a scalar one would slow it down).
"""

from __future__ import annotations

from compiler.hlo.editing import (
    NameAllocator,
    add_computation_before,
    bind_parameters,
    clone_computation,
    users,
)
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.shape import ArrayShape, TupleShape
from compiler.passes.fusibility import flat_identity
from compiler.passes.loop_fusion import FusionPass


def _callee(fusion: Instruction) -> Computation:
    callee = fusion.attrs["calls"]
    assert isinstance(callee, Computation)
    return callee


def _results(fusion: Instruction) -> list[Instruction]:
    """The instructions computing a loop fusion's results (the root, or its tuple's operands)."""
    root = _callee(fusion).root
    return list(root.operands) if root.opcode == "tuple" else [root]


def _output_dims(fusion: Instruction) -> tuple[int, ...] | None:
    shapes = fusion.shape.elements if isinstance(fusion.shape, TupleShape) else (fusion.shape,)
    dims = {s.dims for s in shapes if isinstance(s, ArrayShape)}
    return dims.pop() if len(dims) == 1 and len(shapes) == len([s for s in shapes if isinstance(s, ArrayShape)]) else None


def _vector(fusion: Instruction) -> bool:
    callee = _callee(fusion)
    return all(flat_identity(callee, result)[0] for result in _results(fusion))


def _depends_on(start: Instruction, target: Instruction) -> bool:
    """Whether `start` (transitively) reads `target`."""
    pending = list(start.operands)
    seen: set[int] = set()
    while pending:
        value = pending.pop()
        if value is target:
            return True
        if id(value) not in seen:
            seen.add(id(value))
            pending.extend(value.operands)
    return False


def _candidate(fusion: Instruction, user_map: dict[int, list[Instruction]], computation: Computation) -> bool:
    """A loop fusion whose results all have one shape; a multi-output one only when every
    user reads it through get-tuple-element (those indices are renumbered). Its results are
    arrays: a fusion from the input whose root makes a tuple itself (XLA fuses a variadic
    reduce so) is left as it is."""
    if fusion.opcode != "fusion" or fusion.attrs.get("kind") != "kLoop" or _output_dims(fusion) is None:
        return False
    if not all(isinstance(result.shape, ArrayShape) for result in _results(fusion)):
        return False
    if isinstance(fusion.shape, TupleShape):
        return fusion is not computation.root and all(u.opcode == "get-tuple-element" for u in user_map.get(id(fusion), []))
    return True


def _shares_an_array(a: Instruction, b: Instruction) -> bool:
    return any(op.array_shape.rank > 0 and any(op is other for other in b.operands) for op in a.operands if isinstance(op.shape, ArrayShape))


def merge(module: Module, computation: Computation, a: Instruction, b: Instruction, names: NameAllocator) -> Instruction:
    """One kLoop fusion computing a's results, then b's; their users read them by index."""
    arguments: list[Instruction] = []
    parameters: list[Instruction] = []
    body: list[Instruction] = []
    results: list[Instruction] = []
    for fusion in (a, b):
        callee = _callee(fusion)
        copy, mapping = clone_computation(callee, names)
        bindings = []
        for parameter, argument in zip(callee.parameters, fusion.operands, strict=True):
            position = next((n for n, existing in enumerate(arguments) if existing is argument), None)
            if position is None:
                position = len(arguments)
                arguments.append(argument)
                parameters.append(Instruction(names.fresh("param"), "parameter", argument.shape, parameter_number=position))
            bindings.append((mapping[id(parameter)], parameters[position]))
        spliced, root = bind_parameters(copy, bindings)
        # A tuple root is not kept: its elements become elements of the merged tuple.
        body.extend(i for i in spliced if i is not copy.root or i.opcode != "tuple")
        results.extend(root.operands if root.opcode == "tuple" else [root])
    shape = TupleShape(tuple(r.shape for r in results))
    root = Instruction(names.fresh("tuple"), "tuple", shape, results)
    called = Computation(names.fresh("fused_computation"), parameters + body + [root], root, computation.location)
    merged = Instruction(names.fresh("fusion"), "fusion", shape, arguments, {"kind": "kLoop", "calls": called}, location=a.location)
    _redirect(computation, a, merged, 0, names)
    _redirect(computation, b, merged, len(_results(a)), names)
    position = next(n for n, i in enumerate(computation.instructions) if i is b)
    computation.instructions.insert(position + 1, merged)
    add_computation_before(module, computation, called)
    return merged


def _redirect(computation: Computation, old: Instruction, merged: Instruction, offset: int, names: NameAllocator) -> None:
    """Users of `old` read result `offset + k` of `merged` instead of result k of `old`."""
    if isinstance(old.shape, TupleShape):
        for user in computation.instructions:
            if user.opcode == "get-tuple-element" and user.operands[0] is old:
                user.operands = [merged]
                user.attrs["index"] = offset + int(user.attrs["index"])  # type: ignore[call-overload]
        return
    element = Instruction(names.fresh("get-tuple-element"), "get-tuple-element", old.shape, [merged], {"index": offset})
    for user in computation.instructions:
        user.operands = [element if op is old else op for op in user.operands]
    if computation.root is old:
        computation.root = element
    position = next(n for n, i in enumerate(computation.instructions) if i is old)
    computation.instructions.insert(position + 1, element)


class MultiOutputFusion(FusionPass, name="multi-output-fusion", version=1):
    """Merges sibling loop fusions that read a common array (module docstring)."""

    def fuse(self, module: Module, computation: Computation, names: NameAllocator) -> bool:
        merged = False
        while self._merge_one(module, computation, names):
            merged = True
        return merged

    def _merge_one(self, module: Module, computation: Computation, names: NameAllocator) -> bool:
        """Merges the first mergeable pair in execution order; False when there is none."""
        user_map = users(computation)
        live = computation.post_order()
        fusions = [i for i in live if _candidate(i, user_map, computation)]
        for number, a in enumerate(fusions):
            for b in fusions[number + 1 :]:
                if _output_dims(a) != _output_dims(b) or not _shares_an_array(a, b) or _vector(a) != _vector(b):
                    continue
                if _depends_on(a, b) or _depends_on(b, a):
                    continue
                merge(module, computation, a, b, names)
                return True
        return False
