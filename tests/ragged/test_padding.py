"""Loop padding (``pad``) and storage padding (``store_padded``): a ragged loop rounded up to a
multiple splits and vectorizes with no tail, its padded points computed into padded storage and never
seen; a ragged output stored padded is a RaggedArray with ``pad``; whatever the lengths (0 and 1
included), the values are the reference's."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.reference import run

from .test_compiled_ragged import _inputs, attention


def _tokens():
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    x = rs.Input("x", rs.float32, [B, L, 3])
    b, i, h = rs.vars("b i h")
    g = rs.Func("g")
    g[b, i, h] = x[b, i, h] * 2.0
    out = rs.Func("out", shape=[B, L, 3])
    out[b, i, h] = g[b, i, h] + 1.0
    return x, g, out


def _token_inputs(lengths, pad=1):
    rng = np.random.default_rng(len(lengths))
    x = rs.RaggedArray.from_list([rng.standard_normal((n, 3)).astype(np.float32) for n in lengths],
                                 ragged_axes=[0], pad=pad)
    return {"x": x, "lens": np.array(lengths, np.int32)}


def _same(got: rs.RaggedArray, want: rs.RaggedArray):
    assert got.lengths.tolist() == want.lengths.tolist()
    for g, w in zip(got.to_list(), want.to_list(), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


LENGTHS = st.lists(st.integers(0, 19), min_size=1, max_size=6)


@settings(max_examples=10, deadline=None)
@given(lengths=LENGTHS, multiple=st.sampled_from([2, 4, 8]), stored=st.sampled_from([1, 2, 4]))
def test_a_padded_output_is_stored_padded(lengths, multiple, stored):
    x, g, out = _tokens()
    out.reorder("b", "h", "i").pad("i", multiple).store_padded("i", multiple * stored).vectorize("i", multiple)
    inputs = _token_inputs(lengths)
    got = out.compile()(**inputs)
    assert got.pad == multiple * stored
    assert got.offsets.tolist() == [0, *np.cumsum([-(-n // got.pad) * got.pad * 3 for n in lengths]).tolist()]
    _same(got, run(out, **inputs))


def test_a_padded_loop_has_no_tail():
    x, g, out = _tokens()
    out.reorder("b", "h", "i").pad("i", 8).store_padded("i", 8).vectorize("i", 8)
    loops = [t.strip() for t in rs.Pipeline([out]).lowered().splitlines() if t.strip().startswith("for out.")]
    assert len(loops) == 3 and "+ 7) // 8)" in loops[-1]  # whole vectors up to the padded length, nothing else
    assert "if " not in rs.Pipeline([out]).lowered().split("produce out:")[1]


@settings(max_examples=10, deadline=None)
@given(lengths=st.lists(st.integers(0, 9), min_size=1, max_size=5), multiple=st.sampled_from([2, 4, 8]),
       factor=st.sampled_from([2, 3, 4]), stored=st.sampled_from([1, 16]))
def test_padded_intermediates_compute_the_reference(lengths, multiple, factor, stored):
    """Scores and probabilities of attention padded along j (and i), split by a divisor of the multiple or
    not: the padded points read only other padded storage, and reductions stop at each entry."""
    O = attention()
    funcs = {f.name: f for f in _funcs_of(O)}
    funcs["S"].pad("j", multiple).split("j", "j", "jv", factor).vectorize("jv")
    funcs["P"].pad("i", multiple).pad("j", multiple).store_padded("j", stored).vectorize("j", multiple)
    inputs = _inputs(lengths, 0)
    _same(O.compile()(**inputs), run(O, **inputs))


def _funcs_of(O):
    from ragsched.lang import reachable_funcs

    return reachable_funcs(O).values()


def test_store_padded_rounds_an_intermediate_buffer():
    x, g, out = _tokens()
    g.compute_root().store_padded("i", 16)
    text = rs.Pipeline([out]).lowered()
    assert "let g.extent.1 = max(16 * (" in text
    inputs = _token_inputs([3, 0, 17])
    _same(out.compile()(**inputs), run(out, **inputs))


def test_a_padded_loop_reads_a_ragged_input_through_a_copy():
    x, g, out = _tokens()
    g.compute_root().reorder("b", "h", "i").pad("i", 4).vectorize("i", 4)
    with pytest.raises(ValueError, match=r"Input x is ragged.*x\.in_\(\)"):
        out.compile()
    x.in_(g).compute_root()
    inputs = _token_inputs([5, 1, 0, 8])
    _same(out.compile()(**inputs), run(out, **inputs))


def test_padded_arguments_are_accepted():
    x, g, out = _tokens()
    kern = out.compile()
    want = kern(**_token_inputs([4, 0, 7]))
    got = kern(**_token_inputs([4, 0, 7], pad=4))
    _same(got, want)


def test_out_must_have_the_schedules_padding():
    x, g, out = _tokens()
    out.pad("i", 4).store_padded("i", 4)
    kern = out.compile()
    inputs = _token_inputs([4, 0, 7])
    given_out = rs.RaggedArray.from_list([np.zeros((n, 3), np.float32) for n in [4, 0, 7]], ragged_axes=[0], pad=4)
    assert kern(**inputs, out=given_out) is given_out
    _same(given_out, run(out, **inputs))
    with pytest.raises(ValueError, match="pad=4"):
        kern(**inputs, out=rs.RaggedArray.from_list([np.zeros((n, 3), np.float32) for n in [4, 0, 7]],
                                                    ragged_axes=[0]))


@pytest.mark.parametrize("schedule, message", [
    (lambda out: out.pad("i", 4), r"Func out: pad\('i', 4\) writes past each entry.*store_padded\('i', m\)"),
    (lambda out: out.pad("i", 4).store_padded("i", 6), r"m a multiple of 4"),
    (lambda out: out.pad("h", 4).store_padded("i", 4), r"'h' is not one of its ragged dimensions"),
    (lambda out: out.store_padded("h", 4), r"store_padded\('h', 4\): 'h' is not a ragged dimension"),
])
def test_padding_a_ragged_output_past_its_storage_is_refused(schedule, message):
    x, g, out = _tokens()
    schedule(out)
    with pytest.raises(ValueError, match=message):
        out.compile()


def test_what_pad_refuses_when_written():
    B = rs.Size("B")
    x = rs.Input("x", rs.float32, [B, 4])
    b, j = rs.vars("b j")
    r = rs.RDom(0, 4, name="r")
    f = rs.Func("f")
    f[b] = 0.0
    f[b] += x[b, r]
    with pytest.raises(ValueError, match="RVar"):
        f.update().pad("r.0", 4)
    with pytest.raises(ValueError, match="before it is split"):
        f.split("b", "bo", "bi", 2).pad("bo", 4)
    f2 = rs.Func("f2")
    f2[b, j] = x[b, j]
    with pytest.raises(ValueError, match="already padded"):
        f2.pad("j", 4).pad("j", 8)
    with pytest.raises(ValueError, match="positive int"):
        f2.pad("b", 0)
    with pytest.raises(ValueError, match="not one of its pure Vars"):
        f2.store_padded("q", 4)


def test_a_dense_padded_loop_rounds_like_a_pad_tail():
    N = rs.Size("N")
    x = rs.Input("x", rs.float32, [N])
    i = rs.Var("i")
    f = rs.Func("f")
    f[i] = x[rs.clamp(i, 0, N - 1)] * 2.0
    f.pad(i, 4).vectorize(i, 4)
    kern = f.compile()
    a = np.arange(13, dtype=np.float32)
    np.testing.assert_array_equal(kern(x=a, out_shape=(16,))[:13], a * 2)
    with pytest.raises(ValueError, match="pad\\(\\) loop"):
        kern(x=a, out_shape=(13,))


def test_the_schedule_round_trips():
    x, g, out = _tokens()
    out.reorder("b", "h", "i").pad("i", 8).store_padded("i", 8).vectorize("i", 8)
    sched = out.schedule()
    assert rs.Schedule.from_json(sched.to_json()) == sched
    text = sched.to_python()
    assert "funcs['out'].pad('i', 8)" in text and "funcs['out'].store_padded('i', 8)" in text
    x2, g2, out2 = _tokens()
    namespace = {}
    exec(text, namespace)
    namespace["apply_schedule"]({"out": out2, "g": g2, "x": x2})
    assert out2.schedule() == sched
