"""Exceptions for chain access, and decoding of revert data into named custom errors."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any

from eth_abi import decode as abi_decode
from eth_utils import keccak, to_checksum_address

from node.errors import NodeError

# Solidity's built-in revert payloads: Error(string) and Panic(uint256).
ERROR_STRING_SELECTOR = bytes.fromhex("08c379a0")
PANIC_SELECTOR = bytes.fromhex("4e487b71")


class ChainError(NodeError):
    """Base class of every failure of chain access."""


class ContractRevert(ChainError):
    """A call or transaction reverted with a custom error (or Error/Panic) of the ABI.

    `name` is the error's name (e.g. "StakeTooLow"), `args` its arguments by parameter name
    in declaration order, `data` the raw revert data.
    """

    def __init__(self, name: str, args: dict[str, Any], data: bytes) -> None:
        self.name = name
        self.args_by_name = args
        self.data = data
        rendered = ", ".join(f"{k}={_render(v)}" for k, v in args.items())
        super().__init__(f"{name}({rendered})")

    @property
    def values(self) -> tuple[Any, ...]:
        """The error's arguments, in order."""
        return tuple(self.args_by_name.values())


class TransactionReverted(ChainError):
    """A transaction reverted and its revert data could not be recovered or decoded."""

    def __init__(self, message: str, data: bytes | None = None, receipt: Any = None) -> None:
        super().__init__(message)
        self.data = data
        self.receipt = receipt


class TransactionDropped(ChainError):
    """A sent transaction will not be mined: the chain lost it (a reorg dropped it, or it
    left the pool), or it waited behind a nonce gap and was cancelled. Its effect is not on
    chain; the caller decides again from chain state."""


class DeploymentMismatch(ChainError):
    """The contracts a node is pointed at are not a deployment this vxla can work with (one
    from before the dispute game, or not vxla's)."""


class GasCapExceeded(ChainError):
    """The gas estimate of a transaction is above the client's cap; nothing was sent."""

    def __init__(self, estimate: int, cap: int) -> None:
        super().__init__(f"gas estimate {estimate} exceeds the cap {cap}")
        self.estimate = estimate
        self.cap = cap


def _render(value: Any) -> str:
    if isinstance(value, bytes):
        return "0x" + value.hex()
    return repr(value)


@dataclass(frozen=True)
class _ErrorAbi:
    name: str
    names: tuple[str, ...]
    types: tuple[str, ...]


def _abi_type(param: dict[str, Any]) -> str:
    # Tuples (structs) are spelled out as (t1,t2,...) for both the selector and eth_abi.
    if param["type"].startswith("tuple"):
        inner = ",".join(_abi_type(c) for c in param["components"])
        return f"({inner}){param['type'][len('tuple') :]}"
    return param["type"]


class ErrorDecoder:
    """Maps 4-byte selectors to the custom errors of a set of ABIs."""

    def __init__(self, *abis: list[dict[str, Any]]) -> None:
        self._errors: dict[bytes, _ErrorAbi] = {}
        for abi in abis:
            for item in abi:
                if item.get("type") != "error":
                    continue
                types = tuple(_abi_type(p) for p in item["inputs"])
                selector = keccak(text=f"{item['name']}({','.join(types)})")[:4]
                names = tuple(p["name"] or f"arg{i}" for i, p in enumerate(item["inputs"]))
                self._errors[selector] = _ErrorAbi(item["name"], names, types)

    def decode(self, data: bytes) -> ChainError:
        """The exception for revert `data`: a ContractRevert when the selector is known."""
        selector, body = data[:4], data[4:]
        try:
            if selector == ERROR_STRING_SELECTOR:
                (message,) = abi_decode(["string"], body)
                return ContractRevert("Error", {"message": message}, data)
            if selector == PANIC_SELECTOR:
                (code,) = abi_decode(["uint256"], body)
                return ContractRevert("Panic", {"code": code}, data)
            spec = self._errors.get(selector)
            if spec is not None:
                values = [
                    to_checksum_address(v) if t == "address" else v
                    for t, v in zip(spec.types, abi_decode(list(spec.types), body), strict=True)
                ]
                return ContractRevert(spec.name, dict(zip(spec.names, values, strict=True)), data)
        except Exception as exc:  # malformed payload: report it raw rather than guess
            return TransactionReverted(f"undecodable revert data 0x{data.hex()}: {exc}", data)
        if not data:
            return TransactionReverted("reverted without data", data)
        return TransactionReverted(f"unknown revert selector 0x{selector.hex()}", data)


def revert_data(exc: BaseException) -> bytes | None:
    """Revert data carried by an exception of web3 or eth-tester, or None if there is none.

    web3 puts it in `.data` (hex) for JSON-RPC nodes such as anvil; eth-tester's
    TransactionFailed carries only a message `execution reverted: b'...'`, a bytes literal.
    """
    data = getattr(exc, "data", None)
    if isinstance(data, bytes):
        return data
    if isinstance(data, str) and data.startswith("0x"):
        try:
            return bytes.fromhex(data[2:])
        except ValueError:
            pass
    if isinstance(data, dict) and isinstance(data.get("data"), str):
        return revert_data(_WithData(data["data"]))
    for arg in getattr(exc, "args", ()):
        if isinstance(arg, bytes):
            return arg
        if isinstance(arg, str):
            marker = "execution reverted: "
            if arg.startswith(marker):
                rest = arg[len(marker) :]
                if rest.startswith(("b'", 'b"')):
                    try:
                        value = ast.literal_eval(rest)
                    except (ValueError, SyntaxError):
                        return None
                    if isinstance(value, bytes):
                        return value
                if rest.startswith("0x"):
                    try:
                        return bytes.fromhex(rest[2:])
                    except ValueError:
                        return None
            if arg == "execution reverted":
                return b""
        if isinstance(arg, dict):
            nested = revert_data(_WithData(arg.get("data")))
            if nested is not None:
                return nested
    return None


@dataclass
class _WithData:
    data: Any
