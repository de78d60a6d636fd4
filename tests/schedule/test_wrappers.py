"""``in_()`` (Halide's wrappers): a copy of an Input or Func that a schedule places, for one consumer or
all of them; the results equal ``reference.py``; schedules with wrappers survive JSON and Python round
trips; misuse is refused naming the Funcs."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.lang import schedulable
from ragsched.reference import run as reference_run
from ragsched.schedule import Schedule, Wrap


def matmul():
    M, K, N = rs.Size("M"), rs.Size("K"), rs.Size("N")
    i, j = rs.vars("i j")
    A = rs.Input("A", rs.float32, [M, K])
    B = rs.Input("B", rs.float32, [K, N])
    k = rs.RDom(0, K, name="k")
    prod = rs.Func("prod", dtype=rs.float32)
    prod[i, j] = 0.0
    prod[i, j] += A[i, k] * B[k, j]
    C = rs.Func("C", shape=[M, N])
    C[i, j] = prod[i, j] + B[i % K, j]  # B is read by C too: a wrapper for prod leaves C's read alone
    return C


def blur():
    y, x = rs.vars("y x")
    H, W = rs.Size("H"), rs.Size("W")
    img = rs.Input("img", rs.float32, [H + 2, W + 2])
    bx, by = rs.Func("bx"), rs.Func("by", shape=[H, W])
    bx[y, x] = img[y, x] + img[y, x + 1] + img[y, x + 2]
    by[y, x] = bx[y, x] + bx[y + 1, x] + bx[y + 2, x]
    return by


def _inputs(rng):
    return {"A": rng.uniform(-1, 1, (13, 11)).astype(np.float32),
            "B": rng.uniform(-1, 1, (11, 19)).astype(np.float32)}


def _check(C, inputs, out_shape=None, **kw):
    p = rs.Pipeline([C])
    got = p.compile(**kw)(**inputs, out_shape=out_shape)
    want = reference_run(C, out_shape=out_shape, **inputs)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return p


def test_packed_strip_for_one_consumer():
    C = matmul()
    funcs = schedulable(C)
    prod = funcs["prod"]
    C.split("j", "jo", "ji", 8).reorder("jo", "i", "ji").vectorize("ji", 4).parallel("jo")
    prod.compute_at(C, "i")
    packed = funcs["B"].in_(prod)
    assert packed.name == "B_in_prod" and funcs["B"].in_(prod) is packed
    packed.compute_at(C, "jo").vectorize("_1", 4)
    p = _check(C, _inputs(np.random.default_rng(1)), threads=2)
    nest = p.lowered()
    assert "allocate B_in_prod" in nest and "B_in_prod[" in nest
    # prod reads the copy; C still reads B itself
    assert "B[" in nest


def test_wrapping_a_func_for_all_consumers_and_inline():
    by = blur()
    funcs = schedulable(by)
    funcs["bx"].compute_root()
    copy = funcs["bx"].in_()
    assert copy.name == "bx_in" and [a.name for a in copy.args] == ["y", "x"]
    copy.compute_at(by, "y")
    rng = np.random.default_rng(2)
    _check(by, {"img": rng.uniform(0, 1, (9, 12)).astype(np.float32)}, out_shape=(7, 10))
    inlined = blur()
    schedulable(inlined)["img"].in_().compute_inline()
    _check(inlined, {"img": rng.uniform(0, 1, (9, 12)).astype(np.float32)}, out_shape=(7, 10))


def test_schedule_round_trips_through_json_and_python():
    C = matmul()
    funcs = schedulable(C)
    funcs["prod"].compute_at(C, "i")
    funcs["B"].in_(funcs["prod"]).compute_at(C, "i")
    sched = rs.Pipeline([C]).schedule()
    inputs = _inputs(np.random.default_rng(3))
    want = rs.Pipeline([C]).compile()(**inputs)

    again = matmul()
    Schedule.from_json(sched.to_json()).apply(again)
    assert rs.Pipeline([again]).schedule() == sched
    np.testing.assert_array_equal(rs.Pipeline([again]).compile()(**inputs), want)

    code = sched.to_python()
    assert "funcs['B_in_prod'] = funcs['B'].in_(funcs['prod'], name='B_in_prod')" in code
    third = matmul()
    namespace: dict = {}
    exec(code, namespace)
    namespace["apply_schedule"](schedulable(third))
    assert rs.Pipeline([third]).schedule() == sched


def test_misuse_is_refused_naming_the_funcs():
    C = matmul()
    funcs = schedulable(C)
    with pytest.raises(ValueError, match="Func prod does not read C"):
        C.in_(funcs["prod"])
    with pytest.raises(TypeError, match=r"A.in_\(\): the consumer must be a Func"):
        funcs["A"].in_("prod")
    with pytest.raises(ValueError, match="no definition to wrap"):
        rs.Func("empty").in_()
    bad = Schedule.from_json(Schedule((Wrap("Z_in", "Z", ""),)).to_json())
    with pytest.raises(ValueError, match="wraps 'Z', which is not in this pipeline"):
        bad.apply(matmul())
