"""Loop extents, and guards, made constant by the lets around them.

A loop over a region computed at a consumer's loop has extent ``(f.req.max - f.req.min) // 16 + 1``,
with ``f.req.min`` and ``f.req.max`` bound by lets just outside it; the simplifier, which sees one
expression at a time, cannot tell that this is 4. Unrolling and vectorizing need the constant, and
LLVM does better with it. So each loop extent is rewritten with the lets in scope put in, and kept when
that makes it a constant (Halide gets the same from bounds inference on constant-size regions).
The ranges of the enclosing loops with constant bounds are facts for it: a tile of a strip split with
tail="guard" spans ``16 * min(4 * s + t, 31) - 64 * s - 16 * t + 16`` columns, which is 16 for every
strip s < 8 and tile t < 4. A guard (``if``) that the same lets and ranges decide is replaced by the
branch it takes: a tile's ``d <= 63`` in a dim bound to 64 whose region the lowering only knows through
lets was a masked vector tile in every step of attention's P V (1.18x slower); the comparison is read in
64 bits, since a guard on int32 Vars compares casts of int64 regions that the simplifier cannot see
through (a matmul's register tile kept such a guard: its hand schedule ran 2.1x slower). Storage whose
size the lets bound by a constant (a tile clipped at the image's edge) gets that constant.
"""

from __future__ import annotations

from ...algebra import expr as E
from ...algebra.bounds import Interval, bounds_of, constant_upper_bound
from ...algebra.simplify import simplify
from .. import ir
from .partition import widen_index

_GPU = (ir.ForKind.GPU_BLOCK, ir.ForKind.GPU_THREAD, ir.ForKind.GPU_LANE)


def constant_loop_extents(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with each loop extent that the enclosing lets make constant replaced by that constant; an
    unrolled or vectorized loop whose extent is ``min(c, the rest of a ragged entry)`` runs c iterations
    where c fit, serially elsewhere (and serially wherever its extent varies with the entry's length)."""
    with E.deep_recursion():
        return _walk(stmt, {}, {})


def _walk(s: ir.Stmt, lets: dict, ranges: dict) -> ir.Stmt:
    if isinstance(s, ir.LetStmt):
        resolved = _resolved(s.value, lets)
        value = s.value
        if not isinstance(value, E.Const) and (resolved is not value or E.free_vars(value) & ranges.keys()):
            if _varies(resolved, ranges):  # a loop's position: never a constant, simplified if a use needs it
                resolved = _Deferred(resolved, ranges)
            else:
                # kept simplified: the lets below put it in again, and a pyramid's regions, each defined by
                # the one before, would grow with every level (a ten-level one took seconds to simplify)
                resolved = simplify(resolved, _ranges_of(resolved, ranges))
                if isinstance(resolved, E.Const):  # a storage extent or stride that is constant: LLVM then
                    value = E.const(resolved.value, s.value.dtype)  # sees that a tile's rows cannot overlap
        inner_ranges = {k: v for k, v in ranges.items() if k != s.name}  # a let of a loop's name shadows it
        return ir.LetStmt(s.name, value, _walk(s.body, {**lets, s.name: resolved}, inner_ranges))
    if isinstance(s, ir.For):
        inner = {k: v for k, v in lets.items() if k != s.var}
        extent = _constant(s.extent, lets, ranges)
        lo = _constant(s.min, lets, ranges)
        ranges = {k: v for k, v in ranges.items() if k != s.var}  # an outer loop of the same name
        if isinstance(lo, E.Const) and isinstance(extent, E.Const):
            ranges[s.var] = Interval(lo, E.const(lo.value + extent.value - 1, lo.dtype))
        body = _walk(s.body, inner, ranges)
        if s.kind in _GPU:  # a grid is not versioned or demoted: the GPU backend refuses what cannot be one
            return ir.For(s.var, s.min, extent, s.kind, body)
        cap = None if isinstance(extent, E.Const) or s.kind == ir.ForKind.SERIAL else \
            _constant_cap(extent, lets, ranges)
        if cap is not None:
            # min(c, x): a tile of a ragged dim is c long except at an entry's end. Unrolling and vectorizing
            # need the constant, so the loop is versioned: c iterations when x >= c, a serial loop otherwise
            return ir.IfThenElse(E.le(E.const(cap, extent.dtype), extent),
                                 ir.For(s.var, s.min, E.const(cap, extent.dtype), s.kind, body, s.owns),
                                 ir.For(s.var, s.min, extent, ir.ForKind.SERIAL, body, s.owns))
        if s.kind != ir.ForKind.SERIAL and not isinstance(extent, E.Const) and E.reads_data(_resolved(extent, lets)):
            # a ragged tail tile (its extent reads the lengths, or a flat loop's tables): serial
            return ir.For(s.var, s.min, extent, ir.ForKind.SERIAL, body, s.owns)
        return ir.For(s.var, s.min, extent, s.kind, body, s.owns)
    if isinstance(s, ir.Block):
        return ir.block(*(_walk(t, lets, ranges) for t in s.stmts))
    if isinstance(s, ir.IfThenElse):
        # a guard the lets and the loops' ranges decide (a tile's ``d <= 63`` where d < 64 for every tile
        # of a dim bound to 64): the branch taken, unguarded (a vectorized guard is a masked tile)
        known = _constant(_widened(s.cond), lets, ranges)
        if isinstance(known, E.Const):
            taken = s.then if known.value else s.otherwise
            return ir.block() if taken is None else _walk(taken, lets, ranges)
        return ir.IfThenElse(s.cond, _walk(s.then, lets, ranges),
                             None if s.otherwise is None else _walk(s.otherwise, lets, ranges))
    if isinstance(s, ir.Allocate):
        return ir.Allocate(s.buffer, s.dtype, _bounded_size(s, lets, ranges), _walk(s.body, lets, ranges))
    body = getattr(s, "body", None)
    if body is None:
        return s
    return _replace_body(s, _walk(body, lets, ranges))


STACK_BYTES = 64 * 1024  # the largest storage made constant by its bound (the CPU backend's stack block)


def _bounded_size(s: ir.Allocate, lets: dict, ranges: dict) -> E.Expr:
    """``s``'s size, or the constant that bounds it once the lets are put in: a tile's region clipped at
    the image's edge (``min(16, n - x)`` elements) gets 16, which the backend keeps on the stack instead of
    taking a scratch block and giving it back in every iteration of the loops around it."""
    if isinstance(s.size, E.Const) or s.dtype.itemsize == 0:
        return s.size
    x = _resolved(s.size, lets)
    n = constant_upper_bound(x, _ranges_of(x, ranges), at_most=STACK_BYTES // s.dtype.itemsize)
    if n is not None and 0 <= n * s.dtype.itemsize <= STACK_BYTES:
        return E.const(n, s.size.dtype)
    return s.size


def _replace_body(s: ir.Stmt, body: ir.Stmt) -> ir.Stmt:
    from dataclasses import replace

    return replace(s, body=body)


def _constant(e: E.Expr, lets: dict, ranges: dict) -> E.Expr:
    if isinstance(e, E.Const) or not (E.free_vars(e) & (lets.keys() | ranges.keys())):
        return e
    x = _resolved(e, lets)
    x = simplify(x, _ranges_of(x, ranges))
    return x if isinstance(x, E.Const) else e


def _widened(cond: E.Expr) -> E.Expr:
    """A scalar condition with the 32-bit casts of its index comparisons dropped (``int32(x.min + 16) <=
    int32(x.max)``, a tile's guard in a loop of int32 Vars bounded by int64 regions: the simplifier, which
    cannot see through the casts, leaves it undecided). Exact when index arithmetic does not overflow,
    lowering's rule."""
    if isinstance(cond, (E.And, E.Or)):
        return type(cond)(_widened(cond.a), _widened(cond.b))
    if isinstance(cond, E.Not):
        return E.Not(_widened(cond.a))
    if isinstance(cond, (E.LT, E.LE, E.EQ, E.NE)) and cond.a.dtype.lanes == 1 and cond.a.dtype.is_int \
            and cond.a.dtype.is_signed and cond.a.dtype.bits >= 32:
        return type(cond)(widen_index(cond.a), widen_index(cond.b))
    return cond


def _constant_cap(e: E.Expr, lets: dict, ranges: dict) -> int | None:
    """c when ``e`` is ``min(c, x)`` once the lets are put in, or at most c whatever its symbols are (c a
    power of two up to 64: a padded tile of a ragged row, ``16 * ((min(x, 15) + 15) // 16)``), else None."""
    x = _resolved(e, lets)
    ranges = _ranges_of(x, ranges)
    x = simplify(x, ranges)
    if isinstance(x, E.Min):
        for a in (x.a, x.b):
            if isinstance(a, E.Const) and a.value > 0:
                return int(a.value)
    hi = bounds_of(x, {v: Interval.everything() for v in E.free_vars(x)}, ranges).hi
    if isinstance(hi, E.Const) and 2 <= hi.value <= 64 and int(hi.value) & (int(hi.value) - 1) == 0:
        return int(hi.value)
    return None


def _ranges_of(e: E.Expr, ranges: dict) -> dict:
    """The ranges of the loops ``e`` names: the same expression inside other loops is then simplified under
    the same facts, a memo hit (a tuned pipeline's lets were each simplified again in every loop nest)."""
    if not ranges:
        return ranges
    names = E.free_vars(e)
    return {k: v for k, v in ranges.items() if k in names}


def _resolved(e: E.Expr, lets: dict) -> E.Expr:
    """``e`` with the lets in scope put in (their values are resolved already), each cast to the Var's type."""
    types = {n.name: n.dtype for n in E.walk(e) if isinstance(n, E.Var) and n.name in lets}
    if not types:
        return e
    values = {n: lets[n].value() if isinstance(lets[n], _Deferred) else lets[n] for n in types}
    return E.substitute(e, {n: v if v.dtype == types[n] else E.Cast(v, types[n]) for n, v in values.items()})


class _Deferred:
    """A let's value with the lets above it put in, simplified when a later expression first reads it: the
    position of a tile's row in a Func's loops (``f.s0.y = f.req.min + y.i + 8 * y.o``) is a let in every
    loop nest, and most are read by no region, extent or guard below (simplified at once, 217 of
    a tuned image pyramid's 462 lets took 0.4 s of its 0.5 s in this pass for nothing)."""

    __slots__ = ("raw", "ranges", "_value")

    def __init__(self, raw: E.Expr, ranges: dict):
        self.raw, self.ranges, self._value = raw, ranges, None

    def value(self) -> E.Expr:
        if self._value is None:
            self._value = simplify(self.raw, _ranges_of(self.raw, self.ranges))
        return self._value


def _varies(e: E.Expr, ranges: dict) -> bool:
    """Whether ``e`` provably takes more than one value: a sum with a term ``c v`` (c a nonzero constant)
    of a loop ``v`` of two or more iterations that no other term names (a cheap test, exact where it says
    yes; the simplifier would not turn such a value into a constant, so it need not be asked at once)."""
    parts, _ = E.affine_parts(e)
    for k, (v, c) in enumerate(parts):
        r = ranges.get(v.name) if c and isinstance(v, E.Var) else None
        if r is not None and isinstance(r.lo, E.Const) and isinstance(r.hi, E.Const) and r.lo.value < r.hi.value \
                and not any(v.name in E.free_vars(u) for j, (u, _) in enumerate(parts) if j != k):
            return True
    return False
