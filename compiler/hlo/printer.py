"""The canonical printer.

The canonical text of a module depends only on what the module computes: instructions are
named by position, listed parameters first and then operands before users in a depth-first
order from the root (so the order of independent instructions in the input does not matter),
unreachable instructions and computations are left out, attributes are printed sorted by key
in one spelling, and metadata-like attributes are dropped. Printing is a fixed point:
parse(print(m)) prints the same text. `hlo_hash` is the SHA-256 of this text.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler.hlo.attributes import format_attribute
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.literals import format_literal
from compiler.hlo.shape import ArrayShape, Shape


def _program_shape(params: tuple[Shape, ...] | list[Shape], result: Shape) -> str:
    return "(" + ", ".join(str(p) for p in params) + ")->" + str(result)


def canonical_names(computation: Computation) -> dict[int, str]:
    """The name each instruction has in the canonical text, by id: `opcode.N`, N its
    position in the execution order (what traces and --dump-passes show a user)."""
    return {id(instr): f"{instr.opcode}.{index}" for index, instr in enumerate(computation.execution_order())}


class CanonicalPrinter:
    """Prints one module canonically; holds the name maps for that one printing."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.computations = module.reachable_computations()
        self.computation_names: dict[int, str] = {}
        for index, computation in enumerate(self.computations):
            is_entry = computation is module.entry
            self.computation_names[id(computation)] = "main" if is_entry else f"computation.{index}"

    def computation_name(self, computation: Computation) -> str:
        return self.computation_names[id(computation)]

    def print(self) -> str:
        entry = self.module.entry
        if self.module.entry_layout is not None:
            params, result = self.module.entry_layout
            layout = _program_shape(params, result)
        else:
            layout = _program_shape([p.shape for p in entry.parameters], entry.root.shape)
        scheduled = ", is_scheduled=true" if entry.scheduled else ""
        lines = [f"HloModule m{scheduled}, entry_computation_layout={{{layout}}}", ""]
        for computation in self.computations:
            lines.extend(self.print_computation(computation))
            lines.append("")
        return "\n".join(lines)

    def print_computation(self, computation: Computation) -> list[str]:
        order = computation.execution_order()
        names = canonical_names(computation)
        prefix = "ENTRY " if computation is self.module.entry else ""
        lines = [f"{prefix}%{self.computation_name(computation)} {{"]
        for instruction in order:
            root = "ROOT " if instruction is computation.root else ""
            lines.append(f"  {root}%{names[id(instruction)]} = {self.instruction_body(instruction, names)}")
        lines.append("}")
        return lines

    def instruction_body(self, instruction: Instruction, names: dict[int, str]) -> str:
        return instruction_text(instruction, lambda op: f"%{names[id(op)]}", self.computation_name)


def instruction_text(instruction: Instruction, operand: Callable[[Instruction], str], computation: Callable[[Computation], str]) -> str:
    """An instruction's text after its name: shape, opcode, arguments (`operand` names each
    operand; a parameter's number and a constant's literal otherwise) and attributes in
    name order (`computation` names a called computation)."""
    head = f"{instruction.shape} {instruction.opcode}"
    if instruction.opcode == "parameter":
        args = str(instruction.parameter_number)
    elif instruction.opcode == "constant":
        assert instruction.literal is not None and isinstance(instruction.shape, ArrayShape)
        args = format_literal(instruction.literal, instruction.shape.dtype)
    else:
        args = ", ".join(operand(op) for op in instruction.operands)
    text = f"{head}({args})"
    for key in sorted(instruction.attrs):
        text += f", {key}={format_attribute(instruction.attrs[key], computation)}"
    return text


def canonical_text(module: Module) -> str:
    """The canonical text of `module` (see the module docstring)."""
    return CanonicalPrinter(module).print()


def canonical_copy(module: Module) -> Module:
    """A new module equal to what parsing `canonical_text(module)` gives, made without
    printing or parsing: the reachable computations named and ordered as printed, each one's
    reachable instructions in execution order under their canonical names, the header's
    entry layout, no metadata. The pass pipeline rewrites such a copy, so a program's module is
    parsed once (tests/hlo/test_canonical_copy.py holds the two equal)."""
    printer = CanonicalPrinter(module)
    copies: dict[int, Computation] = {}
    for computation in printer.computations:  # callees before callers
        copies[id(computation)] = _copy_computation(computation, printer.computation_name(computation), copies)
    entry = copies[id(module.entry)]
    if module.entry_layout is not None:
        layout = module.entry_layout
    else:
        layout = (tuple(p.shape for p in module.entry.parameters), module.entry.root.shape)
    return Module("m", [copies[id(c)] for c in printer.computations], entry, layout)


def _copy_computation(computation: Computation, name: str, copies: dict[int, Computation]) -> Computation:
    names = canonical_names(computation)
    new: dict[int, Instruction] = {}
    for instruction in computation.execution_order():
        new[id(instruction)] = Instruction(
            name=names[id(instruction)],
            opcode=instruction.opcode,
            shape=instruction.shape,
            operands=[new[id(op)] for op in instruction.operands],
            attrs={key: _copy_attribute(value, copies) for key, value in instruction.attrs.items()},
            literal=None if instruction.literal is None else instruction.literal.copy(),
            parameter_number=instruction.parameter_number,
            location=instruction.location,
        )
    return Computation(name, list(new.values()), new[id(computation.root)], computation.location)


def _copy_attribute(value: object, copies: dict[int, Computation]) -> object:
    """An attribute value for the copy: called computations replaced by their copies (every
    other attribute type is immutable: numbers, strings, tuples, frozen dataclasses)."""
    if isinstance(value, Computation):
        return copies[id(value)]
    if type(value) is tuple:
        return tuple(_copy_attribute(v, copies) for v in value)
    return value
