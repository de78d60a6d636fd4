"""Random integer expressions of the loop variable, vectorized (ramp algebra, vector ops, predicated
tail), against the exact evaluator of ``tests/algebra/strategies.py``."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir

from ..algebra.strategies import NAME_TYPE, Overflow, bool_exprs, evaluate, int_exprs, small_ints
from .helpers import Compiled, has_vectors, split_loop

N, WIDTH = 19, 8
LOOP = "x.loop"


def _compile_and_check(e: E.Expr, values: dict) -> None:
    assume(not any(isinstance(n, E.FuncRef) for n in E.walk(e)))  # lowered code has no FuncRefs
    lanes = {}
    for x in range(N):
        try:
            lanes[x] = evaluate(e, {**values, "x": x, "X": x})
        except Overflow:
            assume(False)
    loop_var = E.Var(LOOP, T.ADDRESS)
    body_expr = E.substitute(e, {"x": E.Cast(loop_var, T.int32), "X": loop_var})
    params = {n: NAME_TYPE[n] for n in E.free_vars(body_expr) if n != LOOP}

    def store(idx):
        return ir.LetStmt(LOOP, idx, ir.Store("out", E.Var(LOOP, T.ADDRESS), body_expr))

    k = Compiled(split_loop(N, "x", WIDTH, ir.ForKind.VECTORIZED, store), {"out": e.dtype}, params)
    assert has_vectors(k.body) or not (E.free_vars(e) & {"x", "X"})
    out = np.zeros(N, e.dtype.np)
    assert k(out=out, **{n: values[n] for n in params}) == 0
    want = np.array([lanes[x] for x in range(N)]).astype(e.dtype.np)
    np.testing.assert_array_equal(out, want, err_msg=str(e))


_values = st.fixed_dictionaries({n: small_ints(t) for n, t in NAME_TYPE.items() if n not in ("x", "X")})
_settings = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_settings
@given(e=int_exprs(T.int32), values=_values)
def test_random_int32_expressions(e, values):
    _compile_and_check(e, values)


@_settings
@given(e=st.one_of(int_exprs(T.int64), int_exprs(T.uint8), bool_exprs(T.int32)), values=_values)
def test_random_int64_uint8_bool_expressions(e, values):
    _compile_and_check(e, values)
