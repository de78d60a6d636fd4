"""The rules on small pipelines written for these tests (no bundled or held-out pipeline): what each rule
reads from the analysis (extents, reads, operations) and the schedule it gives, which computes what
ragsched.reference does."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched import reference
from ragsched import schedule as S
from ragsched.autosched.heuristic import Machine, estimate_extents, heuristic
from ragsched.autosched.space import analyze
from ragsched.runtime.compare import matches

MACHINE = Machine(2, 512 * 1024)


def _rules(out, inputs, cpu_target, machine=MACHINE):
    program = rs.Pipeline([out]).program()
    infos = analyze(program, cpu_target.natural_vector_size)
    return heuristic(infos, estimate_extents(program, inputs), machine)


def _computes_the_reference(make, inputs, cpu_target, machine=MACHINE):
    sched, _ = _rules(make(), inputs, cpu_target, machine)
    out = make()
    sched.apply([out])
    got = out.compile(threads=2)(**inputs)
    want = reference.run(make(), **inputs)
    assert matches(got, want, 1e-5)[0]


def _image():
    """Sizes H and W, Vars y and x, and a float32 Input img of [H, W]."""
    H, W = rs.Size("H"), rs.Size("W")
    return (H, W, *rs.vars("y x"), rs.Input("img", rs.float32, [H, W]))


def _column_scan():
    C, H, W = rs.Size("C"), rs.Size("H"), rs.Size("W")
    c, y, x = rs.vars("c y x")
    img = rs.clamp_edge(rs.Input("img", rs.float32, [C, H, W]))
    s = rs.Func("s")
    s[c, y, x] = img[c, y, x]
    r = rs.RDom(1, H - 1, name="r")
    s[c, r, x] = s[c, r - 1, x] * 0.5 + img[c, r, x]
    out = rs.Func("out", shape=[C, H, W])
    out[c, y, x] = s[c, y, x] + s[c, y, x + 1]  # not point by point: s is stored at root
    return out


def test_a_scan_down_few_rows_runs_its_column_strips_in_parallel(cpu_target):
    """A scan's rows are its pure Vars but the scanned one: here the 3 channels, too few to share among
    cores; its columns are many, so their strips run outermost, in parallel, vectorized."""
    inputs = {"img": np.random.default_rng(0).random((3, 50, 700), dtype=np.float32)}
    sched, params = _rules(_column_scan(), inputs, cpu_target)
    assert params["s.s1.columns_first"] is True and params["s.s1.tile_y"] == 1
    assert S.Parallel("s", 1, "x") in sched
    assert any(isinstance(d, S.Vectorize) and d.func == "s" and d.stage == 1 for d in sched)
    # many rows (channels): the rows' tiles run in parallel, as before
    _, many = _rules(_column_scan(), {"img": np.zeros((64, 50, 700), np.float32)}, cpu_target)
    assert many.get("s.s1.columns_first", False) is False and many["s.s1.tile_y"] == 4
    _computes_the_reference(_column_scan, inputs, cpu_target)


def _nhwc():
    N, H, W, C = rs.Size("N"), rs.Size("H"), rs.Size("W"), rs.Size("C")
    n, y, x, c = rs.vars("n y x c")
    img = rs.Input("img", rs.float32, [N, H, W, C])
    e = rs.clamp_edge(img)
    blur = rs.Func("blur")
    blur[n, y, x, c] = (e[n, y - 1, x, c] + e[n, y, x, c] + e[n, y + 1, x, c]) * (1 / 3)
    out = rs.Func("out", shape=[N, H, W, C])
    out[n, y, x, c] = blur[n, y, x - 1, c] + blur[n, y, x + 1, c]
    return out


def test_many_points_of_the_other_vars_run_outermost(cpu_target):
    """[N, H, W, C]: the rules' rows are W and columns C; the other Vars (N, H: hundreds of points) run
    outermost in storage order, where a few (colour planes) run inside the rows."""
    inputs = {"img": np.random.default_rng(1).random((2, 40, 30, 16), dtype=np.float32)}
    sched, params = _rules(_nhwc(), inputs, cpu_target)
    assert params["out.s0.others"] == "outside"
    assert any(isinstance(d, S.Reorder) and d.func == "out" and d.vars[:2] == ("n", "y") for d in sched)
    _, few = _rules(_nhwc(), {"img": np.zeros((1, 3, 30, 16), np.float32)}, cpu_target)
    assert few["out.s0.others"] == "inside"
    _computes_the_reference(_nhwc, inputs, cpu_target)



def _volume(across: bool):
    """Two 7-point stencil steps over a volume [D, H, W] (``across``: the steps read the planes next to
    their own, a 3D stencil; else a 5-point stencil within each plane)."""
    D, H, W = rs.Size("D"), rs.Size("H"), rs.Size("W")
    z, y, x = rs.vars("z y x")
    prev = rs.clamp_edge(rs.Input("vol", rs.float32, [D, H, W]))
    for s in range(2):
        f = rs.Func(f"step{s}")
        near = prev[z, y - 1, x] + prev[z, y + 1, x] + prev[z, y, x - 1] + prev[z, y, x + 1]
        if across:
            near = near + prev[z - 1, y, x] + prev[z + 1, y, x]
        f[z, y, x] = prev[z, y, x] * 0.4 + near * 0.1
        prev = f
    out = rs.Func("out", shape=[D, H, W])
    out[z, y, x] = prev[z, y, x]
    return out


def test_planes_that_a_sliding_stencil_reads_across_run_inside_the_rows(cpu_target):
    """A volume's 40 planes are more than run inside the rows as colour planes do; but where the steps
    sliding down the rows read the planes next to their own, the planes run inside too: outermost, each
    plane would compute its producers' rows again for each plane their windows span. A stencil within
    each plane keeps them outermost."""
    inputs = {"vol": np.random.default_rng(3).random((40, 24, 40), dtype=np.float32)}
    sched, params = _rules(_volume(True), inputs, cpu_target)
    assert params["step0.compute"] == "slide" and params["out.s0.others"] == "inside"
    assert any(isinstance(d, S.Reorder) and d.func == "out" and d.vars[-2:] == ("z", "x") for d in sched)
    _, flat = _rules(_volume(False), inputs, cpu_target)
    assert flat["step0.compute"] == "slide" and flat["out.s0.others"] == "outside"
    _computes_the_reference(lambda: _volume(True), inputs, cpu_target)


def _gathered_copy():
    H, W, y, x, img = _image()
    wide = rs.Func("wide")
    wide[y, x] = rs.cast(rs.float64, img[y, x])  # one load, one operation
    out = rs.Func("out", shape=[H, W // 2])
    r = rs.RDom(0, 3, name="r")
    out[y, x] = rs.cast(rs.float32, rs.sum(wide[y, rs.min(2 * x + r, W - 1)]))
    return out


def test_a_copy_read_at_other_than_constant_offsets_is_inlined(cpu_target):
    """A cast of one load, read at 2x + r (not the reader's Var plus a constant): inlined, it costs one
    operation per read, less than storing it and loading it back."""
    inputs = {"img": np.random.default_rng(2).random((20, 31), dtype=np.float32)}
    sched, params = _rules(_gathered_copy(), inputs, cpu_target)
    assert params["wide.compute"] == "inline" and S.ComputeInline("wide") in sched
    _computes_the_reference(_gathered_copy, inputs, cpu_target)


def test_an_image_narrower_than_a_vector_gets_guarded_tiles(cpu_target):
    """A shifted tile needs as many columns as it has: on an output narrower than a vector the rules
    guard their tiles instead (the 'auto' tail's shift was refused when the kernel ran)."""
    inputs = {"img": np.random.default_rng(5).random((20, 9), dtype=np.float32)}  # the output: 4 columns
    sched, params = _rules(_gathered_copy(), inputs, cpu_target)
    assert params["out.s0.tail"] == "guard"
    _computes_the_reference(_gathered_copy, inputs, cpu_target)


def _pointwise_sum():
    H, W, y, x, img = _image()
    e = rs.clamp_edge(img)
    acc = rs.Func("acc")
    acc[y, x] = 0.0
    r = rs.RDom(-2, 5, name="r")
    acc[y, x] += e[y + r, x] * e[y, x + r]
    out = rs.Func("out", shape=[H, W])
    out[y, x] = rs.sqrt(rs.abs(acc[y, x])) * 2.0 + acc[y, x]
    return out


def test_a_reduction_read_point_by_point_is_computed_per_tile_of_its_reader(cpu_target):
    inputs = {"img": np.random.default_rng(3).random((300, 200), dtype=np.float32)}
    sched, params = _rules(_pointwise_sum(), inputs, cpu_target)
    assert params["acc.compute"] == "at_inner"
    assert any(isinstance(d, S.ComputeAt) and d.func == "acc" and d.consumer == "out" for d in sched)
    _computes_the_reference(_pointwise_sum, inputs, cpu_target)


def _clamped_reads():
    H, W, y, x, img = _image()
    curve = rs.Func("curve")
    curve[y, x] = rs.pow(img[y, x] * 0.9 + 0.05, 2.2)  # costly: not inlined into nine reads
    edge = rs.Func("edge")
    edge[y, x] = curve[rs.clamp(y, 0, H - 1), rs.clamp(x, 0, W - 1)]
    out = rs.Func("out", shape=[H, W])
    out[y, x] = sum(edge[y + dy, x + dx] for dy in (-1, 0, 1) for dx in (-1, 0, 1)) * (1 / 9)
    return out


def test_a_func_read_through_a_boundary_clamp_slides_like_a_stencil(cpu_target):
    """Reads at clamp(y + dy, 0, H - 1) are the stencil's offsets dy but at the edges: the costly Func
    is computed per row of the output's strips (a sliding window), not stored whole at root."""
    inputs = {"img": np.random.default_rng(4).random((200, 150), dtype=np.float32)}
    sched, params = _rules(_clamped_reads(), inputs, cpu_target)
    assert params["curve.compute"] == "slide" and params["edge.compute"] == "inline"
    _computes_the_reference(_clamped_reads, inputs, cpu_target)


def _patch_distances():
    """A small non-local-means-like chain: per offset (dy, dx) the squared difference summed over 3
    channels (an RDom), box-summed over a 3-row then a 3-column patch (RDoms), weighted and summed over
    the offsets (an RDom over 9 points) into the output."""
    C, H, W = rs.Size("C"), rs.Size("H"), rs.Size("W")
    c, y, x, dy, dx = rs.vars("c y x dy dx")
    img = rs.clamp_edge(rs.Input("img", rs.float32, [C, H, W]))
    ch = rs.RDom(0, 3, name="ch")
    d = rs.Func("d", dtype=rs.float32)
    d[dy, dx, y, x] = 0.0
    diff = img[ch, y, x] - img[ch, y + dy, x + dx]
    d[dy, dx, y, x] += diff * diff
    py = rs.RDom(-1, 3, name="py")
    by = rs.Func("by", dtype=rs.float32)
    by[dy, dx, y, x] = 0.0
    by[dy, dx, y, x] += d[dy, dx, y + py, x]
    px = rs.RDom(-1, 3, name="px")
    bx = rs.Func("bx", dtype=rs.float32)
    bx[dy, dx, y, x] = 0.0
    bx[dy, dx, y, x] += by[dy, dx, y, x + px]
    s = rs.RDom((-1, 3), (-1, 3), name="s")
    acc = rs.Func("acc", dtype=rs.float32)
    acc[y, x] = 0.0
    acc[y, x] += rs.exp(-bx[s[0], s[1], y, x]) * img[0, y + s[0], x + s[1]]
    out = rs.Func("out", shape=[H, W])
    out[y, x] = acc[y, x] * np.float32(0.5)
    return out


def test_an_update_reads_a_small_constant_rdom_at_constant_offsets(cpu_target):
    """An update over an RDom of constant bounds reads at one offset per point of it (a channel picked
    out counts 0, as a constant index does); a reduction over a Size (a matrix product's k) reads
    irregularly."""
    infos = {f.name: f for f in analyze(rs.Pipeline([_patch_distances()]).program(), cpu_target.natural_vector_size)}
    (read,) = infos["d"].reads
    assert read.consumer == "by" and read.offsets == tuple((0, 0, k, 0) for k in (-1, 0, 1))
    (read,) = infos["by"].reads
    assert read.offsets == tuple((0, 0, 0, k) for k in (-1, 0, 1))
    (read,) = infos["bx"].reads
    assert read.consumer == "acc" and read.offsets == ((0, 0, 0, 0),)
    N = rs.Size("N")
    i, j = rs.vars("i j")
    a = rs.Func("a")
    a[i, j] = rs.Input("m", rs.float32, [N, N])[i, j] * 2.0
    k = rs.RDom(0, N, name="k")
    prod = rs.Func("prod", shape=[N, N])
    prod[i, j] = 0.0
    prod[i, j] += a[i, k] * a[k, j]
    infos = {f.name: f for f in analyze(rs.Pipeline([prod]).program(), cpu_target.natural_vector_size)}
    assert infos["a"].reads[0].offsets is None


@pytest.mark.parametrize("l1", [32 * 1024, 256 * 1024])
def test_reductions_read_through_a_window_are_computed_per_tile_of_their_reader(cpu_target, l1):
    """The box sums (reductions read at constant offsets along the rows and columns) and the sum read
    point by point are computed per tile of the output, not stored whole at root. Where the 9 offsets'
    slices of a 16 x 4-vector tile take more than half of L1 (32 KB), the box sums are computed one offset
    at a time, per iteration of the weighted sum's loop over the offsets, the tile that one; else (256 KB)
    the tile holds their values for all 9 offsets, with the windows' halo, in half the L2 cache, and is at
    least two vectors wide (a reduction's register tile)."""
    from ragsched.autosched.heuristic import SLICE_TILE

    inputs = {"img": np.random.default_rng(5).random((3, 300, 260), dtype=np.float32)}
    machine = Machine(MACHINE.cores, MACHINE.l2_bytes, l1)
    sched, params = _rules(_patch_distances(), inputs, cpu_target, machine)
    lanes = cpu_target.natural_vector_size(rs.float32)
    ty, tx = params["out.s0.tile_y"], params["out.s0.tile_x"]
    per_offset = l1 == 32 * 1024
    assert per_offset == (9 * SLICE_TILE[0] * SLICE_TILE[1] * lanes * 4 > l1 // 2)
    for name in ("d", "by", "bx", "acc"):
        want = "in_update" if per_offset and name != "acc" else "at_inner"
        assert params[f"{name}.compute"] == want, name
        assert any(isinstance(d, S.ComputeAt) and d.func == name and
                   d.consumer == ("acc.update(0)" if want == "in_update" else "out") for d in sched), name
    if per_offset:
        assert (ty, tx) == (params["acc.s1.tile_y"], params["acc.s1.tile_x"]) == SLICE_TILE
    else:
        assert tx >= 2
        assert 4 * (9 * 3 + 1) * (ty + 2) * (tx * lanes + 2) <= MACHINE.l2_bytes // 2
    _computes_the_reference(_patch_distances, inputs, cpu_target, machine)


def _channels(select_on_c: bool):
    """A [3, H, W] output of a select per channel (or of arithmetic on c alone)."""
    H, W = rs.Size("H"), rs.Size("W")
    c, y, x = rs.vars("c y x")
    img = rs.Input("img", rs.float32, [H, W])
    out = rs.Func("out", shape=[3, H, W])
    v = img[y, x]
    out[c, y, x] = rs.select(c == 0, v * 2.0, rs.select(c == 1, v + 1.0, v * v)) if select_on_c else \
        v * rs.cast(rs.float32, c)
    return out


def test_a_few_channels_a_definition_selects_on_are_unrolled(cpu_target):
    """Unrolled, each copy's selects fold to one channel's arithmetic; bound to the declared 3 channels
    (an out= with more would be refused). Without a select on c there is nothing to fold: not unrolled."""
    inputs = {"img": np.random.default_rng(0).random((40, 70), dtype=np.float32)}
    sched, params = _rules(_channels(True), inputs, cpu_target)
    assert params["out.s0.unroll_dim.c"] is True
    assert S.Bound("out", "c", 0, 3) in sched and S.Unroll("out", 0, "c") in sched
    assert not any(isinstance(d, S.Parallel) and d.var == "c" for d in sched)
    _computes_the_reference(lambda: _channels(True), inputs, cpu_target)
    sched, params = _rules(_channels(False), inputs, cpu_target)
    assert not any(k.startswith("out.s0.unroll_dim") for k in params)
    assert not any(isinstance(d, S.Unroll) and d.var == "c" for d in sched)


def _taps_table(taps_func_cost: str):
    """Each output column x sums 3 taps of its row, at columns from x // 2, weighted by ``w[k, x]``: a
    table of taps computed from the indices alone (a resampler's filter), read by every row and channel
    of the image at [r, x]. ``taps_func_cost``: "div" (weights with a division) or "add" (an add and a
    cast: two operations)."""
    C, H, W = rs.Size("C"), rs.Size("H"), rs.Size("W")
    c, y, x, k = rs.vars("c y x k")
    img = rs.clamp_edge(rs.Input("img", rs.float32, [C, H, W]))
    w = rs.Func("w")
    t = rs.cast(rs.float32, k) - rs.cast(rs.float32, x % 2) * 0.5
    w[k, x] = 1.0 / (1.0 + t * t) if taps_func_cost == "div" else rs.cast(rs.float32, k + x)
    r = rs.RDom(0, 3, name="r")
    acc = rs.Func("acc", dtype=rs.float32)
    acc[c, y, x] = 0.0
    acc[c, y, x] += w[r, x] * img[c, y, x // 2 + r - 1]
    out = rs.Func("out", shape=[C, H, W])
    out[c, y, x] = acc[c, y, x]
    return out


@pytest.mark.parametrize("channels, rows", [(3, 40), (1, 40), (3, 2)])
def test_a_table_read_again_by_every_row_is_stored_unless_the_rows_are_few(cpu_target, channels, rows):
    """Inlined, ``w[k, x]`` (a division) is computed again at every row and channel of the sum that reads
    it at [r, x]: stored where those are more points than a few channels (``INSIDE_POINTS``), inlined
    where they are not (2 rows of 3 channels); a table of two operations is inlined however often it is
    read again (inlined, it repeats them; stored, its loads cost as much). Each schedule computes the reference."""
    from ragsched.autosched.heuristic import INSIDE_POINTS

    inputs = {"img": np.random.default_rng(8).random((channels, rows, 70), dtype=np.float32)}
    for cost, stored in (("div", channels * rows > INSIDE_POINTS), ("add", False)):
        sched, params = _rules(_taps_table(cost), inputs, cpu_target)
        assert (params["w.compute"] != "inline") == stored, (cost, params["w.compute"])
        assert (S.ComputeInline("w") in sched) == (not stored)
        _computes_the_reference(lambda cost=cost: _taps_table(cost), inputs, cpu_target)


def _weights_of_offsets(op: str):
    """A Func read at three offsets (a 3-tap stencil over it): ``op`` is "exp" (a math function) or "mul"."""
    H, W, y, x, img = _image()
    e = rs.clamp_edge(img)
    g = rs.Func("g")
    g[y, x] = rs.exp(e[y, x]) if op == "exp" else e[y, x] * 2.0
    out = rs.Func("out", shape=[H, W])
    out[y, x] = g[y, x - 1] + g[y, x] + g[y, x + 1]
    return out


def test_a_math_function_read_at_several_offsets_is_stored_where_a_multiply_is_inlined(cpu_target):
    """What inlining repeats is weighed by what each operation costs (``space._op_cost``): an exp read at 3
    offsets would be computed 3 times per point (about 40 vector instructions for the 2 loads saved), so
    it is stored; a multiply is inlined. Both compute the reference."""
    from ragsched.autosched.space import _op_cost

    assert _op_cost(rs.exp(rs.Var("x") + 1.0).node) > 4 * _op_cost((rs.Var("x") * 2.0 + 1.0).node)
    inputs = {"img": np.random.default_rng(9).random((30, 90), dtype=np.float32)}
    for op, inlined in (("exp", False), ("mul", True)):
        sched, params = _rules(_weights_of_offsets(op), inputs, cpu_target)
        assert (params["g.compute"] == "inline") == inlined, (op, params["g.compute"])
        _computes_the_reference(lambda op=op: _weights_of_offsets(op), inputs, cpu_target)
