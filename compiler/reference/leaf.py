"""One op-trace leaf, re-executed from its operands: what a dispute's committee member does
(docs/disputes.md, "The committee referee").

The graph commitment's record i (compiler/hlo/commitment.py) is the i-th op-trace leaf of the
optimized module, `trace_leaves(module)[i]`; record n is the result record. A member holds
the optimized module (it compiles the job itself), the job's inputs and the values the
parties serve of the earlier leaves the instruction reads (by trace index, the flat output
buffers of that leaf, as `Executable.run_traced(capture=...)` copies them out). It then

    values = evaluate_leaf(module, i, trace_values, inputs)
    vote   = leaf_digest(values)            # i < n: the op-level trace's digest of leaf i
    vote   = result_leaf_digest(values)     # i == n: the result digest

`evaluate_leaf` builds the instruction's operand values through the tuple plumbing, the way
the record's POSITIONs say (parameter p: inputs[p]; a constant: its literal; tuple,
get-tuple-element and opt-barrier: evaluated structurally; leaf j: trace_values[j] nested
into leaf j's shape), and evaluates only that instruction with the reference evaluator. The
record's result leaf evaluates nothing: its values are the entry root's, resolved the same
way, i.e. the job's flattened outputs.

Served data is checked before it is used, never trusted: a missing leaf, a value of another
element type or dimensions, a sub-byte or pred value outside its type, and (when the member
passes the digests the chain proved, `trace_digests`) a value whose digest is not the
committed one are refused with a ValueError naming the trace index and what was expected.
A digest binds a value up to its NaN payloads (digests canonicalize NaNs), so a served value
may differ from the party's own in a NaN's payload, which only data-movement ops keep.

In the layers (tests/test_import_direction.py) this is compiler/reference/: it may read the
IR and the graph commitment's enumeration (compiler/hlo/) and attest's digests; the runtime
that captures the values is above it, and the node reaches both through compiler.api.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from attest.digests import tensor_digest, tuple_digest
from compiler.hlo.commitment import trace_leaves
from compiler.hlo.ir import Instruction, Module
from compiler.hlo.shape import ArrayShape, Shape, TupleShape, flatten
from compiler.numerics.floats import check_fp_environment
from compiler.program import bind_arguments
from compiler.reference import HANDLERS
from compiler.reference.evaluator import Evaluator, Value, flatten_value


def leaf_digest(values: Sequence[np.ndarray]) -> str:
    """The digest an op-level trace records for a traced instruction whose flat output buffers
    are `values` (compiler/runtime/executable.py `_record`): one buffer, its tensor digest;
    several, the tuple digest of their tensor digests."""
    digests = [tensor_digest(np.asarray(v)) for v in values]
    if not digests:
        raise ValueError("a traced instruction has at least one output buffer")
    return digests[0] if len(digests) == 1 else tuple_digest(digests)


def result_leaf_digest(values: Sequence[np.ndarray]) -> str:
    """The digest of the result record (index n) for the job's flattened outputs `values`:
    the tuple digest of their tensor digests, always a tuple digest, even of one output. The
    same rule as the node's result digest (node.protocol.result_digest_of, which the compiler
    may not import), in hex."""
    return tuple_digest([tensor_digest(np.asarray(v)) for v in values])


def leaf_count(module: Module) -> int:
    """n: the number of op-trace leaves (the result record is index n)."""
    return len(trace_leaves(module))


def leaf_operands(module: Module, index: int) -> tuple[int, ...]:
    """The trace indices whose values `evaluate_leaf(module, index, ...)` reads, in first
    appearance order: the graph leaf's tail (GraphRecord.trace_operands) of record `index`."""
    leaves = trace_leaves(module)
    _check_index(index, len(leaves))
    position = {id(leaf): j for j, leaf in enumerate(leaves)}
    found: list[int] = []
    seen: set[int] = set()

    def visit(instruction: Instruction) -> None:  # the depth-first order of the positions
        if id(instruction) in position:
            if position[id(instruction)] not in found:
                found.append(position[id(instruction)])
            return
        if id(instruction) in seen:
            return
        seen.add(id(instruction))
        for operand in instruction.operands:
            visit(operand)

    for operand in _roots(module, leaves, index):
        visit(operand)
    return tuple(found)


def evaluate_leaf(
    module: Module,
    index: int,
    trace_values: Mapping[int, Sequence[np.ndarray]],
    inputs: Sequence[np.ndarray],
    *,
    trace_digests: Mapping[int, str] | None = None,
    max_while_iterations: int | None = None,
) -> list[np.ndarray]:
    """The flat output values of op-trace leaf `index` of the optimized `module`, evaluated by
    the reference from its operands (see the module docstring); for index n, the job's
    flattened outputs, evaluated from nothing. `trace_values[j]`: the flat output buffers of
    leaf j, needed for every j of `leaf_operands(module, index)`; `inputs`: the job's
    arguments, one per entry parameter; `trace_digests` (optional): leaf j's committed digest,
    which each used value it names must have. ValueError for anything missing or malformed.
    A while loop runs at most `max_while_iterations` times when given (served values may
    steer a loop, so a member bounds it)."""
    leaves = trace_leaves(module)
    _check_index(index, len(leaves))
    entry = module.entry
    arguments = bind_arguments([p.shape for p in entry.parameters], inputs)
    position = {id(leaf): j for j, leaf in enumerate(leaves)}
    roots = _roots(module, leaves, index)

    # The plumbing the roots read, down to parameters, constants and op-trace leaves.
    needed: set[int] = set()
    stack = list(roots)
    while stack:
        instruction = stack.pop()
        if id(instruction) in needed:
            continue
        needed.add(id(instruction))
        if id(instruction) not in position:
            stack.extend(instruction.operands)

    check_fp_environment()
    evaluator = Evaluator(HANDLERS, max_while_iterations=max_while_iterations)
    values: dict[int, Value] = {}
    with np.errstate(all="ignore"):
        for instruction in entry.execution_order():
            if id(instruction) not in needed:
                continue
            if id(instruction) in position:
                j = position[id(instruction)]
                values[id(instruction)] = _served(j, instruction.shape, trace_values, trace_digests)
            elif instruction.opcode == "parameter":
                values[id(instruction)] = arguments[instruction.parameter_number]
            else:
                values[id(instruction)] = evaluator.evaluate_instruction(instruction, [values[id(op)] for op in instruction.operands])
        operands = [values[id(op)] for op in roots]
        if index == len(leaves):
            return flatten_value(operands[0])
        return flatten_value(evaluator.evaluate_instruction(leaves[index], operands))


def _check_index(index: int, n: int) -> None:
    if not isinstance(index, int | np.integer) or not 0 <= index <= n:
        raise ValueError(f"trace index {index!r} is outside 0..{n} (n = {n} op-trace leaves, then the result record)")


def _roots(module: Module, leaves: list[Instruction], index: int) -> list[Instruction]:
    """What record `index` reads: the leaf's operands, or the entry root for the result."""
    return list(leaves[index].operands) if index < len(leaves) else [module.entry.root]


def _served(j: int, shape: Shape, trace_values: Mapping[int, Sequence[np.ndarray]], trace_digests: Mapping[int, str] | None) -> Value:
    """Leaf j's served flat buffers, checked against its shape (and digest), nested into it."""
    expected = flatten(shape)
    described = shape.str_without_layout()
    if j not in trace_values:
        raise ValueError(f"no value of trace leaf {j} ({described}) was supplied; it is an operand of the instruction")
    supplied = trace_values[j]
    if isinstance(supplied, np.ndarray) or not isinstance(supplied, Sequence):
        raise ValueError(f"trace leaf {j}: expected a list of {len(expected)} array(s) for {described}, got {type(supplied).__name__}")
    if len(supplied) != len(expected):
        raise ValueError(f"trace leaf {j}: expected {len(expected)} flat buffer(s) for {described}, got {len(supplied)}")
    flat = [_checked(j, k, array_shape, described, value) for k, (array_shape, value) in enumerate(zip(expected, supplied, strict=True))]
    if trace_digests is not None and j in trace_digests and leaf_digest(flat) != trace_digests[j]:
        raise ValueError(f"trace leaf {j}: the supplied value's digest {leaf_digest(flat)} is not the committed {trace_digests[j]}")
    nested, rest = _nest(shape, flat)
    assert not rest
    return nested


def _checked(j: int, k: int, shape: ArrayShape, described: str, value: object) -> np.ndarray:
    where = f"trace leaf {j}" + (f" buffer {k}" if described != shape.str_without_layout() else "")
    if not isinstance(value, np.ndarray):
        raise ValueError(f"{where}: expected an array {shape.str_without_layout()} (held as {shape.dtype.numpy}), got {type(value).__name__}")
    if value.dtype != shape.dtype.numpy or tuple(value.shape) != shape.dims:
        got = f"{value.dtype}[{','.join(str(d) for d in value.shape)}]"
        raise ValueError(f"{where}: expected {shape.str_without_layout()} (held as {shape.dtype.numpy}), got {got}")
    array = value.copy(order="C")  # never the caller's memory (ascontiguousarray would make a scalar 1-d)
    if shape.dtype.is_sub_byte:
        least, greatest = shape.dtype.integer_bounds
        if ((array < least) | (array > greatest)).any():
            raise ValueError(f"{where}: {shape.str_without_layout()} holds a value outside [{least}, {greatest}]")
    elif array.dtype == np.bool_ and (array.view(np.uint8) > 1).any():
        raise ValueError(f"{where}: {shape.str_without_layout()} holds a byte that is not 0 or 1")
    return array


def _nest(shape: Shape, flat: list[np.ndarray]) -> tuple[Value, list[np.ndarray]]:
    """The value of `shape` made of the first arrays of `flat` (depth first, left to right,
    the order of flatten_value), and the arrays left over."""
    if isinstance(shape, TupleShape):
        elements = []
        for element in shape.elements:
            value, flat = _nest(element, flat)
            elements.append(value)
        return tuple(elements), flat
    return flat[0], flat[1:]
