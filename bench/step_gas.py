"""Gas and rounds of a dispute settled by the step referee, on the in-process EVM: the game
down to the instruction, the element claim and answer, the bisection down to one step of the
element's program, and the step the contract evaluates itself. Real instructions: a dot of K
terms and tanh, each disputed with the defender lying at one step of the given kind.

    python bench/step_gas.py            # K = 64
    python bench/step_gas.py --k 4096   # a dot of K = 4,096 (a minute or two on py-evm)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.api import (  # noqa: E402
    StepKind,
    graph_commitment,
    load_config,
    load_program,
    optimize,
    trace_leaves,
)
from harness.dispute_game import Party  # noqa: E402
from harness.step_referee import lying, play_steps, step_env, step_job  # noqa: E402


def module(k: int) -> str:
    return f"""
HloModule dot_tanh
ENTRY e {{
  x = f32[2,{k}] parameter(0)
  w = f32[{k},2] parameter(1)
  a = f32[2,{k}] multiply(x, x)
  b = f32[{k},2] negate(w)
  d = f32[2,2] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ROOT t = f32[2,2] tanh(d)
}}
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--k", type=int, default=64, help="the dot's contraction length")
    args = parser.parse_args(argv)
    program = load_program(module(args.k))
    optimized = optimize(program, load_config())
    rng = np.random.default_rng(0)
    inputs = [
        rng.standard_normal((2, args.k)).astype(np.float32) * 0.1,
        rng.standard_normal((args.k, 2)).astype(np.float32) * 0.1,
    ]
    job = step_job(optimized, inputs, graph_commitment(program, load_config()))
    env = step_env()
    print(
        f"{'instruction':12} {'lie at':10} {'steps':>7} {'game tx':>8} {'game gas':>10} {'step tx':>8} {'step gas':>10} {'resolve gas':>12}  verdict"
    )
    for opcode, kind, nth in (
        ("dot", StepKind.OP, -1),
        ("dot", StepKind.LOAD, 0),
        ("tanh", StepKind.OP, 60),
        ("tanh", StepKind.TABLE, 0),
    ):
        index = next(i for i, leaf in enumerate(trace_leaves(optimized)) if leaf.opcode == opcode)
        honest = job.side(env.nodes[1], index, 1)
        steps = [i for i, s in enumerate(honest.trace.steps) if s.kind is kind]
        liar = lying(job.side(env.nodes[0], index, 1), env.nodes[0], steps[nth])
        wrong, right = job.execution({index: liar.output}), job.execution()
        env.gas.clear()
        graph = job.leaves()
        job_id = env.run_job(graph, [Party(env.nodes[0], wrong)])
        env.gas.clear()
        dispute = env.challenge(job_id, 0, Party(env.nodes[1], right))
        env.play(dispute, Party(env.nodes[0], wrong), Party(env.nodes[1], right), graph)
        game_tx = sum(len(v) for v in env.gas.values())
        game_gas = sum(sum(v) for v in env.gas.values())
        gas = play_steps(env, dispute, job, index, liar, honest)
        step_tx = sum(v for k, v in gas.items() if k.endswith("moves"))
        step_gas = sum(v for k, v in gas.items() if not k.endswith("moves"))
        verdict = env.game.get_dispute(dispute).verdict.name
        print(
            f"{opcode:12} {kind.value:10} {len(honest.trace.steps):7} {game_tx:8} {game_gas:10,} {step_tx:8} {step_gas:10,} {gas.get('resolve', 0):12,}  {verdict}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
