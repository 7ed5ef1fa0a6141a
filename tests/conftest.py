import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

# Tests import helpers as `tests.<module>`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The node package first, whatever test module is collected first: importing it undoes the
# recursion limit py_ecc raises (node/__init__.py), which it can only do when it comes before
# web3 (a test module that imports web3 first would leave deep JSON parseable in its worker).
import node  # noqa: E402, F401

# The AArch64 emulation tests need the emulated Python of `make arm64`; `make test-arm64`
# prepares it and runs them (CI runs both make test and make test-arm64).
collect_ignore = [] if os.environ.get("VXLA_ARM64_TESTS") == "1" else ["arm64"]
# The way in from JAX needs JAX and flax, never dependencies of vxla or its tests: `make
# test-jax` runs these in a venv of their own (CI runs it too).
if os.environ.get("VXLA_JAX_TESTS") != "1":
    collect_ignore.append("jax")
# An emulated session of `make test-arm64` has LLVM emit its objects natively (the bytes are
# the same; tests/arm64/native_llvm.py says why and where that is shown).
if os.environ.get("VXLA_NATIVE_LLVM"):
    from tests.arm64.native_llvm import install_client

    install_client()


_OWNED_CACHE = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    """Makes the session's compile cache (harness.targets.session_cache) unless this process
    is a worker of a session that has one."""
    from harness.targets import SESSION_CACHE_VARIABLE

    if os.environ.get(SESSION_CACHE_VARIABLE):
        return
    directory = tempfile.mkdtemp(prefix="vxla-test-cache-")
    os.environ[SESSION_CACHE_VARIABLE] = directory
    config.stash[_OWNED_CACHE] = directory


def pytest_unconfigure(config: pytest.Config) -> None:
    from harness.targets import SESSION_CACHE_VARIABLE

    directory = config.stash.get(_OWNED_CACHE, None)
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
        os.environ.pop(SESSION_CACHE_VARIABLE, None)


def pytest_terminal_summary(terminalreporter) -> None:
    """Says which targets this host executed and which were only compiled and checked."""
    from harness.sampling import every
    from harness.targets import COMPILE_ONLY, HOST, RUNNABLE

    terminalreporter.write_line(
        f"targets executed on this host ({HOST.arch}, {HOST.cpu_model}): {', '.join(RUNNABLE) or 'none'}; "
        f"compiled and checked without running: {', '.join(COMPILE_ONLY) or 'none'}; "
        + ("every case of every sweep" if every() else "sweeps over fixtures and targets sampled (make test-every runs them all)")
    )
