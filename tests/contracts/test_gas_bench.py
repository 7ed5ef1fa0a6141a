"""bench/gas.py measures a real lifecycle, and its costs stay within budget."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gas.py"


def test_gas_per_lifecycle() -> None:
    spec = importlib.util.spec_from_file_location("bench_gas", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    one = module.measure(1)
    assert one.total == one.post + one.claims + one.commits + one.reveals + one.finalize
    # Budgets with headroom over the measured figures (572k for k = 1): a regression that
    # adds storage writes per slot shows up here.
    assert 300_000 < one.total < 700_000
    assert one.finalize < 150_000 and one.withdraw_one < 50_000
