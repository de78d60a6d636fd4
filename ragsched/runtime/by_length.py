"""A pipeline compiled under ``rs.SchedulesByLength``: one Kernel per length class, one picked per call.

The pick reads the call's lengths Inputs only (their mean: ``schedule.by_length.mean_length``); the
Kernel it picks checks every argument as it always does, so a bad call is refused by the same errors.
"""

from __future__ import annotations

from ..codegen import target as targets
from ..schedule.by_length import SchedulesByLength, mean_length


class KernelsByLength:
    """Called like a Kernel; ``kernels[k]`` runs the calls of length class ``schedules.classes[k]``."""

    def __init__(self, schedules: SchedulesByLength, kernels, lengths: list[str]):
        self.schedules = schedules
        self.kernels = tuple(kernels)
        self._lengths = tuple(lengths)

    def kernel_for(self, **inputs):
        """The Kernel a call with these arguments runs."""
        return self.kernels[self.schedules.pick(mean_length(self._lengths, inputs))]

    def __call__(self, out=None, out_shape=None, **inputs):
        return self.kernel_for(**inputs)(out=out, out_shape=out_shape, **inputs)

    @property
    def program(self):
        return self.kernels[0].program

    @property
    def target(self):
        return self.kernels[0].target

    @property
    def threads(self):
        return self.kernels[0].threads

    @property
    def stats(self):
        """The compile statistics of each class's kernel."""
        return tuple(k.stats for k in self.kernels)

    def _per_class(self, texts, comment: str) -> str:
        return "\n".join(f"{comment} length class {k}: mean length {c.mean_length:g}\n{t}"
                         for k, (c, t) in enumerate(zip(self.schedules.classes, texts)))

    @property
    def source(self) -> str:
        """Each class's generated code, after a comment naming the class."""
        return self._per_class((k.source for k in self.kernels), "//" if targets.is_gpu(self.target) else ";")

    llvm_ir = source

    @property
    def assembly(self) -> str:
        return self._per_class((k.assembly for k in self.kernels), "#")

    def loop_nest(self) -> str:
        return self._per_class((k.loop_nest() for k in self.kernels), "#")
