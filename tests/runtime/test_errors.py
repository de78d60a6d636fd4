"""Every error a user can cause is a clear ValueError/TypeError naming the Func, Var or argument,
raised before generated code runs."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs


def blur():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    bx = rs.Func("blur_x")
    bx[y, x] = (img[y, x] + img[y, x + 1] + img[y, x + 2]) / 3
    by = rs.Func("blur_y", shape=[H - 2, W - 2])
    by[y, x] = (bx[y, x] + bx[y + 1, x] + bx[y + 2, x]) / 3
    return by


@pytest.fixture(scope="module")
def blur_kernel():
    return blur().compile()


# --------------------------------------------------------------------------- malformed definitions
def test_pure_var_on_right_not_on_left():
    x, y = rs.vars("x y")
    img = rs.Input("img", rs.float32, 2)
    f = rs.Func("f")
    with pytest.raises(ValueError, match=r"Func f.*Var y.*f\[x\] = img\[x, y\]"):
        f[x] = img[x, y]


def test_func_used_before_defined():
    x = rs.Var("x")
    g, h = rs.Func("g"), rs.Func("h")
    with pytest.raises(ValueError, match="Func h is used before it is defined"):
        g[x] = h[x] + 1
    with pytest.raises(ValueError, match="Func h is used before it is defined"):
        g[x] = h[x]


def test_type_errors_name_the_expression():
    x = rs.Var("x")
    img = rs.Input("img", rs.float32, 1)
    with pytest.raises(TypeError, match=r"img\[x\] & 1.5"):
        img[x] & 1.5
    with pytest.raises(TypeError, match=r"index 0 of img must be an integer"):
        img[img[x]]
    f = rs.Func("f", dtype=rs.int32)
    with pytest.raises(TypeError, match=r"Func f has type int32.*float32"):
        f[x] = img[x]
    with pytest.raises(TypeError, match="truth value"):
        bool(x < 3)


def test_update_rules():
    x, y = rs.vars("x y")
    r = rs.RDom(0, 10)
    f = rs.Func("f")
    f[x] = x
    with pytest.raises(ValueError, match=r"pure Var x must appear unchanged at position 0"):
        f[x] = f[x + 1]
    with pytest.raises(ValueError, match="Var y"):
        f[x] = f[x] + y
    g = rs.Func("g")
    with pytest.raises(ValueError, match="pure"):
        g[x] = r + x
    with pytest.raises(ValueError, match="distinct Vars"):
        g[x + 1] = 3


def test_func_rank_mismatch():
    x, y = rs.vars("x y")
    f = rs.Func("f", shape=[3, 4])
    with pytest.raises(ValueError, match="Func f is declared with 2"):
        f[x] = x
    g = rs.Func("g")
    g[x, y] = x + y
    with pytest.raises(ValueError, match="Func g has 2 dimension"):
        g[x]


def test_update_after_use_is_refused():
    x = rs.Var("x")
    f, g = rs.Func("f"), rs.Func("g")
    f[x] = x
    g[x] = f[x] * 2
    with pytest.raises(ValueError, match="Func f cannot get a new definition: it is already used by g"):
        f[x] = f[x] + 1


def test_duplicate_names_in_pipeline():
    x = rs.Var("x")
    a, b = rs.Func("same"), rs.Func("same")
    a[x] = x
    b[x] = a[x] + 1
    with pytest.raises(ValueError, match="named 'same'"):
        rs.Pipeline([b]).program()


def test_data_dependent_read_needs_a_boundary_condition():
    x = rs.Var("x")
    N = rs.Size("N")
    lut = rs.Input("lut", rs.float32, [N])
    idx = rs.Input("idx", rs.int32, [N])
    f = rs.Func("f", shape=[N])
    f[x] = lut[idx[x]]
    k = f.compile()
    with pytest.raises(ValueError, match=r"reads lut along dimension 0 from index -2147483648 .*boundary"):
        k(lut=np.zeros(4, np.float32), idx=np.zeros(4, np.int32))
    g = rs.Func("g", shape=[N])
    g[x] = rs.clamp_edge(lut)[idx[x]]
    got = g.compile()(lut=np.arange(4, dtype=np.float32), idx=np.array([-5, 1, 3, 9], np.int32))
    np.testing.assert_array_equal(got, [0, 1, 3, 3])


# --------------------------------------------------------------------------------- call checks
def test_missing_and_unexpected_arguments(blur_kernel):
    with pytest.raises(TypeError, match="missing argument.*img"):
        blur_kernel()
    with pytest.raises(TypeError, match="unexpected argument.*imgg"):
        blur_kernel(img=np.zeros((4, 4), np.float32), imgg=1)


def test_wrong_dtype_and_rank(blur_kernel):
    with pytest.raises(TypeError, match="argument img has dtype float64, expected float32"):
        blur_kernel(img=np.zeros((4, 4)))
    with pytest.raises(ValueError, match="argument img has 1 dimension"):
        blur_kernel(img=np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="argument img must be a NumPy array"):
        blur_kernel(img="nope")


def test_sizes_that_disagree():
    N = rs.Size("N")
    x = rs.Var("x")
    a, b = rs.Input("a", rs.float32, [N]), rs.Input("b", rs.float32, [N])
    f = rs.Func("f", shape=[N])
    f[x] = a[x] + b[x]
    k = f.compile()
    with pytest.raises(ValueError, match=r"Size N disagrees: a.shape\[0\] is 4 but b.shape\[0\] is 5"):
        k(a=np.zeros(4, np.float32), b=np.zeros(5, np.float32))


def test_read_outside_input(blur_kernel):
    img = np.zeros((10, 10), np.float32)
    with pytest.raises(ValueError, match=r"reads img along dimension 0 from index 0 to 11.*extent 10"):
        blur_kernel(img=img, out_shape=(10, 8))


def test_a_read_check_passed_once_does_not_hide_a_later_failure():
    """Regions checked and passed are remembered by the sizes they were checked at (a call repeats the
    same sizes): other sizes are checked anew, before and after, and a passing call stays passing."""
    k = blur().compile()
    img = np.ones((10, 10), np.float32)
    for _ in range(2):
        np.testing.assert_allclose(k(img=img, out_shape=(8, 8)), 1.0, rtol=1e-6)
        with pytest.raises(ValueError, match=r"reads img along dimension 0 from index 0 to 11.*extent 10"):
            k(img=img, out_shape=(10, 8))
        with pytest.raises(ValueError, match=r"reads img along dimension 1"):
            k(img=img, out_shape=(8, 9))


def test_output_shape_required():
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, 1)
    f = rs.Func("f")
    f[x] = a[x] * 2
    k = f.compile()
    with pytest.raises(ValueError, match="output f has no declared shape"):
        k(a=np.zeros(3, np.float32))
    np.testing.assert_array_equal(k(a=np.arange(3, dtype=np.float32), out_shape=(3,)), [0, 2, 4])


def test_bad_out(blur_kernel):
    img = np.zeros((6, 7), np.float32)
    with pytest.raises(TypeError, match="out= for blur_y has dtype float64"):
        blur_kernel(img=img, out=np.zeros((4, 5)))
    with pytest.raises(ValueError, match="out= for blur_y has 1 dimension"):
        blur_kernel(img=img, out=np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="reads img along dimension 1"):
        blur_kernel(img=img, out=np.zeros((4, 6), np.float32))


def test_param_checks():
    x = rs.Var("x")
    a = rs.Input("a", rs.float32, 1)
    n = rs.Param("n", rs.int32)
    f = rs.Func("f")
    f[x] = a[x] * n
    k = f.compile()
    arr = np.ones(3, np.float32)
    with pytest.raises(TypeError, match="Param n is int32, got float"):
        k(a=arr, n=1.5, out_shape=(3,))
    with pytest.raises(ValueError, match="Param n = 4294967296 is out of range for int32"):
        k(a=arr, n=2**32, out_shape=(3,))
    np.testing.assert_array_equal(k(a=arr, n=3, out_shape=(3,)), [3, 3, 3])


def test_specialize_mismatch():
    by = blur()
    k = by.compile(specialize={"W": 12})
    img = np.random.rand(8, 12).astype(np.float32)
    assert k(img=img).shape == (6, 10)
    with pytest.raises(ValueError, match=r"specialize=\{'W': 12\}"):
        k(img=np.zeros((8, 13), np.float32))
    with pytest.raises(ValueError, match="not Sizes of this pipeline"):
        by.compile(specialize={"Q": 3})


def test_data_dependent_func_region_is_refused():
    n = rs.Size("N")
    x = rs.Var("x")
    idx = rs.Input("idx", rs.int32, [n])
    r = rs.RDom(0, n)
    f = rs.Func("f")
    f[x] = x * 10
    f[idx[r]] = f[idx[r]] + 1
    with pytest.raises(ValueError, match=r"cannot bound Func f along dimension 0.*rs.clamp"):
        f.compile()


def test_splitting_the_whole_tiles_of_a_split_tail_again_is_refused():
    """tail='split' runs whole tiles, then the rest in a loop of its own; splitting the whole tiles' loop
    again would compute the rest as a whole tile (past the output): refused when scheduled."""
    by = blur()
    by.split("x", "x", "xi", 16, tail="split")
    with pytest.raises(ValueError, match=r"blur_y.*'x'.*tail='split'"):
        by.split("x", "x", "xt", 4)
        rs.Pipeline([by]).lowered()


def test_an_out_beyond_an_outputs_bound_is_refused():
    """An output computed into storage of its own (its bound(c, 0, 3)) is copied out: an out= with a
    fourth channel would have copied values from past that storage. A ValueError names it; an out= within
    the bound gets its channels."""
    H, W = rs.Size("H"), rs.Size("W")
    c, y, x = rs.vars("c y x")
    img = rs.Input("img", rs.float32, [H, W])
    f = rs.Func("f", shape=[3, H, W])
    f[c, y, x] = img[y, x] * rs.cast(rs.float32, c + 1)
    f.bound("c", 0, 3).unroll("c")
    k = f.compile()
    a = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
    with pytest.raises(ValueError, match=r"output f is asked for indices 0 to 3 along dimension 0.*extent is 3"):
        k(img=a, out=np.zeros((4, 3, 4), np.float32))
    out = np.zeros((2, 3, 4), np.float32)
    k(img=a, out=out)
    np.testing.assert_array_equal(out, np.stack([a, 2 * a]))


def test_a_shifted_tile_wider_than_a_small_input_is_named_in_the_refusal():
    """A schedule tuned on large images splits a loop by 256 with tail 'auto': on an image 131 wide its
    one tile is shifted before the start. The refusal names that cause beside the pipeline's own reads
    (a schedule found on other inputs, tests/pipelines/test_tuned_schedules.py, is refused so)."""
    W = rs.Size("W")
    x = rs.Var("x")
    img = rs.Input("img", rs.float32, [W])
    f = rs.Func("f")
    f[x] = img[x] * 2
    g = rs.Func("g", shape=[W])
    g[x] = f[x] + 1
    f.compute_root().split("x", "x", "x.i", 256, tail="auto")
    kern = rs.Pipeline([g]).compile()
    with pytest.raises(ValueError, match=r"reads img along dimension 0 from index -125 to 130.*tail 'auto' or 'shift'"):
        kern(img=np.zeros(131, np.float32))
    assert kern(img=np.ones(300, np.float32))[0] == 3.0
    # reading past the end too: the input is too small whatever the tiles (no word of tails)
    with pytest.raises(ValueError, match=r"from index -125 to 130, outside its extent 100 \(0..99\); pass a larger "
                                         r"img or wrap it in a boundary condition \(rs.clamp_edge, "
                                         r"rs.constant_exterior, ...\)$"):
        kern(img=np.zeros(100, np.float32), out=np.zeros(131, np.float32))


def _scaled_reads(parallel: bool = False):
    """``out[i]`` reads ``g`` at (0, 0) and at (i k, i k): ``g``'s region, and so its storage (all of it,
    or each parallel iteration's), grows as the square of the Param ``k``."""
    N = rs.Size("N")
    x = rs.Input("x", rs.float64, [N])
    k = rs.Param("k", rs.int32)
    i, a, c = rs.vars("i a c")
    g = rs.Func("g")
    g[a, c] = rs.cast(rs.float64, a + c)
    out = rs.Func("out", shape=[N])
    out[i] = g[0, 0] + g[i * k, i * k] + x[i]
    if parallel:
        out.parallel("i")
        g.compute_at(out, "i")
    else:
        g.compute_root()
    return out.compile()


def test_storage_too_large_is_a_memory_error_naming_the_buffer_and_its_size():
    kern = _scaled_reads()
    np.testing.assert_allclose(kern(x=np.ones(3), k=2), [1, 5, 9])
    # 2 (2^28) + 1 points a side, 8 bytes each: about 2^61 bytes, past any machine's address space
    with pytest.raises(MemoryError, match=f"could not allocate {(2 * 2**28 + 1) ** 2 * 8} bytes .* buffer g"):
        kern(x=np.ones(3), k=2**28)


@pytest.mark.parametrize("parallel", [False, True], ids=["root", "per parallel iteration"])
def test_a_size_past_int64_is_refused_not_wrapped(parallel):
    """Extents of 2^32 a side: 2^64 elements, a size that wrapped to a small block, then written far past
    its end (a crash); now refused before anything is allocated, and the kernel still runs after."""
    kern = _scaled_reads(parallel)
    with pytest.raises(MemoryError, match="more than 2\\^63 bytes for its buffer g"):
        kern(x=np.ones(3), k=2**31 - 1)
    np.testing.assert_allclose(kern(x=np.ones(3), k=2), [1, 5, 9])


def test_a_region_past_int64_is_refused_before_the_call():
    """``g[i * k * k]``: with k = 2^31 - 1 and five points, g's region ends at 4 k^2, past 2^63, where
    generated code computes it; wrapped, it sized g's storage by a region that missed the reads. The
    runtime computes the root regions exactly and refuses such arguments by name."""
    N = rs.Size("N")
    x = rs.Input("x", rs.float64, [N])
    k = rs.Param("k", rs.int32)
    i = rs.Var("i")
    g = rs.Func("g")
    g[i] = rs.cast(rs.float64, i)
    out = rs.Func("out", shape=[N])
    out[i] = g[i * k * k] + x[i]
    g.compute_root()
    kern = out.compile()
    with pytest.raises(ValueError, match=f"g.req.0.m(in|ax) .* needs {4 * (2**31 - 1) ** 2}, past the 64-bit range"):
        kern(x=np.ones(5), k=2**31 - 1)
    np.testing.assert_allclose(kern(x=np.ones(3), k=5), [1, 26, 51])
