"""Pull payments to a recipient that refuses ether revert with TransferFailed, and the
credit or unbonded stake stays where it was (nothing is lost)."""

from __future__ import annotations

from eth_utils import to_checksum_address

from tests.contracts.conftest import GRAPH_ROOT, MIN_STAKE, MIN_WINDOW, TRACE_LEAVES, Env
from tests.contracts.helpers import reverts


def _forwarder_code(target: str) -> bytes:
    """Creation code of a 55-byte contract that forwards any call with data (and its value)
    to `target`, bubbling the result up, and reverts on plain ether: a recipient that
    refuses payment. Hand-assembled so the test needs no second compiler run."""
    runtime = (
        bytes.fromhex("3615603357365f5f37")  # no calldata -> jump to revert; copy calldata
        + bytes.fromhex("5f5f365f3473")  # retSize retOffset argsSize argsOffset value PUSH20
        + bytes.fromhex(target[2:])
        + bytes.fromhex("5af13d5f5f3e602f57")  # GAS CALL; copy returndata; ok -> 0x2f
        + bytes.fromhex("3d5ffd")  # failure: revert with the callee's data
        + bytes.fromhex("5b3d5ff3")  # 0x2f: return the callee's data
        + bytes.fromhex("5b5f5ffd")  # 0x33: plain ether is refused
    )
    assert len(runtime) == 0x37
    init = bytes.fromhex("6037" + "80" + "6009" + "5f" + "39" + "5f" + "f3")
    assert len(init) == 9
    return init + runtime


def _deploy_forwarder(env: Env, target: str) -> str:
    result = env.client.deploy(env.outsider, _forwarder_code(target))
    address = to_checksum_address(result.receipt["contractAddress"])
    env.extra_addresses.append(address)
    return address


def test_market_withdraw_to_a_refusing_contract(env: Env) -> None:
    forwarder = _deploy_forwarder(env, env.market.address)
    now = env.client.timestamp()
    post = env.market.contract.functions.postJob(
        b"\x01" * 32, b"\x02" * 32, GRAPH_ROOT, TRACE_LEAVES, 1, now + 10, now + 20, MIN_WINDOW
    )
    env.client.transact(env.outsider, to=forwarder, data=post._encode_transaction_data(), value=5)
    job = env.market.job_count()
    assert env.market.get_job(job).submitter == forwarder
    env.close_window(job)
    env.market.finalize(env.outsider, job)
    assert env.market.credits(forwarder) == 5
    withdraw = env.market.contract.functions.withdraw()._encode_transaction_data()
    with reverts("TransferFailed", to=forwarder, amount=5):
        env.client.transact(env.outsider, to=forwarder, data=withdraw)
    assert env.market.credits(forwarder) == 5  # the credit survives the failed payout


def test_registry_withdraw_to_a_refusing_contract(env: Env) -> None:
    forwarder = _deploy_forwarder(env, env.registry.address)
    functions = env.registry.contract.functions
    register = functions.register(b"\x05" * 32, "http://contract-node")._encode_transaction_data()
    env.client.transact(env.outsider, to=forwarder, data=register, value=MIN_STAKE)
    assert env.registry.get_node(forwarder).stake == MIN_STAKE
    request = functions.requestWithdrawal(MIN_STAKE)._encode_transaction_data()
    env.client.transact(env.outsider, to=forwarder, data=request)
    env.travel_to(env.registry.get_node(forwarder).unlock_at)
    pull = functions.withdrawStake()._encode_transaction_data()
    with reverts("TransferFailed", to=forwarder, amount=MIN_STAKE):
        env.client.transact(env.outsider, to=forwarder, data=pull)
    assert env.registry.get_node(forwarder).unbonding == MIN_STAKE
