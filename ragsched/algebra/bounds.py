"""Symbolic interval arithmetic: the range of an expression while some of its variables sweep intervals.

This is how the region a consumer needs from a producer is found (Halide's bounds inference): loop
variables range over intervals whose ends are expressions of other symbols (Sizes, outer loop
variables), and the result's ends are expressions of those symbols. Every result is sound: for every
assignment of the free symbols and every value of the ranging variables inside their intervals, the
value lies in ``[lo, hi]`` (signed 32/64-bit arithmetic is assumed not to overflow, as in the
simplifier). Ends are simplified, so ``x + 1`` with ``x`` in ``[0, W - 1]`` gives ``[1, W]``.
"""

from __future__ import annotations

import operator
import random
from collections.abc import Mapping
from dataclasses import dataclass

from . import expr as E
from . import types as T
from .expr import Const, Expr, Var
from .sample import int_value
from .simplify import no_overflow, simplify
from .types import DType

Env = Mapping[str, "Interval"]


@dataclass(frozen=True)
class Interval:
    """Inclusive bounds; None means unbounded on that side. Python numbers become constants."""

    lo: Expr | None
    hi: Expr | None

    def __post_init__(self):
        for side in ("lo", "hi"):
            v = getattr(self, side)
            if v is not None and not isinstance(v, Expr):
                small = isinstance(v, int) and not isinstance(v, bool) and T.fits(v, T.INDEX)
                object.__setattr__(self, side, E.const(v, T.INDEX if small else None))

    @staticmethod
    def point(e: Expr) -> Interval:
        return Interval(e, e)

    @staticmethod
    def everything() -> Interval:
        return Interval(None, None)

    @property
    def is_bounded(self) -> bool:
        return self.lo is not None and self.hi is not None

    @property
    def is_point(self) -> bool:
        return self.lo is not None and (self.lo is self.hi or self.lo == self.hi)

    def __str__(self) -> str:
        return f"[{'-inf' if self.lo is None else self.lo}, {'inf' if self.hi is None else self.hi}]"


_EVERYTHING = Interval(None, None)


def hull(a: Interval, b: Interval, facts: Env | None = None) -> Interval:
    """The smallest interval holding both (ends as min/max expressions, simplified)."""
    facts = facts or {}
    return Interval(_lo(E.Min, a.lo, b.lo, facts), _hi(E.Max, a.hi, b.hi, facts))


def intersect(a: Interval, b: Interval, facts: Env | None = None) -> Interval:
    """The values in both; may be empty (lo > hi), which is not checked."""
    facts = facts or {}
    return Interval(_lo(E.Max, a.lo, b.lo, facts), _hi(E.Min, a.hi, b.hi, facts))


def bounds_of(e: Expr, env: Env, facts: Env | None = None) -> Interval:
    """The range of ``e`` when each Var named in ``env`` ranges over its interval.

    Other Vars are fixed symbols; ``facts`` are known ranges of those symbols, used in proofs only.
    """
    # (a dict is used as it is, never changed: the simplifier keys its memos by the facts object, and a
    # copy per call made each of lowering's thousands of calls sort and compare the facts again)
    facts = facts if type(facts) is dict else dict(facts) if facts else {}
    _SEEN.append({})
    try:
        return _bounds(simplify(e, facts), env, facts)
    finally:
        _SEEN.pop()


#: per bounds_of call, the bounds found so far by (node, env, facts) identity: a node shared by many
#: parents (bounds composed from bounds, stage after stage) is bounded once, not once per path to it
_SEEN: list[dict] = []


def prove(cond: Expr, env: Env | None = None, facts: Env | None = None) -> bool:
    """True only if the bool ``cond`` holds for all values allowed by ``env`` and ``facts``; False is
    "not known"."""
    env = env or {}
    facts = dict(facts) if facts else {}
    s = simplify(cond, {**facts, **env})  # ranging over an interval is a fact about the variable
    if type(s) is Const:
        return bool(s.value)
    return _prove(s, env, facts)


def constant_upper_bound(e: Expr, facts: Env | None = None, at_most: int | None = None) -> int | None:
    """An integer that the int expression ``e`` never exceeds, whatever its free symbols are (``facts``
    bound some), or None. Interval arithmetic alone loses what a min shares with the terms beside it:
    ``min(n, x + 15) - x + 1`` is at most 16, but its arms bounded apart give infinity; so a min reached
    through sums (and products by positive constants) is replaced by each of its arms in turn, the sum
    simplified, and the smaller bound kept (a max: both arms, the larger bound). With ``at_most``, a
    caller that only uses bounds up to it gets None at once where ``e`` passes it at a corner point."""
    facts = facts if type(facts) is dict else dict(facts) if facts else {}
    if at_most is not None and _passes_at_a_corner(e, facts, at_most):
        return None
    return _upper(simplify(e, facts), facts, 4)


#: values tried for symbols without facts: none, one, and two large ones (a whole image's extent)
_CORNER_VALUES = (0, 1, 1 << 17, 3 << 16)


def _passes_at_a_corner(e: Expr, facts: dict, limit: int, tries: int = 8) -> bool:
    """True if ``e`` exceeds ``limit`` at some point allowed by ``facts`` (then no bound within ``limit``
    exists), found among a few points: each symbol with constant facts at an end of its range, the others
    at one of ``_CORNER_VALUES`` (all large first). False is "not known"."""
    names = sorted(E.free_vars(e))
    ends = {}
    for n in names:
        iv = facts.get(n)
        if iv is None:
            ends[n] = _CORNER_VALUES
        elif type(iv.lo) is Const and type(iv.hi) is Const:
            ends[n] = (int(iv.lo.value), int(iv.hi.value))
        else:
            return False  # a symbol bound by other symbols: a point would have to respect that
    rng = random.Random(0)
    for i in range(tries):
        point = {n: (v[-2] if i == 0 else v[-1] if i == 1 else rng.choice(v)) for n, v in ends.items()}
        value = int_value(e, point)
        if value is not None and value > limit:
            return True
    return False


def _upper(e: Expr, facts: dict, depth: int) -> int | None:
    if type(e) is Const:
        return int(e.value)
    if type(e) in (E.Min, E.Max):
        a, b = _upper(e.a, facts, depth), _upper(e.b, facts, depth)
        if type(e) is E.Max:
            return None if a is None or b is None else max(a, b)
        return b if a is None else a if b is None else min(a, b)
    if not no_overflow(e.dtype):  # sums that wrap are not monotone in their terms
        hi = _over_facts(e, facts).hi
        return int(hi.value) if type(hi) is Const else None
    if type(e) is E.Mul:
        lo_a, lo_b = (_over_facts(x, facts).lo for x in (e.a, e.b))
        a, b = _upper(e.a, facts, depth), _upper(e.b, facts, depth)
        if a is not None and b is not None and _ge(lo_a, 0, facts) and _ge(lo_b, 0, facts):
            return a * b
    split = _arms(e) if depth else None
    if split is not None:  # e <= e with the min (max) replaced by either arm (by the larger arm)
        pick, arms = split
        found = [_upper(simplify(x, facts), facts, depth - 1) for x in arms]
        if pick is max:
            return None if None in found else max(found)
        found = [v for v in found if v is not None]
        return min(found) if found else None
    hi = _over_facts(e, facts).hi
    return int(hi.value) if type(hi) is Const else None


def _over_facts(e: Expr, facts: dict) -> Interval:
    """The range of ``e`` while its symbols sweep the ranges ``facts`` give them, or every value."""
    return bounds_of(e, {v: facts.get(v, _EVERYTHING) for v in E.free_vars(e)}, facts)


def _arms(e: Expr):
    """(min, [e with its first min replaced by each arm]) or (max, the same for a max), for the first
    min or max in a place where ``e`` grows with it (through sums and products by positive constants),
    or None."""
    tp = type(e)
    if tp is E.Min or tp is E.Max:
        return (min if tp is E.Min else max), [e.a, e.b]
    if tp in (E.Add, E.Sub, E.Mul):
        if tp is not E.Mul or (type(e.b) is Const and e.b.value > 0):
            found = _arms(e.a)
            if found is not None:
                return found[0], [tp(x, e.b) for x in found[1]]
        if tp is not E.Sub and (tp is not E.Mul or (type(e.a) is Const and e.a.value > 0)):
            found = _arms(e.b)
            if found is not None:
                return found[0], [tp(e.a, x) for x in found[1]]
    return None


# ---------------------------------------------------------------------------------------- proofs
def _prove(c: Expr, env: Env, facts: dict) -> bool:
    tp = type(c)
    if tp is E.And:
        return _prove(c.a, env, facts) and _prove(c.b, env, facts)
    if tp is E.Or:
        return _prove(c.a, env, facts) or _prove(c.b, env, facts)
    if tp is E.Not:
        a = c.a
        if type(a) is E.And:
            return _prove(E.Or(E.Not(a.a), E.Not(a.b)), env, facts)
        if type(a) is E.Or:
            return _prove(E.And(E.Not(a.a), E.Not(a.b)), env, facts)
        flipped = simplify(c, facts)
        return type(flipped) is not E.Not and _prove(flipped, env, facts)
    if tp not in (E.LT, E.LE, E.EQ, E.NE) or not c.a.dtype.is_int:
        return False
    t = c.a.dtype
    if no_overflow(t):  # the range of b - a decides
        d = _bounds(simplify(E.Sub(c.b, c.a), facts), env, facts)
        if tp is E.LT:
            return _ge(d.lo, 1, facts)
        if tp is E.LE:
            return _ge(d.lo, 0, facts)
        if tp is E.NE:
            return _ge(d.lo, 1, facts) or _le(d.hi, -1, facts)
        return _ge(d.lo, 0, facts) and _le(d.hi, 0, facts)
    a, b = _bounds(c.a, env, facts), _bounds(c.b, env, facts)
    ints = [x.value if type(x) is Const else None for x in (a.lo, a.hi, b.lo, b.hi)]
    if None in ints:
        return False
    a0, a1, b0, b1 = ints
    if tp is E.LT:
        return a1 < b0
    if tp is E.LE:
        return a1 <= b0
    if tp is E.NE:
        return a1 < b0 or b1 < a0
    return a0 == a1 == b0 == b1


def _ge(x: Expr | None, k: int, facts: dict) -> bool:
    """Whether ``x >= k`` is proven (x an integer end; None is unbounded)."""
    if x is None:
        return False
    if type(x) is Const:
        return x.value >= k
    s = simplify(E.LE(Const(k, x.dtype), x), facts) if T.fits(k, x.dtype) else None
    return type(s) is Const and bool(s.value)


def _le(x: Expr | None, k: int, facts: dict) -> bool:
    if x is None:
        return False
    if type(x) is Const:
        return x.value <= k
    s = simplify(E.LE(x, Const(k, x.dtype)), facts) if T.fits(k, x.dtype) else None
    return type(s) is Const and bool(s.value)


# ------------------------------------------------------------------------------------ arithmetic on ends
_PY = {
    E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul, E.Min: min, E.Max: max,
    E.FloorDiv: lambda a, b: a // b if b else 0, E.Mod: lambda a, b: a % b if b else 0,
}


def _op(cls, a: Expr | None, b: Expr | int | None, facts: dict) -> Expr | None:
    """``a op b`` for ends; None (unbounded) if either is. Constants fold exactly, then clamp to the
    type (values outside it cannot occur in a no-wrap type); for wrapping types an out-of-range
    constant becomes None, which ends as the type's whole range."""
    if a is None or b is None:
        return None
    if isinstance(b, Expr) and b.dtype != a.dtype and a.dtype.is_int and b.dtype.is_int and \
            (a.dtype.bits > b.dtype.bits or a.dtype.bits >= 32 and a.dtype.is_signed and b.dtype.is_signed):
        # ends of reads at indices of two integer types (int32 Vars, an int64 index), in the first's type
        # (a node that mixed them was refused by the LLVM backend); an int64 end into an int32 one only
        # where both are indices, whose values fit an int32 (lowering's rule). Other mixes (a uint8 value's
        # interval and an int32 index) stay as they were (narrowing them truncated a histogram's region).
        b = _as_type(b, a.dtype)
    t = a.dtype
    if not isinstance(b, Expr):
        b = Const(b, t) if T.fits(b, t) else None
        if b is None:
            return None
    if type(a) is Const and type(b) is Const:
        return _const_end(_PY[cls](int(a.value), int(b.value)), t)
    return simplify(cls(a, b), facts)


def _as_type(x: Expr, t: DType) -> Expr:
    """``x`` in integer type ``t``: a constant converted, else a cast."""
    if type(x) is Const and T.fits(int(x.value), t):
        return Const(int(x.value), t)
    return E.cast(t, x)


def _const_end(v: int, t: DType) -> Const | None:
    lo, hi = int(t.min), int(t.max)
    if no_overflow(t):
        return Const(min(max(v, lo), hi), t)
    return Const(v, t) if lo <= v <= hi else None


def _lo(cls, a: Expr | None, b: Expr | None, facts: dict) -> Expr | None:
    """min/max of two lower ends (None is minus infinity)."""
    if cls is E.Min:
        return _op(E.Min, a, b, facts)
    return b if a is None else a if b is None else _op(E.Max, a, b, facts)


def _hi(cls, a: Expr | None, b: Expr | None, facts: dict) -> Expr | None:
    """min/max of two upper ends (None is plus infinity)."""
    if cls is E.Max:
        return _op(E.Max, a, b, facts)
    return b if a is None else a if b is None else _op(E.Min, a, b, facts)


def _neg(iv: Interval, facts: dict) -> Interval:
    return Interval(_op(E.Sub, _zero(iv.hi), iv.hi, facts), _op(E.Sub, _zero(iv.lo), iv.lo, facts))


def _zero(x: Expr | None) -> Expr | None:
    return None if x is None else Const(0, x.dtype)


def _const_point(iv: Interval) -> int | None:
    lo = iv.lo
    if type(lo) is Const and iv.is_point:
        return int(lo.value)
    return None


def _type_range(t: DType) -> Interval:
    return Interval(Const(t.min, t), Const(t.max, t))


_FREE: dict = {}


def free_names(e: Expr) -> frozenset:
    """Names of the free Vars of ``e``, memoized per node (bounds ask it of every sub-expression) and
    found without recursion (sums can be long)."""
    hit = _FREE.get(e)
    if hit is not None:
        return hit
    if len(_FREE) >= 1 << 16:
        _FREE.clear()
    stack = [e]
    while stack:
        n = stack[-1]
        todo = [c for c in E.children(n) if c not in _FREE]
        if todo:
            stack += todo
            continue
        stack.pop()
        tp = type(n)
        if tp is Var:
            _FREE[n] = frozenset((n.name,))
        elif tp is E.Let:
            _FREE[n] = _FREE[n.value] | (_FREE[n.body] - {n.name})
        else:
            _FREE[n] = frozenset().union(*(_FREE[c] for c in E.children(n)))
    return _FREE[e]


# ------------------------------------------------------------------------------------------- rules
def _bounds(e: Expr, env: Env, facts: dict) -> Interval:
    seen = _SEEN[-1] if _SEEN else None
    if seen is None:
        return _bounds_of_node(e, env, facts)
    key = (id(e), id(env), id(facts))
    hit = seen.get(key)
    if hit is not None and hit[0] is e and hit[1] is env and hit[2] is facts:
        return hit[3]
    iv = _bounds_of_node(e, env, facts)
    seen[key] = (e, env, facts, iv)
    return iv


def _bounds_of_node(e: Expr, env: Env, facts: dict) -> Interval:
    if not env or not (free_names(e) & env.keys()):
        return Interval.point(simplify(e, facts))
    t = e.dtype
    tp = type(e)
    if tp is Var:
        iv = env[e.name]
        return Interval(_end(iv.lo, t, facts), _end(iv.hi, t, facts))
    if t.is_bool:
        if prove(e, env, facts):
            return Interval.point(Const(True, t))
        if prove(E.Not(e), env, facts):
            return Interval.point(Const(False, t))
        return Interval(Const(False, t), Const(True, t))
    if not t.is_int:
        return _EVERYTHING
    rule = _RULES.get(tp)
    iv = rule(e, env, facts) if rule else _type_range(t)
    return _fit(iv, t)


def _end(x: Expr | None, t: DType, facts: dict) -> Expr | None:
    if x is None:
        return None
    return simplify(x if x.dtype == t else E.Cast(x, t), facts)


def _fit(iv: Interval, t: DType) -> Interval:
    """Wrapping types keep only constant, in-range bounds (anything else may have wrapped)."""
    if no_overflow(t):
        return iv
    lo, hi = iv.lo, iv.hi
    if type(lo) is Const and type(hi) is Const and t.min <= lo.value and hi.value <= t.max:
        return iv
    return _type_range(t)


def _b_sum(e, env, facts):
    """Integer + - and * by a constant: each term's bounds, summed once (long sums do not recurse)."""
    t = e.dtype
    lo: list = []  # (coefficient, end) pairs
    hi: list = []
    parts, k = E.affine_parts(e)
    moved = _kept_together(parts, k, t, env, facts)
    if moved is not None:
        return _bounds(moved, env, facts)
    for n, c in parts:
        iv = _bounds(n, env, facts)
        lo.append((c, iv.lo if c > 0 else iv.hi))
        hi.append((c, iv.hi if c > 0 else iv.lo))
    return Interval(_sum_ends(lo, k, t, facts), _sum_ends(hi, k, t, facts))


def _kept_together(parts: list, k: int, t: DType, env: Env, facts: dict) -> Expr | None:
    """The sum ``k + sum(c * atom)`` rewritten so that a ranging term (one naming a Var of ``env``) meets
    its negation inside a min, max or floor division, or None when none does. Bounded term by term, a
    tile's region ``a + min(4 y, b - a - 3)`` (a tile of 4 shifted inwards at the end of [a, b]) pairs a's
    low end with its high end (the first tile's b, the last tile's a); ``min(a + 4 y, b - 3)`` keeps each
    tile's a and b together. Likewise the start of a split loop's rest, ``4 ((b - a) // 4) + a``, is
    ``b - (b - a) % 4``. A fixed term is exact either way."""
    if len(parts) < 2 or not no_overflow(t):
        return None
    for pos, (n, c) in enumerate(parts):
        tp = type(n)
        if tp in (E.Min, E.Max) and c in (1, -1):
            inner, scale = (n.a, n.b), c
        elif tp is E.FloorDiv and type(n.b) is Const and n.b.value > 0 and c % int(n.b.value) == 0:
            inner, scale = (n.a,), c // int(n.b.value)
        else:
            continue
        rest = {a: w for m, (a, w) in enumerate(parts) if m != pos}
        if not any(rest.get(a, 0) == -scale * w and free_names(a) & env.keys()
                   for x in inner for a, w in E.affine_parts(x)[0]):
            continue
        r: Expr = Const(k, t)
        for m, (a, w) in enumerate(parts):
            if m != pos:
                r = E.Add(r, a if w == 1 else E.Mul(Const(w, t), a))
        if tp is E.FloorDiv:  # c (x // d) = (c / d) (x - x % d), x % d in [0, d - 1]
            head = simplify(E.Add(r, E.Mul(Const(scale, t), n.a)), facts)
            return E.Sub(head, E.Mul(Const(scale, t), E.Mod(n.a, n.b)))
        cls = tp if c == 1 else (E.Max if tp is E.Min else E.Min)
        return cls(*(simplify(E.Add(r, arm) if c == 1 else E.Sub(r, arm), facts) for arm in inner))
    return None


def _sum_ends(parts: list, k: int, t: DType, facts: dict) -> Expr | None:
    """``k + sum(c * end)``: exact when every end is a constant, else one simplified expression; None
    (unbounded) if an end is."""
    if any(x is None for _, x in parts):
        return None
    k += sum(c * int(x.value) for c, x in parts if type(x) is Const)
    parts = [(c, x) for c, x in parts if type(x) is not Const]
    if not parts:
        return _const_end(k, t)
    if not all(T.fits(c, t) for c, _ in parts) or not T.fits(k, t):
        return None  # unbounded is sound; a wrapped constant would not be
    out: Expr = Const(k, t)
    for c, x in parts:
        out = E.Add(out, x if c == 1 else E.Mul(Const(c, t), x))
    return simplify(out, facts)


def _b_mul(e, env, facts):
    if type(e.a) is Const or type(e.b) is Const:
        return _b_sum(e, env, facts)
    return _mul(_bounds(e.a, env, facts), _bounds(e.b, env, facts), facts)


def _b_not(e, env, facts):  # ~x == -x - 1
    n = _neg(_bounds(e.a, env, facts), facts)
    return Interval(_op(E.Sub, n.lo, 1, facts), _op(E.Sub, n.hi, 1, facts))


def _sign(iv: Interval, facts: dict) -> int:
    """1 if the interval is provably >= 0, -1 if provably <= 0, else 0."""
    if _ge(iv.lo, 0, facts):
        return 1
    if _le(iv.hi, 0, facts):
        return -1
    return 0


def _mul(a: Interval, b: Interval, facts: dict) -> Interval:
    for x, y in ((a, b), (b, a)):
        c = _const_point(y)
        if c is not None:
            if c >= 0:
                return Interval(_op(E.Mul, x.lo, c, facts), _op(E.Mul, x.hi, c, facts))
            return Interval(_op(E.Mul, x.hi, c, facts), _op(E.Mul, x.lo, c, facts))
    sa, sb = _sign(a, facts), _sign(b, facts)
    if sa and sb:  # the sign of each side picks the corners
        lo_ends = {(1, 1): (a.lo, b.lo), (1, -1): (a.hi, b.lo), (-1, 1): (a.lo, b.hi), (-1, -1): (a.hi, b.hi)}
        hi_ends = {(1, 1): (a.hi, b.hi), (1, -1): (a.lo, b.hi), (-1, 1): (a.hi, b.lo), (-1, -1): (a.lo, b.lo)}
        return Interval(_op(E.Mul, *lo_ends[sa, sb], facts), _op(E.Mul, *hi_ends[sa, sb], facts))
    if not (a.is_bounded and b.is_bounded):
        return _EVERYTHING
    ps = [_op(E.Mul, x, y, facts) for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
    lo, hi = ps[0], ps[0]
    for p in ps[1:]:
        lo, hi = _op(E.Min, lo, p, facts), _op(E.Max, hi, p, facts)
    return Interval(lo, hi)


def _b_div(e, env, facts):
    return _div(_bounds(e.a, env, facts), _bounds(e.b, env, facts), facts)


def _div(a: Interval, b: Interval, facts: dict) -> Interval:
    c = _const_point(b)
    if c is not None:
        if c == 0:
            return Interval.point(Const(0, b.lo.dtype))
        if c > 0:
            return Interval(_op(E.FloorDiv, a.lo, c, facts), _op(E.FloorDiv, a.hi, c, facts))
        return Interval(_op(E.FloorDiv, a.hi, c, facts), _op(E.FloorDiv, a.lo, c, facts))
    if _ge(b.lo, 1, facts):
        return _div_pos(a, b, facts)
    if _le(b.hi, -1, facts):  # a // b == (-a) // (-b)
        return _div_pos(_neg(a, facts), _neg(b, facts), facts)
    if _ge(b.lo, 0, facts):  # a Size: 0 (x // 0 == 0) or a positive divisor
        pos = _div_pos(a, Interval(Const(1, b.lo.dtype), b.hi), facts)
        return Interval(None if pos.lo is None else _op(E.Min, pos.lo, _zero(pos.lo), facts),
                        None if pos.hi is None else _op(E.Max, pos.hi, _zero(pos.hi), facts))
    if not a.is_bounded:
        return _EVERYTHING
    m = _op(E.Max, _op(E.Sub, _zero(a.lo), a.lo, facts), a.hi, facts)  # |a // b| <= |a|
    return Interval(_op(E.Sub, _zero(m), m, facts), m)


def _div_pos(a: Interval, b: Interval, facts: dict) -> Interval:
    """a // b for b >= 1: monotone in each operand, so the extremes are at the corners."""
    if _ge(a.lo, 0, facts):
        lo = _zero(a.lo) if b.hi is None else _op(E.FloorDiv, a.lo, b.hi, facts)
        return Interval(lo, _op(E.FloorDiv, a.hi, b.lo, facts))
    zero = _zero(b.lo)
    lo_far = zero if b.hi is None else _op(E.FloorDiv, a.lo, b.hi, facts)
    hi_far = zero if b.hi is None else _op(E.FloorDiv, a.hi, b.hi, facts)
    lo = None if a.lo is None else _op(E.Min, _op(E.FloorDiv, a.lo, b.lo, facts), lo_far, facts)
    hi = None if a.hi is None else _op(E.Max, _op(E.FloorDiv, a.hi, b.lo, facts), hi_far, facts)
    return Interval(lo, hi)


def _b_mod(e, env, facts):
    a, b = _bounds(e.a, env, facts), _bounds(e.b, env, facts)
    t = e.dtype
    zero = Const(0, t)
    c = _const_point(b)
    if c is not None:
        if c == 0:
            return Interval.point(zero)
        if c < 0:
            return Interval(Const(c + 1, t), zero)
        ends = [x.value if type(x) is Const else None for x in (a.lo, a.hi)]
        if None not in ends and ends[0] // c == ends[1] // c:  # within one period: exact
            m = ends[0] // c * c
            return Interval(Const(ends[0] - m, t), Const(ends[1] - m, t))
        if _ge(a.lo, 0, facts):
            if _le(a.hi, c - 1, facts):
                return a
            return Interval(zero, Const(c - 1, t) if a.hi is None else _op(E.Min, a.hi, c - 1, facts))
        return Interval(zero, Const(c - 1, t))
    if _ge(b.lo, 1, facts):
        hi = _op(E.Sub, b.hi, 1, facts)
        if _ge(a.lo, 0, facts):
            hi = _hi(E.Min, hi, a.hi, facts)
        return Interval(zero, hi)
    if _le(b.hi, -1, facts):
        return Interval(_op(E.Add, b.lo, 1, facts), zero)
    # the divisor may be 0 (x % 0 == 0) or of either sign
    return Interval(_op(E.Min, _op(E.Add, b.lo, 1, facts), zero, facts),
                    _op(E.Max, _op(E.Sub, b.hi, 1, facts), zero, facts))


def _b_minmax(e, env, facts):
    a, b = _bounds(e.a, env, facts), _bounds(e.b, env, facts)
    cls = type(e)
    return Interval(_lo(cls, a.lo, b.lo, facts), _hi(cls, a.hi, b.hi, facts))


def _b_select(e, env, facts):
    return hull(_bounds(e.t, env, facts), _bounds(e.f, env, facts), facts)


def _b_cast(e, env, facts):
    t, src = e.dtype, e.value.dtype
    if src.is_float:  # float -> int saturates: anything in the type
        return _type_range(t)
    v = _bounds(e.value, env, facts)
    if src.is_bool or (t.min <= src.min and src.max <= t.max):  # widening keeps the values
        return Interval(_end(v.lo, t, facts), _end(v.hi, t, facts))
    lo, hi = v.lo, v.hi
    if type(lo) is Const and type(hi) is Const and t.min <= lo.value and hi.value <= t.max:
        return Interval(Const(int(lo.value), t), Const(int(hi.value), t))
    return _type_range(t)


def _b_shift(e, env, facts):
    """a << b and a >> b as a product or a quotient by 2^b, when b's bounds are constants that keep 2^b in
    the type (``1 << r`` over an RDom: the powers of two it spans)."""
    t = e.dtype
    b = _bounds(e.b, env, facts)
    ends = [x.value if type(x) is Const else None for x in (b.lo, b.hi)]
    if None in ends or not 0 <= ends[0] <= ends[1] < t.bits or not T.fits(1 << int(ends[1]), t):
        return _type_range(t)
    p = Interval(Const(1 << int(ends[0]), t), Const(1 << int(ends[1]), t))
    a = _bounds(e.a, env, facts)
    return _mul(a, p, facts) if type(e) is E.Shl else _div(a, p, facts)


def _b_bitand(e, env, facts):
    a, b = _bounds(e.a, env, facts), _bounds(e.b, env, facts)
    t = e.dtype
    his = [x.hi for x in (a, b) if _ge(x.lo, 0, facts)]  # x & y lies in [0, y] when y >= 0
    if not his:
        return _type_range(t)
    hi = his[0] if len(his) == 1 else _hi(E.Min, his[0], his[1], facts)
    return Interval(Const(0, t), hi)


def _b_let(e, env, facts):
    v = _bounds(e.value, env, facts)
    inner_facts = {k: iv for k, iv in facts.items() if k != e.name}
    return _bounds(e.body, {**env, e.name: v}, inner_facts)


_RULES = {
    E.Add: _b_sum, E.Sub: _b_sum, E.Neg: _b_sum, E.Not: _b_not, E.Mul: _b_mul, E.FloorDiv: _b_div,
    E.Mod: _b_mod, E.Min: _b_minmax, E.Max: _b_minmax, E.Select: _b_select, E.Cast: _b_cast,
    E.Shl: _b_shift, E.Shr: _b_shift, E.BitAnd: _b_bitand, E.Let: _b_let,
}
