"""Where a model's run time goes in vxla: each top-level step of the plan timed on its own
(Executable.step_times), the median over --repeat runs, the slowest steps listed with the
optimized instruction they compute, and the time summed by kind of instruction (a fusion by
its root's opcode). Asserts nothing.

    python bench/profile_steps.py MODULE.hlo [--inputs INPUTS.npz] [--threads N] [--target CPU] [--top 25]

A directory of bench/corpus.py's export (module.hlo, inputs.npz) may be given as MODULE.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from bench.target import add_target_argument, resolve_target  # noqa: E402
from compiler.api import Instruction, compile_program, load_program, optimized_plan  # noqa: E402


def describe(instruction: Instruction | None) -> str:
    """The instruction's kind: its opcode, a fusion as fusion(root opcode, kind)."""
    if instruction is None:
        return "copy"
    if instruction.opcode != "fusion":
        return instruction.opcode
    called = instruction.called_computations()[0]
    kind = instruction.attrs.get("kind", "")
    return f"fusion({called.root.opcode}{', ' + str(kind) if kind else ''})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("module", type=Path, help="HLO text, or a directory with module.hlo and inputs.npz")
    parser.add_argument("--inputs", type=Path, help="an .npz of the inputs in0, in1, ... (default: the directory's)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=9, help="runs timed step by step (default %(default)s)")
    parser.add_argument("--top", type=int, default=25, help="slowest steps listed (default %(default)s)")
    add_target_argument(parser)
    args = parser.parse_args(argv)
    path, inputs_path = args.module, args.inputs
    if path.is_dir():
        path, inputs_path = path / "module.hlo", inputs_path or (path / "inputs.npz" if (path / "inputs.npz").is_file() else None)
    if inputs_path is None:
        parser.error("give the inputs (--inputs INPUTS.npz)")
    program = load_program(path.read_text())
    config = resolve_target(args.target)
    executable = compile_program(program, config, threads=args.threads, cache_dir=False)
    with np.load(inputs_path) as data:
        arrays = [data[f"in{k}"] for k in range(len(data.files))]
    optimized, _ = optimized_plan(program, config)
    by_name = {i.name: i for c in optimized.computations for i in c.instructions}
    executable.run(*arrays)
    runs = [executable.step_times(*arrays, threads=args.threads) for _ in range(args.repeat)]
    medians = [(runs[0][k][0], statistics.median(run[k][1] for run in runs)) for k in range(len(runs[0]))]
    whole = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        executable.run(*arrays)
        whole.append(time.perf_counter() - started)
    total = sum(seconds for _, seconds in medians)
    print(f"{path}: target {config.cpu}, {args.threads} thread(s), {len(medians)} steps; steps one at a time {total * 1e3:.3f} ms, a whole run {statistics.median(whole) * 1e3:.3f} ms")
    print(f"{'step':>5} {'ms':>8} {'share':>6}  instruction")
    order = sorted(range(len(medians)), key=lambda k: -medians[k][1])
    for k in order[: args.top]:
        name, seconds = medians[k]
        print(f"{k:5d} {seconds * 1e3:8.3f} {seconds / total:6.1%}  {name}  {describe(by_name.get(name))}  {by_name[name].shape if name in by_name else ''}")
    kinds: dict[str, list[float]] = defaultdict(list)
    for name, seconds in medians:
        kinds[describe(by_name.get(name))].append(seconds)
    print("\nby kind:")
    for kind, times in sorted(kinds.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {sum(times) * 1e3:8.3f} ms {sum(times) / total:6.1%}  {len(times):4d} x {kind}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
