"""The `vxla` command line's argument types and the option sets several commands share.
Imports nothing heavy at module level: the parser is built before any command runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from node.urls import node_url

if TYPE_CHECKING:
    from compiler.api import Fault

Commands = argparse._SubParsersAction

# `vxla verify --cache` without a directory: this machine's default compile cache.
CACHE_DEFAULT = "default"


def add_command(commands: Commands, name: str, handler: str, *, help: str, description: str, epilog: str | None = None, **defaults: object) -> argparse.ArgumentParser:
    """Adds the subcommand `name`, run by `handler`: "module:function" in node.cli, imported
    only when the command runs, so that building the parser imports no command's module. The
    subcommand's parser is `args.command_parser`, to report what it does not know with its
    own usage line."""
    parser = commands.add_parser(name, help=help, description=description, epilog=epilog)
    parser.set_defaults(handler=handler, command_parser=parser, **defaults)
    return parser


def add_json_flag(parser: argparse.ArgumentParser, help: str = "print one JSON object") -> None:
    parser.add_argument("--json", action="store_true", help=help)


def chain_id_arg(text: str) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text!r}") from None
    if not 0 <= value < 2**256:
        raise argparse.ArgumentTypeError(f"expected an integer in 0..2**256-1, got {value}")
    return value


def contract_arg(text: str) -> str:
    from attest import StatementError, normalize_contract

    try:
        return normalize_contract(text)
    except StatementError:
        raise argparse.ArgumentTypeError(f"expected 0x followed by 40 hex characters, got {text!r}") from None


def _integer_from(text: str, least: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def node_url_arg(text: str) -> str:
    """--node: a node's URL (`host:port` taken as http://host:port); exit 2 naming what is wrong."""
    try:
        return node_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_node_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup, required: bool = True) -> None:
    """--node URL, or --devnet DIR for the first node of a devnet (`vxla devnet up`)."""
    which = parser.add_mutually_exclusive_group(required=required)
    which.add_argument("--node", type=node_url_arg, metavar="URL", help="the node's URL, e.g. http://127.0.0.1:8700 (or 127.0.0.1:8700)")
    which.add_argument("--devnet", metavar="DIR", help="the first node of the devnet in DIR (vxla devnet up)")


def positive_int(text: str) -> int:
    return _integer_from(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    return _integer_from(text, 0, "a whole number, 0 or more")


def command_group(commands: Commands, name: str, *, help: str, description: str) -> Commands:
    """Adds a command that only groups subcommands (`vxla node run`, `vxla keys init`):
    one of them must be named, and it lands in `args.<name>_command`. Returns the group's
    subcommands, to add them to."""
    group = commands.add_parser(name, help=help, description=description)
    subcommands = group.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND")
    subcommands.required = True
    return subcommands


def add_program_arguments(parser: argparse.ArgumentParser, *, inputs: bool = False) -> None:
    """The program positionals: the module file (read by `read_hlo_text`) and, with
    `inputs`, its input files in parameter order."""
    parser.add_argument("module", metavar="MODULE.hlo", help="HLO text file")
    if inputs:
        parser.add_argument("inputs", metavar="IN.npy", nargs="*", help="inputs, in parameter order")


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """--target and --config, the compiler's."""
    from compiler.api import TARGET_CPUS

    names = "; ".join(f"{name} ({cpu.description})" for name, cpu in TARGET_CPUS.items())
    parser.add_argument(
        "--target",
        metavar="TARGET",
        help=f"pinned target: {names}. The triple follows (default: configs/compiler.toml). Any target compiles on any host; "
        "it runs only where the host has its features (a GPU target: an NVIDIA GPU of its compute capability and the NVIDIA driver)",
    )
    parser.add_argument("--config", metavar="TOML", help="compiler configuration file (default: configs/compiler.toml)")


def fault_arg(text: str) -> Fault:
    """`vxla run --fault`: INSTRUCTION:BIT, e.g. fusion.3:17 (names may contain ':', so split
    at the last one)."""
    from compiler.api import Fault

    name, sep, bit = text.rpartition(":")
    if not sep or not name or not bit.isdigit():
        raise argparse.ArgumentTypeError(f"expected INSTRUCTION:BIT (e.g. fusion.3:17), got {text!r}")
    return Fault(name, int(bit))


def devnet_fault_arg(text: str) -> tuple[int, str]:
    """`vxla devnet up --fault`: NODE=INSTRUCTION[:BIT]."""
    node, sep, rest = text.partition("=")
    instruction, sep2, bit = rest.partition(":")
    if not sep or not node.isdigit() or not instruction or (sep2 and not bit.isdigit()):
        raise argparse.ArgumentTypeError(f"expected NODE=INSTRUCTION[:BIT], got {text!r}")
    return int(node), f"{instruction}:{int(bit or 0)}"
