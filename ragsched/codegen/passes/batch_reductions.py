"""Reductions of vectors into neighbouring elements, combined as one vector (a CPU backend's pass).

The vectorizer ends a reduction over a vectorized RDom with ``b[I] = op(b[I], op over the lanes of v)``.
An unrolled loop of such reductions, ``b[base + c]`` for c = 0 .. g-1 (a row of dot products: each a
vector of partial sums), would combine each vector alone: log2(n) shuffles and ops per element, and g
scalar stores. Taken together, g vectors fold into one vector of their g totals in g - 1 ops of two
shuffles each (pairs of vectors: the low halves of both against their high halves, so each result holds
half-length partial sums of two sources), and one vector load, op and store update the g elements. The
order in which the lanes combine is the backend's anyway (``VectorReduce``); each element still gets
``op(b[I], its total)``. It applies to g consecutive plain stores of that form (g a power of two, at most
the lanes of v) into elements 0 .. g-1 apart of one buffer that no v reads; anything else is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...algebra import expr as E
from ...algebra.simplify import simplify
from ...program import REDUCING_OPS
from .. import ir


def batch_lane_reductions(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with each run of reductions into neighbouring elements combined as one vector."""
    return ir.map_unpredicated_blocks(stmt, _grouped)


@dataclass(frozen=True)
class _Reduction:
    """``buffer[index] = node(buffer[index], op over the lanes of vector)`` (or with the operands swapped)."""

    store: ir.Store
    node: type
    vector: E.Expr
    first: bool

    def joins(self, other: _Reduction) -> bool:
        return (other.store.buffer == self.store.buffer and other.node is self.node and other.first == self.first
                and other.vector.dtype == self.vector.dtype)


def _reduction(s: ir.Stmt) -> _Reduction | None:
    if not isinstance(s, ir.Store) or s.index.dtype.lanes != 1 or type(s.value) not in REDUCING_OPS:
        return None
    v = s.value
    for own, other, first in ((v.a, v.b, True), (v.b, v.a, False)):
        if (isinstance(own, E.Load) and own.buffer == s.buffer and own.index == s.index
                and isinstance(other, E.VectorReduce) and other.op == REDUCING_OPS[type(v)]
                and not other.dtype.is_bool):
            return _Reduction(s, type(v), other.value, first)
    return None


def _grouped(stmts: tuple[ir.Stmt, ...]) -> ir.Stmt:
    found = [_reduction(t) for t in stmts]
    out, k = [], 0
    while k < len(stmts):
        g = _run(found, k)
        if g:
            out.append(_combined(found[k:k + g]))
            k += g
        else:
            out.append(stmts[k])
            k += 1
    return ir.block(*out)


def _run(found: list, k: int) -> int:
    """The length of the group starting at ``k``: the largest power of two g >= 2, at most the lanes,
    of reductions k, k+1, ... into elements 0, 1, ... past the first's (0: none)."""
    first = found[k]
    if first is None:
        return 0
    n, g = first.vector.dtype.lanes, 0
    while k + g < len(found) and g < n:
        r = found[k + g]
        if r is None or not first.joins(r) or any(isinstance(x, E.Load) and x.buffer == first.store.buffer
                                                 for x in E.walk(r.vector)):
            break
        gap = simplify(E.Sub(r.store.index, first.store.index)) if g else None
        if g and not (isinstance(gap, E.Const) and int(gap.value) == g):
            break
        g += 1
    while g & (g - 1):  # down to a power of two
        g &= g - 1
    return g if g >= 2 else 0


def _combined(group: list[_Reduction]) -> ir.Stmt:
    first = group[0]
    g, node = len(group), first.node
    vectors = [r.vector for r in group]
    width = vectors[0].dtype.lanes
    while width > g:  # each vector folded in half until it has g lanes
        half = width // 2
        vectors = [node(E.Shuffle((v,), tuple(range(half))), E.Shuffle((v,), tuple(range(half, width))))
                   for v in vectors]
        width = half
    sources, lanes = 1, g  # each vector: `sources` totals in the making, `lanes` partial results each
    while len(vectors) > 1:
        half = lanes // 2
        low = [s * lanes + k for s in range(sources) for k in range(half)]
        high = [k + half for k in low]
        pairs = zip(vectors[0::2], vectors[1::2], strict=True)
        vectors = [node(E.Shuffle((a, c), tuple(low + [g + k for k in low])),
                        E.Shuffle((a, c), tuple(high + [g + k for k in high]))) for a, c in pairs]
        sources, lanes = sources * 2, half
    index = E.Ramp(first.store.index, E.Const(1, first.store.index.dtype), g)
    own = E.Load(first.store.buffer, index, vectors[0].dtype)
    value = node(own, vectors[0]) if first.first else node(vectors[0], own)
    return ir.Store(first.store.buffer, index, value, False)
