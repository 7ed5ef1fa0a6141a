"""The `vxla` command tree: every command's words, options and help, and the handler that
runs it, named as "module:function" in node.cli and imported when it runs.
"""

from __future__ import annotations

import argparse

from compiler.api import machine_threads
from node.cli.arguments import (
    CACHE_DEFAULT,
    Commands,
    add_command,
    add_json_flag,
    add_node_options,
    add_program_arguments,
    add_target_options,
    chain_id_arg,
    command_group,
    contract_arg,
    devnet_fault_arg,
    fault_arg,
    node_url_arg,
    non_negative_int,
    positive_int,
)
from node.devnet_state import REFEREES
from node.jax_programs import JAX_EXTRA
from node.version import vxla_version


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vxla",
        description="Verifiable, bit-reproducible execution of XLA HLO programs.",
        epilog="Exit status: 0 success, 1 verification failed or outputs differ, 2 bad input.",
    )
    parser.add_argument("--version", action="version", version=f"vxla {vxla_version()}", help="print vxla's version and exit")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    for add in (_programs_commands, _traces_commands, _daemon_commands, _chain_commands, _jobs_commands):
        add(commands)
    return parser


def _programs_commands(commands: Commands) -> None:
    """`vxla inspect`, `compile`, `run`, `graph` and `convert`: one program."""
    inspect = add_command(commands, "inspect", "programs:cmd_inspect", help="parse and verify an HLO module; print its hashes and op counts", description="Parse and verify an HLO text module (as JAX's jax.jit(f).lower(...).as_text(dialect='hlo') or an XLA dump prints it) and print source_hash (SHA-256 of the file), hlo_hash (SHA-256 of the canonical text) and the instruction counts per opcode.")
    add_program_arguments(inspect)
    add_json_flag(inspect, "print one JSON object")

    compile_ = add_command(commands, "compile", "programs:cmd_compile", threads=0, help="compile an HLO module to pinned native code; print its hashes", description="Compile an HLO module for the pinned target (configs/compiler.toml, or --target) and print hlo_hash, graph_hash (the optimized graph) and binary_hash (the exact object bytes that run, with the plan that drives them). Compiled objects are cached by hlo_hash and the whole compiler configuration.")
    add_program_arguments(compile_)
    add_target_options(compile_)
    compile_.add_argument("--pipeline", metavar="NAME", help="pass pipeline: default optimizes, none lowers the module as written (default: configs/compiler.toml)")
    compile_.add_argument("--dump-passes", metavar="DIR", help="write the module after every pass (NNN-PASS.hlo, canonical text) and the hashed optimized graph (graph.txt, whose SHA-256 is graph_hash) to DIR")
    add_json_flag(compile_, "print one JSON object")

    run = add_command(commands, "run", "programs:cmd_run", help="run an HLO module on .npy inputs", description="Run an HLO module on inputs given as .npy files in parameter order and print each output's type, shape and digest. The llvm backend (default) runs pinned native code; the reference backend evaluates the numerics contract directly with numpy (slow). Both give the same bits.")
    add_program_arguments(run, inputs=True)
    run.add_argument("--backend", choices=["llvm", "reference"], default="llvm", help="execution backend (default: llvm)")
    add_target_options(run)
    run.add_argument("--threads", type=positive_int, default=machine_threads(), metavar="N", help="worker threads (results do not depend on it; default: this machine's %(default)s cores)")
    run.add_argument("--out", metavar="OUT.npz", help="write outputs as out0, out1, ... to an .npz file")
    add_json_flag(run, "print one JSON object")
    run.add_argument("--max-while-iterations", type=positive_int, metavar="N", help="stop a while loop after N iterations (bad input)")
    run.add_argument("--profile", metavar="OUT.json", help="write the run's timeline in the Chrome trace format (Perfetto, chrome://tracing): the compile's stages, the run, and each step of the plan timed on its own, with its op and the user's source")
    traces = run.add_argument_group(
        "signed traces",
        "With --trace, write a DSSE envelope (in-toto Statement, Ed25519) that binds the program, "
        "compiler identity, graph_hash, binary_hash, input and output digests and the job; "
        "check it with vxla verify.",
    )
    traces.add_argument("--trace", metavar="TRACE.json", help="write a signed execution trace to TRACE.json (needs --key)")
    traces.add_argument("--key", metavar="KEYFILE", help="the node's Ed25519 private key (PEM), e.g. ~/.vxla/keys/node.key from vxla keys init")
    traces.add_argument("--passphrase-file", metavar="FILE", help="passphrase of an encrypted key (first line of FILE; default: $VXLA_KEY_PASSPHRASE)")
    traces.add_argument("--op-level", action="store_true", help="also record every instruction's output digest in schedule order and their Merkle root, so a verifier can name the first diverging instruction")
    traces.add_argument("--job-id", metavar="ID", help="job the trace is for (default: local-<hash of hlo_hash and input digests>)")
    traces.add_argument("--chain-id", type=chain_id_arg, metavar="N", help="EVM chain id the trace is for (replay protection)")
    traces.add_argument("--contract", type=contract_arg, metavar="0x...", help="contract address the trace is for (replay protection)")
    traces.add_argument("--fault", type=fault_arg, metavar="INSTRUCTION:BIT", help="for tests and demos only: flip bit BIT of the named instruction's output (a name from an op-level trace) right after it is computed, as a faulty node would")

    graph = add_command(commands, "graph", "programs:cmd_graph", help="draw the optimized graph: op families, fusions, buffer places, a divergence", description="Draw the graph the compiler runs, after its passes, with Graphviz: each instruction named as op-level traces and divergence reports name it, filled by op family (as XLA's dumps colour by op kind), fusions as dashed boxes, each value's place in the arena in its label, the user's source (where the HLO's metadata says) as its tooltip. With --traces, two op-level traces of the module (e.g. two nodes' of one job): the first instruction where they differ is highlighted with its path from a parameter, and the graph is the one the first trace's compiler configuration makes.")
    add_program_arguments(graph)
    graph.add_argument("--svg", metavar="OUT.svg", help="write the picture as SVG (needs Graphviz's dot)")
    graph.add_argument("--dot", metavar="OUT.dot", help="write the Graphviz DOT text")
    graph.add_argument("--highlight", metavar="NAME", help="highlight this instruction (its canonical name, e.g. fusion.5)")
    graph.add_argument("--traces", nargs=2, metavar="TRACE.json", help="highlight the first instruction where these two op-level traces differ")
    graph.add_argument("--group-depth", type=positive_int, metavar="N", help="draw the instructions of each scope of your code N deep as one box (JAX's op names: jit(f)/Model/block_0 at 3), so that repeated layers read as a row of boxes; needs the HLO's metadata (the SDK's debug_info=True)")
    add_target_options(graph)

    convert = add_command(commands, "convert", "programs:cmd_convert", help="turn StableHLO text or a jax.export artifact into HLO text", description="Convert what JAX writes besides HLO text, StableHLO text (jax.jit(f).lower(...).as_text()) or a serialized jax.export artifact (exported.serialize()), into the HLO text vxla hashes and runs. Needs JAX, the " f"optional extra ({JAX_EXTRA}); inspect, compile, run and submit accept the same files and convert them the same way. HLO text is copied as it is.")
    convert.add_argument("program", metavar="PROGRAM", help="StableHLO text (.mlir) or jax.export artifact")
    convert.add_argument("-o", "--out", metavar="OUT.hlo", help="write the HLO text here (default: standard output)")


def _traces_commands(commands: Commands) -> None:
    """`vxla verify`: a signed trace."""
    verify = add_command(commands, "verify", "traces:cmd_verify", help="check a signed trace: signatures, and by recompiling and re-executing, its hashes", description="Check a signed execution trace. Always: every signature against the trusted keys, the statement's structure and, when given, the job id, chain id and contract. With --module: source_hash and hlo_hash, then a fresh compilation with the recorded compiler configuration (refused if this vxla cannot reproduce it) checked against graph_hash and binary_hash. With --inputs too: the input digests, a re-execution and the output digests; when the trace has op-level data, the first instruction whose digest differs is printed (with its Merkle inclusion proofs checked).", epilog="Exit status: 0 verified (every check passed, the result re-executed), 1 something differs (the failed checks are named; with --node, also bytes that are not what the trace records), 2 bad input (unreadable or malformed trace, missing files, no trusted keys; with --node, a node that refuses or does not answer, or an answer refused: over its size bound, not complete by its deadline, a redirect, not the JSON or signed trace the route serves), 3 every check made passed but the result was not re-executed (no --module, or no --inputs for a module that takes some): the trace is not verified.")
    verify.add_argument("trace", metavar="TRACE.json", nargs="?", help="the signed trace (DSSE envelope JSON) from vxla run --trace")
    verify.add_argument("--module", metavar="MODULE.hlo", help="the HLO module the trace claims to run; recompiled and checked")
    verify.add_argument("--inputs", metavar="IN.npy", nargs="+", default=[], help="the inputs, in parameter order; re-executed and checked (needs --module)")
    verify.add_argument("--trusted-key", metavar="KEY", action="append", default=[], help="a trusted public key: a PEM file (vxla keys init), or the raw key in hex as GET /v1/key gives it, in a file or as is (repeatable; default: every *.pub in $VXLA_HOME/keys or ~/.vxla/keys; with --node, the key the node serves)")
    job = verify.add_argument_group(
        "a node's job",
        "With --node (or --devnet) and --job, the trace, the module and the inputs come from the node, each "
        "checked against its digest, and the job is re-executed here: no files needed.",
    )
    add_node_options(job, required=False)
    job.add_argument("--job", metavar="ID", help="the job's id on that node (a chain job's number, or the node's own job id)")
    job.add_argument("--no-execute", action="store_true", help="with --job: check signature and hashes only, without re-executing (exit 3)")
    verify.add_argument("--job-id", metavar="ID", help="require this job id")
    verify.add_argument("--chain-id", type=chain_id_arg, metavar="N", help="require this chain id")
    verify.add_argument("--contract", type=contract_arg, metavar="0x...", help="require this contract address")
    verify.add_argument("--threads", type=positive_int, default=machine_threads(), metavar="N", help="worker threads for the re-execution (results do not depend on it; default: this machine's %(default)s cores)")
    verify.add_argument("--execute-on", metavar="CPU", help="re-execute on this target (default: the trace's target when this host runs it, else the configuration's target, by default the widest this host runs); the trace's own target is always compiled and its hashes checked")
    verify.add_argument(
        "--cache", nargs="?", const=CACHE_DEFAULT, metavar="DIR",
        help="use this machine's compile cache (its default directory, or DIR): a program this vxla "
        "compiled there before is not compiled again, so verifying it costs about one run. Off by "
        "default, so that nothing another process wrote (a node's cache) enters a verdict; an entry's "
        "binary_hash is recomputed from its object and plan either way",
    )  # fmt: skip
    add_json_flag(verify, "print one JSON object: ok, verified, re_executed, result, checks [{name, ok, message}], not_checked, first_divergence")


def _daemon_commands(commands: Commands) -> None:
    """`vxla node run`, `vxla keys` and `vxla tokens`: a node's own."""
    node_commands = command_group(commands, "node", help="run a worker node", description="Run a vxla worker node.")
    node_run = add_command(node_commands, "run", "daemon:cmd_node_run", help="serve the node's HTTP API and run queued jobs", description="Start the node: the job store and blobs under node.data_dir, the worker pool, and the HTTP API on node.host:node.port. SIGINT or SIGTERM stops it cleanly (running jobs finish, or are requeued and redone at the next start). With chain.rpc_url set it also follows the JobMarket: it claims, executes, commits, reveals and finalizes jobs, re-executes a share of other nodes' jobs (chain.verify_fraction) and reports where a diverging node's trace parts from its own (GET /v1/chain/jobs/ID/divergence). Logs go to stderr.")
    node_run.add_argument("--config", metavar="TOML", help="node configuration (default: configs/node.toml if present, else built-in defaults); the key passphrase comes from $VXLA_KEY_PASSPHRASE")

    key_commands = command_group(commands, "keys", help="manage the node's signing keys", description="Manage the node's Ed25519 signing keys.")
    keys_init = add_command(key_commands, "init", "daemon:cmd_keys_init", help="create a new key pair (node.key, node.pub)", description="Create a new Ed25519 key pair: DIR/node.key (PKCS#8 PEM, mode 0600, encrypted when a passphrase is given) and DIR/node.pub. Prints the key id (SHA-256 of the raw public key). Refuses to overwrite existing key files.")
    keys_init.add_argument("--dir", metavar="DIR", help="key directory (default: $VXLA_HOME/keys, else ~/.vxla/keys)")
    keys_init.add_argument("--passphrase-file", metavar="FILE", help="encrypt the private key with the first line of FILE (default: $VXLA_KEY_PASSPHRASE if set)")
    add_json_flag(keys_init, "print one JSON object")

    token_commands = command_group(
        commands,
        "tokens",
        help="manage the bearer tokens submitters need",
        description="Manage the bearer tokens a node with [auth] required = true asks of whoever posts "
        "jobs or uploads blobs. They live in node.data_dir/tokens.sqlite3 as SHA-256 digests; the "
        "node need not be stopped.",
    )
    tokens_add = add_command(token_commands, "add", "daemon:cmd_tokens_add", help="make a token and print it (once)", description="Make a token for NAME with its quotas and rate, and print it on stdout: it is shown this once, the node keeps only its SHA-256. Past a quota the node answers 403, past the rate 429.")
    tokens_add.add_argument("name", metavar="NAME", help="who the token is for (letters, digits, '-', '_', '.')")
    tokens_add.add_argument("--max-jobs", type=non_negative_int, default=0, metavar="N", help="jobs it may post in all (default 0: no limit)")
    tokens_add.add_argument("--max-bytes", type=non_negative_int, default=0, metavar="B", help="bytes it may upload in all, blobs and module text (default 0: no limit)")
    tokens_add.add_argument("--rate", type=non_negative_int, default=600, metavar="PER_MINUTE", help="requests a minute, in bursts of as many (default 600; 0: no limit)")
    add_json_flag(tokens_add, "print one JSON object (the token and its record)")
    tokens_list = add_command(token_commands, "list", "daemon:cmd_tokens_list", help="the tokens, their quotas and use", description="List the tokens by name, with their quotas and what each has used (never the tokens).")
    add_json_flag(tokens_list, "print one JSON array")
    tokens_remove = add_command(token_commands, "remove", "daemon:cmd_tokens_remove", help="remove a token", description="Remove NAME's token: the node refuses it (401) from the next request on.")
    tokens_remove.add_argument("name", metavar="NAME")
    for sub in (tokens_add, tokens_list, tokens_remove):
        sub.add_argument("--config", metavar="TOML", help="the node's configuration, for node.data_dir (default: configs/node.toml if present, else built-in defaults)")


def _chain_commands(commands: Commands) -> None:
    """`vxla submit` and `vxla devnet`: jobs for nodes and a local chain."""
    submit = add_command(commands, "submit", "chain:cmd_submit", help="submit a job to a node", description="Upload the inputs to a node, queue MODULE.hlo on them and print the job id; with --wait, wait for it and print the output digests (each output checked against the signed trace's digest).")
    add_program_arguments(submit, inputs=True)
    submit.add_argument("--node", required=True, type=node_url_arg, metavar="URL", help="the node's URL, e.g. http://127.0.0.1:8700 (or 127.0.0.1:8700)")
    submit.add_argument("--redundancy", type=positive_int, default=1, metavar="K", help="nodes that must run the job (above 1: post it on chain, with --devnet)")
    submit.add_argument("--devnet", metavar="DIR", help="post the job on the devnet in DIR (its market and submitter account); --wait follows it to finalization")
    submit.add_argument(
        "--challenge-window", type=positive_int, default=None, metavar="S",
        help="with --devnet: seconds after the reveal phase in which the results may be challenged, before the job "
        "settles (default: 60; at least the market's minimum)",
    )  # fmt: skip
    submit.add_argument("--wait", action="store_true", help="wait until the job is done and print its outputs")
    submit.add_argument("--timeout", type=float, default=None, metavar="S", help="with --wait: give up after S seconds")
    submit.add_argument("--out", metavar="OUT.npz", help="with --wait: write the outputs as out0, out1, ...")
    submit.add_argument("--token", metavar="TOKEN", help="the node's bearer token, when it requires one (default: $VXLA_TOKEN)")
    add_json_flag(submit)

    devnet_commands = command_group(commands, "devnet", help="a local chain with N nodes", description="A local devnet: anvil, the contracts and N registered nodes, as child processes.")
    devnet_up = add_command(devnet_commands, "up", "chain:cmd_devnet_up", help="start anvil, deploy, register and start N nodes", description="Start anvil on 127.0.0.1, deploy the contracts, and start N nodes (own keys, data dirs, ports, staked accounts); writes DIR/state.json.")
    devnet_up.add_argument("--nodes", type=positive_int, default=3, metavar="N", help="number of nodes (default 3)")
    devnet_up.add_argument("--fault", type=devnet_fault_arg, action="append", metavar="NODE=INSTRUCTION[:BIT]", help="test/demo only: start node NODE with fault injection (flips BIT of INSTRUCTION's output)")
    devnet_up.add_argument(
        "--referee", choices=REFEREES, default=REFEREES[0],
        help="who decides a dispute's instruction: the step referee, the contract evaluating one scalar operation, with the committee for what it cannot evaluate (default), or the committee alone",
    )  # fmt: skip
    devnet_up.add_argument("--anvil", metavar="PATH", help="the anvil executable (default: $VXLA_ANVIL, else anvil on PATH, else a checkout's contracts/node_modules copy)")
    add_json_flag(devnet_up, "print the state as JSON")
    devnet_status = add_command(devnet_commands, "status", "chain:cmd_devnet_status", help="show anvil and each node", description="Show anvil and each node: process, healthz, readyz, stake.")
    add_json_flag(devnet_status)
    devnet_down = add_command(devnet_commands, "down", "chain:cmd_devnet_down", help="stop what `devnet up` started", description="Stop exactly the processes in DIR/state.json (each checked to still be ours) and nothing else.")
    for sub in (devnet_up, devnet_status, devnet_down):
        sub.add_argument("--dir", metavar="DIR", help="devnet directory (default .devnet)")


def _jobs_commands(commands: Commands) -> None:
    """`vxla jobs` and `vxla job`: what a node has done."""
    jobs = add_command(commands, "jobs", "jobs:cmd_jobs", help="list a node's jobs: state, timings, and why one failed, expired or was skipped", description="List a node's jobs, newest first: its own (state, when queued, how long it took, the error of a failed one) or, with --chain, the chain jobs it has seen (its state of each and why: skipped, expired, refused).")
    add_node_options(jobs)
    jobs.add_argument("--state", metavar="STATE", help="only jobs in this state (queued, running, done, failed; with --chain: seen, claimed, executed, committed, revealed, done, skipped, expired, failed)")
    jobs.add_argument("--limit", type=positive_int, default=20, metavar="N", help="at most N jobs (default: %(default)s)")
    jobs.add_argument("--chain", action="store_true", help="the chain jobs the node has seen")
    add_json_flag(jobs)

    job = add_command(commands, "job", "jobs:cmd_job", help="show one job: state, timings, digests; a chain job's phases and each node's commitment", description="Show one job of a node: a node's own job (32 hex digits: state, timings, the error of a failed one, module, input and output digests) or a chain job (its number: phase, deadlines on the chain's clock, this node's state of it and why, each slot's node, commitment and revealed result, and each dispute: its stage, rounds, the instruction reached, who moves next and the verdict).")
    job.add_argument("id", metavar="ID", help="the job's id")
    add_node_options(job)
    add_json_flag(job, "print the node's JSON for it")
