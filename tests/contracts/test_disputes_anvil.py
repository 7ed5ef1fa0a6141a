"""The dispute game over JSON-RPC on anvil (the pinned build): a sample of the campaign of
tools/dispute_campaign.py, one case per lie (harness/dispute_game.py CASES: a wrong result, a
right one challenged, silence on each side, a lying committee member, a colluding majority, a
wrong operand claim, forged moves, griefing challengers, a silent committee, a malformed graph
commitment) on small jobs, in one anvil."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from web3 import Web3

from harness.anvil import running_anvil
from harness.dispute_game import CASES, deployed_env, play_case


@pytest.fixture(scope="module")
def anvil() -> Iterator[Web3]:
    with running_anvil() as (w3, _):
        yield w3


@pytest.mark.parametrize("case", CASES)
def test_the_honest_side_wins_every_lie_on_anvil(anvil: Web3, case: str) -> None:
    g = deployed_env(anvil)
    before = g.total()
    n = 5 + CASES.index(case) * 7
    outcome = play_case(g, case, n, diverge_at=(3 * n) // 4, seed=CASES.index(case))
    assert outcome["disputes"] == {"wrong-result-k3-majority": 2, "griefing-challengers": 3}.get(case, 1)
    assert g.total() == before
