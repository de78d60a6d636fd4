"""Expression IR: immutable, hashable nodes, and typed constructors that apply NumPy's promotion rules.

Nodes carry no operator overloading (that is the language layer's job, see ``ragsched.lang``), so
``==`` and ``hash`` are structural and nodes can key dicts and caches. Build typed trees with the
constructor functions at the bottom (``add``, ``lt``, ``select``, ...): they promote, insert casts and
refuse ill-typed combinations with a ``TypeError`` that shows the expression.
"""

from __future__ import annotations

import math
import struct
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from functools import cache
from operator import attrgetter

from . import types as T
from .types import DType


class Expr:
    """Base of all expression nodes."""

    __slots__ = ()

    @property
    def dtype(self) -> DType:
        """Nodes without a ``dtype`` field derive it from their operands once, when they are built."""
        return self._dtype

    def __str__(self) -> str:
        from .printer import expr_to_str

        return expr_to_str(self)


def _node(cls):
    """A frozen, slotted dataclass whose hash (and derived dtype) are computed when it is built, from
    its children's: trees are hashed often (memos, dict keys), and recomputing recursively would be
    quadratic in their depth. Equality compares the hashes first, then walks both graphs once."""
    own = cls.__dict__.get("__annotations__", {})
    extra = {"_hash": "int"} if "dtype" in own else {"_hash": "int", "_dtype": "DType"}
    cls.__annotations__ = {**own, **extra}
    for name in extra:  # no default: set once, by __post_init__ (a default would cost __init__ a store)
        setattr(cls, name, field(init=False, repr=False, compare=False))
    names = tuple(n for n in own if n not in extra)
    # decided once per class: hasattr on an instance that lacks the attribute raises inside, and was
    # half of the cost of building a node
    parts = cls._hash_parts if hasattr(cls, "_hash_parts") else attrgetter(*names)
    derive = cls._derive_dtype if "_dtype" in extra else None
    store = object.__setattr__

    def __post_init__(self):
        if derive is not None:
            store(self, "_dtype", derive(self))
        store(self, "_hash", hash((cls, parts(self))))

    cls.__post_init__ = __post_init__
    own_eq = "__eq__" in cls.__dict__
    out = dataclass(frozen=True, slots=True, repr=True)(cls)
    out.__hash__ = _cached_hash
    out.__reduce__ = rebuilt_when_unpickled(out)
    if not own_eq:
        out.__eq__ = _node_eq
    return out


def rebuilt_when_unpickled(cls):
    """A ``__reduce__`` that pickles a dataclass node by its constructor's arguments: unpickling then
    builds it anew, so the hash cached in it is this process's (a string's and a type's hash differ
    between processes: a node restored field by field kept the writer's, and compared unequal to the
    same node built here), and costs one constructor call instead of dataclasses' per-field restore."""
    names = tuple(f.name for f in fields(cls) if f.init)

    def __reduce__(self):
        return cls, tuple([getattr(self, n) for n in names])

    return __reduce__


def _node_eq(self, other):
    """Structural equality that compares the cached hashes first: two different trees almost never
    share a hash, so ``==`` between different large trees stops at the root."""
    if self is other:
        return True
    if type(other) is not type(self) or self._hash != other._hash:
        return False
    return _dag_equal(self, other)


def _compared(tp):
    """A getter of the fields that equality compares, as a tuple (one C call per node)."""
    get = _COMPARED.get(tp)
    if get is None:
        names = tuple(f.name for f in fields(tp) if f.compare)
        one = attrgetter(names[0]) if len(names) == 1 else None
        get = _COMPARED[tp] = (lambda e: (one(e),)) if one is not None else attrgetter(*names)
    return get


_COMPARED: dict[type, object] = {}

#: node pairs compared before ``_dag_equal`` starts remembering them: most comparisons (a memo's key
#: against an equal tree built apart, which shares all but a few nodes with it) end within a few pairs,
#: and a set per call cost more than the comparison
_PAIRS_UNREMEMBERED = 32


def _dag_equal(a, b) -> bool:
    """Whether two expressions are equal, each shared subexpression pair compared once: equal trees
    built apart (a lowering's lets put into each other share subtrees) would take time exponential in
    their depth to compare field by field, and recurse as deep as they go. The pairs compared are
    remembered only past the first few (a repeated pair among those is compared again, a bounded cost)."""
    stack = [(a, b)]
    pop, push, compared = stack.pop, stack.extend, _COMPARED
    seen = None
    pairs = 0
    while stack:
        x, y = pop()
        if x is y:
            continue
        tx = type(x)
        if tx is Var or tx is Const:
            if not x == y:
                return False
        elif tx is tuple:
            if type(y) is not tuple or len(x) != len(y):
                return False
            push(zip(x, y))
        elif isinstance(x, Expr):
            if type(y) is not tx or x._hash != y._hash:
                return False
            pairs += 1
            if pairs > _PAIRS_UNREMEMBERED:
                pair = (id(x), id(y))
                if seen is None:
                    seen = {pair}
                elif pair in seen:
                    continue
                else:
                    seen.add(pair)
            get = compared.get(tx) or _compared(tx)
            push(zip(get(x), get(y)))
        elif not x == y:
            return False
    return True


def _cached_hash(self) -> int:
    return self._hash


# ---------------------------------------------------------------------------------------------- leaves
@_node
class Const(Expr):
    """A constant; float values are compared by their bits, so 0.0 and -0.0 differ and NaN equals NaN."""

    value: bool | int | float
    dtype: DType

    def _hash_parts(self):
        v = self.value
        return (struct.pack("<d", v) if type(v) is float else v, self.dtype)

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not Const or self._hash != other._hash:
            return False
        a, b = self.value, other.value
        if type(a) is float:
            return struct.pack("<d", a) == struct.pack("<d", b) and self.dtype == other.dtype
        return a == b and self.dtype == other.dtype

    __hash__ = None  # replaced by _node's cached hash


@_node
class Var(Expr):
    """A free symbol: a pure Var, an RVar, a loop counter, a Size or a scalar Param."""

    name: str
    dtype: DType = T.INDEX

    def __eq__(self, other):
        if self is other:
            return True
        return type(other) is Var and self._hash == other._hash and self.name == other.name and \
            self.dtype == other.dtype

    __hash__ = None  # replaced by _node's cached hash


# ------------------------------------------------------------------------------------------- operators
@_node
class Cast(Expr):
    value: Expr
    dtype: DType


class Binary(Expr):
    """Arithmetic on two operands of one type; the result has that type."""

    __slots__ = ()
    symbol = "?"

    def _derive_dtype(self) -> DType:
        return self.a.dtype


@_node
class Add(Binary):
    a: Expr
    b: Expr
    symbol = "+"


@_node
class Sub(Binary):
    a: Expr
    b: Expr
    symbol = "-"


@_node
class Mul(Binary):
    a: Expr
    b: Expr
    symbol = "*"


@_node
class Div(Binary):
    """True division of floats."""

    a: Expr
    b: Expr
    symbol = "/"


@_node
class FloorDiv(Binary):
    """Floor division (Python's ``//``): for integers ``x // 0`` is 0, as in NumPy; for floats it is
    NumPy's floor_divide (``1.0 // 0.1 == 9.0``, not ``floor(1.0 / 0.1)``)."""

    a: Expr
    b: Expr
    symbol = "//"


@_node
class Mod(Binary):
    """Floor modulo (Python's ``%``: the sign of the divisor); ``x % 0`` is 0 for integers."""

    a: Expr
    b: Expr
    symbol = "%"


@_node
class Min(Binary):
    a: Expr
    b: Expr
    symbol = "min"


@_node
class Max(Binary):
    a: Expr
    b: Expr
    symbol = "max"


@_node
class BitAnd(Binary):
    a: Expr
    b: Expr
    symbol = "&"


@_node
class BitOr(Binary):
    a: Expr
    b: Expr
    symbol = "|"


@_node
class BitXor(Binary):
    a: Expr
    b: Expr
    symbol = "^"


@_node
class Shl(Binary):
    a: Expr
    b: Expr
    symbol = "<<"


@_node
class Shr(Binary):
    """Arithmetic shift for signed, logical for unsigned types."""

    a: Expr
    b: Expr
    symbol = ">>"


class Compare(Expr):
    """A comparison of two operands of one type; the result is bool."""

    __slots__ = ()
    symbol = "?"

    def _derive_dtype(self) -> DType:
        return T.bool_.with_lanes(self.a.dtype.lanes)


@_node
class LT(Compare):
    a: Expr
    b: Expr
    symbol = "<"


@_node
class LE(Compare):
    a: Expr
    b: Expr
    symbol = "<="


@_node
class EQ(Compare):
    a: Expr
    b: Expr
    symbol = "=="


@_node
class NE(Compare):
    a: Expr
    b: Expr
    symbol = "!="


@_node
class And(Binary):
    """Logical and of bools."""

    a: Expr
    b: Expr
    symbol = "&&"


@_node
class Or(Binary):
    a: Expr
    b: Expr
    symbol = "||"


@_node
class Not(Expr):
    """Logical not of a bool, bitwise not of an integer."""

    a: Expr

    def _derive_dtype(self) -> DType:
        return self.a.dtype


@_node
class Neg(Expr):
    a: Expr

    def _derive_dtype(self) -> DType:
        return self.a.dtype


@_node
class Select(Expr):
    cond: Expr
    t: Expr
    f: Expr

    def _derive_dtype(self) -> DType:
        return self.t.dtype


@_node
class Call(Expr):
    """A pure math function (exp, log, sqrt, ...), by name; see MATH_FUNCTIONS."""

    name: str
    args: tuple[Expr, ...]
    dtype: DType


@_node
class FuncRef(Expr):
    """The value of Func or Input ``name`` at the point ``args`` (integer expressions)."""

    name: str
    args: tuple[Expr, ...]
    dtype: DType


@_node
class Load(Expr):
    """A load from a lowered buffer at a flat element index (only after lowering)."""

    buffer: str
    index: Expr
    dtype: DType


@_node
class Ramp(Expr):
    """The vector ``base + k * stride`` for k in [0, lanes) (only after vectorization)."""

    base: Expr
    stride: Expr
    lanes: int

    def _derive_dtype(self) -> DType:
        return self.base.dtype.with_lanes(self.lanes)


@_node
class Broadcast(Expr):
    """``value`` repeated in every lane (only after vectorization)."""

    value: Expr
    lanes: int

    def _derive_dtype(self) -> DType:
        return self.value.dtype.with_lanes(self.lanes)


@_node
class VectorReduce(Expr):
    """The lanes of ``value`` combined into one by ``op`` ("add", "mul", "min", "max", "and", "or"): a
    reduction over a vectorized RDom (only after vectorization). The order of combination is the
    backend's: a vectorized sum is reassociated, as NumPy's pairwise sums and Halide's rfactor are."""

    op: str
    value: Expr

    def _derive_dtype(self) -> DType:
        return self.value.dtype.scalar()


@_node
class Shuffle(Expr):
    """Lanes picked from vectors of one type: lane k is lane ``indices[k]`` of the vectors in ``args``
    laid end to end (LLVM's ``shufflevector``; only in a CPU backend's own passes, after lowering)."""

    args: tuple[Expr, ...]
    indices: tuple[int, ...]

    def _derive_dtype(self) -> DType:
        return self.args[0].dtype.with_lanes(len(self.indices))


@_node
class Let(Expr):
    """``body`` with ``name`` bound to ``value`` (common subexpressions, after lowering)."""

    name: str
    value: Expr
    body: Expr

    def _derive_dtype(self) -> DType:
        return self.body.dtype


#: Math functions, with the number of arguments. They map ints to float64 as NumPy does.
MATH_FUNCTIONS = {
    "exp": 1, "log": 1, "exp2": 1, "log2": 1, "sqrt": 1, "rsqrt": 1, "tanh": 1, "erf": 1, "sin": 1, "cos": 1,
    "floor": 1, "ceil": 1, "round": 1, "pow": 2,
}
#: Functions that keep the type of their argument (ints included).
TYPE_PRESERVING = {"abs"}


# --------------------------------------------------------------------------------- generic traversal
@contextmanager
def deep_recursion(limit: int = 50_000):
    """Passes recurse over expression trees; let them go as deep as a long chain of terms needs."""
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, limit))
    try:
        yield
    finally:
        sys.setrecursionlimit(old)



@cache
def _expr_fields(cls) -> tuple[tuple[str, bool], ...]:
    """(field name, is_tuple) for each field of ``cls`` that holds sub-expressions."""
    out = []
    for f in fields(cls):
        if not f.init:  # the cached hash and dtype
            continue
        if f.name in ("name", "dtype", "value") and cls in (Const, Var):
            continue
        if f.name in ("name", "dtype", "buffer", "lanes", "op", "indices"):
            continue
        out.append((f.name, f.name == "args"))
    return tuple(out)


def children(e: Expr) -> tuple[Expr, ...]:
    """The direct sub-expressions of ``e``, in field order."""
    get = _CHILDREN.get(type(e))
    if get is None:
        get = _CHILDREN[type(e)] = _children_getter(type(e))
    return get(e)


_CHILDREN: dict[type, object] = {}  # node class -> its children getter (passes call children() millions of times)


def _children_getter(cls):
    spec = _expr_fields(cls)
    names = tuple(name for name, _ in spec)
    if not names:
        return lambda e: ()
    if any(is_tuple for _, is_tuple in spec):
        def get(e):
            out: list[Expr] = []
            for name, is_tuple in spec:
                v = getattr(e, name)
                if is_tuple:
                    out.extend(v)
                else:
                    out.append(v)
            return tuple(out)
        return get
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda e: (one(e),)
    return attrgetter(*names)  # a tuple, read in C


@cache
def _init_names(cls) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.init)


def with_children(e: Expr, new: tuple[Expr, ...]) -> Expr:
    """``e`` with its sub-expressions replaced by ``new`` (same order as ``children``)."""
    make = _REBUILD.get(type(e))
    if make is None:
        make = _REBUILD[type(e)] = _rebuilder(type(e))
    return make(e, new)


_REBUILD: dict[type, object] = {}  # node class -> its with_children


def _rebuilder(cls):
    """``with_children`` for ``cls``: where the constructor takes exactly the sub-expressions, in order (the
    arithmetic, comparisons, selects: most nodes a pass rebuilds), a call with them; else by field name."""
    spec = _expr_fields(cls)
    if spec and not any(is_tuple for _, is_tuple in spec) and tuple(n for n, _ in spec) == _init_names(cls):
        get = _children_getter(cls)

        def simple(e, new):
            return cls(*new) if any(a is not b for a, b in zip(new, get(e))) else e

        return simple

    def by_name(e, new):
        kw = {}
        k = 0
        for name, is_tuple in spec:
            if is_tuple:
                n = len(getattr(e, name))
                kw[name] = tuple(new[k:k + n])
                k += n
            else:
                kw[name] = new[k]
                k += 1
        if all(getattr(e, name) is kw[name] for name in kw):
            return e
        return cls(**{n: kw[n] if n in kw else getattr(e, n) for n in _init_names(cls)})

    return by_name


def transform(e: Expr, fn) -> Expr:
    """Rebuild ``e`` bottom-up, replacing each node ``n`` by ``fn(n)`` (``fn`` returns ``n`` to keep it)."""
    memo: dict[int, Expr] = {}

    def go(n: Expr) -> Expr:
        key = id(n)
        out = memo.get(key)
        if out is not None:
            return out
        kids = children(n)
        out = fn(with_children(n, [go(c) for c in kids]) if kids else n)
        memo[key] = out
        return out

    try:
        return go(e)
    finally:
        go = None  # a closure that names itself is a cycle: emptied so that refcounting frees it and the memo


def walk(e: Expr):
    """Every node of ``e`` (pre-order, shared sub-trees visited once)."""
    seen = set()
    stack = [e]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        yield n
        stack.extend(reversed(children(n)))


def reads_data(e: Expr) -> bool:
    """Whether ``e`` reads a Func, an Input or a buffer: its value depends on data, not only on indices."""
    return any(isinstance(n, (FuncRef, Load)) for n in walk(e))


def free_vars(e: Expr) -> set[str]:
    """Names of the Vars in ``e`` that no Let inside ``e`` binds."""
    bound: set[str] = set()
    out = set()
    seen = set()
    stack = [e]
    getters = _CHILDREN
    while stack:  # walk()'s visit, in any order, without a generator's step per node
        n = stack.pop()
        tp = type(n)
        if tp is Var:
            out.add(n.name)
            continue
        if tp is Const or id(n) in seen:
            continue
        seen.add(id(n))
        if tp is Let:
            bound.add(n.name)
        get = getters.get(tp)
        stack += get(n) if get is not None else children(n)
    return out - bound if bound else out


def substitute(e: Expr, mapping: dict[str, Expr]) -> Expr:
    """Replace Vars by name."""
    if not mapping:
        return e
    return transform(e, lambda n: mapping.get(n.name, n) if isinstance(n, Var) else n)


def func_refs(e: Expr) -> list[FuncRef]:
    return [n for n in walk(e) if isinstance(n, FuncRef)]


_EXPR_REFS: dict[int, tuple[Expr, dict]] = {}  # id -> (the expression, its FuncRefs by name)


def func_refs_by_name(e: Expr) -> dict[str, tuple[FuncRef, ...]]:
    """``func_refs(e)`` by name, cached by node: lowering asks again and again of the same large
    expressions (every placement of a Func walks its consumers' bodies)."""
    hit = _EXPR_REFS.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    refs: dict[str, list] = {}
    for n in func_refs(e):
        refs.setdefault(n.name, []).append(n)
    out = {k: tuple(v) for k, v in refs.items()}
    if len(_EXPR_REFS) > 200_000:
        _EXPR_REFS.clear()
    _EXPR_REFS[id(e)] = (e, out)
    return out


# ------------------------------------------------------------------------------ typed constructors
Operand = Expr | bool | int | float


def const(value, dtype: DType | None = None) -> Const:
    """A constant of ``dtype`` (NumPy's default type for the Python scalar if none is given)."""
    t = T.default_type(value) if dtype is None else dtype
    if isinstance(value, (float,)) and t.is_int and not math.isfinite(value):
        raise ValueError(f"cannot represent {value} as {t}")
    if not T.fits(value, t):
        raise ValueError(f"Python integer {value} is out of bounds for {t}")
    if t.is_bool:
        v = bool(value)
    elif t.is_int:
        v = int(value)
    else:
        v = float(t.np.type(value))  # rounded to the constant's own precision
    return Const(v, t)


def _operand_type(x) -> DType | Operand:
    return x.dtype if isinstance(x, Expr) else x


def _to(x: Operand, t: DType) -> Expr:
    if isinstance(x, Expr):
        return x if x.dtype == t else Cast(x, t)
    return const(x, t)


def _promote(a: Operand, b: Operand, what) -> tuple[Expr, Expr, DType]:
    """Both operands converted to their NumPy result type. ``what`` names the operation for errors: an
    operator symbol, or a function returning the text (formatted only when there is an error)."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        t = T.result_type(a, b)
        return const(a, t), const(b, t), t
    try:
        t = T.result_type(_operand_type(a), _operand_type(b))
    except TypeError as err:
        raise TypeError(f"{what() if callable(what) else _show(what, a, b)}: {err}") from None
    return _to(a, t), _to(b, t), t


def _show(sym: str, a, b) -> str:
    return f"({a} {sym} {b})"


def cast(t: DType, x: Operand) -> Expr:
    """Convert ``x`` to ``t`` (float to int truncates toward zero and saturates; NaN becomes 0)."""
    t = T.as_dtype(t)
    e = x if isinstance(x, Expr) else const(x)
    return e if e.dtype == t else Cast(e, t)


def _arith(cls, sym: str, a: Operand, b: Operand, allow_bool=False) -> Expr:
    a2, b2, t = _promote(a, b, sym)
    if t.is_bool and not allow_bool:
        raise TypeError(f"{_show(sym, a, b)}: arithmetic on bool operands; cast them to an integer type")
    return cls(a2, b2)


def add(a, b):
    return _arith(Add, "+", a, b)


def sub(a, b):
    return _arith(Sub, "-", a, b)


def mul(a, b):
    return _arith(Mul, "*", a, b)


def truediv(a, b):
    """``a / b``: integers are divided as float64, as in NumPy."""
    a2, b2, t = _promote(a, b, "/")
    if not t.is_float:
        if t.is_bool:
            raise TypeError(f"{_show('/', a, b)}: arithmetic on bool operands")
        a2, b2 = _to(a2, T.float64), _to(b2, T.float64)
    return Div(a2, b2)


def floordiv(a, b):
    a2, b2, t = _promote(a, b, "//")
    if t.is_bool:
        raise TypeError(f"{_show('//', a, b)}: arithmetic on bool operands")
    return FloorDiv(a2, b2)


def round_up(a, multiple: int):
    """``a`` rounded up to a multiple of the positive int ``multiple`` (loop and storage padding)."""
    if multiple == 1:
        return a
    return mul(floordiv(add(a, multiple - 1), multiple), multiple)


def mod(a, b):
    return _arith(Mod, "%", a, b)


def minimum(a, b):
    return _arith(Min, "min", a, b, allow_bool=True)


def maximum(a, b):
    return _arith(Max, "max", a, b, allow_bool=True)


def neg(a: Operand) -> Expr:
    if not isinstance(a, Expr):
        return const(-a)
    if a.dtype.is_bool:
        raise TypeError(f"-({a}): negation of a bool; use ~")
    return Neg(a)


def _bitwise(cls, logical, sym, a, b):
    a2, b2, t = _promote(a, b, sym)
    if t.is_float:
        raise TypeError(f"{_show(sym, a, b)}: {sym} needs bool or integer operands, got {t}")
    return logical(a2, b2) if t.is_bool else cls(a2, b2)


def bit_and(a, b):
    return _bitwise(BitAnd, And, "&", a, b)


def bit_or(a, b):
    return _bitwise(BitOr, Or, "|", a, b)


def bit_xor(a, b):
    return _bitwise(BitXor, NE, "^", a, b)


def shift(cls, a, b):
    sym = "<<" if cls is Shl else ">>"
    a2, b2, t = _promote(a, b, sym)
    if not t.is_int:
        raise TypeError(f"{_show(sym, a, b)}: shifts need integer operands, got {t}")
    return cls(a2, b2)


def invert(a: Operand) -> Expr:
    """``~a``: logical not of a bool, bitwise not of an integer."""
    if not isinstance(a, Expr):
        a = const(a)
    if a.dtype.is_float:
        raise TypeError(f"~({a}): ~ needs a bool or integer operand, got {a.dtype}")
    return Not(a)


def compare(cls, a, b) -> Expr:
    a2, b2, _ = _promote(a, b, cls.symbol)
    return cls(a2, b2)


def lt(a, b):
    return compare(LT, a, b)


def le(a, b):
    return compare(LE, a, b)


def gt(a, b):
    return compare(LT, b, a)


def ge(a, b):
    return compare(LE, b, a)


def eq(a, b):
    return compare(EQ, a, b)


def ne(a, b):
    return compare(NE, a, b)


def as_bool(x: Operand, what: str) -> Expr:
    e = x if isinstance(x, Expr) else const(x)
    if not e.dtype.is_bool:
        raise TypeError(f"{what}: expected a bool condition, got {e} of type {e.dtype}")
    return e


def select(cond: Operand, t: Operand, f: Operand) -> Expr:
    c = as_bool(cond, "select")
    t2, f2, _ = _promote(t, f, lambda: f"select({cond}, {t}, {f})")
    return Select(c, t2, f2)


def call(name: str, *args: Operand) -> Expr:
    """A math function; ints and bools become float64 (NumPy), floats keep their type."""
    if name in TYPE_PRESERVING:
        (a,) = args
        a = a if isinstance(a, Expr) else const(a)
        if a.dtype.is_bool:
            raise TypeError(f"abs({a}): abs of a bool")
        return a if a.dtype.kind == "u" else Call(name, (a,), a.dtype)
    if MATH_FUNCTIONS.get(name) != len(args):
        raise TypeError(f"{name} takes {MATH_FUNCTIONS.get(name)} argument(s), got {len(args)}")
    if len(args) == 2:
        a, b, t = _promote(args[0], args[1], lambda: f"{name}({args[0]}, {args[1]})")
        ops = [a, b]
    else:
        a = args[0] if isinstance(args[0], Expr) else const(args[0])
        t, ops = a.dtype, [a]
    if not t.is_float:
        t = T.float64
        ops = [_to(o, t) for o in ops]
    return _pow(*ops, t) if name == "pow" else Call(name, tuple(ops), t)


def _pow(a: Expr, b: Expr, t: DType) -> Expr:
    """pow(a, b) of floats of type ``t``. A constant exponent of 0, 1, 2, 3, -1, 1/2 or -1/2 is computed as
    C99 has it (and NumPy for an array of exponents; their values at zeros, infinities and NaN included) by
    multiplications, a division or a square root: exact or correctly rounded (3 and -1/2: two roundings,
    within 1.5 ulp), closer than pow's bound, at a tenth of its cost or less (``x ** 2`` in a variance).
    A base of 2 is exp2, within its bound, which is pow's or tighter, at a third of pow's cost."""
    if type(b) is Const and math.isfinite(float(b.value)):
        v = float(b.value)
        if v == 0:
            return const(1, t)
        if v == 1:
            return a
        if v == 2:
            return Mul(a, a)
        if v == 3:
            return Mul(Mul(a, a), a)
        if v == -1:
            return Div(const(1, t), a)
        if v in (0.5, -0.5):  # sqrt(-0) is -0 and sqrt(-inf) NaN, where pow has +0 and +inf (+inf, +0)
            root = Call("abs", (Call("sqrt", (a,), t),), t)
            value, at_minus_inf = (root, math.inf) if v > 0 else (Div(const(1, t), root), 0)
            return Select(EQ(a, const(-math.inf, t)), const(at_minus_inf, t), value)
    if type(a) is Const and float(a.value) == 2:  # 2 ** y: exp2 (the same values, C99's at inf and NaN)
        return Call("exp2", (b,), t)
    return Call("pow", (a, b), t)


def power(a: Operand, b: Operand) -> Expr:
    """``a ** b``: floats use pow; integers need a constant non-negative exponent."""
    a2, b2, t = _promote(a, b, "**")
    if t.is_float:
        return _pow(a2, b2, t)
    if t.is_bool:
        raise TypeError(f"{_show('**', a, b)}: arithmetic on bool operands")
    if not (isinstance(b2, Const) and b2.value >= 0):
        raise TypeError(f"{_show('**', a, b)}: an integer power needs a constant exponent >= 0; "
                        "cast the base to a float type for a variable exponent")
    out: Expr = const(1, t)
    for _ in range(int(b2.value)):
        out = a2 if isinstance(out, Const) and out.value == 1 else Mul(out, a2)
    return out


def affine_parts(e: Expr) -> tuple[list[tuple[Expr, int]], int]:
    """``e`` read as ``k + sum(c * atom)`` through + - negation and * by a constant: each atom (a node that
    is none of those) with its coefficient, in the order met, and ``k``. Iterative, so long sums do not
    recurse; the simplifier and the bounds share it."""
    parts: list[tuple[Expr, int]] = []
    k = 0
    stack = [(e, 1)]
    while stack:
        n, c = stack.pop()
        tp = type(n)
        if tp is Add:
            stack += ((n.b, c), (n.a, c))
        elif tp is Sub:
            stack += ((n.b, -c), (n.a, c))
        elif tp is Neg:
            stack.append((n.a, -c))
        elif tp is Mul and type(n.a) is Const:
            stack.append((n.b, c * int(n.a.value)))
        elif tp is Mul and type(n.b) is Const:
            stack.append((n.a, c * int(n.b.value)))
        elif tp is Const:
            k += c * int(n.value)
        else:
            parts.append((n, c))
    return parts, k


def known_residue(e: Expr, m: int, lets: dict | None = None, memo: dict | None = None) -> int | None:
    """``e`` modulo ``m`` (> 0) where it is decided: from its affine form (``16 * t + 3`` is 3 modulo 16, 8
    or 4), an atom whose coefficient is not a multiple of m by the atom's own residue: a min, max or
    select of two values of one residue, or a name bound in ``lets`` (name -> the values it is bound to
    anywhere) to values of one residue (``memo`` keeps names' residues between calls). None otherwise.
    Halide's modulus-remainder analysis, in part."""
    parts, k = affine_parts(e)
    memo = {} if memo is None else memo
    total = k
    for atom, c in parts:
        if c % m == 0:
            continue
        if isinstance(atom, (Min, Max, Select)):  # either side's value
            sides = (atom.t, atom.f) if isinstance(atom, Select) else (atom.a, atom.b)
            found = {known_residue(v, m, lets, memo) for v in sides}
        elif isinstance(atom, Var) and lets and atom.name in lets:
            key = (atom.name, m)
            if key not in memo:
                memo[key] = None  # (a name bound in terms of itself: not decided)
                found = {known_residue(v, m, lets, memo) for v in lets[atom.name]}
                memo[key] = found.pop() if len(found) == 1 else None
            found = {memo[key]}
        else:
            return None
        r = found.pop() if len(found) == 1 else None
        if r is None:
            return None
        total += c * r
    return total % m
