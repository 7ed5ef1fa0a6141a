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
        "models": {"results": [
            {"model": "transcendental_chain", "numpy_over_vxla": 0.5, "jax_over_vxla": 0.1},
            {"model": "cnn", "numpy_over_vxla": 3.0, "jax_over_vxla": 0.5},
        ]},
        "real_models": {"models": [
            {"name": "bert", "threads": {"2": {"ratio": 1.5, "vxla": {"compile_s": 2.0, "first_run_s": 2.1}, "xla": {"compile_s": 1.0, "first_run_s": 1.5}}}},
            {"name": "equinox_mlp", "threads": {"2": {"ratio": 1.1, "vxla": {"compile_s": 1.0, "first_run_s": 1.0}, "xla": {"compile_s": 1.0, "first_run_s": 1.0}}}},
        ]},
    }  # fmt: skip
    found = goals(results, {"vxla_1": 9e-6, "vxla_2": 1e-5, "xla": 1e-5}, "x86-64-v4", "x86-64-v4")
    rows = {(goal, figure): verdict for goal, figure, verdict in found}
    assert rows[("1 widest target", "vxla ran x86-64-v4; the widest target this host runs is x86-64-v4")] == "met"
    assert rows[("2 cold compile", "geometric mean 1.41x XLA's time over 2 models (2 cores), largest 2.00x")] == "not met (goal <= 1)"
    assert rows[("2 first run", "geometric mean 1.18x XLA's time over 2 models (2 cores), largest 1.40x")] == "not met (goal <= 1)"
    assert rows[("3 small-model floor", "equinox_mlp: 1.10x XLA's time (2 threads)")] == "met (goal <= 1.2)"
    assert ("3 per-run overhead", "a 4-element add: 10.0 us (2 threads), 9.0 us (1) vs XLA:CPU 10.0 us: 1.00x") in rows
    assert rows[("4 sgemm, 1 core", "x86-64-v4 at 90% of the faster of OpenBLAS and XLA:CPU (xla)")] == "met (goal >= 0.9)"
    assert rows[("4 convolution", "cnn: 2.00x XLA's time")] == "not met (goal <= 1.2)"
    assert rows[("4 math", "correctly rounded chain 2.00x numpy's time, 10.00x XLA's approximations' (stretch: 1.5)")] == "not met (goal <= 1)"
    assert rows[("5 overall, 2 threads", "geometric mean 1.28x XLA's time over 2 models, largest 1.50x")] == "not met (goal <= 0.8); largest over 1.2"
    # The AVX2 view of the same host: the sgemm row is the masked target's, against OpenBLAS's
    # Haswell kernel and XLA:CPU held to AVX2 where gemm.py measured them.
    results["gemm"]["seconds"]["vxla:x86-64-v3"] = {"1": 0.021}
    masked = goals(results, None, "x86-64-v3", "x86-64-v4")
    (gemm_row,) = [row for row in masked if row[0].startswith("4 sgemm")]
    assert gemm_row[1:] == ("x86-64-v3 at 60% of the faster of OpenBLAS and XLA:CPU (xla)", "not met (goal >= 0.9)")
    assert masked[0] == ("1 widest target", "vxla ran x86-64-v3; the widest target this host runs is x86-64-v4", "another target was asked for (--target x86-64-v3)")
    results["gemm"]["seconds"] |= {"numpy:Haswell": {"1": 0.019}, "xla:x86-64-v3": {"1": 0.020}}
    (gemm_row,) = [row for row in goals(results, None, "x86-64-v3") if row[0].startswith("4 sgemm")]
    assert gemm_row[1:] == ("x86-64-v3 at 90% of the faster of OpenBLAS and XLA:CPU (numpy:Haswell)", "met (goal >= 0.9)")
    results["real_models"]["models"].pop()
    assert ("3 small-model floor", "equinox_mlp: not measured (not in the corpus)", "-") in goals(results, None)


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
