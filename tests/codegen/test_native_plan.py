"""The plan's native entry (compiler/codegen/native_plan.py): loops, conditionals and copies
run in generated code, every worker splits each step by the same partition, and a run that
stops early says where."""

from __future__ import annotations

import ctypes
import itertools
import time

import numpy as np
import pytest
from llvmlite import ir

from compiler.codegen import native_plan as N
from compiler.codegen import plan as P
from compiler.codegen.kernel import KERNEL_TYPE
from compiler.codegen.llvm_ir import I64, PTR
from compiler.codegen.target import compile_ir
from compiler.config import load_config
from compiler.driver import compile_emulated_grid, compile_program, generate
from compiler.errors import ExecutionError
from compiler.program import load_program
from compiler.reference import evaluate
from compiler.runtime.loader import LoadedObject, load_object
from compiler.runtime.stops import DeadlineExceeded
from compiler.runtime.threads import partition
from harness.hlo_fragments import ADD_F32
from harness.targets import DEFAULT, run_everywhere

# Each iteration swaps a and b and adds the counter to b: the copy of the body's results onto
# the loop state reads each buffer after another pair has written its twin's place, unless
# the copy is staged.
SWAP_LOOP = """HloModule swap
cond {
  s = (s32[], f32[37], f32[37]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[37], f32[37]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[37] get-tuple-element(s), index=1
  b = f32[37] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  f = f32[] convert(j)
  fb = f32[37] broadcast(f), dimensions={}
  a2 = f32[37] add(a, fb)
  ROOT t = (s32[], f32[37], f32[37]) tuple(j, b, a2)
}
ENTRY e {
  x = f32[37] parameter(0)
  y = f32[37] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[37], f32[37]) tuple(z, x, y)
  w = (s32[], f32[37], f32[37]) while(init), condition=cond, body=body
  ra = f32[37] get-tuple-element(w), index=1
  rb = f32[37] get-tuple-element(w), index=2
  ROOT r = (f32[37], f32[37]) tuple(ra, rb)
}
"""

# Branch 0 and branch 1 compute different things; the selector is an input, out of range
# meaning the last branch.
BRANCHES = """HloModule branches
neg {
  p = f32[64] parameter(0)
  ROOT n = f32[64] negate(p)
}
twice {
  p = f32[64] parameter(0)
  ROOT t = f32[64] add(p, p)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[64] parameter(1)
  ROOT c = f32[64] conditional(k, x, x), branch_computations={neg, twice}
}
"""


def _arrays() -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.standard_normal(37).astype(np.float32), rng.standard_normal(37).astype(np.float32)]


def test_a_loop_whose_state_swaps_keeps_the_reference_bits() -> None:
    run_everywhere(SWAP_LOOP, _arrays())


def test_the_swap_is_staged_through_the_arena() -> None:
    executable = compile_program(load_program(SWAP_LOOP), load_config(), cache_dir=False)
    assert P.staging_bytes(executable.plan) > 0
    # The GPU runtime stages the same copies (its grid emulated on the host).
    gpu = compile_emulated_grid(load_program(SWAP_LOOP), load_config().with_target(cpu="nvptx-sm90"))
    assert P.staging_bytes(gpu.plan) > 0
    for got, want in zip(gpu.run(*_arrays()), evaluate(load_program(SWAP_LOOP).module, _arrays()), strict=True):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("selector", [0, 1, 7, -3])
def test_a_conditional_takes_the_selected_branch_on_every_worker(selector: int) -> None:
    x = np.random.default_rng(3).standard_normal(64).astype(np.float32)
    run_everywhere(BRANCHES, [np.array(selector, dtype=np.int32), x])


def test_any_thread_count_gives_the_same_bits() -> None:
    executable = compile_program(load_program(SWAP_LOOP), load_config(), cache_dir=False)
    expected = evaluate(load_program(SWAP_LOOP).module, _arrays())
    for threads in (1, 3, 5, 8):
        outputs = executable.run(*_arrays(), threads=threads)
        assert [o.tobytes() for o in outputs] == [e.tobytes() for e in expected], threads


def test_the_iteration_limit_names_the_loop() -> None:
    executable = compile_program(load_program(SWAP_LOOP), load_config(), cache_dir=False)
    for threads in (1, 2):
        with pytest.raises(ExecutionError, match=r"while loop %\S+ ran past the limit of 3 iterations"):
            executable.run(*_arrays(), threads=threads, max_while_iterations=3)
    assert len(executable.run(*_arrays(), max_while_iterations=5)) == 2  # exactly enough


def test_a_deadline_stops_every_worker_at_the_same_step() -> None:
    executable = compile_program(load_program(SWAP_LOOP), load_config(), cache_dir=False)
    for threads in (1, 2, 3):
        with pytest.raises(DeadlineExceeded, match=r"run stopped past its deadline, before a buffer copy"):
            executable.run(*_arrays(), threads=threads, deadline=time.monotonic() - 1)
    # The same executable runs on afterwards: the control block is reset for every run.
    assert len(executable.run(*_arrays(), threads=2)) == 2


def test_the_sites_are_every_step_once() -> None:
    executable = compile_program(load_program(SWAP_LOOP), load_config(), cache_dir=False)
    sites = N.sites(executable.plan.steps)
    loops = [s for s in sites if s.kind == "while"]
    assert len(loops) == 1
    assert len(sites) == len(executable.plan.steps) + len(loops[0].condition) + len(loops[0].body)


# A step split across workers (the gemm) followed by steps worker 0 runs alone that read its
# result: worker 0 must not start them before every worker has finished its share.
SPLIT_THEN_ALONE = "HloModule split_then_alone\n" + ADD_F32 + """ENTRY e {
  x = f32[600,64] parameter(0)
  w = f32[64,64] parameter(1)
  d = f32[600,64] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  last = f32[1,64] slice(d), slice={[599:600], [0:64]}
  z = f32[] constant(0)
  ROOT s = f32[] reduce(last, z), dimensions={0,1}, to_apply=add
}
"""


def test_steps_run_alone_wait_for_the_split_step_before_them() -> None:
    rng = np.random.default_rng(11)
    inputs = [[rng.standard_normal((600, 64)).astype(np.float32), rng.standard_normal((64, 64)).astype(np.float32)] for _ in range(2)]
    executable = compile_program(load_program(SPLIT_THEN_ALONE), load_config(), cache_dir=False)
    assert [N.runs_alone(s) for s in executable.plan.steps][-2:] == [False, True]
    expected = [evaluate(load_program(SPLIT_THEN_ALONE).module, arrays)[0].tobytes() for arrays in inputs]
    # Two input sets in turn, so that a read before the write finds the other run's value;
    # more workers than this host has cores, so that the shares end at different times.
    for threads in (2, 3, 4):
        for run in range(40):
            assert executable.run(*inputs[run % 2], threads=threads)[0].tobytes() == expected[run % 2], (threads, run)


def test_runs_default_to_the_machines_cores() -> None:
    from compiler.runtime.threads import machine_threads

    executable = compile_program(load_program(SWAP_LOOP), load_config(), cache_dir=False)
    assert executable.threads == machine_threads() >= 1
    assert compile_program(load_program(SWAP_LOOP), load_config(), threads=3, cache_dir=False).threads == 3


# A scan-like loop writing row i of its stacked state each iteration (used after the loop, so
# not an output array of its own), and a dynamic-update-slice that is an output.
STACKING_LOOP = """HloModule stacking
cond {
  s = (s32[], f32[6,4], f32[1,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(6)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[6,4], f32[1,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ys = f32[6,4] get-tuple-element(s), index=1
  x = f32[1,4] get-tuple-element(s), index=2
  x2 = f32[1,4] multiply(x, x)
  zero = s32[] constant(0)
  ys2 = f32[6,4] dynamic-update-slice(ys, x2, i, zero)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[6,4], f32[1,4]) tuple(j, ys2, x2)
}
ENTRY e {
  x = f32[1,4] parameter(0)
  ys = f32[6,4] parameter(1)
  k = s32[] parameter(2)
  z = s32[] constant(0)
  init = (s32[], f32[6,4], f32[1,4]) tuple(z, ys, x)
  w = (s32[], f32[6,4], f32[1,4]) while(init), condition=cond, body=body
  stacked = f32[6,4] get-tuple-element(w), index=1
  used = f32[6,4] negate(stacked)
  zero = s32[] constant(0)
  direct = f32[6,4] dynamic-update-slice(ys, x, k, zero)
  ROOT r = (f32[6,4], f32[6,4]) tuple(used, direct)
}
"""


@pytest.mark.parametrize("row", [0, 3, 9])
def test_a_loop_updates_its_stacked_state_in_place_with_the_reference_bits(row: int) -> None:
    rng = np.random.default_rng(row)
    arrays = [rng.standard_normal((1, 4)).astype(np.float32) * 1.1, rng.standard_normal((6, 4)).astype(np.float32), np.array(row, np.int32)]
    run_everywhere(STACKING_LOOP, arrays)
    executable = compile_program(load_program(STACKING_LOOP), load_config(), cache_dir=False)
    loop = next(s for s in executable.plan.steps if s.kind == "while")
    buffers = executable.plan.buffers
    # The update's result and the state element it replaces are one range: no copy per trip.
    assert buffers[loop.body_results[1]].offset == buffers[loop.state[1]].offset


# The body concatenates two weights the loop passes through unchanged (as flax's LSTM cell
# does every step) and multiplies the state by the result.
INVARIANT_WEIGHTS = """HloModule invariant
cond {
  s = (s32[], f32[2,8], f32[8,4], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(7)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[2,8], f32[8,4], f32[8,4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  h = f32[2,8] get-tuple-element(s), index=1
  wa = f32[8,4] get-tuple-element(s), index=2
  wb = f32[8,4] get-tuple-element(s), index=3
  w = f32[8,8] concatenate(wa, wb), dimensions={1}
  d = f32[2,8] dot(h, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  t = f32[2,8] tanh(d)
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT r = (s32[], f32[2,8], f32[8,4], f32[8,4]) tuple(j, t, wa, wb)
}
ENTRY e {
  h = f32[2,8] parameter(0)
  wa = f32[8,4] parameter(1)
  wb = f32[8,4] parameter(2)
  z = s32[] constant(0)
  init = (s32[], f32[2,8], f32[8,4], f32[8,4]) tuple(z, h, wa, wb)
  w = (s32[], f32[2,8], f32[8,4], f32[8,4]) while(init), condition=cond, body=body
  ROOT out = f32[2,8] get-tuple-element(w), index=1
}
"""


def test_what_a_loop_computes_from_unchanging_values_runs_once_before_it() -> None:
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((2, 8)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((8, 4)).astype(np.float32)]
    run_everywhere(INVARIANT_WEIGHTS, arrays)
    executable = compile_program(load_program(INVARIANT_WEIGHTS), load_config(), cache_dir=False)
    loop = next(s for s in executable.plan.steps if s.kind == "while")
    before = executable.plan.steps[: executable.plan.steps.index(loop)]
    assert any(s.kind == "kernel" and s.instruction.startswith("concatenate") for s in before)
    assert not any(s.instruction.startswith("concatenate") for s in N.sites(list(loop.body)))
    assert any(s.kind == "kernel" and s.instruction.startswith("dot") for s in loop.body)  # h changes: the dot stays


def _launch_ranges() -> LoadedObject:
    """An object whose launch_range(out, extent, grain, thread, share) calls the generated
    vxla.launch with a kernel that writes the range it received into out[0:2] (untouched
    when the worker gets none)."""
    module = ir.Module(name="launch_test")
    record = ir.Function(module, KERNEL_TYPE, "record")
    slots, begin, end = record.args
    b = ir.IRBuilder(record.append_basic_block("entry"))
    b.store(begin, slots)
    b.store(end, b.gep(slots, [ir.Constant(I64, 1)], source_etype=I64))
    b.ret_void()
    launch = N._launch_function(module)
    wrapper = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64, I64, I64]), "launch_range")
    out, extent, grain, thread, share = wrapper.args
    b = ir.IRBuilder(wrapper.append_basic_block("entry"))
    b.call(launch, [record, out, extent, grain, thread, share])
    b.ret_void()
    config = load_config().with_target(cpu=DEFAULT)
    return load_object(compile_ir(str(module), config), config)


def test_generated_launch_splits_work_as_threads_partition_defines() -> None:
    """The partition rule is defined once in Python (threads.partition) and generated once
    (vxla.launch); both must give every worker the same range."""
    loaded = _launch_ranges()
    launch_range = loaded.function("launch_range", None, ctypes.c_void_p, *[ctypes.c_int64] * 4)
    out = (ctypes.c_int64 * 2)()
    for extent, grain, share in itertools.product((1, 2, 3, 7, 8, 64, 100, 1001), (1, 2, 3, 16, 64), (1, 2, 3, 4, 7)):
        ranges = partition(extent, share, grain)
        for thread in range(share):
            out[0] = out[1] = -1
            launch_range(ctypes.addressof(out), extent, grain, thread, share)
            want = ranges[thread] if thread < len(ranges) else (-1, -1)
            assert tuple(out) == want, (extent, grain, share, thread)


def _deep(layers: int) -> str:
    """`layers` layers tanh(h . w_i) with weights of their own, then a while loop (SWAP_LOOP's
    body) over two rows of the result: a plan of more top-level steps than PIECE_STEPS."""
    lines = ["HloModule deep", *SWAP_LOOP.split("ENTRY e {")[0].splitlines()[1:], "ENTRY e {", "  h0 = f32[4,37] parameter(0)"]
    for i in range(1, layers + 1):
        lines.append(f"  w{i} = f32[37,37] parameter({i})")
        lines.append(f"  d{i} = f32[4,37] dot(h{i - 1}, w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")
        lines.append(f"  h{i} = f32[4,37] tanh(d{i})")
    lines += [
        f"  x = f32[1,37] slice(h{layers}), slice={{[0:1], [0:37]}}",
        f"  y = f32[1,37] slice(h{layers}), slice={{[1:2], [0:37]}}",
        "  xr = f32[37] reshape(x)",
        "  yr = f32[37] reshape(y)",
        "  z = s32[] constant(0)",
        "  init = (s32[], f32[37], f32[37]) tuple(z, xr, yr)",
        "  w = (s32[], f32[37], f32[37]) while(init), condition=cond, body=body",
        "  ra = f32[37] get-tuple-element(w), index=1",
        f"  ROOT r = (f32[37], f32[4,37]) tuple(ra, h{layers})",
        "}",
    ]
    return "\n".join(lines) + "\n"


def test_a_long_plan_runs_its_entry_in_pieces_with_the_bits_and_stops_of_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    """The entry of a plan of many steps is several functions called in turn (a stretch of
    small steps run by worker 0 alone is cut between them); they compute the reference's
    bits at any thread count, trace every instruction as one function does, and a stop in a
    later piece names the loop where it happened."""
    text = _deep(110)
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((4, 37)).astype(np.float32)] + [rng.standard_normal((37, 37)).astype(np.float32) * 0.2 for _ in range(110)]
    pieced = compile_program(load_program(text), load_config(), cache_dir=False)
    monkeypatch.setattr(N, "PIECE_STEPS", 10**6)
    whole = compile_program(load_program(text), load_config(), cache_dir=False)
    assert len(pieced.plan.steps) > 200 and all(N.runs_alone(step) for step in pieced.plan.steps[:200])
    assert pieced.plan.canonical_bytes() == whole.plan.canonical_bytes()
    assert pieced.hashes["binary_hash"] != whole.hashes["binary_hash"]
    expected = [e.tobytes() for e in evaluate(load_program(text).module, arrays)]
    for threads in (1, 3):
        assert [o.tobytes() for o in pieced.run(*arrays, threads=threads)] == expected
    traced, traced_whole = (executable.run_traced(*arrays, threads=2) for executable in (pieced, whole))
    assert [o.tobytes() for o in traced.outputs] == expected == [o.tobytes() for o in traced_whole.outputs]
    assert traced.instructions == traced_whole.instructions and len(traced.instructions) > 200
    for executable in (pieced, whole):
        with pytest.raises(ExecutionError, match=r"while loop %\S+ ran past the limit of 3 iterations"):
            executable.run(*arrays, threads=2, max_while_iterations=3)


def _wide(layers: int) -> str:
    """`layers` layers tanh(h . w_i) on 600 rows: every step is split across the workers."""
    lines = ["HloModule wide", "ENTRY e {", "  h0 = f32[600,64] parameter(0)"]
    for i in range(1, layers + 1):
        lines.append(f"  w{i} = f32[64,64] parameter({i})")
        lines.append(f"  d{i} = f32[600,64] dot(h{i - 1}, w{i}), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}")
        lines.append(f"  h{i} = f32[600,64] tanh(d{i})")
    return "\n".join([*lines, f"  ROOT r = f32[600,64] add(h{layers}, h1)", "}"]) + "\n"


def test_consecutive_kernel_steps_run_from_a_table_with_the_bits_sites_and_stops_of_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of kernel steps split across the workers is rows of a table and one loop
    (N.kernel_table): the same bits at any thread count, the same instructions traced (a
    traced run calls the entry once per step, starting and ending inside the table) and the
    same stop as when each step is code of its own."""
    text = _wide(5)
    rng = np.random.default_rng(8)
    arrays = [rng.standard_normal((600, 64)).astype(np.float32)] + [rng.standard_normal((64, 64)).astype(np.float32) * 0.2 for _ in range(5)]
    tabled = compile_program(load_program(text), load_config(), cache_dir=False)
    assert sum(not N.runs_alone(step) for step in tabled.plan.steps) >= 2 * N.TABLE_STEPS
    assert "vxla.steps" in generate(load_program(text), load_config())[0]
    monkeypatch.setattr(N, "TABLE_STEPS", 10**6)
    coded = compile_program(load_program(text), load_config(), cache_dir=False)
    assert "vxla.steps" not in generate(load_program(text), load_config())[0]
    assert tabled.plan.canonical_bytes() == coded.plan.canonical_bytes()
    assert tabled.hashes["binary_hash"] != coded.hashes["binary_hash"]
    expected = [e.tobytes() for e in evaluate(load_program(text).module, arrays)]
    for threads in (1, 2, 3):
        assert [o.tobytes() for o in tabled.run(*arrays, threads=threads)] == expected
    traced, traced_coded = (executable.run_traced(*arrays, threads=2) for executable in (tabled, coded))
    assert [o.tobytes() for o in traced.outputs] == expected
    assert traced.instructions == traced_coded.instructions and len(traced.instructions) >= len(tabled.plan.steps) // 2
    stops = []
    for executable in (tabled, coded):
        with pytest.raises(DeadlineExceeded) as stopped:
            executable.run(*arrays, threads=2, deadline=time.monotonic() - 1)
        stops.append(str(stopped.value))
    assert stops[0] == stops[1] and "before" in stops[0]
