import os
import sys
from pathlib import Path

# Tests import helpers as `tests.<module>`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# The AArch64 emulation tests need the emulated Python of `make arm64`; `make test-arm64`
# prepares it and runs them (CI runs both make test and make test-arm64).
collect_ignore = [] if os.environ.get("VXLA_ARM64_TESTS") == "1" else ["arm64"]
# The way in from JAX needs JAX and flax, never dependencies of vxla or its tests: `make
# test-jax` runs these in a venv of their own (CI runs it too).
if os.environ.get("VXLA_JAX_TESTS") != "1":
    collect_ignore.append("jax")


def pytest_terminal_summary(terminalreporter) -> None:
    """Says which targets this host executed and which were only compiled and checked."""
    from tests.targets import COMPILE_ONLY, HOST, RUNNABLE

    terminalreporter.write_line(
        f"targets executed on this host ({HOST.arch}, {HOST.cpu_model}): {', '.join(RUNNABLE) or 'none'}; "
        f"compiled and checked without running: {', '.join(COMPILE_ONLY) or 'none'}"
    )
