"""Random sequences of register/stake/post/claim/commit/reveal/finalize/withdraw by several
accounts against a Python model of the contracts; the invariants hold after every step.

The model predicts each action's outcome: success (then the chain must agree on credits,
stakes and locks) or the custom error the contract must revert with. Deadlines sit far from
the times the machine jumps to, so block-timestamp jitter never decides an outcome.
The machine and its model: harness/market.py.
"""

from __future__ import annotations

from harness.market import MarketMachine, campaign_settings

# A sample (py-evm runs about two actions a second with the invariants); tools/
# market_campaign.py runs the same machine for as long as one likes.
MarketMachine.TestCase.settings = campaign_settings(examples=4, steps=30)
test_market_state_machine = MarketMachine.TestCase
