"""Kernels for tests that draw many schedules, most of them refused by their first call (a tile shifted
past a small image's edge): the call's checks run before LLVM does, so a refused schedule costs its
lowering only. The refusal is the ValueError the call would raise."""

from __future__ import annotations

from ragsched.runtime.kernel import Kernel, compile_pipeline


def checked_kernel(pipeline, inputs: dict, **compile_args):
    """``pipeline.compile(**compile_args)``, after checking that a call with ``inputs`` is not refused
    (raises the call's ValueError if it is)."""
    kern = compile_pipeline(pipeline, load=False, **compile_args)
    if isinstance(kern, Kernel):
        kern.check(**inputs)
        kern.load()
    return kern
