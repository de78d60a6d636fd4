"""Vectorization, after Halide's VectorizeLoops: a loop of kind VECTORIZED with constant extent ``n``
becomes its body, run once on ``n`` lanes, with the loop variable replaced by ``Ramp(min, 1, n)``.

Expressions that depend on a lane become vectors: scalar operands are broadcast, a Load at a vector
index is a vector load, comparisons give bool vectors, casts and math calls keep the lanes. Affine
integer arithmetic on ramps stays a ramp (``ramp(b, s) * c + d -> ramp(b*c + d, s*c)``), so that the
backend sees dense (stride 1) and strided accesses; everything else is a general vector (a gather).
Expressions that do not depend on a lane stay scalar.

Choices:
- Lane-dependent ``IfThenElse``: predicated, not scalarized. The condition becomes a bool vector and
  the branches are vectorized; the backend runs the plain body when every lane is active, masked
  loads and stores when some are, nothing when none are (so a tail guard costs one test per vector).
- Loops inside a vectorized loop: vectorized across (Halide's behaviour) when their bounds do not
  depend on a lane; the inner loop stays a serial loop whose body works on vectors. Inner loops of
  kind PARALLEL or VECTORIZED run serially. A vectorized loop that contains an already vectorized
  loop, or lane-dependent loop bounds, or an Allocate, is scalarized (emitted as a serial loop).
- Correctness whatever the body: the loop is vectorized only when its lanes are independent, that is
  when every buffer the body stores to is either (a) stored by one Store, outside inner loops, and
  not loaded (a scatter keeps the serial order of overlapping lanes), or (b) accessed only at one
  index, the same ramp with a constant non-zero stride for every load and store, that does not
  depend on inner loops (each lane owns its element). Otherwise the loop stays serial: reductions
  into one element, scans, histograms. (c) A buffer only written, by stores of a pure definition's
  points (``Store.point``: no two write one address), may be written in any order, inner loops too.
  (d) The buffer of the Func whose update the loop runs over a pure Var (``For.owns``): the language
  keeps each pure Var in its own position in every self-reference, so lanes touch disjoint elements
  (a scan down the rows, vectorized along the columns, reads the row above at another index).
  A non-constant extent also keeps the loop serial.
- Reductions over a vectorized RDom (the schedule layer allows ``vectorize`` on an RVar only for an
  update ``f[x] = op(f[x], e)`` with ``op`` one of + * min max and or): a loop whose body stores one
  element, ``b[I] = op(b[I], e)`` (I the same in every lane, b read nowhere else), computes ``e`` on
  every lane and stores ``op(b[I], op over the lanes of e)`` (``VectorReduce``); lanes a guard turns
  off contribute op's identity. When such a loop is the whole body of a serial loop over which ``I``
  does not change (the outer part of the split RVar), the lanes are kept apart across it in a vector
  accumulator (Halide's rfactor: one vector op per iteration, the lanes combined once at the end). A
  float sum so vectorized is reassociated, as NumPy's pairwise sums are.
- Widths need not be powers of two; width 1 binds the variable to ``min``.

Run it after simplification: the simplifier is written for scalars and must not see vectors. The
scalar parts this pass builds (ramp bases and strides) are simplified here.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ...algebra import expr as E
from ...algebra import types as T
from ...algebra.simplify import simplify
from ...program import REDUCING_OPS
from .. import ir


class _Scalarize(Exception):
    """The loop cannot be vectorized: emit it as a serial loop."""


def vectorize_loops(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with every VECTORIZED loop replaced by vector code (or by a serial loop where that
    would not be correct; see the module docstring)."""

    scope: dict[str, list[E.Expr]] = {}  # the integer lets around a statement (for residues of indices)
    residues: dict = {}

    def on_stmt(s: ir.Stmt) -> ir.Stmt:
        if isinstance(s, ir.For) and s.kind is ir.ForKind.VECTORIZED:
            return _vectorize_loop(s, scope, residues)
        if isinstance(s, ir.For) and s.kind is ir.ForKind.SERIAL:
            return _accumulate_lanes(s)
        return s

    def go(s: ir.Stmt) -> ir.Stmt:  # ir.map_stmt's order (bottom-up), with the lets in scope
        bound = s.name if isinstance(s, ir.LetStmt) else s.var if isinstance(s, ir.For) else None
        if bound is not None:
            saved = scope.pop(bound, None)
            if isinstance(s, ir.LetStmt) and s.value.dtype.is_int:
                scope[bound] = [s.value]
            residues.clear()
        kids = ir.children(s)
        new = tuple(go(k) for k in kids)
        if bound is not None:
            scope.pop(bound, None)
            if saved is not None:
                scope[bound] = saved
            residues.clear()
        if all(a is b for a, b in zip(new, kids, strict=True)):
            out = s
        elif isinstance(s, ir.Block):
            out = ir.block(*new)
        elif isinstance(s, ir.IfThenElse):
            out = ir.IfThenElse(s.cond, new[0], new[1] if len(new) > 1 else None)
        else:
            out = replace(s, body=new[0])
        return on_stmt(out)

    with E.deep_recursion():
        return go(stmt)


def _vectorize_loop(loop: ir.For, lets: dict | None = None, residues: dict | None = None) -> ir.Stmt:
    serial = ir.For(loop.var, loop.min, loop.extent, ir.ForKind.SERIAL, loop.body)
    extent = simplify(loop.extent)
    if not isinstance(extent, E.Const):
        return serial
    n = int(extent.value)
    if n <= 0:
        return ir.Block(())
    lo = loop.min if loop.min.dtype == T.ADDRESS else E.Cast(loop.min, T.ADDRESS)
    if n == 1:
        return ir.LetStmt(loop.var, lo, loop.body)
    if _has_vectors(loop.body):
        return serial
    env = {loop.var: E.Ramp(lo, E.Const(1, T.ADDRESS), n)}
    try:
        if not _lanes_independent(loop, env, n):
            reduction = _reduction_into(loop)
            if reduction is None:
                return serial
            return _Vectorizer(n, reduction, lets, residues).stmt(loop.body, env)
        return _Vectorizer(n, lets=lets, residues=residues).stmt(loop.body, env)
    except _Scalarize:
        return serial


def _has_vectors(s: ir.Stmt) -> bool:
    for t in ir.walk_stmts(s):
        for e in ir.exprs_of(t):
            if any(n.dtype.lanes > 1 for n in E.walk(e)):
                return True
    return False


# ---------------------------------------------------------------------------------------- legality
def _lanes_independent(loop: ir.For, env: dict, n: int) -> bool:
    """Whether running the iterations lane by lane in parallel gives what the serial loop gives (see
    the module docstring for the rule)."""
    accesses: dict[str, list[tuple[bool, E.Expr, bool]]] = {}  # buffer -> (is store, index, in inner loop)
    points: dict[str, bool] = {}  # buffer -> every store writes one point of a pure definition
    inner_vars: set[str] = set()

    def scan(e: E.Expr, lets: dict, inner: bool) -> None:
        for node in E.walk(_inline(e, lets)):
            if isinstance(node, E.Load):
                accesses.setdefault(node.buffer, []).append((False, node.index, inner))

    def go(s: ir.Stmt, lets: dict, inner: bool) -> None:
        if isinstance(s, ir.Block):
            for t in s.stmts:
                go(t, lets, inner)
        elif isinstance(s, ir.Produce):
            go(s.body, lets, inner)
        elif isinstance(s, ir.LetStmt):
            scan(s.value, lets, inner)
            go(s.body, {**lets, s.name: _inline(s.value, lets)}, inner)
        elif isinstance(s, ir.Store):
            scan(s.index, lets, inner)
            scan(s.value, lets, inner)
            accesses.setdefault(s.buffer, []).append((True, _inline(s.index, lets), inner))
            points[s.buffer] = points.get(s.buffer, True) and s.point
        elif isinstance(s, ir.IfThenElse):
            scan(s.cond, lets, inner)
            go(s.then, lets, inner)
            if s.otherwise is not None:
                go(s.otherwise, lets, inner)
        elif isinstance(s, ir.For):
            if s.var == loop.var:
                raise _Scalarize
            scan(s.min, lets, inner)
            scan(s.extent, lets, inner)
            inner_vars.add(s.var)
            go(s.body, {k: v for k, v in lets.items() if k != s.var}, True)
        else:  # Allocate: scalarized by the vectorizer anyway
            raise _Scalarize

    try:
        go(loop.body, {}, False)
    finally:
        go = None  # (as in _inline)
    for buf, acc in accesses.items():
        stores = [a for a in acc if a[0]]
        if not stores or buf == loop.owns:
            continue  # (d): the update's own buffer, over a pure Var (``ir.For.owns``)
        if len(stores) == len(acc) == 1 and not stores[0][2]:
            continue  # (a): one scatter, lanes in order
        if len(stores) == len(acc) and points[buf]:
            continue  # (c): points of a pure definition, never read here: each written once
        # (b): compared as ramps, whose base and stride are simplified (canonical) expressions
        ramps = set()
        for _, index, _ in acc:
            if E.free_vars(index) & inner_vars:
                return False
            v = _Vectorizer(n).expr(index, env)
            if not (isinstance(v, E.Ramp) and isinstance(v.stride, E.Const) and v.stride.value != 0):
                return False
            ramps.add(v)
        if len(ramps) > 1:
            return False
    return True


def _inline(e: E.Expr, lets: dict) -> E.Expr:
    """``e`` with the given names and every Let inside it replaced by their values."""
    memo: dict = {}
    keep = []  # environments stay alive, so that their ids in the memo stay unique

    def go(x: E.Expr, env: dict) -> E.Expr:
        key = (id(x), id(env))
        if key in memo:
            return memo[key]
        if isinstance(x, E.Var):
            v = env.get(x.name)
            out = x if v is None else v if v.dtype == x.dtype else E.Cast(v, x.dtype)
        elif isinstance(x, E.Let):
            inner = {**env, x.name: go(x.value, env)}
            keep.append(inner)
            out = go(x.body, inner)
        else:
            kids = E.children(x)
            new = tuple(go(k, env) for k in kids)
            out = x if all(a is b for a, b in zip(new, kids)) else E.with_children(x, new)
        memo[key] = out
        return out

    try:
        return go(e, lets)
    finally:
        go = None  # a closure that names itself is a cycle: emptied so that refcounting frees it and the memo


# ------------------------------------------------------------------------------------- reductions


def _identity(op: str, t: T.DType) -> E.Expr:
    """The value that leaves every other unchanged under ``op`` (-0.0 for a float sum: -0 + -0 is -0)."""
    if t.is_bool:  # and, min: true; or, max: false
        return E.Const(op in ("and", "min", "mul"), t)
    if op in ("add", "mul"):
        return E.Const((-0.0 if t.is_float else 0) if op == "add" else 1, t)
    if t.is_float:
        return E.Const(float("-inf") if op == "max" else float("inf"), t)
    bits = t.bits - (1 if t.is_signed else 0)
    lo, hi = (-(1 << bits) if t.is_signed else 0), (1 << bits) - 1
    return E.Const(lo if op == "max" else hi, t)


def _reduction_into(loop: ir.For) -> str | None:
    """The buffer ``b`` when the loop's body is a reduction into one element of it, ``b[I] = op(b[I],
    e)`` (see the module docstring), maybe under lets and a guard; else None."""
    stores = [t for t in ir.walk_stmts(loop.body) if isinstance(t, ir.Store)]
    if len(stores) != 1 or any(isinstance(t, (ir.For, ir.Allocate)) for t in ir.walk_stmts(loop.body)):
        return None
    store = stores[0]
    bound = {loop.var} | {t.name for t in ir.walk_stmts(loop.body) if isinstance(t, ir.LetStmt)}
    if E.free_vars(store.index) & bound or _reduced(store) is None:
        return None
    loads = [n for t in ir.walk_stmts(loop.body) for e in ir.exprs_of(t) for n in E.walk(e)
             if isinstance(n, E.Load) and n.buffer == store.buffer]
    return store.buffer if len(loads) == 1 else None


def _reduced(store: ir.Store) -> tuple[str, E.Expr, bool] | None:
    """(op, e, whether b[I] is op's first operand) for a store ``b[I] = op(b[I], e)``, else None."""
    v = store.value
    if type(v) not in REDUCING_OPS or v.dtype.lanes != 1:
        return None
    for own, other, first in ((v.a, v.b, True), (v.b, v.a, False)):
        if isinstance(own, E.Load) and own.buffer == store.buffer and own.index == store.index:
            return REDUCING_OPS[type(v)], other, first
    return None


def _accumulate_lanes(loop: ir.For) -> ir.Stmt:
    """A serial loop whose whole body is vectorized reductions into elements that the loop does not
    move, ``for o: b[I] = op(b[I], op over lanes(v))``, as ``acc = identity; for o: acc = op(acc, v);
    b[I] = op(b[I], op over lanes(acc))``, ``acc`` a vector on the stack (in registers). Several such
    reductions side by side (an unrolled loop of dot products) each get their own accumulator, when
    their elements are apart (indices a non-zero constant apart, or other buffers). A body that is an
    if on a condition the loop does not change (a tile's versions, whole or not) is unswitched first; a
    body that is a serial loop over a pure Var of the update (an unrolled loop run serially in a tile's
    rest) is moved outside, each of its iterations a reduction of its own."""
    if isinstance(loop.body, ir.IfThenElse) and _invariant(loop.body.cond, loop):
        branches = [_accumulate_lanes(ir.For(loop.var, loop.min, loop.extent, loop.kind, b, loop.owns))
                    if b is not None else None for b in (loop.body.then, loop.body.otherwise)]
        if any(isinstance(b, ir.Allocate) for b in branches):
            return ir.IfThenElse(loop.body.cond, *branches)
        return loop
    inner = loop.body
    if (isinstance(inner, ir.For) and inner.kind is ir.ForKind.SERIAL and inner.owns
            and not ({loop.var} & (E.free_vars(inner.min) | E.free_vars(inner.extent)))
            and not ({inner.var} & (E.free_vars(loop.min) | E.free_vars(loop.extent)))):
        # a loop over a pure Var of the update (its iterations touch other elements) inside: it goes
        # outside, and each of its iterations keeps its own accumulator across this loop
        swapped = _accumulate_lanes(ir.For(loop.var, loop.min, loop.extent, loop.kind, inner.body, loop.owns))
        written = {t.buffer for t in ir.walk_stmts(inner.body) if isinstance(t, ir.Store)}
        if isinstance(swapped, ir.Allocate) and written == {inner.owns}:
            return ir.For(inner.var, inner.min, inner.extent, inner.kind, swapped, inner.owns)
        return loop
    items = loop.body.stmts if isinstance(loop.body, ir.Block) else (loop.body,)
    found = [_lane_reduction(t) for t in items]
    if not found or any(f is None for f in found):
        return loop
    bound = {loop.var} | {t.name for t in ir.walk_stmts(loop.body) if isinstance(t, ir.LetStmt)}
    # each element's index with its own lets put in (an unrolled copy binds the unrolled Var by a let)
    indices = [simplify(_with_lets(store.index, item)) for item, (store, _) in zip(items, found, strict=True)]
    if any(E.free_vars(index) & bound for index in indices) or not _apart(found, indices):
        return loop
    accs, before, after, body = [], [], [], []
    for item, (store, (op, reduced, first)), index in zip(items, found, indices, strict=True):
        n, t = reduced.value.dtype.lanes, reduced.dtype
        acc = _fresh_buffer(f"{store.buffer}.lanes", loop, accs)
        accs.append((acc, t, n))
        lanes = E.Ramp(E.Const(0, T.ADDRESS), E.Const(1, T.ADDRESS), n)
        here = E.Load(acc, lanes, t.with_lanes(n))
        cls = type(store.value)  # op's node
        into_acc = ir.Store(acc, lanes, cls(here, reduced.value), False)
        body.append(ir.map_stmt(item, lambda e: e, lambda s, a=into_acc: a if isinstance(s, ir.Store) else s))
        before.append(ir.Store(acc, lanes, E.Broadcast(_identity(op, t), n), False))
        own, total = E.Load(store.buffer, index, t), E.VectorReduce(op, here)
        after.append(ir.Store(store.buffer, index, cls(own, total) if first else cls(total, own), False))
    out = ir.block(*before, ir.For(loop.var, loop.min, loop.extent, loop.kind, ir.block(*body), loop.owns), *after)
    for acc, t, n in reversed(accs):
        out = ir.Allocate(acc, t, E.Const(n, T.ADDRESS), out)
    return out


def _with_lets(e: E.Expr, s: ir.Stmt) -> E.Expr:
    """``e`` (an expression of the store at the bottom of ``s``) with the lets of ``s`` around it put in."""
    lets = []
    while isinstance(s, (ir.LetStmt, ir.IfThenElse)):
        if isinstance(s, ir.LetStmt):
            lets.append((s.name, s.value))
            s = s.body
        else:
            s = s.then
    for name, value in reversed(lets):  # the innermost first: its value may use the outer ones
        e = E.substitute(e, {name: value})
    return e


def _invariant(cond: E.Expr, loop: ir.For) -> bool:
    """Whether ``cond`` is one value for every iteration of ``loop``: a scalar that no variable bound
    in it names and that reads no buffer the loop writes."""
    if cond.dtype.lanes != 1 or loop.var in E.free_vars(cond):
        return False
    written = {t.buffer for t in ir.walk_stmts(loop.body) if isinstance(t, ir.Store)}
    return not any(isinstance(n, E.Load) and n.buffer in written for n in E.walk(cond))


def _apart(found, indices) -> bool:
    """Whether no two of the reductions can write one element and none reads what another writes (each
    reads its own element only: ``_reduction_into`` held when its loop was vectorized)."""
    stores = [store for store, _ in found]
    written = {store.buffer for store in stores}
    if any(isinstance(n, E.Load) and n.buffer in written for _, (_, reduced, _) in found for n in E.walk(reduced)):
        return False
    for k, (a, ia) in enumerate(zip(stores, indices, strict=True)):
        for c, ic in zip(stores[k + 1:], indices[k + 1:], strict=True):
            if a.buffer == c.buffer:
                gap = simplify(E.Sub(ia, ic))
                if not (isinstance(gap, E.Const) and gap.value != 0):
                    return False
    return True


def _lane_reduction(s: ir.Stmt):
    """(the store, (op, its VectorReduce, first)) when ``s`` is a vectorized reduction into one element
    (under lets and one guard at most) and nothing else; else None."""
    while isinstance(s, ir.LetStmt):
        s = s.body
    if isinstance(s, ir.IfThenElse) and s.otherwise is None and s.cond.dtype.lanes > 1:
        s = s.then
        while isinstance(s, ir.LetStmt):
            s = s.body
    if not isinstance(s, ir.Store) or s.index.dtype.lanes != 1:
        return None
    found = _reduced(s)
    if found is None or not isinstance(found[1], E.VectorReduce) or found[1].op != found[0]:
        return None
    return s, found


def _fresh_buffer(stem: str, loop: ir.For, taken=()) -> str:
    used = {t.buffer for t in ir.walk_stmts(loop) if isinstance(t, (ir.Store, ir.Allocate))}
    used |= {name for name, *_ in taken}
    k = 0
    while (stem + (str(k) if k else "")) in used:
        k += 1
    return stem + (str(k) if k else "")


# ------------------------------------------------------------------------------------- vectorizer
class _Vectorizer:
    """Rewrites statements and expressions for ``lanes`` lanes; ``env`` maps the names whose values
    depend on the lane to their vector values (the loop variable to its ramp). ``reduction`` names the
    buffer of a reduction into one element (``_reduction_into``)."""

    def __init__(self, lanes: int, reduction: str | None = None, lets: dict | None = None,
                 residues: dict | None = None):
        self.n = lanes
        self.reduction = reduction
        self.lets = lets or {}  # name -> the values it is bound to (``E.known_residue``), and memo
        self.residues = {} if residues is None else residues
        self.guards: list[E.Expr] = []  # the lane-dependent conditions around the statement

    def broadcast(self, e: E.Expr) -> E.Expr:
        return e if e.dtype.lanes > 1 else E.Broadcast(e, self.n)

    # -- expressions
    def expr(self, e: E.Expr, env: dict) -> E.Expr:
        memo: dict = {}
        keep = []

        def go(x: E.Expr, env: dict) -> E.Expr:
            key = (id(x), id(env))
            if key not in memo:
                memo[key] = self._expr(x, env, go, keep)
            return memo[key]

        try:
            return go(e, env)
        finally:
            go = None  # (as in _inline)

    def _expr(self, e: E.Expr, env: dict, go, keep) -> E.Expr:
        n = self.n
        if isinstance(e, E.Const):
            return e
        if isinstance(e, E.Var):
            v = env.get(e.name)
            if v is None:
                return e
            return v if v.dtype.scalar() == e.dtype else self.cast(e.dtype, v)
        if isinstance(e, (E.Ramp, E.Broadcast, E.FuncRef)) or e.dtype.lanes > 1:
            raise _Scalarize
        if isinstance(e, E.Let):
            v = go(e.value, env)
            if v.dtype.lanes == 1:
                inner = {k: x for k, x in env.items() if k != e.name}
            elif isinstance(v, E.Ramp):  # substituted, so that indices using it stay ramps
                inner = {**env, e.name: v}
            else:
                inner = {**env, e.name: E.Var(e.name, v.dtype)}
            keep.append(inner)
            body = go(e.body, inner)
            if isinstance(v, E.Ramp) and v.dtype.lanes > 1:
                return body
            return e if v is e.value and body is e.body else E.Let(e.name, v, body)
        kids = E.children(e)
        new = tuple(go(k, env) for k in kids)
        if all(k.dtype.lanes == 1 for k in new):
            return e if all(a is b for a, b in zip(new, kids)) else E.with_children(e, new)
        if isinstance(e, E.Load):
            return E.Load(e.buffer, self._runs(e.index, new[0], env), e.dtype.with_lanes(n))
        if isinstance(e, E.Cast):
            return self.cast(e.dtype, new[0])
        if isinstance(e, E.Call):
            return E.Call(e.name, tuple(self.broadcast(a) for a in new), e.dtype.with_lanes(n))
        if isinstance(e, (E.Add, E.Sub, E.Mul)) and e.dtype.is_int:
            r = self._affine(type(e), *new)
            if r is not None:
                return r
        if isinstance(e, E.Neg) and isinstance(new[0], E.Ramp) and e.dtype.is_int:
            a = new[0]
            return self.ramp(E.Neg(a.base), E.Neg(a.stride))
        if isinstance(e, (E.FloorDiv, E.Mod)) and e.dtype.is_int:
            r = self._within_one_multiple(type(e), *new)
            if r is not None:
                return r
        return E.with_children(e, tuple(self.broadcast(a) for a in new))

    def _within_one_multiple(self, cls, a: E.Expr, d: E.Expr) -> E.Expr | None:
        """``a // d`` or ``a % d`` (``cls``) of a ramp whose lanes all lie between two multiples of the
        constant ``d`` (its base a known residue modulo a divisor of d, plus the lanes' span, under that
        divisor): the quotient is the base's, the same in every lane, and the remainder a ramp from the
        base's. A tile of storage indexed by a vector of its row (an F2 layout's tiles, ``flatten``) is
        then a dense load, not a gather. None where that is not proven."""
        if not (isinstance(a, E.Ramp) and isinstance(d, E.Const) and isinstance(a.stride, E.Const)):
            return None
        size, step = int(d.value), int(a.stride.value)
        if size <= 0 or step < 0:
            return None
        span = step * (self.n - 1)
        # the base modulo a divisor m of d (16 * t is 0 or 16 modulo 32): lanes from a residue r < m - span
        # stay short of the next multiple of m, so of d
        for m in sorted((m for m in range(span + 1, size + 1) if size % m == 0), reverse=True):
            residue = E.known_residue(a.base, m, self.lets, self.residues)
            if residue is not None and residue + span < m:
                break
        else:
            return None
        if cls is E.FloorDiv:  # (a scalar: the expressions around it keep their ramps)
            return simplify(E.FloorDiv(a.base, d))
        return self.ramp(E.Mod(a.base, d), a.stride)

    def _runs(self, index: E.Expr, vector: E.Expr, env: dict) -> E.Expr:
        """``vector`` (``index`` vectorized), or where it is no ramp but its lanes are runs of ``d``
        consecutive elements, d the divisor of the ``//`` and ``%`` in ``index`` (a vector across several
        tiles of an F2 layout, each run within one: ``_within_one_multiple``), those runs laid end to end
        (a shuffle of ramps, which the backend loads or stores as one dense access per run). Not where a
        run is not proven dense or the lanes depend on values that are not ramps."""
        if isinstance(vector, E.Ramp) or vector.dtype.lanes == 1:
            return vector
        sizes = [int(x.b.value) for x in E.walk(index) if isinstance(x, (E.FloorDiv, E.Mod))
                 and isinstance(x.b, E.Const) and x.b.value > 0 and E.free_vars(x.a) & env.keys()]
        d = math.gcd(self.n, *sizes) if sizes else self.n
        if d in (1, self.n) or (self.n // d) & (self.n // d - 1):  # (runs paired up: a power of two of them)
            return vector
        used = E.free_vars(index) & env.keys()
        if not all(isinstance(env[v], E.Ramp) for v in used):
            return vector
        runs = []
        for j in range(self.n // d):
            part = _Vectorizer(d, lets=self.lets, residues=self.residues)
            shifted = {v: part.ramp(E.Add(env[v].base, E.Mul(env[v].stride, E.const(j * d, env[v].base.dtype))),
                                    env[v].stride) for v in used}
            run = part.expr(index, shifted)
            if not (isinstance(run, E.Ramp) and isinstance(run.stride, E.Const) and run.stride.value == 1):
                return vector
            runs.append(run)
        while len(runs) > 1:
            runs = [E.Shuffle((a, c), tuple(range(2 * a.dtype.lanes))) for a, c in zip(runs[::2], runs[1::2])]
        return runs[0]

    def ramp(self, base: E.Expr, stride: E.Expr) -> E.Ramp:
        return E.Ramp(simplify(base), simplify(stride), self.n)

    def _affine(self, cls, a: E.Expr, b: E.Expr) -> E.Expr | None:
        """Integer ``+ - *`` of ramps and scalars as a ramp (exact for wrapping integers too)."""
        ra, rb = isinstance(a, E.Ramp), isinstance(b, E.Ramp)
        sa, sb = a.dtype.lanes == 1, b.dtype.lanes == 1
        if cls in (E.Add, E.Sub):
            if ra and rb:
                return self.ramp(cls(a.base, b.base), cls(a.stride, b.stride))
            if ra and sb:
                return self.ramp(cls(a.base, b), a.stride)
            if sa and rb:
                return self.ramp(cls(a, b.base), b.stride if cls is E.Add else E.Neg(b.stride))
        elif cls is E.Mul:
            if ra and sb:
                return self.ramp(E.Mul(a.base, b), E.Mul(a.stride, b))
            if sa and rb:
                return self.ramp(E.Mul(a, b.base), E.Mul(a, b.stride))
        return None

    def cast(self, t: T.DType, v: E.Expr) -> E.Expr:
        """``v`` (a vector) converted to the scalar type ``t`` lane by lane. A ramp narrowed to an
        integer type of at most its width stays a ramp: truncation commutes with wrapping ``+ *``."""
        if v.dtype.scalar() == t:
            return v
        if isinstance(v, E.Ramp) and v.dtype.is_int and t.is_int and t.bits <= v.dtype.bits:
            return self.ramp(E.Cast(v.base, t), E.Cast(v.stride, t))
        return E.Cast(v, t.with_lanes(self.n))

    # -- statements
    def stmt(self, s: ir.Stmt, env: dict) -> ir.Stmt:
        if isinstance(s, ir.Block):
            return ir.block(*(self.stmt(t, env) for t in s.stmts))
        if isinstance(s, ir.Produce):
            return ir.Produce(s.name, self.stmt(s.body, env))
        if isinstance(s, ir.LetStmt):
            v = self.expr(s.value, env)
            if v.dtype.lanes == 1:
                return ir.LetStmt(s.name, v, self.stmt(s.body, {k: x for k, x in env.items() if k != s.name}))
            if isinstance(v, E.Ramp):
                return self.stmt(s.body, {**env, s.name: v})
            return ir.LetStmt(s.name, v, self.stmt(s.body, {**env, s.name: E.Var(s.name, v.dtype)}))
        if isinstance(s, ir.Store) and s.buffer == self.reduction:
            return self._reduce(s, env)
        if isinstance(s, ir.Store):
            index, value = self.expr(s.index, env), self.expr(s.value, env)
            if index.dtype.lanes == 1 and value.dtype.lanes == 1:
                return ir.Store(s.buffer, index, value, s.point)
            return ir.Store(s.buffer, self.broadcast(self._runs(s.index, index, env)), self.broadcast(value),
                            s.point)
        if isinstance(s, ir.IfThenElse):
            cond = self.expr(s.cond, env)
            if cond.dtype.lanes == 1:
                return ir.IfThenElse(cond, self.stmt(s.then, env),
                                     None if s.otherwise is None else self.stmt(s.otherwise, env))
            self.guards.append(cond)
            then = self.stmt(s.then, env)
            self.guards[-1] = E.Not(cond)
            otherwise = None if s.otherwise is None else self.stmt(s.otherwise, env)
            self.guards.pop()
            return ir.IfThenElse(cond, then, otherwise)
        if isinstance(s, ir.For):
            lo, extent = self.expr(s.min, env), self.expr(s.extent, env)
            if lo.dtype.lanes > 1 or extent.dtype.lanes > 1:
                raise _Scalarize
            kind = ir.ForKind.SERIAL if s.kind in (ir.ForKind.PARALLEL, ir.ForKind.VECTORIZED) else s.kind
            inner = {k: x for k, x in env.items() if k != s.var}
            return ir.For(s.var, lo, extent, kind, self.stmt(s.body, inner))
        raise _Scalarize  # Allocate: every lane would need its own copy

    def _reduce(self, s: ir.Store, env: dict) -> ir.Store:
        """``b[I] = op(b[I], e)`` as ``b[I] = op(b[I], op over the lanes of e)``, the lanes that a guard
        turns off giving op's identity."""
        op, e, first = _reduced(s)
        index = self.expr(s.index, env)
        if index.dtype.lanes != 1:
            raise _Scalarize
        v = self.broadcast(self.expr(e, env))
        if self.guards:
            on = self.guards[0]
            for g in self.guards[1:]:
                on = E.And(on, g)
            v = E.Select(on, v, E.Broadcast(_identity(op, e.dtype), self.n))
        own = E.Load(s.buffer, index, s.value.dtype)
        total = E.VectorReduce(op, v)
        return ir.Store(s.buffer, index, type(s.value)(own, total) if first else type(s.value)(total, own), s.point)
