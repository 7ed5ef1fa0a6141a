"""The `vxla` command line: one module per command group (programs, traces, daemon, chain)
and their shared parts (common).

Exit status: 0 success; 1 verification failed or outputs differ; 2 bad input or usage, with a
message on stderr that names the problem (for HLO: line and column).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from node.cli import chain, daemon, jobs, programs, traces
from node.cli.common import EXIT_BAD_INPUT, UsageError
from node.tracing.statement import vxla_version


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vxla",
        description="Verifiable, bit-reproducible execution of XLA HLO programs.",
        epilog="Exit status: 0 success, 1 verification failed or outputs differ, 2 bad input.",
    )
    parser.add_argument("--version", action="version", version=f"vxla {vxla_version()}", help="print vxla's version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    for group in (programs, traces, daemon, chain, jobs):
        group.add_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return args.handler(args)
    except UsageError as exc:
        print(f"vxla {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130

