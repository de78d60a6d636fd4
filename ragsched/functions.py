"""The functions of the language beside its classes: math (``rs.exp``...), casts and selects, min and max,
inline reductions (``rs.sum(e)``: an anonymous Func with an update over the RDom ``e`` uses), and
boundary conditions (``rs.clamp_edge(img)``...). Each builds expressions or Funcs out of ``lang``.
"""

from __future__ import annotations

import hashlib
import weakref

from .algebra import expr as E
from .algebra import types as T
from .algebra.types import DType
from .lang import Expr, Func, Input, RDom, Var, _call, _index_args, _node_of, _unwrap, index_wrap, wrap


def exp(x): return _call("exp", x)
def log(x): return _call("log", x)
def exp2(x): return _call("exp2", x)
def log2(x): return _call("log2", x)
def sqrt(x): return _call("sqrt", x)
def rsqrt(x): return _call("rsqrt", x)
def tanh(x): return _call("tanh", x)
def erf(x): return _call("erf", x)
def sin(x): return _call("sin", x)
def cos(x): return _call("cos", x)
def floor(x): return _call("floor", x)
def ceil(x): return _call("ceil", x)
def round(x): return _call("round", x)  # noqa: A001 - NumPy's name; rounds half to even
def pow(x, y): return _call("pow", x, y)  # noqa: A001


def cast(dtype, x) -> Expr:
    n, d = _node_of(x)
    return Expr(E.cast(T.as_dtype(dtype), n), d)


def select(*args) -> Expr:
    """``select(c, a, b)``, or ``select(c1, v1, c2, v2, ..., default)`` (the first true condition wins)."""
    if len(args) < 3 or len(args) % 2 == 0:
        raise TypeError("select takes (cond, a, b) or (c1, v1, c2, v2, ..., default)")
    out, deps = _unwrap(args[-1])
    for c, v in reversed(list(zip(args[:-1:2], args[1:-1:2], strict=True))):
        nc, dc = _node_of(c)
        nv, dv = _unwrap(v)
        out, deps = E.select(nc, nv, out), dc | dv | deps
    return Expr(out, deps) if isinstance(out, E.Expr) else wrap(out)


def min(*args) -> Expr:  # noqa: A001
    if len(args) < 2:
        raise TypeError("rs.min takes two or more arguments (rs.minimum is the reduction)")
    return _fold(E.minimum, args)


def _fold(fn, args) -> Expr:
    out, deps = _unwrap(args[0])
    for a in args[1:]:
        n, d = _unwrap(a)
        out, deps = fn(out, n), deps | d
    return Expr(out, deps) if isinstance(out, E.Expr) else wrap(out)


def max(*args) -> Expr:  # noqa: A001
    if len(args) < 2:
        raise TypeError("rs.max takes two or more arguments (rs.maximum is the reduction)")
    return _fold(E.maximum, args)


def clamp(x, lo, hi) -> Expr:
    return min(max(x, lo), hi)


# --------------------------------------------------------------------------- inline reductions
_anon_funcs: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _reduction_parts(kind: str, e) -> tuple[Expr, RDom, list[Var]]:
    v = wrap(e)
    rdoms = [d for d in v.deps if isinstance(d, RDom)]
    if len(rdoms) != 1:
        raise ValueError(f"rs.{kind}({v}) needs exactly one RDom in its argument, found "
                         f"{len(rdoms)}" + (f" ({', '.join(sorted(r.name for r in rdoms))})" if rdoms else ""))
    rdom = rdoms[0]
    order = {n.name: k for k, n in enumerate(E.walk(v.node)) if isinstance(n, E.Var)}
    free = [d for d in (v.deps | rdom._bound_deps) if type(d) is Var]
    free.sort(key=lambda d: (order.get(d.name, len(order)), d.name))
    return v, rdom, free


def _anon_func(kind: str, v: Expr, rdom: RDom, free: list[Var], dtype: DType, init, update) -> Expr:
    """The Func behind an inline reduction, shared by identical reductions (a stable, content-named Func)."""
    # named by content, not by the RDom's name (fresh per build), so that a schedule that names it applies
    # to the next build of the same pipeline too
    canon = {r.name: E.Var(f"#r.{k}", r.node.dtype) for k, r in enumerate(rdom._rvars)}
    d = rdom._domain()
    pred = None if d.predicate is None else E.substitute(d.predicate, canon)
    domain = tuple(tuple(E.substitute(x, canon) for x in xs) for xs in (d.mins, d.extents)), pred
    key = f"{kind}|{E.substitute(v.node, canon)!r}|{domain!r}|{[f.name for f in free]}|{dtype}"
    name = f"{kind}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"
    # shared only with a reduction of the same objects: a second build of a pipeline gets its own
    reads = tuple(sorted(id(d) for d in v.deps | rdom._bound_deps if isinstance(d, (Func, Input))))
    if not reads:  # reads nothing (a count over its RDom): its RDom tells one build from the next
        reads = (id(rdom),)
    f = _anon_funcs.get((name, reads))
    if f is None:
        f = Func(name, dtype=dtype)
        f[tuple(free)] = Expr(E.const(init, dtype)) if not isinstance(init, Expr) else init
        f[tuple(free)] = update(f[tuple(free)])
        _anon_funcs[(name, reads)] = f
    return f[tuple(free)] if free else f[()]


def _accumulator_type(kind: str, t: DType) -> DType:
    if kind in ("sum", "product") and (t.is_bool or t.is_int) and t.bits < 64:
        return T.uint64 if t.kind == "u" else T.int64  # NumPy widens integer sums
    return t


def sum(e) -> Expr:  # noqa: A001
    """The sum of ``e`` over its RDom (integers accumulate in 64 bits, as np.sum does)."""
    v, rdom, free = _reduction_parts("sum", e)
    t = _accumulator_type("sum", v.dtype)
    return _anon_func("sum", v, rdom, free, t, 0, lambda ref: ref + cast(t, v))


def product(e) -> Expr:
    v, rdom, free = _reduction_parts("product", e)
    t = _accumulator_type("product", v.dtype)
    return _anon_func("product", v, rdom, free, t, 1, lambda ref: ref * cast(t, v))


def _extreme_init(t: DType, lowest: bool):
    if t.is_float:
        return float("-inf") if lowest else float("inf")
    return t.min if lowest else t.max


def maximum(e) -> Expr:
    v, rdom, free = _reduction_parts("maximum", e)
    return _anon_func("maximum", v, rdom, free, v.dtype, _extreme_init(v.dtype, True),
                      lambda ref: max(ref, v))


def minimum(e) -> Expr:
    v, rdom, free = _reduction_parts("minimum", e)
    return _anon_func("minimum", v, rdom, free, v.dtype, _extreme_init(v.dtype, False),
                      lambda ref: min(ref, v))


def _arg_extreme(kind: str, e):
    """Index of the first maximum (minimum) of ``e`` over its RDom, as np.argmax: a coordinate for a
    1-D RDom, a tuple of coordinates otherwise. NaN counts as the extreme (NumPy's rule)."""
    v, rdom, free = _reduction_parts(kind, e)
    best = maximum(v) if kind == "argmax" else minimum(v)
    rvars = list(rdom)
    flat = index_wrap(0)
    strides = []
    stride = index_wrap(1)
    for rv in reversed(rvars):
        strides.append(stride)
        flat = flat + (rv - rv.min) * stride
        stride = stride * rv.extent
    strides.reverse()
    big = T.INDEX.max
    hit = (v == best) | (v != v)
    first = _anon_func(kind, v, rdom, free, T.INDEX, big,
                       lambda ref: min(ref, select(hit, cast(T.INDEX, flat), big)))
    if len(rvars) == 1:
        return first + rvars[0].min
    return tuple((first // s) % rv.extent + rv.min for rv, s in zip(rvars, strides, strict=True))


def argmax(e):
    return _arg_extreme("argmax", e)


def argmin(e):
    return _arg_extreme("argmin", e)


# --------------------------------------------------------------------------- boundary conditions
class _Bounded:
    """An Input seen through a boundary condition: indexing it never reads outside the Input."""

    def __init__(self, src: Input, kind: str, value=None):
        if not isinstance(src, Input):
            raise TypeError(f"{kind} wraps an Input, got {src!r}")
        if value is not None:
            value = cast(src.dtype, value)  # the exterior has the image's type, as in Halide and np.pad
        self.src, self.kind, self.value = src, kind, value
        self.name, self.dtype, self.shape = src.name, src.dtype, src.shape

    @property
    def rank(self) -> int:
        return self.src.rank

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        _index_args(self.name, self.rank, key)
        coords, inside = [], None
        for k, n in zip(key, self.shape, strict=True):
            k = wrap(k)
            if self.kind == "clamp_edge" or self.kind == "constant_exterior":
                coords.append(clamp(k, 0, n - 1))
                ok = (k >= 0) & (k < n)
                inside = ok if inside is None else inside & ok
            elif self.kind == "repeat_image":
                coords.append(clamp(k % n, 0, n - 1))
            else:  # mirror_image: ... 1 0 | 0 1 ... n-1 | n-1 n-2 ...
                m = k % (2 * n)
                coords.append(clamp(select(m < n, m, 2 * n - 1 - m), 0, n - 1))
        val = self.src[tuple(coords)]
        if self.kind == "constant_exterior":
            return select(inside, val, self.value)
        return val


def clamp_edge(src: Input) -> _Bounded:
    """Reads outside the Input see its nearest edge value."""
    return _Bounded(src, "clamp_edge")


def constant_exterior(src: Input, value) -> _Bounded:
    """Reads outside the Input see ``value``."""
    return _Bounded(src, "constant_exterior", value)


def repeat_image(src: Input) -> _Bounded:
    """The Input tiles the plane periodically."""
    return _Bounded(src, "repeat_image")


def mirror_image(src: Input) -> _Bounded:
    """The Input is reflected at its edges, the edge pixel repeated (NumPy's pad mode 'symmetric')."""
    return _Bounded(src, "mirror_image")
