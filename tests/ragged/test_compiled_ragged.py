"""Compiled ragged pipelines against the NumPy reference: attention over RaggedArrays with random
lengths (0 and 1 included) under random schedules, a triangular output, per-entry loop bounds (no
point outside the domain computed), and the checks that run before generated code."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import ragsched as rs
from pipelines.attention import attention_core
from ragsched.lang import reachable_funcs
from ragsched.reference import run
from ragsched.runtime.kernel import compile_pipeline

H, D = 2, 4


def attention():
    """pipelines/attention.py's algorithm with small heads (the scale 1 / sqrt(D) = 0.5)."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    Q, K, V = (rs.Input(n, rs.float32, [B, L, H, D]) for n in "QKV")
    return attention_core(Q, K, V, lens, (B, L, H, D), "O")


def _inputs(lengths, seed):
    rng = np.random.default_rng(seed)
    lens = np.array(lengths, np.int32)

    def make():
        return rs.RaggedArray.from_list([rng.standard_normal((n, H, D)).astype(np.float32) for n in lengths],
                                        ragged_axes=[0])
    return {"Q": make(), "K": make(), "V": make(), "lens": lens}


def _check(outputs, inputs, **kw):
    got = rs.Pipeline([outputs]).compile(**kw)(**inputs)
    want = run(outputs, **inputs)
    assert isinstance(got, rs.RaggedArray) and got.lengths.tolist() == want.lengths.tolist()
    np.testing.assert_allclose(got.values, want.values, rtol=1e-5, atol=1e-6)


LENGTHS = st.lists(st.integers(0, 6), min_size=1, max_size=5)


@settings(max_examples=15, deadline=None)
@given(lengths=LENGTHS, seed=st.integers(0, 2**16))
def test_attention_matches_the_reference(lengths, seed):
    _check(attention(), _inputs(lengths, seed))


@st.composite
def ragged_schedule(draw, O):
    """Schedules that keep each batch loop outermost (ragged loops must stay inside it): loop padding of
    ragged dims (the output then stored padded), splits of the
    ragged and fixed dims with every tail a ragged dim accepts, vectorized and unrolled inner loops,
    the batch loop parallel, the output's (b, i) loops flattened into one, and each intermediate at root,
    inline or at a loop of its consumer."""
    funcs = {f.name: f for f in _funcs(O)}
    log = []
    for name, f in funcs.items():
        dims = [a.name for a in f.args]
        if name in PADDABLE and draw(st.booleans()):  # loop padding (the output's storage padded to hold it)
            v, m = draw(st.sampled_from(PADDABLE[name])), draw(st.sampled_from([2, 4, 8]))
            f.pad(v, m)
            if name == O.name:
                f.store_padded(v, m * draw(st.sampled_from([1, 2])))
            log.append(f"{name}.pad({v}, {m})")
        if len(dims) > 1 and draw(st.booleans()):
            v = draw(st.sampled_from(dims[1:]))
            tail = draw(st.sampled_from(["auto", "guard", "split"]))
            f.split(v, v, f"{v}.in", draw(st.sampled_from([2, 3, 4])), tail=tail)
            log.append(f"{name}.split({v}, {tail})")
        last = [d.name for d in f.stage_plan(0).dims][-1]
        if draw(st.booleans()):
            f.vectorize(last, draw(st.sampled_from([None, 4, 8])))
            log.append(f"{name}.vectorize({last})")
        if draw(st.booleans()):
            f.parallel("b")
            log.append(f"{name}.parallel(b)")
    flat = not any(e.startswith(f"{O.name}.") for e in log) and draw(st.booleans())
    if flat:  # one loop over the valid (b, i) pairs of the output
        O.fuse("b", "i", "bi")
        log.append(f"{O.name}.fuse(b, i)")
        if draw(st.booleans()):
            O.parallel("bi")
            log.append(f"{O.name}.parallel(bi)")
    for name in ("S", "P"):
        choice = draw(st.sampled_from(["root", "inline", "at"]))
        if choice == "inline":
            funcs[name].compute_inline()
        elif choice == "at":
            funcs[name].compute_at(O, "bi" if flat else "b")
        log.append(f"{name}: {choice}")
    return log


#: the ragged dims each Func may pad (QK reads the Inputs Q and K at its own i and j, so it may not)
PADDABLE = {"S": ["i", "j"], "P": ["i", "j"], "top": ["i"], "den": ["i"], "inv": ["i"], "PV": ["i"], "O": ["i"]}


def _funcs(O):
    from ragsched.lang import reachable_funcs

    return [f for n, f in sorted(reachable_funcs(O).items()) if not n.startswith(("sum_", "maximum_"))]


@settings(max_examples=int(os.environ.get("RAGSCHED_EXAMPLES", "12")), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data(), lengths=LENGTHS)
def test_attention_under_random_schedules(data, lengths):
    O = attention()
    try:
        log = data.draw(ragged_schedule(O))
        kern = compile_pipeline(rs.Pipeline([O]), threads=2, load=False)  # (LLVM at the first call)
    except ValueError:
        reject()  # a schedule ragsched refuses, with a message (checked in other tests)
    inputs = _inputs(lengths, 0)
    want = run(O, **inputs)
    try:
        kern.check(**inputs)
    except ValueError as err:  # refused before running: a shifted split wider than a fixed dimension
        assert "outside" in str(err)
        reject()
    got = kern(**inputs)
    assert got.lengths.tolist() == want.lengths.tolist()
    np.testing.assert_allclose(got.to_padded(), want.to_padded(), rtol=1e-4, atol=1e-5, err_msg=str(log))


def test_triangular_output():
    N = rs.Size("N")
    i, j = rs.vars("i j")
    A = rs.Input("A", rs.float32, [N, N])
    low = rs.Func("low", shape=[N, rs.Ragged("T", lambda i: i + 1)])
    r = rs.RDom(0, i + 1, name="r")
    low[i, j] = rs.sum(A[i, r] * A[j, r])
    a = np.random.default_rng(1).standard_normal((6, 6)).astype(np.float32)
    got = low.compile()(A=a)
    assert got.lengths.tolist() == [1, 2, 3, 4, 5, 6]
    np.testing.assert_allclose(got.values, run(low, A=a).values, rtol=1e-5)


def test_loops_stop_at_each_entry():
    """The loops of a ragged Func end at the entry's own length (no padded point is computed)."""
    text = rs.Pipeline([attention()]).lowered()
    loops = [t.strip() for t in text.split("\n") if t.strip().startswith("for S.s0.")]
    assert [t.split(" in ")[0] for t in loops] == ["for S.s0.b", "for S.s0.h", "for S.s0.i", "for S.s0.j"]
    for t in loops[2:]:
        assert "int64(lens[S.s0.b])" in t and t.startswith(("for S.s0.i in", "for S.s0.j in")) and "min(" in t


@pytest.mark.parametrize("change, error, message", [
    (lambda a: {**a, "Q": a["Q"].to_padded()}, TypeError, "argument Q is ragged: pass a RaggedArray"),
    (lambda a: {**a, "lens": np.array([2, 1, 0], np.int32)}, ValueError,
     r"argument K: entry 0 has length 3 in dimension 1, but its shape says"),
    (lambda a: {**a, "lens": np.array([3, 1], np.int32)}, ValueError, "Size B disagrees"),
    (lambda a: {**a, "V": rs.RaggedArray.from_list([np.zeros((n, H, D + 1), np.float32) for n in (3, 1, 0)],
                                                   ragged_axes=[0])}, ValueError, r"V.shape\[3\] must be 4"),
    (lambda a: {**a, "Q": rs.RaggedArray.from_list([np.zeros((n, H, D)) for n in (3, 1, 0)], ragged_axes=[0])},
     TypeError, "argument Q has dtype float64, expected float32"),
])
def test_bad_ragged_arguments_are_refused_before_running(change, error, message):
    kern = attention().compile()
    with pytest.raises(error, match=message):
        kern(**change(_inputs([3, 1, 0], 0)))


def test_out_must_match_the_lengths():
    O = attention()
    kern = O.compile()
    inputs = _inputs([2, 3], 0)
    out = rs.RaggedArray.from_list([np.zeros((n, H, D), np.float32) for n in (2, 3)], ragged_axes=[0])
    assert kern(**inputs, out=out) is out
    np.testing.assert_allclose(out.values, run(O, **inputs).values, rtol=1e-5, atol=1e-6)
    wrong = rs.RaggedArray.from_list([np.zeros((n, H, D), np.float32) for n in (3, 2)], ragged_axes=[0])
    with pytest.raises(ValueError, match="out= for O must be a RaggedArray"):
        kern(**inputs, out=wrong)


@pytest.mark.parametrize("flat", [False, True])
def test_a_read_past_an_entry_is_refused_when_compiling(flat):
    """Also in one flat loop over the (b, i) pairs, where b and i are read from tables."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    Q = rs.Input("Q", rs.float32, [B, rs.Ragged("L", lens)])
    b, i = rs.vars("b i")
    f = rs.Func("f", shape=[B, rs.Ragged("L", lens)])
    f[b, i] = Q[b, i + 1]
    if flat:
        f.fuse("b", "i", "bi")
    with pytest.raises(ValueError, match=r"Input Q is ragged: dimension 1 is read over .* cannot be shown to stay"):
        f.compile()



def _causal(read_first: bool = False):
    """f[b, i] = Q[b, i] + Q[b, max(i - 1, 0)] (a causal 2-tap filter along each entry's tokens); with
    ``read_first``, every entry's first token is read too, outside the loop over its tokens (g[b])."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    Q = rs.Input("Q", rs.float32, [B, rs.Ragged("L", lens)])
    b, i = rs.vars("b i")
    f = rs.Func("f", shape=[B, rs.Ragged("L", lens)])
    f[b, i] = Q[b, i] + Q[b, rs.max(i - 1, 0)] * 0.5
    if not read_first:
        return f
    g = rs.Func("g", shape=[B])
    g[b] = Q[b, 0]
    return f, g


@pytest.mark.parametrize("flat", [False, True])
def test_a_causal_read_of_an_entrys_first_token_is_allowed(flat):
    """``max(i - 1, 0)`` reads index 0 even where i's loop is empty; only an entry of at least one token
    has it, and an empty entry's loop reads nothing, so the read stays inside (it was refused)."""
    f = _causal()
    if flat:
        f.fuse("b", "i", "bi")
    lens = np.array([3, 0, 1, 5, 0], np.int32)
    rng = np.random.default_rng(4)
    q = rs.RaggedArray.from_list([rng.standard_normal(n).astype(np.float32) for n in lens], ragged_axes=[0])
    got = f.compile()(Q=q, lens=lens)
    for a, x in zip(got.to_list(), q.to_list(), strict=True):
        np.testing.assert_array_equal(a, x + np.concatenate([x[:1], x[:-1]]) * np.float32(0.5))


def test_a_first_token_read_outside_the_loop_over_tokens_is_refused():
    """An entry's first token read once per entry (not inside the loop over its tokens) is past the end
    of an empty entry: refused, as before."""
    _, g = _causal(read_first=True)
    with pytest.raises(ValueError, match=r"Input Q is ragged: dimension 1 is read over .* cannot be shown to stay"):
        g.compile()


def _pooled():
    """pool[b, i] = max(up[b, 2 i], up[b, min(2 i + 1, lens[b] - 1)]) over each entry's first
    (lens[b] + 1) / 2 tokens, with up = X + 1 of declared shape [B, L, 4]: the region of up read along
    the tokens starts at min(1, lens[b] - 1), -1 in an empty entry, whose pool loop runs nothing."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, 4])
    b, i, f = rs.vars("b i f")
    up = rs.Func("up", shape=[B, L, 4])
    up[b, i, f] = X[b, i, f] + 1.0
    pool = rs.Func("pool", shape=[B, rs.Ragged("Lh", lambda b: (lens[b] + 1) // 2), 4])
    pool[b, i, f] = rs.max(up[b, 2 * i, f], up[b, rs.min(2 * i + 1, lens[b] - 1), f])
    return pool, up


@pytest.mark.parametrize("where", ["root", "entry", "vector"])
def test_a_declared_ragged_domain_is_not_computed_below_its_first_index(where):
    """A Func of declared ragged shape whose region starts below 0 in some entry (an empty one, here) is
    computed from index 0 only: its domain starts there (it was computed from -1, reading X at -1, and
    refused under every schedule)."""
    pool, up = _pooled()
    if where == "entry":
        up.compute_at(pool, "b")
    elif where == "vector":
        up.vectorize("f", 4)
        pool.vectorize("f", 4).parallel("b")
    lens = np.array([3, 0, 1, 4, 0, 2], np.int32)
    rng = np.random.default_rng(5)
    x = rs.RaggedArray.from_list([rng.standard_normal((n, 4)).astype(np.float32) for n in lens], ragged_axes=[0])
    got = pool.compile(threads=2)(X=x, lens=lens)
    assert got.lengths.tolist() == ((lens + 1) // 2).tolist()
    for a, e, n in zip(got.to_list(), x.to_list(), lens, strict=True):
        u = e + np.float32(1)
        h = np.arange((n + 1) // 2)
        np.testing.assert_array_equal(a, np.maximum(u[2 * h], u[np.minimum(2 * h + 1, n - 1)]))


def test_everything_computed_per_entry_inside_a_parallel_batch_loop():
    """Per-entry storage whose size reads the lengths (Realize bounds flattened with their reads)."""
    from ragsched.lang import reachable_funcs

    O = attention()
    O.parallel("b").vectorize("d", 4)
    for name, f in reachable_funcs(O).items():
        if name != "O":
            f.compute_at(O, "b")
    _check(O, _inputs([4, 0, 1, 6, 3], 2), threads=2)


@pytest.mark.parametrize("factor", [2, 3])
def test_a_vectorized_part_of_a_ragged_split_guards(factor):
    """The inner part of a ragged dim's split is as short as the rest of an entry: vectorizing it with a
    factor guards (its storage once grew to the type's limits, and the kernel failed to allocate)."""
    O = attention()
    top = {f.name: f for f in _funcs(O)}["top"]
    top.split("i", "i", "i.in", factor, tail="split").vectorize("i.in", 4)
    for lengths in ([0, 0], [5, 1, 0, 7]):
        _check(O, _inputs(lengths, 3), threads=2)


def test_an_inline_reduction_over_some_dims_takes_the_ragged_domain():
    """rs.sum over a ragged Func's last dim is read at (b, i) only: its loops stop at each entry too (it
    once covered the padded box and was refused for reading X past an entry)."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, 8])
    b, i, n = rs.vars("b i n")
    c = rs.RDom(0, 8)
    Y = rs.Func("Y", shape=[B, L, 8])
    Y[b, i, n] = rs.sum(X[b, i, c] * X[b, i, c]) + X[b, i, n]
    rng = np.random.default_rng(0)
    lengths = [3, 0, 5, 1]
    x = rs.RaggedArray.from_list([rng.standard_normal((m, 8)).astype(np.float32) for m in lengths], ragged_axes=[0])
    inputs = {"X": x, "lens": np.array(lengths, np.int32)}
    got = Y.compile()(**inputs)
    np.testing.assert_allclose(got.values, run(Y, **inputs).values, rtol=1e-5)


@pytest.mark.parametrize("tail", ["split", "guard", "auto"])
def test_a_reduction_over_a_ragged_rdom_split_in_whole_tiles_and_the_rest(tail):
    """``RDom(0, lens[b])`` split with tail='split': the rest's loop starts at ``lens[b] // 2 * 2``, which
    bounds inference had bounded below by the int32 minimum (a length read as any int32), refusing the
    schedule with "clamp that index". Lengths are never negative (the runtime refuses them), so their
    reads are bounded below by 0."""
    O = attention()
    funcs = reachable_funcs(O)
    for name in ("top", "den", "PV"):
        funcs[name].update(0).split("rj.0", "rj.0", "rj.i", 2, tail=tail)
    for lengths in ([3, 0, 5, 1], [2, 7]):
        _check(O, _inputs(lengths, 1))


def test_two_ragged_dims_fused_get_storage_for_every_point():
    """S[b, h, i, j] with i and j both < lens[b], fused into one loop: i = i_j // lens[b] was bounded by
    the int32 range (lens[b] - min is any int32 to interval arithmetic), the storage of S sized from that
    was too small, and the kernel wrote past it (a crash, found by the long random-schedule run). The
    value is now clamped to the range it never leaves."""
    O = attention()
    reachable_funcs(O)["S"].fuse("i", "j", "i_j")
    for lengths in ([3, 8, 1, 1, 1], [0, 5], [9]):
        _check(O, _inputs(lengths, 2))


def test_an_unshaped_func_reading_past_entries_is_told_to_declare_a_ragged_shape():
    """Q K^T of one entry's tokens by another's, in a Func without a shape: its region is the box of every
    entry, so it reads K past the shorter entries; refused, with the remedy (a ragged shape), which then
    compiles and matches."""
    def build(shaped: bool):
        B = rs.Size("B")
        lens = rs.Input("lens", rs.int32, [B])
        L = rs.Ragged("L", lens)
        Q, K = (rs.Input(n, rs.float32, [B, L, 2]) for n in "QK")
        b, i, j = rs.vars("b i j")
        k = rs.RDom(0, 2, name="k")
        S = rs.Func("S", dtype=rs.float32, shape=[B, L, L] if shaped else None)
        S[b, i, j] = 0.0
        S[b, i, j] += Q[b, i, k] * K[b, j, k]
        rj = rs.RDom(0, i + 1, name="rj")  # j <= i: a causal row
        total = rs.Func("total", dtype=rs.float32)
        total[b, i] = 0.0
        total[b, i] += S[b, i, rj]
        out = rs.Func("out", shape=[B, L])
        out[b, i] = total[b, i]
        return out

    with pytest.raises(ValueError, match="Func S has no ragged shape"):
        build(False).compile()
    lens = np.array([2, 0, 3], np.int32)
    rng = np.random.default_rng(9)
    q, kk = (rs.RaggedArray.from_list([rng.standard_normal((n, 2)).astype(np.float32) for n in lens],
                                      ragged_axes=[0]) for _ in "QK")
    got = build(True).compile()(Q=q, K=kk, lens=lens)
    for a, x, y in zip(got.to_list(), q.to_list(), kk.to_list(), strict=True):
        np.testing.assert_allclose(a, np.tril(x @ y.T).sum(axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("causal", [False, True])
def test_a_ragged_output_defined_by_an_update(causal):
    """out[b, i] += ... with out of shape [B, L]: the update reads the point it writes, which is no read
    past the output (it was computed into storage of its own and then refused: a ragged output is not
    copied out). A sum over features, and a causal prefix sum over each entry's tokens (an RDom of i + 1)."""
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    Q = rs.Input("Q", rs.float32, [B, L, 3])
    b, i = rs.vars("b i")
    out = rs.Func("out", shape=[B, L], dtype=rs.float32)
    out[b, i] = 0.0
    if causal:
        rj = rs.RDom(0, i + 1, name="rj")
        out[b, i] += Q[b, rj, 1]
    else:
        k = rs.RDom(0, 3, name="k")
        out[b, i] += Q[b, i, k]
    lens_v = np.array([2, 0, 3, 1], np.int32)
    rng = np.random.default_rng(10)
    q = rs.RaggedArray.from_list([rng.standard_normal((n, 3)).astype(np.float32) for n in lens_v], ragged_axes=[0])
    got = out.compile()(Q=q, lens=lens_v)
    for a, x in zip(got.to_list(), q.to_list(), strict=True):
        want = np.cumsum(x[:, 1]) if causal else x.sum(axis=1)
        np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("schedule", ["default", "rules"])
def test_attention_returns_its_weights_beside_its_output(schedule):
    """The softmax weights P as a second output (a model asked for its attention weights): a ragged
    output that the attention output reads, copied out of its padded box entry by entry."""
    O = attention()
    outs = [O, reachable_funcs([O])["P"]]
    args = _inputs([3, 0, 5, 1, 7], 4)
    if schedule == "rules":
        rs.autoschedule(outs, trials=0, inputs=args).apply(outs)
    got_o, got_p = rs.Pipeline(outs).compile(threads=2)(**args)
    want_o, want_p = run(outs, **args)
    assert got_p.lengths.tolist() == [3, 0, 5, 1, 7] and got_p.template == (H, None, None)
    np.testing.assert_allclose(got_o.values, want_o.values, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_p.values, want_p.values, rtol=1e-5, atol=1e-6)
