"""F2 layouts on the GPU: a producer staged per block in shared memory and read transposed, its tile stored
row-major, XOR-swizzled (Triton's layout, as the inverse map from (y, x) to the offset) or in Morton order;
each computes the reference in the emulator (every access checked for bounds and races) and compiles
for sm_90 with the tile's 4 KiB of shared memory. The layout changes the addresses, so the swizzled
column read has no bank conflicts where the row-major one has 32 ways (counted by ``bank_conflicts``)."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.algebra import f2
from ragsched.codegen.cuda.nvrtc import compile_cuda

T = 32
LAYOUTS = {
    "row_major": lambda: f2.row_major({"y": T, "x": T}),
    "xor_swizzle": lambda: f2.row_major({"y": T, "x": T}).compose(
        f2.xor_swizzle(T, T, 1, 1, T).rename({"row": "y", "col": "x"}, {"row": "y", "col": "x"}).invert()),
    "morton": lambda: f2.morton({"y": T, "x": T}),
}


def transpose(layout):
    x, y = rs.Var("x"), rs.Var("y")
    inp = rs.Input("inp", rs.float32, 2)
    f = rs.Func("f")
    f[y, x] = inp[y, x] * 2.0  # rows of the input, coalesced
    g = rs.Func("g")
    g[y, x] = f[x, y] + 1.0  # the tile read by columns
    g.gpu_tile(y, x, "yo", "xo", "yi", "xi", T, T)  # shifted tiles: the staged region is T x T everywhere
    f.compute_at(g, "xo").gpu_threads(y, x).store_in(rs.MemoryType.Shared).layout(layout)
    return g


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_shared_tile_in_each_layout_computes_the_reference(name):
    kern = transpose(LAYOUTS[name]()).compile(target="cuda", device="emulate")
    a = np.random.default_rng(1).random((40, 50), dtype=np.float32)
    np.testing.assert_allclose(kern(inp=a, out_shape=(50, 40)), a.T * 2 + 1, rtol=1e-6)
    (res,) = compile_cuda(kern.source).resources.values()
    assert res.shared_bytes == T * T * 4 and res.spill_stores == 0
    assert "__shared__ float f[1024];" in kern.source and "__syncthreads();" in kern.source


def test_the_swizzle_removes_the_bank_conflicts_of_a_column_read():
    """A warp reads column c of the tile (32 rows, one per lane): the offsets the layouts give."""
    lanes = f2.F2Layout.from_bases({"lane": T}, {"y": T, "x": T}, {"lane": [(1 << k, 0) for k in range(5)]})
    for name, conflicts in (("row_major", 31), ("xor_swizzle", 0)):
        store = LAYOUTS[name]().invert()  # (y, x) -> offset
        assert f2.bank_conflicts(lanes.compose(store), 32) == conflicts, name


def test_the_emulator_counts_the_bank_conflicts_the_layout_removes():
    """The cost model's count of shared-memory wavefronts for the transposing stage: the consumer reads
    its tile by columns, 32-way conflicted in row-major storage, conflict-free swizzled."""
    from ragsched.autosched.gpu import estimate

    a = np.random.default_rng(2).random((32, 32), dtype=np.float32)
    counts = {}
    for name in ("row_major", "xor_swizzle"):
        kern = transpose(LAYOUTS[name]()).compile(target="cuda", device="emulate")
        _, figures, out = estimate(kern, {"inp": a, "out_shape": (32, 32)})
        np.testing.assert_allclose(out, a.T * 2 + 1, rtol=1e-6)
        counts[name] = figures["shared_wavefronts"] / figures["shared_requests"]
    assert counts["xor_swizzle"] == 1 and counts["row_major"] > 8
