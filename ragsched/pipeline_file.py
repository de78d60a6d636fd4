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
        from .schedule import Schedule

        if isinstance(schedule, (str, Path)) and str(schedule).endswith(".py"):
            from .lang import schedulable

            apply_schedule = _schedule_function(Path(schedule))
            apply_schedule(schedulable(list(outs)))
            return outs
        if isinstance(schedule, (str, Path)):
            schedule = Schedule.from_json(Path(schedule).read_text())
        if not isinstance(schedule, Schedule):
            raise TypeError(f"schedule must be None, 'hand', a path or an rs.Schedule, got {schedule!r}")
        schedule.apply(list(outs))
        return outs

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


def _schedule_function(path: Path):
    if not path.is_file():
        raise FileNotFoundError(f"no schedule file {path}")
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    fn = namespace.get("apply_schedule")
    if not callable(fn):
        raise ValueError(f"{path} does not define apply_schedule(funcs)")
    return fn


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
    autoschedule`` writes ``directory/<isa>/name.json``): the one for ``target``'s vector instruction set
    (default: this process's target), else one tuned for another (it computes the same; its tiles and
    vector splits were measured on another machine), else None. ``path.parent.name`` says which."""
    from .codegen import target as targets

    own = targets.parse(target).isa
    here = Path(directory)
    found = [here / isa / f"{name}.json" for isa in [own] + sorted(set(targets.ISAS.values()) - {own})]
    return next((f for f in found if f.is_file()), None)
