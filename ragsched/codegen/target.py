"""Which CPU generated code is for: this host, or a named x86-64 feature level.

Machines differ (AVX2 with 8 float32 lanes, AVX-512 with 16), so a schedule's vector width, the
autoscheduler's choices and the machine code all depend on the target. ``compile(target="cpu")`` means
the default target: the host, unless the environment variable ``RAGSCHED_CPU`` names a level
(``RAGSCHED_CPU=x86-64-v3``), which is how a whole process (tests, a tuning run and its workers) is pinned
to one width. ``compile(target="cpu:x86-64-v3")`` pins one kernel. A level is compiled for only where
this host can run it (its code is loaded into this process), checked from the host's CPU features.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from dataclasses import dataclass

ENV = "RAGSCHED_CPU"

_V2 = ("cx16", "popcnt", "sahf", "sse3", "sse4.1", "sse4.2", "ssse3")
_V3 = _V2 + ("avx", "avx2", "bmi", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
#: the x86-64 micro-architecture levels (LLVM knows them as CPU names): vector bits, features they need
LEVELS: dict[str, tuple[int, tuple[str, ...]]] = {
    "x86-64": (128, ("sse2",)),
    "x86-64-v2": (128, _V2),
    "x86-64-v3": (256, _V3),
    "x86-64-v4": (512, _V4),
}


#: vector register width in bits -> the name tuned schedules are kept under
ISAS = {512: "avx512", 256: "avx2", 128: "sse"}


@dataclass(frozen=True)
class CpuTarget:
    """A CPU to generate code for: ``cpu`` and ``features`` as LLVM names them ("" for a level, whose CPU
    name implies its features), the widest vector register in bits, and the features it needs."""

    name: str  # "host" or a level
    cpu: str
    features: str
    vector_bits: int
    needs: tuple[str, ...] = ()
    #: float32 exp, log, exp2, log2 and pow by shorter code, to a looser bound (docs/language.md): only when
    #: asked (``compile(fast_math=True)``, ``cpu:host+fast_math``)
    fast_math: bool = False

    @property
    def text(self) -> str:
        """How ``compile(target=...)`` spells it."""
        return f"cpu:{self.name}" + (FAST_MATH if self.fast_math else "")

    def natural_vector_size(self, dtype) -> int:
        """Lanes of ``dtype`` in one vector register (Halide's ``natural_vector_size``)."""
        return max(1, self.vector_bits // max(8, dtype.bits))

    def has(self, feature: str) -> bool:
        """Whether code for this target may use ``feature`` (LLVM's name): a level that needs it, or a CPU
        whose features list it."""
        return feature in self.needs or f"+{feature}" in self.features.split(",")

    @property
    def isa(self) -> str:
        """The vector instruction set by its width (``ISAS``): tuned schedules are kept per width
        (``schedules/<isa>/``), as tile sizes and vector splits tuned for one are slow on another."""
        return ISAS.get(self.vector_bits, "sse")

    def describe(self) -> str:
        """For headers of test and benchmark output: ``rocketlake, 512-bit vectors (16 float32 lanes)``."""
        what = self.cpu if self.name == "host" else f"{self.name} (pinned)"
        return f"{what}, {self.vector_bits}-bit vectors ({self.vector_bits // 32} float32 lanes)"


@functools.cache
def _host_cpu() -> tuple[str, str, frozenset[str]]:
    import llvmlite.binding as llvm

    llvm.initialize_native_target()
    features = llvm.get_host_cpu_features()
    return llvm.get_host_cpu_name(), features.flatten(), frozenset(k for k, on in features.items() if on)


def host_features() -> frozenset[str]:
    """The CPU features of this machine, by LLVM's names (``avx2``, ``avx512f``, ...)."""
    return _host_cpu()[2]


def host() -> CpuTarget:
    """This machine's CPU, as LLVM reads it."""
    cpu, flat, have = _host_cpu()
    bits = 512 if "avx512f" in have else 256 if "avx" in have else 128
    return CpuTarget("host", cpu, flat, bits)


def level(name: str) -> CpuTarget:
    if name not in LEVELS:
        raise ValueError(f"target cpu:{name}: unknown CPU; use cpu:host or one of the x86-64 levels "
                         f"({', '.join('cpu:' + n for n in LEVELS)})")
    bits, needs = LEVELS[name]
    return CpuTarget(name, name, "", bits, needs)


@functools.cache
def gpu_present() -> bool:
    """Whether CuPy is installed and sees a CUDA device."""
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no CuPy, no driver, no device
        return False


def missing_features(t: CpuTarget) -> list[str]:
    """The features ``t`` needs that this host lacks (its code would stop at an illegal instruction)."""
    return sorted(set(t.needs) - host_features())


def can_run(t: CpuTarget | str) -> bool:
    return not missing_features(parse(t) if isinstance(t, str) else t)


def default() -> CpuTarget:
    """The target of ``target="cpu"``: ``RAGSCHED_CPU`` when it is set, else the host."""
    name = os.environ.get(ENV, "").strip()
    if not name or name == "host":
        return host()
    if name not in LEVELS:
        raise ValueError(f"the environment variable {ENV}={name!r} names no CPU; use host or one of "
                         f"{', '.join(LEVELS)}")
    return level(name)


#: how a CUDA kernel runs: on a GPU through CuPy, or on the CPU in the GPU emulator (``codegen/gpu/emulate``)
CUDA_DEVICES = ("gpu", "emulate")


@dataclass(frozen=True)
class CudaTarget:
    """An NVIDIA GPU: code is CUDA C compiled for ``arch``; ``device`` says where calls run (``"gpu"``,
    or ``"emulate"``: the same lowered kernels on the CPU, with races and bounds checked)."""

    arch: str = "sm_90"
    device: str = "gpu"
    vector_bits: int = 128  # one float4

    @property
    def text(self) -> str:
        return "cuda" if self.device == "gpu" else f"cuda ({self.device})"

    @property
    def name(self) -> str:
        return f"cuda-{self.arch}"

    def natural_vector_size(self, dtype) -> int:
        return max(1, self.vector_bits // max(8, dtype.bits))

    def describe(self) -> str:
        return f"CUDA {self.arch} ({'emulated on the CPU' if self.device == 'emulate' else 'on a GPU'})"


def parse(target, device: str | None = None) -> CpuTarget | CudaTarget:
    """``None`` or ``"cpu"``: the default; ``"cpu:host"``; ``"cpu:x86-64-v3"`` (a level); a CpuTarget;
    ``"cuda"`` or ``"cuda:sm_80"`` (with ``device`` "gpu" or "emulate"); a CudaTarget."""
    if isinstance(target, CudaTarget):
        return target if device is None else CudaTarget(target.arch, _device(device))
    if device is not None and not (isinstance(target, str) and target.startswith("cuda")):
        raise ValueError(f"device={device!r} applies to target='cuda' only, not {target!r}")
    if isinstance(target, CpuTarget):
        return target
    if target is None or target == "cpu":
        return default()
    if target == "cpu" + FAST_MATH:
        return dataclasses.replace(default(), fast_math=True)
    if not isinstance(target, str):
        raise TypeError(f"target must be a string such as 'cpu', 'cpu:x86-64-v3' or 'cuda', got {target!r}")
    kind, _, name = target.partition(":")
    if kind == "cuda":
        arch = name or "sm_90"
        if not (arch.startswith("sm_") and arch[3:].isdigit() and 75 <= int(arch[3:]) <= 121):
            raise ValueError(f"target {target!r}: unknown GPU architecture {arch!r}; use cuda:sm_75 ... cuda:sm_121")
        return CudaTarget(arch, _device(device or "gpu"))
    fast = name.endswith(FAST_MATH)
    name = name.removesuffix(FAST_MATH)
    if kind != "cpu" or not name:
        raise ValueError(f"target {target!r} is not supported; use 'cpu', 'cpu:host', 'cpu:<level>' "
                         f"({', '.join(LEVELS)}), with '{FAST_MATH}' or not, or 'cuda'")
    t = host() if name == "host" else level(name)
    return dataclasses.replace(t, fast_math=True) if fast else t


#: the suffix of a CPU target whose float32 transcendentals are the fast ones
FAST_MATH = "+fast_math"


def with_fast_math(target, fast_math: bool):
    """``target`` (parsed) with its fast_math flag set as asked; a ValueError for a CUDA target, whose
    math functions are CUDA's own."""
    t = parse(target)
    if not fast_math:
        return t
    if isinstance(t, CudaTarget):
        raise ValueError(f"fast_math=True applies to CPU targets only, not {t.text!r}")
    return dataclasses.replace(t, fast_math=True)


def _device(device) -> str:
    if device not in CUDA_DEVICES:
        raise ValueError(f"device must be one of {', '.join(map(repr, CUDA_DEVICES))}, got {device!r}")
    return device


def is_gpu(target) -> bool:
    return isinstance(target, CudaTarget)


def runnable(target, device: str | None = None) -> CpuTarget | CudaTarget:
    """``parse(target)``, refused with a ValueError when this host cannot run its code."""
    t = parse(target, device)
    if isinstance(t, CudaTarget):
        if t.device == "gpu" and not gpu_present():
            raise ValueError("target 'cuda': this machine has no CUDA GPU (or no CuPy: pip install 'ragsched[cuda]'); "
                             "compile(target='cuda', device='emulate') runs the same kernels on the CPU")
        return t
    missing = missing_features(t)
    if missing:
        raise ValueError(f"target {t.text} needs CPU features this host ({host().cpu}) lacks: "
                         f"{', '.join(missing)}; its code could not run here")
    return t


def _model_name() -> str:
    """The CPU's marketing name (Linux /proc/cpuinfo), or what ``platform`` knows."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_summary() -> dict:
    """What every benchmark prints and records beside its figures: the host's CPU and vector width, and
    the target the figures were compiled for."""
    t = default()
    return {"cpu_model": _model_name(), "llvm_cpu": host().cpu, "host_vector_bits": host().vector_bits,
            "target": t.text, "target_vector_bits": t.vector_bits, "isa": t.isa,
            "float32_lanes": t.vector_bits // 32, "cores": os.cpu_count()}


def machine_line() -> str:
    s = machine_summary()
    pinned = "" if default() == host() else f"; compiled for {s['target']} ({s['target_vector_bits']}-bit)"
    return (f"host: {s['cpu_model']} (LLVM: {s['llvm_cpu']}), {s['host_vector_bits']}-bit vectors "
            f"({s['host_vector_bits'] // 32} float32 lanes), {s['cores']} cores{pinned}")
