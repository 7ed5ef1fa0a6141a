"""bench/gas.py measures a real lifecycle, and its costs stay within budget."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "gas.py"


def test_gas_per_lifecycle(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_gas", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    one = module.measure(1)
    assert one.total == one.post + one.claims + one.commits + one.reveals + one.finalize
    # The optimistic job, undisputed: five transactions that add up to the lifecycle.
    assert [name for name, _ in one.transactions] == [
        "postJob",
        "claimSlot",
        "commit",
        "reveal",
        "finalize",
    ]
    assert sum(gas for _, gas in one.transactions) == one.total
    # Budgets with headroom over the measured figures (648k for k = 1): a regression that
    # adds storage writes per slot shows up here.
    assert 300_000 < one.total < 800_000
    assert one.finalize < 150_000 and one.withdraw_one < 50_000
    module.print_lifecycles([one])
    out = capsys.readouterr().out
    assert f"optimistic job (k = 1, undisputed): 5 transactions, {one.total} gas" in out
