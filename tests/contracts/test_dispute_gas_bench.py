"""The dispute gas bench (bench/dispute_gas.py) on its smallest job: it runs, the walk takes
the moves the tree's depth says, and the figures add up. The 1,000- and 10,000-instruction
figures are the bench's own run."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from web3 import EthereumTesterProvider, Web3

from attest.commitment import path_moves

BENCH = Path(__file__).resolve().parents[2] / "bench" / "dispute_gas.py"


def _bench():  # noqa: ANN202 - the bench module
    spec = importlib.util.spec_from_file_location("dispute_gas", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["dispute_gas"] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_bench_measures_a_ten_instruction_dispute_and_its_non_interactive_alternative() -> None:
    bench = _bench()
    figures = bench.measure(10, lambda: Web3(EthereumTesterProvider()), bench.compile_locate())
    graph = bench.synthetic_graph(10, seed=10)
    index = bench._deepest_leaf_with_operands(graph)
    assert figures.walk_moves == 2 * path_moves(index, 10)
    # challenge, the walk, the defender's leaf, the opening, three votes, the tally
    assert figures.dispute_txs == 1 + figures.walk_moves + 1 + 1 + 3 + 1
    assert figures.dispute_gas == sum(figures.dispute_gas_by_step.values())
    assert (figures.optimistic_txs, figures.k3_txs) == (5, 11)
    assert 0 < figures.optimistic_gas < figures.k3_gas
    assert 0 < figures.non_interactive_gas < figures.dispute_gas
