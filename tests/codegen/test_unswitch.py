"""Loop unswitching (``passes/unswitch.py``): a guard that decides the whole body of a small loop and that
no iteration changes is tested once outside it; guards that vary, read what the loop writes, or decide
only part of the body stay where they are."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import ragsched as rs
import ragsched.codegen.lower as lower_module
from ragsched.algebra import expr as E
from ragsched.algebra import types as T
from ragsched.codegen import ir
from ragsched.codegen.llvm.machine import natural_vector_size
from ragsched.codegen.passes.unswitch import MAX_STORES, unswitch_loops
from ragsched.pipeline_file import load
from ragsched.runtime.compare import matches

ROOT = Path(__file__).resolve().parents[2]

I64 = T.INDEX


def _v(name: str) -> E.Var:
    return E.Var(name, I64)


def _store(buffer: str, index, value=None) -> ir.Store:
    return ir.Store(buffer, index, E.const(1.0, T.float32) if value is None else value)


def _loop(var: str, body: ir.Stmt, extent: int = 8, kind=ir.ForKind.SERIAL) -> ir.For:
    return ir.For(var, E.const(0, I64), E.const(extent, I64), kind, body)


def test_a_guard_of_the_whole_body_leaves_the_loop_with_a_copy_per_branch():
    cond = E.le(E.const(6, I64), _v("n"))
    loop = _loop("k", ir.Block((ir.IfThenElse(cond, _store("a", _v("k")), _store("b", _v("k"))),
                                ir.IfThenElse(cond, _store("c", _v("k"))))))
    out = unswitch_loops(loop)
    assert isinstance(out, ir.IfThenElse) and out.cond == cond
    assert out.then == _loop("k", ir.Block((_store("a", _v("k")), _store("c", _v("k")))))
    assert out.otherwise == _loop("k", _store("b", _v("k")))


def test_a_guard_hoisted_out_of_an_inner_loop_leaves_the_outer_one_too():
    cond = E.le(E.const(2, I64), _v("n"))
    nest = _loop("k", _loop("i", ir.IfThenElse(cond, _store("a", _v("i"))), kind=ir.ForKind.UNROLLED))
    out = unswitch_loops(nest)
    assert isinstance(out, ir.IfThenElse) and out.otherwise is None
    assert out.then == _loop("k", _loop("i", _store("a", _v("i")), kind=ir.ForKind.UNROLLED))


def test_guards_that_vary_or_read_what_the_loop_writes_or_decide_part_of_it_stay():
    varying = _loop("k", ir.IfThenElse(E.le(_v("k"), _v("n")), _store("a", _v("k"))))
    let_bound = _loop("k", ir.LetStmt("m", E.add(_v("k"), E.const(1, I64)),
                                      ir.IfThenElse(E.le(_v("m"), _v("n")), _store("a", _v("k")))))
    reads_own = _loop("k", ir.IfThenElse(E.lt(E.const(0, I64), E.Load("a", E.const(0, I64), I64)),
                                         _store("a", _v("k"), E.const(2, I64))))
    partial = _loop("k", ir.Block((_store("b", _v("k")), ir.IfThenElse(E.le(E.const(6, I64), _v("n")),
                                                                      _store("a", _v("k"))))))
    vector = _loop("k", ir.IfThenElse(E.LE(E.Ramp(_v("n"), E.const(2, I64), 8), E.Ramp(_v("m"), E.const(1, I64), 8)),
                                      _store("a", _v("k"))))  # (no one lane decides every lane)
    too_big = _loop("k", ir.IfThenElse(E.le(E.const(6, I64), _v("n")),
                                       _loop("i", _store("a", _v("i")), MAX_STORES + 1, ir.ForKind.UNROLLED)))
    for loop in (varying, let_bound, reads_own, partial, vector, too_big):
        assert unswitch_loops(loop) == loop


def test_a_vector_tails_guard_leaves_the_loop_tested_on_the_lane_that_decides_it():
    # every lane of ramp(m, 1, 8) <= n holds where the last does: the loop runs unmasked then, and as it
    # was (its guard tested in it, lanes masked) otherwise
    for stride, cmp, lane in ((1, E.LE, 7), (-2, E.LT, 0)):  # (falling: the first lane decides)
        ramp = E.Ramp(_v("m"), E.const(stride, I64), 8)
        loop = _loop("k", ir.IfThenElse(cmp(ramp, E.Broadcast(_v("n"), 8)), _store("a", _v("k"))))
        out = unswitch_loops(loop)
        assert isinstance(out, ir.IfThenElse)
        assert out.cond == cmp(E.Add(_v("m"), E.Const(lane * stride, I64)), _v("n"))
        assert out.then == _loop("k", _store("a", _v("k")))
        assert out.otherwise == loop
    guard = E.LE(E.Ramp(_v("k"), E.const(1, I64), 8), E.Broadcast(_v("n"), 8))
    inner = _loop("i", ir.IfThenElse(guard, _store("a", _v("i"))))
    assert unswitch_loops(_loop("k", inner)).body.cond.dtype.lanes == 1  # out of i, not out of k (it reads k)


def test_a_vector_tail_inside_serial_loops_computes_the_reference_with_its_guard_outside_them():
    c, y, x, xo, xi = (rs.Var(n) for n in ("c", "y", "x", "xo", "xi"))
    a = rs.Input("a", rs.float32, 3)
    f = rs.Func("tail_inside")
    f[c, y, x] = a[c, y, x] * 2.0 + 1.0
    lanes = natural_vector_size(T.float32)
    f.split(x, xo, xi, lanes, tail="guard").vectorize(xi).reorder(xo, y, c, xi)
    text = f.lowered()
    scalar_guard = text.index(f"+ {lanes - 1} <= ")
    assert scalar_guard < text.index("for tail_inside.s0.y")  # tested per xo, outside y and c
    kern = f.compile()
    for width in (lanes - 1, 2 * lanes, 3 * lanes + 5):
        data = np.random.default_rng(width).random((3, 5, width), dtype=np.float32)
        np.testing.assert_array_equal(kern(a=data, out_shape=data.shape), data * np.float32(2) + np.float32(1))


SCHEDULE = Path(__file__).parent / "attention_versioned_tiles.json"


def test_attention_tiles_versioned_inside_their_reduction_loop_compute_the_reference(monkeypatch):
    # a tuned schedule's Q K^T tile (6 rows x 2 vectors, min(6, rows left in the entry)) is versioned
    # inside its k loop; with the guards hoisted out of k, entries shorter than a tile (lengths 0, 1, 3,
    # 5) and the last row of a longer one (7) still compute the reference (the schedule: the AVX2 file
    # tuned in search space 13, kept here since that file became one per length class)
    pf = load(ROOT / "pipelines" / "attention.py")
    inputs = pf.inputs("small")
    kern = pf.pipeline(SCHEDULE).compile(threads=2)
    ok, worst = matches(kern(**inputs), pf.reference(inputs), 1e-4)
    assert ok, worst
    monkeypatch.setattr(lower_module, "unswitch_loops", lambda s: s)
    unhoisted = pf.pipeline(SCHEDULE).lowered()
    assert unhoisted != kern.lowered  # the pass had guards to hoist here
