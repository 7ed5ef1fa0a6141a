"""Pieces of HLO text that the hand-written modules of the tests and benchmarks repeat: the
scalar computations that reduce, reduce-window, scatter and sort apply. A module takes one
by concatenation (`"HloModule m\\n" + ADD_F32 + "ENTRY e {...}"`), so each test still spells
out the computation it is about while the scalar reducer it calls reads as one name."""

from __future__ import annotations


def scalar_binary(name: str, dtype: str, opcode: str, lhs: str = "a", rhs: str = "b", root: str = "s") -> str:
    """The computation `name` of two `dtype` scalars, `lhs` (parameter 0) and `rhs`
    (parameter 1), whose root `root` is `opcode(lhs, rhs)`; text ending in a newline."""
    return (
        f"{name} {{\n"
        f"  {lhs} = {dtype}[] parameter(0)\n"
        f"  {rhs} = {dtype}[] parameter(1)\n"
        f"  ROOT {root} = {dtype}[] {opcode}({lhs}, {rhs})\n"
        "}\n"
    )


# `add`: the f32 sum that most hand-written reductions apply (to_apply=add).
ADD_F32 = scalar_binary("add", "f32", "add")


def elementwise_chain(module_name: str, length: int) -> str:
    """A module whose entry takes two f32[length] arrays x and y and applies five
    elementwise ops, r = (max(x*y + x, y) - x*y)^2: multiply, add, maximum, subtract,
    multiply, each reading the one before (what loop fusion makes one fusion of)."""
    shape = f"f32[{length}]{{0}}"
    return (
        f"HloModule {module_name}\n"
        "ENTRY e {\n"
        f"  x = {shape} parameter(0)\n"
        f"  y = {shape} parameter(1)\n"
        f"  a = {shape} multiply(x, y)\n"
        f"  b = {shape} add(a, x)\n"
        f"  c = {shape} maximum(b, y)\n"
        f"  d = {shape} subtract(c, a)\n"
        f"  ROOT r = {shape} multiply(d, d)\n"
        "}\n"
    )


def debug_tables(file: str, function: str, line: int) -> str:
    """The debug tables JAX writes after the HloModule line (`as_text(debug_info=True)`), with
    one stack frame: frame 1 is `file:line` in `function`. Metadata names it as
    `stack_frame_id=1`."""
    return (
        f'FileNames\n1 "{file}"\n\nFunctionNames\n1 "{function}"\n\n'
        f"FileLocations\n1 {{file_name_id=1 function_name_id=1 line={line} end_line={line} column=4 end_column=9}}\n\n"
        "StackFrames\n1 {file_location_id=1 parent_frame_id=1}\n"
    )
