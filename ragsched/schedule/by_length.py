"""Schedules by length class: one schedule per class of inputs, the class picked per call by its lengths.

The best schedule of a ragged pipeline depends on its lengths: short entries want their vectors along a
fixed dimension (the heads) and small tiles that pad nothing, long ones wide tiles along the rows. One
schedule tuned on short and long inputs together is a compromise for both (attention tuned on MNLI's and
RACE's lengths took 32-wide score tiles, which pad CoLA's short sentences 66%). ``SchedulesByLength``
holds several schedules, each with the mean length of the inputs it was made for; a compiled pipeline
holds one kernel per class and runs, at each call, the one whose mean length is nearest the call's (by
ratio: boundaries at the geometric means of neighbouring classes). The mean length of a call is the mean
of the values of its lengths Inputs (``lens`` of ``Ragged("L", lens)``), which every ragged call passes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np

from .value import Schedule, schedule_data


@dataclass(frozen=True)
class LengthClass:
    """A schedule and the mean length of the inputs it was made for (``scale``: their name, for readers)."""

    mean_length: float
    schedule: Schedule
    scale: str | None = None


@dataclass(frozen=True)
class SchedulesByLength:
    """Schedules by length class, shortest first (``classes``); ``pick`` says which one a call runs."""

    classes: tuple[LengthClass, ...]

    def __post_init__(self):
        classes = tuple(self.classes)
        if not classes:
            raise ValueError("SchedulesByLength needs at least one length class")
        for k, c in enumerate(classes):
            if not isinstance(c, LengthClass):
                raise TypeError(f"length class {k} must be an rs.LengthClass, got {type(c).__name__}")
            if not isinstance(c.schedule, Schedule):
                raise TypeError(f"length class {k}: schedule must be an rs.Schedule, got {type(c.schedule).__name__}")
            if not (isinstance(c.mean_length, (int, float)) and math.isfinite(c.mean_length) and c.mean_length > 0):
                raise ValueError(f"length class {k}: mean_length must be a positive number, got {c.mean_length!r}")
        means = [c.mean_length for c in classes]
        if len(set(means)) != len(means):
            raise ValueError(f"two length classes have the same mean length ({sorted(means)})")
        object.__setattr__(self, "classes", tuple(sorted(classes, key=lambda c: c.mean_length)))

    def __len__(self) -> int:
        return len(self.classes)

    def pick(self, mean_length: float) -> int:
        """The index of the class whose mean length is nearest ``mean_length`` by ratio (the shortest class
        for a batch of empty or no entries)."""
        if not mean_length > 0:
            return 0
        return min(range(len(self.classes)), key=lambda k: abs(math.log(mean_length / self.classes[k].mean_length)))

    # -- serialisation
    def to_json(self, tuned_for: dict | None = None) -> str:
        head = {"ragsched_schedule": 1} | ({"tuned_for": tuned_for} if tuned_for else {})
        rows = [{"mean_length": c.mean_length} | ({"scale": c.scale} if c.scale else {})
                | {"directives": c.schedule.rows()} for c in self.classes]
        return json.dumps(head | {"by_length": rows}, indent=1)

    @staticmethod
    def from_json(text: str) -> SchedulesByLength:
        data = schedule_data(text)
        rows = data.get("by_length")
        if not isinstance(rows, list):
            raise ValueError("not a schedule by length class (no 'by_length' list): read it with rs.Schedule.from_json")
        out = []
        for k, row in enumerate(rows):
            if not isinstance(row, dict) or "mean_length" not in row:
                raise ValueError(f"length class {k}: needs 'mean_length' and 'directives'")
            out.append(LengthClass(row["mean_length"], Schedule.from_rows(row.get("directives", [])), row.get("scale")))
        return SchedulesByLength(tuple(out))

    def to_python(self) -> str:
        """One ``apply_schedule_<k>(funcs)`` per class and the table ``SCHEDULES_BY_LENGTH`` of (mean
        length, function[, scale]) that a pipeline file's loader reads."""
        parts = []
        for k, c in enumerate(self.classes):
            code = c.schedule.to_python().replace("def apply_schedule(", f"def apply_schedule_{k}(", 1)
            scale = f" (the {c.scale!r} inputs)" if c.scale else ""
            parts.append(f"# length class {k}: made for a mean length of {c.mean_length:g}{scale}\n{code}")
        table = ", ".join(f"({c.mean_length!r}, apply_schedule_{k}" + (f", {c.scale!r})" if c.scale else ")")
                          for k, c in enumerate(self.classes))
        return ("\n\n".join(parts) + "\n\n# a call runs the class whose mean length is nearest its own (by ratio)\n"
                f"SCHEDULES_BY_LENGTH = [{table}]\n")


def read_schedule(text: str) -> Schedule | SchedulesByLength:
    """A schedule file's JSON: an ``rs.Schedule``, or ``rs.SchedulesByLength`` where it holds classes."""
    return SchedulesByLength.from_json(text) if "by_length" in schedule_data(text) else Schedule.from_json(text)


def mean_length(names, inputs: dict) -> float:
    """The mean of the values of the lengths Inputs ``names`` in ``inputs`` (NumPy, CuPy or torch arrays,
    or lists; 0 for no entries): what picks a call's length class. One that is missing or not numbers
    counts as no entries (the kernel then refuses the call by name)."""
    values = []
    for n in names:
        a = _host(inputs.get(n))
        if a is None or a.dtype.kind not in "iuf":
            return 0.0
        values.append(a.ravel())
    joined = np.concatenate(values) if values else np.zeros(0)
    return float(joined.mean()) if joined.size else 0.0


def _host(value) -> np.ndarray | None:
    """``value`` as a NumPy array in host memory, or None."""
    if value is None:
        return None
    try:
        if hasattr(value, "__cuda_array_interface__") and hasattr(value, "get"):  # CuPy
            return np.asarray(value.get())
        if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch
            return value.detach().cpu().numpy()
        return np.asarray(value)
    except Exception:  # noqa: BLE001 - any object: the kernel's own checks name the problem
        return None
