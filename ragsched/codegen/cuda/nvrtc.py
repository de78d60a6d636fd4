"""Compiling CUDA C with NVRTC (the ``nvidia-cuda-nvrtc`` wheel, through ctypes), with no GPU and no
driver: CuPy's own compile path asks the driver for the device's architecture, so it cannot run on a
machine without one. ptxas runs inside NVRTC (``-arch=sm_90`` gives a cubin); each kernel's registers,
shared memory and stack frame are read from the cubin (``cubin.py``), its spills from ptxas's verbose
report.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import re
import site
import sysconfig
from dataclasses import dataclass

from .cubin import KernelResources, figures


class NvrtcUnavailable(RuntimeError):
    """No NVRTC library: install the ``cuda`` extra (``pip install 'ragsched[cuda]'``)."""


class CudaCompileError(RuntimeError):
    """NVRTC refused the generated CUDA C; the message holds its log."""


def _candidates() -> list[str]:
    roots = [sysconfig.get_paths()["purelib"], *site.getsitepackages()]
    found = []
    for root in roots:
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
            found += sorted(glob.glob(os.path.join(root, sub, "libnvrtc.so*")))
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    found += sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc.so*")))
    return [f for f in found if "alt" not in os.path.basename(f) and "builtins" not in os.path.basename(f)]


@functools.cache
def library() -> ctypes.CDLL:
    for path in _candidates():
        folder = os.path.dirname(path)
        for b in sorted(glob.glob(os.path.join(folder, "libnvrtc-builtins.so*"))):
            if "alt" not in os.path.basename(b):
                ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)  # NVRTC dlopens it by name
                break
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    raise NvrtcUnavailable("NVRTC is not installed: pip install 'ragsched[cuda]' (the nvidia-cuda-nvrtc wheel)")


def available() -> bool:
    try:
        library()
        return True
    except NvrtcUnavailable:
        return False


@dataclass(frozen=True)
class Compiled:
    cubin: bytes
    log: str
    resources: dict[str, KernelResources]


def compile_cuda(source: str, arch: str = "sm_90", name: str = "ragsched.cu") -> Compiled:
    """``source`` compiled for ``arch`` (a cubin), with ptxas's figures per kernel."""
    lib = library()
    prog = ctypes.c_void_p()
    _check(lib, lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), name.encode(), 0, None, None), None)
    try:
        opts = [f"-arch={arch}".encode(), b"-std=c++17", b"--ptxas-options=-v", b"-default-device"]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        rc = lib.nvrtcCompileProgram(prog, len(opts), arr)
        log = _log(lib, prog)
        if rc != 0:
            raise CudaCompileError(f"NVRTC could not compile the generated CUDA C:\n{log}")
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), prog)
        buf = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(prog, buf), prog)
        return Compiled(buf.raw, log, resources(buf.raw, log))
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def _log(lib, prog) -> str:
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, buf)
    return buf.value.decode(errors="replace")


def _check(lib, rc: int, prog) -> None:
    if rc != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise CudaCompileError(f"NVRTC error {rc}: {lib.nvrtcGetErrorString(rc).decode()}")


def resources(cubin: bytes, log: str) -> dict[str, KernelResources]:
    """Each kernel's figures from the cubin, with its spills from ptxas's report; where the report does not
    name the kernel (NVRTC handed back no log), the spills are bounded by the stack frame, which holds
    them: the frame's bytes are given."""
    reported = parse_resources(log)
    out = {}
    for name, f in figures(cubin).items():
        r = reported.get(name)
        stores, loads = (r.spill_stores, r.spill_loads) if r is not None else (f.stack_bytes, f.stack_bytes)
        out[name] = KernelResources(f.registers, stores, loads, f.shared_bytes, f.stack_bytes)
    return out


def report(resources: dict[str, KernelResources]) -> str:
    """Per kernel figures as text, for when NVRTC hands back no ptxas report (read from the cubin; spills
    bounded by the stack frame)."""
    return "\n".join(f"{name}: {r.registers} registers, {r.shared_bytes} bytes shared memory, {r.stack_bytes} "
                     f"bytes stack frame (from the cubin: NVRTC gave no ptxas report)"
                     for name, r in sorted(resources.items()))


def version() -> str:
    """NVRTC's version, "major.minor"."""
    lib = library()
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def parse_resources(log: str) -> dict[str, KernelResources]:
    """ptxas's verbose report, per kernel: registers, spill bytes, shared memory, stack."""
    out, current, frame = {}, None, (0, 0, 0)
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current, frame = m.group(1), (0, 0, 0)
            continue
        m = _FRAME.search(line)
        if m:
            frame = tuple(int(x) for x in m.groups())
            continue
        m = _USED.search(line)
        if m and current is not None:
            out[current] = KernelResources(int(m.group(1)), frame[1], frame[2], int(m.group(2) or 0), frame[0])
    return out
