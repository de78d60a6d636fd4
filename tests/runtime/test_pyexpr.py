"""The checks' Python functions (runtime/pyexpr): deep and shared index expressions compile (Python's
parser refuses more than 200 nested parentheses) and compute what the IR means."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.runtime.pyexpr import compile_function

I32 = T.int32


def _chain(depth: int, a: E.Expr, b: E.Expr) -> E.Expr:
    """min(max(... a - k ..., b - 100) + k, b) ... nested ``depth`` deep (see ``_value``)."""
    e = a
    for k in range(depth):
        c = E.Const(k % 7, I32)
        e = E.Min(E.Add(e, c), b) if k % 2 else E.Max(E.Sub(e, c), E.Sub(b, E.Const(100, I32)))
    return e


def _value(depth: int, x: int, y: int) -> int:
    v = x
    for k in range(depth):
        v = min(v + k % 7, y) if k % 2 else max(v - k % 7, y - 100)
    return v


@settings(deadline=None, max_examples=10)
@given(depth=st.integers(150, 700), x=st.integers(-1000, 1000), y=st.integers(-1000, 1000))
def test_deeply_nested_expressions_compile_and_evaluate(depth, x, y):
    a, b = E.Var("a", I32), E.Var("b", I32)
    e = _chain(depth, a, b)
    shared = E.Add(e, e)  # one node twice: rendered once
    fn = compile_function([e, shared], ["a", "b"])
    assert fn(x, y) == (_value(depth, x, y), 2 * _value(depth, x, y))
