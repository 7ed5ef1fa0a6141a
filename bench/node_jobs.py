"""The node's cost per job on one model: the same module and inputs run again and again
through the daemon's one execution path (`WorkerPool.execute_bound`: the request, the run
with op-level tracing in an execution process, the daemon's checks of its statement, the
signature), with a temporary store.

    .venv/bin/python bench/node_jobs.py MODEL_DIR [--jobs 8] [--threads 2]

MODEL_DIR holds `module.hlo` and the inputs, as `in0.npy`, `in1.npy`, ... (a test fixture)
or `inputs.npz` (bench/corpus.py's export). The first job compiles (from an empty compile
cache) and is reported alone; the others reuse the process's executable, and their median
is what a node pays per job of a model it serves. Printed with it, the two parts of a job
that are done once and then remembered: the module's parse and verification (done by the
checker process at intake, and by each execution process at its first job of the model),
and the inputs' tensor digests (the daemon's `InputRecords`: once per input blob, so a
model's weights are digested once, not in every job).

It asserts nothing about times (tests never time anything).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from attest.keys import generate_private_key  # noqa: E402
from compiler.api import bind_arguments, load_program  # noqa: E402
from node.daemon.config import Limits  # noqa: E402
from node.daemon.store import JobStore  # noqa: E402
from node.daemon.worker import WorkerPool  # noqa: E402
from node.tensors import npy_bytes  # noqa: E402
from node.tracing.statement import tensor_records  # noqa: E402


def load_model(directory: Path) -> tuple[bytes, list[bytes]]:
    """The module's bytes and the inputs' .npy bytes, in parameter order."""
    module = (directory / "module.hlo").read_bytes()
    if (directory / "inputs.npz").exists():
        with np.load(directory / "inputs.npz") as archive:
            return module, [npy_bytes(archive[f"in{i}"]) for i in range(len(archive.files))]
    paths = sorted(directory.glob("in*.npy"), key=lambda p: int(p.stem[2:]))
    return module, [p.read_bytes() for p in paths]


def _seconds(work) -> float:  # noqa: ANN001 - a no-argument callable
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", type=Path, help="a directory with module.hlo and in*.npy or inputs.npz")
    parser.add_argument("--jobs", type=int, default=8, help="jobs to run (default 8; the first compiles)")
    parser.add_argument("--threads", type=int, default=2, help="each job's worker threads (default 2)")
    args = parser.parse_args(argv)
    if args.jobs < 2:
        parser.error("--jobs: at least 2 (the first compiles)")
    module, inputs = load_model(args.model_dir)
    program = load_program(module)
    instructions = sum(len(c.instructions) for c in program.module.computations)
    parse_s = min(_seconds(lambda: load_program(module)) for _ in range(3))
    arrays = bind_arguments(program.parameter_shapes, [np.load(io.BytesIO(d)) for d in inputs])
    digest_s = min(_seconds(lambda: tensor_records(arrays, "in")) for _ in range(3))
    limits = Limits(max_flops=10**15, max_job_memory_bytes=32 << 30, max_tensor_bytes=4 << 30, max_module_bytes=256 << 20, job_wall_seconds=3600)
    with tempfile.TemporaryDirectory(prefix="vxla-node-jobs-") as scratch:
        pool = WorkerPool(JobStore(Path(scratch)), generate_private_key(), limits, workers=1, threads=args.threads)
        try:
            module_digest, input_digests = pool.store.blobs.put(module), [pool.store.blobs.put(d) for d in inputs]
            times = []
            for job in range(args.jobs):
                def one(job: int = job) -> None:
                    pool.execute_bound(module_digest, input_digests, job_id=f"bench-{job}", chain_id=None, contract=None, store_blobs=False)
                times.append(_seconds(one))
                print(f"  job {job + 1}/{args.jobs}: {times[-1]:.3f} s", file=sys.stderr, flush=True)
        finally:
            pool.stop()
    megabytes = sum(a.nbytes for a in arrays) / 1e6
    print(f"{args.model_dir.name}: {instructions} instructions, {len(arrays)} inputs ({megabytes:.1f} MB), {args.threads} threads")
    print(f"  first job (compiles):        {times[0]:8.3f} s")
    print(f"  later jobs, median:          {statistics.median(times[1:]):8.3f} s  (min {min(times[1:]):.3f}, max {max(times[1:]):.3f})")
    print(f"  module parse + verification: {parse_s:8.3f} s  (once per execution process)")
    print(f"  inputs' tensor digests:      {digest_s:8.3f} s  (once per input blob)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
