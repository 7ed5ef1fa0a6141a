"""How long `vxla` takes to start: `--version`, `--help` and a `vxla run` of a small module
whose compiled form is cached, each as a whole process, end to end, several times (minimum,
median, maximum). The budget (issue: instant commands) is 0.3 s for the first two and 1 s for
the cached run; tests/node/cli/test_startup.py holds what each imports, this prints the times.

    .venv/bin/python bench/startup.py [--runs 7] [--vxla .venv/bin/vxla]

It asserts nothing about times (tests never time anything).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE = REPO_ROOT / "tests" / "fixtures" / "argmax"
BUDGET_S = {"--version": 0.3, "--help": 0.3, "run (cached)": 1.0}


def _seconds(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=REPO_ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command (default 7)")
    default = REPO_ROOT / ".venv" / "bin" / "vxla"
    parser.add_argument("--vxla", default=str(default) if default.exists() else None, help="the vxla console script (default: .venv/bin/vxla; else python -m node.cli)")
    args = parser.parse_args()
    vxla = [args.vxla] if args.vxla else [sys.executable, "-m", "node.cli"]
    run = ["run", str(FIXTURE / "module.hlo"), str(FIXTURE / "in0.npy"), str(FIXTURE / "in1.npy")]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "VXLA_CACHE_DIR": cache}
        _seconds([*vxla, *run], env)  # compiles once, into the empty cache
        commands = {"--version": ["--version"], "--help": ["--help"], "run (cached)": run}
        print(f"{'command':<14} {'min':>7} {'median':>7} {'max':>7}  budget   ({args.runs} runs each, {' '.join(vxla)})")
        for name, arguments in commands.items():
            times = [_seconds([*vxla, *arguments], env) for _ in range(args.runs)]
            median = statistics.median(times)
            verdict = "within" if median <= BUDGET_S[name] else "OVER"
            print(f"{name:<14} {min(times):7.3f} {median:7.3f} {max(times):7.3f}  {BUDGET_S[name]:.1f} s {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
