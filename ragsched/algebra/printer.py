"""Readable infix text for expressions (used in error messages and in lowered code listings)."""

from __future__ import annotations

from . import expr as E

_PREC = {
    E.Or: 1, E.And: 2, E.LT: 4, E.LE: 4, E.EQ: 4, E.NE: 4, E.BitOr: 5, E.BitXor: 6, E.BitAnd: 7,
    E.Shl: 8, E.Shr: 8, E.Add: 9, E.Sub: 9, E.Mul: 10, E.Div: 10, E.FloorDiv: 10, E.Mod: 10,
}


def _const(c: E.Const) -> str:
    v = c.value
    if c.dtype.is_float:
        s = repr(float(v))
        return s if c.dtype.name == "float64" else f"{s}f" if c.dtype.name == "float32" else f"{s}h"
    return str(v)


def expr_to_str(e: E.Expr, prec: int = 0) -> str:
    if isinstance(e, E.Const):
        return _const(e)
    if isinstance(e, E.Var):
        return e.name
    if type(e) in _PREC:
        p = _PREC[type(e)]
        # left-associative: the right operand of a same-precedence operator needs parentheses
        s = f"{expr_to_str(e.a, p)} {e.symbol} {expr_to_str(e.b, p + 1)}"
        return f"({s})" if p < prec else s
    if isinstance(e, (E.Min, E.Max)):
        return f"{e.symbol}({expr_to_str(e.a)}, {expr_to_str(e.b)})"
    if isinstance(e, E.Neg):
        return f"-{expr_to_str(e.a, 11)}"
    if isinstance(e, E.Not):
        return f"{'!' if e.a.dtype.is_bool else '~'}{expr_to_str(e.a, 11)}"
    if isinstance(e, E.Cast):
        return f"{e.dtype}({expr_to_str(e.value)})"
    if isinstance(e, E.Select):
        return f"select({expr_to_str(e.cond)}, {expr_to_str(e.t)}, {expr_to_str(e.f)})"
    if isinstance(e, E.Call):
        return f"{e.name}({', '.join(expr_to_str(a) for a in e.args)})"
    if isinstance(e, E.FuncRef):
        return f"{e.name}[{', '.join(expr_to_str(a) for a in e.args)}]"
    if isinstance(e, E.Load):
        return f"{e.buffer}[{expr_to_str(e.index)}]"
    if isinstance(e, E.Ramp):
        return f"ramp({expr_to_str(e.base)}, {expr_to_str(e.stride)}, {e.lanes})"
    if isinstance(e, E.Broadcast):
        return f"x{e.lanes}({expr_to_str(e.value)})"
    if isinstance(e, E.Let):
        return f"(let {e.name} = {expr_to_str(e.value)} in {expr_to_str(e.body)})"
    return repr(e)
