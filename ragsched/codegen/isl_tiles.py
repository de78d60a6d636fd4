"""Whole tiles and the rest of a split loop (``tail="split"``), as isl's AST generator bounds them.

A loop of extent E split by a factor f is the isl schedule ``[E] -> { S[i] -> [i // f, i % f] : 0 <= i < E }``
with the full tiles isolated (isl's ``isolate`` option): isl then emits one loop over the whole tiles
and a separate loop (or, for at most one point, a test) over the rest. The bounds of those two loops,
read off isl's AST, are expressions of the parameter E: templates that ``stage_loops`` instantiates with
the dim's extent. For a ragged dim that extent is the entry's own length, bound inside the entry's loop:
E is the parameter of an inner set, never a parameter of a set over the entries (isl would hoist
conditions on it out of the entry loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import islpy as isl

from ..algebra import expr as E
from ..algebra import types as T

I32 = T.INDEX
EXTENT = E.Var("isl.E", I32)  # the parameter E of the templates


@dataclass(frozen=True)
class SplitBounds:
    """Iterations of the loop over whole tiles, and of the rest, for an extent ``EXTENT`` >= 0; and where
    the rest starts (isl's own expression, equal to ``whole * factor``)."""

    whole: E.Expr
    rest: E.Expr
    rest_start: E.Expr

    def at(self, extent: E.Expr) -> SplitBounds:
        sub = {EXTENT.name: extent}
        return SplitBounds(*(E.substitute(e, sub) for e in (self.whole, self.rest, self.rest_start)))


@cache
def split_bounds(factor: int) -> SplitBounds:
    """The bounds isl generates for a split by ``factor`` with full tiles separated from the rest."""
    f = factor
    domain = isl.UnionSet("[E] -> { S[i] : 0 <= i < E }")
    tiles = isl.MultiUnionPwAff(f"[E] -> [{{ S[i] -> [(floor(i/{f}))] }}, {{ S[i] -> [(i mod {f})] }}]")
    band = isl.Schedule.from_domain(domain).get_root().child(0).insert_partial_schedule(tiles)
    band = band.band_set_ast_build_options(
        isl.UnionSet(f"[E] -> {{ isolate[[] -> [o, n]] : 0 <= n < {f} and {f} * o + {f - 1} < E }}"))
    ast = isl.AstBuild.from_context(isl.Set("[E] -> { : E >= 0 }")).node_from_schedule(band.get_schedule())
    parts = _statements(ast)
    whole_loop = parts[0]
    if whole_loop.get_type() != isl.ast_node_type.for_:
        raise RuntimeError(f"isl: unexpected AST for a split by {f}:\n{ast.to_C_str()}")
    whole = _upper(whole_loop)
    if len(parts) == 1:  # no rest (a factor of 1)
        return SplitBounds(whole, E.const(0, I32), EXTENT)
    rest_node = parts[1]
    if rest_node.get_type() == isl.ast_node_type.for_:
        c = rest_node.for_get_iterator().id_get_id().get_name()
        start = E.substitute(_user_arg(rest_node.for_get_body()), {c: E.const(0, I32)})
        return SplitBounds(whole, _upper(rest_node), start)
    if rest_node.get_type() == isl.ast_node_type.if_:
        # a rest of at most one point is a test, not a loop: the rest runs from the whole tiles to E (a
        # count that bounds inference can follow, where isl's test of E's parity it cannot)
        return SplitBounds(whole, E.sub(EXTENT, E.mul(whole, f)), _user_arg(rest_node.if_get_then_node()))
    raise RuntimeError(f"isl: unexpected AST for a split by {f}:\n{ast.to_C_str()}")


def _statements(node) -> list:
    if node.get_type() == isl.ast_node_type.block:
        children = node.block_get_children()
        return [children.get_at(k) for k in range(children.n_ast_node())]
    return [node]


def _upper(loop) -> E.Expr:
    """The iteration count of an isl loop ``for (c = 0; c < x or c <= x; c += 1)``."""
    init, cond = _expr(loop.for_get_init()), loop.for_get_cond()
    if init != E.const(0, I32) or loop.for_get_inc().get_val().to_python() != 1:
        raise RuntimeError(f"isl: unexpected loop {loop.to_C_str()}")
    op = cond.op_get_type()
    bound = _expr(cond.op_get_arg(1))
    if op == isl.ast_expr_op_type.lt:
        return bound
    if op == isl.ast_expr_op_type.le:
        return E.add(bound, 1)
    raise RuntimeError(f"isl: unexpected loop condition {cond.to_C_str()}")


def _user_arg(node) -> E.Expr:
    call = node.user_get_expr()
    return _expr(call.op_get_arg(1))


_BINARY = {
    isl.ast_expr_op_type.add: E.add, isl.ast_expr_op_type.sub: E.sub, isl.ast_expr_op_type.mul: E.mul,
    # isl's pdiv_q / pdiv_r divide a non-negative value (E >= 0 in the context): floor and mod agree
    isl.ast_expr_op_type.pdiv_q: E.floordiv, isl.ast_expr_op_type.fdiv_q: E.floordiv,
    isl.ast_expr_op_type.div: E.floordiv, isl.ast_expr_op_type.pdiv_r: E.mod,
    isl.ast_expr_op_type.zdiv_r: E.mod, isl.ast_expr_op_type.min: E.minimum,
    isl.ast_expr_op_type.max: E.maximum, isl.ast_expr_op_type.lt: E.lt, isl.ast_expr_op_type.le: E.le,
    isl.ast_expr_op_type.gt: E.gt, isl.ast_expr_op_type.ge: E.ge, isl.ast_expr_op_type.eq: E.eq,
}


def _expr(x) -> E.Expr:
    """An isl AST expression over E and loop iterators as an index expression."""
    kind = x.get_type()
    if kind == isl.ast_expr_type.int:
        return E.const(x.get_val().to_python(), I32)
    if kind == isl.ast_expr_type.id:
        name = x.get_id().get_name()
        return EXTENT if name == "E" else E.Var(name, I32)
    op = x.op_get_type()
    if op == isl.ast_expr_op_type.minus:
        return E.sub(E.const(0, I32), _expr(x.op_get_arg(0)))
    if op in _BINARY:
        return _BINARY[op](_expr(x.op_get_arg(0)), _expr(x.op_get_arg(1)))
    raise RuntimeError(f"isl: unexpected expression {x.to_C_str()}")
