"""Exact simplification of expressions, cheap enough for the compiler's hot path (index arithmetic).

The model is Halide's simplifier: one bottom-up pass in which integer ``+ - *`` are collected into a
canonical affine sum, so that equal index expressions become syntactically equal (lowering compares
them), and in which ``// % min max`` and comparisons are decided with constant interval bounds.
``facts`` give known ranges of free symbols (``{"H": Interval(0, None)}``); they are used for proofs
only and never substituted into a result.

What counts as exact:
- Signed 32- and 64-bit integers are assumed not to overflow (Halide's rule), so identities of the
  integers hold for them: ``(32*io + ii) // 32 -> io + ii // 32``, moving terms across ``<``.
  Constant arithmetic that does overflow them is left as written (its value is not defined).
- Narrower or unsigned integers wrap, so only ring identities (reassociation, with coefficients taken
  modulo the type's bits) and rules that hold value by value apply to them.
- Floats are never reassociated; constants fold in the dtype's own precision (NumPy scalars).
- ``x // 0 == x % 0 == 0``, and ``//``, ``%`` round toward minus infinity, as in NumPy.
"""

from __future__ import annotations

import hashlib
import math
import operator
from collections.abc import Mapping
from functools import cache, lru_cache
from itertools import product
from typing import TYPE_CHECKING

import numpy as np

from . import expr as E
from .expr import Const, Expr, Var
from .types import DType

if TYPE_CHECKING:
    from .bounds import Interval


def simplify(e: Expr, facts: Mapping[str, Interval] | None = None) -> Expr:
    """An equivalent expression of the same dtype, cheaper to evaluate and in canonical form."""
    fk = _facts_key(facts) if facts else ()
    try:
        return _s(e, fk)
    except RecursionError:
        # A very deep tree: simplify it from the leaves up, so that rules recurse little. Memos are
        # emptied first, since comparing two equal deep trees (a memo hit) recurses as deep as they go.
        clear_memos()
        for n in _postorder(e):
            _s(n, fk)
        return _s(e, fk)


def clear_memos() -> None:
    """Forget every remembered simplification: the next ones run the rules (a test of what the rules
    compute, not of what was remembered; a tree too deep to compare)."""
    for memo in (_MEMO, _KEYS):
        memo.clear()
    _cbounds.cache_clear()


def _postorder(e: Expr) -> list[Expr]:
    """The nodes of ``e``, children before parents (iteratively: ``e`` may be too deep to recurse)."""
    out, stack, seen = [], [(e, False)], set()
    while stack:
        n, expanded = stack.pop()
        if expanded:
            out.append(n)
        elif id(n) not in seen:
            seen.add(id(n))
            stack.append((n, True))
            stack.extend((c, False) for c in E.children(n))
    return out


class _FactsKey(tuple):
    """Facts as a tuple that hashes once (a lowering simplifies thousands of expressions under one
    set of facts, each a memo lookup keyed by them)."""

    def __hash__(self):
        return self._h


_FACT_KEYS: dict[int, tuple[Mapping, _FactsKey]] = {}


def _facts_key(facts: Mapping[str, Interval]) -> tuple:
    """Facts as a hashable value, so that results can be memoized per set of facts (the same key
    object for the same facts object, so memo lookups succeed on identity)."""
    hit = _FACT_KEYS.get(id(facts))
    if hit is not None and hit[0] is facts:
        return hit[1]
    key = _FactsKey(sorted(facts.items(), key=operator.itemgetter(0)))
    key._h = tuple.__hash__(key)
    if len(_FACT_KEYS) > 1024:
        _FACT_KEYS.clear()
    if len(_CANONICAL_KEYS) > 1024:
        # the memos hold these key objects: a new object for equal facts would be compared interval by
        # interval on every hit of an old entry (700K comparisons in a process's second lowering of an
        # encoder layer, when both were emptied together at 256 ids), so they go with them
        _CANONICAL_KEYS.clear()
        _MEMO.clear()
        _cbounds.cache_clear()
    # one key object for equal facts held in different mappings: memo keys then match on identity,
    # where comparing two equal keys compared every interval (180K comparisons lowering a 5-stage pipeline)
    key = _CANONICAL_KEYS.setdefault(key, key)
    _FACT_KEYS[id(facts)] = (facts, key)
    return key


_CANONICAL_KEYS: dict[_FactsKey, _FactsKey] = {}


# ------------------------------------------------------------------------------------------ memoization
# Results are memoized on (expression, facts): nodes compare structurally (float constants by their
# bits, so 0.0 and -0.0 are different keys).
_MEMO: dict = {}
_MEMO_LIMIT = 1 << 16


def _s(e: Expr, fk: tuple) -> Expr:
    tp = type(e)
    if tp is Var or tp is Const:
        return e
    key = (e, fk)
    hit = _MEMO.get(key)
    if hit is not None:
        return hit
    out = _RULES.get(tp, _s_generic)(e, fk)
    if out is not e and out._hash == e._hash and out == e:
        # the rules rebuilt the node unchanged (44% of the misses lowering the bundled schedules): the
        # input itself, so that what is built from it keeps sharing it (memo hits by identity, no rebuilt
        # parents, no structural comparisons downstream)
        out = e
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    _MEMO[key] = out
    if out is not e:  # the rules' results are their own simplification (test_simplify_is_idempotent)
        _MEMO.setdefault((out, fk), out)
    return out


def _same(a: Expr, b: Expr) -> bool:
    """Structural equality (float constants compare by their bits)."""
    return a is b or a == b


# ------------------------------------------------------------------------------------- type helpers
@cache
def _tinfo(t: DType) -> tuple[str, int, int | None, int | None, bool]:
    """(kind, bits, min, max, no_overflow) of ``t``; min/max are None for floats."""
    kind = t.kind
    lo, hi = (int(t.min), int(t.max)) if kind in "biu" else (None, None)
    return kind, t.bits, lo, hi, kind == "i" and t.bits >= 32


def _is_int(t: DType) -> bool:
    return _tinfo(t)[0] in "iu"


def no_overflow(t: DType) -> bool:
    """Signed 32/64-bit integers: assumed not to overflow, so integer identities hold (the bounds too)."""
    return _tinfo(t)[4]


def _wrap(v: int, t: DType) -> int:
    """``v`` reduced to the bits of ``t`` (two's complement), as NumPy's integer arithmetic does."""
    _, bits, _, _, _ = _tinfo(t)
    v &= (1 << bits) - 1
    if t.kind == "i" and v >> (bits - 1):
        v -= 1 << bits
    return v


def _residue(v: int, bits: int) -> int:
    """The representative of ``v`` modulo 2**bits closest to zero (for ring coefficients)."""
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _fval(c: Const):
    """A float constant as a NumPy scalar of its own type, so arithmetic rounds like the dtype (a value
    too large for the type becomes inf, as NumPy makes it, without a warning)."""
    with np.errstate(over="ignore"):
        return c.dtype.np.type(c.value)


def _iconst(v: int, t: DType) -> Const:
    return Const(_wrap(v, t), t)


# ------------------------------------------------------------------------- canonical affine sums
# An integer expression is read as sum(coeff * atom) + const: ``terms`` maps atoms (expressions that
# are not + - * by a constant) to integer coefficients.


def _lin(e: Expr) -> tuple[dict, int]:
    """``e`` as (terms, constant); exact in the ring of ``e``'s type."""
    parts, k = E.affine_parts(e)
    terms: dict = {}
    for n, c in parts:
        terms[n] = terms.get(n, 0) + c
    return terms, k


def _add_into(terms: dict, other: dict, c: int) -> None:
    for a, ca in other.items():
        terms[a] = terms.get(a, 0) + c * ca


_KEYS: dict = {}


def _key(e: Expr) -> tuple:
    """Sort key of atoms: Vars by name, then other atoms by a short label and a digest of their
    structure. Deterministic across runs (no Python ``hash``), built once per node from its children's."""
    hit = _KEYS.get(e)
    if hit is not None:
        return hit
    if len(_KEYS) >= _MEMO_LIMIT:
        _KEYS.clear()
    stack = [e]
    while stack:
        n = stack[-1]
        todo = [c for c in E.children(n) if c not in _KEYS]
        if todo:
            stack += todo
        else:
            stack.pop()
            _KEYS[n] = _node_key(n, [_KEYS[c] for c in E.children(n)])
    return _KEYS[e]


def _node_key(n: Expr, kids: list[tuple]) -> tuple:
    tp = type(n)
    if tp is Const:
        own = repr(n.value)
    else:
        own = getattr(n, "name", "") or getattr(n, "buffer", "") or (str(n.dtype) if tp is E.Cast else "")
    digest = hashlib.blake2b(f"{tp.__name__}|{own}|{n.dtype}".encode(), digest_size=8)
    for k in kids:
        digest.update(k[2])
    if tp is Var:
        return (0, own, digest.digest())
    label = own if tp is Const else f"{tp.__name__}{own}({', '.join(k[1] for k in kids)})"
    return (1, label[:40], digest.digest())


def _emit(terms: dict, k: int, t: DType) -> Expr | None:
    """The canonical expression of ``terms + k``; None when a coefficient or the constant overflows a
    no-wrap type.

    Order: terms with larger coefficients first, then by name; positive terms, then the subtracted
    ones, then the constant (``32*xo + xi - y + 1``, ``7 - 2*x``).
    """
    _, bits, tmin, tmax, nowrap = _tinfo(t)
    if terms:
        k += _fuse_divmod(terms, nowrap, bits)
    if nowrap:  # what overflows is left as written: its value is not defined
        items = [(a, c) for a, c in terms.items() if c]
        if not all(tmin <= c <= tmax for _, c in items) or not tmin <= k <= tmax:
            return None
        if not items:
            return Const(k, t)
    else:
        items = [(a, r) for a, c in terms.items() if (r := _residue(c, bits))]
        k = _residue(k, bits)
        if not items:
            return _iconst(k, t)
    if len(items) > 1:
        items.sort(key=lambda ac: (-abs(ac[1]), _key(ac[0])))
    out: Expr | None = None
    neg = []
    for a, c in items:
        if c > 0:
            out = _term(a, c, t) if out is None else E.Add(out, _term(a, c, t))
        else:
            neg.append((a, -c))
    if out is None:
        if k:
            out, k = _iconst(k, t), 0
        else:
            a, c = neg.pop(0)
            out = E.Neg(a) if c == 1 else (E.Mul(Const(-c, t), a) if t.kind == "i" else E.Neg(_term(a, c, t)))
    for a, c in neg:
        out = E.Sub(out, _term(a, c, t)) if c <= tmax else E.Add(out, _term(a, -c, t))
    if k > 0:
        out = E.Add(out, Const(k, t))
    elif k < 0:
        out = E.Sub(out, Const(-k, t)) if -k <= tmax else E.Add(out, _iconst(k, t))
    return out


@lru_cache(maxsize=1 << 14)
def _term(a: Expr, c: int, t: DType) -> Expr:
    """``c * a``; memoized, as building nodes is most of the cost of a rewrite."""
    return a if c == 1 else E.Mul(Const(c, t), a)


def _fuse_divmod(terms: dict, nowrap: bool, bits: int) -> int:
    """Rewrite ``c*a*(x // a) + c*(x % a)`` as ``c*x`` in place; returns the constant it adds."""
    extra = 0
    for m in [a for a in terms if type(a) is E.Mod]:
        cm = terms.get(m)
        if not cm or type(m.b) is not Const or m.b.value == 0:
            continue
        d = E.FloorDiv(m.a, m.b)
        cd = terms.get(d)
        if cd is None:
            continue
        diff = cd - cm * int(m.b.value)
        if diff if nowrap else _residue(diff, bits):
            continue
        del terms[m], terms[d]
        sub, k = _lin(m.a)
        _add_into(terms, sub, cm)
        extra += cm * k
    return extra


def _factors(a: Expr) -> list[Expr]:
    """The factors of a product of atoms (constants are never among them in canonical form)."""
    if type(a) is E.Mul and type(a.a) is not Const and type(a.b) is not Const:
        return _factors(a.a) + _factors(a.b)
    return [a]


def _monomial(terms: dict, k: int, e: Expr) -> tuple[int, list[Expr]]:
    """``e`` as coefficient * product of factors (the sum itself is one factor if it has several terms)."""
    if k == 0 and len(terms) == 1:
        ((a, c),) = terms.items()
        return c, _factors(a)
    return 1, [e]


# ---------------------------------------------------------------------- constant bounds, for proofs
# Halide-style: every integer expression gets a constant range [lo, hi] (its type's range at worst),
# used to decide min/max, comparisons and divisions. Facts narrow the range of free symbols.


@lru_cache(maxsize=1 << 15)
def _cbounds(e: Expr, fk: tuple) -> tuple[int | None, int | None]:
    """Constant bounds of an integer or bool ``e``; (None, None) for floats."""
    ranges = _fact_ranges(fk) if fk else {}
    return _cb_node(e, lambda c: _cbounds(c, fk), ranges.get)


@lru_cache(maxsize=256)
def _fact_ranges(fk: tuple) -> dict[str, tuple[int | None, int | None]]:
    """Constant ranges of the symbols named in the facts; a few rounds, as facts may refer to each other."""
    ranges: dict[str, tuple[int | None, int | None]] = {}

    def sub(e):
        return _cb_node(e, sub, ranges.get)

    for _ in range(3):
        changed = False
        for name, iv in fk:
            lo = None if iv.lo is None or not _is_int(iv.lo.dtype) else sub(iv.lo)[0]
            hi = None if iv.hi is None or not _is_int(iv.hi.dtype) else sub(iv.hi)[1]
            old = ranges.get(name, (None, None))
            lo = old[0] if lo is None else lo if old[0] is None else max(lo, old[0])
            hi = old[1] if hi is None else hi if old[1] is None else min(hi, old[1])
            if (lo, hi) != old:
                ranges[name] = (lo, hi)
                changed = True
        if not changed:
            break
    return ranges


_NONE = (None, None)


def _cb_node(e: Expr, sub, var_range) -> tuple[int | None, int | None]:
    """One step of constant bounds: ``sub`` gives the bounds of children, ``var_range`` of symbols."""
    kind, bits, tmin, tmax, nowrap = _tinfo(e.dtype)
    if kind == "f":
        return _NONE
    tp = type(e)
    if tp is Const:
        v = int(e.value)
        return (v, v)
    if tp is Var:
        r = var_range(e.name)
        if r is None:
            return (tmin, tmax)
        lo = tmin if r[0] is None else max(tmin, r[0])
        hi = tmax if r[1] is None else min(tmax, r[1])
        return (lo, hi) if lo <= hi else (tmin, tmax)
    if tp is E.Cast:
        r = sub(e.value)
        if r[0] is None:
            v = e.value
            if type(v) is Const:
                c = _cast_const(v, e.dtype).value
                return (int(c), int(c))
            return (tmin, tmax)
        return r if tmin <= r[0] and r[1] <= tmax else (tmin, tmax)
    r = _cb_op(e, tp, sub, bits)
    if r is None:
        return (tmin, tmax)
    lo, hi = r
    if nowrap:  # no overflow: values outside the type cannot occur
        lo, hi = max(lo, tmin), min(hi, tmax)
        return (lo, hi) if lo <= hi else (tmin, tmax)
    return r if tmin <= lo and hi <= tmax else (tmin, tmax)


def _cb_op(e: Expr, tp, sub, bits: int):
    if tp is E.Add:
        (a0, a1), (b0, b1) = sub(e.a), sub(e.b)
        return (a0 + b0, a1 + b1)
    if tp is E.Sub:
        (a0, a1), (b0, b1) = sub(e.a), sub(e.b)
        return (a0 - b1, a1 - b0)
    if tp is E.Neg:
        a0, a1 = sub(e.a)
        return (-a1, -a0)
    if tp is E.Mul:
        (a0, a1), (b0, b1) = sub(e.a), sub(e.b)
        ps = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        return (min(ps), max(ps))
    if tp is E.FloorDiv:
        return _cb_div(sub(e.a), sub(e.b))
    if tp is E.Mod:
        return _cb_mod(sub(e.a), sub(e.b))
    if tp is E.Min or tp is E.Max:
        (a0, a1), (b0, b1) = sub(e.a), sub(e.b)
        return (min(a0, b0), min(a1, b1)) if tp is E.Min else (max(a0, b0), max(a1, b1))
    if tp is E.Select:
        (a0, a1), (b0, b1) = sub(e.t), sub(e.f)
        return (min(a0, b0), max(a1, b1))
    if tp in (E.LT, E.LE, E.EQ, E.NE, E.And, E.Or):
        return (0, 1)
    if tp is E.Not:
        if e.dtype.is_bool:
            return (0, 1)
        a0, a1 = sub(e.a)
        return (-a1 - 1, -a0 - 1)
    if tp is E.BitAnd:
        (a0, a1), (b0, b1) = sub(e.a), sub(e.b)
        if a0 >= 0 or b0 >= 0:
            return (0, min(h for lo, h in ((a0, a1), (b0, b1)) if lo >= 0))
        return None
    if tp is E.Shr or tp is E.Shl:
        b = e.b
        if type(b) is Const and 0 <= b.value < bits:
            a0, a1 = sub(e.a)
            s = int(b.value)
            return (a0 >> s, a1 >> s) if tp is E.Shr else (a0 << s, a1 << s)
    return None


def _cb_div(a, b):
    """a // b: the divisor's negative part, its positive part and 0 (x // 0 == 0) separately."""
    (a0, a1), (b0, b1) = a, b
    parts = [(0, 0)] if b0 <= 0 <= b1 else []
    for y0, y1 in ((max(b0, 1), b1), (b0, min(b1, -1))):
        if y0 <= y1:  # monotone in each operand: the extremes are at the corners
            qs = [x // y for x in (a0, a1) for y in (y0, y1)]
            parts.append((min(qs), max(qs)))
    return (min(p[0] for p in parts), max(p[1] for p in parts))


def _cb_mod(a, b):
    """a % b, by the divisor's sign as for division; the result has the divisor's sign."""
    (a0, a1), (b0, b1) = a, b
    parts = [(0, 0)] if b0 <= 0 <= b1 else []
    if b1 >= 1:
        y0 = max(b0, 1)
        if y0 == b1 and a0 // y0 == a1 // y0:  # one period of a single divisor: exact
            m = a0 // y0 * y0
            parts.append((a0 - m, a1 - m))
        elif a0 >= 0:
            parts.append((a0, a1) if a1 < y0 else (0, min(a1, b1 - 1)))
        else:
            parts.append((0, b1 - 1))
    if b0 <= -1:
        y1 = min(b1, -1)
        if a1 <= 0:
            parts.append((a0, a1) if a0 > y1 else (max(a0, b0 + 1), 0))
        else:
            parts.append((b0 + 1, 0))
    return (min(p[0] for p in parts), max(p[1] for p in parts))


def _value_bounds(e: Expr, fk: tuple) -> tuple[int, int]:
    """Constant bounds of a simplified integer ``e``, summed over the atoms of its affine form (flat,
    as sums can be long). A wrapping type keeps them only if the whole range fits the type."""
    terms, k = _lin(e)
    if k == 0 and len(terms) == 1 and terms.get(e) == 1:  # an atom
        return _cbounds(e, fk)
    lo, hi = _lin_bounds(terms, k, fk)
    _, _, tmin, tmax, nowrap = _tinfo(e.dtype)
    if nowrap:
        lo, hi = max(lo, tmin), min(hi, tmax)
        return (lo, hi) if lo <= hi else (tmin, tmax)
    return (lo, hi) if tmin <= lo and hi <= tmax else (tmin, tmax)


def _lin_bounds(terms: dict, k: int, fk: tuple) -> tuple[int, int]:
    """Constant bounds of ``terms + k`` (integer atoms always have bounds: their type's range)."""
    lo = hi = k
    for a, c in terms.items():
        a0, a1 = _cbounds(a, fk)
        if c > 0:
            lo += c * a0
            hi += c * a1
        else:
            lo += c * a1
            hi += c * a0
    return lo, hi


def _prove_nonneg(terms: dict, k: int, fk: tuple, depth: int = 2) -> bool:
    """Whether ``terms + k >= 0`` for all values allowed by the facts (False: not known).

    Constant bounds first; then terms are replaced by symbolic lower bounds (a symbol's fact, an
    operand of a min or max, ``32*(x // 32) >= x - 31``), so that ``W - x - 1 >= 0`` follows from
    ``x <= W - 1``. No-wrap types only.
    """
    if _lin_bounds(terms, k, fk)[0] >= 0:
        return True
    if depth == 0:
        return False
    options = []
    n = 1
    for a, c in terms.items():
        cands = _term_lower_bounds(a, c, fk)
        if cands:
            n *= len(cands)
            if n > 16:
                break
            options.append((a, cands))
    # every term replaced at once; then one at a time, the others kept: ``L - i - min(L - i, 8)`` needs
    # its min replaced by ``L - i`` and ``-i`` kept (its bound ``-(L - 1)`` loses what cancels)
    choices = list(product(*(o[1] for o in options)))
    if len(options) > 1:
        choices += [tuple(cand if j == m else None for j in range(len(options)))
                    for m, (_, cands) in enumerate(options) for cand in cands]
    for choice in choices:
        new = dict(terms)
        nk = k
        for (a, _), picked in zip(options, choice, strict=True):
            if picked is None:
                continue
            # c * a is replaced by its bound: subtract exactly c * a, as an earlier replacement may have
            # added to a's coefficient (deleting the key would drop what it added, unsoundly)
            new[a] -= terms[a]
            _add_into(new, picked[0], 1)
            nk += picked[1]
        if _prove_nonneg({a: c for a, c in new.items() if c}, nk, fk, depth - 1):
            return True
    return False


def _term_lower_bounds(a: Expr, c: int, fk: tuple) -> list[tuple[dict, int]]:
    """Affine lower bounds of the term ``c * a`` that are not constants."""
    tp = type(a)
    if tp is Var:
        iv = _fact_of(fk, a.name)
        if iv is None:
            return []
        end = iv.lo if c > 0 else iv.hi
        if end is None or type(end) is Const or not no_overflow(end.dtype):
            return []
        return [_scaled(_lin(_s(end, ())), c)]
    if (tp is E.Min and c < 0) or (tp is E.Max and c > 0):
        return [_scaled(_lin(a.a), c), _scaled(_lin(a.b), c)]
    if tp is E.FloorDiv and type(a.b) is Const and a.b.value > 0 and c % a.b.value == 0:
        d = int(a.b.value)  # x - d + 1 <= d * (x // d) <= x
        terms, k = _lin(a.a)
        return [_scaled((terms, k - d + 1 if c > 0 else k), c // d)]
    return []


def _fact_of(fk: tuple, name: str):
    """The fact about ``name`` in ``fk``, or None: looked up in a dict made once per facts key (a
    lowering's facts name hundreds of symbols, and proofs look them up tens of thousands of times: a scan
    of them was 10% of a pyramid's lowering)."""
    by_name = getattr(fk, "by_name", None)
    if by_name is None:
        if type(fk) is not _FactsKey:  # facts narrowed inside a Let: a plain tuple, scanned
            return next((iv for n, iv in fk if n == name), None)
        by_name = fk.by_name = dict(fk)
    return by_name.get(name)


def _scaled(lin: tuple[dict, int], c: int) -> tuple[dict, int]:
    terms, k = lin
    return {x: c * cx for x, cx in terms.items()}, c * k


def _compare_lins(a: Expr, b: Expr, fk: tuple) -> int:
    """-1 if ``a <= b`` is proven, 1 if ``a >= b`` is proven, 0 if neither (integer a and b)."""
    t = a.dtype
    if no_overflow(t):
        ta, ka = _lin(a)
        d, k = _lin(b)
        _add_into(d, ta, -1)
        d = {x: c for x, c in d.items() if c}
        k -= ka
        if not d:
            return -1 if k >= 0 else 1
        if _prove_nonneg(d, k, fk):
            return -1
        if _prove_nonneg({x: -c for x, c in d.items()}, -k, fk):
            return 1
        return 0
    (a0, a1), (b0, b1) = _value_bounds(a, fk), _value_bounds(b, fk)
    return -1 if a1 <= b0 else 1 if b1 <= a0 else 0


# ------------------------------------------------------------------------------------------- rules
def _s_generic(e: Expr, fk: tuple) -> Expr:
    kids = E.children(e)
    return E.with_children(e, tuple(_s(c, fk) for c in kids)) if kids else e


def _s_sum(e: Expr, fk: tuple) -> Expr:
    """Integer + - and * by a constant: collect the whole chain into one affine sum."""
    parts, k = E.affine_parts(e)
    terms: dict = {}
    for n, c in parts:
        lt, lk = _lin(_s(n, fk))
        _add_into(terms, lt, c)
        k += c * lk
    out = _emit(terms, k, e.dtype)
    return out if out is not None else _s_generic(e, fk)


def _s_mul(e: Expr, fk: tuple) -> Expr:
    t = e.dtype
    if not _is_int(t):
        return _s_float(e, fk) if t.is_float else _s_generic(e, fk)
    if type(e.a) is Const or type(e.b) is Const:
        return _s_sum(e, fk)
    a, b = _s(e.a, fk), _s(e.b, fk)
    ta, ka = _lin(a)
    tb, kb = _lin(b)
    if not ta or not tb:  # one side folded to a constant
        terms, k = (tb, kb) if not ta else (ta, ka)
        c = ka if not ta else kb
        terms = {x: cx * c for x, cx in terms.items()}
        k *= c
    else:
        ca, fa = _monomial(ta, ka, a)
        cb, fb = _monomial(tb, kb, b)
        fs = sorted(fa + fb, key=_key)
        prod = fs[0]
        for f in fs[1:]:
            prod = E.Mul(prod, f)
        terms, k = {prod: ca * cb}, 0
    out = _emit(terms, k, t)
    return out if out is not None else E.Mul(a, b)


def _s_add(e: Expr, fk: tuple) -> Expr:
    t = e.dtype
    return _s_sum(e, fk) if _is_int(t) else _s_float(e, fk) if t.is_float else _s_generic(e, fk)


_FLOAT_UFUNC = {
    E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.true_divide,
    E.FloorDiv: np.floor_divide, E.Mod: np.mod, E.Min: np.minimum, E.Max: np.maximum,
}


def _fold_float(tp, a: Const, b: Const, t: DType) -> Const:
    with np.errstate(all="ignore"):
        return Const(float(_FLOAT_UFUNC[tp](_fval(a), _fval(b))), t)


def _is_fconst(x: Expr, v: float, sign: float = 1.0) -> bool:
    """Whether ``x`` is the float constant ``v`` (with the given sign, which matters for zero)."""
    return type(x) is Const and x.value == v and math.copysign(1.0, x.value) == sign


def _s_float(e: Expr, fk: tuple) -> Expr:
    """Float arithmetic: fold constants in the dtype's precision; no reassociation, few identities."""
    t = e.dtype
    tp = type(e)
    if tp is E.Neg:
        a = _s(e.a, fk)
        if type(a) is Const:
            return Const(float(-_fval(a)), t)
        return a.a if type(a) is E.Neg else E.Neg(a)
    a, b = _s(e.a, fk), _s(e.b, fk)
    if type(a) is Const and type(b) is Const and tp in _FLOAT_UFUNC:
        return _fold_float(tp, a, b, t)
    if tp is E.Add:  # x + -0.0 is x for every x (x + 0.0 is not: -0.0 + 0.0 == 0.0)
        if _is_fconst(b, 0.0, -1.0):
            return a
        if _is_fconst(a, 0.0, -1.0):
            return b
    elif tp is E.Sub:
        if _is_fconst(b, 0.0):
            return a
    elif tp is E.Mul:
        if _is_fconst(b, 1.0):
            return a
        if _is_fconst(a, 1.0):
            return b
    elif tp is E.Div:
        if _is_fconst(b, 1.0):
            return a
    elif tp in (E.Min, E.Max) and _same(a, b):
        return a
    return E.with_children(e, (a, b))


def _s_floordiv(e: Expr, fk: tuple) -> Expr:
    t = e.dtype
    if not _is_int(t):
        return _s_float(e, fk) if t.is_float else _s_generic(e, fk)
    a, b = _s(e.a, fk), _s(e.b, fk)
    if type(b) is Const:
        c = int(b.value)
        if c == 0:
            return Const(0, t)
        if type(a) is Const:
            return _iconst(int(a.value) // c, t)
        if c == 1:
            return a
        if c == -1:
            return _s(E.Neg(a), fk)
        if c > 0:
            return _div_const(a, c, t, fk)
        return E.FloorDiv(a, b)
    if type(a) is Const and a.value == 0:
        return a
    if _in_range(a, b, fk):  # 0 <= a < b
        return Const(0, t)
    return E.FloorDiv(a, b)


def _div_const(a: Expr, c: int, t: DType, fk: tuple) -> Expr:
    """``a // c`` for a constant ``c > 0``, ``a`` simplified."""
    if type(a) is E.FloorDiv and type(a.b) is Const and a.b.value > 0 and a.b.value * c <= _tinfo(t)[3]:
        return _div_const(a.a, int(a.b.value) * c, t, fk)  # (x // a) // c == x // (a*c)
    lo, hi = _value_bounds(a, fk)
    if lo // c == hi // c:
        return Const(lo // c, t)
    if not no_overflow(t):
        return E.FloorDiv(a, Const(c, t))
    # (q*c*x + r) // c == q*x + r // c: pull out the terms that are multiples of c
    terms, k = _lin(a)
    q: dict = {}
    r: dict = {}
    for x, cx in terms.items():
        if cx % c == 0:
            q[x] = cx // c
        else:
            r[x] = cx
    qk, rk = divmod(k, c)
    c0 = c
    if r:
        rlo, rhi = _lin_bounds(r, rk, fk)
        if rlo // c == rhi // c:
            qk += rlo // c
        else:
            g = math.gcd(c, *r.values())
            if g > 1:  # (g*y + s) // (g*c') == y // c' when 0 <= s < g
                r = {x: cx // g for x, cx in r.items()}
                rk //= g
                c //= g
            num = _emit(r, rk, t)
            if num is None:
                return E.FloorDiv(a, Const(c0, t))
            if type(num) is E.FloorDiv and type(num.b) is Const and num.b.value > 0 \
                    and num.b.value * c <= _tinfo(t)[3]:
                d = _div_const(num.a, int(num.b.value) * c, t, fk)
            else:
                d = E.FloorDiv(num, Const(c, t))
            dt, dk = _lin(d)
            _add_into(q, dt, 1)
            qk += dk
    out = _emit(q, qk, t)
    return out if out is not None else E.FloorDiv(a, Const(c0, t))


def _in_range(a: Expr, b: Expr, fk: tuple) -> bool:
    """Whether ``0 <= a < b`` is proven (integers)."""
    if no_overflow(a.dtype):
        ta, ka = _lin(a)
        if not _prove_nonneg(ta, ka, fk):
            return False
        d, k = _lin(b)
        _add_into(d, ta, -1)
        return _prove_nonneg({x: c for x, c in d.items() if c}, k - ka - 1, fk)
    (a0, a1), (b0, _) = _value_bounds(a, fk), _value_bounds(b, fk)
    return a0 >= 0 and a1 < b0


def _s_mod(e: Expr, fk: tuple) -> Expr:
    t = e.dtype
    if not _is_int(t):
        return _s_float(e, fk) if t.is_float else _s_generic(e, fk)
    a, b = _s(e.a, fk), _s(e.b, fk)
    if type(b) is Const:
        c = int(b.value)
        if c == 0 or c == 1 or c == -1:
            return Const(0, t)
        if type(a) is Const:
            return _iconst(int(a.value) % c, t)
        if c > 0:
            return _mod_const(a, c, t, fk)
        return E.Mod(a, b)
    if _same(a, b) or (type(a) is Const and a.value == 0):
        return Const(0, t)
    if _in_range(a, b, fk):
        return a
    return E.Mod(a, b)


def _mod_const(a: Expr, c: int, t: DType, fk: tuple) -> Expr:
    """``a % c`` for a constant ``c > 0``, ``a`` simplified."""
    if type(a) is E.Mod and type(a.b) is Const and a.b.value > 0 and a.b.value % c == 0:
        return _mod_const(a.a, c, t, fk)  # (x % (k*c)) % c == x % c
    lo, hi = _value_bounds(a, fk)
    if lo // c == hi // c:  # a stays within one period
        m = lo // c * c
        if m == 0:
            return a
        terms, k = _lin(a)
        out = _emit(terms, k - m, t)
        return out if out is not None else E.Mod(a, Const(c, t))
    if not no_overflow(t):
        return E.Mod(a, Const(c, t))
    # only residues modulo c matter: drop multiples of c, reduce coefficients and the constant
    terms, k = _lin(a)
    r = {}
    for x, cx in terms.items():
        cr = cx % c
        if cr > c // 2:
            cr -= c
        if cr:
            r[x] = cr
    rk = k % c
    if not r:
        return Const(rk, t)
    rlo, rhi = _lin_bounds(r, rk, fk)
    if rlo // c == rhi // c:
        out = _emit(r, rk - rlo // c * c, t)
    else:
        num = _emit(r, rk, t)
        if num is not None and type(num) is E.Mod and type(num.b) is Const and num.b.value > 0 \
                and num.b.value % c == 0:
            return _mod_const(num.a, c, t, fk)
        out = None if num is None else E.Mod(num, Const(c, t))
    return out if out is not None else E.Mod(a, Const(c, t))


def _s_minmax(e: Expr, fk: tuple) -> Expr:
    t = e.dtype
    if t.is_float:
        return _s_float(e, fk)
    return _minmax(type(e), _s(e.a, fk), _s(e.b, fk), t, fk)


def _minmax(cls, a: Expr, b: Expr, t: DType, fk: tuple) -> Expr:
    """``min``/``max`` of simplified integer or bool operands."""
    is_min = cls is E.Min
    if _same(a, b):
        return a
    if type(a) is Const:
        a, b = b, a  # constants go to the right
    if type(b) is Const:
        if type(a) is Const:
            pick = min if is_min else max
            return Const(pick(a.value, b.value), t)
        if type(a) is cls and type(a.b) is Const:  # min(min(x, c1), c2) == min(x, min(c1, c2))
            pick = min if is_min else max
            return _minmax(cls, a.a, Const(pick(a.b.value, b.value), t), t, fk)
    if t.is_bool:
        return cls(a, b)
    order = _compare_lins(a, b, fk)
    if order:
        return a if (order < 0) == is_min else b
    other = E.Max if is_min else E.Min
    for x, y in ((a, b), (b, a)):
        if type(y) is other and (_same(y.a, x) or _same(y.b, x)):
            return x  # min(x, max(x, z)) == x
        if type(y) is cls and (_same(y.a, x) or _same(y.b, x)):
            return y  # min(x, min(x, z)) == min(x, z)
    if no_overflow(t) and type(b) is not Const:
        ta, ka = _lin(a)
        tb, kb = _lin(b)
        if ka == kb != 0:  # min(x + k, y + k) == min(x, y) + k
            x, y = _emit(ta, 0, t), _emit(tb, 0, t)
            if x is not None and y is not None:
                ti, ki = _lin(_minmax(cls, x, y, t, fk))
                out = _emit(ti, ki + ka, t)
                if out is not None:
                    return out
    if type(b) is not Const and _key(b) < _key(a):
        a, b = b, a
    return cls(a, b)


_CMP_OPS = {E.LT: operator.lt, E.LE: operator.le, E.EQ: operator.eq, E.NE: operator.ne}


def _s_compare(e: Expr, fk: tuple) -> Expr:
    return _compare(type(e), _s(e.a, fk), _s(e.b, fk), e.dtype, fk)


def _compare(cls, a: Expr, b: Expr, out: DType, fk: tuple) -> Expr:
    """A comparison of simplified operands: folded when proven, else in canonical form ``N < P + k``."""
    t = a.dtype
    if type(a) is Const and type(b) is Const:
        if t.is_float:
            return Const(bool(_CMP_OPS[cls](_fval(a), _fval(b))), out)
        return Const(bool(_CMP_OPS[cls](a.value, b.value)), out)
    if t.is_float:
        return cls(a, b)
    if _same(a, b):
        return Const(cls in (E.LE, E.EQ), out)
    if t.is_bool:
        return cls(a, b)
    kind, bits, tmin, tmax, nowrap = _tinfo(t)
    equality = cls in (E.EQ, E.NE)
    if nowrap or equality:  # d = b - a; for EQ/NE this is exact in the ring of wrapping types too
        d, k = _lin(b)
        ta, ka = _lin(a)
        _add_into(d, ta, -1)
        k -= ka
        if nowrap:
            d = {x: c for x, c in d.items() if c}
        else:
            d = {x: r for x, c in d.items() if (r := _residue(c, bits))}
            k = _residue(k, bits)
        if not d:
            return Const(_CMP_OPS[cls](0, k), out)
    if nowrap:
        neg_d = {x: -c for x, c in d.items()}
        if cls is E.LT:
            if _prove_nonneg(d, k - 1, fk):
                return Const(True, out)
            if _prove_nonneg(neg_d, -k, fk):
                return Const(False, out)
        elif cls is E.LE:
            if _prove_nonneg(d, k, fk):
                return Const(True, out)
            if _prove_nonneg(neg_d, -k - 1, fk):
                return Const(False, out)
        elif _prove_nonneg(d, k - 1, fk) or _prove_nonneg(neg_d, -k - 1, fk):
            return Const(cls is E.NE, out)
    else:
        (a0, a1), (b0, b1) = _value_bounds(a, fk), _value_bounds(b, fk)
        if cls is E.LT and (a1 < b0 or a0 >= b1):
            return Const(a1 < b0, out)
        if cls is E.LE and (a1 <= b0 or a0 > b1):
            return Const(a1 <= b0, out)
        if equality and (a1 < b0 or b1 < a0):
            return Const(cls is E.NE, out)
        if not equality:
            return cls(a, b)
    # canonical form: terms with negative coefficients on the left, the others and k on the right
    if equality and d[min(d, key=_key)] > 0:  # a == b and b == a: one form
        d = {x: -c for x, c in d.items()}
        k = -k
        if not nowrap:
            d = {x: _residue(c, bits) for x, c in d.items()}
            k = _residue(k, bits)
    left = {x: -c for x, c in d.items() if c < 0}
    right = {x: c for x, c in d.items() if c > 0}
    if left:
        lhs, rhs = _emit(left, 0, t), _emit(right, k, t)
    else:
        if nowrap and not tmin <= -k <= tmax:
            return cls(a, b)
        lhs, rhs = _iconst(-k, t), _emit(right, 0, t)
    if lhs is None or rhs is None:
        return cls(a, b)
    return cls(lhs, rhs)


def _s_logic(e: Expr, fk: tuple) -> Expr:
    """And / Or of bools."""
    is_and = type(e) is E.And
    a, b = _s(e.a, fk), _s(e.b, fk)
    for x, y in ((a, b), (b, a)):
        if type(x) is Const:
            return y if bool(x.value) == is_and else x
    if _same(a, b):
        return a
    if (type(a) is E.Not and _same(a.a, b)) or (type(b) is E.Not and _same(b.a, a)):
        return Const(not is_and, e.dtype)
    if _key(b) < _key(a):
        a, b = b, a
    return type(e)(a, b)


def _s_not(e: Expr, fk: tuple) -> Expr:
    a = _s(e.a, fk)
    t = e.dtype
    tp = type(a)
    if tp is Const:
        return Const(not a.value, t) if t.is_bool else _iconst(~int(a.value), t)
    if tp is E.Not:
        return a.a
    if t.is_bool:
        if tp is E.EQ or tp is E.NE:  # exact for floats too: NaN != NaN
            return _compare(E.NE if tp is E.EQ else E.EQ, a.a, a.b, t, fk)
        if (tp is E.LT or tp is E.LE) and not a.a.dtype.is_float:
            return _compare(E.LE if tp is E.LT else E.LT, a.b, a.a, t, fk)
    return E.Not(a)


def _s_select(e: Expr, fk: tuple) -> Expr:
    c = _s(e.cond, fk)
    if type(c) is Const:
        return _s(e.t if c.value else e.f, fk)
    t, f = _s(e.t, fk), _s(e.f, fk)
    if _same(t, f):
        return t
    if type(c) is E.Not:
        c, t, f = c.a, f, t
    if type(t) is E.Select and _same(t.cond, c):
        t = t.t
    if type(f) is E.Select and _same(f.cond, c):
        f = f.f
    if t.dtype.is_bool and type(t) is Const and type(f) is Const:
        return c if t.value else _s(E.Not(c), fk)
    return E.Select(c, t, f)


# ------------------------------------------------------------------------------------------- casts
_MANTISSA = {"float16": 11, "float32": 24, "float64": 53}


def _lossless(src: DType, dst: DType) -> bool:
    """Whether every value of ``src`` is exactly a value of ``dst``."""
    sk, dk = src.kind, dst.kind
    if sk == "b":
        return True
    if dk == "b":
        return False
    if sk in "iu" and dk in "iu":
        return dst.min <= src.min and src.max <= dst.max
    if sk in "iu":
        return max(-src.min, src.max) <= 2 ** _MANTISSA[dst.name]
    return dk == "f" and dst.bits >= src.bits


def _cast_const(c: Const, t: DType) -> Const:
    """Cast a constant: ints wrap, floats truncate toward zero and saturate (NaN -> 0), bool is != 0."""
    src = c.dtype
    v = c.value
    if t.is_bool:
        return Const(bool((_fval(c) if src.is_float else v) != 0), t)
    if t.kind in "iu":
        if src.is_float:
            fv = float(_fval(c))
            if math.isnan(fv):
                return Const(0, t)
            return Const(int(t.max) if fv >= t.max else int(t.min) if fv <= t.min else int(fv), t)
        return _iconst(int(v), t)
    with np.errstate(all="ignore"):
        x = _fval(c) if src.is_float else src.np.type(v)
        return Const(float(x.astype(t.np)), t)


def _s_cast(e: Expr, fk: tuple) -> Expr:
    return _cast(e.dtype, _s(e.value, fk))


def _cast(t: DType, v: Expr) -> Expr:
    s = v.dtype
    if s == t:
        return v
    if type(v) is Const:
        return _cast_const(v, t)
    if type(v) is E.Cast:
        inner = v.value
        u, w = s, inner.dtype  # t(u(w))
        same_rule = t.kind not in "iu" or (u.kind == "f") == (w.kind == "f") or _lossless(w, t)
        if _lossless(w, u) and same_rule:  # float -> int saturates but int -> int wraps
            return _cast(t, inner)
        if w.kind in "iu" and u.kind in "iu" and t.kind in "iu" and t.bits <= u.bits:
            return _cast(t, inner)  # truncating twice == truncating once to the narrower width
    return E.Cast(v, t)


# ---------------------------------------------------------------------------------- bits and calls
def _s_bitwise(e: Expr, fk: tuple) -> Expr:
    t = e.dtype
    tp = type(e)
    a, b = _s(e.a, fk), _s(e.b, fk)
    if not _is_int(t):
        return E.with_children(e, (a, b))
    bits = _tinfo(t)[1]
    if tp is E.Shl or tp is E.Shr:
        if type(b) is Const and 0 <= b.value < bits:
            s = int(b.value)
            if type(a) is Const:
                return _iconst(int(a.value) << s if tp is E.Shl else int(a.value) >> s, t)
            if s == 0:
                return a
            if (1 << s) <= _tinfo(t)[3]:  # shifts are multiplications and floor divisions
                p = Const(1 << s, t)
                return _s_sum(E.Mul(p, a), fk) if tp is E.Shl else _div_const(a, 1 << s, t, fk)
        return E.with_children(e, (a, b))
    if type(a) is Const:
        a, b = b, a
    if type(b) is Const:
        if type(a) is Const:
            fn = {E.BitAnd: operator.and_, E.BitOr: operator.or_, E.BitXor: operator.xor}[tp]
            return _iconst(fn(int(a.value), int(b.value)), t)
        ones = _wrap(-1, t)
        if b.value == 0:
            return b if tp is E.BitAnd else a
        if b.value == ones and tp is E.BitAnd:
            return a
        if b.value == ones and tp is E.BitOr:
            return b
        return tp(a, b)
    if _same(a, b):
        return Const(0, t) if tp is E.BitXor else a
    if _key(b) < _key(a):
        a, b = b, a
    return tp(a, b)


def _s_call(e: Expr, fk: tuple) -> Expr:
    args = tuple(_s(x, fk) for x in e.args)
    if e.name == "abs" and len(args) == 1 and type(args[0]) is Const and _is_int(e.dtype):
        return _iconst(abs(int(args[0].value)), e.dtype)
    return E.Call(e.name, args, e.dtype)


def _s_let(e: Expr, fk: tuple) -> Expr:
    value = _s(e.value, fk)
    inner = tuple(f for f in fk if f[0] != e.name)  # facts about the name do not hold inside
    body = _s(e.body, inner)
    if e.name not in E.free_vars(body):
        return body
    return E.Let(e.name, value, body)


_RULES = {
    E.Add: _s_add, E.Sub: _s_add, E.Neg: _s_add, E.Mul: _s_mul, E.Div: _s_float,
    E.FloorDiv: _s_floordiv, E.Mod: _s_mod, E.Min: _s_minmax, E.Max: _s_minmax,
    E.LT: _s_compare, E.LE: _s_compare, E.EQ: _s_compare, E.NE: _s_compare,
    E.And: _s_logic, E.Or: _s_logic, E.Not: _s_not, E.Select: _s_select, E.Cast: _s_cast,
    E.BitAnd: _s_bitwise, E.BitOr: _s_bitwise, E.BitXor: _s_bitwise, E.Shl: _s_bitwise, E.Shr: _s_bitwise,
    E.Call: _s_call, E.Let: _s_let,
}
