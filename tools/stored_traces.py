"""Writes tests/fixtures/traces/: signed traces of the mlp_softmax fixture in statement schema
1 (attest/statement.py), which the current vxla must still verify
(tests/node/cli/test_stored_traces.py):

- `cpu.v1.json`: x86-64-v3, op-level;
- `gpu.v1.json`: nvptx-sm90, its grid run on this host's CPU (the bits a GPU gives), with
  the linker recorded in schema 1's vendor field `nvjitlink_version`;
- `node.pub`: the public key that signed them (the private key is thrown away).

The committed ones were signed by the vxla that wrote schema 1 itself. A trace records
binary_hash, so a change of the machine code (golden hashes regenerated) makes them fail to
verify until they are made again with this tool (in schema 1, attest's own conversion):

  python tools/stored_traces.py
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

from attest import PREDICATE_TYPE_V1, key_id, sign_statement
from attest.keys import generate_private_key, public_key_pem
from compiler.api import compile_emulated_grid, compile_program, load_config, load_program
from harness.fixture_data import Fixture
from node.tracing.statement import build_statement

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "fixtures" / "traces"
FIXTURE = "mlp_softmax"


def main() -> int:
    fixture = Fixture(FIXTURE)
    program = load_program(fixture.module_text)
    inputs = fixture.inputs()
    signer = generate_private_key()
    TRACES.mkdir(parents=True, exist_ok=True)
    cpu = compile_program(program, load_config().with_target(cpu="x86-64-v3"), cache_dir=False, threads=1)
    gpu_config = load_config().with_target(cpu="nvptx-sm90")
    gpu = compile_program(program, gpu_config, cache_dir=False)
    runs = {
        "cpu": (cpu, cpu.run_traced(*inputs, threads=1)),
        "gpu": (gpu, compile_emulated_grid(program, gpu_config).run_traced(*inputs)),
    }
    for name, (executable, run) in runs.items():
        statement = build_statement(
            program, executable, inputs, run, job_id=f"stored-{name}", chain_id=None, contract=None,
            key_id=key_id(signer), threads=1, timings_ns={}, op_level=True,
        )
        statement = dataclasses.replace(statement, predicate_type=PREDICATE_TYPE_V1)
        with tempfile.NamedTemporaryFile("w", dir=TRACES, delete=False) as out:
            out.write(sign_statement(statement, signer).to_json() + "\n")
        Path(out.name).chmod(0o644)
        Path(out.name).replace(TRACES / f"{name}.v1.json")
    (TRACES / "node.pub").write_bytes(public_key_pem(signer.public_key()))
    print(f"wrote {', '.join(sorted(p.name for p in TRACES.iterdir()))} in {TRACES.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
