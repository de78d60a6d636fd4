"""The held-out suite stays held out: no module of the compiler (its rules, search space and defaults
included) names a held-out pipeline or one of its Funcs, so its figures measure work nobody tuned for."""

import importlib
import re

from pipelines.held_out import NAMES
from pipelines.held_out.ragged import NAMES as RAGGED
from tests import ROOT

MODULES = [f"pipelines.held_out.{n}" for n in NAMES] + [f"pipelines.held_out.ragged.{n}" for n in RAGGED]


def _func_names(module: str) -> set[str]:
    """The names of the Funcs a held-out pipeline builds that are its own: long enough not to be common
    words, and not also names in a bundled pipeline (blur_x, blur_y)."""
    from ragsched.lang import Pipeline

    out = importlib.import_module(module).build()
    program = Pipeline(list(out) if isinstance(out, (list, tuple)) else [out]).program()
    bundled = "".join(p.read_text() for p in (ROOT / "pipelines").glob("*.py"))
    return {f.name for f in program.functions if len(f.name) >= 6 and "_" in f.name and f.name not in bundled}


def test_no_compiler_module_names_a_held_out_pipeline():
    words = set(NAMES) | set(RAGGED)
    for module in MODULES:
        words |= _func_names(module)
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, words))) + r")\b")
    hits = []
    for path in sorted((ROOT / "ragsched").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if m := pattern.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)}")
    assert not hits, "held-out names in the compiler:\n" + "\n".join(hits)
