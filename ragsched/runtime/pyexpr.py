"""Index expressions as Python functions, for the checks a Kernel makes before it calls generated code.

Sizes, extents and required regions are expressions of the call's scalars; they are turned into one
Python function per kernel (compiled once), with exact integer arithmetic and the IR's conventions
(floor division and modulo, ``x // 0 == 0``).
"""

from __future__ import annotations

from ..algebra import expr as E


def _fdiv(a, b):
    return 0 if b == 0 else a // b


def _fmod(a, b):
    return 0 if b == 0 else a % b


def _wrap(v, bits, signed):
    v &= (1 << bits) - 1
    return v - (1 << bits) if signed and v >> (bits - 1) else v


_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.LT: "<", E.LE: "<=", E.EQ: "==", E.NE: "!=",
        E.BitAnd: "&", E.BitOr: "|", E.BitXor: "^", E.Shl: "<<", E.Shr: ">>"}


def to_python(e: E.Expr, names: dict[str, str]) -> str:
    """Python source computing ``e``; ``names`` maps symbol names to Python identifiers."""
    def go(n: E.Expr) -> str:
        if isinstance(n, E.Const):
            return repr(n.value)
        if isinstance(n, E.Var):
            if n.name not in names:
                raise KeyError(n.name)
            return names[n.name]
        if type(n) in _OPS:
            return f"({go(n.a)} {_OPS[type(n)]} {go(n.b)})"
        if isinstance(n, E.And):
            return f"({go(n.a)} and {go(n.b)})"
        if isinstance(n, E.Or):
            return f"({go(n.a)} or {go(n.b)})"
        if isinstance(n, E.Not):
            return f"(not {go(n.a)})" if n.dtype.is_bool else f"(~{go(n.a)})"
        if isinstance(n, E.Neg):
            return f"(-{go(n.a)})"
        if isinstance(n, E.FloorDiv):
            return f"_fdiv({go(n.a)}, {go(n.b)})"
        if isinstance(n, E.Mod):
            return f"_fmod({go(n.a)}, {go(n.b)})"
        if isinstance(n, E.Min):
            return f"min({go(n.a)}, {go(n.b)})"
        if isinstance(n, E.Max):
            return f"max({go(n.a)}, {go(n.b)})"
        if isinstance(n, E.Select):
            return f"({go(n.t)} if {go(n.cond)} else {go(n.f)})"
        if isinstance(n, E.Cast):
            t = n.dtype
            if t.is_int and n.value.dtype.is_int:
                return f"_wrap({go(n.value)}, {t.bits}, {t.is_signed})"
            if t.is_bool:
                return f"bool({go(n.value)})"
            if t.is_float:
                return f"float({go(n.value)})"
        raise TypeError(f"cannot evaluate {n} before the call")

    return go(e)


def compile_function(exprs: list[E.Expr], symbols: list[str], lets=()):
    """``f(*values_of_symbols) -> tuple of the values of exprs``; ``lets`` ((name, expr) pairs, in
    order) are computed first and may be used by the later lets and by ``exprs``."""
    names = {s: f"a{k}" for k, s in enumerate(symbols)}
    params = ", ".join(names.values())
    lines = []
    for k, (name, e) in enumerate(lets):
        lines.append(f"    l{k} = {to_python(e, names)}")
        names[name] = f"l{k}"
    body = ", ".join(to_python(e, names) for e in exprs)
    lines.append(f"    return ({body}{',' if len(exprs) == 1 else ''})")
    src = f"def _f({params}):\n" + "\n".join(lines) + "\n"
    scope = {"_fdiv": _fdiv, "_fmod": _fmod, "_wrap": _wrap}
    exec(compile(src, "<ragsched checks>", "exec"), scope)  # noqa: S102 - generated from our own IR
    return scope["_f"]
