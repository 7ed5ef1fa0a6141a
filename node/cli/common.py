"""What every command shares: exit statuses, the usage error, reading modules, the compiler
configuration and target options, signing keys, chain identifiers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import (
    KeyFileError,
    load_private_key,
)
from compiler.api import (
    CompilerConfig,
    ConfigError,
    Executable,
    HloError,
    Program,
    TargetNotRunnable,
    check_runnable,
    compile_program,
    load_config,
    load_program,
    pipeline_named,
    validate_target,
)
from core.dtypes import from_numpy
from node.cli.profiles import Profile
from node.cli.usage import UsageError
from node.jax_programs import (
    JAX_EXTRA,
    JaxNotInstalled,
    ProgramFormatError,
    hlo_text_of,
    is_jax_program,
)
from node.tensors import is_npy
from node.tracing.statement import tensor_records


def read_user_file(path: str) -> bytes:
    """The bytes of a file the user named; a usage error naming it when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None


def read_hlo_text(path: str) -> bytes:
    """The HLO text of a program file: HLO text as it is, StableHLO text or a jax.export
    artifact converted through JAX (the optional extra; without it, a usage error naming
    it). The HLO text is what is hashed and run."""
    data = read_user_file(path)
    if is_npy(data):
        raise UsageError(f"{path}: an .npy array, not a program; give the module first, then its inputs")
    if not is_jax_program(data):
        return data
    try:
        return hlo_text_of(data).encode("utf-8")
    except JaxNotInstalled:
        raise UsageError(f"{path}: not HLO text; reading StableHLO or a jax.export artifact needs JAX: {JAX_EXTRA}") from None
    except ProgramFormatError as exc:
        raise UsageError(f"{path}: {exc}") from None


def read_program(path: str) -> Program:
    """The verified program of an HLO (or, with the jax extra, StableHLO) file."""
    data = read_hlo_text(path)
    try:
        return load_program(data)
    except HloError as exc:
        raise UsageError(f"{path}: {exc}") from None


def shape_text(array: np.ndarray) -> str:
    return f"{from_numpy(array.dtype).name}[{','.join(str(d) for d in array.shape)}]"


def output_records(outputs: Sequence[np.ndarray]) -> list[dict]:
    """The outputs as a statement records them (name, HLO element type, shape, digest)."""
    return [record.to_dict() for record in tensor_records(outputs, "out")]


def preview(array: np.ndarray, count: int = 6) -> str:
    flat = array.reshape(-1)
    # numpy prints each scalar in the shortest form that identifies it in its own type.
    text = ", ".join(str(v) for v in flat[:count])
    return f"[{text}{', ...' if flat.size > count else ''}]"


def compiler_config(args: argparse.Namespace) -> CompilerConfig:
    try:
        config = load_config(args.config) if getattr(args, "config", None) else load_config()
        if args.target:
            config = config.with_target(cpu=args.target)
            validate_target(config)
        if getattr(args, "pipeline", None):
            pipeline_named(args.pipeline)  # an unknown name: ConfigError naming the known ones
            config = config.with_pipeline(args.pipeline)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return config


def require_runnable(config: CompilerConfig) -> None:
    """UsageError (exit 2) naming the missing features unless this host can run `config`'s
    code; nothing is compiled or run first."""
    try:
        check_runnable(config)
    except TargetNotRunnable as exc:
        raise UsageError(str(exc)) from None


def compile_module(args: argparse.Namespace, program: Program, config: CompilerConfig | None = None, profile: Profile | None = None) -> Executable:
    """The program compiled (progress on a terminal; each stage on `profile`'s timeline)."""
    config = config or compiler_config(args)
    with compile_progress(args.module) as progress:
        if profile is not None:
            progress = profile.listener(progress)
        try:
            return compile_program(program, config, threads=getattr(args, "threads", 0), progress=progress)
        except HloError as exc:
            raise UsageError(f"{args.module}: {exc}") from None


@contextlib.contextmanager
def compile_progress(what: str) -> Iterator[Callable[[str], None] | None]:
    """A compilation's stages as a spinner on stderr when it is a terminal (rich), silent
    otherwise (scripts and pipes get only the results)."""
    with spinner(f"compiling {what}") as say:
        yield None if say is None else (lambda stage: say(f"compiling {what}: {stage}"))


@contextlib.contextmanager
def spinner(first: str) -> Iterator[Callable[[str], None] | None]:
    """Long work said as it goes: a spinner on stderr with what is being done and the seconds
    so far, when stderr is a terminal (rich's status); None otherwise (scripts and pipes get
    only the results)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console

    console = Console(stderr=True)
    started = time.monotonic()
    with console.status(first) as status:

        def say(doing: str) -> None:
            status.update(f"{doing} ({time.monotonic() - started:.0f} s)")

        yield say


@contextlib.contextmanager
def download_bar(what: str) -> Iterator[Callable[[Any], None] | None]:
    """A download's bar on stderr when it is a terminal (rich's progress: bytes, speed, time
    left), fed with `node.sdk.Download`s; None otherwise."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(what, total=None)

        def heard(download: Any) -> None:  # noqa: ANN401 - a node.sdk.Download
            doing = f"{what}: {download.name} ({download.number + 1} of {download.count})" if download.number < download.count else f"{what}: done"
            bar.update(task, description=doing, completed=download.received, total=download.total)

        yield heard


def key_dir() -> Path:
    """The default key directory: $VXLA_HOME/keys, else ~/.vxla/keys."""
    home = os.environ.get("VXLA_HOME")
    return (Path(home) if home else Path.home() / ".vxla") / "keys"


def key_passphrase(args: argparse.Namespace) -> bytes | None:
    """The key passphrase: --passphrase-file (its first line), else $VXLA_KEY_PASSPHRASE."""
    if getattr(args, "passphrase_file", None):
        try:
            data = Path(args.passphrase_file).read_bytes()
        except OSError as exc:
            raise UsageError(f"--passphrase-file {args.passphrase_file}: cannot read ({exc.strerror or exc})") from None
        # A file written by `echo` ends with a newline that is not part of the passphrase.
        passphrase = data.splitlines()[0] if data.strip() else b""
        if not passphrase:
            raise UsageError(f"--passphrase-file {args.passphrase_file}: empty")
        return passphrase
    value = os.environ.get("VXLA_KEY_PASSPHRASE")
    return value.encode() if value else None


def load_signing_key(args: argparse.Namespace) -> Ed25519PrivateKey:
    try:
        return load_private_key(args.key, key_passphrase(args))
    except KeyFileError as exc:
        raise UsageError(f"--key {exc}") from None


@contextlib.contextmanager
def node_session(args: argparse.Namespace, label: str | None = None, **client_options: Any) -> Iterator[Any]:
    """A client of the node args.node names (its token from --token, else $VXLA_TOKEN), closed
    after; the node's refusals, its silence and answers the SDK refuses (over their size
    bound, not complete by their deadline, a redirect, not what the route serves) become
    usage errors naming the node (exit 2): nothing about the job was shown either way.
    `label` prefixes a refusal (default: the URL). Yields a node.sdk.Client, imported here
    (it needs web3, which the compile and run commands do without)."""
    from node.sdk import TOKEN_ENV, AnswerRefused, Client, NodeUnreachable, RequestRefused

    token = getattr(args, "token", None) or os.environ.get(TOKEN_ENV) or None
    client = Client(args.node, token=token, **client_options)
    try:
        yield client
    except RequestRefused as exc:
        raise UsageError(f"{label or args.node}: {exc.detail} (HTTP {exc.status})") from None
    except NodeUnreachable as exc:
        raise UsageError(f"--node {args.node}: {exc}") from None
    except AnswerRefused as exc:
        raise UsageError(f"--node {args.node}: answer refused: {exc}") from None
    finally:
        client.close()


def chosen_node(args: argparse.Namespace) -> str:
    """The URL --node gives, or the first node of the --devnet directory."""
    if args.node:
        return args.node
    from node.devnet_state import DevnetError, DevnetState

    try:
        return DevnetState.load(Path(args.devnet)).first_node_url()
    except DevnetError as exc:
        raise UsageError(f"--devnet: {exc}") from None
