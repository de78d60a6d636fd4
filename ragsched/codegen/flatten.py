"""Storage flattening: multi-dimensional ``Realize``/``Provide``/``FuncRef`` become flat buffers.

A realized Func gets a buffer with its ``min``/``extent``/``stride`` symbols (row-major, the last
dimension contiguous; a folded dimension is indexed modulo its fold); Inputs and outputs are the
caller's arrays, whose extents and strides are kernel arguments. Index arithmetic is carried out in
64 bits and exactly: the loop counters and index lets of the nest become int64 symbols.
"""

from __future__ import annotations

from ..algebra import expr as E
from ..algebra import types as T
from ..algebra.f2 import emit
from ..algebra.simplify import simplify
from ..program import Program, dim_index, dims_used, is_ragged
from . import ir

I64 = T.ADDRESS
_WIDEN = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.Mod, E.Min, E.Max)


def _i64(v: int) -> E.Const:
    return E.Const(v, I64)


def index_symbols(s: ir.Stmt) -> set[str]:
    """Names bound by loops and by index-typed lets: they are 64-bit in flattened code."""
    out = set()
    for t in ir.walk_stmts(s):
        if isinstance(t, ir.For):
            out.add(t.var)
        elif isinstance(t, ir.LetStmt) and t.value.dtype == T.INDEX:
            out.add(t.name)
    return out


def widen_index(e: E.Expr, wide: set[str], _memo: dict | None = None) -> E.Expr:
    """``e`` (an integer index expression) computed exactly in int64 (a shared sub-tree once)."""
    memo = {} if _memo is None else _memo
    hit = memo.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    out = _widen(e, wide, memo)
    memo[id(e)] = (e, out)
    return out


def _widen(e: E.Expr, wide: set[str], memo: dict) -> E.Expr:
    if isinstance(e, E.Var) and e.name in wide:
        return E.Var(e.name, I64)
    if isinstance(e, E.Cast) and isinstance(e.value, E.Var) and e.value.dtype == I64:
        return e.value
    if e.dtype == I64 and not isinstance(e, (*_WIDEN, E.Neg, E.Select)):
        return e
    if isinstance(e, E.Const):
        return E.Const(int(e.value), I64)
    if isinstance(e, _WIDEN) and e.dtype.is_signed:
        return type(e)(widen_index(e.a, wide, memo), widen_index(e.b, wide, memo))
    if isinstance(e, E.Neg) and e.dtype.is_signed:
        return E.Neg(widen_index(e.a, wide, memo))
    if isinstance(e, E.Select):
        return E.Select(e.cond, widen_index(e.t, wide, memo), widen_index(e.f, wide, memo))
    return E.Cast(e, I64)


class Layout:
    """How each Func and Input is addressed at one point of the nest."""

    def __init__(self, program: Program, copied_outputs: set[str], pads: dict[str, int] | None = None,
                 tiles_from_min: frozenset[str] = frozenset()):
        self.program = program
        self.tiles_from_min = tiles_from_min
        self.pads = pads or {}  # ragged arrays stored with their ragged dims rounded up to a multiple
        # func -> (buffer, fold, contiguous dim, tiling: (the layout's inverse, tile bits per dim) or None)
        self.internal: dict[str, tuple[str, tuple[int, ...], int, tuple | None]] = {}
        self.copied = copied_outputs
        self.parallel_copies = False  # dense outputs copied out by rows in parallel (``flatten``)

    def buffer(self, name: str) -> str:
        return self.internal[name][0] if name in self.internal else name

    def ragged_shape(self, name: str):
        """The shape of a caller's ragged array (an Input or an output with a ragged shape), else None."""
        if name in self.internal:
            return None
        spec = self.program.lookup(name)
        shape = spec.shape
        return shape if shape is not None and any(map(is_ragged, shape)) else None

    def flat(self, name: str, args, wide) -> E.Expr:
        shape = self.ragged_shape(name)
        if shape is not None:
            return self._packed(name, shape, args, wide)
        buf = self.buffer(name)
        rank = len(args)
        if name in self.internal and self.internal[name][3] is not None:
            return self._tiled(name, args, wide)
        fold, contiguous = self.internal[name][1:3] if name in self.internal else ((), rank - 1)
        idx: E.Expr = _i64(0)
        for k, a in enumerate(args):
            a = widen_index(a, wide)
            if fold and fold[k]:
                term = E.Mod(a, _i64(fold[k]))
            elif name in self.internal:
                term = E.Sub(a, E.Var(f"{buf}.min.{k}", I64))
            else:
                term = a
            stride = _i64(1) if k == contiguous else E.Var(f"{buf}.stride.{k}", I64)
            idx = E.Add(idx, E.Mul(term, stride))
        return idx


    def _tiled(self, name: str, args, wide) -> E.Expr:
        """An element of a buffer stored in tiles ordered by an F2 layout: the tile's place (tiles in the
        storage order, ``buf.tstride.k`` apart) times the tile size, plus the layout's offset of the
        element within its tile."""
        buf, _, _, (inverse, bits) = self.internal[name]
        names = self.program.func(name).args
        tiled = {n for n, _ in inverse.ins}
        tile, inner = _i64(0), {}
        for k, a in enumerate(args):
            a = widen_index(a, wide)
            if bits[k]:  # tiles at multiples of their size: a - size * tmin is never negative
                size = _i64(1 << bits[k])
                origin = E.Var(f"{buf}.min.{k}", I64) if name in self.tiles_from_min else \
                    E.Mul(size, E.Var(f"{buf}.tmin.{k}", I64))
                local = E.Sub(a, origin)
                inner[names[k]] = E.Mod(local, size)
                local = E.FloorDiv(local, size)
            else:
                local = E.Sub(a, E.Var(f"{buf}.min.{k}", I64))  # never negative in storage
                if names[k] in tiled:  # a tile one point long in this dimension
                    inner[names[k]] = _i64(0)
            tile = E.Add(tile, E.Mul(local, E.Var(f"{buf}.tstride.{k}", I64)))
        (within,) = emit(inverse, I64, arithmetic=True, **inner).values()
        return E.Add(E.Mul(tile, _i64(1 << sum(bits))), within)

    def _packed(self, name: str, shape, args, wide) -> E.Expr:
        """A RaggedArray's element: where its entry starts, plus row-major within the entry, whose
        extents are those of entry ``args[0]`` (``name.offsets`` is a kernel argument)."""
        if any(dims_used(s) - {0} for s in shape):
            raise NotImplementedError(f"{name}: ragged extents that depend on other dimensions than the first")
        first = args[0]
        pad = self.pads.get(name, 1)
        # a ragged dimension's storage is rounded up to the array's padding multiple
        extents = [widen_index(_value(E.round_up(E.substitute(s, {dim_index(0): first}), pad if is_ragged(s) else 1),
                                      self, wide), wide) for s in shape]
        idx: E.Expr = E.Load(offsets_buffer(name), widen_index(first, wide), I64)
        stride: E.Expr = _i64(1)
        for k in reversed(range(1, len(args))):
            idx = E.Add(idx, E.Mul(widen_index(args[k], wide), stride))
            stride = E.Mul(stride, extents[k])
        return idx


def offsets_buffer(name: str) -> str:
    """The kernel argument holding the entry offsets of the ragged array ``name``."""
    return f"{name}.offsets"


def flatten(s: ir.Stmt, program: Program, copied_outputs: set[str], pads: dict[str, int] | None = None,
            tiles_from_min: frozenset[str] = frozenset(), parallel_copies: bool = False) -> ir.Stmt:
    """``tiles_from_min``: Funcs whose layout tiles start at their region's min (a GPU block's shared tile,
    sized exactly), where the others' start at multiples of the tile size (``Layout._tiled``).
    ``parallel_copies``: the target runs parallel loops, and a dense output copied out of its own storage
    is copied by rows in parallel."""
    wide = index_symbols(s)
    layout = Layout(program, copied_outputs, pads, tiles_from_min)
    layout.parallel_copies = parallel_copies
    return _flatten(s, layout, wide)


def _value(e: E.Expr, layout: Layout, wide) -> E.Expr:
    def fn(n):
        if isinstance(n, E.Var) and n.name in wide and n.dtype == T.INDEX:
            return E.Cast(E.Var(n.name, I64), T.INDEX)
        if isinstance(n, E.FuncRef):
            return E.Load(layout.buffer(n.name), layout.flat(n.name, n.args, wide), n.dtype)
        return n
    return E.transform(e, fn)


def _index(e: E.Expr, layout: Layout, wide) -> E.Expr:
    """An index expression (loop bound, index let): exact in int64, its reads flattened too."""
    return widen_index(_value(e, layout, wide), wide)


def _flatten(s: ir.Stmt, layout: Layout, wide) -> ir.Stmt:
    if isinstance(s, ir.Block):
        return ir.block(*(_flatten(t, layout, wide) for t in s.stmts))
    if isinstance(s, ir.For):
        return ir.For(s.var, _index(s.min, layout, wide), _index(s.extent, layout, wide), s.kind,
                      _flatten(s.body, layout, wide), layout.buffer(s.owns) if s.owns else "")
    if isinstance(s, ir.LetStmt):
        value = _index(s.value, layout, wide) if s.name in wide else _value(s.value, layout, wide)
        return ir.LetStmt(s.name, value, _flatten(s.body, layout, wide))
    if isinstance(s, ir.IfThenElse):
        return ir.IfThenElse(_value(s.cond, layout, wide), _flatten(s.then, layout, wide),
                             None if s.otherwise is None else _flatten(s.otherwise, layout, wide))
    if isinstance(s, ir.Produce):
        return ir.Produce(s.name, _flatten(s.body, layout, wide))
    if isinstance(s, ir.Provide):
        args = [_value(a, layout, wide) for a in s.args]  # data-dependent indices read buffers too
        return ir.Store(layout.buffer(s.func), layout.flat(s.func, args, wide), _value(s.value, layout, wide),
                        s.point)
    if isinstance(s, ir.Realize):
        return _realize(s, layout, wide)
    if isinstance(s, ir.Allocate):  # a table of the loops themselves (a flat ragged loop's row ids)
        return ir.Allocate(s.buffer, s.dtype, _index(s.size, layout, wide), _flatten(s.body, layout, wide))
    if isinstance(s, ir.Store):
        return ir.Store(s.buffer, _index(s.index, layout, wide), _value(s.value, layout, wide), s.point)
    raise TypeError(f"flatten: unexpected statement {type(s).__name__}")


def _realize(s: ir.Realize, layout: Layout, wide) -> ir.Stmt:
    f = layout.program.func(s.func)
    buf = f"{s.func}.realized" if s.func in layout.program.outputs else s.func
    rank = len(s.bounds)
    fold = s.fold or tuple(0 for _ in s.bounds)
    order = s.order or tuple(range(rank))  # outermost first
    saved = layout.internal.get(s.func)
    tiling = None
    if s.layout is not None:
        tile_bits = dict(s.layout.outs)
        tiling = (s.layout.invert(), tuple(tile_bits.get(a, 0) for a in f.args))
    layout.internal[s.func] = (buf, fold, order[-1] if order else -1, tiling)
    body = _flatten(s.body, layout, wide)
    if s.func in layout.copied:
        if f.shape is not None and any(map(is_ragged, f.shape)):
            body = ir.block(body, _copy_out_ragged(f, buf, layout, wide))
        else:
            body = ir.block(body, _copy_out(f.name, buf, f.dtype, f.rank, layout, wide))
    if saved is None:
        del layout.internal[s.func]
    else:
        layout.internal[s.func] = saved
    lets: list[tuple[str, E.Expr]] = []
    for k, (lo, ext) in enumerate(s.bounds):
        lo = _index(lo, layout, wide)
        lets.append((f"{buf}.min.{k}", lo))
        extent = _i64(fold[k]) if fold[k] else E.Max(_index(ext, layout, wide), _i64(0))
        if tiling is not None and tiling[1][k] and s.func not in layout.tiles_from_min:
            # tiles start at multiples of their size (the first tile at the min's): an index whose
            # vector lanes stay within a tile is then a dense run whatever the region's min, where the
            # loops start at such multiples. The extent, whole tiles, takes one more for the min's offset
            # unless the min is provably a multiple itself
            size = 1 << tiling[1][k]
            lets.append((f"{buf}.tmin.{k}", E.FloorDiv(E.Var(f"{buf}.min.{k}", I64), _i64(size))))
            if E.known_residue(simplify(lo), size) != 0:
                extent = E.Add(extent, _i64(size))
        lets.append((f"{buf}.extent.{k}", extent))
    for m in reversed(range(rank - 1)):  # strides in storage order, the innermost dimension's is 1
        k, below = order[m], order[m + 1]
        inner = _i64(1) if m + 1 == rank - 1 else E.Var(f"{buf}.stride.{below}", I64)
        lets.append((f"{buf}.stride.{k}", E.Mul(inner, E.Var(f"{buf}.extent.{below}", I64))))
    if tiling is not None:  # the tiles' strides, in tiles, in storage order (extents are whole tiles)
        bits = tiling[1]
        for m in reversed(range(rank)):
            k = order[m]
            if m == rank - 1:
                stride: E.Expr = _i64(1)
            else:
                below = order[m + 1]
                stride = E.Mul(E.Var(f"{buf}.tstride.{below}", I64),
                               E.shift(E.Shr, E.Var(f"{buf}.extent.{below}", I64), _i64(bits[below])))
            lets.append((f"{buf}.tstride.{k}", stride))
    size: E.Expr = _i64(1)
    for k in range(rank):
        size = E.Mul(size, E.Var(f"{buf}.extent.{k}", I64))
    out: ir.Stmt = ir.Allocate(buf, s.dtype, size, body)
    for name, value in reversed(lets):
        out = ir.LetStmt(name, value, out)
    return out


def _copy_out_ragged(f, buf: str, layout: Layout, wide) -> ir.Stmt:
    """Copy a ragged output from the Func's own storage (its padded box: another output read it beyond its
    region, or a tail computed it past an entry) into the caller's packed array, entry by entry, each over
    its own extents."""
    name = f.name
    loops = [f"{name}.copy.{k}" for k in range(f.rank)]
    at = [E.Var(v, I64) for v in loops]
    inner = wide | set(loops)
    src = E.Load(buf, layout.flat(name, at, inner), f.dtype)
    saved = layout.internal.pop(name)
    try:
        dst = layout.flat(name, at, inner)
        extents = [widen_index(_value(E.substitute(s, {dim_index(0): at[0]}), layout, inner), inner)
                   if k and is_ragged(s) else E.Var(f"{name}.extent.{k}", I64) for k, s in enumerate(f.shape)]
    finally:
        layout.internal[name] = saved
    body: ir.Stmt = ir.Store(name, dst, src)
    for k in reversed(range(f.rank)):
        body = ir.For(loops[k], _i64(0), extents[k], ir.ForKind.SERIAL, body)
    return ir.Produce(f"{name} (copy out)", body)


def _copy_out(name: str, buf: str, dtype, rank: int, layout: Layout, wide) -> ir.Stmt:
    """Copy the output region from the Func's own storage into the caller's array. Where the target runs
    parallel loops (``Layout.parallel_copies``), the rows (every dimension but the last, as one loop) are
    copied in parallel: serial, the copy of a 3 x 2560 x 1536 image was 8% of an equalizer's time."""
    loops = [f"{name}.copy.{k}" for k in range(rank)]
    src = E.Load(buf, layout.flat(name, [E.Var(v, I64) for v in loops], wide | set(loops)), dtype)
    dst: E.Expr = _i64(0)
    for k, v in enumerate(loops):
        stride = _i64(1) if k == rank - 1 else E.Var(f"{name}.stride.{k}", I64)
        dst = E.Add(dst, E.Mul(E.Var(v, I64), stride))
    body: ir.Stmt = ir.Store(name, dst, src)
    extents = [E.Var(f"{name}.extent.{k}", I64) for k in range(rank)]
    if layout.parallel_copies and rank >= 2:
        rows = f"{name}.copy.rows"
        body = ir.For(loops[-1], _i64(0), extents[-1], ir.ForKind.SERIAL, body)
        below: E.Expr = E.Var(rows, I64)  # the row's index in dimensions k and after (the last excluded)
        for k in reversed(range(rank - 1)):
            body = ir.LetStmt(loops[k], below if k == 0 else E.Mod(below, extents[k]), body)
            below = E.FloorDiv(below, extents[k])
        count: E.Expr = extents[0]
        for ext in extents[1:-1]:
            count = E.Mul(count, ext)
        return ir.Produce(f"{name} (copy out)", ir.For(rows, _i64(0), count, ir.ForKind.PARALLEL, body))
    for k in reversed(range(rank)):
        body = ir.For(loops[k], _i64(0), extents[k], ir.ForKind.SERIAL, body)
    return ir.Produce(f"{name} (copy out)", body)
