"""Storage layouts (``f.layout(rs.F2Layout ...)``): a Func's buffer stored in power-of-two tiles whose
elements an F2 layout orders (Morton, blocked, swizzled). Whatever the layout, the shape (not a multiple
of the tile), the compute site and the storage order, the result is the reference's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched import reference
from ragsched.algebra import f2

RNG = np.random.default_rng(3)


def _pipeline():
    x, y = rs.Var("x"), rs.Var("y")
    a = rs.Input("a", rs.float32, [rs.Size("H"), rs.Size("W")])
    g = rs.Func("g")
    g[y, x] = a[y, x] * 2 + rs.cast(rs.float32, x) - rs.cast(rs.float32, y)
    h = rs.Func("h")
    h[y, x] = g[y, x] + g[y, rs.max(x - 1, 0)] * 0.5 + g[rs.max(y - 1, 0), x] * 0.25
    return g, h


def _check(h, shape):
    image = RNG.random(shape, dtype=np.float32)
    got = h.compile()(a=image, out_shape=shape)
    (want,) = reference.evaluate(rs.Pipeline([h]).program(), {"a": image}, {"h": shape})
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


LAYOUTS = {
    "morton": lambda: f2.morton({"y": 4, "x": 8}),
    "column_major_tiles": lambda: f2.strided({"y": 8, "x": 4}, order=["y", "x"]),
    "xor_swizzle": lambda: f2.row_major({"y": 8, "x": 16}).compose(
        f2.xor_swizzle(8, 16, 2, 1, 8).rename({"row": "y", "col": "x"}, {"row": "y", "col": "x"}).invert()),
    "one_dim": lambda: f2.cute_swizzle(2, 1, 2, name="x").compose(f2.identity("x", 32)),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
@pytest.mark.parametrize("site", ["root", "tile", "storage_order"])
def test_a_func_stored_in_layout_tiles_computes_the_reference(name, site):
    g, h = _pipeline()
    layout = LAYOUTS[name]()
    g.layout(layout)
    if site == "tile":  # computed per tile of h: the region starts away from 0
        h.tile("y", "x", "yo", "xo", "yi", "xi", 8, 16, tail="guard").parallel("yo")
        h.split("xi", "xi", "xv", 8, tail="guard").vectorize("xv")
        g.compute_at(h, "xo")
    elif site == "storage_order":
        g.compute_root().reorder_storage("x", "y").split("x", "x", "xv", 4, tail="guard").vectorize("xv")
    assert "g.tstride" in h.lowered()  # the tiles' strides: the buffer is stored in tiles
    for shape in [(13, 21), (1, 1), (16, 32), (33, 7)]:
        _check(h, shape)


@st.composite
def bijective_layouts(draw):
    """A random bijection from an offset onto a tile of y and x (each 1 to 8 rows or columns)."""
    by, bx = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    n = by + bx
    cols = []
    while len(cols) < n:  # random columns, kept when independent of the ones before
        c = draw(st.integers(1, (1 << n) - 1)) if n else 0
        trial = f2.F2Layout._from_columns((("offset", len(cols) + 1),), (("y", by), ("x", bx)), cols + [c])
        if trial.is_injective():
            cols.append(c)
    return f2.F2Layout._from_columns((("offset", n),), (("y", by), ("x", bx)), cols)


@settings(max_examples=12, deadline=None)
@given(bijective_layouts(), st.integers(1, 20), st.integers(1, 20))
def test_random_bijective_layouts_compute_the_reference(layout, height, width):
    g, h = _pipeline()
    g.layout(layout)
    _check(h, (height, width))


def test_a_layout_survives_json_and_python():
    g, h = _pipeline()
    g.layout(f2.morton({"y": 4, "x": 4}))
    sched = rs.Pipeline([h]).schedule()
    assert rs.Schedule.from_json(sched.to_json()) == sched
    namespace: dict = {}
    exec(sched.to_python(), namespace)
    g2, h2 = _pipeline()
    namespace["apply_schedule"]({"g": g2, "h": h2})
    assert rs.Pipeline([h2]).schedule() == sched


def test_bad_layouts_are_refused_naming_the_func():
    g, h = _pipeline()
    with pytest.raises(TypeError, match="Func g: layout.. takes an rs.F2Layout"):
        g.layout("morton")
    with pytest.raises(ValueError, match="Func g: layout.. names 'z', which is not one of its pure Vars"):
        g.layout(f2.morton({"z": 4, "x": 4}))
    with pytest.raises(ValueError, match="needs a bijection"):
        g.layout(f2.F2Layout.from_bases({"offset": 4}, {"y": 2, "x": 2}, {"offset": [(1, 0), (1, 0)]}))
    with pytest.raises(ValueError, match="one input dim"):
        g.layout(f2.blocked({"y": 4, "x": 4}, [1, 1], [2, 2], [2, 2]))
    h.layout(f2.morton({"y": 4, "x": 4}))
    with pytest.raises(ValueError, match="Func h is an output of the pipeline.*layout"):
        h.compile()


def test_each_element_is_stored_where_the_layout_puts_it():
    """The address lowering gives g[y, x]: its tile's place in row-major order of tiles times the tile
    size, plus the Morton offset of (y, x) in the tile; so every slot of the buffer is used once."""
    from ragsched.algebra import expr as E
    from ragsched.codegen import ir
    from ragsched.codegen.lower import lower
    from ragsched.runtime.pyexpr import compile_function

    x, y = rs.Var("x"), rs.Var("y")
    height, width = rs.Size("H"), rs.Size("W")
    a = rs.Input("a", rs.float32, [height, width])
    g = rs.Func("g")
    g[y, x] = a[y, x]
    h = rs.Func("h", shape=[height, width])
    h[y, x] = g[y, x]
    morton = f2.morton({"y": 4, "x": 8})
    g.compute_root().layout(morton)
    pipe = rs.Pipeline([h])
    body = lower(pipe.program(), pipe.schedule(), specialize={"H": 8, "W": 16}).body
    (store,) = [s for s in ir.walk_stmts(body) if isinstance(s, ir.Store) and s.buffer == "g"]
    symbols = ["g.s0.y", "g.s0.x", "g.tmin.0", "g.tmin.1", "g.tstride.0"]  # tiles at multiples of their size
    assert E.free_vars(store.index) <= set(symbols)
    address = compile_function([store.index], symbols)
    inverse = morton.invert()
    seen = set()
    for yy in range(8):
        for xx in range(16):
            (got,) = address(yy, xx, 0, 0, 2)  # two tiles per row of tiles
            (moved,) = address(yy + 4, xx + 8, 1, 1, 2)  # the storage's first tile one further each way
            assert moved == got
            tile = (yy // 4) * 2 + xx // 8
            assert got == tile * 32 + inverse(y=yy % 4, x=xx % 8)["offset"]
            seen.add(got)
    assert seen == set(range(128))
