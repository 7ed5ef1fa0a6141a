"""The HLO text parser.

Accepts what JAX (`jax.jit(f).lower(...).as_text(dialect="hlo")`) and XLA dumps print: the
module header, computations with or without `%` names and signatures, instructions with or
without operand shapes, typed attributes, literals. Every error is an `HloError` naming the
line and column.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from compiler.hlo import attributes as attr
from compiler.hlo.errors import HloParseError, HloUnsupportedError, HloVerifyError, SourceLocation
from compiler.hlo.ir import Computation, Instruction, Module
from compiler.hlo.literals import LiteralSyntaxError, parse_literal
from compiler.hlo.opcodes import KNOWN, SUPPORTED, WINDOWED, unsupported_error
from compiler.hlo.shape import ArrayShape, Shape, TupleShape, default_layout
from compiler.hlo.source_info import SECTIONS, SourceFrames, attribute_sources
from compiler.hlo.verifier import infer_shape
from core.dtypes import BY_NAME, UNSUPPORTED_TYPE_NAMES

_NAME = re.compile(r"%?([A-Za-z0-9_][A-Za-z0-9_.\-]*)")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
# A line that starts an instruction: `[ROOT] name = ` and a shape, a tuple shape or (shape
# left out) an opcode's operand list; not a wrapped attribute's `key={...` or `key=value`.
_NEXT_INSTRUCTION = re.compile(r"[ \t]*(ROOT\s+)?%?[\w.\-]+\s*=\s*([a-z][a-z0-9]*\[|\(|[a-z][a-z0-9\-]*\()")
# A line that is only a closing brace, and the indentation before it.
_CLOSING_LINE = re.compile(r"([ \t]*)\}[ \t]*(\n|$)")
_OMITTED_SHAPE = re.compile(r"([a-z][a-z0-9\-]*)\(")
# `, <shape> <opcode>(`: the next operand of an operand list, written as an instruction.
_NESTED_OPERAND = re.compile(r",\s*([a-z][a-z0-9]*\[[^\]]*\](\{[^}]*\})?\s+)?[a-z][a-z0-9\-]*\(")
_INTEGER = re.compile(r"-?\d+")
_TYPE_NAME = re.compile(r"[a-z][a-z0-9]*")
_SHAPE_PREFIX = re.compile(r"([a-z][a-z0-9]*)\[")
_ALL_TYPE_NAMES = frozenset(BY_NAME) | frozenset(UNSUPPORTED_TYPE_NAMES)
_WHITESPACE = re.compile(r"(?:\s+|/\*.*?\*/|//[^\n]*)+", re.DOTALL)

# Layout marks (`{1,0:T(8,128)S(1)}`): one letter or two, `#` or `*`, and a parenthesized
# argument; T may be followed by more tiles.
_LAYOUT_MARK = re.compile(r"(?P<kind>[A-Z]{1,2}|#|\*)\((?P<argument>[^()]*)\)")
_LAYOUT_TILE = re.compile(r"\([^()]*\)")
# Tiles, memory space, element size, split configs, index and pointer types, dynamic-shape
# metadata size: where and how elements sit in memory, never what they are.
_VALUE_PRESERVING_MARKS = frozenset({"T", "S", "E", "SC", "#", "*", "M", "L"})
# Of those, the ones that move elements away from the minor-to-major order.
_REARRANGING_MARKS = frozenset({"T", "SC"})


# Deeper nesting than these is rejected rather than risking the interpreter's recursion limit
# (the parser recurses once a level): tuple shapes, and instructions written in place of an
# operand of another (`add(f32[] negate(x), y)`).
MAX_TUPLE_DEPTH = 64
MAX_OPERAND_DEPTH = 64
# The most dimensions an array may have (numpy's own limit).
MAX_RANK = 64


@dataclass
class _PendingInstruction:
    """An instruction whose operand names are not yet resolved."""

    instruction: Instruction
    operand_names: list[tuple[str, int]]  # (name, text offset)


class Parser:
    """Recursive-descent parser over the characters of one HLO text."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        # Instructions written inside another's operand list (`add(s32[] parameter(0), ...)`),
        # in the order they are met; the computation takes them before their user.
        self._nested: list[_PendingInstruction] = []
        self._operand_depth = 0  # how many operand lists the parser is inside now
        self._statement_indent = 0  # columns of whitespace before the instruction being read
        # Whether a shape read since the current instruction began has tiles or splits, and
        # the instructions whose shapes had them.
        self._rearranged_here = False
        self._rearranged: list[Instruction] = []
        self.frames = SourceFrames()  # the module's debug tables (debug_sections)

    # --- positions and errors -------------------------------------------------------------
    def location(self, offset: int | None = None) -> SourceLocation:
        offset = self.pos if offset is None else offset
        line = bisect.bisect_right(self._line_starts, offset)
        return SourceLocation(line, offset - self._line_starts[line - 1] + 1)

    def error(self, message: str, offset: int | None = None) -> HloParseError:
        return HloParseError(message, self.location(offset))

    def unsupported(self, message: str, offset: int | None = None) -> HloUnsupportedError:
        return HloUnsupportedError(message, self.location(offset))

    # --- lexical helpers ------------------------------------------------------------------
    def skip(self) -> None:
        match = _WHITESPACE.match(self.text, self.pos)
        if match:
            self.pos = match.end()

    def at_end(self) -> bool:
        self.skip()
        return self.pos >= len(self.text)

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def describe_here(self) -> str:
        self.skip()
        if self.pos >= len(self.text):
            return "end of text"
        snippet = self.text[self.pos : self.pos + 20].split("\n")[0]
        return repr(snippet)

    def expect(self, token: str) -> None:
        self.skip()
        if not self.text.startswith(token, self.pos):
            raise self.error(f"expected {token!r}, found {self.describe_here()}")
        self.pos += len(token)

    def accept(self, token: str) -> bool:
        self.skip()
        if self.text.startswith(token, self.pos):
            self.pos += len(token)
            return True
        return False

    def accept_keyword(self, word: str) -> bool:
        self.skip()
        end = self.pos + len(word)
        if self.text.startswith(word, self.pos) and not (
            end < len(self.text) and (self.text[end].isalnum() or self.text[end] in "_.-")
        ):
            self.pos = end
            return True
        return False

    def match(self, pattern: re.Pattern[str], what: str) -> re.Match[str]:
        self.skip()
        found = pattern.match(self.text, self.pos)
        if not found:
            raise self.error(f"expected {what}, found {self.describe_here()}")
        self.pos = found.end()
        return found

    def name(self) -> str:
        return self.match(_NAME, "a name").group(1)

    def integer(self) -> int:
        return int(self.match(_INTEGER, "an integer").group())

    # --- shapes ---------------------------------------------------------------------------
    def shape(self, depth: int = 0) -> Shape:
        self.skip()
        start = self.pos
        if self.accept("("):
            if depth >= MAX_TUPLE_DEPTH:
                raise self.unsupported(f"tuple shapes nested deeper than {MAX_TUPLE_DEPTH}", start)
            elements: list[Shape] = []
            if not self.accept(")"):
                while True:
                    elements.append(self.shape(depth + 1))
                    if self.accept(")"):
                        break
                    self.expect(",")
            return TupleShape(tuple(elements))
        return self.array_shape()

    def array_shape(self) -> ArrayShape:
        self.skip()
        start = self.pos
        found = _TYPE_NAME.match(self.text, self.pos)
        if not found:
            raise self.error(f"expected a shape, found {self.describe_here()}")
        type_name = found.group()
        if type_name not in BY_NAME:
            if type_name in UNSUPPORTED_TYPE_NAMES:
                raise self.unsupported(f"element type {type_name} is not supported", start)
            raise self.error(f"unknown element type {type_name!r}", start)
        self.pos = found.end()
        dtype = BY_NAME[type_name]
        if not self.text.startswith("[", self.pos):
            raise self.error(f"expected '[' after element type {type_name}")
        self.pos += 1
        dims: list[int] = []
        self.skip()
        if not self.accept("]"):
            while True:
                self.skip()
                if self.text.startswith(("<=", "?"), self.pos):
                    raise self.unsupported("dynamic shapes are not supported")
                dim = self.integer()
                if dim < 0:
                    raise self.error(f"negative dimension size {dim}")
                dims.append(dim)
                if len(dims) > MAX_RANK:
                    raise self.unsupported(f"arrays of more than {MAX_RANK} dimensions are not supported", start)
                if self.accept("]"):
                    break
                self.expect(",")
        layout = default_layout(len(dims))
        if self.text.startswith("{", self.pos):
            layout = self.layout(len(dims), dtype.bits)
        return ArrayShape(dtype, tuple(dims), layout)

    def layout(self, rank: int, element_bits: int) -> tuple[int, ...]:
        """A layout `{minor_to_major[:marks]}`. Marks that only say where elements lie in
        memory (tiles, memory space, split, index and pointer types, the element size of
        4-bit types) are read and dropped: every value stays the same, and the contract
        computes on values. A mark outside those is refused; an instruction whose shapes
        carry tiles or splits is remembered (a bitcast reinterprets memory, see
        `_refuse_rearranged_bitcasts`)."""
        start = self.pos
        end = self.text.find("}", start)
        if end < 0:
            raise self.error("unterminated layout '{'", start)
        body = self.text[start + 1 : end]
        # A mark's parentheses may hold a shape, whose own layout closes a brace early.
        while body.count("(") > body.count(")") or body.count("{") > 0:
            end = self.text.find("}", end + 1)
            if end < 0:
                raise self.error("unterminated layout '{'", start)
            body = self.text[start + 1 : end]
        order_text, _, marks = body.partition(":")
        if marks:
            self._read_layout_marks(body, marks, element_bits, start)
        parts = [p.strip() for p in order_text.split(",") if p.strip()]
        if not all(_INTEGER.fullmatch(p) for p in parts):
            raise self.error(f"bad layout {{{body}}}", start)
        order = tuple(int(p) for p in parts)
        if sorted(order) != list(range(rank)):
            raise self.error(f"layout {{{body}}} is not a permutation of 0..{rank - 1}", start)
        self.pos = end + 1
        return order

    def _read_layout_marks(self, body: str, marks: str, element_bits: int, start: int) -> None:
        position = 0
        while position < len(marks):
            found = _LAYOUT_MARK.match(marks, position)
            if found is None:
                raise self.error(f"bad layout {{{body}}}", start)
            kind, argument = found.group("kind"), found.group("argument")
            position = found.end()
            if kind == "T":
                while (more := _LAYOUT_TILE.match(marks, position)) is not None:  # T(8,128)(2,1)
                    position = more.end()
            if kind == "E" and int(argument or 0) != element_bits:
                raise self.unsupported(f"layout {{{body}}} stores elements in {argument} bits, not the type's {element_bits}: the values would change", start)
            if kind not in _VALUE_PRESERVING_MARKS:
                raise self.unsupported(
                    f"layout {{{body}}} has the mark {kind}(...), which vxla does not read; only tiles T, memory "
                    "spaces S, splits SC, element sizes E, and index and pointer types are accepted",
                    start,
                )
            if kind in _REARRANGING_MARKS:
                self._rearranged_here = True

    def program_shape(self) -> tuple[tuple[Shape, ...], Shape]:
        """`(shape, shape, ...)->shape`, with optional `name:` before each parameter shape."""
        self.expect("(")
        params: list[Shape] = []
        if not self.accept(")"):
            while True:
                save = self.pos
                found = _NAME.match(self.text, self.pos) if self.peek() != "(" else None
                if found:
                    self.pos = found.end()
                    if not self.accept(":"):
                        self.pos = save
                params.append(self.shape())
                if self.accept(")"):
                    break
                self.expect(",")
        self.expect("->")
        return tuple(params), self.shape()

    # --- attribute values -----------------------------------------------------------------
    def raw_value(self, multiline: bool = False) -> tuple[str, int]:
        """The text of one attribute value: up to a ',' or whitespace outside brackets and
        strings. Returns the text and its offset. A value may go on over lines (XLA wraps
        long ones, and a JSON backend_config spans lines with its own closing braces), but
        inside an instruction a bracket still open where a line starts the next instruction,
        or closes the computation (a lone `}` indented no deeper than the instruction), is
        unbalanced; the module header's values may span any lines (`multiline`)."""
        self.skip()
        start = self.pos
        depth = 0
        index = start
        text = self.text
        while index < len(text):
            char = text[index]
            if char == '"':
                index = self._string_end(index)
                continue
            if char == "\n" and depth > 0 and not multiline and self._statement_ends_before(index + 1):
                break
            if char in "{([":
                depth += 1
            elif char in "})]":
                if depth == 0:
                    break
                depth -= 1
            elif depth == 0 and (char == "," or char.isspace()):
                break
            index += 1
        if depth != 0:
            raise self.error("unbalanced brackets in attribute value", start)
        if index == start:
            raise self.error(f"expected an attribute value, found {self.describe_here()}")
        self.pos = index
        return text[start:index], start

    def _statement_ends_before(self, line_start: int) -> bool:
        """Whether the line at `line_start` starts the next instruction or closes the
        computation, so the instruction being read cannot go on into it."""
        if _NEXT_INSTRUCTION.match(self.text, line_start):
            return True
        closing = _CLOSING_LINE.match(self.text, line_start)
        return closing is not None and len(closing.group(1)) <= self._statement_indent

    def _string_end(self, index: int) -> int:
        """Index just after the string literal starting at `index`."""
        text = self.text
        start = index
        index += 1
        while index < len(text):
            if text[index] == "\\":
                index += 2
                continue
            if text[index] == '"':
                return index + 1
            index += 1
        raise self.error("unterminated string", start)

    def attributes(self, multiline: bool = False) -> list[tuple[str, str, int]]:
        """`, key=value` pairs after an instruction or module header."""
        found: list[tuple[str, str, int]] = []
        while True:
            self.skip()
            save = self.pos
            if not self.accept(","):
                return found
            self.skip()
            key_match = _IDENT.match(self.text, self.pos)
            if not key_match:
                self.pos = save
                return found
            key_offset = self.pos
            self.pos = key_match.end()
            if self._nested_operand_follows(save):
                self.pos = save
                return found
            self.expect("=")
            value, _ = self.raw_value(multiline)
            found.append((key_match.group(), value, key_offset))

    def _nested_operand_follows(self, comma: int) -> bool:
        """Whether the `, ...` at `comma` is the next operand of an enclosing operand list (an
        instruction written in place of an operand, `s32[] constant(1)`), not an attribute."""
        return bool(_NESTED_OPERAND.match(self.text, comma))

    # --- instructions ---------------------------------------------------------------------
    def instruction(self) -> tuple[_PendingInstruction, bool]:
        self.skip()
        is_root = self.accept_keyword("ROOT")
        self.skip()
        start = self.pos
        line_start = self.text.rfind("\n", 0, start) + 1
        self._statement_indent = len(self.text[line_start:start]) - len(self.text[line_start:start].lstrip(" \t"))
        name = self.name()
        self.expect("=")
        self._rearranged_here = False
        item = self._instruction_body(name, start)
        if self._rearranged_here:
            self._rearranged.append(item.instruction)
        return item, is_root

    def _instruction_body(self, name: str, start: int) -> _PendingInstruction:
        """Everything after `name =`: shape, opcode, operands and attributes."""
        self.skip()
        # XLA lets the shape be left out where it follows from the operands.
        omitted = _OMITTED_SHAPE.match(self.text, self.pos)
        shape = None if omitted and omitted.group(1) in KNOWN else self.shape()
        self.skip()
        opcode_offset = self.pos
        opcode = self.match(_OPCODE, "an opcode").group()
        if opcode not in KNOWN:
            raise self.error(f"unknown opcode {opcode!r}", opcode_offset)
        if shape is None and opcode in ("parameter", "constant"):
            raise self.error(f"{opcode} needs its shape written before the opcode", opcode_offset)
        instruction = Instruction(name=name, opcode=opcode, shape=shape, location=self.location(start))  # type: ignore[arg-type]
        operand_names: list[tuple[str, int]] = []
        self.expect("(")
        if opcode == "parameter":
            instruction.parameter_number = self.integer()
            self.expect(")")
        elif opcode == "constant":
            instruction.literal = self.literal(shape)
        else:
            operand_names = self.operands()
        for key, value, offset in self.attributes():
            self.set_attribute(instruction, key, value, offset)
        if opcode in WINDOWED and "window" not in instruction.attrs:
            instruction.attrs["window"] = attr.Window(())  # XLA's default: the empty window (rank 0)
        return _PendingInstruction(instruction, operand_names)

    def operands(self) -> list[tuple[str, int]]:
        names: list[tuple[str, int]] = []
        if self.accept(")"):
            return names
        while True:
            self.skip()
            operand_start = self.pos
            if self.peek() == "(":
                self.shape()  # a tuple-shaped operand's shape prefix
            else:
                found = _SHAPE_PREFIX.match(self.text, self.pos)
                if found and found.group(1) in _ALL_TYPE_NAMES:
                    self.shape()
            self.skip()
            offset = self.pos
            nested = _OMITTED_SHAPE.match(self.text, self.pos)
            if nested and nested.group(1) in KNOWN:
                # An instruction written in place of an operand: named by where it starts.
                if self._operand_depth >= MAX_OPERAND_DEPTH:
                    raise self.unsupported(f"instructions nested in operands deeper than {MAX_OPERAND_DEPTH}", operand_start)
                self.pos = operand_start
                name = f"operand.{self.location(operand_start).line}.{self.location(operand_start).column}"
                self._operand_depth += 1
                try:
                    self._nested.append(self._instruction_body(name, operand_start))
                finally:
                    self._operand_depth -= 1
                names.append((name, offset))
            else:
                names.append((self.name(), offset))
            if self.accept(")"):
                return names
            self.expect(",")

    def literal(self, shape: Shape) -> object:
        self.skip()
        start = self.pos
        depth = 0
        index = start
        while index < len(self.text):
            char = self.text[index]
            if char in "({":
                depth += 1
            elif char in ")}":
                if depth == 0:
                    break
                depth -= 1
            index += 1
        if index >= len(self.text):
            raise self.error("constant literal is not closed by ')'", start)
        self.pos = index + 1
        if not isinstance(shape, ArrayShape):
            raise self.unsupported("tuple-shaped constants are not supported", start)
        try:
            return parse_literal(self.text[start:index], shape)
        except LiteralSyntaxError as exc:
            raise self.error(str(exc), start + exc.offset) from None

    def set_attribute(self, instruction: Instruction, key: str, value: str, offset: int) -> None:
        if key in attr.IGNORED_ATTRIBUTES:
            instruction.ignored_attrs[key] = value
            return
        if key in instruction.attrs:
            raise self.error(f"attribute {key!r} given twice", offset)
        try:
            instruction.attrs[key] = attr.parse_attribute(key, value)
        except attr.AttributeSyntaxError as exc:
            raise self.error(f"bad attribute {key}: {exc}", offset) from None

    # --- computations and the module ------------------------------------------------------
    def computation(self) -> tuple[Computation, bool, list[_PendingInstruction]]:
        self.skip()
        start = self.pos
        is_entry = self.accept_keyword("ENTRY")
        name = self.name()
        if self.peek() == "(":
            self.program_shape()  # the signature repeats the parameters' shapes
        self.expect("{")
        pending: list[_PendingInstruction] = []
        root: Instruction | None = None
        while not self.accept("}"):
            if self.at_end():
                raise self.error(f"computation %{name} is not closed by '}}'", start)
            item, is_root = self.instruction()
            pending.extend(self._nested)
            self._nested = []
            if is_root:
                if root is not None:
                    raise self.error(
                        f"computation %{name} has two ROOT instructions", self._offset_of(item)
                    )
                root = item.instruction
            pending.append(item)
        # `}, execution_thread="..."`: which of XLA's threads runs the computation, a
        # scheduling choice that changes no value.
        self.attributes()
        if not pending:
            raise self.error(f"computation %{name} has no instructions", start)
        instructions = [p.instruction for p in pending]
        computation = Computation(
            name=name,
            instructions=instructions,
            root=root if root is not None else instructions[-1],
            location=self.location(start),
        )
        return computation, is_entry, pending

    def _offset_of(self, item: _PendingInstruction) -> int:
        location = item.instruction.location
        assert location is not None
        return self._line_starts[location.line - 1] + location.column - 1

    def module(self) -> Module:
        self.skip()
        if not self.accept_keyword("HloModule"):
            raise self.error(f"expected 'HloModule', found {self.describe_here()}")
        module_name = self.name()
        self.accept(":")  # XLA's lexer reads `HloModule name:` as the name
        entry_layout = None
        for key, value, offset in self.attributes(multiline=True):
            if key == "entry_computation_layout":
                entry_layout = self._entry_layout(value, offset)
        self.debug_sections()
        computations: list[Computation] = []
        pending_by_computation: list[list[_PendingInstruction]] = []
        entry: Computation | None = None
        while not self.at_end():
            computation, is_entry, pending = self.computation()
            if any(c.name == computation.name for c in computations):
                raise self.error(f"computation %{computation.name} defined twice", self._offset_of(pending[0]))
            if is_entry:
                if entry is not None:
                    raise self.error("module has two ENTRY computations", self._offset_of(pending[0]))
                entry = computation
            computations.append(computation)
            pending_by_computation.append(pending)
        if not computations:
            raise self.error("module has no computations")
        if entry is None:
            entry = computations[-1]
        by_name = {c.name: c for c in computations}
        for computation, pending in zip(computations, pending_by_computation, strict=True):
            self._resolve_operands(computation, pending)
            self._resolve_computations(computation, by_name)
        attribute_sources(entry, self.frames)
        for computation in computations:
            _infer_omitted_shapes(computation)
        self._refuse_rearranged_bitcasts(computations)
        return Module(module_name, computations, entry, entry_layout)

    def _refuse_rearranged_bitcasts(self, computations: list[Computation]) -> None:
        """A bitcast reinterprets memory under its operand's and result's layouts (§4 of
        the contract); with tiles or splits that is memory the contract does not describe."""
        rearranged = {id(i) for i in self._rearranged}
        for computation in computations:
            for instruction in computation.instructions:
                if instruction.opcode == "bitcast" and any(id(i) in rearranged for i in (instruction, *instruction.operands)):
                    raise HloUnsupportedError(
                        "bitcast of a tiled or split layout: it reinterprets memory that the contract does not describe; "
                        "write the layouts as minor-to-major orders only",
                        instruction.location,
                        instruction.name,
                    )

    def debug_sections(self) -> None:
        """Reads the FileNames/FunctionNames/FileLocations/StackFrames tables of JAX's and
        XLA's dumps into self.frames: source positions the metadata points at, for messages
        (compiler/hlo/source_info.py); they never affect what a module computes."""
        while section := next((k for k in SECTIONS if self.accept_keyword(k)), None):
            while self.peek().isdigit():
                end = self.text.find("\n", self.pos)
                end = len(self.text) if end < 0 else end
                self.frames.add(section, self.text[self.pos : end])
                self.pos = end

    def _entry_layout(self, value: str, offset: int) -> tuple[tuple[Shape, ...], Shape]:
        inner = value.strip()
        if not (inner.startswith("{") and inner.endswith("}")):
            raise self.error("entry_computation_layout must be {(params)->result}", offset)
        resume = self.pos
        self.pos = self.text.index("{", offset) + 1
        layout = self.program_shape()
        self.expect("}")
        self.pos = resume
        return layout

    def _resolve_operands(self, computation: Computation, pending: list[_PendingInstruction]) -> None:
        by_name: dict[str, Instruction] = {}
        for item in pending:
            instruction = item.instruction
            if instruction.name in by_name:
                raise self.error(
                    f"instruction %{instruction.name} defined twice in %{computation.name}",
                    self._offset_of(item),
                )
            by_name[instruction.name] = instruction
        for item in pending:
            for name, offset in item.operand_names:
                operand = by_name.get(name)
                if operand is None:
                    raise self.error(f"undefined operand %{name} in computation %{computation.name}", offset)
                item.instruction.operands.append(operand)

    def _resolve_computations(self, computation: Computation, by_name: dict[str, Computation]) -> None:
        for instruction in computation.instructions:
            for key, value in list(instruction.attrs.items()):
                if isinstance(value, attr.ComputationRef):
                    instruction.attrs[key] = self._lookup(value, by_name, instruction)
                elif isinstance(value, tuple) and value and isinstance(value[0], attr.ComputationRef):
                    instruction.attrs[key] = tuple(self._lookup(v, by_name, instruction) for v in value)

    def _lookup(self, ref: attr.ComputationRef, by_name: dict[str, Computation], user: Instruction) -> Computation:
        found = by_name.get(ref.name)
        if found is None:
            raise HloParseError(f"undefined computation %{ref.name}", user.location, user.name)
        return found


def _infer_omitted_shapes(computation: Computation) -> None:
    """Gives instructions written without a shape the one their operands imply (operands
    first, reachable from the root or not), as XLA's parser does; where that takes a
    written shape, the error says so."""
    pending = [i for i in computation.instructions if i.shape is None]
    while pending:
        ready = [i for i in pending if all(op.shape is not None for op in i.operands)]
        if not ready:
            return  # a cycle: the verifier names it
        for instruction in ready:
            if instruction.opcode not in SUPPORTED:
                raise unsupported_error(instruction)
            try:
                instruction.shape = infer_shape(instruction)
            except HloVerifyError as error:
                raise HloParseError(f"the shape is left out and cannot be inferred ({error.message}); write it before the opcode", instruction.location, instruction.name) from None
        pending = [i for i in pending if i.shape is None]


def parse_module(text: str) -> Module:
    """Parses HLO text into a Module (not yet verified: see compiler.hlo.verifier)."""
    return Parser(text).module()


def parse_shape(text: str) -> Shape:
    """Parses one shape written as HLO text writes it (`f32[2,3]{1,0}`, `(f32[], s32[4])`)."""
    parser = Parser(text)
    shape = parser.shape()
    parser.skip()
    if not parser.at_end():
        raise parser.error(f"expected the end of the shape, found {parser.describe_here()}")
    return shape
