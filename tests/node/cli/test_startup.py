"""What a command loads before it does its work, so that the startup budget holds by
construction rather than by a timing on a busy machine (`make bench` prints the times):
`vxla --version` and `--help` load none of the compiler, numpy, the crypto, the chain client
or the HTTP stack; a cached `vxla run` loads the compiler and its runtime, but not the chain
client, the HTTP stack, JAX or the graph drawing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "fixtures" / "argmax"

# What `vxla --version` and `--help` must not load: everything a command's work needs.
NOT_AT_STARTUP = (
    "numpy", "ml_dtypes", "gmpy2", "llvmlite", "cryptography", "web3", "eth_account", "fastapi",
    "uvicorn", "httpx", "rich", "graphviz", "jax", "attest", "compiler.hlo", "compiler.passes",
    "compiler.codegen", "compiler.reference", "compiler.runtime.executable", "node.cli.common",
    "node.cli.programs", "node.sdk", "node.daemon", "node.chain", "node.tracing",
)  # fmt: skip
# What a cached `vxla run` must not load: the node's other roles and the optional extras.
NOT_FOR_A_RUN = ("web3", "eth_account", "fastapi", "uvicorn", "httpx", "graphviz", "jax", "node.sdk", "node.daemon", "node.chain", "node.graphs")

_LIST_MODULES = "import sys\nfrom node.cli import main\nstatus = main(sys.argv[1:])\nprint('\\0' + str(status))\nprint(*sorted(sys.modules))"


def _loaded(arguments: list[str], env: dict[str, str] | None = None) -> tuple[int, set[str]]:
    """The exit status of `vxla ARGUMENTS` in a fresh interpreter and every module it loaded."""
    done = subprocess.run(
        [sys.executable, "-c", _LIST_MODULES, *arguments], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env, check=False
    )
    assert "\0" in done.stdout, done.stderr
    status, modules = done.stdout.split("\0", 1)[1].split("\n", 1)
    return int(status), set(modules.split())


def _under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.mark.parametrize("arguments", [["--version"], ["--help"], ["run", "--help"], ["verify", "--help"]])
def test_version_and_help_load_none_of_the_work(arguments: list[str]) -> None:
    status, modules = _loaded(arguments)
    assert status == 0
    assert "node.cli.parser" in modules  # the whole command tree was built
    assert _under(modules, NOT_AT_STARTUP) == []


def test_a_cached_run_loads_no_other_role_of_the_node(tmp_path: Path) -> None:
    env = {**os.environ, "VXLA_CACHE_DIR": str(tmp_path / "cache")}
    arguments = ["run", str(FIXTURE / "module.hlo"), str(FIXTURE / "in0.npy"), str(FIXTURE / "in1.npy")]
    assert _loaded(arguments, env)[0] == 0  # compiles, and fills the cache
    assert any((tmp_path / "cache").iterdir())
    status, modules = _loaded(arguments, env)
    assert status == 0
    assert "compiler.runtime.executable" in modules
    assert _under(modules, NOT_FOR_A_RUN) == []
