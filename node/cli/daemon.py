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
    key_dir,
    key_passphrase,
)
from node.cli.usage import EXIT_OK, UsageError


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
