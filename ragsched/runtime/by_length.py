"""A pipeline compiled under ``rs.SchedulesByLength``: one Kernel per length class, one picked per call.

The pick reads the call's lengths Inputs only (their mean: ``schedule.by_length.mean_length``); the
Kernel it picks checks every argument as it always does, so a bad call is refused by the same errors.
"""

from __future__ import annotations

from ..codegen import target as targets
from ..schedule.by_length import SchedulesByLength, mean_length
from .compiler import CompileStats


class KernelsByLength:
    """Called like a Kernel; ``kernels[k]`` runs the calls of length class ``schedules.classes[k]``."""

    def __init__(self, schedules: SchedulesByLength, kernels, lengths: list[str], wall_s: float | None = None):
        self.schedules = schedules
        self.kernels = tuple(kernels)
        self._lengths = tuple(lengths)
        self._wall_s = wall_s  # the compile's wall time, its classes made side by side

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
    def stats(self) -> CompileStats:
        """The classes' compiles together: each step's times summed, the wall time of the whole (the
        classes overlap: ``total_s``), and the cache the least cached one came from (``kernels[k].stats``
        for one). The steps of classes a forked copy compiled (``forked.py``) are not in the sums: this
        process took those from the disk cache, and the wall time is what they cost it."""
        every = [k.stats for k in self.kernels]

        def least(values, order):
            return max(values, key=lambda v: order.index(v) if v in order else len(order))

        return CompileStats(*(sum(getattr(s, f) for s in every) for f in ("lower_s", "codegen_s", "llvm_s", "load_s")),
                            cache=least([s.cache for s in every], ("memory", "disk", "miss")),
                            lowering=least([s.lowering for s in every], ("memory", "disk", "done")),
                            wall_s=self._wall_s)

    def __repr__(self) -> str:
        means = ", ".join(f"{c.mean_length:g}" for c in self.schedules.classes)
        return f"<KernelsByLength {self.kernels[0].kernel.name}: classes of mean length {means}>"

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
