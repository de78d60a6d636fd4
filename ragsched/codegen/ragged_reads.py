"""Reads of ragged Inputs stay inside their entries: checked on the loop nest, per entry.

A RaggedArray is packed, so a read past ``lens[b]`` in entry b reads entry b + 1 (or past the end of
the buffer for the last one); the box check of other Inputs cannot see that, since the box over all b
is the padded one. So each read's first index must be a variable bound by a loop or a let; over the body
where that variable is fixed, bounds inference gives the box read in terms of it, and every ragged
dimension of that box must provably lie inside the entry's extent. What cannot be proven is refused.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra.bounds import Interval, prove
from ..algebra.simplify import simplify
from ..program import Program, dim_index, is_ragged
from . import ir
from .boxes import box_touched, touched_names
from .flat_loops import TABLE
from .ragged_domains import lengths_inputs, max_symbol


def check_ragged_reads(stmt: ir.Stmt, program: Program, facts) -> None:
    lengths = frozenset(lengths_inputs(program))
    for spec in program.inputs:
        if not any(map(is_ragged, spec.shape)):
            continue
        firsts = _first_indices(stmt, spec.name)
        for first in firsts:
            if not isinstance(first, E.Var):
                raise ValueError(f"Input {spec.name} is ragged and is read with first index {first}; read it with "
                                 "a Var as the first index (the entry), so that each entry's reads can be checked")
        variables = {f.name: f for f in firsts}
        for binding, lets, loops in _bindings(stmt, set(variables), []):
            box = box_touched(binding.body, spec.name, reads=True, facts=facts)
            if box is None:
                continue
            v = variables[binding.var if isinstance(binding, ir.For) else binding.name]
            # the lets around it (regions), put back exactly
            box = tuple(type(iv)(*(None if x is None else _put_lets_back(x, lets, facts) for x in (iv.lo, iv.hi)))
                        for iv in box)
            if box[0].lo != v or box[0].hi != v:
                raise ValueError(f"Input {spec.name} is ragged and is read for several entries inside the loop or "
                                 f"let {v.name}; cannot check its reads entry by entry")
            for k, s in enumerate(spec.shape):
                if not is_ragged(s):
                    continue
                extent = E.substitute(s, {dim_index(0): v})
                iv = box[k]
                ok = iv.lo is not None and iv.hi is not None and (
                    prove(E.le(E.const(0, iv.lo.dtype), iv.lo), _spans(iv.lo, loops, lets, facts), facts)
                    and _at_most(_last_if_any(iv, facts), E.sub(extent, 1), facts, lengths)
                    or _inside_unless_empty(iv, extent, binding, spec.name, lets, loops, facts, lengths))
                if not ok:
                    raise ValueError(f"Input {spec.name} is ragged: dimension {k} is read over [{iv.lo}, {iv.hi}] "
                                     f"in entry {v.name}, which cannot be shown to stay inside the entry's extent "
                                     f"{extent} (a loop padded with pad() reads past each entry: let it read a "
                                     f"copy, {spec.name}.in_(), which is computed over the entries only)"
                                     + _unshaped_hint(v.name, program))


def _unshaped_hint(loop: str, program: Program) -> str:
    """A hint where the read is in the loops of a Func with no ragged shape: without one, a Func is
    computed over its region's box, the longest entry's extent in every entry."""
    func = next((f for f in program.functions if loop.startswith(f"{f.name}.s")), None)
    if func is None or func.shape is not None and any(map(is_ragged, func.shape)):
        return ""
    return (f"; Func {func.name} has no ragged shape, so it is computed over the longest entry's extent in every "
            f"entry: declare one (shape=[B, L, ...] with the ragged extents its consumers read it over)")


def _inside_unless_empty(iv: Interval, extent: E.Expr, binding: ir.Stmt, name: str, lets: list, loops: dict,
                         facts, lengths) -> bool:
    """Whether the reads of ``iv`` stay inside a ragged dimension of ``extent`` points, proven in two cases:
    where the entry has a point, ``iv`` lies in [0, extent - 1] (a causal read, ``X[b, max(i - 1, 0)]``,
    reads index 0, which only an entry of at least one token has; a read clamped to the entry's own edge,
    ``X[b, clamp(i, 0, lens[b] - 1)]``, reads index -1 in an empty one); where it has none, the
    ``binding`` of the entry reads ``name`` only inside loops that then run no iteration (the loop over
    the entry's tokens), or is a flat loop's entry (which visits the valid tokens only)."""
    n = E.Var("ragged_reads.extent", extent.dtype)
    same = _entry_extents(binding, extent, lets, facts)

    def with_n(x: E.Expr) -> E.Expr:
        return E.transform(x, lambda m: n if m in same else m)

    nonempty = {**facts, n.name: Interval(E.const(1, n.dtype), None)}
    longest = _longest_of(extent, lengths)
    if longest is not None:  # an entry of n >= 1 points: the longest has at least as many
        nonempty[longest.name] = Interval(E.const(1, longest.dtype), None)
    lo = simplify(with_n(iv.lo), nonempty)
    spans = {v: Interval(*(simplify(with_n(x), nonempty) for x in (span.lo, span.hi)))
             for v, span in _spans(iv.lo, loops, lets, facts).items()}
    if not prove(E.le(E.const(0, lo.dtype), lo), spans, nonempty):
        return False
    hi = simplify(with_n(_last_if_any(iv, facts)), nonempty)
    spans = {v: Interval(*(simplify(with_n(x), nonempty) for x in (span.lo, span.hi)))
             for v, span in _spans(hi, loops, lets, facts).items()}
    if not _at_most(hi, simplify(E.sub(n, E.const(1, n.dtype)), nonempty), nonempty, lengths, spans):
        return False
    return _flat_entry(binding) or _no_reads_when_empty(binding.body, name, same, lets, facts, lengths) or \
        _inside_empty_loop(same, lets, loops, facts, lengths)


def _longest_of(extent: E.Expr, lengths: frozenset) -> E.Var | None:
    """The symbol of the longest length where ``extent`` is a read of a lengths Input, ``lens[b]`` (as
    ``bound_lengths`` leaves it, ``max(min(lens[b], lens.max), 0)``): then an entry of at least one point
    means a longest length of at least one (not so for other extents: ``5 - lens[b]``)."""
    x = extent.value if isinstance(extent, E.Cast) else extent
    if isinstance(x, E.Max) and isinstance(x.b, E.Const) and x.b.value == 0 and isinstance(x.a, E.Min):
        x = x.a.a if isinstance(x.a.b, E.Var) and x.a.b.name.endswith(".max") else x
    x = x.value if isinstance(x, E.Cast) else x
    return max_symbol(x.name) if isinstance(x, E.FuncRef) and x.name in lengths else None


def _entry_extents(binding: ir.Stmt, extent: E.Expr, lets: list, facts) -> frozenset:
    """``extent`` (the entry's, at the variable ``binding`` binds), and the same extent at the entry of
    the loops around where ``binding`` runs over that one entry: a producer computed per tile of its
    consumer runs its entry loop from ``out.b`` to ``out.b``, and the tile's loops are bounded by
    ``ws[out.b]`` where the producer's reads are checked against ``ws[blur_x.b]``."""
    if isinstance(binding, ir.For):
        first = _put_lets_back(binding.min, lets, facts)
        last = _put_lets_back(E.sub(E.add(binding.min, binding.extent), E.const(1, binding.min.dtype)), lets, facts)
        var = binding.var
        if last != first:
            return frozenset({extent})
    else:
        first, var = _put_lets_back(binding.value, lets, facts), binding.name
    v = E.Var(var, first.dtype)
    outer = simplify(E.transform(extent, lambda m: E.cast(m.dtype, first) if m == v else m), facts)
    return frozenset({extent, outer})


def _inside_empty_loop(extents: frozenset, lets: list, loops: dict, facts, lengths) -> bool:
    """Whether one of ``loops`` (around the binding of an entry) runs no iteration where ``extents``
    are 0: the loop over the tiles of the consumer's columns, none where the entry has none."""
    for span in loops.values():
        lo, hi = (E.transform(_put_lets_back(x, lets, facts), lambda m: E.const(0, m.dtype) if m in extents else m)
                  for x in (span.lo, span.hi))
        if _at_most(simplify(E.sub(hi, lo), facts), E.const(-1, lo.dtype), facts, lengths):
            return True
    return False


def _flat_entry(binding: ir.Stmt) -> bool:
    """Whether ``binding`` is the let of a flat loop's entry (read from its table of the entry of each valid
    position: an empty entry has no position, so it is never bound)."""
    return isinstance(binding, ir.LetStmt) and any(
        isinstance(n, E.Load) and TABLE in n.buffer and n.buffer.endswith(".row") for n in E.walk(binding.value))


def _no_reads_when_empty(s: ir.Stmt, name: str, extents: frozenset, lets: list, facts, lengths) -> bool:
    """Whether every read of ``name`` in ``s`` lies inside a loop whose extent (the lets around it put
    back) is at most 0 when ``extents`` (the entry's extent, as ``_entry_extents`` names it) are 0."""
    if name not in touched_names(s):
        return True
    if any(name in E.func_refs_by_name(e) for e in ir.exprs_of(s)):  # a read here, outside any such loop
        return False
    if isinstance(s, ir.For):
        runs = E.transform(_put_lets_back(s.extent, lets, facts),
                           lambda m: E.const(0, m.dtype) if m in extents else m)
        return _at_most(simplify(runs, facts), E.const(0, runs.dtype), facts, lengths) or \
            _no_reads_when_empty(s.body, name, extents, lets, facts, lengths)
    if isinstance(s, ir.LetStmt):
        return _no_reads_when_empty(s.body, name, extents, lets + [(s.name, s.value)], facts, lengths)
    return all(_no_reads_when_empty(t, name, extents, lets, facts, lengths) for t in ir.children(s))


def _last_if_any(iv: Interval, facts) -> E.Expr:
    """The last index read when any is: a box [lo, lo + max(n, 0) - 1] (a region clamped to be empty,
    a tile lying past its entry's end) reads nothing unless n > 0, and then up to lo + n - 1."""
    size = simplify(E.add(E.sub(iv.hi, iv.lo), E.const(1, iv.hi.dtype)), facts)
    if isinstance(size, E.Max):
        for n, zero in ((size.a, size.b), (size.b, size.a)):
            if isinstance(zero, E.Const) and zero.value == 0:
                return simplify(E.sub(E.add(iv.lo, n), E.const(1, iv.hi.dtype)), facts)
    return iv.hi


def _spans(x: E.Expr, loops: dict, lets: list, facts) -> dict:
    """The ranges of the loops that ``x`` names, and of those their ranges name, with the lets around the
    binding (regions' mins and maxes) put back, so that a loop over a region that starts at 0 is known not
    to go below it. (A proof about ``x`` reads no other loop's range; a binding deep in a nest sits in
    dozens of loops, and putting the lets back into every one of them was most of this check.)"""
    out: dict = {}
    todo = [n for n in E.free_vars(x) if n in loops]
    while todo:
        var = todo.pop()
        if var in out:
            continue
        iv = loops[var]
        out[var] = span = Interval(_put_lets_back(iv.lo, lets, facts), _put_lets_back(iv.hi, lets, facts))
        todo += [n for end in (span.lo, span.hi) for n in E.free_vars(end) if n in loops and n not in out]
    return out


def _put_lets_back(x: E.Expr, lets: list, facts) -> E.Expr:
    """``x`` with the lets around it (innermost last in ``lets``) substituted, innermost first, and
    simplified: only those it names (a binding deep in a nest sits inside hundreds of region lets)."""
    free = E.free_vars(x)
    for name, value in reversed(lets):
        if name in free:
            x = simplify(E.substitute(x, {name: value}), facts)
            free = E.free_vars(x)
    return simplify(x, facts)


def _at_most(e: E.Expr, bound: E.Expr, facts, lengths: frozenset = frozenset(), spans: dict | None = None) -> bool:
    """``e <= bound``, through the maxima and minima of regions (a region's end is the max over its
    reads of min(padded end, entry's end)) and the whole tiles of tail="split" (``c * (x // c) <= x``),
    which the prover does not split; reads of the ``lengths`` Inputs are non-negative (checked before
    running). ``spans``: the ranges of loop variables, for a tile's start (``c * x``, at most ``c`` times
    its last value)."""
    spans = spans or {}

    def at_most(x, b):
        return _at_most(x, b, facts, lengths, spans)

    if prove(E.le(e, bound), {}, facts):
        return True
    if isinstance(e, E.Max):
        return all(at_most(x, bound) for x in (e.a, e.b))
    if isinstance(e, E.Min):
        return at_most(e.a, bound) or at_most(e.b, bound)
    if isinstance(e, (E.Add, E.Sub)) and isinstance(e.b, E.Const):
        moved = E.add(bound, e.b) if isinstance(e, E.Sub) else E.sub(bound, e.b)
        return at_most(e.a, simplify(moved, facts))
    if isinstance(e, E.Add):
        for a, other in ((e.a, e.b), (e.b, e.a)):
            if isinstance(other, E.Min):  # a + min(x, y) = min(a + x, a + y)
                if any(at_most(simplify(E.add(a, x), facts), bound) for x in (other.a, other.b)):
                    return True
            elif isinstance(other, E.Max):  # a + max(x, y) = max(a + x, a + y)
                if all(at_most(simplify(E.add(a, x), facts), bound) for x in (other.a, other.b)):
                    return True
            elif _whole_tiles(other) is not None:  # a + c * (x // c) <= a + x
                if at_most(simplify(E.add(a, _whole_tiles(other)), facts), bound):
                    return True
        return False
    if _whole_tiles(e) is not None:
        return at_most(_whole_tiles(e), bound)  # c * (x // c) <= x
    if isinstance(e, E.Mul) and isinstance(e.a, E.Const) and e.a.value > 0 and isinstance(e.b, E.Var) \
            and e.b.name in spans and spans[e.b.name].hi is not None:
        return at_most(simplify(E.mul(e.a, spans[e.b.name].hi), facts), bound)  # a tile's start
    if isinstance(e, E.Const) and e.value <= 0:
        return _nonnegative(bound, lengths)
    return False


def _whole_tiles(e: E.Expr) -> E.Expr | None:
    """``x`` where ``e`` is ``c * (x // c)`` (c > 0): at most ``x``."""
    if isinstance(e, E.Mul) and isinstance(e.a, E.Const) and isinstance(e.b, E.FloorDiv) \
            and isinstance(e.b.b, E.Const) and e.a.value == e.b.b.value > 0:
        return e.b.a
    return None


def _nonnegative(e: E.Expr, lengths: frozenset) -> bool:
    if isinstance(e, E.Const):
        return e.value >= 0
    if isinstance(e, E.FuncRef):
        return e.name in lengths
    if isinstance(e, E.Cast):
        return _nonnegative(e.value, lengths)
    if isinstance(e, (E.Min, E.Max, E.Add)):
        return _nonnegative(e.a, lengths) and _nonnegative(e.b, lengths)
    return False


def _bindings(s: ir.Stmt, names: set, lets: list, loops: dict | None = None):
    """(statement, the lets around it, the ranges of the loops around it) for every loop or let that
    binds one of ``names``."""
    loops = loops or {}
    if isinstance(s, ir.Block):
        for t in s.stmts:
            yield from _bindings(t, names, lets, loops)
        return
    if isinstance(s, (ir.For, ir.LetStmt)) and (s.var if isinstance(s, ir.For) else s.name) in names:
        yield s, list(lets), dict(loops)
    if isinstance(s, ir.LetStmt):
        yield from _bindings(s.body, names, lets + [(s.name, s.value)], loops)
    elif isinstance(s, ir.IfThenElse):
        yield from _bindings(s.then, names, lets, loops)
        if s.otherwise is not None:
            yield from _bindings(s.otherwise, names, lets, loops)
    elif isinstance(s, ir.For):
        span = Interval(s.min, E.sub(E.add(s.min, s.extent), 1))
        yield from _bindings(s.body, names, lets, {**loops, s.var: span})
    elif hasattr(s, "body"):
        yield from _bindings(s.body, names, lets, loops)


def _first_indices(stmt: ir.Stmt, name: str) -> set:
    out = set()
    for s in ir.walk_stmts(stmt):
        for e in ir.exprs_of(s):
            out.update(n.args[0] for n in E.walk(e) if isinstance(n, E.FuncRef) and n.name == name)
    return out
