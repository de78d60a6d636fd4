"""Pipeline files: a Python file with ``build()``, ``example_inputs(scale)`` and ``reference(**inputs)``.

A file may state ``TOLERANCE = (rtol, atol)``, how far its outputs may be from ``reference()`` (atol
relative to the largest |value|), where float32 rounding is not the whole story; the autoscheduler checks
candidates with it; and ``SCALES``, the names ``example_inputs`` takes (default "small" and "full").
A file may also define ``hand_schedule(funcs)`` (``funcs`` maps names to the Funcs and
Inputs of a fresh ``build()``), written by a person in the style of ``Schedule.to_python()``: ``--schedule hand``; and
``gpu_schedule(funcs)``, the same for the CUDA target: ``--schedule gpu``.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .lang import Func, Pipeline

REQUIRED = ("build", "example_inputs", "reference")


@dataclass
class PipelineFile:
    path: Path
    module: ModuleType

    @property
    def name(self) -> str:
        return self.path.stem

    def outputs(self, schedule=None) -> tuple[Func, ...]:
        """The outputs of a fresh ``build()``, with ``schedule`` applied: None (the default schedule),
        ``"hand"`` (the file's ``hand_schedule``), ``"gpu"`` (its ``gpu_schedule``), an ``rs.Schedule``, or
        the path of a schedule file: JSON, or Python defining ``apply_schedule(funcs)`` (what
        ``Schedule.to_python`` writes)."""
        out = self.module.build()
        outs = (out,) if isinstance(out, Func) else tuple(out)
        if schedule is None:
            return outs
        if isinstance(schedule, str) and schedule in ("hand", "gpu"):
            hand = getattr(self.module, f"{schedule}_schedule", None)
            if not callable(hand):
                raise ValueError(f"{self.path} has no {schedule}_schedule(funcs)")
            from .lang import schedulable

            hand(schedulable(list(outs)))
            return outs
        from .schedule import Schedule, SchedulesByLength

        if isinstance(schedule, (str, Path)):
            schedule = self.schedule_file(schedule)
        if callable(schedule):  # a Python schedule file's apply_schedule
            from .lang import schedulable

            schedule(schedulable(list(outs)))
            return outs
        if isinstance(schedule, SchedulesByLength):
            raise ValueError("schedules by length class are not records of one set of Funcs: use "
                             "pipeline(schedule), which compiles one kernel per class")
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be None, 'hand', a path or an rs.Schedule, got {schedule!r}")
        schedule.apply(list(outs))
        return outs

    def schedule_file(self, path):
        """A schedule file: JSON (an ``rs.Schedule`` or ``rs.SchedulesByLength``), or Python defining
        ``apply_schedule(funcs)`` (returned as that function) or ``SCHEDULES_BY_LENGTH``, a list of (mean
        length, function[, scale]) (returned as ``rs.SchedulesByLength``: each function's records on a fresh build)."""
        from .schedule import read_schedule

        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no schedule file {path}")
        if path.suffix != ".py":
            return read_schedule(path.read_text())
        namespace = _schedule_namespace(path)
        if "SCHEDULES_BY_LENGTH" in namespace:
            return self._by_length(namespace["SCHEDULES_BY_LENGTH"], path)
        fn = namespace.get("apply_schedule")
        if not callable(fn):
            raise ValueError(f"{path} defines neither apply_schedule(funcs) nor SCHEDULES_BY_LENGTH")
        return fn

    def _by_length(self, table, path):
        from .lang import Pipeline, schedulable
        from .schedule import LengthClass, SchedulesByLength

        if not isinstance(table, (list, tuple)) or not all(
                isinstance(row, (list, tuple)) and len(row) in (2, 3) and callable(row[1]) for row in table):
            raise ValueError(f"{path}: SCHEDULES_BY_LENGTH must be a list of (mean length, function[, scale])")
        classes = []
        for length, fn, *scale in table:
            outs = self.outputs()
            fn(schedulable(list(outs)))
            classes.append(LengthClass(length, Pipeline(list(outs)).schedule(), *scale))
        return SchedulesByLength(tuple(classes))

    @property
    def has_hand_schedule(self) -> bool:
        return self.has_schedule("hand")

    def has_schedule(self, kind: str) -> bool:
        """Whether the file defines ``{kind}_schedule(funcs)`` ("hand", "gpu")."""
        return callable(getattr(self.module, f"{kind}_schedule", None))

    @property
    def tolerance(self) -> float | None:
        """The largest error, relative to the output's largest |value|, the file says its outputs may
        differ from ``reference()`` by (``TOLERANCE = (rtol, atol)``: its atol), or None."""
        tol = getattr(self.module, "TOLERANCE", None)
        return None if tol is None else float(tol[1])

    def pipeline(self, schedule=None) -> Pipeline:
        """A Pipeline of ``outputs(schedule)``; schedules by length class (or a file of them) become its
        ``by_length``, compiled one kernel per class."""
        from .schedule import SchedulesByLength

        if isinstance(schedule, (str, Path)) and schedule not in ("hand", "gpu"):
            schedule = self.schedule_file(schedule)
        if isinstance(schedule, SchedulesByLength):
            return Pipeline(list(self.outputs()), by_length=schedule)
        return Pipeline(list(self.outputs(schedule)))

    @property
    def scales(self) -> tuple[str, ...]:
        """The names ``example_inputs`` takes: the file's ``SCALES``, else "small" and "full"."""
        return tuple(getattr(self.module, "SCALES", ("small", "full")))

    def inputs(self, scale: str = "small") -> dict:
        if scale not in self.scales:
            raise ValueError(f"scale {scale!r}: {self.path.name} has example inputs {', '.join(self.scales)}")
        return self.module.example_inputs(scale)

    def reference(self, inputs: dict):
        return self.module.reference(**inputs)


def _schedule_namespace(path: Path) -> dict:
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def load(path) -> PipelineFile:
    """Import a pipeline file by path, checking that it follows the convention."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no pipeline file {p}")
    name = f"ragsched_pipeline_{p.stem}"
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise ValueError(f"{p} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    missing = [f for f in REQUIRED if not callable(getattr(module, f, None))]
    if missing:
        raise ValueError(f"{p} does not define {', '.join(missing)}: a pipeline file needs build(), "
                         "example_inputs(scale) and reference(**inputs)")
    return PipelineFile(p, module)


def tuned_schedule(directory, name: str, target=None) -> Path | None:
    """The schedule ``sched autoschedule`` tuned for pipeline ``name`` under ``directory`` (``make
    autoschedule`` writes ``directory/<isa>/name.json``): the one tuned on ``target``'s CPU
    (``directory/<isa>/<cpu>/name.json``, ``cpu`` LLVM's name of the core: two cores of one vector width,
    with their own caches and latencies, may want different tiles) where there is one, else the one for
    its vector instruction set, else one tuned for another (it computes the same; its tiles and vector
    splits were measured on another machine), else None (default target: this process's).
    ``tuned_isa(path)`` says which instruction set."""
    from .codegen import target as targets

    t = targets.parse(target)
    here = Path(directory)
    found = [here / t.isa / t.cpu / f"{name}.json"]
    found += [here / isa / f"{name}.json" for isa in [t.isa] + sorted(set(targets.ISAS.values()) - {t.isa})]
    return next((f for f in found if f.is_file()), None)


def tuned_isa(path: Path) -> str:
    """The vector instruction set a schedule that ``tuned_schedule`` found was tuned for: its directory's
    name, or its parent's for one tuned on a named CPU."""
    from .codegen import target as targets

    path = Path(path)
    return path.parent.name if path.parent.name in targets.ISAS.values() else path.parent.parent.name
