"""The devnet time to settle a dispute through the step referee: `vxla devnet up` (anvil, the
contracts with the StepReferee as the game's referee, three nodes), node2 started with a
fault at an instruction that has an element program (so the contract, not the committee,
has the case), an optimistic job (k = 1) that node2 runs alone, and the honest nodes'
challenges played to the end by the daemons themselves. Prints each dispute as it moves (its
step referee case too) and the seconds from the first challenge to the last settlement.

A node whose kernel gave a wrong value cannot make its element's steps agree with its output
(its execution processes compute them with the reference), so it does not answer and loses by
the clock: the time is the game's walk plus one move window (20 s on a devnet).

    .venv/bin/python tools/devnet_step_settle.py [--fixture transformer_block] [--dir .devnet/steps]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from attest.digests import tensor_digest  # noqa: E402
from compiler.api import (  # noqa: E402
    NO_PROGRAM,
    Fault,
    compile_program,
    graph_commitment,
    load_config,
    load_program,
)
from node.devnet import _optimistic_demo, down, up  # noqa: E402
from node.tracing.statement import checked_inputs  # noqa: E402


def covered_fault(module_text: str, input_paths: list[Path]) -> str:
    """A fault ("INSTRUCTION:BIT") at an op-trace leaf with an element program (on the job's
    inputs) whose bit flip changes the outputs."""
    program = load_program(module_text)
    executable = compile_program(program, load_config())
    arrays = checked_inputs(program, [np.load(p, allow_pickle=False) for p in input_paths])
    records = graph_commitment(program, load_config(), arrays).records
    covered = {r.name for r in records[:-1] if r.program != NO_PROGRAM}
    honest = [tensor_digest(o) for o in executable.run_traced(*arrays).outputs]
    plan = executable.plan
    points = [p for p in plan.trace_points if p.name in covered and plan.buffers[p.buffers[0]].kind == "arena"]
    for point in points[len(points) // 2 :] + points[: len(points) // 2]:
        for bit in (30, 22, 3):
            if bit >= 8 * plan.buffers[point.buffers[0]].nbytes:
                continue
            if [tensor_digest(o) for o in executable.run_traced(*arrays, fault=Fault(point.name, bit)).outputs] != honest:
                return f"{point.name}:{bit}"
    raise SystemExit("no covered instruction whose bit flip changes the outputs")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fixture", default="transformer_block", help="a folder of tests/fixtures (module.hlo, in*.npy)")
    parser.add_argument("--dir", default=".devnet/steps", help="the devnet's directory")
    args = parser.parse_args(argv)
    folder = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / args.fixture
    module = folder / "module.hlo"
    inputs = sorted(folder.glob("in*.npy"), key=lambda p: int(re.findall(r"\d+", p.stem)[-1]))
    fault = covered_fault(module.read_text(encoding="utf-8"), inputs)
    print(f"fault on node2: {fault} (an instruction with an element program)", flush=True)
    from node.sdk import ChainSubmitter

    directory = Path(args.dir)
    state = up(directory, 3, faults={2: fault}, min_rewards={0: ChainSubmitter.reward_wei, 1: ChainSubmitter.reward_wei}, referee="steps")
    try:
        _optimistic_demo(state, module, inputs, lambda text: print(text, flush=True))
    finally:
        print("devnet down: " + ", ".join(down(directory)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
