"""LLVM's work on one module: the target machine, LLVM's optimization pipeline and object
emission, given the machine as plain values. It imports llvmlite alone, so an LLVM worker
process (llvm_workers.py) starts in about a tenth of a second; compiler/codegen/target.py
derives the machine from a CompilerConfig.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import llvmlite.binding as llvm


@dataclass(frozen=True)
class Machine:
    """What LLVM is told of the target: its triple, processor, features and optimization
    level (0..3)."""

    triple: str
    processor: str
    features: str
    opt_level: int


# LLVM's O3 pipeline, less two passes that cost compile time and buy our IR nothing (measured
# with llvmlite's set_time_passes on the bench corpus, 512-bit vectors):
# - the SLP vectorizer: 30% of BERT's optimization time; it changes only the entry's stores of
#   buffer pointers, since every kernel is already written in vectors;
# - loop strength reduction, in code generation: 18% of ResNet-18's LLVM time and 28% of the
#   corpus's; it only rewrites integer address arithmetic, and sgemm and the models ran as fast
#   without it.
# Neither pass may change a floating-point value (the IR has no fast-math), so the pipeline
# decides speed and binary_hash only. The option is LLVM's own, process-wide; every process
# that compiles sets it once here, before its first target machine.
SLP_VECTORIZATION = False
LLVM_OPTIONS = ("-disable-lsr",)


def pipeline_identity() -> dict[str, object]:
    """What decides the objects LLVM makes besides the IR and the machine: LLVM's version and
    the pipeline's settings above (a kernel library's content address includes it)."""
    return {"llvm": ".".join(map(str, llvm.llvm_version_info)), "slp": SLP_VECTORIZATION, "options": list(LLVM_OPTIONS)}


@lru_cache(maxsize=1)
def _initialize() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    for option in LLVM_OPTIONS:
        llvm.set_option("vxla", option)


def target_machine(machine: Machine) -> llvm.TargetMachine:
    """LLVM's target machine (position-independent code). RuntimeError: this LLVM has no
    target for the triple."""
    _initialize()
    target = llvm.Target.from_triple(machine.triple)
    return target.create_target_machine(
        cpu=machine.processor, features=machine.features, opt=machine.opt_level, reloc="pic", codemodel="default"
    )


def optimized_module(ir_text: str, machine: Machine) -> tuple[llvm.ModuleRef, llvm.TargetMachine]:
    """Parses and verifies IR text, then runs LLVM's standard pipeline at the machine's level,
    tuned as above (no fast-math exists in the IR, so no pass may change a floating-point
    value)."""
    _initialize()
    module = llvm.parse_assembly(ir_text)
    module.triple = machine.triple
    target = target_machine(machine)
    module.data_layout = str(target.target_data)
    module.verify()
    tuning = llvm.create_pipeline_tuning_options(speed_level=machine.opt_level)
    tuning.slp_vectorization = SLP_VECTORIZATION
    builder = llvm.create_pass_builder(target, tuning)
    builder.getModulePassManager().run(module, builder)
    return module, target


def object_of(ir_text: str, machine: Machine) -> bytes:
    """The object file LLVM makes of IR text."""
    module, target = optimized_module(ir_text, machine)
    return target.emit_object(module)


def assembly_of(ir_text: str, machine: Machine) -> str:
    """The optimized assembly of IR text (for inspection and tests)."""
    module, target = optimized_module(ir_text, machine)
    return target.emit_assembly(module)


# --- a worker process (compiler/codegen/llvm_workers.py) -------------------------------------
# Once LLVM is loaded the worker writes READY. A request is a 4-byte length, a JSON header (the Machine and the IR's length) and the IR
# text; the answer is one byte (b"O": the object follows; b"E": an error message follows), an
# 8-byte length and the bytes.


READY = b"R"


def _read_exactly(stream, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError
    return data


def serve(requests, answers) -> None:
    """Compiles requests from `requests` into answers on `answers` until the input ends."""
    import json

    while True:
        try:
            header = json.loads(_read_exactly(requests, int.from_bytes(_read_exactly(requests, 4), "big")))
            ir_text = _read_exactly(requests, header.pop("ir_bytes")).decode("utf-8")
        except EOFError:
            return
        try:
            kind, payload = b"O", object_of(ir_text, Machine(**header))
        except Exception as exc:  # noqa: BLE001 - the parent raises it, by name, as its own
            kind, payload = b"E", f"{type(exc).__name__}: {exc}".encode()
        answers.write(kind + len(payload).to_bytes(8, "big") + payload)
        answers.flush()


if __name__ == "__main__":
    import os
    import sys

    # Answers go to the original stdout; anything printed on the way goes to stderr.
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    _initialize()
    try:
        answers.write(READY)  # started: LLVM is loaded
        answers.flush()
        serve(sys.stdin.buffer, answers)
    except BrokenPipeError:
        # The compiling process has gone (it exited, or compiled the parts itself): no one
        # waits for an answer, and flushing at exit would only fail again.
        os._exit(0)
