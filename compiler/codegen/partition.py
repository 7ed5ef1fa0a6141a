"""Splitting a program's LLVM module into parts that LLVM compiles independently, as the
lowering finishes its kernels.

LLVM optimizes and generates code for one module on one core, and most of a cold compile is
that work. A program's kernels are independent functions (kernel.py: each is called only by
the plan's entry, never inlined), so the module splits into parts, each its own LLVM module
and its own object, compiled at once (llvm_workers.py) and mapped together by the loader,
which resolves every call from one object into another. A part is handed over as soon as it
is full, while the lowering goes on, so LLVM works on the first kernels while Python makes
the next ones.

What goes where is a function of the module alone, never of the host, its cores or the
timing, so every machine makes the same parts and the same objects:
- the units are KernelModule.units in order (the distinct kernels, then the pieces of a long
  plan's entry: native_plan.py), and last the entry (every function the exported entry
  reaches without passing through a unit, and the exported constants);
- consecutive units fill a part until the next would take it past PART_LINES lines of IR,
  the helpers a part needs counted once; the last of MAX_PARTS parts takes every unit left;
- a program that fills no part is one module, as it always was: one object;
- a part gets a copy of every internal helper its units reach (the always-inlined math
  functions, their cold exact paths, constant tables, the entry's barrier and launch
  functions); the entry's part declares the units of the other parts, which have external
  linkage in theirs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from compiler.codegen.kernel import KernelModule

# The lines of IR (about one instruction each) of one part before a new part starts.
# Measured on real models for the CPU targets: LLVM gets through about 8,000 lines a second, so a part
# of this size takes it about 0.3 s; a part costs a few milliseconds of its own, plus the
# helpers it repeats.
PART_LINES = 2_500
MAX_PARTS = 64

_REFERENCE = re.compile(r'@("(?:[^"\\]|\\.)+"|[-a-zA-Z$._][-a-zA-Z$._0-9]*)')


@dataclass(frozen=True)
class _Global:
    """One global of the module's IR: its name, its text, whether it is defined here with
    internal linkage, whether it is a function, and the globals its text references."""

    name: str
    text: str
    internal: bool
    function: bool
    references: tuple[str, ...]

    def declaration(self) -> str:
        """The text of a declaration of this (non-internal) global in another part."""
        if self.function:
            header = self.text.split("{", 1)[0].strip()
            header = header.removeprefix("define ").removeprefix("internal ").removesuffix('"no-builtins"')
            return "declare " + header.strip()
        # @name = [linkage] [unnamed_addr] constant TYPE INIT, align N
        head, _, rest = self.text.partition(" = ")
        type_ = re.sub(r"^(?:\w+ )*?(?:global|constant) ", "", rest).rsplit(", align", 1)[0]
        type_ = _type_prefix(type_)
        return f"{head} = external constant {type_}"


def _type_prefix(text: str) -> str:
    """The type at the start of `TYPE INITIALIZER` (an array or scalar type)."""
    if text.startswith("["):
        depth = 0
        for position, char in enumerate(text):
            depth += {"[": 1, "]": -1}.get(char, 0)
            if depth == 0:
                return text[: position + 1]
    return text.split(" ", 1)[0]


def _name(token: str) -> str:
    return token[1:-1] if token.startswith('"') else token


def _global(kernels: KernelModule, name: str) -> _Global:
    value = kernels.module.globals[name]
    text = kernels.global_text(value)
    head = text.split("{", 1)[0] if text.startswith("define") else text
    references = {_name(m.group(1)) for m in _REFERENCE.finditer(text)} - {name}
    declared = text.startswith("declare")
    return _Global(
        name,
        text,
        internal=not declared and bool(re.match(r"(?:define|@\S+ =) internal ", head)),
        function=text.startswith(("define", "declare")),
        references=tuple(sorted(references)),
    )


def _lines(value: _Global) -> int:
    """LLVM's work on a global, roughly: its lines (a function's instructions)."""
    return value.text.count("\n") + 1


class Parts:
    """The parts of one module, made as its units are finished (`unit_finished`, in the
    order of KernelModule.units) and completed by `finish` once the entry is in the module. Every full
    part's text goes to `full` when it is full; `finish` returns the rest."""

    def __init__(self, kernels: KernelModule, full: Callable[[str], None]) -> None:
        self.kernels = kernels
        self.full = full
        self.handed = 0  # parts handed to `full`
        self._globals: dict[str, _Global] = {}
        self._open: list[str] = []  # the units' names of the part being filled
        self._lines = 0
        self._helpers: set[str] = set()

    def unit_finished(self, name: str) -> None:
        self._add([name])

    def finish(self) -> list[str]:
        """The texts of the parts not handed yet: the whole module when no part was full."""
        kernel_set = self.kernels.unit_names
        entry = [
            name
            for name in self.kernels.module.globals
            if name not in kernel_set and not self._get(name).internal and not self._get(name).text.startswith("declare")
        ]
        self._add(entry)
        if not self.handed:
            return [self.kernels.ir_text()]
        return [self._text(self._open, external=False)]

    def _get(self, name: str) -> _Global:
        if name not in self._globals:
            self._globals[name] = _global(self.kernels, name)
        return self._globals[name]

    def _reach(self, roots: list[str]) -> list[str]:
        """Every global reachable from `roots` through references, not entering a unit that
        is not a root, in module order."""
        kernel_set = self.kernels.unit_names
        seen: set[str] = set()
        pending = list(reversed(roots))
        while pending:
            name = pending.pop()
            if name in seen or name not in self.kernels.module.globals:
                continue
            seen.add(name)
            if name not in kernel_set or name in roots:
                pending.extend(self._get(name).references)
        return [name for name in self.kernels.module.globals if name in seen]

    def _add(self, unit: list[str]) -> None:
        reach = self._reach(unit)
        own = sum(_lines(self._get(n)) for n in unit)
        helpers = {n for n in reach if n not in unit and n not in self.kernels.unit_names}
        added = own + sum(_lines(self._get(n)) for n in helpers - self._helpers)
        if self._open and self._lines + added > PART_LINES and self.handed + 1 < MAX_PARTS:
            self.full(self._text(self._open, external=True))
            self.handed += 1
            self._open, self._lines, self._helpers = [], 0, set()
            added = own + sum(_lines(self._get(n)) for n in helpers)
        self._open.extend(unit)
        self._lines += added
        self._helpers |= helpers

    def _text(self, owned: list[str], external: bool) -> str:
        """A part's module: its units, with their kernels external (`external`: the entry is
        in another part), every helper they reach, and declarations of other parts' kernels."""
        lines = self.kernels.header_lines()
        mine = set(owned)
        for name in self._reach(owned):
            value = self._get(name)
            if name in mine or name not in self.kernels.unit_names:
                lines.append(_external(value.text) if external and name in self.kernels.unit_names else value.text)
            else:
                lines.append(value.declaration())
        return "\n".join(lines + self.kernels.metadata_lines()) + "\n"


def split(kernels: KernelModule) -> list[str]:
    """The module's IR as the texts of its parts, in order (one text: the whole module), as
    `Parts` makes them from a finished module."""
    texts: list[str] = []
    parts = Parts(kernels, texts.append)
    for name in kernels.units:
        parts.unit_finished(name)
    return texts + parts.finish()


def _external(text: str) -> str:
    """A kernel's definition with external linkage (another part calls it)."""
    return text.replace("define internal ", "define ", 1)
