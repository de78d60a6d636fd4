"""Halide's sliding window: a Func stored outside a serial loop and computed inside it computes, at
each iteration after the first, only what earlier ones did not, and its storage along that dimension is
folded (``Realize.fold``). ``slide`` decides both from the region and the loops between the two levels;
the rest reads how a region end moves as a loop advances (structurally where the interval prover cannot:
floor divisions of pyramid levels, a slid consumer's first-iteration selects).
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.bounds import Interval, prove
from ..algebra.simplify import simplify
from ..program import Function
from . import ir
from .boxes import Box

I32 = T.INDEX


def slide(f: Function, region: Box, chain: list[ir.For], lets: list, facts,
           rounded: set[int] = frozenset()) -> tuple[Box, tuple[int, ...]]:
    """Halide's sliding window: when the region slides forward along a serial loop between the store
    and the compute level, each iteration after the first computes only what is new; the storage along
    that dimension is folded to a power of two at least as large as one iteration's footprint. The
    outermost such loop wins (blur_y's rows, not its vector chunks), and only a dimension that moves with
    it alone: the lets between the two levels are put back so that the region speaks of the loops.
    Along the dims in ``rounded`` (loops that pad or shift past the region) the storage is not folded."""
    no_fold = tuple(0 for _ in region)
    for name, value in reversed(lets):
        region = tuple(Interval(simplify(E.substitute(iv.lo, {name: value}), facts),
                                simplify(E.substitute(iv.hi, {name: value}), facts)) for iv in region)
    for loop in chain:
        if loop.kind != ir.ForKind.SERIAL:
            continue
        moves = [k for k, iv in enumerate(region) if loop.var in E.free_vars(iv.lo) | E.free_vars(iv.hi)]
        if len(moves) != 1:
            continue
        k = moves[0]
        iv = region[k]
        v = E.Var(loop.var, I32)
        nxt = {loop.var: E.add(v, 1)}

        if not (_grows(iv.lo, loop.var, nxt, facts) and _grows(iv.hi, loop.var, nxt, facts)):
            continue
        prev_hi = E.substitute(iv.hi, {loop.var: E.sub(v, 1)})
        first = simplify(E.le(v, loop.min), facts)
        # later iterations start past what earlier ones computed; the first iteration's start (at most
        # the later ones', ``_grows``, where every select on the loop is that one) is in both branches so
        # that the region's hull over the loop is seen to start there
        lo_first = _decided(iv.lo, first, True)
        rest = E.maximum(_decided(iv.lo, first, False), E.add(prev_hi, 1))
        proven = all(n.cond == first for n in E.walk(iv.lo)
                     if isinstance(n, E.Select) and E.free_vars(n.cond) == {loop.var})
        new_lo = E.select(first, lo_first, E.maximum(lo_first, rest) if proven else rest)
        sliding = tuple(Interval(simplify(new_lo, facts), iv.hi) if j == k else r for j, r in enumerate(region))
        footprint = simplify(E.add(E.sub(iv.hi, iv.lo), 1), facts)
        if not isinstance(footprint, E.Const):  # slid consumers: their first iteration reads more
            cases = [simplify(_first_or_rest(footprint, loop.var, k), facts) for k in (0, 1)]
            if all(isinstance(c, E.Const) for c in cases):
                footprint = max(cases, key=lambda c: c.value)
        fold = list(no_fold)
        if isinstance(footprint, E.Const) and footprint.value > 0 and k not in rounded:
            fold[k] = 1 << (int(footprint.value) - 1).bit_length()
        return sliding, tuple(fold)
    return region, no_fold


def _decided(x: E.Expr, cond: E.Expr, value: bool) -> E.Expr:
    """``x`` with each select on ``cond`` replaced by the branch ``value`` takes. A slid consumer's region
    end is such a select (its first iteration or the rest), and a producer slid in the same loop puts its
    own around it: undecided, each level of a chain of them held its consumer's end twice, in both
    branches (trees of 2^k nodes after k stages: 150 s to lower a 20-stage chain slid in one loop)."""
    return E.transform(x, lambda n: (n.t if value else n.f) if isinstance(n, E.Select) and n.cond == cond else n)


def _grows(x: E.Expr, var: str, nxt: dict, facts) -> bool:
    """Whether the region end ``x`` never moves back as loop ``var`` advances (slid consumers start
    lower on their first iteration, then move steadily)."""
    first, rest = _first_or_rest(x, var, 0), _first_or_rest(x, var, 1)
    steady = _monotone(rest, var) in (0, 1) or prove(E.le(rest, E.substitute(rest, nxt)), {}, facts)
    return steady and (first is rest or prove(E.le(first, rest), {}, facts) or _first_below_rest(x, var, facts))


def _first_below_rest(x: E.Expr, var: str, facts) -> bool:
    """Whether ``x`` on the first iteration is at most ``x`` later, seen structurally: a slid consumer's
    region is a first-iteration select, which pyramid levels above it carry through floor divisions and
    maxima that the prover cannot see through."""
    def first_sel(n) -> bool:
        return isinstance(n, E.Select) and E.free_vars(n.cond) == {var}

    def plain(n) -> bool:
        return not any(first_sel(m) for m in E.walk(n))

    def le(a: E.Expr, b: E.Expr) -> bool:  # first(a) <= rest(b)
        if a == b and plain(a):
            return True
        if first_sel(a):
            return le(a.t, b)
        if first_sel(b):
            return le(a, b.f)
        if isinstance(b, E.Max) and (le(a, b.a) or le(a, b.b)):
            return True
        if isinstance(a, E.Min) and (le(a.a, b) or le(a.b, b)):
            return True
        if type(a) is type(b):
            if isinstance(a, (E.Add, E.Max, E.Min)):
                return le(a.a, b.a) and le(a.b, b.b)
            if (isinstance(a, (E.FloorDiv, E.Mul, E.Sub)) and a.b == b.b and plain(a.b)
                    and (isinstance(a, E.Sub) or (isinstance(a.b, E.Const) and a.b.value > 0))):
                return le(a.a, b.a)
        return prove(E.le(_first_or_rest(a, var, 0), _first_or_rest(b, var, 1)), {}, facts)

    return le(x, x)


def _monotone(e: E.Expr, var: str) -> int | None:
    """How ``e`` moves as the integer ``var`` grows: 1 non-decreasing, -1 non-increasing, 0 constant,
    None unknown. Structural, so that floor divisions (pyramid levels: ``(y + 1) // 2``) are seen
    through, which the interval prover cannot do."""
    if var not in E.free_vars(e):
        return 0
    if isinstance(e, E.Var):
        return 1
    if isinstance(e, E.Cast) and e.dtype.is_int and e.value.dtype.is_int and e.dtype.bits >= e.value.dtype.bits:
        return _monotone(e.value, var)
    if isinstance(e, (E.Add, E.Min, E.Max)):
        return _join(_monotone(e.a, var), _monotone(e.b, var))
    if isinstance(e, E.Sub):
        b = _monotone(e.b, var)
        return _join(_monotone(e.a, var), None if b is None else -b)
    if isinstance(e, (E.Mul, E.FloorDiv)) and isinstance(e.b, E.Const) and e.b.value > 0:
        return _monotone(e.a, var)
    if isinstance(e, E.Mul) and isinstance(e.a, E.Const) and e.a.value > 0:
        return _monotone(e.b, var)
    return None


def _join(a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return None
    if a == 0 or b == 0 or a == b:
        return a or b
    return None


def _first_or_rest(e: E.Expr, var: str, which: int) -> E.Expr:
    """``e`` with each select on the loop variable ``var`` alone (a slid consumer's "first iteration?")
    replaced by its true (``which == 0``) or false branch."""
    def pick(n):
        if isinstance(n, E.Select) and E.free_vars(n.cond) == {var}:
            return n.t if which == 0 else n.f
        return n

    return E.transform(e, pick)
