"""The in-process EVM the tests run the contracts on: py-evm through web3's tester provider,
with a gas estimate of two executions instead of py-evm's bisection (about thirteen).

A node estimates every transaction before it sends it (node/chain/client.py), and py-evm's
default estimator bisects between the intrinsic gas and the block's limit, executing the
transaction at each probe: for the step referee's moves, which run the scalar machine, that
was two thirds of a dispute test's time. Here the transaction runs once with the block's
gas, and the gas it consumed (before refunds), grown for the 63/64 rule of nested calls, is
checked by a second run; only if that runs out of gas does the bisection run. An estimate
is a limit, never a measurement: the gas the tests print comes from receipts, and
`bench/` keeps py-evm's exact estimator."""

from __future__ import annotations

from typing import cast

from eth.abc import SignedTransactionAPI, StateAPI
from eth.estimators.gas import binary_gas_search_intrinsic_tolerance
from eth.vm.spoof import SpoofTransaction
from web3 import EthereumTesterProvider, Web3

# (64/63)^4, rounded up: the gas a call needs at four nested calls' depth beyond what it uses.
_NESTED_CALLS_NUM, _NESTED_CALLS_DEN = 107, 100


def in_process_web3() -> Web3:
    """A fresh py-evm chain (web3's tester accounts, funded) with the two-run estimate."""
    provider = EthereumTesterProvider()
    chain = provider.ethereum_tester.backend.chain
    # On the instance, which copied py-evm's default when it was made, and on the class:
    # reverting to a snapshot makes a new chain of the same class.
    chain.gas_estimator = two_run_estimate
    type(chain).gas_estimator = staticmethod(two_run_estimate)
    return Web3(provider)


def two_run_estimate(state: StateAPI, transaction: SignedTransactionAPI) -> int:
    """A gas limit the transaction succeeds with: what it consumes at the block's limit,
    grown for nested calls, confirmed by a run; py-evm's bisection where that falls short.
    Raises the transaction's error if it fails even at the block's limit."""
    consumed = _consumed(state, transaction, state.gas_limit)
    if isinstance(consumed, BaseException):
        raise consumed
    limit = min(
        state.gas_limit,
        transaction.intrinsic_gas + consumed * _NESTED_CALLS_NUM // _NESTED_CALLS_DEN + 1_000,
    )
    if not isinstance(_consumed(state, transaction, limit), BaseException):
        return limit
    return binary_gas_search_intrinsic_tolerance(state, transaction)


def _consumed(state: StateAPI, transaction: SignedTransactionAPI, gas: int) -> int | BaseException:
    """The gas the message consumed (refunds not deducted) at limit `gas`, or its error;
    the state is left as it was."""
    spoofed = cast(SignedTransactionAPI, SpoofTransaction(transaction, gas=gas, gas_price=0))
    snapshot = state.snapshot()
    try:
        computation = state.apply_transaction(spoofed)
        if computation.is_error:
            return computation.error
        return computation.get_gas_used()
    finally:
        state.revert(snapshot)
