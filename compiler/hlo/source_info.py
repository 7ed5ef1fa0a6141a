"""Where an instruction came from in the user's program, as the HLO's metadata says, for
messages only: none of it changes what a module computes, and none of it is hashed.

JAX writes each instruction's `op_name` (the traced function and the op, `jit(f)/tanh`) and
its source position: inline (`source_file="model.py" source_line=12`) or, in newer exports,
as a `stack_frame_id` into the FileNames, FunctionNames, FileLocations and StackFrames tables
that follow the HloModule line."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from compiler.hlo.errors import SourceLocation
from compiler.hlo.ir import Computation

SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")

_ENTRY = re.compile(r"\s*(\d+)\s+(.*?)\s*$")
_ESCAPED = re.compile(r"\\(.)")
_QUOTED = re.compile(r'^"((?:[^"\\]|\\.)*)"$')


def _fields(text: str) -> dict[str, str]:
    """`key=value` pairs of a metadata or table entry (`{...}`), values unquoted and
    unescaped (JAX writes `op_name="params[\\'w\\']"`)."""
    return {m.group(1): m.group(3) if m.group(3) is not None else _ESCAPED.sub(r"\1", m.group(2)) for m in re.finditer(r'(\w+)=(?:"((?:[^"\\]|\\.)*)"|([^\s}]+))', text)}


@dataclass
class SourceFrames:
    """The debug tables of one module: names of files and functions, source positions, and
    stack frames (each a position and its caller's frame)."""

    files: dict[int, str] = field(default_factory=dict)
    functions: dict[int, str] = field(default_factory=dict)
    positions: dict[int, dict[str, str]] = field(default_factory=dict)
    frames: dict[int, dict[str, str]] = field(default_factory=dict)

    def add(self, section: str, line: str) -> None:
        """One entry line of `section` (one of SECTIONS); a line of another form is passed over."""
        entry = _ENTRY.match(line)
        if entry is None:
            return
        key, value = int(entry.group(1)), entry.group(2)
        quoted = _QUOTED.match(value)
        if section == "FileNames" and quoted:
            self.files[key] = quoted.group(1)
        elif section == "FunctionNames" and quoted:
            self.functions[key] = quoted.group(1)
        elif section == "FileLocations":
            self.positions[key] = _fields(value)
        elif section == "StackFrames":
            self.frames[key] = _fields(value)

    def position(self, frame_id: int) -> str | None:
        """`file:line (function)` of the frame, or None where the tables do not say."""
        frame = self.frames.get(frame_id, {})
        position = self.positions.get(_integer(frame.get("file_location_id")), {})
        file, line = self.files.get(_integer(position.get("file_name_id"))), position.get("line")
        if file is None or line is None:
            return None
        function = self.functions.get(_integer(position.get("function_name_id")))
        return f"{file}:{line}" + (f" ({function})" if function else "")


def _integer(text: str | None) -> int:
    return int(text) if text is not None and text.isdigit() else -1


def attribute_sources(entry: Computation, frames: SourceFrames) -> None:
    """Gives each instruction reachable from `entry` the user's source on its location
    (`SourceLocation.user`, "op_name at file:line"). JAX writes the user's frame only on the
    outermost instruction of a call (`jit(f)/jit(inv)` at model.py:4); the instructions of
    the called computation carry op names relative to it (`triangular_solve`). So a called
    computation's instructions are named under their caller's op name and, where they have
    none of their own, at their caller's position. A computation called from places with
    different op names (JAX's `jit(relu)` in every layer) keeps its relative names, marked
    `relative`: inlining a call names its copy under that call (`under_call`)."""
    sites: dict[int, list[tuple[str | None, str | None, bool]]] = {}
    for computation in _callers_first(entry):
        called_from = sites.get(id(computation), [(None, None, False)])
        prefix, where, relative = called_from[0] if len(set(called_from)) == 1 else (None, None, True)
        for instruction in computation.instructions:
            fields = _fields(instruction.ignored_attrs.get("metadata", ""))
            op_name = "/".join(part for part in (prefix, fields.get("op_name")) if part) or None
            here = _position(fields, frames) or where
            if instruction.location is not None:
                instruction.location = replace(instruction.location, user=_said(op_name, here), op_name=op_name, position=here, relative=relative)
            for callee in instruction.called_computations():
                sites.setdefault(id(callee), []).append((op_name, here, relative))


def under_call(location: SourceLocation | None, call: SourceLocation | None) -> SourceLocation | None:
    """The location of an instruction copied out of a called computation into the place of
    `call` (call inlining): a relative op name goes under the call's, with the call's
    position where it has none of its own."""
    if location is None or not location.relative or call is None:
        return location
    op_name = "/".join(part for part in (call.op_name, location.op_name) if part) or None
    here = location.position or call.position
    return replace(location, user=_said(op_name, here), op_name=op_name, position=here, relative=call.relative)


def _said(op_name: str | None, position: str | None) -> str | None:
    return f"{op_name} at {position}" if op_name and position else op_name or position


def _callers_first(entry: Computation) -> list[Computation]:
    """The computations reachable from `entry`, each after every computation that calls it."""
    order: list[Computation] = []
    seen: set[int] = set()

    def visit(computation: Computation) -> None:  # depth first; HLO nests calls shallowly
        seen.add(id(computation))
        for instruction in computation.instructions:
            for callee in instruction.called_computations():
                if id(callee) not in seen:
                    visit(callee)
        order.append(computation)

    visit(entry)
    return order[::-1]


def _position(fields: dict[str, str], frames: SourceFrames) -> str | None:
    """The metadata's own source position: inline, or its stack frame's."""
    if fields.get("source_file") and fields.get("source_line"):
        return f"{fields['source_file']}:{fields['source_line']}"
    return frames.position(_integer(fields.get("stack_frame_id")))


_METADATA = re.compile(r', metadata=\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}')
_OP_NAME = re.compile(r'op_name="(?:[^"\\]|\\.)*"')


def without_debug_info(text: str) -> str:
    """HLO text (as JAX prints it) with its debug info left out but the parameters' names:
    the debug tables after the HloModule line (SECTIONS) and every instruction's metadata
    go, except a parameter's op_name, which is the argument's pytree path (`params['w']`)
    and says nothing of the submitter's files. Nothing hashed changes."""
    kept = []
    preamble = True
    for line in text.splitlines():
        if preamble and (line.strip() in SECTIONS or _ENTRY.match(line)):
            continue
        if line.rstrip().endswith("{") and not line.startswith("HloModule"):
            preamble = False
        if " parameter(" in line:
            line = _METADATA.sub(lambda m: f", metadata={{{' '.join(_OP_NAME.findall(m.group(1)))}}}" if _OP_NAME.search(m.group(1)) else "", line)
        else:
            line = _METADATA.sub("", line)
        kept.append(line)
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)) + "\n"
