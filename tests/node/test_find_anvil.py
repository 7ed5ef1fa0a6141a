"""Where `vxla devnet up` finds anvil: --anvil, then $VXLA_ANVIL, then anvil on PATH, then a
checkout's contracts/node_modules copy; with none of them, exit 2 naming the ways to give one."""

from __future__ import annotations

from pathlib import Path

import pytest

import node.devnet
from node.cli import main
from node.devnet import ANVIL_ENV, DevnetError, find_anvil


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def no_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """As if installed: the package's parent holds no contracts/node_modules."""
    root = tmp_path / "site-packages"
    root.mkdir()
    monkeypatch.setattr(node.devnet, "ROOT", root)
    return root


def test_the_option_comes_first_then_the_variable_then_path_then_the_checkout(tmp_path: Path, no_checkout: Path) -> None:
    option, variable = executable(tmp_path / "a" / "anvil"), executable(tmp_path / "b" / "anvil")
    on_path = executable(tmp_path / "bin" / "anvil")
    checkout = executable(no_checkout / node.devnet.CHECKOUT_ANVIL)
    environ = {ANVIL_ENV: str(variable), "PATH": str(on_path.parent)}
    assert find_anvil(option, environ) == option
    assert find_anvil(None, environ) == variable
    assert find_anvil(None, {"PATH": str(on_path.parent)}) == on_path
    assert find_anvil(None, {"PATH": str(tmp_path / "empty")}) == checkout


def test_a_relative_path_is_made_absolute(tmp_path: Path, no_checkout: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # anvil runs from the package's parent directory, not from where the path was given.
    executable(tmp_path / "tools" / "anvil")
    monkeypatch.chdir(tmp_path)
    assert find_anvil("tools/anvil", {}) == tmp_path / "tools" / "anvil"


@pytest.mark.parametrize("source", ["option", "variable"])
def test_a_named_anvil_that_is_not_there_is_an_error_not_a_fall_through(tmp_path: Path, no_checkout: Path, source: str) -> None:
    on_path = executable(tmp_path / "bin" / "anvil")
    missing = str(tmp_path / "no-such-anvil")
    environ = {"PATH": str(on_path.parent), **({ANVIL_ENV: missing} if source == "variable" else {})}
    with pytest.raises(DevnetError, match="not an executable file"):
        find_anvil(missing if source == "option" else None, environ)


def test_without_any_anvil_the_cli_exits_2_naming_the_three_ways(
    tmp_path: Path, no_checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(ANVIL_ENV, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert main(["devnet", "up", "--nodes", "1", "--dir", str(tmp_path / "devnet")]) == 2
    error = capsys.readouterr().err
    assert "anvil not found" in error and "--anvil" in error and ANVIL_ENV in error and "PATH" in error
    assert "make contracts" in error and "Traceback" not in error
    assert not (tmp_path / "devnet").exists()  # refused before anything was written


def test_the_cli_passes_its_option_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-anvil"
    assert main(["devnet", "up", "--nodes", "1", "--anvil", str(missing), "--dir", str(tmp_path / "devnet")]) == 2
    assert f"--anvil {missing}: not an executable file" in capsys.readouterr().err


def fake_checkout(root: Path, npm_script: str, tmp_path: Path) -> dict[str, str]:
    """A checkout's contracts/ with its lock file and no node_modules, and an `npm` on PATH
    that runs `npm_script` (it is given npm's arguments); returns the environment."""
    (root / "contracts").mkdir(parents=True)
    (root / "contracts" / "package-lock.json").write_text("{}")
    npm = tmp_path / "npm-bin" / "npm"
    npm.parent.mkdir()
    npm.write_text(f"#!/bin/sh\n{npm_script}\n")
    npm.chmod(0o755)
    return {"PATH": f"{npm.parent}:/usr/bin:/bin"}


def test_a_fresh_clone_installs_the_pinned_anvil_with_npm_ci_once(tmp_path: Path, no_checkout: Path) -> None:
    # npm ci, run in contracts/, puts the lock file's anvil where the checkout keeps it.
    anvil = node.devnet.CHECKOUT_ANVIL
    environ = fake_checkout(no_checkout, f'test "$1" = ci && mkdir -p {anvil.parent.relative_to("contracts")} && printf "#!/bin/sh\\n" > {anvil.relative_to("contracts")} && chmod +x {anvil.relative_to("contracts")}', tmp_path)
    steps: list[str] = []
    node.devnet.install_checkout_anvil(steps.append, environ)
    assert steps == ["installing the pinned anvil (npm ci in contracts/, once)"]
    assert find_anvil(None, {"PATH": str(tmp_path / "empty")}) == no_checkout / anvil
    assert (no_checkout / "contracts" / "node_modules" / ".installed").is_file()  # make's stamp
    node.devnet.install_checkout_anvil(steps.append, environ)
    assert len(steps) == 1  # there now: not installed again


def test_a_failed_install_or_no_npm_is_an_error_naming_it(tmp_path: Path, no_checkout: Path) -> None:
    environ = fake_checkout(no_checkout, "echo 'npm ERR! network unreachable' >&2; exit 1", tmp_path)
    with pytest.raises(DevnetError, match=r"npm ci in .* failed \(exit 1\)[^$]*network unreachable"):
        node.devnet.install_checkout_anvil(lambda step: None, environ)
    with pytest.raises(DevnetError, match="install Node.js with npm, or pass --anvil PATH"):
        node.devnet.install_checkout_anvil(lambda step: None, {"PATH": str(tmp_path / "empty")})
