"""Reductions over a vectorized RDom: an update ``f[b] = op(f[b], e)`` (op + * min max) may vectorize its
RVar; the lanes are combined by ``VectorReduce`` and, across the outer part of the split RVar, kept in
a vector accumulator. Checked against the NumPy reference over random ops, types, widths, tails and
(ragged) lengths, and against the lowered code: the reduction is vector code, not a serial fallback."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.codegen import ir
from ragsched.codegen.lower import lower
from ragsched.reference import run

OPS = {"add": lambda a, c: a + c, "mul": lambda a, c: a * c, "min": rs.min, "max": rs.max}
START = {"add": 0.5, "mul": 1.0, "min": 3.0, "max": -3.0}  # not op's identity: the stored value counts
DTYPES = {"float32": rs.float32, "float64": rs.float64, "int32": rs.int32, "uint8": rs.uint8}


def _pipeline(op: str, dtype, ragged: bool):
    """out[b] = op over r of x[b, r], started from START[op]: r < lens[b] (ragged) or r < N."""
    B, b = rs.Size("B"), rs.Var("b")
    if ragged:
        lens = rs.Input("lens", rs.int32, [B])
        x = rs.Input("x", dtype, [B, rs.Ragged("L", lens)])
        r = rs.RDom(0, lens[b], name="r")
    else:
        N = rs.Size("N")
        x = rs.Input("x", dtype, [B, N])
        r = rs.RDom(0, N, name="r")
    f = rs.Func("f", shape=[B], dtype=dtype)
    f[b] = rs.cast(dtype, START[op])
    f[b] = OPS[op](f[b], x[b, r])
    out = rs.Func("out", shape=[B])
    out[b] = f[b]
    return out, f


def _inputs(op: str, dtype: str, ragged: bool, lengths: list[int], seed: int, nan: bool):
    rng = np.random.default_rng(seed)
    n = max(lengths, default=0)

    def values(k: int) -> np.ndarray:
        if dtype.startswith("float"):  # products of [0.75, 1.25] stay finite; sums are of one sign
            v = rng.uniform(0.75, 1.25, k) if op == "mul" else rng.uniform(-4, 4, k)
            if nan and k and op in ("min", "max"):
                v[rng.integers(k)] = np.nan  # min and max propagate NaN, whichever lane holds it
            return v.astype(dtype)
        return rng.integers(0, 256 if dtype == "uint8" else 1000, k).astype(dtype)

    if ragged:
        return {"x": rs.RaggedArray.from_list([values(k) for k in lengths], ragged_axes=[0]),
                "lens": np.array(lengths, np.int32)}
    return {"x": np.stack([values(n) for _ in lengths]) if lengths else np.zeros((0, 0), dtype)}


def _vectorized(f, width: int, tail: str):
    f.compute_root()
    f.update().split("r.0", "ro", "ri", width, tail=tail).vectorize("ri")


def _reduces(pipe) -> tuple[bool, bool]:
    """(whether the lowered code combines lanes, whether it keeps them in an accumulator)."""
    body = lower(pipe.program(), pipe.schedule()).body
    nodes = [n for s in ir.walk_stmts(body) for e in ir.exprs_of(s) for n in E.walk(e)]
    lanes = any(isinstance(s, ir.Allocate) and s.buffer.startswith("f.lanes") for s in ir.walk_stmts(body))
    return any(isinstance(n, E.VectorReduce) for n in nodes), lanes


@settings(deadline=None, max_examples=40)
@given(op=st.sampled_from(sorted(OPS)), dtype=st.sampled_from(sorted(DTYPES)), ragged=st.booleans(),
       lengths=st.lists(st.integers(0, 45), min_size=1, max_size=5), width=st.integers(2, 17),
       tail=st.sampled_from(["guard", "split", "auto"]), seed=st.integers(0, 2**16), nan=st.booleans())
def test_vectorized_reductions_compute_the_reference(op, dtype, ragged, lengths, width, tail, seed, nan):
    if not ragged:
        lengths = [max(lengths)] * len(lengths)
    inputs = _inputs(op, dtype, ragged, lengths, seed, nan)
    out, f = _pipeline(op, DTYPES[dtype], ragged)
    want = run(out, **inputs)
    _vectorized(f, width, tail)
    got = rs.Pipeline([out]).compile()(**inputs)
    if dtype.startswith("float"):  # a sum or product reassociated: a few roundings apart
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("tail", ["guard", "split"])
@pytest.mark.parametrize("op", sorted(OPS))
def test_the_lanes_are_combined_in_vector_code(op, tail):
    """Not left serial: the lanes combined by VectorReduce, across the whole RVar in an accumulator (a
    split tail is a loop of its own, which stays serial)."""
    out, f = _pipeline(op, rs.float32, ragged=True)
    _vectorized(f, 8, tail)
    assert _reduces(rs.Pipeline([out])) == (True, True)


@pytest.mark.parametrize("update", ["scaled", "reads itself"])
def test_an_update_that_is_not_op_of_itself_and_an_operand_is_refused(update):
    """f[b] = f[b] * 0.5 + x[b, r] depends on the order of r, and f[b] = f[b] + f[b] * x[b, r] reads f in
    its operand: vectorizing r is refused, naming the form that may be."""
    B, b = rs.Size("B"), rs.Var("b")
    x = rs.Input("x", rs.float32, [B, 8])
    r = rs.RDom(0, 8, name="r")
    f = rs.Func("f", shape=[B], dtype=rs.float32)
    f[b] = 1.0
    f[b] = f[b] * 0.5 + x[b, r] if update == "scaled" else f[b] + f[b] * x[b, r]
    with pytest.raises(ValueError, match=r"cannot be vectorized \(only an update f\[x\] = op\(f\[x\], e\)"):
        f.update().vectorize("r.0")


@pytest.mark.parametrize("op", ["min", "max", "and", "or"])
def test_bool_reductions_give_the_off_lanes_their_identity(op):
    """A row's all/any (min, max, &, |) over a width that leaves a guarded rest: the lanes past the row's
    end must not decide it (min's and and's identity is true, max's and or's false)."""
    B, b = rs.Size("B"), rs.Var("b")
    x = rs.Input("x", rs.float32, [B, 37])
    r = rs.RDom(0, 37, name="r")
    combine = {"min": rs.min, "max": rs.max, "and": lambda a, c: a & c, "or": lambda a, c: a | c}[op]
    f = rs.Func("f", shape=[B], dtype=rs.bool)
    f[b] = op in ("min", "and")
    f[b] = combine(f[b], x[b, r] > 0.0)
    out = rs.Func("out", shape=[B])
    out[b] = f[b]
    xs = np.random.default_rng(1).standard_normal((6, 37)).astype(np.float32)
    xs[0], xs[1] = 1.0, -1.0  # all positive, none
    want = run(out, x=xs)
    f.compute_root()
    f.update().split("r.0", "ro", "ri", 8, tail="guard").vectorize("ri")
    assert _reduces(rs.Pipeline([out]))[0]
    np.testing.assert_array_equal(rs.Pipeline([out]).compile()(x=xs), want)
