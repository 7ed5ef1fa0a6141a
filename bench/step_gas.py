"""Gas and rounds of a dispute settled by the step referee, on the in-process EVM, by phase:
the game down to the instruction; locating a chunk of the output where the parties differ
(program claim, chunk roots, bisection of the chunk trees, the defender's chunk revealed);
the element named and answered; the bisection down to one step of the element's program and
the step the contract evaluates itself. Real instructions: a dot of K terms into an M x N
output, tanh of it, and the multiply that reads a job input, each disputed with the defender
lying at one step of the given kind, at an element of the output's last chunk.

    python bench/step_gas.py                          # K = 64, a 2 x 2 output
    python bench/step_gas.py --k 4096                 # a dot of K = 4,096 (minutes on py-evm)
    python bench/step_gas.py --m 512 --n 512          # a 1 MiB output: 256 chunks to locate in
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compiler.api import StepKind  # noqa: E402
from harness.step_referee import dot_tanh_job, leaf_index, settle_with_steps, step_env  # noqa: E402

PHASES = {
    "locate": ("claimProgram", "answerRoot", "bisectChunks", "revealChunk"),
    "element": ("claimElement", "answerElement"),
    "step": ("bisectSteps", "resolve"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--k", type=int, default=64, help="the dot's contraction length")
    parser.add_argument("--m", type=int, default=2, help="the output's rows")
    parser.add_argument("--n", type=int, default=2, help="the output's columns")
    args = parser.parse_args(argv)
    job = dot_tanh_job(args.m, args.k, args.n, seed=0, scale=0.1, on_inputs=True)
    env = step_env()
    element = args.m * args.n - 1
    print(f"output f32[{args.m},{args.n}] ({args.m * args.n * 4:,} bytes), element {element} disputed; gas (transactions)")
    print(f"{'instruction':12} {'lie at':8} {'steps':>7} {'to instruction':>18} {'locate':>18} {'element':>16} {'step':>18} {'resolve':>9}  verdict")
    for opcode, kind, nth in (
        ("dot", StepKind.OP, -1),
        ("dot", StepKind.LOAD, 0),
        ("tanh", StepKind.OP, 60),
        ("tanh", StepKind.TABLE, 0),
        ("multiply", StepKind.LOAD, 0),  # reads a job input: its digest is in the program
    ):
        index = leaf_index(job, opcode)
        trace = job.side(env.nodes[1], index).trace(element)
        steps = [i for i, s in enumerate(trace.steps) if s.kind is kind]
        liar = job.side(env.nodes[0], index, (element, steps[nth]))
        dispute, gas = settle_with_steps(env, job, index, liar, job.side(env.nodes[1], index))
        cells = [f"{gas.pop('game'):,} ({gas.pop('game moves')})"]
        for moves in PHASES.values():
            cells.append(f"{sum(gas.get(m, 0) for m in moves):,} ({sum(gas.get(f'{m} moves', 0) for m in moves)})")
        verdict = env.game.get_dispute(dispute).verdict.name
        print(
            f"{opcode:12} {kind.value:8} {len(trace.steps):7} {cells[0]:>18} {cells[1]:>18} {cells[2]:>16} {cells[3]:>18} {gas.get('resolve', 0):9,}  {verdict}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
