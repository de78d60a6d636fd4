"""Text listings of the loop IR: ``f.lowered()`` (everything) and ``print_loop_nest`` (loops only).

Statements are read by their class names and fields, without importing ``ir`` (whose ``__str__`` calls
this module), as ``algebra/printer`` reads expressions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..algebra.printer import expr_to_str

if TYPE_CHECKING:
    from . import ir


def stmt_to_str(s: ir.Stmt, indent: int = 0) -> str:
    pad = "  " * indent
    kind = type(s).__name__
    if kind == "Block":
        return "".join(stmt_to_str(t, indent) for t in s.stmts)
    if kind == "For":
        hi = f"{expr_to_str(s.min)} + {expr_to_str(s.extent, 9)}" if not _is_zero(s.min) else expr_to_str(s.extent)
        head = f"{pad}{s.kind.value} {s.var} in [{expr_to_str(s.min)}, {hi}):\n"
        return head + stmt_to_str(s.body, indent + 1)
    if kind == "Store":
        return f"{pad}{s.buffer}[{expr_to_str(s.index)}] = {expr_to_str(s.value)}\n"
    if kind == "Allocate":
        return (f"{pad}allocate {s.buffer}: {s.dtype}[{expr_to_str(s.size)}]\n"
                + stmt_to_str(s.body, indent))
    if kind == "LetStmt":
        return f"{pad}let {s.name} = {expr_to_str(s.value)}\n" + stmt_to_str(s.body, indent)
    if kind == "IfThenElse":
        out = f"{pad}if {expr_to_str(s.cond)}:\n" + stmt_to_str(s.then, indent + 1)
        if s.otherwise is not None:
            out += f"{pad}else:\n" + stmt_to_str(s.otherwise, indent + 1)
        return out
    if kind == "Produce":
        return f"{pad}produce {s.name}:\n" + stmt_to_str(s.body, indent + 1)
    if kind == "Provide":
        return f"{pad}{s.func}({', '.join(expr_to_str(a) for a in s.args)}) = {expr_to_str(s.value)}\n"
    if kind == "Realize":
        box = ", ".join(f"[{expr_to_str(m)}, +{expr_to_str(e)})" for m, e in s.bounds)
        fold = f" folded {list(s.fold)}" if any(s.fold) else ""
        order = f" storage order {list(s.order)}" if s.order else ""
        order += f" layout {s.layout}" if s.layout is not None else ""
        return f"{pad}realize {s.func}: {s.dtype}{{{box}}}{fold}{order}\n" + stmt_to_str(s.body, indent)
    if kind == "Barrier":
        return f"{pad}barrier\n"
    if kind == "Launch":
        return f"{pad}launch {s.kernel} on grid ({', '.join(expr_to_str(g) for g in s.grid)})\n"
    return f"{pad}{s!r}\n"


def _is_zero(e) -> bool:
    return getattr(e, "value", None) == 0 and not getattr(e.dtype, "is_float", True)


def loop_nest(s: ir.Stmt, indent: int = 0) -> str:
    """Only the structure: what is produced where, and the loops around each store."""
    pad = "  " * indent
    kind = type(s).__name__
    if kind == "Block":
        return "".join(loop_nest(t, indent) for t in s.stmts)
    if kind == "For":
        hi = expr_to_str(s.extent)
        return f"{pad}{s.kind.value} {s.var} in [{expr_to_str(s.min)}, +{hi}):\n" + loop_nest(s.body, indent + 1)
    if kind == "Produce":
        return f"{pad}produce {s.name}:\n" + loop_nest(s.body, indent + 1)
    if kind == "Allocate":
        return f"{pad}allocate {s.buffer}[{expr_to_str(s.size)}]\n" + loop_nest(s.body, indent)
    if kind == "LetStmt":
        return loop_nest(s.body, indent)
    if kind == "IfThenElse":
        out = f"{pad}if {expr_to_str(s.cond)}:\n" + loop_nest(s.then, indent + 1)
        if s.otherwise is not None:
            out += f"{pad}else:\n" + loop_nest(s.otherwise, indent + 1)
        return out
    if kind == "Store":
        return f"{pad}{s.buffer}[...] = ...\n"
    if kind == "Provide":
        return f"{pad}{s.func}(...) = ...\n"
    if kind == "Realize":
        return f"{pad}realize {s.func}\n" + loop_nest(s.body, indent)
    return ""
