"""A schedule with zero trials: fixed rules answer the search space's questions.

Rules (a first cut, not Mullapudi2016's analytic grouping): every Func at root (the search tries
computing producers per tile of their consumer, which the rules cannot yet weigh against recompute); pure
stages get tiles of 8 rows by 4 vectors, stages with a reduction a register tile of 4 rows by 2 vectors
with the reduction loops outside it, unrolled; the innermost loop is vectorized and the outermost loop
parallel; tiles keep whole tiles and the rest apart (``tail="split"``), or guard the rest in a Func
computed per tile of its consumer (whose region may be smaller than a tile); no loop padding.

The answers are the parameters of a trial, so the study can enqueue them as its first trial.
"""

from __future__ import annotations

from .space import FuncInfo, suggest


class RuleTrial:
    """Stands in for an Optuna trial: answers each question by the rules and remembers the answers."""

    def __init__(self, funcs: tuple[FuncInfo, ...]):
        self.params: dict = {}
        self._reduces = {f"{f.name}.s{s.stage}" for f in funcs for s in f.stages if s.rvars}
        self._single = {f.name for f in funcs if f.inlinable and len(f.consumers) == 1}

    def suggest_categorical(self, name: str, choices):
        func, _, what = name.rpartition(".")
        value = self._rule(func, what, choices)
        if value not in choices:
            value = choices[0]
        self.params[name] = value
        return value

    def _rule(self, owner: str, what: str, choices):
        reduces = owner in self._reduces
        rules = {
            "compute": "root",
            "tail": "guard" if owner.split(".s")[0] in self._single else "split",
            "pad": 1,
            "tile_y": 4 if reduces else 8,
            "tile_x": 2 if reduces else 4,
            "rvars_outside_tile": True,
            "vectorize": True,
            "unroll": reduces,
            "sort": False,
            "parallel": True,
        }
        return rules.get(what, choices[0])


def heuristic(funcs: tuple[FuncInfo, ...]):
    """(the rules' schedule, the trial parameters that give it)."""
    trial = RuleTrial(funcs)
    schedule = suggest(trial, funcs)
    return schedule, dict(trial.params)
