"""Columns of a square block, loaded as its rows and transposed in registers (a CPU backend's pass).

An unrolled loop of vector copies down the columns of a row-major array, ``t[..] = a[ramp(base + c, S,
n)]`` for c = 0 .. n-1, reads an n x n block of ``a`` a column per statement: each column is n scalar
loads S elements apart (or a gather). The same n*n elements are n dense rows ``a[ramp(base + r*S, 1,
n)]``. This pass loads those and transposes them with log2(n) rounds of n two-vector shuffles, each
round swapping one bit of the row number with the same bit of the lane number (16 x 16 float32: 16
loads and 64 shuffles for 256 scalar loads). The rows hold exactly the elements the statements read, so
nothing outside them is read. It applies to n consecutive unguarded stores (n a power of two) of plain
loads from one buffer that none of them writes, outside any predicated (per-lane) statement; anything
else is left as it is. A copy of keys stored key-minor, for Q K^T, is such a loop.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from ...algebra import expr as E
from ...algebra.simplify import simplify
from .. import ir

MAX_LANES = 64


def transpose_strided_loads(stmt: ir.Stmt) -> ir.Stmt:
    """``stmt`` with each such run of column copies replaced by row loads and shuffles."""
    names = itertools.count()
    return ir.map_unpredicated_blocks(stmt, lambda stmts: _grouped(stmts, names))


@dataclass(frozen=True)
class _Column:
    """A store (under ``lets``) of a strided vector load: ``buffer[ramp(base, stride, lanes)]``, its
    base and stride with the lets substituted."""

    lets: tuple[tuple[str, E.Expr], ...]
    store: ir.Store
    buffer: str
    base: E.Expr
    stride: E.Expr
    dtype: object


def _column(s: ir.Stmt) -> _Column | None:
    lets = []
    while isinstance(s, ir.LetStmt):
        lets.append((s.name, s.value))
        s = s.body
    if not isinstance(s, ir.Store) or not isinstance(s.value, E.Load):
        return None
    load, idx = s.value, s.value.index
    n = load.dtype.lanes
    if (not isinstance(idx, E.Ramp) or n < 2 or n > MAX_LANES or n & (n - 1) or load.dtype.is_bool
            or s.buffer == load.buffer):
        return None
    if isinstance(idx.stride, E.Const) and abs(int(idx.stride.value)) < n:  # a short span: one wide load does
        return None
    base, stride = idx.base, idx.stride
    for name, value in reversed(lets):  # the innermost let first: its value may use the outer ones
        base, stride = E.substitute(base, {name: value}), E.substitute(stride, {name: value})
    return _Column(tuple(lets), s, load.buffer, base, stride, load.dtype)


def _grouped(stmts: tuple[ir.Stmt, ...], names) -> ir.Stmt:
    columns = [_column(t) for t in stmts]
    out, k = [], 0
    while k < len(stmts):
        first = columns[k]
        n = first.dtype.lanes if first is not None else 0
        if first is not None and k + n <= len(stmts) and _square(columns[k:k + n]):
            out.append(_transposed(columns[k:k + n], next(names)))
            k += n
        else:
            out.append(stmts[k])
            k += 1
    return ir.block(*out)


def _square(cols) -> bool:
    """Whether the columns are those of one n x n block, in order, read from a buffer none of them writes."""
    first = cols[0]
    if any(c is None or c.buffer != first.buffer or c.dtype != first.dtype or c.stride != first.stride
           for c in cols):
        return False
    if any(c.store.buffer == first.buffer for c in cols):
        return False
    for k, c in enumerate(cols[1:], 1):
        step = simplify(E.Sub(c.base, first.base))
        if not (isinstance(step, E.Const) and int(step.value) == k):
            return False
    return True


def _transposed(cols, uid: int) -> ir.Stmt:
    first = cols[0]
    n, t, base = first.dtype.lanes, first.dtype, first.base
    lets, rows = [], []
    for r in range(n):
        start = simplify(E.Add(base, E.Mul(E.Const(r, base.dtype), first.stride))) if r else base
        rows.append(_bound(lets, f"transpose{uid}.0.{r}",
                           E.Load(first.buffer, E.Ramp(start, E.Const(1, base.dtype), n), t)))
    for k in range(n.bit_length() - 1):
        bit = 1 << k
        rows = [_bound(lets, f"transpose{uid}.{k + 1}.{r}", E.Shuffle((rows[r & ~bit], rows[r | bit]), tuple(
                    (n if c & bit else 0) + ((c & ~bit) | (r & bit)) for c in range(n))))
                for r in range(n)]
    stores = []
    for c, col in enumerate(cols):
        s: ir.Stmt = ir.Store(col.store.buffer, col.store.index, rows[c], col.store.point)
        for name, value in reversed(col.lets):
            s = ir.LetStmt(name, value, s)
        stores.append(s)
    body = ir.block(*stores)
    for name, value in reversed(lets):
        body = ir.LetStmt(name, value, body)
    return body


def _bound(lets: list, name: str, value: E.Expr) -> E.Var:
    lets.append((name, value))
    return E.Var(name, value.dtype)
