"""The backend's decisions (compiler/passes/backend_decisions.py): every fusion, made by a pass
or written in the text, is recorded as one fused kernel of its kind or as inlined; every
reduce-window as a scan along one dimension or the window loop. Recording them changes
neither the canonical text nor the pipeline_id, a module lowered without them is emitted the
general way, and a complex dot written as a kOutput fusion is inlined (its loop nest has no
work items to end with an epilogue) and keeps the reference's bytes."""

from __future__ import annotations

import numpy as np

from compiler.codegen.lower import lower_module
from compiler.config import load_config
from compiler.driver import EMITTERS, compile_program
from compiler.hlo import load_module
from compiler.hlo.ir import Instruction, Module
from compiler.hlo.printer import canonical_text
from compiler.passes.backend_decisions import decide
from compiler.passes.pipeline import pipeline_named
from compiler.program import load_program
from compiler.reference import evaluate
from harness.hlo_fragments import ADD_F32

N = 64

TEXT = "HloModule t\n" + ADD_F32 + f"""fused_ew {{
  p0 = f32[{N}]{{0}} parameter(0)
  e = f32[{N}]{{0}} exponential(p0)
  ROOT n = f32[{N}]{{0}} negate(e)
}}
fused_holding_a_reduce {{
  p0 = f32[{N}]{{0}} parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p0, z), dimensions={{0}}, to_apply=add
}}
fused_reduction {{
  p0 = f32[{N}]{{0}} parameter(0)
  z = f32[] constant(0)
  ab = f32[{N}]{{0}} abs(p0)
  ROOT r = f32[] reduce(ab, z), dimensions={{0}}, to_apply=add
}}
fused_output {{
  p0 = f32[8,{N}]{{1,0}} parameter(0)
  p1 = f32[{N},{N}]{{1,0}} parameter(1)
  d = f32[8,{N}]{{1,0}} dot(p0, p1), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT n = f32[8,{N}]{{1,0}} negate(d)
}}
ENTRY e {{
  x = f32[{N}]{{0}} parameter(0)
  m = f32[8,{N}]{{1,0}} parameter(1)
  w = f32[{N},{N}]{{1,0}} parameter(2)
  f = f32[{N}]{{0}} fusion(x), kind=kLoop, calls=fused_ew
  g = f32[] fusion(f), kind=kLoop, calls=fused_holding_a_reduce
  h = f32[] fusion(x), kind=kInput, calls=fused_reduction
  o = f32[8,{N}]{{1,0}} fusion(m, w), kind=kOutput, calls=fused_output
  i = f32[] constant(0)
  c = f32[8,{N}]{{1,0}} reduce-window(m, i), window={{size=1x{N} pad=0_0x{N - 1}_0}}, to_apply=add
  k = f32[8,{N}]{{1,0}} reduce-window(m, i), window={{size=1x2 pad=0_0x1_0}}, to_apply=add
  ROOT t = (f32[{N}]{{0}}, f32[], f32[], f32[8,{N}]{{1,0}}, f32[8,{N}]{{1,0}}, f32[8,{N}]{{1,0}}) tuple(f, g, h, o, c, k)
}}
"""


def _entry(module: Module) -> dict[str, Instruction]:
    return {i.name: i for i in module.entry.instructions}


def test_fusions_written_in_the_text_are_decided_by_their_contents() -> None:
    module = load_module(TEXT)
    before = canonical_text(module)
    pipeline_named("none").run(module)
    entry = _entry(module)
    decided = {name: entry[name].decisions for name in ("f", "g", "h", "o", "c", "k")}
    assert all(d is not None for d in decided.values())
    assert [decided[name].fused_kernel for name in ("f", "g", "h", "o")] == ["kLoop", None, "kInput", "kOutput"]  # type: ignore[union-attr]
    assert [decided[name].running_dimension for name in ("c", "k")] == [1, None]  # type: ignore[union-attr]
    # Decisions are no part of the graph.
    assert canonical_text(module) == before


def test_the_default_pipeline_decides_its_own_fusions() -> None:
    module = pipeline_named("default").run(load_module(TEXT))
    for computation in module.computations:
        for instruction in computation.instructions:
            if instruction.opcode in ("fusion", "reduce-window"):
                assert instruction.decisions is not None, instruction


def test_decisions_leave_the_pipeline_id_alone() -> None:
    # decide() is no stage: the pipelines' descriptions (and so their ids) do not name it.
    assert "decide" not in str(pipeline_named("default").description())
    assert pipeline_named("none").description() == []


def test_without_decisions_the_lowering_takes_the_general_way() -> None:
    config = load_config()
    undecided = load_module(TEXT)
    decided = load_module(TEXT)
    decide(decided)
    names = [[s.kernel for s in lower_module(m, config, EMITTERS)[1].steps if s.kind == "kernel"] for m in (undecided, decided)]
    assert not any("running" in name for name in names[0]) and any("running" in name for name in names[1])
    assert len(names[0]) > len(names[1])  # inlined fusions: a kernel per op


def test_a_complex_dot_with_an_epilogue_is_inlined_with_the_reference_bytes() -> None:
    text = """HloModule t
fused_output {
  p0 = c64[5,7]{1,0} parameter(0)
  p1 = c64[7,3]{1,0} parameter(1)
  d = c64[5,3]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT n = c64[5,3]{1,0} negate(d)
}
ENTRY e {
  a = c64[5,7]{1,0} parameter(0)
  b = c64[7,3]{1,0} parameter(1)
  ROOT o = c64[5,3]{1,0} fusion(a, b), kind=kOutput, calls=fused_output
}
"""
    module = pipeline_named("none").run(load_module(text))
    decided = _entry(module)["o"].decisions
    assert decided is not None and decided.fused_kernel is None
    rng = np.random.default_rng(5)
    arrays = [(rng.standard_normal(dims) + 1j * rng.standard_normal(dims)).astype(np.complex64) for dims in ((5, 7), (7, 3))]
    executable = compile_program(load_program(text), load_config().with_pipeline("none"), cache_dir=False)
    (got,) = executable.run(*arrays)
    (want,) = evaluate(load_module(text), arrays)
    assert np.asarray(got).tobytes() == want.tobytes()
