"""bench/goals.py reads the host kind and turns the benchmarks' JSON into the goals' rows
(the figures are made up here: nothing is timed in a test)."""

from __future__ import annotations

from bench.goals import goals, host_kind, targets_used

ZEN5 = "vendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel name\t: AMD EPYC 9005\nflags\t\t: fpu avx2 avx512f fma\n"
INTEL = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Xeon(R)\nflags\t\t: avx2 avx512f\n"
AVX2 = "vendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel name\t: Intel(R) Core\nflags\t\t: avx2 fma\n"


def test_the_host_kind_is_named() -> None:
    assert host_kind(ZEN5) == "AMD Zen 5 (AVX-512, 512-bit FMA): AMD EPYC 9005"
    assert host_kind(ZEN5.replace(": 26", ": 25")).startswith("AMD Zen 4")
    assert host_kind(INTEL) == "Intel AVX-512: Intel(R) Xeon(R)"
    assert host_kind(AVX2, "avx512f") == "AVX2 only: Intel(R) Core; masked: without avx512f"


def test_each_goal_comes_from_its_benchmark() -> None:
    results = {
        "gemm": {"size": 1024, "seconds": {"vxla:x86-64-v4": {"1": 0.014}, "numpy": {"1": 0.013}, "xla": {"1": 0.0126}}},
        "models": {"results": [{"model": "transcendental_chain", "numpy_over_vxla": 0.5, "jax_over_vxla": 0.1}]},
        "real_models": {"models": [
            {"name": "bert", "threads": {"2": {"ratio": 1.5, "vxla": {"compile_s": 2.0}, "xla": {"compile_s": 1.0}}}},
            {"name": "gru_scan", "threads": {"2": {"ratio": 1.1, "vxla": {"compile_s": 1.0}, "xla": {"compile_s": 1.0}}}},
        ]},
    }  # fmt: skip
    rows = {(goal, figure): verdict for goal, figure, verdict in goals(results, {"vxla_1": 9e-6, "vxla_2": 1e-5, "xla": 1e-5})}
    assert rows[("1 GEMM, 1 core", "x86-64-v4 at 90% of the faster of OpenBLAS and XLA:CPU (xla)")] == "met (goal >= 0.9)"
    # The AVX2 view of the same host: GEMM's row is the masked target's, against OpenBLAS's
    # Haswell kernel and XLA:CPU held to AVX2 where gemm.py measured them.
    results["gemm"]["seconds"]["vxla:x86-64-v3"] = {"1": 0.021}
    (gemm_row,) = [row for row in goals(results, None, "x86-64-v3") if row[0].startswith("1 GEMM")]
    assert gemm_row[1:] == ("x86-64-v3 at 60% of the faster of OpenBLAS and XLA:CPU (xla)", "not met (goal >= 0.9)")
    results["gemm"]["seconds"] |= {"numpy:Haswell": {"1": 0.019}, "xla:x86-64-v3": {"1": 0.020}}
    (gemm_row,) = [row for row in goals(results, None, "x86-64-v3") if row[0].startswith("1 GEMM")]
    assert gemm_row[1:] == ("x86-64-v3 at 90% of the faster of OpenBLAS and XLA:CPU (numpy:Haswell)", "met (goal >= 0.9)")
    assert rows[("2 per-run overhead", "10.0 us (2 threads), 9.0 us (1) vs XLA:CPU 10.0 us: 1.00x")] == "met (goal <= 1.2)"
    assert rows[("2 small models", "bert: 1.50x XLA's time (2 threads)")] == "not met (goal <= 1.2)"
    assert rows[("2 small models", "equinox_transformer: not measured (not in the corpus)")] == "-"
    assert rows[("3 loops", "gru_scan: 1.10x XLA's time (2 threads)")] == "met (goal <= 1.3)"
    assert rows[("4 math", "transcendental chain 2.00x numpy's time, 10.00x XLA's")] == "not met (goal <= 1)"
    assert rows[("5 cold compile", "geometric mean 1.41x XLA's over 2 models")] == "not met (goal <= 1)"
    assert rows[("6 overall, 2 threads", "geometric mean 1.28x XLA's time over 2 models, largest 1.50x")] == "not met (goal <= 1)"


def test_the_target_vxla_ran_on_is_named_from_each_result() -> None:
    same = {"models": {"target_cpu": "x86-64-v4"}, "real_models": {"target_cpu": "x86-64-v4"}, "gemm": None}
    assert targets_used(same, "x86-64-v4") == "x86-64-v4"
    mixed = {"models": {"target_cpu": "x86-64-v3"}, "real_models": {"models": []}}
    assert targets_used(mixed, "x86-64-v4") == (
        "per-run overhead x86-64-v4; models x86-64-v3; real_models the pinned one (an older result without its target)"
    )


def test_a_masked_run_holds_xla_to_the_targets_instruction_set() -> None:
    from bench.target import xla_flags

    assert xla_flags("x86-64-v3", "") == "--xla_cpu_max_isa=AVX2"
    assert xla_flags("x86-64-v2", "--xla_cpu_use_thunk_runtime=true") == "--xla_cpu_use_thunk_runtime=true --xla_cpu_max_isa=SSE4_2"
    assert xla_flags("x86-64-v3", "--xla_cpu_max_isa=AVX") == "--xla_cpu_max_isa=AVX"  # the user's own choice stands
    assert xla_flags("neoverse-n1", "") == ""
