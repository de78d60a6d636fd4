"""Pipeline files: a Python file with ``build()``, ``example_inputs(scale)`` and ``reference(**inputs)``."""

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

    def outputs(self) -> tuple[Func, ...]:
        out = self.module.build()
        return (out,) if isinstance(out, Func) else tuple(out)

    def pipeline(self) -> Pipeline:
        return Pipeline(list(self.outputs()))

    def inputs(self, scale: str = "small") -> dict:
        return self.module.example_inputs(scale)

    def reference(self, inputs: dict):
        return self.module.reference(**inputs)


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
