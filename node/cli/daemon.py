"""`vxla node run`, `vxla keys init` and `vxla tokens`: serve a node, make its signing keys,
and make the bearer tokens it asks of submitters when `[auth] required` is set.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from attest import (
    KeyFileError,
    init_key_files,
    key_id,
    load_private_key,
)
from compiler.api import ConfigError, TargetNotRunnable
from node.cli.common import (
    EXIT_OK,
    UsageError,
    command_group,
    key_dir,
    key_passphrase,
    non_negative_int,
)


def cmd_keys_init(args: argparse.Namespace) -> int:
    directory = Path(args.dir) if args.dir else key_dir()
    passphrase = key_passphrase(args)
    try:
        files = init_key_files(directory, passphrase=passphrase)
    except FileExistsError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        raise UsageError(f"{directory}: {exc.strerror or exc}") from None
    if args.json:
        print(json.dumps({"key_id": files.key_id, "private_key": str(files.private_path), "public_key": str(files.public_path), "encrypted": passphrase is not None}, indent=2))
        return EXIT_OK
    print(f"key_id       {files.key_id}")
    print(f"private key  {files.private_path}{' (passphrase-encrypted)' if passphrase else ''}")
    print(f"public key   {files.public_path}")
    return EXIT_OK


# Where `vxla node run` looks for a configuration when given none: relative to the working
# directory, so a checkout (or any directory laid out like one) runs its own copy.
LOCAL_CONFIG = Path("configs/node.toml")


def _node_config(path: str | None):  # -> node.config.NodeConfig (imported lazily)
    """--config, else configs/node.toml when present, else the shipped defaults."""
    from node.daemon.config import DEFAULTS_NAME, ConfigError, load_config, load_defaults

    source = path or (LOCAL_CONFIG if LOCAL_CONFIG.is_file() else None)
    try:
        return load_config(source) if source is not None else load_defaults()
    except ConfigError as exc:
        raise UsageError(f"--config {source or DEFAULTS_NAME + ' (the shipped defaults)'}: {exc}") from None


def cmd_node_run(args: argparse.Namespace) -> int:
    # Imported here: the HTTP stack costs import time the other commands do not need.
    import logging

    from node.chain.errors import DeploymentMismatch
    from node.chain.state import ChainStateError
    from node.daemon.confinement import forget_secrets, make_undumpable
    from node.daemon.server import NodeServer
    from node.daemon.worker import check_node_target, node_compiler_config
    from node.sqlite import StorageError

    config = _node_config(args.config)
    try:
        check_node_target(node_compiler_config(config.target))
    except (TargetNotRunnable, ConfigError) as exc:
        where = f"node.target {config.target!r}" if config.target else "configs/compiler.toml [target]"
        raise UsageError(f"{where}: {exc}") from None
    try:
        signing_key = load_private_key(config.key_file, config.key_passphrase)
    except KeyFileError as exc:
        raise UsageError(f"node.key_file {exc} (create one with vxla keys init)") from None
    # The config holds the secrets now: no execution process inherits them, and none can read
    # them (or the key) out of this process (node/daemon/confinement.py).
    forget_secrets()
    make_undumpable()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        server = NodeServer(config, signing_key)
    except (ChainStateError, StorageError) as exc:
        raise UsageError(f"node.data_dir {config.data_dir}: {exc}") from None
    except DeploymentMismatch as exc:
        raise UsageError(f"chain.node_registry: {exc}") from None
    except OSError as exc:
        raise UsageError(f"node.host/node.port {config.host}:{config.port}: cannot listen ({exc.strerror or exc})") from None
    def serving() -> None:
        print(f"vxla node {key_id(signing_key)[:16]} serving {server.url} (data {config.data_dir})", file=sys.stderr, flush=True)

    requeued = server.run(on_serving=serving)
    print(f"vxla node stopped; {len(requeued)} running job(s) requeued", file=sys.stderr)
    return EXIT_OK


def _token_store(args: argparse.Namespace):  # -> node.daemon.auth.TokenStore (imported lazily)
    from node.daemon.auth import TokenStore
    from node.sqlite import StorageError

    config = _node_config(args.config)
    try:
        return TokenStore(config.data_dir)
    except OSError as exc:
        raise UsageError(f"node.data_dir {config.data_dir}: {exc.strerror or exc}") from None
    except StorageError as exc:
        raise UsageError(f"node.data_dir {config.data_dir}: {exc}") from None


def cmd_tokens_add(args: argparse.Namespace) -> int:
    from node.daemon.auth import TokenError

    store = _token_store(args)
    try:
        token = store.add(args.name, max_jobs=args.max_jobs, max_bytes=args.max_bytes, rate_per_minute=args.rate)
        record = next(t for t in store.tokens() if t.name == args.name)
    except TokenError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    if args.json:
        print(json.dumps({"token": token, **record.to_dict()}, indent=2))
        return EXIT_OK
    print(token)
    limits = f"jobs {record.max_jobs or 'unlimited'}, bytes {record.max_bytes or 'unlimited'}, rate {record.rate_per_minute or 'unlimited'}/min"
    print(f"token {record.name!r} ({limits}): shown once, only its SHA-256 is kept; submitters send it as --token or $VXLA_TOKEN", file=sys.stderr)
    return EXIT_OK


def cmd_tokens_list(args: argparse.Namespace) -> int:
    store = _token_store(args)
    try:
        tokens = store.tokens()
    finally:
        store.close()
    if args.json:
        print(json.dumps([t.to_dict() for t in tokens], indent=2))
        return EXIT_OK
    if not tokens:
        print("no tokens (vxla tokens add NAME makes one)")
    for t in tokens:
        print(f"{t.name:<20} jobs {t.jobs}/{t.max_jobs or '-'}  bytes {t.bytes}/{t.max_bytes or '-'}  rate {t.rate_per_minute or '-'}/min")
    return EXIT_OK


def cmd_tokens_remove(args: argparse.Namespace) -> int:
    from node.daemon.auth import TokenError

    store = _token_store(args)
    try:
        store.remove(args.name)
    except TokenError as exc:
        raise UsageError(str(exc)) from None
    finally:
        store.close()
    print(f"removed token {args.name!r}: requests with it are refused from now on")
    return EXIT_OK


def add_commands(commands: argparse._SubParsersAction) -> None:
    """Adds this group's subcommands to the `vxla` parser."""
    node_commands = command_group(commands, "node", help="run a worker node", description="Run a vxla worker node.")
    node_run = node_commands.add_parser(
        "run",
        help="serve the node's HTTP API and run queued jobs",
        description="Start the node: the job store and blobs under node.data_dir, the worker "
        "pool, and the HTTP API on node.host:node.port. SIGINT or SIGTERM stops it cleanly "
        "(running jobs finish, or are requeued and redone at the next start). With chain.rpc_url "
        "set it also follows the JobMarket: it claims, executes, commits, reveals and finalizes "
        "jobs, re-executes a share of other nodes' jobs (chain.verify_fraction) and reports where "
        "a diverging node's trace parts from its own (GET /v1/chain/jobs/ID/divergence). Logs go "
        "to stderr.",
    )
    node_run.add_argument("--config", metavar="TOML", help="node configuration (default: configs/node.toml if present, else built-in defaults); the key passphrase comes from $VXLA_KEY_PASSPHRASE")
    node_run.set_defaults(handler=cmd_node_run)

    key_commands = command_group(commands, "keys", help="manage the node's signing keys", description="Manage the node's Ed25519 signing keys.")
    keys_init = key_commands.add_parser(
        "init",
        help="create a new key pair (node.key, node.pub)",
        description="Create a new Ed25519 key pair: DIR/node.key (PKCS#8 PEM, mode 0600, encrypted "
        "when a passphrase is given) and DIR/node.pub. Prints the key id (SHA-256 of the raw "
        "public key). Refuses to overwrite existing key files.",
    )
    keys_init.add_argument("--dir", metavar="DIR", help="key directory (default: $VXLA_HOME/keys, else ~/.vxla/keys)")
    keys_init.add_argument("--passphrase-file", metavar="FILE", help="encrypt the private key with the first line of FILE (default: $VXLA_KEY_PASSPHRASE if set)")
    keys_init.add_argument("--json", action="store_true", help="print one JSON object")
    keys_init.set_defaults(handler=cmd_keys_init)

    token_commands = command_group(
        commands,
        "tokens",
        help="manage the bearer tokens submitters need",
        description="Manage the bearer tokens a node with [auth] required = true asks of whoever posts "
        "jobs or uploads blobs. They live in node.data_dir/tokens.sqlite3 as SHA-256 digests; the "
        "node need not be stopped.",
    )
    tokens_add = token_commands.add_parser(
        "add",
        help="make a token and print it (once)",
        description="Make a token for NAME with its quotas and rate, and print it on stdout: it is "
        "shown this once, the node keeps only its SHA-256. Past a quota the node answers 403, "
        "past the rate 429.",
    )
    tokens_add.add_argument("name", metavar="NAME", help="who the token is for (letters, digits, '-', '_', '.')")
    tokens_add.add_argument("--max-jobs", type=non_negative_int, default=0, metavar="N", help="jobs it may post in all (default 0: no limit)")
    tokens_add.add_argument("--max-bytes", type=non_negative_int, default=0, metavar="B", help="bytes it may upload in all, blobs and module text (default 0: no limit)")
    tokens_add.add_argument("--rate", type=non_negative_int, default=600, metavar="PER_MINUTE", help="requests a minute, in bursts of as many (default 600; 0: no limit)")
    tokens_add.add_argument("--json", action="store_true", help="print one JSON object (the token and its record)")
    tokens_add.set_defaults(handler=cmd_tokens_add)
    tokens_list = token_commands.add_parser("list", help="the tokens, their quotas and use", description="List the tokens by name, with their quotas and what each has used (never the tokens).")
    tokens_list.add_argument("--json", action="store_true", help="print one JSON array")
    tokens_list.set_defaults(handler=cmd_tokens_list)
    tokens_remove = token_commands.add_parser("remove", help="remove a token", description="Remove NAME's token: the node refuses it (401) from the next request on.")
    tokens_remove.add_argument("name", metavar="NAME")
    tokens_remove.set_defaults(handler=cmd_tokens_remove)
    for sub in (tokens_add, tokens_list, tokens_remove):
        sub.add_argument("--config", metavar="TOML", help="the node's configuration, for node.data_dir (default: configs/node.toml if present, else built-in defaults)")
