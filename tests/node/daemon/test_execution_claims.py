"""An execution process that lies about what it ran: the daemon signs nothing of a statement
for another module, other inputs or another compiler identity than the job's, and stores
none of its outputs. (The outputs' bytes are checked against their digests as they arrive:
tests/node/daemon/test_execution_isolation.py and sandbox.py.)"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

import pytest

from attest import LinkerRecord, Statement
from attest.digests import sha256_hex
from attest.keys import generate_private_key
from harness.fixture_data import Fixture
from node.daemon.config import Limits
from node.daemon.job_checks import InputRecords
from node.daemon.sandbox import ExecutionDied
from node.daemon.store import JobStore
from node.daemon.worker import WorkerPool
from node.errors import JobRejected
from node.tracing.statement import tensor_records

MLP = Fixture("mlp_softmax")


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerPool]:
    pool = WorkerPool(JobStore(tmp_path_factory.mktemp("claims")), generate_private_key(), Limits(), workers=1)
    yield pool
    pool.stop()


def _tampered(statement: Statement, change: Callable[[object], object]) -> Statement:
    execution = change(statement.predicate.deterministic)
    return Statement.build(dataclasses.replace(statement.predicate, deterministic=execution))


LIES: dict[str, tuple[Callable[[object], object], str]] = {
    "another module": (lambda e: dataclasses.replace(e, program=dataclasses.replace(e.program, source_hash="0" * 64)), "another module or other inputs"),
    "fewer inputs": (lambda e: dataclasses.replace(e, inputs=e.inputs[1:]), "another module or other inputs"),
    "another input": (lambda e: dataclasses.replace(e, inputs=(dataclasses.replace(e.inputs[0], digest="0" * 64), *e.inputs[1:])), "another module or other inputs"),
    "another target": (lambda e: dataclasses.replace(e, compiler=dataclasses.replace(e.compiler, target=dataclasses.replace(e.compiler.target, cpu="x86-64-v2"))), "another compiler identity"),
    "a linker": (lambda e: dataclasses.replace(e, compiler=dataclasses.replace(e.compiler, linker=LinkerRecord("nvJitLink", "13.5"))), "another compiler identity"),
}


def test_a_statement_of_what_the_job_ran_is_signed(pool: WorkerPool) -> None:
    blobs = pool.store.blobs
    module, inputs = blobs.put(MLP.module_text.encode()), [blobs.put(p.read_bytes()) for p in MLP.input_paths()]
    result = pool.execute_bound(module, inputs, job_id="honest", chain_id=None, contract=None, store_blobs=False)
    execution = result.statement.predicate.deterministic
    assert execution.program.source_hash == module
    # The inputs' records are the daemon's, and they are the digests of the bound inputs.
    assert execution.inputs == tensor_records(MLP.inputs(), "in")


def test_input_records_are_digested_once_per_input_blob(pool: WorkerPool) -> None:
    blobs = pool.store.blobs
    summary = pool.check_module(MLP.module_text.encode())
    data = [p.read_bytes() for p in MLP.input_paths()]
    digests = [blobs.put(d) for d in data]
    records = InputRecords()
    first = records.of(summary.parameter_shapes, digests, data, pool.limits)
    assert first == tensor_records(MLP.inputs(), "in")
    # Known blobs are not decoded again: their bytes are the digest's (the blob store checks).
    assert records.of(summary.parameter_shapes, digests, [b""] * len(data), pool.limits) == first
    # A blob not seen before is checked against its parameter as at intake.
    with pytest.raises(JobRejected, match="input 0"):
        records.of(summary.parameter_shapes, ["f" * 64, *digests[1:]], [b"not npy", *data[1:]], pool.limits)


@pytest.mark.parametrize("lie", sorted(LIES))
def test_a_statement_of_something_else_is_refused(pool: WorkerPool, lie: str, monkeypatch: pytest.MonkeyPatch) -> None:
    blobs = pool.store.blobs
    module, inputs = blobs.put(MLP.module_text.encode()), [blobs.put(p.read_bytes()) for p in MLP.input_paths()]
    honest = pool.executions.execute(pool._request(module, inputs, "lying", None, None))
    change, message = LIES[lie]
    answer = dataclasses.replace(honest, statement=_tampered(honest.statement, change))
    monkeypatch.setattr(pool.executions, "execute", lambda request: answer)
    with pytest.raises(ExecutionDied, match=message):
        pool.execute_bound(module, inputs, job_id="lying", chain_id=None, contract=None)
    # Nothing of it was stored: neither an output nor an envelope.
    assert not any(blobs.has(sha256_hex(data)) for data in answer.outputs)


def test_a_job_whose_input_does_not_fit_its_parameter_is_refused_before_it_is_sent(pool: WorkerPool) -> None:
    """What the chain executor checks before it claims a job (`check_bound`) and every run's
    request: the inputs against the module's parameters, named, with no process asked."""
    blobs = pool.store.blobs
    module, inputs = blobs.put(MLP.module_text.encode()), [blobs.put(p.read_bytes()) for p in MLP.input_paths()]
    wrong = blobs.put(b"\x93NUMPY not an array")
    with pytest.raises(JobRejected, match="input 0"):
        pool.check_bound(module, [wrong, *inputs[1:]])
    with pytest.raises(JobRejected, match="module takes"):
        pool.execute_bound(module, inputs[1:], job_id="short", chain_id=None, contract=None)
