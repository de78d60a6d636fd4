"""F2 linear layouts against brute force: every operation is checked on every point of random layouts
(hypothesis), and each constructor against the formula it stands for."""

from __future__ import annotations

from itertools import product

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.algebra import expr as E
from ragsched.algebra import f2
from ragsched.algebra import types as T
from ragsched.runtime.pyexpr import compile_function


@st.composite
def layouts(draw, ins=None, outs=None):
    """A random layout with up to two input and two output dims of up to 8 bits in all."""
    if ins is None:
        ins = {f"i{k}": 1 << draw(st.integers(0, 3)) for k in range(draw(st.integers(1, 2)))}
    if outs is None:
        outs = {f"o{k}": 1 << draw(st.integers(0, 3)) for k in range(draw(st.integers(1, 2)))}
    bases = {n: [tuple(draw(st.integers(0, s - 1)) for s in outs.values()) for _ in range(size.bit_length() - 1)]
             for n, size in ins.items()}
    return f2.F2Layout.from_bases(ins, outs, bases)


def points(layout):
    names = list(layout.in_sizes)
    for values in product(*(range(s) for s in layout.in_sizes.values())):
        yield dict(zip(names, values))


def images(layout) -> set:
    return {tuple(layout(**p).values()) for p in points(layout)}


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_a_layout_is_linear_and_its_rank_says_injective_and_surjective(layout):
    pts = list(points(layout))
    for a in pts[:8]:
        for b in pts[:8]:
            x = {n: a[n] ^ b[n] for n in a}
            assert layout(**x) == {n: u ^ v for (n, u), v in zip(layout(**a).items(), layout(**b).values())}
    n_in = len(pts)
    n_out = 1
    for s in layout.out_sizes.values():
        n_out *= s
    assert layout.is_injective() == (len(images(layout)) == n_in)
    assert layout.is_surjective() == (len(images(layout)) == n_out)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_compose_is_function_composition(data):
    inner = data.draw(layouts())
    outer = data.draw(layouts(ins=inner.out_sizes))
    both = inner.compose(outer)
    for p in points(inner):
        assert both(**p) == outer(**inner(**p))


@settings(max_examples=80, deadline=None)
@given(layouts())
def test_the_pseudo_inverse_of_a_surjective_layout_is_a_right_inverse(layout):
    if not layout.is_surjective():
        with pytest.raises(ValueError, match="not surjective"):
            layout.pseudo_invert()
        return
    inv = layout.pseudo_invert()
    for y in points(inv):
        assert layout(**inv(**y)) == y
    masks = layout.free_variable_masks()
    for y in points(inv):  # the chosen input has its free bits zero
        assert all(v & masks[n] == 0 for n, v in inv(**y).items())
    if layout.is_bijective():
        back = layout.invert()
        for x in points(layout):
            assert back(**layout(**x)) == x
    else:
        with pytest.raises(ValueError, match="not a bijection"):
            layout.invert()


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_invert_and_compose_finds_each_element_in_the_other_index_space(data):
    a = data.draw(layouts())
    b = data.draw(layouts(outs=a.out_sizes))
    if not b.is_surjective():
        return
    c = a.invert_and_compose(b)
    for x in points(a):
        assert b(**c(**x)) == a(**x)


@settings(max_examples=40, deadline=None)
@given(layouts(), layouts())
def test_the_product_puts_the_second_layout_above_the_first(a, b):
    ab = a * b
    for x in points(a):
        for y in points(b):
            point = dict(x)
            for n, v in y.items():
                point[n] = point.get(n, 0) | v << (a.in_sizes[n].bit_length() - 1 if n in a.in_sizes else 0)
            got = ab(**point)
            fa, fb = a(**x), b(**y)
            for n in got:
                shift = a.out_sizes[n].bit_length() - 1 if n in a.out_sizes and n in b.out_sizes else 0
                assert got[n] == fa.get(n, 0) ^ (fb.get(n, 0) << shift)


@settings(max_examples=60, deadline=None)
@given(layouts(), st.booleans())
def test_emitted_index_arithmetic_computes_the_layout(layout, arithmetic):
    """Bit operations, or (``arithmetic``) sums of ``x // 2^a % 2^b * 2^c`` where an output's terms reach
    disjoint bits: the same map either way."""
    names = list(layout.in_sizes)
    exprs = f2.emit(layout, arithmetic=arithmetic, **{n: E.Var(n, T.INDEX) for n in names})
    fn = compile_function(list(exprs.values()), names)
    for p in points(layout):
        assert dict(zip(exprs, fn(*p.values()))) == layout(**p)


def test_arithmetic_emission_adds_the_runs_of_a_permutation_of_bits_and_xors_a_swizzle():
    y, x = E.Var("y", T.INDEX), E.Var("x", T.INDEX)
    (blocked,) = f2.emit(f2.row_major({"y": 4, "x": 16}).invert(), arithmetic=True, y=y, x=x).values()
    assert not any(isinstance(n, (E.BitXor, E.BitAnd, E.Shl, E.Shr)) for n in E.walk(blocked))
    swizzle = f2.xor_swizzle(8, 16, 2, 1, 8)
    (col, _) = sorted(f2.emit(swizzle, arithmetic=True, row=y, col=x).items())
    assert any(isinstance(n, E.BitXor) for n in E.walk(col[1]))


def test_constructors_are_the_layouts_they_name():
    rm = f2.row_major({"row": 4, "col": 8})
    assert all(rm(offset=o) == {"row": o // 8, "col": o % 8} for o in range(32))
    cm = f2.strided({"row": 4, "col": 8}, order=["row", "col"])
    assert all(cm(offset=o) == {"row": o % 4, "col": o // 4} for o in range(32))
    mo = f2.morton({"row": 4, "col": 4})
    for o in range(16):
        bits = [o >> i & 1 for i in range(4)]
        assert mo(offset=o) == {"row": bits[1] | bits[3] << 1, "col": bits[0] | bits[2] << 1}
    sw = f2.xor_swizzle(16, 32, 4, 2, 4)
    for r, c in product(range(16), range(32)):
        assert sw(row=r, col=c) == {"row": r, "col": c ^ (r // 2 % 4) * 4}
    cs = f2.cute_swizzle(3, 4, 3)
    for o in range(1 << 10):
        assert cs(offset=o) == {"offset": o ^ ((o & (0b111 << 7)) >> 3)}
    assert cs.is_bijective() and sw.is_bijective()
    with pytest.raises(ValueError, match="power of two"):
        f2.row_major({"row": 3, "col": 8})


def test_a_blocked_layout_tiles_threads_and_warps_fastest_dim_first():
    """Triton's blocked layout: 4 consecutive columns per thread, 8 threads along a row and 4 down, 4 warps
    down the rows: a 16 x 32 tile once; a 32 x 32 tile repeats in registers; an 8 x 32 one broadcasts."""
    lay = f2.blocked({"row": 16, "col": 32}, [1, 4], [4, 8], [4, 1])
    assert lay.in_sizes == {"register": 4, "lane": 32, "warp": 4} and lay.is_bijective()
    for reg, lane, warp in product(range(4), range(32), range(4)):
        assert lay(register=reg, lane=lane, warp=warp) == {"row": warp * 4 + lane // 8, "col": lane % 8 * 4 + reg}
    assert lay.contiguous_elements("register", "col") == 4
    big = f2.blocked({"row": 32, "col": 32}, [1, 4], [4, 8], [4, 1])
    assert big.in_sizes["register"] == 8 and big.is_bijective()
    small = f2.blocked({"row": 8, "col": 32}, [1, 4], [4, 8], [4, 1])
    assert small.is_surjective() and not small.is_injective()
    assert small.free_variable_masks()["warp"] == 0b10  # warps 0 and 2 (1 and 3) hold the same rows


def test_bank_conflicts_of_a_column_read_and_the_swizzle_that_removes_them():
    """32 lanes read one column of a 32 x 32 float32 tile: stored row-major every lane hits bank 0 (31
    extra wavefronts); stored XOR-swizzled, none. A row read is conflict-free either way."""
    to_offset = f2.row_major({"row": 32, "col": 32}).invert()
    column = f2.F2Layout.from_bases({"lane": 32}, {"row": 32, "col": 32}, {"lane": [(1 << i, 0) for i in range(5)]})
    row = f2.F2Layout.from_bases({"lane": 32}, {"row": 32, "col": 32}, {"lane": [(0, 1 << i) for i in range(5)]})
    swizzle = f2.xor_swizzle(32, 32, 1, 1, 32)
    assert f2.bank_conflicts(column.compose(to_offset), 32) == 31
    assert f2.bank_conflicts(column.compose(swizzle).compose(to_offset), 32) == 0
    assert f2.bank_conflicts(row.compose(to_offset), 32) == 0
    # float16 pairs share a 4-byte word: 32 lanes on a row of halves touch 16 words, conflict-free
    assert f2.bank_conflicts(row.compose(to_offset), 16) == 0
    with pytest.raises(ValueError, match="one output dim"):
        f2.bank_conflicts(column, 32)


def test_the_package_exports_f2layout_and_refuses_bad_input_by_name():
    assert rs.F2Layout is f2.F2Layout
    with pytest.raises(ValueError, match="no input dim 'lanes'"):
        f2.identity("lane", 32)(lanes=1)
    with pytest.raises(ValueError, match="runs over"):
        f2.identity("lane", 32)(lane=32)
    with pytest.raises(ValueError, match="compose"):
        f2.identity("lane", 32).compose(f2.identity("warp", 4))


def _transpose_pair():
    """A 16 x 32 float32 tile written by threads holding 4 columns each and read by threads holding 4
    rows each (a transpose through shared memory): no vector both sides can move."""
    src = f2.blocked({"row": 16, "col": 32}, [1, 4], [4, 8], [1, 1])
    dst = f2.blocked({"row": 16, "col": 32}, [4, 1], [4, 8], [1, 1], order=["row", "col"])
    return src, dst


def test_the_optimal_swizzle_of_a_transpose_has_no_conflict_where_xor_swizzles_keep_some():
    src, dst = _transpose_pair()
    row_major = f2.row_major({"row": 16, "col": 32})
    assert f2.vector_bits(src, dst) == []
    assert f2.access_conflicts(src, row_major, 32) == 48 and f2.access_conflicts(dst, row_major, 32) == 48
    for vec, per_phase, max_phase in [(1, 1, 16), (1, 1, 32), (2, 1, 8), (2, 1, 16), (4, 1, 8)]:
        memory = row_major.compose(f2.xor_swizzle(16, 32, vec, per_phase, max_phase).invert())
        assert f2.access_conflicts(src, memory, 32) + f2.access_conflicts(dst, memory, 32) > 0
    best = f2.optimal_swizzle(src, dst, 32)
    assert best.is_bijective() and best.in_sizes == {"offset": 512}
    assert f2.access_conflicts(src, best, 32) == 0 and f2.access_conflicts(dst, best, 32) == 0


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([(16, 32), (32, 32), (8, 64), (64, 16)]), st.sampled_from([16, 32]),
       st.sampled_from([1, 2, 4]), st.sampled_from([1, 2, 4, 8]), st.booleans())
@example((8, 64), 16, 1, 8, False)  # float16: lanes that differ within a word share it, not a bank
def test_the_optimal_swizzle_keeps_the_common_vector_and_never_does_worse_than_row_major(shape, bits, spt_a,
                                                                                       spt_b, same_order):
    rows, cols = shape
    tpw_col = min(8, cols // spt_a)
    src = f2.blocked({"row": rows, "col": cols}, [1, spt_a], [32 // tpw_col, tpw_col], [1, 1])
    order = ["col", "row"] if same_order else ["row", "col"]
    spt = [1, spt_b] if same_order else [spt_b, 1]
    tpw = [32 // min(8, cols // spt_b), min(8, cols // spt_b)] if same_order else [min(8, rows // spt_b),
                                                                                     32 // min(8, rows // spt_b)]
    dst = f2.blocked({"row": rows, "col": cols}, spt, tpw, [1, 1], order=order)
    best = f2.optimal_swizzle(src, dst, bits)
    assert best.is_bijective()
    common = f2.vector_bits(src, dst)  # elements each thread moves at once on both sides: adjacent offsets
    assert best.columns()[:len(common)] == common
    vec = 1 << len(common)
    row_major = f2.row_major({"row": rows, "col": cols})
    for side in (src, dst):
        assert f2.access_conflicts(side, best, bits, vec) <= f2.access_conflicts(side, row_major, bits, vec)


@settings(max_examples=60, deadline=None)
@given(layouts(), layouts())
def test_divide_left_undoes_the_product(a, b):
    c = a * b
    q = c.divide_left(a)
    assert a * q == c
    for (name, _), per_bit in zip(q.ins, q.bases):  # the quotient is b, on c's dims
        assert per_bit == tuple(tuple(dict(zip((n for n, _ in b.outs), x)).get(o, 0) for o, _ in q.outs)
                                for x in dict(zip((n for n, _ in b.ins), b.bases)).get(name, ()))


def test_divide_left_refuses_a_layout_that_does_not_start_with_the_divisor():
    with pytest.raises(ValueError, match="does not start with the divisor"):
        f2.row_major({"row": 4, "col": 4}).divide_left(f2.F2Layout.from_bases({"offset": 2}, {"row": 1, "col": 2},
                                                                                {"offset": [(0, 0)]}))
