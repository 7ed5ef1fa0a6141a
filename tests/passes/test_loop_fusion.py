"""The loop fusion pass on small hand-written modules: which fusions it forms, that the
printed text is a fixed point, and that the reference evaluator's bits do not change."""

from __future__ import annotations

import numpy as np

from compiler.hlo import load_module
from compiler.hlo.ir import Computation, Module
from compiler.hlo.printer import canonical_text
from compiler.hlo.verifier import verify_module
from compiler.passes.loop_fusion import LoopFusion
from compiler.reference import evaluate
from harness.hlo_fragments import elementwise_chain


def fused(text: str) -> Module:
    module = load_module(text)
    LoopFusion().run(module)
    verify_module(module)
    return module


def fusions(computation: Computation) -> list[list[str]]:
    """The opcodes inside each fusion of `computation`, in execution order."""
    out = []
    for instruction in computation.execution_order():
        if instruction.opcode == "fusion":
            assert instruction.attrs["kind"] == "kLoop"
            callee = instruction.attrs["calls"]
            assert isinstance(callee, Computation)
            out.append([i.opcode for i in callee.execution_order() if i.opcode != "parameter"])
    return out


def entry_opcodes(module: Module) -> list[str]:
    return [i.opcode for i in module.entry.execution_order()]


def assert_same_bits(text: str, *arrays: np.ndarray) -> Module:
    """Runs the pass; checks the text round trip and the reference's bits; returns the module."""
    before = evaluate(load_module(text), list(arrays))
    module = fused(text)
    printed = canonical_text(module)
    assert canonical_text(load_module(printed)) == printed
    assert "kind=kLoop" in printed
    after = evaluate(load_module(printed), list(arrays))
    for got, want in zip(after, before, strict=True):
        assert got.dtype == want.dtype and got.shape == want.shape
        assert got.tobytes() == want.tobytes()
    return module


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -3.5, 2.0], dtype=np.float32)


def test_chain_becomes_one_fusion() -> None:
    text = elementwise_chain("m", 8)
    module = assert_same_bits(text, SPECIALS, SPECIALS[::-1].copy())
    assert entry_opcodes(module) == ["parameter", "parameter", "fusion"]
    assert fusions(module.entry) == [["multiply", "add", "maximum", "subtract", "multiply"]]


def test_data_movement_and_scalar_constants_fuse() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[2,3]{1,0} parameter(0)
  p = pred[3,2]{1,0} parameter(1)
  t = f32[3,2]{1,0} transpose(x), dimensions={1,0}
  z = f32[] constant(0)
  zb = f32[3,2]{1,0} broadcast(z), dimensions={}
  s = f32[3,2]{1,0} select(p, t, zb)
  i = s32[3,2]{1,0} iota(), iota_dimension=0
  f = f32[3,2]{1,0} convert(i)
  a = f32[3,2]{1,0} add(s, f)
  sl = f32[2,2]{1,0} slice(a), slice={[1:3], [0:2]}
  c = f32[5,2]{1,0} concatenate(sl, t), dimensions={0}
  pd = f32[7,2]{1,0} pad(c, z), padding=1_1x0_0
  ROOT n = f32[7,2]{1,0} negate(pd)
}
"""
    x = SPECIALS[:6].reshape(2, 3)
    p = np.array([[True, False], [False, True], [True, True]])
    module = assert_same_bits(text, x, p)
    assert entry_opcodes(module) == ["parameter", "parameter", "fusion"]
    (inside,) = fusions(module.entry)
    for opcode in ("transpose", "broadcast", "select", "iota", "convert", "slice", "concatenate", "pad", "negate"):
        assert opcode in inside, opcode
    # The shared scalar constant was copied in (broadcast fill and pad value).
    assert inside.count("constant") >= 1


def test_producer_with_an_outside_user_is_not_fused() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[4]{0} parameter(0)
  a = f32[4]{0} exponential(x)
  b = f32[4]{0} negate(a)
  c = f32[4]{0} abs(b)
  d = f32[4]{0} sqrt(a)
  e = f32[4]{0} multiply(d, d)
  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(c, e)
}
"""
    module = assert_same_bits(text, SPECIALS[:4])
    # exp has users in two groups: it is computed once, outside both fusions.
    assert entry_opcodes(module) == ["parameter", "exponential", "fusion", "fusion", "tuple"]
    assert fusions(module.entry) == [["negate", "abs"], ["sqrt", "multiply"]]


def test_no_fusion_across_reduce_dot_or_into_reducers() -> None:
    text = """HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  ROOT n = f32[] negate(s)
}
ENTRY e {
  x = f32[2,2]{1,0} parameter(0)
  a = f32[2,2]{1,0} abs(x)
  b = f32[2,2]{1,0} negate(a)
  d = f32[2,2]{1,0} dot(b, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  r = f32[2]{0} reduce(d, z), dimensions={1}, to_apply=add
  ROOT q = f32[2]{0} multiply(r, r)
}
"""
    module = assert_same_bits(text, SPECIALS[:4].reshape(2, 2))
    assert entry_opcodes(module) == ["parameter", "fusion", "dot", "constant", "reduce", "multiply"]
    assert fusions(module.entry) == [["abs", "negate"]]
    reducer = next(c for c in module.computations if c is not module.entry and any(i.opcode == "add" for i in c.instructions))
    assert [i.opcode for i in reducer.execution_order()] == ["parameter", "parameter", "add", "negate"]


def test_while_body_is_fused_and_names_are_deterministic() -> None:
    text = """HloModule m
cond {
  s = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[4]{0}) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4]{0} get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[4]{0} broadcast(h), dimensions={}
  m = f32[4]{0} multiply(v, hb)
  a = f32[4]{0} add(m, v)
  ROOT t = (s32[], f32[4]{0}) tuple(j, a)
}
ENTRY e {
  x = f32[4]{0} parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[4]{0}) tuple(z, x)
  w = (s32[], f32[4]{0}) while(t), condition=cond, body=body
  ROOT r = f32[4]{0} get-tuple-element(w), index=1
}
"""
    module = assert_same_bits(text, SPECIALS[:4])
    body = next(i for i in module.entry.instructions if i.opcode == "while").attrs["body"]
    assert isinstance(body, Computation)
    assert fusions(body) == [["constant", "broadcast", "multiply", "add"]]
    again = fused(text)
    assert canonical_text(again) == canonical_text(module)
    assert [c.name for c in again.computations] == [c.name for c in module.computations]
    assert [i.name for i in again.instructions()] == [i.name for i in module.instructions()]


def test_unchanged_without_a_chain() -> None:
    text = """HloModule m
ENTRY e {
  x = f32[4]{0} parameter(0)
  ROOT a = f32[4]{0} abs(x)
}
"""
    module = load_module(text)
    assert not LoopFusion().run(module)
    assert canonical_text(module) == canonical_text(load_module(text))


def test_a_long_chain_is_cut_into_fusions_the_backend_can_generate() -> None:
    """An elementwise chain of 3000 ops (an unrolled loop, say) becomes fusions of at most
    MAX_GROUP_DEPTH ops each, with the reference's bits; the backend compiles and runs it
    (one fusion of 3000 ops overflowed the recursion of its element generator)."""
    import compiler
    from compiler.passes.loop_fusion import MAX_GROUP_DEPTH

    length = 3000
    lines = ["  p0 = f32[64] parameter(0)"] + [f"  p{i} = f32[64] {'negate' if i % 2 else 'abs'}(p{i - 1})" for i in range(1, length)]
    lines[-1] = lines[-1].replace("  p", "  ROOT p", 1)
    text = "HloModule chain\nENTRY e {\n" + "\n".join(lines) + "\n}\n"
    x = np.linspace(-2, 2, 64, dtype=np.float32)
    module = assert_same_bits(text, x)
    sizes = [len(group) for group in fusions(module.entry)]
    assert sum(sizes) == length - 1 and max(sizes) <= MAX_GROUP_DEPTH and len(sizes) >= (length - 1) // MAX_GROUP_DEPTH
    got = compiler.compile(text, cache_dir=False).run(x)[0]
    assert got.tobytes() == evaluate(load_module(text), [x])[0].tobytes()


def test_a_minor_transpose_stays_out_of_a_group_that_calls_the_math_library() -> None:
    """A transpose that moves the minor dimension (a recurrent cell's transposed dot output)
    below exp and tanh would make the fusion's loop scalar: it stays a kernel of its own and
    the rest of the chain fuses with vector loops. Without a math call it fuses, as does a
    transpose that keeps the minor dimension. The compiled module keeps the reference's bits
    on every target the host runs."""
    from compiler.codegen.elementwise import vector_width
    from compiler.codegen.fusion import loop_mode, results_of
    from compiler.config import load_config
    from compiler.driver import optimized_plan
    from compiler.program import load_program
    from harness.targets import run_everywhere

    def module_text(math: str, dimensions: str, shape: str) -> str:
        return f"""HloModule m
ENTRY e {{
  x = f32[64,16]{{1,0}} parameter(0)
  b = {shape} parameter(1)
  t = {shape} transpose(x), dimensions={{{dimensions}}}
  s = {shape} add(t, b)
  ROOT r = {shape} {math}(s)
}}
"""

    moved = module_text("tanh", "1,0", "f32[16,64]{1,0}")
    assert fusions(fused(moved).entry) == [["add", "tanh"]]
    assert "transpose" in entry_opcodes(fused(moved))
    assert fusions(fused(module_text("negate", "1,0", "f32[16,64]{1,0}")).entry) == [["transpose", "add", "negate"]]
    kept = module_text("exponential", "0,1", "f32[64,16]{1,0}")
    assert fusions(fused(kept).entry) == [["transpose", "add", "exponential"]]
    optimized, _ = optimized_plan(load_program(moved), load_config())
    (fusion,) = [i for i in optimized.entry.instructions if i.opcode == "fusion"]
    callee = fusion.attrs["calls"]
    assert loop_mode(callee, results_of(callee), vector_width(load_config())) == "flat"  # type: ignore[arg-type]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 16)).astype(np.float32)
    x[::7, ::5] = np.nan
    run_everywhere(moved, [x, rng.standard_normal((16, 64)).astype(np.float32)])
