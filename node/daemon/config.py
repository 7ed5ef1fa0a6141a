"""The node's configuration: a TOML file loaded into frozen dataclasses and checked at start,
so a typo stops the node with a message naming the key instead of being silently ignored.
Secrets (the key passphrase) come from the environment only.

The defaults a new operator runs are a file of this package, `node.toml` (configs/node.toml
in a checkout links to it), so an installed node has them too (`load_defaults`).
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from compiler.api import WIDEST, ConfigError, target_cpu

PASSPHRASE_ENV = "VXLA_KEY_PASSPHRASE"
CHAIN_KEY_ENV = "VXLA_CHAIN_PRIVATE_KEY"
_ADDRESS = re.compile(r"^0x[0-9a-fA-F]{40}$")
# The shipped defaults, package data of node.daemon (configs/node.toml links to it).
DEFAULTS_NAME = "node.toml"


@dataclass(frozen=True)
class Limits:
    """What one job may ask of the node, checked before anything is stored or compiled, and
    what the node spends on drawing graphs for its pages."""

    max_module_bytes: int = 16 * 1024 * 1024
    max_tensor_bytes: int = 256 * 1024 * 1024
    max_flops: int = 10_000_000_000_000  # estimated operations (compiler.hlo.cost)
    max_while_iterations: int = 1_000_000
    job_wall_seconds: float = 600.0
    # The memory one job may use: its plan's arena, inputs and outputs (checked after
    # compiling, before running), and the cap on its execution process's address space.
    max_job_memory_bytes: int = 8 * 1024 * 1024 * 1024
    # The graphs of the node's pages (node/daemon/drawing.py), each drawn in a confined child
    # process: the largest module drawn, one drawing's wall time (its CPU time too) and memory
    # (address space beyond the process's own once the compiler is loaded), the drawings at
    # once, and how many more may wait for a turn (past that: 503 with Retry-After).
    graph_module_bytes: int = 1024 * 1024
    graph_wall_seconds: float = 30.0
    graph_memory_bytes: int = 1024 * 1024 * 1024
    graph_drawings: int = 1
    graph_queue: int = 8


@dataclass(frozen=True)
class ChainConfig:
    """Chain settings: with `rpc_url` set, the daemon runs a chain watcher (node.chain_executor).

    The node's chain account is `account` (an address the RPC node unlocks: anvil, devnets)
    or, for a real chain, the private key in VXLA_CHAIN_PRIVATE_KEY (environment only)."""

    rpc_url: str = ""
    job_market: str = ""
    node_registry: str = ""
    confirmations: int = 2
    account: str = ""
    start_block: int = 0  # where the watcher starts reading logs (the deployment block)
    poll_interval_s: float = 2.0
    verify_fraction: float = 1.0  # share of other nodes' revealed jobs re-executed (0: none)
    # Run a job before claiming it (the watcher's `run_before_claim`): no stake on a job
    # whose run fails, at the price of work lost when the slots fill meanwhile.
    run_before_claim: bool = False
    # The dispute game (docs/disputes.md): challenge revealed slots whose execution differs
    # from one this node holds (its own or its verifier's), posting the game's bond; and
    # defend its slots, answer its challenges and vote when drawn to a committee (a node
    # that does not answer loses its disputes).
    challenge: bool = True
    play_disputes: bool = True
    # The smallest reward (wei) of a job this node claims a slot of; it still verifies and
    # disputes jobs it does not claim.
    min_reward_wei: int = 1
    # Fetch from peers at private, loopback and link-local addresses too (devnets only).
    allow_private_peers: bool = False
    private_key: str = field(default="", repr=False)  # from the environment only


@dataclass(frozen=True)
class AuthConfig:
    """Who may post jobs, upload blobs and have graphs drawn (node.daemon.auth): with
    `required`, only holders of a token from `vxla tokens add`; reads stay open either way."""

    required: bool = False


@dataclass(frozen=True)
class NodeConfig:
    """Everything `vxla node run` needs."""

    host: str = "127.0.0.1"
    port: int = 8700
    data_dir: Path = Path("~/.vxla/node")
    key_file: Path = Path("~/.vxla/keys/node.key")
    threads: int = 0  # 0: the machine's cores, shared among the workers
    workers: int = 1
    # The compilation target of this node's jobs: empty for the compiler configuration's
    # (the widest pinned target this host runs), or a pinned CPU name (compiler/pinned.toml).
    target: str = ""
    limits: Limits = field(default_factory=Limits)
    chain: ChainConfig = field(default_factory=ChainConfig)
    auth: AuthConfig = field(default_factory=AuthConfig)
    # Test and demo only: flip bit `fault_bit` of instruction `fault_instruction`'s output in
    # every job (a deliberately faulty node, to show the quorum outvoting and slashing it).
    fault_instruction: str = ""
    fault_bit: int = 0
    # From the environment only (never the file), so it cannot end up in a repository.
    key_passphrase: bytes | None = field(default=None, repr=False)


def _check_type(key: str, value: Any, kind: type) -> Any:
    # bool is an int in Python; a `true` where a number belongs is still a mistake.
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, bool) is not (kind is bool) or not isinstance(value, kind):
        raise ConfigError(f"{key}: expected {kind.__name__}, got {type(value).__name__} {value!r}")
    return value


def _section(data: dict[str, Any], name: str, cls: type, path_fields: tuple[str, ...] = ()) -> dict[str, Any]:
    """The keyword arguments for `cls` from table `name`, refusing unknown keys."""
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{name}: expected a table")
    hidden = ("limits", "chain", "auth", "key_passphrase", "private_key")
    known = {f.name: f for f in dataclasses.fields(cls) if f.name not in hidden}
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in known:
            raise ConfigError(f"{name}.{key}: unknown key (known: {', '.join(sorted(known))})")
        if key in path_fields:
            values[key] = Path(_check_type(f"{name}.{key}", value, str)).expanduser()
        else:
            kind = {"int": int, "float": float, "str": str, "bool": bool}[str(known[key].type)]
            values[key] = _check_type(f"{name}.{key}", value, kind)
    return values


def _positive(key: str, value: float) -> None:
    if value <= 0:
        raise ConfigError(f"{key}: must be positive, got {value}")


def validate(config: NodeConfig) -> NodeConfig:
    """Checks ranges and formats; returns `config` or raises ConfigError naming the key."""
    if not config.host:
        raise ConfigError("node.host: must not be empty")
    if not 0 <= config.port <= 65535:
        raise ConfigError(f"node.port: must be in 0..65535, got {config.port}")
    if config.threads < 0:
        raise ConfigError(f"node.threads: must be 0 (the machine's cores) or positive, got {config.threads}")
    _positive("node.workers", config.workers)
    if config.target and config.target != WIDEST:
        try:
            target_cpu(config.target)
        except ConfigError as exc:
            raise ConfigError(f"node.target: {exc}") from None
    for f in dataclasses.fields(Limits):
        _positive(f"limits.{f.name}", getattr(config.limits, f.name))
    chain = config.chain
    if chain.rpc_url and not chain.rpc_url.startswith(("http://", "https://", "ws://", "wss://")):
        raise ConfigError(f"chain.rpc_url: expected an http(s) or ws(s) URL, got {chain.rpc_url!r}")
    for name in ("job_market", "node_registry", "account"):
        value = getattr(chain, name)
        if value and not _ADDRESS.match(value):
            raise ConfigError(f"chain.{name}: expected 0x followed by 40 hex characters, got {value!r}")
    if chain.confirmations < 0:
        raise ConfigError(f"chain.confirmations: must not be negative, got {chain.confirmations}")
    if chain.start_block < 0:
        raise ConfigError(f"chain.start_block: must not be negative, got {chain.start_block}")
    _positive("chain.poll_interval_s", chain.poll_interval_s)
    if chain.min_reward_wei < 0:
        raise ConfigError(f"chain.min_reward_wei: must not be negative, got {chain.min_reward_wei}")
    if not 0.0 <= chain.verify_fraction <= 1.0:
        raise ConfigError(f"chain.verify_fraction: must be in [0, 1], got {chain.verify_fraction}")
    if chain.rpc_url:
        for name in ("job_market", "node_registry"):
            if not getattr(chain, name):
                raise ConfigError(f"chain.{name}: required when chain.rpc_url is set")
        if not chain.account and not chain.private_key:
            raise ConfigError(f"chain.account: required when chain.rpc_url is set (or set {CHAIN_KEY_ENV})")
    if config.fault_bit < 0:
        raise ConfigError(f"node.fault_bit: must not be negative, got {config.fault_bit}")
    return config


def parse_config(text: str, environ: dict[str, str] | None = None) -> NodeConfig:
    """The validated NodeConfig from TOML `text`, with environment overrides
    (VXLA_KEY_PASSPHRASE) taken from `environ` (default: os.environ)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"not valid TOML: {error}") from None
    unknown = sorted(set(data) - {"node", "limits", "chain", "auth"})
    if unknown:
        raise ConfigError(f"{unknown[0]}: unknown section (known: auth, chain, limits, node)")
    environ = os.environ if environ is None else environ
    passphrase = environ.get(PASSPHRASE_ENV)
    config = NodeConfig(
        **_section(data, "node", NodeConfig, ("data_dir", "key_file")),
        limits=Limits(**_section(data, "limits", Limits)),
        chain=ChainConfig(
            **_section(data, "chain", ChainConfig), private_key=environ.get(CHAIN_KEY_ENV, "")
        ),
        auth=AuthConfig(**_section(data, "auth", AuthConfig)),
        key_passphrase=passphrase.encode() if passphrase else None,
    )
    return validate(
        dataclasses.replace(
            config, data_dir=config.data_dir.expanduser(), key_file=config.key_file.expanduser()
        )
    )


def load_config(path: str | Path, environ: dict[str, str] | None = None) -> NodeConfig:
    """Reads and validates the TOML file at `path`; ConfigError names the file or the key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    return parse_config(text, environ)


def defaults_text() -> str:
    """The text of the shipped defaults file (package data, so found installed too)."""
    return resources.files("node.daemon").joinpath(DEFAULTS_NAME).read_text(encoding="utf-8")


def load_defaults(environ: dict[str, str] | None = None) -> NodeConfig:
    """The shipped defaults, validated, with the environment's overrides as `parse_config`."""
    return parse_config(defaults_text(), environ)
