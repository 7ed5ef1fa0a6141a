"""The one owner of chain access: transaction building, nonces, gas, fees, receipts, logs.

Every write goes through `ChainClient.transact`: a per-account nonce manager (serialized
with a lock, so concurrent callers never reuse a nonce), a gas estimate (which also surfaces
reverts before anything is sent) capped by `gas_cap`, EIP-1559 fees read from the chain, the
receipt awaited, and reverts decoded into `ContractRevert` exceptions that name the custom
error. Senders are either addresses the node unlocks (eth-tester, anvil) or local accounts
(eth_account) whose transactions are signed here.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3
from web3.contract.contract import ContractFunction
from web3.exceptions import BlockNotFound, TransactionNotFound

from node.chain.artifacts import DEPLOYMENT_CONTRACTS, load_artifact
from node.chain.errors import (
    ChainError,
    ErrorDecoder,
    GasCapExceeded,
    TransactionDropped,
    TransactionReverted,
    revert_data,
)

Sender = str | LocalAccount

DEFAULT_GAS_CAP = 5_000_000
DEPLOY_GAS_CAP = 8_000_000
# Headroom over the estimate: the estimate is exact for the state it ran on, and a block
# that lands first (another claim, a reveal) can change the path slightly.
GAS_MARGIN_NUM, GAS_MARGIN_DEN = 6, 5
FALLBACK_PRIORITY_FEE = 1_000_000_000  # 1 gwei, for nodes without eth_maxPriorityFeePerGas
RECEIPT_POLL_S = 0.05  # the first pause between asking for a receipt; it grows to 1 s
# How long a sent transaction may be neither mined nor executable in the pool before it is
# taken as lost: well above the moment between a node taking it and its pool showing it.
# How long a counted nonce's receipt may lag behind it before the transaction is called dropped.
RECEIPT_GRACE_S = 5.0
STUCK_S = 2.0


@dataclass(frozen=True)
class TxResult:
    """A mined, successful transaction."""

    tx_hash: bytes
    receipt: Any
    gas_used: int
    fee_wei: int  # gasUsed * effectiveGasPrice: what the sender paid beyond `value`


class NonceManager:
    """Serializes sending per account and takes each nonce from the chain's pending count.
    No local count: after a reorg drops mined transactions (or they leave the pool) the
    chain's count falls, and a nonce kept locally would leave a gap nothing fills. The lock
    is held from reading the count to the node accepting the transaction, so concurrent
    callers of one client never take the same nonce."""

    def __init__(self, w3: Web3) -> None:
        self._w3 = w3
        self._lock = threading.Lock()
        self._account_locks: dict[str, threading.Lock] = {}

    def lock_for(self, address: str) -> threading.Lock:
        """The lock that serializes sending for one account (held from nonce to send)."""
        with self._lock:
            return self._account_locks.setdefault(address, threading.Lock())

    def next_nonce(self, address: str) -> int:
        """The nonce to use now; call with `lock_for(address)` held."""
        return int(self._w3.eth.get_transaction_count(address, "pending"))


class ChainClient:
    """Chain access for one web3 connection."""

    def __init__(
        self,
        w3: Web3,
        *,
        gas_cap: int = DEFAULT_GAS_CAP,
        receipt_timeout: float = 120.0,
        error_abis: tuple[list[dict[str, Any]], ...] | None = None,
    ) -> None:
        """`error_abis`: ABIs whose custom errors revert data is decoded against (default:
        the artifacts of every contract of a deployment)."""
        self.w3 = w3
        self.gas_cap = gas_cap
        self.receipt_timeout = receipt_timeout
        self.nonces = NonceManager(w3)
        if error_abis is None:
            error_abis = tuple(load_artifact(name).abi for name in DEPLOYMENT_CONTRACTS)
        self._decoder = ErrorDecoder(*error_abis)
        # Wei each sender paid for gas through this client, mined reverts included: what a
        # balance check must add back.
        self.fees_paid: dict[str, int] = {}

    # -- reading ---------------------------------------------------------------------------

    @property
    def chain_id(self) -> int:
        """The chain id of the connection."""
        return self.w3.eth.chain_id

    def accounts(self) -> list[str]:
        """Accounts the node holds unlocked (test chains and devnets)."""
        return [to_checksum_address(a) for a in self.w3.eth.accounts]

    def balance(self, address: str) -> int:
        """Balance of `address` in wei at the latest block."""
        return self.w3.eth.get_balance(to_checksum_address(address))

    def block_number(self) -> int:
        """The latest block number."""
        return self.w3.eth.block_number

    def block_hash(self, number: int) -> bytes | None:
        """The hash of block `number` on the chain the node follows now; None past its head."""
        try:
            return bytes(self.w3.eth.get_block(number)["hash"])
        except BlockNotFound:
            return None

    def timestamp(self) -> int:
        """Timestamp of the latest block (the contracts' `block.timestamp` for the next one
        is at least this)."""
        return int(self.w3.eth.get_block("latest")["timestamp"])

    def next_block_time(self) -> int:
        """The earliest `block.timestamp` a transaction sent now can run at: the pending
        block's time where the chain tells it (anvil and geth: their clock, with any time
        moved on a dev chain), and never before the latest block's time + 1. A chain that
        mines only on transactions (a devnet) can sit idle for minutes, and its latest block's
        time alone is then that old: deadlines from it are already over."""
        latest = self.timestamp()
        try:
            pending = int(self.w3.eth.get_block("pending")["timestamp"])
        except (BlockNotFound, KeyError, TypeError, ValueError):  # a chain without a pending block
            pending = 0
        return max(latest + 1, pending)

    def pending_count(self, address: str) -> int:
        """Transactions of `address` sent but not yet mined (pending nonce minus mined
        nonce): a restarted watcher waits for these before deciding from chain state."""
        frm = to_checksum_address(address)
        pending = self.w3.eth.get_transaction_count(frm, "pending")
        return max(0, int(pending) - int(self.w3.eth.get_transaction_count(frm, "latest")))

    def call(self, fn: ContractFunction, sender: Sender | None = None, block: int | None = None) -> Any:
        """Run a view (or a dry run of a write) on the latest state, or on the state after
        block number `block`, and decode reverts into exceptions."""
        params: dict[str, Any] = {}
        if sender is not None:
            params["from"] = _address(sender)
        try:
            return fn.call(params, block_identifier="latest" if block is None else block)
        except ChainError:
            raise
        except Exception as exc:
            raise self._decoded(exc) from exc

    # -- writing ---------------------------------------------------------------------------

    def fees(self) -> tuple[int, int]:
        """(maxFeePerGas, maxPriorityFeePerGas) from the chain: twice the latest base fee
        plus the node's suggested tip, so the transaction survives a few full blocks."""
        base = int(self.w3.eth.get_block("latest").get("baseFeePerGas") or 0)
        try:
            tip = int(self.w3.eth.max_priority_fee)
        except Exception:  # nodes without eth_maxPriorityFeePerGas
            tip = FALLBACK_PRIORITY_FEE
        return 2 * base + tip, tip

    def transact(
        self,
        sender: Sender,
        fn: ContractFunction | None = None,
        *,
        value: int = 0,
        to: str | None = None,
        data: bytes | None = None,
        gas: int | None = None,
    ) -> TxResult:
        """Send a transaction calling `fn` (or raw `to`/`data`), wait for its receipt.

        Raises ContractRevert (named custom error) when the estimate or the mined transaction
        reverts, GasCapExceeded when the estimate is over `gas_cap`, TransactionDropped when
        the sent transaction will not be mined (see `_receipt`).
        """
        frm = _address(sender)
        tx: dict[str, Any] = {"from": frm, "value": value, "chainId": self.chain_id}
        if fn is not None:
            tx["to"] = fn.address
            tx["data"] = fn._encode_transaction_data()
        else:
            if to is not None:
                tx["to"] = to_checksum_address(to)
            tx["data"] = data or b""
        if gas is None:
            gas = self._estimate(tx)
        tx["gas"] = gas
        tx["maxFeePerGas"], tx["maxPriorityFeePerGas"] = self.fees()

        tx_hash = self._send(sender, frm, tx)
        receipt = self._receipt(sender, frm, tx, tx_hash)
        fee = int(receipt["gasUsed"]) * int(receipt["effectiveGasPrice"])
        self.fees_paid[frm] = self.fees_paid.get(frm, 0) + fee
        if receipt["status"] != 1:
            raise self._replayed_revert(tx, receipt)
        return TxResult(bytes(tx_hash), receipt, int(receipt["gasUsed"]), fee)

    def _receipt(self, sender: Sender, frm: str, tx: dict[str, Any], tx_hash: bytes) -> Any:
        """The receipt of a sent transaction, waited for until `receipt_timeout`; raises
        TransactionDropped as soon as it is clear the transaction will not be mined. A
        transaction neither mined nor among the account's executable pool transactions for
        STUCK_S is either gone (a reorg dropped it) or queued behind a nonce that a reorg
        emptied; a queued one is cancelled (`_cancel`), since if the gap were filled later it
        would run then, long after the decision it came from."""
        nonce = int(tx["nonce"])
        deadline = time.monotonic() + self.receipt_timeout
        stuck_since: float | None = None
        pause = RECEIPT_POLL_S
        while True:
            with contextlib.suppress(TransactionNotFound):
                return self.w3.eth.get_transaction_receipt(tx_hash)
            if self.w3.eth.get_transaction_count(frm, "latest") > nonce:
                receipt = self._late_receipt(tx_hash)  # mined since the first look
                if receipt is not None:
                    return receipt
                raise TransactionDropped(f"transaction {tx_hash.hex()} was dropped and its nonce {nonce} used by another")
            now = time.monotonic()
            if self.w3.eth.get_transaction_count(frm, "pending") > nonce:
                stuck_since = None
            elif stuck_since is None:
                stuck_since = now
            elif now - stuck_since > STUCK_S:
                try:
                    self.w3.eth.get_transaction(tx_hash)
                except TransactionNotFound:
                    raise TransactionDropped(f"transaction {tx_hash.hex()} is no longer known to the node") from None
                self._cancel(sender, frm, tx, nonce)
                raise TransactionDropped(f"transaction {tx_hash.hex()} waited behind a nonce gap and was cancelled")
            if now > deadline:
                raise ChainError(f"transaction {tx_hash.hex()} not mined after {self.receipt_timeout:.0f} s")
            time.sleep(pause)
            pause = min(1.0, pause * 1.5)

    def _cancel(self, sender: Sender, frm: str, stuck: dict[str, Any], nonce: int) -> None:
        """Replaces the queued transaction at `nonce` by an empty transfer to itself (fees
        doubled: a pool replaces a transaction only for a higher fee), then fills the nonces
        below it, down to the chain's count, with the same: once the gap is filled only
        no-ops run."""
        with self.nonces.lock_for(frm):
            mined = int(self.w3.eth.get_transaction_count(frm, "latest"))
            for n in range(nonce, mined - 1, -1):
                bump = 2 if n == nonce else 1
                noop = {
                    "from": frm, "to": frm, "value": 0, "gas": 21_000, "chainId": stuck["chainId"], "nonce": n,
                    "maxFeePerGas": bump * int(stuck["maxFeePerGas"]),
                    "maxPriorityFeePerGas": bump * int(stuck["maxPriorityFeePerGas"]),
                }  # fmt: skip
                self._submit(sender, noop)

    def _submit(self, sender: Sender, tx: dict[str, Any]) -> bytes:
        if isinstance(sender, LocalAccount):
            return bytes(self.w3.eth.send_raw_transaction(sender.sign_transaction(tx).raw_transaction))
        return bytes(self.w3.eth.send_transaction(tx))  # type: ignore[arg-type]

    def _late_receipt(self, tx_hash: bytes) -> Any:
        """The receipt of a transaction whose nonce the chain already counts, or None when it
        does not come within RECEIPT_GRACE_S: a node can count the nonce a moment before it
        serves the receipt (anvil under load; RPC providers whose backends lag each other),
        and that moment is no reason to call the transaction dropped."""
        deadline = time.monotonic() + RECEIPT_GRACE_S
        while True:
            with contextlib.suppress(TransactionNotFound):
                return self.w3.eth.get_transaction_receipt(tx_hash)
            if time.monotonic() >= deadline:
                return None
            time.sleep(RECEIPT_POLL_S)

    def _send(self, sender: Sender, frm: str, tx: dict[str, Any]) -> bytes:
        # Nonce, sign and send under the account's lock, so concurrent callers get
        # consecutive nonces. A refusal of the nonce (another client used it) reads the
        # count again and retries once. Any other failure is not retried: the
        # transaction may have reached the node with only the answer lost (an RPC outage),
        # and sending it again would send it twice; the caller decides from chain state.
        with self.nonces.lock_for(frm):
            for attempt in range(2):
                tx["nonce"] = self.nonces.next_nonce(frm)
                try:
                    tx_hash = self._submit(sender, tx)
                except Exception as exc:
                    data_bytes = revert_data(exc)
                    if data_bytes is not None:
                        raise self._decoder.decode(data_bytes) from exc
                    if attempt == 1 or "nonce" not in str(exc).lower():
                        raise ChainError(f"sending the transaction failed: {exc}") from exc
                    continue
                return tx_hash
        raise AssertionError("unreachable")

    def deploy(self, sender: Sender, bytecode: bytes, constructor_data: bytes = b"") -> TxResult:
        """Deploy contract creation code (with ABI-encoded constructor arguments). A creation
        may cost up to DEPLOY_GAS_CAP, above the cap of ordinary transactions: a contract
        near the 24,576-byte limit costs over 5 million gas to create, once."""
        cap, self.gas_cap = self.gas_cap, max(self.gas_cap, DEPLOY_GAS_CAP)
        try:
            return self.transact(sender, data=bytecode + constructor_data)
        finally:
            self.gas_cap = cap

    # -- logs ------------------------------------------------------------------------------

    def get_logs(
        self,
        address: str | list[str],
        from_block: int,
        to_block: int | str = "latest",
        topics: list[Any] | None = None,
        chunk: int = 10_000,
    ) -> list[Any]:
        """Raw logs of `address` in [from_block, to_block], fetched in chunks of `chunk`
        blocks (providers cap the range of one eth_getLogs)."""
        end = self.block_number() if to_block == "latest" else int(to_block)
        out: list[Any] = []
        start = from_block
        while start <= end:
            stop = min(start + chunk - 1, end)
            params: dict[str, Any] = {"address": address, "fromBlock": start, "toBlock": stop}
            if topics is not None:
                params["topics"] = topics
            out.extend(self.w3.eth.get_logs(params))
            start = stop + 1
        return out

    # -- dev chains ------------------------------------------------------------------------

    def advance_time(self, seconds: int) -> int:
        """Move chain time `seconds` past the latest block, mining a block, so that the next
        transaction runs at that time or later; returns the latest block's timestamp after
        the move. On anvil/hardhat RPC the mined block is at latest + `seconds`; on the py-evm
        tester it is one second earlier and the next block is at latest + `seconds`. For
        tests and devnets only."""
        target = self.timestamp() + seconds
        tester = getattr(self.w3.provider, "ethereum_tester", None)
        if tester is not None:
            tester.time_travel(target)
        else:
            self.w3.provider.make_request("evm_setNextBlockTimestamp", [target])
            self.w3.provider.make_request("evm_mine", [])
        return self.timestamp()

    def revert_of(self, tx_hash: bytes) -> ChainError | None:
        """Why a mined transaction reverted (replayed on the state before its block), or
        None if it succeeded."""
        receipt = self.w3.eth.get_transaction_receipt(tx_hash)  # type: ignore[arg-type]
        if receipt["status"] == 1:
            return None
        tx = self.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
        query = {"from": tx["from"], "to": tx["to"], "data": bytes(tx["input"]), "value": tx["value"], "gas": tx["gas"]}
        return self._replayed_revert(query, receipt)

    # -- internals -------------------------------------------------------------------------

    def _estimate(self, tx: dict[str, Any]) -> int:
        # Estimated on the pending block: its time is the time the transaction will run at.
        # On a chain that mines only when a transaction comes (an idle devnet) the latest
        # block can be minutes old, and a call that its deadlines allow now (a reveal once
        # the commit deadline passed, a finalize) would be refused on the latest block's
        # time, and so never sent: the chain's clock would never move, and the node would
        # miss its reveal and be slashed. A chain that knows no pending block is asked on
        # the latest one.
        query = {k: tx[k] for k in ("from", "to", "data", "value") if k in tx}
        try:
            try:
                estimate = int(self.w3.eth.estimate_gas(query, "pending"))
            except Exception as exc:
                if revert_data(exc) is not None:
                    raise
                estimate = int(self.w3.eth.estimate_gas(query))
        except Exception as exc:
            raise self._decoded(exc) from exc
        if estimate > self.gas_cap:
            raise GasCapExceeded(estimate, self.gas_cap)
        return min(estimate * GAS_MARGIN_NUM // GAS_MARGIN_DEN + 10_000, self.gas_cap)

    def _decoded(self, exc: BaseException) -> ChainError:
        data = revert_data(exc)
        if data is None:
            return ChainError(f"{type(exc).__name__}: {exc}")
        return self._decoder.decode(data)

    def _replayed_revert(self, tx: dict[str, Any], receipt: Any) -> ChainError:
        # A mined transaction keeps no revert data; replaying it as a call on the state
        # before its block recovers the reason in the common case.
        query = {k: tx[k] for k in ("from", "to", "data", "value") if k in tx}
        query["gas"] = tx["gas"]
        try:
            self.w3.eth.call(query, int(receipt["blockNumber"]) - 1)
        except Exception as exc:
            err = self._decoded(exc)
            err.receipt = receipt  # type: ignore[attr-defined]
            return err
        return TransactionReverted("transaction reverted (replay did not)", None, receipt)


def _address(sender: Sender) -> str:
    if isinstance(sender, LocalAccount):
        return sender.address
    return to_checksum_address(sender)
