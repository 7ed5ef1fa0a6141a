"""The node's shipped defaults have one owner, node/daemon/node.toml (package data, so an
installed node finds it); configs/node.toml is that file, and `vxla node run` without
--config and without ./configs/node.toml runs them."""

from __future__ import annotations

from pathlib import Path

import pytest

from node.cli import daemon as daemon_cli
from node.cli.usage import UsageError
from node.daemon.config import DEFAULTS_NAME, defaults_text, load_defaults, parse_config

REPO = Path(__file__).resolve().parents[2]


def test_configs_node_toml_is_the_packaged_file() -> None:
    packaged = REPO / "node" / "daemon" / DEFAULTS_NAME
    assert (REPO / "configs" / "node.toml").samefile(packaged)
    assert defaults_text() == packaged.read_text(encoding="utf-8")


def test_the_shipped_defaults_are_the_codes_defaults() -> None:
    assert load_defaults(environ={}) == parse_config("", environ={})


def test_node_run_without_a_config_takes_the_local_file_else_the_shipped_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VXLA_KEY_PASSPHRASE", raising=False)
    monkeypatch.delenv("VXLA_CHAIN_PRIVATE_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    assert daemon_cli._node_config(None) == load_defaults()
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "node.toml").write_text("[node]\nport = 9123\n")
    assert daemon_cli._node_config(None).port == 9123
    (tmp_path / "other.toml").write_text("[node]\nport = 9124\n")
    assert daemon_cli._node_config("other.toml").port == 9124
    (tmp_path / "configs" / "node.toml").write_text("[node]\nprot = 1\n")
    with pytest.raises(UsageError, match="configs/node.toml: node.prot: unknown key"):
        daemon_cli._node_config(None)
