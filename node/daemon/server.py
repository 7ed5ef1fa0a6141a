"""`NodeServer`: one node's store, worker pool and HTTP API, served by uvicorn.

With `chain.rpc_url` set it also runs one chain thread: the `ChainWatcher` (claim, execute
through `node.daemon.chain_executor`, commit, reveal, finalize), the `ChainVerifier` (the verifier
role, `chain.verify_fraction`) and the `DivergenceMonitor`.
"""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from attest import load_private_key
from compiler.api import Fault
from node.chain import ChainClient, DisputeGame, JobMarket, NodeRegistry, referees
from node.chain.client import _address
from node.chain.dispute_role import DisputeConfig, DisputeRole
from node.chain.state import ChainState, JobState, import_legacy_files
from node.chain.verifier import ChainVerifier, VerifierConfig
from node.chain.watcher import AcceptancePolicy, ChainWatcher, WatcherConfig
from node.daemon.api import create_app
from node.daemon.auth import Gate, TokenStore
from node.daemon.chain_executor import BlobFetcher, ChainExecutor, PeerDirectory
from node.daemon.chain_role import ChainRole
from node.daemon.config import NodeConfig
from node.daemon.disputes import ExecutorKnowledge
from node.daemon.divergence import DivergenceMonitor
from node.daemon.peer_addresses import PeerAddressPolicy
from node.daemon.store import JobStore
from node.daemon.worker import WorkerPool, node_compiler_config

log = logging.getLogger("vxla.node")


@dataclass
class _ChainRoles:
    """What the chain thread runs each round (made there: their SQLite state is its)."""

    watcher: ChainWatcher
    verifier: ChainVerifier | None = None
    disputes: DisputeRole | None = None

    def close(self) -> None:
        self.watcher.close()
        if self.verifier is not None:
            self.verifier.close()
        if self.disputes is not None:
            self.disputes.state.close()


@dataclass
class NodeServer:
    """The store, the worker pool and the HTTP API of one node."""

    config: NodeConfig
    signing_key: Ed25519PrivateKey
    log_level: str = "info"

    def __post_init__(self) -> None:
        self.store = JobStore(self.config.data_dir)
        if self.store.requeued:
            log.info("requeued %d job(s) left running: %s", len(self.store.requeued), ", ".join(self.store.requeued))
        limits = self.config.limits
        fault = Fault(self.config.fault_instruction, self.config.fault_bit) if self.config.fault_instruction else None
        if fault is not None:
            log.warning("FAULT INJECTION (test/demo only): %s bit %d", fault.instruction, fault.bit)
        self.pool = WorkerPool(
            self.store, self.signing_key, limits, workers=self.config.workers, threads=self.config.threads,
            fault=fault, compiler_config=node_compiler_config(self.config.target),
        )  # fmt: skip
        target = self.pool.compiler_config.target_cpu
        log.info("jobs compile for %s (%s)", target.name, target.description)
        self.chain_database = self.store.data_dir / "chain.sqlite3"
        try:
            self.chain = self._chain_role() if self.config.chain.rpc_url else None
        except BaseException:
            # A chain database this node cannot use (another chain or account, older files it
            # refuses): nothing runs, and no job is left claimed by a worker.
            self.pool.stop(5.0)
            self.store.close()
            raise
        self._chain_stop = threading.Event()
        self._chain_thread: threading.Thread | None = None
        self.tokens = TokenStore(self.config.data_dir) if self.config.auth.required else None
        if self.tokens is not None and not self.tokens.tokens():
            log.warning("auth.required is set and no token exists: every job is refused until vxla tokens add NAME")
        gate = Gate(required=self.config.auth.required, tokens=self.tokens)
        self.app = create_app(self.store, limits, self.signing_key.public_key(), self.pool, self.chain, gate)
        # Bound here, before serving, so port 0 gives a real port the caller can read.
        self.socket = socket.create_server((self.config.host, self.config.port))
        self.port = self.socket.getsockname()[1]
        self.server = uvicorn.Server(
            uvicorn.Config(self.app, log_level=self.log_level, lifespan="off", timeout_graceful_shutdown=5)
        )
        self._thread: threading.Thread | None = None

    def _chain_role(self) -> ChainRole:
        # Imported here: web3 and eth_account load slowly and a node without a chain needs neither.
        from eth_account import Account
        from web3 import HTTPProvider, Web3

        chain = self.config.chain
        client = ChainClient(Web3(HTTPProvider(chain.rpc_url, request_kwargs={"timeout": 30})))
        account = Account.from_key(chain.private_key) if chain.private_key else chain.account
        market = JobMarket(client, chain.job_market)
        registry = NodeRegistry(client, chain.node_registry)
        registry.check_deployment()  # DeploymentMismatch: refused at start, not in the chain loop

        peers = PeerDirectory(registry, chain.start_block, lambda: self.url)
        limits = self.config.limits
        policy = PeerAddressPolicy(allow_private=chain.allow_private_peers)
        fetcher = BlobFetcher(self.store, peers, max_bytes=max(limits.max_module_bytes, limits.max_tensor_bytes), policy=policy)
        address = _address(account)
        state = ChainState(
            self.chain_database, chain_id=client.chain_id, contract=market.address, account=address, start_block=chain.start_block
        )
        imported = import_legacy_files(self.store.data_dir, state)
        if imported:
            log.info("moved %s into %s (the old files are renamed *.migrated)", ", ".join(imported), self.chain_database.name)
        executor = ChainExecutor(self.pool, fetcher, state, workers=self.config.workers)
        monitor = DivergenceMonitor(market, registry, executor, address, on_compare=self._count_verification, policy=policy)
        self._account = account
        return ChainRole(client, market, registry, executor, monitor, address)

    def _count_verification(self, outcome: str) -> None:
        self.pool.metrics.verifications.labels(outcome=outcome).inc()

    def _chain_loop(self) -> None:
        """The watcher, the verifier, the divergence monitor and the dispute role, one round
        every poll interval. The roles are made here, because their SQLite state belongs to
        this thread, and in the first round the RPC endpoint answers, since making them reads
        the chain: a node (re)started while its endpoint is away comes up and waits for it."""
        assert self.chain is not None
        chain = self.config.chain
        roles: _ChainRoles | None = None
        unreachable_since: float | None = None
        try:
            while not self._chain_stop.is_set():
                # An RPC endpoint that is away is said once, not in a traceback per round
                # and component; the round starts again from chain state when it is back.
                try:
                    self.chain.client.block_number()
                    roles = roles or self._chain_roles()
                except Exception as exc:  # any transport failure
                    if unreachable_since is None:
                        unreachable_since = time.monotonic()
                        log.warning("chain RPC %s unreachable (%s: %s); retrying", chain.rpc_url, type(exc).__name__, str(exc)[:200])
                    self._chain_stop.wait(max(chain.poll_interval_s, 0.5))
                    continue
                if unreachable_since is not None:
                    log.warning("chain RPC %s reachable again after %.1f s", chain.rpc_url, time.monotonic() - unreachable_since)
                    unreachable_since = None
                self._chain_round(roles)
                self._chain_stop.wait(chain.poll_interval_s)
        finally:
            if roles is not None:
                roles.close()

    def _chain_round(self, roles: _ChainRoles) -> None:
        """One round of every role; a role's failure is logged and retried next round."""
        assert self.chain is not None
        try:
            for _, action in roles.watcher.step().transactions:
                self.pool.metrics.chain_transactions.labels(action=action).inc()
            states = Counter(record.state for record in roles.watcher.state.jobs())
            for state in JobState:
                self.pool.metrics.chain_jobs.labels(state=state.value).set(states.get(state, 0))
        except Exception:  # keep the daemon alive; the next round starts from chain state
            log.exception("watcher step failed")
        if roles.verifier is not None:
            # Re-executes the jobs other nodes commit to (a recorded one is not run again);
            # the divergence monitor below then compares their commitments and, where they
            # differ, their traces with ours.
            try:
                roles.verifier.step()
            except Exception:  # like the watcher: retried next round from its state file
                log.exception("verifier step failed")
        try:
            self.chain.monitor.step()
        except Exception:  # a peer's trouble must not stop the watcher
            log.exception("divergence monitor step failed")
        if roles.disputes is not None:
            try:
                for action in roles.disputes.step():
                    self.pool.metrics.chain_transactions.labels(action=action.key.split(":")[0]).inc()
            except Exception:  # like the watcher: the next round reads the chain again
                log.exception("dispute role step failed")

    def _chain_roles(self) -> _ChainRoles:
        """The chain thread's roles (reading the chain: ChainError while the RPC is away;
        then nothing is left open)."""
        assert self.chain is not None
        chain = self.config.chain
        made = _ChainRoles(
            ChainWatcher(
                self.chain.market,
                self._account,
                self.chain.executor,
                self.chain_database,
                config=WatcherConfig(
                    confirmations=chain.confirmations, poll_interval_s=chain.poll_interval_s, run_before_claim=chain.run_before_claim
                ),
                start_block=chain.start_block,
                finalize_gate=self.chain.monitor.ready,
                policy=AcceptancePolicy(min_reward_wei=chain.min_reward_wei),
            )
        )
        try:
            if chain.verify_fraction > 0:
                made.verifier = ChainVerifier(
                    self.chain.market,
                    self.chain.address,
                    self.chain.executor,
                    self.chain_database,
                    config=VerifierConfig(fraction=chain.verify_fraction, confirmations=chain.confirmations),
                    start_block=chain.start_block,
                )
            if chain.challenge or chain.play_disputes:
                made.disputes = self._dispute_role()
        except BaseException:
            made.close()
            raise
        return made

    def _dispute_role(self) -> DisputeRole:
        """The node's player of the dispute game (node/chain/dispute_role.py), with the game
        and referee the registry names (read from the chain: ChainError while the RPC is
        away). Made in the chain thread: its SQLite connection belongs there."""
        assert self.chain is not None
        chain = self.config.chain
        client, registry = self.chain.client, self.chain.registry
        committee, step_referee = referees(client, registry)
        game = DisputeGame(client, registry.game())
        state = ChainState(
            self.chain_database, chain_id=client.chain_id, contract=self.chain.market.address, account=self.chain.address, start_block=chain.start_block
        )
        return DisputeRole(
            client,
            self.chain.market,
            game,
            committee,
            self._account,
            ExecutorKnowledge(self.chain.executor, self.chain.market, client.chain_id, account=self.chain.address),
            state,
            DisputeConfig(challenge=chain.challenge, play=chain.play_disputes),
            step_referee,
        )

    def _start_chain(self) -> None:
        if self.chain is not None:
            self._chain_thread = threading.Thread(target=self._chain_loop, name="vxla-chain", daemon=True)
            self._chain_thread.start()

    @classmethod
    def from_config(cls, config: NodeConfig, log_level: str = "info") -> NodeServer:
        """Loads the signing key named by the config (KeyFileError if it cannot)."""
        return cls(config, load_private_key(config.key_file, config.key_passphrase), log_level)

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    def run(self, on_serving: Callable[[], None] | None = None) -> list[str]:
        """Serves until SIGINT/SIGTERM (uvicorn handles both in the main thread), then stops
        the workers and closes the store. `on_serving` is called once the node takes
        requests. Returns the job ids requeued at shutdown."""
        self.pool.start()
        self._start_chain()
        if on_serving is not None:
            on_serving()
        previous = {}
        if threading.current_thread() is threading.main_thread():
            # uvicorn handles SIGINT/SIGTERM while serving, then restores the handlers it found
            # and raises the signal again; with these handlers that second delivery is only
            # noted, so the workers are stopped and the store closed before the process ends.
            previous = {sig: signal.signal(sig, self._note_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            self.server.run(sockets=[self.socket])
        finally:
            requeued = self.shutdown()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return requeued

    def _note_signal(self, sig: int, frame: object) -> None:
        self.server.should_exit = True
        log.info("received %s, shutting down", signal.Signals(sig).name)

    def start_in_thread(self) -> None:
        """Serves from a background thread (tests, embedding); `stop()` ends it."""
        self.pool.start()
        self._start_chain()
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self._thread.start()
        while not self.server.started and self._thread.is_alive():
            threading.Event().wait(0.01)

    def stop(self) -> list[str]:
        """Stops a server started with `start_in_thread`."""
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        return self.shutdown()

    def shutdown(self, timeout: float = 30.0) -> list[str]:
        """Stops the chain thread and the workers, closes the socket and the store."""
        self._chain_stop.set()
        if self._chain_thread is not None:
            self._chain_thread.join(timeout)
        if self.chain is not None:
            self.chain.executor.close()
            self.chain.monitor.close()
        requeued = self.pool.stop(timeout)
        if self.chain is not None:
            self.chain.executor.state.close()  # after the workers: a running job may still record
        if requeued:
            log.info("requeued %d running job(s) at shutdown", len(requeued))
        self.socket.close()
        self.store.close()
        if self.tokens is not None:
            self.tokens.close()
        return requeued
