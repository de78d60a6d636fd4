"""Schedules as data: an ordered list of small frozen records, one per primitive call.

A record names its Func, the stage it applies to (0 is the pure definition, k is ``update(k - 1)``)
and the loop variables by name, so a schedule can be saved, compared, hashed, mutated by a search and
applied to a freshly built pipeline. ``Schedule.to_python`` writes the same calls as code a person can
read and edit.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields

#: "auto" is "shift" for a pure definition and "guard" in an update, where "shift" and "pad" are refused:
#: they would apply the update twice to some points, or to points outside the region.
TAILS = ("auto", "guard", "shift", "pad", "split")


@dataclass(frozen=True)
class Directive:
    """Base of all schedule records."""

    func: str

    @property
    def op(self) -> str:
        return _OP_NAMES[type(self)]


@dataclass(frozen=True)
class Split(Directive):
    stage: int
    var: str
    outer: str
    inner: str
    factor: int
    tail: str = "guard"


@dataclass(frozen=True)
class Reorder(Directive):
    """Loop order of a stage, outermost first (NumPy's reading order, like the loop nest listing)."""

    stage: int
    vars: tuple[str, ...]


@dataclass(frozen=True)
class Fuse(Directive):
    stage: int
    outer: str
    inner: str
    fused: str


@dataclass(frozen=True)
class Vectorize(Directive):
    stage: int
    var: str


@dataclass(frozen=True)
class Unroll(Directive):
    stage: int
    var: str


@dataclass(frozen=True)
class Parallel(Directive):
    stage: int
    var: str


@dataclass(frozen=True)
class SortByLength(Directive):
    """Visit the values of loop ``var`` (a batch dim) longest entry first: the extent of the stage's
    ragged dims that depend on it decides (balanced parallel work, a short tail)."""

    stage: int
    var: str


@dataclass(frozen=True)
class Pad(Directive):
    """Round the extent of loop ``var`` (a pure Var not yet split) up to a multiple: loop padding. The
    padded points are computed into padded storage and never read by a valid point, so a split by a
    divisor of ``multiple`` has no tail."""

    stage: int
    var: str
    multiple: int


@dataclass(frozen=True)
class StorePadded(Directive):
    """Round the storage extent of dimension ``var`` up to a multiple: storage padding. For a ragged
    output every ragged dimension shares the rounding (its RaggedArray's ``pad``)."""

    var: str
    multiple: int


@dataclass(frozen=True)
class ComputeRoot(Directive):
    pass


@dataclass(frozen=True)
class ComputeInline(Directive):
    pass


@dataclass(frozen=True)
class ComputeAt(Directive):
    consumer: str
    var: str


@dataclass(frozen=True)
class StoreRoot(Directive):
    pass


@dataclass(frozen=True)
class StoreAt(Directive):
    consumer: str
    var: str


@dataclass(frozen=True)
class Bound(Directive):
    var: str
    min: int
    extent: int


@dataclass(frozen=True)
class SetEstimate(Directive):
    var: str
    min: int
    extent: int


@dataclass(frozen=True)
class ReorderStorage(Directive):
    """Storage order of a Func's dimensions, outermost first (the last one is contiguous), like
    ``Reorder``: Halide's ``reorder_storage`` lists them innermost first."""

    vars: tuple[str, ...]


@dataclass(frozen=True)
class Wrap(Directive):
    """Func ``func`` is a copy of ``wrapped`` (an Input or a Func) that ``consumer`` reads instead of
    ``wrapped`` (every consumer when ``consumer`` is empty): Halide's ``in()``. Scheduling the copy
    packs data, for example a strip of a matrix into contiguous memory at a tile."""

    wrapped: str
    consumer: str = ""


_OP_NAMES = {
    Split: "split", Reorder: "reorder", Fuse: "fuse", Vectorize: "vectorize", Unroll: "unroll",
    Parallel: "parallel", ComputeRoot: "compute_root", ComputeInline: "compute_inline", ComputeAt: "compute_at",
    StoreRoot: "store_root", StoreAt: "store_at", Bound: "bound", SetEstimate: "set_estimate",
    ReorderStorage: "reorder_storage", Wrap: "in", SortByLength: "sort_by_length", Pad: "pad",
    StorePadded: "store_padded",
}
_BY_OP = {v: k for k, v in _OP_NAMES.items()}


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
        holds already are not added again (``new_records``), so applying a schedule twice is harmless."""
        from ..snapshot import schedulable

        funcs = schedulable(outputs)
        existing = {name: f._schedule for name, f in funcs.items() if hasattr(f, "_schedule")}
        for d in new_records(existing, self):
            if isinstance(d, Wrap):
                if d.wrapped not in funcs:
                    raise ValueError(f"the schedule wraps {d.wrapped!r}, which is not in this pipeline")
                if d.consumer and d.consumer not in funcs:
                    raise ValueError(f"the schedule wraps {d.wrapped!r} for {d.consumer!r}, which is not in this "
                                     "pipeline")
                funcs[d.func] = funcs[d.wrapped].in_(funcs[d.consumer] if d.consumer else None, name=d.func)
                continue
            if d.func not in funcs:
                raise ValueError(f"the schedule names Func {d.func!r}, which is not in this pipeline "
                                 f"(its Funcs: {', '.join(sorted(funcs))})")
            funcs[d.func]._replay(d)

    # -- serialisation
    def to_json(self) -> str:
        rows = []
        for d in self.directives:
            row = {"op": d.op, **asdict(d)}
            if isinstance(d, (Reorder, ReorderStorage)):
                row["vars"] = list(d.vars)
            rows.append(row)
        return json.dumps({"ragsched_schedule": 1, "directives": rows}, indent=1)

    @staticmethod
    def from_json(text: str) -> Schedule:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"not a schedule: invalid JSON ({err})") from None
        if not isinstance(data, dict) or data.get("ragsched_schedule") != 1:
            raise ValueError("not a ragsched schedule (missing 'ragsched_schedule': 1)")
        out = []
        for k, row in enumerate(data.get("directives", [])):
            row = dict(row)
            cls = _BY_OP.get(row.pop("op", None))
            if cls is None:
                raise ValueError(f"schedule entry {k}: unknown primitive {row!r}")
            names = {f.name for f in fields(cls)}
            if set(row) != names and not (set(row) <= names and cls in (Split, Wrap)):
                raise ValueError(f"schedule entry {k} ({_OP_NAMES[cls]}): expected fields {sorted(names)}, "
                                 f"got {sorted(row)}")
            if cls in (Reorder, ReorderStorage):
                row["vars"] = tuple(row["vars"])
            out.append(cls(**row))
        return Schedule(tuple(out))

    def to_python(self) -> str:
        """The same schedule as calls on the Funcs (``funcs`` maps names to Funcs and Inputs; a wrapper
        that ``in_`` makes is added to it)."""
        lines = ["def apply_schedule(funcs):",
                 '    """Apply this schedule; funcs maps names to Funcs and Inputs."""']
        if not self.directives:
            lines.append("    pass")
        for d in self.directives:
            lines.append("    " + _call_text(d))
        return "\n".join(lines) + "\n"


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


def _stage(d) -> str:
    return f"funcs[{d.func!r}]" + (f".update({d.stage - 1})" if getattr(d, "stage", 0) else "")


def _call_text(d: Directive) -> str:
    s = _stage(d)
    if isinstance(d, Split):
        return f"{s}.split({d.var!r}, {d.outer!r}, {d.inner!r}, {d.factor}, tail={d.tail!r})"
    if isinstance(d, (Reorder, ReorderStorage)):
        return f"{s}.{d.op}({', '.join(map(repr, d.vars))})"
    if isinstance(d, Fuse):
        return f"{s}.fuse({d.outer!r}, {d.inner!r}, {d.fused!r})"
    if isinstance(d, (Vectorize, Unroll, Parallel, SortByLength)):
        return f"{s}.{d.op}({d.var!r})"
    if isinstance(d, (ComputeAt, StoreAt)):
        return f"{s}.{d.op}(funcs[{d.consumer!r}], {d.var!r})"
    if isinstance(d, Wrap):
        consumer = f"funcs[{d.consumer!r}]" if d.consumer else "None"
        return f"funcs[{d.func!r}] = funcs[{d.wrapped!r}].in_({consumer}, name={d.func!r})"
    if isinstance(d, (Pad, StorePadded)):
        return f"{s}.{d.op}({d.var!r}, {d.multiple})"
    if isinstance(d, (Bound, SetEstimate)):
        return f"{s}.{d.op}({d.var!r}, {d.min}, {d.extent})"
    return f"{s}.{d.op}()"
