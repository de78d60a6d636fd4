"""Vector lanes along a ragged Func's heads (space version 13): where an entry's rows are short, the rules
compute a ragged nest's producers per entry, every head at once, each vector the heads of one point
(no padded row, no scalar rest). Checked on attention of shapes no rule was written beside (16 heads of
16 features, 24 of 8), at each vector width the tests run: where the heads are neither a whole number of
vectors nor half of one (a narrower register: 8 heads on AVX-512) the rules keep the lanes along the
rows. The kernel the rules make for one set of lengths is
then called on other lengths, empty entries and entries longer than any it was made for included; the
rules' answers at 8 and 16 lanes are checked by analysis alone (so on every host), and random points of
the space that ask for the heads' lanes run against the reference."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from pipelines.attention import attention_core
from ragsched import schedule as S
from ragsched.autosched.heuristic import HALF_VECTOR_COST, Machine, heuristic
from ragsched.autosched.space import analyze, suggest
from ragsched.pipeline_file import load
from ragsched.runtime.compare import matches
from tests import ROOT
from tests.checked import checked_kernel

SHAPES = [(8, 64), (16, 16), (24, 8)]


def _attention(heads: int, dim: int):
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    q, k, v = (rs.Input(n, rs.float32, [B, L, heads, dim]) for n in "QKV")
    return attention_core(q, k, v, lens, (B, L, heads, dim), "attention")


def _inputs(lens, heads: int, dim: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)

    def tokens():
        return rs.RaggedArray.from_list([rng.standard_normal((int(n), heads, dim)).astype(np.float32)
                                         for n in lens], ragged_axes=[0])
    return {"Q": tokens(), "K": tokens(), "V": tokens(), "lens": np.asarray(lens, np.int32)}


def _reference(inputs: dict, dim: int) -> list[np.ndarray]:
    """Per sequence, in float64 NumPy."""
    out = []
    for q, k, v in zip(inputs["Q"].to_list(), inputs["K"].to_list(), inputs["V"].to_list(), strict=True):
        s = np.einsum("ihd,jhd->hij", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(dim)
        if len(q):
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
        out.append(np.einsum("hij,jhd->ihd", s, v.astype(np.float64)))
    return out


def _along_heads(heads: int, lanes: int) -> bool:
    """Whether the heads may hold a Func's vector lanes: a whole number of vectors, or half of one."""
    return heads % lanes == 0 or 2 * heads == lanes


def _rules_take_heads(heads: int, lanes: int, lens) -> bool:
    """Whether the rules run short entries' lanes along the heads: where they fill whole vectors, or half
    of one where rows padded to a vector would cost more than half vectors do (``HALF_VECTOR_COST``). The
    padding redone here in NumPy: padded scores over 2 n^2 useful per entry."""
    n = np.asarray(lens, np.int64)
    padding = float((n * (-(-n // lanes) * lanes - n)).sum()) / (2 * float((n * n).sum()))
    return heads % lanes == 0 or 2 * heads == lanes and 1 + padding >= HALF_VECTOR_COST


def _rules(heads: int, dim: int, lens):
    out = _attention(heads, dim)
    sched = rs.autoschedule([out], trials=0, inputs=_inputs(lens, heads, dim), threads=2)
    return out, sched


@pytest.mark.parametrize("heads,dim", SHAPES)
def test_short_entries_run_their_vectors_along_the_heads(heads, dim, cpu_target):
    """Short entries: per entry, every intermediate's lanes along its heads (stored innermost, unpadded),
    Q and K read through copies with the heads innermost; heads that are neither whole vectors nor half
    of one: the lanes along the rows (padded to whole vectors), as before."""
    lanes = cpu_target.natural_vector_size(rs.float32)
    out, sched = _rules(heads, dim, [13, 9, 0, 21, 17])
    if not _rules_take_heads(heads, lanes, [13, 9, 0, 21, 17]):
        assert S.Vectorize("S", 0, "h") not in sched and any(isinstance(d, S.Pad) for d in sched)
        return
    assert not any(isinstance(d, S.Pad) for d in sched)
    assert S.Parallel("attention", 0, "b") in sched
    for name in ("S", "P", "top", "den", "inv"):
        assert S.ComputeAt(name, "attention", "b") in sched, name
        assert S.Vectorize(name, 0, "h") in sched, name
    for name in ("S", "P", "QK"):
        assert S.ReorderStorage(name, ("b", "i", "j", "h")) in sched, name
    assert S.Vectorize("QK", 1, "h") in sched and S.Reorder("QK", 1, ("b", "k.0", "i", "j", "h")) in sched
    for name in ("Q", "K"):  # [b, token, head, k] copied k-major: a vector of heads is contiguous
        assert S.Wrap(f"{name}_in_QK", name, "QK") in sched
        assert S.ReorderStorage(f"{name}_in_QK", ("_0", "_1", "_3", "_2")) in sched


def test_long_entries_keep_their_vectors_along_the_rows(cpu_target):
    """Entries whose scores of every head outgrow this host's L2 (and whose rows pad little): the rules'
    schedule of the last stop, per (entry, head), lanes along the rows."""
    lens = [300, 410, 290, 512]
    assert 2 * 8 * 4 * min(lens) ** 2 > Machine.here().l2_bytes  # S and P of one entry's 8 heads
    _, sched = _rules(8, 64, lens)
    assert S.Vectorize("S", 0, "h") not in sched and S.Parallel("attention", 0, "bh") in sched


@pytest.fixture(scope="module")
def kernels():
    """Per shape, the rules' kernel for short entries (compiled once; the lengths vary per example)."""
    out = {}
    for heads, dim in SHAPES:
        f, sched = _rules(heads, dim, [13, 9, 0, 21, 17])
        out[heads, dim] = rs.Pipeline([f]).compile(threads=2, schedule=sched)
    return out


@settings(max_examples=12, deadline=None)
@given(shape=st.sampled_from(SHAPES), lens=st.lists(st.integers(0, 40), min_size=1, max_size=6),
       seed=st.integers(0, 2**16))
def test_the_rules_kernel_computes_attention_for_any_lengths(kernels, shape, lens, seed):
    heads, dim = shape
    inputs = _inputs(lens, heads, dim, seed)
    got = kernels[shape](**inputs).to_list()
    for n, g, r in zip(lens, got, _reference(inputs, dim), strict=True):
        assert g.shape == (n, heads, dim)
        np.testing.assert_allclose(g, r, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("lens", [[13, 9, 0, 21, 17], [43, 40, 60, 30]])
@pytest.mark.parametrize("heads,lanes", [(8, 8), (8, 16), (24, 16), (4, 16), (16, 8)])
def test_heads_that_are_not_whole_vectors_nor_half_leave_the_nest_per_entry_and_head(heads, lanes, lens):
    """The rules' answers for short entries at a given width, by analysis alone (no code runs, so the
    16-lane cases are checked on every host): 8 heads fill half of 16 lanes and take them (AVX-512's
    256-bit registers) where rows padded to 16 would cost as much or more (``HALF_VECTOR_COST``: measured
    1, so for 9-21 tokens, 30% padded, and for 30-60, 5%, whose scores stay in L2); 24 heads (a vector and
    a half) or 4 (a quarter) never, and then nothing changes from
    per (entry, head) (a Func shaped like its consumers, the sum Q K^T, offers the heads' lanes whatever
    their count, and must not make the nest per entry by itself)."""
    program = rs.Pipeline([_attention(heads, 64)]).program()
    sched, params = heuristic(analyze(program, lambda dtype: lanes), None, None, lens)
    whole = _rules_take_heads(heads, lanes, lens)
    assert whole is (heads == 8 and (lanes == 8 or lens[0] == 13 or HALF_VECTOR_COST <= 1) or
                     heads == 16 and lanes == 8)
    assert params["attention.s0.per_entry"] is whole
    assert (S.Vectorize("S", 0, "h") in sched) is whole
    assert (S.Parallel("attention", 0, "b") in sched) is whole
    assert (S.Fuse("attention", 0, "b", "h", "bh") in sched) is not whole


def test_random_points_with_the_heads_lanes_compute_the_reference_or_are_refused(cpu_target):
    """Points of the space asking for a nest per entry with every producer's lanes along the heads, the
    rest random (tiles, tails, pads, copies, unrolling, sorting, where the other Funcs go): each computes
    the reference on the small inputs (an empty entry included) or is refused with a ValueError before
    generated code runs; drawn until one whose scores run along the heads has run (at most 12)."""
    pf = load(ROOT / "pipelines" / "attention.py")
    funcs = analyze(pf.pipeline().program(), cpu_target.natural_vector_size)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3))
    lanes = {f"{s}.lanes": "h" for s in ("S.s0", "P.s0", "top.s0", "top.s1", "den.s0", "den.s1", "inv.s0",
                                         "QK.s0", "QK.s1")}
    fixed = {"attention.s0.per_entry": True, "attention.s0.flatten": False, "attention.s0.flat_tiles": False,
             "attention.s0.columns_first": False, "S.compute": "at_batch", "QK.compute": "in_consumer", **lanes}
    inputs = pf.inputs("small")
    along_heads = 0
    for _ in range(12):
        study.enqueue_trial(fixed)
        sched = suggest(study.ask(), funcs)
        try:
            kern = checked_kernel(pf.pipeline(sched), inputs, threads=2)
        except ValueError:
            continue
        got = kern(**inputs)
        ok, err = matches(got, pf.reference(inputs))
        assert ok, (err, sched.to_python())
        along_heads += S.Vectorize("S", 0, "h") in sched
        if along_heads:
            break
    assert along_heads or not _along_heads(8, cpu_target.natural_vector_size(rs.float32))


@pytest.mark.parametrize("lanes", [8, 16])
def test_copies_along_the_heads_are_blocks_of_the_heads_and_cover_operands_made_in_the_nest(lanes):
    """By analysis alone (the 16-lane case on every host): the transposed copies that make a vector of
    heads contiguous run in blocks of at most the heads (8 heads at 16 lanes: blocks of 8; a split by 16
    left every element to the scalar rest, and attention on MNLI's lengths ran 1.12x slower); and in the
    encoder layer, whose Q and K are computed in the attention's nest in their own order (heads, then
    features), both are read through such copies (without Q's, the scores read a head 64 floats apart:
    the layer 1.09x slower)."""
    encoder = load(ROOT / "pipelines" / "encoder.py").pipeline().program()
    for program in (rs.Pipeline([_attention(8, 64)]).program(), encoder):
        sched, _ = heuristic(analyze(program, lambda dtype: lanes), None, None, [13, 9, 0, 21, 17])
        copies = {d.func for d in sched if isinstance(d, S.Wrap) and d.consumer == "QK"}
        assert copies == {"Q_in_QK", "K_in_QK"}, copies
        for d in sched:
            if isinstance(d, S.Split) and d.func in copies:
                assert d.factor <= 8 and d.tail == "split", d
