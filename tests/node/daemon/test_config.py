"""node.daemon.config: the shipped defaults load, and every mistake names its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.daemon.config import (
    ChainConfig,
    ConfigError,
    Limits,
    NodeConfig,
    load_config,
    parse_config,
)

REPO = Path(__file__).resolve().parents[3]


def test_shipped_defaults_load() -> None:
    config = load_config(REPO / "configs" / "node.toml", environ={})
    assert (config.host, config.port) == ("127.0.0.1", 8700)
    assert config.workers == 1 and config.limits.max_while_iterations == 1_000_000
    assert config.threads == 0  # the machine's cores
    assert config.target == ""  # the compiler configuration's: the widest this host runs
    assert config.key_passphrase is None
    assert not str(config.data_dir).startswith("~")
    # The shipped file states every default of the code, no other value.
    assert config.limits == Limits() and config.chain == ChainConfig()
    assert not config.chain.run_before_claim
    assert parse_config("[chain]\nrun_before_claim = true\n", environ={}).chain.run_before_claim


def test_environment_supplies_the_passphrase() -> None:
    config = parse_config("", environ={"VXLA_KEY_PASSPHRASE": "hunter2"})
    assert config.key_passphrase == b"hunter2"
    assert "hunter2" not in repr(config)
    assert parse_config("", environ={}) == NodeConfig(
        data_dir=Path("~/.vxla/node").expanduser(), key_file=Path("~/.vxla/keys/node.key").expanduser()
    )


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[node]\nprot = 1\n", "node.prot: unknown key"),
        ("[nodes]\n", "nodes: unknown section"),
        ("[node]\nport = 70000\n", "node.port"),
        ("[node]\nport = \"80\"\n", "node.port: expected int"),
        ("[node]\nworkers = 0\n", "node.workers"),
        ("[node]\nthreads = true\n", "node.threads: expected int"),
        ("[node]\nthreads = -2\n", "node.threads: must be 0"),
        ("[node]\ntarget = \"pentium\"\n", "node.target: unknown CPU 'pentium'"),
        ("[node]\ntarget = 4\n", "node.target: expected str"),
        ("[limits]\nmax_module_bytes = -1\n", "limits.max_module_bytes"),
        ("[limits]\njob_wall_seconds = 0\n", "limits.job_wall_seconds"),
        ("[chain]\nrpc_url = \"ftp://x\"\n", "chain.rpc_url"),
        ("[chain]\njob_market = \"0x12\"\n", "chain.job_market"),
        ("[chain]\nconfirmations = -1\n", "chain.confirmations"),
        ("[node\n", "not valid TOML"),
    ],
)
def test_errors_name_the_key(text: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        parse_config(text, environ={})


def test_float_limit_accepts_an_integer() -> None:
    assert parse_config("[limits]\njob_wall_seconds = 5\n", environ={}).limits.job_wall_seconds == 5.0


def test_unreadable_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml")
