"""The differential fuzzer's modules on XLA:CPU (`make test-jax`, which has jaxlib): a fixed
sample through `tools/fuzz_vs_xla.py`, with benign inputs and with the fuzzer's NaN, inf,
subnormal and extreme-integer inputs. Every output agrees with XLA:CPU within tolerance, or
differs for a cause docs/numerics.md §11 documents; the long campaigns are the tool's."""

from __future__ import annotations

import pytest

from tools.fuzz_vs_xla import main


@pytest.mark.parametrize("special", [False, True], ids=["benign inputs", "special inputs"])
def test_fuzzed_modules_agree_with_xla_cpu_or_differ_for_a_documented_reason(special: bool) -> None:
    assert main(["--modules", "40", "--derandomize", *(["--special-inputs"] if special else [])]) == 0
