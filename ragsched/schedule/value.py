"""Schedules as values: an ordered tuple of records, saved as JSON or as Python a person can edit.

A Schedule is compiled beside the Funcs' own records (``merged``) without changing them, so what one
compile does never depends on another; ``apply`` writes it onto Funcs for users who want that.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from .records import REGISTRY, Directive


@dataclass(frozen=True)
class Schedule:
    """An ordered tuple of directives; later records act on the loops earlier ones made."""

    directives: tuple[Directive, ...] = ()

    def __len__(self) -> int:
        return len(self.directives)

    def __iter__(self):
        return iter(self.directives)

    def __add__(self, other: Schedule) -> Schedule:
        return Schedule(self.directives + tuple(other.directives))

    def for_func(self, name: str) -> tuple[Directive, ...]:
        return tuple(d for d in self.directives if d.func == name)

    def merged(self, other: Schedule) -> Schedule:
        """These records, then those of ``other`` that they do not hold already (``new_records``): what
        ``compile(schedule=other)`` compiles for Funcs that carry this schedule, changing none of them."""
        existing: dict[str, list] = {}
        for d in self.directives:
            existing.setdefault(d.func, []).append(d)
        return Schedule(self.directives + new_records(existing, other))

    def apply(self, outputs) -> None:
        """Append these records to the schedules of the Funcs reachable from ``outputs`` (a Func, a list
        of Funcs or a Pipeline), checking each one as the equivalent method call would. Records a Func
        holds already are not added again (``new_records``), so applying a schedule twice is harmless.
        The front end does the writing (``Func._apply_schedule``): this layer does not know Funcs."""
        outs = getattr(outputs, "outputs", outputs)  # a Pipeline's
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        writer = getattr(outs[0], "_apply_schedule", None) if outs else None
        if writer is None:
            raise TypeError(f"Schedule.apply needs a Func, a list of Funcs or a Pipeline, got {outputs!r}")
        writer(self, outs)

    # -- serialisation
    def to_json(self, tuned_for: dict | None = None) -> str:
        """The records as JSON; ``tuned_for`` (what the autoscheduler measured on: the CPU and its vector
        width) goes beside them for the reader (``tuned_for``), and does not change the schedule."""
        head = {"ragsched_schedule": 1} | ({"tuned_for": tuned_for} if tuned_for else {})
        return json.dumps(head | {"directives": self.rows()}, indent=1)

    def rows(self) -> list[dict]:
        """The records as JSON rows (``from_rows`` reads them back)."""
        return [d.to_row() for d in self.directives]

    @staticmethod
    def from_json(text: str) -> Schedule:
        data = schedule_data(text)
        if "by_length" in data:
            raise ValueError("this schedule file holds schedules by length class: read it with "
                             "rs.SchedulesByLength.from_json (or rs.read_schedule)")
        return Schedule.from_rows(data.get("directives", []))

    @staticmethod
    def from_rows(rows) -> Schedule:
        out = []
        for k, row in enumerate(rows):
            row = dict(row)
            cls = REGISTRY.get(row.pop("op", None))
            if cls is None:
                raise ValueError(f"schedule entry {k}: unknown primitive {row!r}")
            out.append(cls.from_row(row, k))
        return Schedule(tuple(out))

    @staticmethod
    def tuned_for(text: str) -> dict | None:
        """What the schedule in JSON ``text`` was tuned on (``sched autoschedule`` records it), or None."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"not a schedule: invalid JSON ({err})") from None
        return data.get("tuned_for") if isinstance(data, dict) else None

    def to_python(self) -> str:
        """The same schedule as calls on the Funcs (``funcs`` maps names to Funcs and Inputs; a wrapper
        that ``in_`` makes is added to it)."""
        lines = ["def apply_schedule(funcs):",
                 '    """Apply this schedule; funcs maps names to Funcs and Inputs."""']
        if not self.directives:
            lines.append("    pass")
        if any(".layout(rs." in d.python_call() for d in self.directives):
            lines.append("    import ragsched as rs")
        for d in self.directives:
            lines += _wrapped("    " + d.python_call())
        return "\n".join(lines) + "\n"


def schedule_data(text: str) -> dict:
    """A schedule file's JSON object, checked to be one."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"not a schedule: invalid JSON ({err})") from None
    if not isinstance(data, dict) or data.get("ragsched_schedule") != 1:
        raise ValueError("not a ragsched schedule (missing 'ragsched_schedule': 1)")
    return data


def _wrapped(line: str, width: int = 120) -> list[str]:
    """``line`` (one call) as lines of at most ``width`` characters where it can be: broken after the
    commas between its arguments (inside its parentheses), the rest indented four more."""
    if len(line) <= width or "(" not in line:
        return [line]
    cont = " " * (len(line) - len(line.lstrip()) + 4)
    out, rest = [], line
    while len(rest) > width:
        cut = rest.rfind(", ", 0, width - 1)
        if cut <= len(cont) or rest.count("(", 0, cut) <= rest.count(")", 0, cut):
            break
        out.append(rest[:cut + 1])
        rest = cont + rest[cut + 2:]
    return out + [rest]


def new_records(existing: dict[str, list], given: Schedule) -> tuple[Directive, ...]:
    """The records of ``given`` that Funcs whose schedules are ``existing`` (by Func name) do not hold yet.
    Per Func: where its records in ``given`` begin with the ones it has, only the rest are new; where they
    are a beginning of them (or the same), none are; otherwise all are (and may then be refused, as the
    method calls would be). Whole-record comparison alone would be wrong: ``reorder(a, b)``, ``reorder(b,
    a)``, ``reorder(a, b)`` is not the same schedule without its last record."""
    by_func: dict[str, list] = {}
    for d in given.directives:
        by_func.setdefault(d.func, []).append(d)
    skip: dict[str, int] = {}
    for name, recs in by_func.items():
        have = list(existing.get(name, ()))
        if recs[:len(have)] == have or have[:len(recs)] == recs:
            skip[name] = min(len(have), len(recs))
    out, seen = [], dict.fromkeys(by_func, 0)
    for d in given.directives:
        seen[d.func] += 1
        if seen[d.func] > skip.get(d.func, 0):
            out.append(d)
    return tuple(out)
