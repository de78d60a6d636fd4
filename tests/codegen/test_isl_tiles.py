"""The bounds isl generates for a split with full tiles separated from the rest: evaluated at every
extent, the whole tiles and the rest cover [0, E) exactly, each point once."""

import pytest

from ragsched.algebra import expr as E
from ragsched.codegen.isl_tiles import EXTENT, split_bounds
from ragsched.runtime.pyexpr import compile_function


@pytest.mark.parametrize("factor", [1, 2, 3, 4, 5, 8, 16, 64])
def test_whole_tiles_and_rest_cover_the_extent(factor):
    t = split_bounds(factor)
    fn = compile_function([t.whole, t.rest, t.rest_start], [EXTENT.name])
    for extent in range(0, 3 * factor + 2):
        whole, rest, start = fn(extent)
        points = [o * factor + n for o in range(whole) for n in range(factor)] + [start + n for n in range(rest)]
        assert points == list(range(extent)), (factor, extent, whole, rest, start)
        assert rest == 0 or start == whole * factor  # stage_loops starts the rest after the whole tiles


def test_templates_take_the_dims_extent():
    n = E.Var("n", EXTENT.dtype)
    t = split_bounds(8).at(n)
    assert EXTENT.name not in E.free_vars(t.whole) | E.free_vars(t.rest) and "n" in E.free_vars(t.rest)
