"""ChainClient: nonces, fees, mined reverts, and revert data in every shape it arrives in."""

from __future__ import annotations

from eth_abi import encode as abi_encode
from eth_utils import keccak

from node.chain import ContractRevert, TransactionReverted, load_artifact
from node.chain.errors import ErrorDecoder, revert_data
from tests.contracts.conftest import BOND, ENDPOINT, KEY_ID, MIN_STAKE, Env
from tests.contracts.helpers import reverts


def test_nonce_resyncs_after_an_outside_transaction(env: Env) -> None:
    a, b = env.nodes[0], env.nodes[1]
    env.client.transact(a, to=b, value=1)
    env.w3.eth.send_transaction({"from": a, "to": b, "value": 1})  # behind the client's back
    env.client.fees_paid[a] += _fee_of_last_block(env)
    env.client.transact(a, to=b, value=1)  # refused once for its nonce, resent with the next
    assert env.w3.eth.get_transaction_count(a) == 3


def _fee_of_last_block(env: Env) -> int:
    block = env.w3.eth.get_block("latest", full_transactions=True)
    receipt = env.w3.eth.get_transaction_receipt(block["transactions"][0]["hash"])
    return int(receipt["gasUsed"]) * int(receipt["effectiveGasPrice"])


def test_mined_revert_is_replayed_and_named(env: Env) -> None:
    """With an explicit gas limit nothing is estimated: the transaction is mined, fails, and
    the client recovers the custom error by replaying it."""
    node = env.nodes[0]
    fn = env.registry.contract.functions.register(KEY_ID, ENDPOINT)
    with reverts("StakeTooLow", sent=1, minimum=MIN_STAKE):
        env.client.transact(node, fn, value=1, gas=300_000)
    assert env.client.fees_paid[node] > 0  # the failed transaction still paid for its gas
    assert env.w3.eth.get_transaction_count(node) == 1
    env.registry.register(node, KEY_ID, ENDPOINT, MIN_STAKE)  # the next nonce is right


def test_fees_follow_the_chain(env: Env) -> None:
    max_fee, tip = env.client.fees()
    base = env.w3.eth.get_block("latest")["baseFeePerGas"]
    assert tip > 0 and max_fee == 2 * base + tip
    result = env.client.transact(env.nodes[0], to=env.nodes[1], value=1)
    assert result.receipt["type"] == 2  # EIP-1559
    assert result.fee_wei == result.gas_used * result.receipt["effectiveGasPrice"]


def test_every_deployment_contracts_errors_are_named(env: Env) -> None:
    """A client built with the defaults names the dispute game's and the committee's errors
    too, and the market's when they come up through the game (openDispute)."""
    with reverts("WrongBond", sent=0, required=BOND):
        env.game.challenge(env.outsider, 1, 0, b"\x01" * 32, b"\x02" * 32, 0)
    with reverts("UnknownJob", jobId=1):
        env.game.challenge(env.outsider, 1, 0, b"\x01" * 32, b"\x02" * 32, BOND)
    with reverts("UnknownPanel", disputeId=1):
        env.committee.vote(env.outsider, 1, b"\x01" * 32)
    with reverts("UnknownDispute", disputeId=1):
        env.game.timeout(env.outsider, 1)


def test_error_decoder_shapes() -> None:
    decoder = ErrorDecoder(load_artifact("NodeRegistry").abi, load_artifact("JobMarket").abi)
    selector = keccak(text="StakeTooLow(uint256,uint256)")[:4]
    err = decoder.decode(selector + abi_encode(["uint256", "uint256"], [1, 2]))
    assert isinstance(err, ContractRevert) and err.name == "StakeTooLow"
    assert err.values == (1, 2) and str(err) == "StakeTooLow(sent=1, minimum=2)"
    err = decoder.decode(bytes.fromhex("08c379a0") + abi_encode(["string"], ["boom"]))
    assert isinstance(err, ContractRevert) and (err.name, err.values) == ("Error", ("boom",))
    err = decoder.decode(bytes.fromhex("4e487b71") + abi_encode(["uint256"], [0x11]))
    assert isinstance(err, ContractRevert) and (err.name, err.values) == ("Panic", (0x11,))
    assert isinstance(decoder.decode(b""), TransactionReverted)
    assert isinstance(decoder.decode(b"\x01\x02\x03\x04"), TransactionReverted)
    assert isinstance(decoder.decode(selector + b"\x00"), TransactionReverted)  # truncated


def test_revert_data_from_each_client() -> None:
    class RpcError(Exception):
        def __init__(self, data: object) -> None:
            super().__init__("execution reverted")
            self.data = data

    assert revert_data(RpcError("0x1234")) == b"\x12\x34"  # web3 against JSON-RPC nodes
    assert revert_data(RpcError({"data": "0xabcd"})) == b"\xab\xcd"
    assert revert_data(Exception("execution reverted: b'\\x18`H\\xd1'")) == b"\x18`H\xd1"
    assert revert_data(Exception("execution reverted: 0x0102")) == b"\x01\x02"
    assert revert_data(Exception("execution reverted")) == b""
    assert revert_data(Exception("connection refused")) is None
