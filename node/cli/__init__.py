"""The `vxla` command line: the command tree (parser, with the argument types in arguments),
one module of handlers per command group (programs, traces, daemon, chain, jobs) and their
shared parts (common).

Exit status: 0 success; 1 verification failed or outputs differ; 2 bad input or usage, with a
message on stderr that names the problem (for HLO: line and column).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from node.cli.parser import build_parser
from node.cli.usage import EXIT_BAD_INPUT, UsageError


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # reported by the subcommand, with its usage, not the top level's
            args.command_parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return _handler(args.handler)(args)
    except UsageError as exc:
        print(f"vxla {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _handler(name: str) -> Callable[[argparse.Namespace], int]:
    """The function "module:function" names in node.cli (build_parser's handlers)."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(f"node.cli.{module}"), function)
