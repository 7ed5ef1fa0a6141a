"""Random sequences of register/stake/post/claim/commit/reveal/challenge/timeout/finalize/
withdraw by several accounts against a Python model of the contracts; the invariants hold
after every step.

The model predicts each action's outcome: success (then the chain must agree on credits,
stakes, locks, jobs and the bonds the dispute game holds) or the custom error the contract
must revert with: the challenge window after the reveal phase, disputes that hold finalize
until a timeout settles them (refuting the slot or forfeiting the bond), and the tally among
the surviving slots. Deadlines set at posting sit far from the times the machine jumps to;
actions too close to a derived deadline are skipped. The machine and its model:
harness/market.py.
"""

from __future__ import annotations

from harness.market import MarketMachine, campaign_settings, deployed_chain

# Deployed before hypothesis runs: deploying changes the recursion limit, which hypothesis
# warns about when it happens inside a test (the conftest's fixture shares this chain).
deployed_chain()

# A sample (py-evm runs about two actions a second with the invariants); tools/
# market_campaign.py runs the same machine for as long as one likes.
MarketMachine.TestCase.settings = campaign_settings(examples=4, steps=20)
test_market_state_machine = MarketMachine.TestCase
