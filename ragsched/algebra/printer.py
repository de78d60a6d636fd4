"""Readable infix text for expressions (used in error messages and in lowered code listings).

It reads nodes by their class names and fields, without importing ``expr`` (whose ``__str__`` calls it):
the printer is a view of the nodes, not a dependency of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import expr as E

_PREC = {
    "Or": 1, "And": 2, "LT": 4, "LE": 4, "EQ": 4, "NE": 4, "BitOr": 5, "BitXor": 6, "BitAnd": 7,
    "Shl": 8, "Shr": 8, "Add": 9, "Sub": 9, "Mul": 10, "Div": 10, "FloorDiv": 10, "Mod": 10,
}


def _const(c: E.Const) -> str:
    v = c.value
    if c.dtype.is_float:
        s = repr(float(v))
        return s if c.dtype.name == "float64" else f"{s}f" if c.dtype.name == "float32" else f"{s}h"
    return str(v)


def expr_to_str(e: E.Expr, prec: int = 0) -> str:
    kind = type(e).__name__
    if kind == "Const":
        return _const(e)
    if kind == "Var":
        return e.name
    if kind in _PREC:
        p = _PREC[kind]
        # left-associative: the right operand of a same-precedence operator needs parentheses
        s = f"{expr_to_str(e.a, p)} {e.symbol} {expr_to_str(e.b, p + 1)}"
        return f"({s})" if p < prec else s
    if kind in ("Min", "Max"):
        return f"{e.symbol}({expr_to_str(e.a)}, {expr_to_str(e.b)})"
    if kind == "Neg":
        return f"-{expr_to_str(e.a, 11)}"
    if kind == "Not":
        return f"{'!' if e.a.dtype.is_bool else '~'}{expr_to_str(e.a, 11)}"
    if kind == "Cast":
        return f"{e.dtype}({expr_to_str(e.value)})"
    if kind == "Select":
        return f"select({expr_to_str(e.cond)}, {expr_to_str(e.t)}, {expr_to_str(e.f)})"
    if kind == "Call":
        return f"{e.name}({', '.join(expr_to_str(a) for a in e.args)})"
    if kind == "FuncRef":
        return f"{e.name}[{', '.join(expr_to_str(a) for a in e.args)}]"
    if kind == "Load":
        return f"{e.buffer}[{expr_to_str(e.index)}]"
    if kind == "Ramp":
        return f"ramp({expr_to_str(e.base)}, {expr_to_str(e.stride)}, {e.lanes})"
    if kind == "Broadcast":
        return f"x{e.lanes}({expr_to_str(e.value)})"
    if kind == "Shuffle":
        return f"shuffle({', '.join(expr_to_str(a) for a in e.args)}; {', '.join(map(str, e.indices))})"
    if kind == "VectorReduce":
        return f"{e.op}_lanes({expr_to_str(e.value)})"
    if kind == "Let":
        return f"(let {e.name} = {expr_to_str(e.value)} in {expr_to_str(e.body)})"
    return repr(e)
