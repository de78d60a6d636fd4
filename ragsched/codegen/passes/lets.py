"""Substitute lets whose values are trivial (a constant or a single symbol) into their bodies.

Lowering binds every region and buffer symbol with a let; most of them turn out to be constants or
another symbol. Substituting those keeps listings readable and lets the simplifier see through them.
"""

from __future__ import annotations

from ...algebra import expr as E
from .. import ir


def substitute_trivial_lets(s: ir.Stmt, env: dict | None = None) -> ir.Stmt:
    env = env or {}
    sub = (lambda e: E.substitute(e, env)) if env else (lambda e: e)
    if isinstance(s, ir.LetStmt):
        value = sub(s.value)
        if isinstance(value, (E.Const, E.Var)):
            v = value if value.dtype == s.value.dtype else E.Cast(value, s.value.dtype)
            return substitute_trivial_lets(s.body, {**env, s.name: v})
        inner = {k: v for k, v in env.items() if k != s.name}
        return ir.LetStmt(s.name, value, substitute_trivial_lets(s.body, inner))
    if isinstance(s, ir.For):
        inner = {k: v for k, v in env.items() if k != s.var}
        return ir.For(s.var, sub(s.min), sub(s.extent), s.kind, substitute_trivial_lets(s.body, inner), s.owns)
    if isinstance(s, ir.Block):
        return ir.block(*(substitute_trivial_lets(t, env) for t in s.stmts))
    if isinstance(s, ir.IfThenElse):
        return ir.IfThenElse(sub(s.cond), substitute_trivial_lets(s.then, env),
                             None if s.otherwise is None else substitute_trivial_lets(s.otherwise, env))
    if isinstance(s, ir.Store):
        return ir.Store(s.buffer, sub(s.index), sub(s.value), s.point)
    if isinstance(s, ir.Allocate):
        return ir.Allocate(s.buffer, s.dtype, sub(s.size), substitute_trivial_lets(s.body, env))
    if isinstance(s, ir.Produce):
        return ir.Produce(s.name, substitute_trivial_lets(s.body, env))
    raise TypeError(f"substitute_trivial_lets: unexpected {type(s).__name__}")
