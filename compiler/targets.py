"""The target rows: every pinned target and, for each architecture, how the backend and the
runtime treat its targets. Emitters and the runtime read these capabilities, never an
architecture's name; a new architecture is one more `Architecture` row here plus the modules
its capabilities name (docs/backend.md, "A new target").

A `TargetCpu` is a target a configuration may pin (a CPU, or a GPU architecture): its
triple, the LLVM features its code may use and its vector width. Its `Architecture` row is
shared by every target of that triple's architecture.
"""

from __future__ import annotations

from dataclasses import dataclass

X86_64_TRIPLE = "x86_64-unknown-linux-gnu"
AARCH64_TRIPLE = "aarch64-unknown-linux-gnu"
NVPTX_TRIPLE = "nvptx64-nvidia-cuda"
# The PTX ISA version of the assembly LLVM writes for NVIDIA targets (7.8: the first with
# sm_90), and the nvJitLink release that turns it into a cubin: another nvJitLink may emit
# other machine code from the same PTX, so it is part of a GPU config's identity and a
# different one is refused (compiler/codegen/nvptx.py), as another LLVM would be.
PTX_ISA = "ptx78"
NVJITLINK_VERSION = "13.5"


@dataclass(frozen=True)
class Linker:
    """The external program that turns the backend's output into the code object that runs
    and is hashed, by name and pinned release (none for CPU targets: vxla packs their ELF
    objects itself, compiler/codegen/objfile.py)."""

    name: str
    version: str


# Values of Architecture's capabilities, each read by one place:
# fp_environment (compiler/codegen/fp_environment.py): how a kernel entry pins the
# floating-point environment: "mxcsr" (x86's control register), "fpcr" (AArch64's), "none"
# (the device's instructions carry the rounding mode and no flush, fixed per instruction).
FP_ENVIRONMENTS = ("mxcsr", "fpcr", "none")
# gemm (compiler/codegen/dot_conv.py GemmBlocking): "library": cache-sized work items, each
# calling the shared gemm library with the shape as arguments; "per-thread": a work item per
# register block (a GPU thread), its loops written into the kernel.
GEMM_STRATEGIES = ("library", "per-thread")
# backend (compiler/codegen/backend.py): "native" runs the plan on the host's worker threads;
# "nvptx" is a grid entry per kernel linked to a cubin.
BACKENDS = ("native", "nvptx")
# device (compiler/runtime/devices.py): where the code runs: "host" (this process, loaded
# from an ELF object) or "cuda" (an NVIDIA GPU through its driver).
DEVICES = ("host", "cuda")


@dataclass(frozen=True)
class Architecture:
    """How the backend and the runtime treat every target of one LLVM architecture."""

    name: str  # the triple's first part, as LLVM names it
    triple: str
    # Feature names a configuration's `features` string may add or remove.
    known_features: frozenset[str]
    fp_environment: str
    # The feature that makes fused multiply-add one instruction; "" where every target has it
    # (without it the backend emulates fma exactly, since LLVM would call libm's fma).
    fma_feature: str
    # (feature, vector bits), widest first: the width of the first one a config may use; a
    # config using none fills `narrow_vector_bits`, or its CPU's width where that is 0.
    wide_vectors: tuple[tuple[str, int], ...]
    narrow_vector_bits: int
    # How many vector registers the code may use below 512-bit vectors and at 512 bits
    # (register blocking sizes its tiles to them; results never depend on either).
    vector_registers: int
    wide_vector_registers: int
    # Whether a vector load may assume its element type's alignment (else nothing: CPU vector
    # loads start at any element).
    element_aligned_loads: bool
    gemm: str
    # Whether separately compiled kernel libraries (compiler/codegen/kernel_library.py) are
    # linked into a program's code, as objects of their own.
    links_libraries: bool
    backend: str
    device: str
    linker: Linker | None = None

    def __post_init__(self) -> None:
        for name, value, allowed in (
            ("fp_environment", self.fp_environment, FP_ENVIRONMENTS),
            ("gemm", self.gemm, GEMM_STRATEGIES),
            ("backend", self.backend, BACKENDS),
            ("device", self.device, DEVICES),
        ):
            if value not in allowed:
                raise ValueError(f"architecture {self.name}: {name} {value!r} is not one of {allowed}")
        if self.gemm == "library" and not self.links_libraries:
            raise ValueError(f"architecture {self.name}: a gemm library needs links_libraries")

    @property
    def runs_on_host(self) -> bool:
        """Whether the code runs in this process's CPU (else on a device through a driver)."""
        return self.device == "host"


@dataclass(frozen=True)
class TargetCpu:
    """A target the compiler may pin, a CPU or a GPU architecture: its triple, the LLVM
    features its code may use (every one must be on a host before that code runs there) and
    its vector register width. A GPU target also names LLVM's processor (`llvm_cpu`) and the
    features always passed to LLVM (`llvm_features`: the PTX ISA version its assembly is
    written in), both part of the compiler's identity through the target's name."""

    name: str
    triple: str
    features: frozenset[str]
    vector_bits: int
    description: str
    llvm_cpu: str = ""
    llvm_features: str = ""

    @property
    def arch(self) -> str:
        return self.triple.split("-", 1)[0]

    @property
    def architecture(self) -> Architecture:
        return ARCHITECTURES[self.arch]

    @property
    def processor(self) -> str:
        """The CPU (processor) name LLVM is given."""
        return self.llvm_cpu or self.name


# The feature sets are LLVM's definitions of these CPUs (the x86-64 psABI levels; Arm's
# Neoverse cores), in LLVM's feature names, which are also what host detection reports. The
# AArch64 sets leave out the cores' system-control features (SSBS, DIT, SPE, RAS): they
# change no instruction the code generator emits, and hosts (QEMU among them) need not
# report them.
_X86_64_V2 = frozenset({"64bit", "cmov", "cx8", "fxsr", "mmx", "sse", "sse2", "cx16", "sahf", "crc32",
                        "popcnt", "sse3", "ssse3", "sse4.1", "sse4.2"})  # fmt: skip
_X86_64_V3 = _X86_64_V2 | {"avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"}
_X86_64_V4 = _X86_64_V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}
_NEOVERSE_N1 = frozenset({"fp-armv8", "neon", "crc", "lse", "rdm", "rcpc", "dotprod", "fullfp16",
                          "aes", "sha2", "ccpp"})  # fmt: skip
_NEOVERSE_V1 = _NEOVERSE_N1 | {"sve", "bf16", "i8mm", "fp16fml", "jsconv", "complxnum", "flagm",
                               "rcpc-immo", "sha3", "rand"}  # fmt: skip

ARCHITECTURES: dict[str, Architecture] = {
    row.name: row
    for row in (
        Architecture(
            "x86_64", X86_64_TRIPLE,
            known_features=_X86_64_V4 | {"avx512vnni", "avx512bf16", "avx512fp16", "avx512vbmi", "avx512vbmi2",
                                         "avx512ifma", "avx512bitalg", "avx512vpopcntdq", "avxvnni", "gfni", "vaes",
                                         "vpclmulqdq", "adx", "aes", "pclmul", "sha", "prfchw", "fma4", "xop", "sse4a",
                                         "tbm"},
            fp_environment="mxcsr", fma_feature="fma", wide_vectors=(("avx512f", 512), ("avx2", 256)),
            narrow_vector_bits=128, vector_registers=16, wide_vector_registers=32, element_aligned_loads=False,
            gemm="library", links_libraries=True, backend="native", device="host",
        ),
        Architecture(
            "aarch64", AARCH64_TRIPLE,
            known_features=_NEOVERSE_V1 | {"sve2", "sme", "mte", "pauth", "bti", "sb", "sm4", "lse2", "ssbs", "dit"},
            fp_environment="fpcr", fma_feature="", wide_vectors=(), narrow_vector_bits=0, vector_registers=32,
            wide_vector_registers=32, element_aligned_loads=False, gemm="library", links_libraries=True,
            backend="native", device="host",
        ),
        # A GPU target's code is fixed by its name: no feature may change it. A thread has
        # scalar registers only: 16 "vector registers" keep a work item's accumulators few.
        Architecture(
            "nvptx64", NVPTX_TRIPLE, known_features=frozenset(), fp_environment="none", fma_feature="",
            wide_vectors=(), narrow_vector_bits=0, vector_registers=16, wide_vector_registers=16,
            element_aligned_loads=True, gemm="per-thread", links_libraries=False, backend="nvptx", device="cuda",
            linker=Linker("nvJitLink", NVJITLINK_VERSION),
        ),
    )
}  # fmt: skip

TARGET_CPUS: dict[str, TargetCpu] = {
    cpu.name: cpu
    for cpu in (
        TargetCpu("x86-64-v2", X86_64_TRIPLE, _X86_64_V2, 128, "SSE4.2, no FMA"),
        TargetCpu("x86-64-v3", X86_64_TRIPLE, _X86_64_V3, 256, "AVX2 and FMA"),
        TargetCpu("x86-64-v4", X86_64_TRIPLE, _X86_64_V4, 512, "AVX-512"),
        TargetCpu("neoverse-n1", AARCH64_TRIPLE, _NEOVERSE_N1, 128, "Armv8.2 with NEON (Graviton2, Ampere Altra)"),
        TargetCpu("neoverse-v1", AARCH64_TRIPLE, _NEOVERSE_V1, 128, "Armv8.4 with SVE (Graviton3); SVE code gives the same bits at every vector length"),
        # GPU features are the compute capability the device must report exactly: a cubin
        # holds machine code for one architecture. Vector width 32: one f32 lane per thread.
        TargetCpu("nvptx-sm90", NVPTX_TRIPLE, frozenset({"sm_90"}), 32, "NVIDIA Hopper (H100, H200), compute capability 9.0", "sm_90", f"+{PTX_ISA}"),
        TargetCpu("nvptx-sm80", NVPTX_TRIPLE, frozenset({"sm_80"}), 32, "NVIDIA Ampere (A100), compute capability 8.0", "sm_80", f"+{PTX_ISA}"),
    )
}  # fmt: skip
