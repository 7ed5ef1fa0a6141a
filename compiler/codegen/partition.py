"""Splitting a program's LLVM module into parts that LLVM compiles independently.

LLVM optimizes and generates code for one module on one core, and most of a cold compile is
that work. A program's kernels are independent functions (kernel.py: each is called only by
the plan's entry, never inlined), so the module splits into parts, each its own LLVM module
and its own object, compiled in parallel (llvm_workers.py) and mapped together by the loader,
which resolves every call from one object into another.

What goes where is a function of the module alone, never of the host or its cores, so every
machine makes the same parts and the same objects:
- the units are the entry (every function the exported entry reaches without passing through
  a kernel, and the exported constants) and the distinct kernels, in definition order;
- consecutive units fill a part until it holds about PART_LINES lines of IR, the helpers it
  needs counted once, at most MAX_PARTS parts (a program under PART_LINES is one part: one
  object, compiled in this process);
- a part also gets a copy of every internal helper its units reach (the always-inlined math
  functions, their cold exact paths, constant tables), and a declaration of every function
  or constant of another part they call or read. A kernel called from another part has
  external linkage in its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from compiler.codegen.kernel import KernelModule

# The lines of IR (about one instruction each) of one part before a new part starts.
# Measured on real models on x86-64: LLVM gets through about 8,000 lines a second, so a part
# of this size takes it about 0.3 s; a part costs a few milliseconds of its own, plus the
# helpers it repeats.
PART_LINES = 2_500
MAX_PARTS = 16

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


def _globals(kernels: KernelModule) -> dict[str, _Global]:
    out: dict[str, _Global] = {}
    for name, value in kernels.module.globals.items():
        text = kernels.global_text(value)
        head = text.split("{", 1)[0] if text.startswith("define") else text
        references = {_name(m.group(1)) for m in _REFERENCE.finditer(text)} - {name}
        declared = text.startswith("declare")
        out[name] = _Global(
            name,
            text,
            internal=not declared and bool(re.match(r"(?:define|@\S+ =) internal ", head)),
            function=text.startswith(("define", "declare")),
            references=tuple(sorted(references)),
        )
    return out


def _reach(roots: Iterable[str], globals_: dict[str, _Global], stop: set[str]) -> list[str]:
    """Every global reachable from `roots` through references, not following any in `stop`
    (they are reached, not entered), in module order."""
    seen: set[str] = set()
    roots = set(roots)
    pending = sorted(roots)
    while pending:
        name = pending.pop()
        if name in seen or name not in globals_:
            continue
        seen.add(name)
        if name not in stop or name in roots:
            pending.extend(globals_[name].references)
    return [name for name in globals_ if name in seen]


def split(kernels: KernelModule) -> list[str]:
    """The module's IR as the texts of its parts, in order (one text: the whole module)."""
    globals_ = _globals(kernels)
    kernel_names = list(kernels.kernel_names)
    kernel_set = set(kernel_names)
    exported = [g.name for g in globals_.values() if not g.internal and not g.text.startswith("declare")]
    entry = [name for name in exported if name not in kernel_set]
    units: list[list[str]] = [entry] + [[name] for name in kernel_names]
    groups = _groups(units, globals_, kernel_set)
    if len(groups) == 1:
        return [kernels.ir_text()]
    home: dict[str, int] = {}
    part_units: list[list[str]] = []
    for index, group in enumerate(groups):
        part_units.append([name for u in group for name in units[u]])
        for name in part_units[-1]:
            home[name] = index
    reached = [_reach(names, globals_, set(home) - set(names)) for names in part_units]
    called_across = {name for index, names in enumerate(reached) for name in names if home.get(name, index) != index}
    return [
        _part_text(kernels, globals_, set(names), names_reached, home, called_across)
        for names, names_reached in zip(part_units, reached, strict=True)
    ]


def _lines(value: _Global) -> int:
    """LLVM's work on a global, roughly: its lines (a function's instructions)."""
    return value.text.count("\n") + 1


def _groups(units: list[list[str]], globals_: dict[str, _Global], kernel_set: set[str]) -> list[list[int]]:
    """Consecutive unit indices filling parts of about PART_LINES lines, each part's helpers
    counted once, at most MAX_PARTS parts (the size grows when the program would need more)."""
    costs: list[tuple[int, set[str]]] = []
    for unit in units:
        reach = _reach(unit, globals_, kernel_set)
        own = sum(_lines(globals_[n]) for n in reach if n in unit)
        costs.append((own, {n for n in reach if n not in kernel_set and n not in unit}))
    every_helper = set().union(*(helpers for _, helpers in costs))
    total = sum(own for own, _ in costs) + sum(_lines(globals_[n]) for n in every_helper)
    target = max(PART_LINES, -(-total // MAX_PARTS))
    groups: list[list[int]] = [[]]
    filled, helpers_here = 0, set()
    for index, (own, helpers) in enumerate(costs):
        added = own + sum(_lines(globals_[n]) for n in helpers - helpers_here)
        if groups[-1] and filled + added > target and len(groups) < MAX_PARTS:
            groups.append([])
            filled, helpers_here = 0, set()
            added = own + sum(_lines(globals_[n]) for n in helpers)
        groups[-1].append(index)
        filled += added
        helpers_here |= helpers
    return groups


def _part_text(
    kernels: KernelModule,
    globals_: dict[str, _Global],
    owned: set[str],
    reached: list[str],
    home: dict[str, int],
    called_across: set[str],
) -> str:
    lines = kernels.header_lines()
    for name in reached:
        value = globals_[name]
        if name in owned or name not in home:  # its own, an internal helper, an intrinsic
            lines.append(_external(value.text) if name in called_across and value.internal else value.text)
        else:
            lines.append(value.declaration())
    return "\n".join(lines + kernels.metadata_lines()) + "\n"


def _external(text: str) -> str:
    """A kernel's definition with external linkage (another part calls it)."""
    return text.replace("define internal ", "define ", 1)
