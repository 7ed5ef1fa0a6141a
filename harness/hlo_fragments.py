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


def layered_module(layers: int, width: int = 8) -> str:
    """A module as JAX exports a model of `layers` residual blocks with its debug info: each
    block a dense layer (dot, bias add) and a shared `jit(relu)` called from every block,
    every instruction's op_name under `jit(apply)/Model/block_N` (and its line in model.py),
    then a softmax-free sum over the result. What the graph's grouping by scope draws."""
    shape = f"f32[4,{width}]{{1,0}}"
    weights = ", ".join(f"f32[{width},{width}]{{1,0}}" for _ in range(layers))
    lines = [f"HloModule jit_apply, entry_computation_layout={{({shape}, {weights})->f32[]}}", ""]
    lines += ["relu.1 {", f"  x.2 = {shape} parameter(0)", "  zero.3 = f32[] constant(0)",
              f"  zeros.4 = {shape} broadcast(zero.3), dimensions={{}}",
              f'  ROOT max.5 = {shape} maximum(x.2, zeros.4), metadata={{op_name="max"}}', "}", ""]  # fmt: skip
    lines += ["add.6 {", "  a.7 = f32[] parameter(0)", "  b.8 = f32[] parameter(1)", "  ROOT s.9 = f32[] add(a.7, b.8)", "}", ""]
    lines += ["ENTRY main.10 {", f'  x.11 = {shape} parameter(0), metadata={{op_name="x"}}']
    previous = "x.11"
    for n in range(layers):
        scope, line = f"jit(apply)/Model/block_{n}", 10 + n
        where = f'source_file="model.py" source_line={line}'
        lines += [
            f"  w{n}.p = f32[{width},{width}]{{1,0}} parameter({n + 1}), metadata={{op_name=\"params[\\'block_{n}\\'][\\'kernel\\']\"}}",
            f'  dot{n}.a = {shape} dot({previous}, w{n}.p), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}, metadata={{op_name="{scope}/Dense_0/dot_general" {where}}}',
            f'  relu{n}.b = {shape} call(dot{n}.a), to_apply=relu.1, metadata={{op_name="{scope}/jit(relu)" {where}}}',
            f'  out{n}.c = {shape} add({previous}, relu{n}.b), metadata={{op_name="{scope}/add" {where}}}',
        ]  # fmt: skip
        previous = f"out{n}.c"
    lines += ["  zero.12 = f32[] constant(0)",
              f'  ROOT sum.13 = f32[] reduce({previous}, zero.12), dimensions={{0,1}}, to_apply=add.6, metadata={{op_name="jit(apply)/Model/reduce_sum" source_file="model.py" source_line=30}}',
              "}", ""]  # fmt: skip
    return "\n".join(lines)
