"""Event decoding for the node's watcher: receipts and block ranges of logs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_utils import event_abi_to_log_topic, to_checksum_address
from web3._utils.events import get_event_data

from node.chain.client import ChainClient


@dataclass(frozen=True)
class Event:
    """One decoded log."""

    name: str
    args: dict[str, Any]
    address: str
    block_number: int
    tx_hash: bytes
    log_index: int


def _event_abis(contract: Any) -> dict[bytes, dict[str, Any]]:
    return {
        bytes(event_abi_to_log_topic(item)): item
        for item in contract.abi
        if item.get("type") == "event"
    }


def _decode(contract: Any, log: Any, abis: dict[bytes, dict[str, Any]]) -> Event | None:
    topics = log["topics"]
    if not topics:
        return None
    abi = abis.get(bytes(topics[0]))
    if abi is None:
        return None
    data = get_event_data(contract.w3.codec, abi, log)
    return Event(
        name=data["event"],
        args=dict(data["args"]),
        address=to_checksum_address(log["address"]),
        block_number=int(log["blockNumber"]),
        tx_hash=bytes(log["transactionHash"]),
        log_index=int(log["logIndex"]),
    )


def decode_receipt(contract: Any, receipt: Any) -> list[Event]:
    """The logs of `receipt` that match an event of `contract`'s ABI, decoded, in order.
    (Logs from other addresses are decoded too when the topic matches; filter on address.)"""
    abis = _event_abis(contract)
    events = [_decode(contract, log, abis) for log in receipt["logs"]]
    return [e for e in events if e is not None]


def fetch_events(
    client: ChainClient,
    contract: Any,
    from_block: int,
    to_block: int | str = "latest",
    names: tuple[str, ...] | None = None,
    chunk: int = 10_000,
) -> list[Event]:
    """Decoded events of `contract` in [from_block, to_block], in chain order, optionally only
    those named in `names`. This is how a node follows the market from logs alone."""
    abis = _event_abis(contract)
    if names is not None:
        abis = {t: a for t, a in abis.items() if a["name"] in names}
    topics = [["0x" + t.hex() for t in abis]] if abis else None
    logs = client.get_logs(contract.address, from_block, to_block, topics=topics, chunk=chunk)
    events = [_decode(contract, log, abis) for log in logs]
    return [e for e in events if e is not None]
