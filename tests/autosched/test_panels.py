"""Panels (space version 14): an entry's operand whose rows lie apart (V[b, j, h, d] in a sum over j
along d: rows of one head are a whole token of every head apart) is read through a copy per entry with
its rows contiguous. Checked by analysis on shapes no rule was written beside, by the rules on long
entries (where the lanes run along the rows), against float64 NumPy on lengths the kernel was not made
for, and on random points of the space that ask for a panel."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched import schedule as S
from ragsched.autosched.heuristic import Machine, _panel_pays, heuristic
from ragsched.autosched.space import analyze, suggest
from ragsched.runtime.compare import matches
from tests.autosched.test_head_lanes import _attention, _inputs, _reference
from tests.checked import checked_kernel

LONG = [300, 410, 290, 512]


def _stage(program, name: str, stage: int, lanes: int = 8):
    return next(f for f in analyze(program, lambda dtype: lanes) if f.name == name).stages[stage]


@pytest.mark.parametrize("heads,dim", [(8, 64), (4, 32)])
def test_an_entrys_operand_with_rows_apart_is_a_panel(heads, dim):
    """V[b, j, h, d]: rows j lie a token of every head apart (heads x dim float32s)."""
    program = rs.Pipeline([_attention(heads, dim)]).program()
    assert _stage(program, "PV", 1).panels == (("V", ("_0", "_2", "_1", "_3"), heads * dim * 4),)
    assert _stage(program, "QK", 1).panels == ()  # K's rows are read with the sum's index innermost: a copy


def test_contiguous_rows_and_shared_weights_are_not_panels():
    """B[b, k, n]: the rows of one entry are contiguous already; W[k, n]: every entry's (a strip)."""
    B, N = rs.Size("B"), rs.Size("N")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    x = rs.Input("x", rs.float32, [B, L, 16])
    y = rs.Input("y", rs.float32, [B, L, N])
    w = rs.Input("w", rs.float32, [16, N])
    b, i, n = rs.vars("b i n")
    r = rs.RDom(0, lens[b], name="r")
    c = rs.RDom(0, 16, name="c")
    by_rows = rs.Func("by_rows", shape=[B, 16, N])
    by_rows[b, i, n] = 0.0
    by_rows[b, i, n] += x[b, r, i] * y[b, r, n]
    by_weights = rs.Func("by_weights", shape=[B, L, N])
    by_weights[b, i, n] = 0.0
    by_weights[b, i, n] += x[b, i, c] * w[c, n]
    program = rs.Pipeline([by_rows, by_weights]).program()
    assert _stage(program, "by_rows", 1).panels == ()
    assert _stage(program, "by_weights", 1).panels == ()
    assert _stage(program, "by_weights", 1).strips == (("w", "_1", ("_0", "_1")),)


@pytest.fixture(scope="module")
def long_rules():
    """The rules' schedule for long entries of 4 heads of 32, and its kernel."""
    out = _attention(4, 32)
    sched = rs.autoschedule([out], trials=0, inputs=_inputs(LONG, 4, 32), threads=2)
    return sched, rs.Pipeline([out]).compile(threads=2, schedule=sched)


def test_long_entries_read_v_through_a_panel_per_entry_and_head(long_rules):
    sched, _ = long_rules
    assert S.Parallel("attention", 0, "bh") in sched  # per (entry, head): the lanes along the rows
    assert S.Wrap("V_in_PV", "V", "PV") in sched
    assert S.ComputeAt("V_in_PV", "attention", "bh") in sched
    assert S.ReorderStorage("V_in_PV", ("_0", "_2", "_1", "_3")) in sched


@settings(max_examples=8, deadline=None)
@given(lens=st.lists(st.integers(0, 70), min_size=1, max_size=5), seed=st.integers(0, 2**16))
def test_the_long_entries_kernel_computes_attention_for_any_lengths(long_rules, lens, seed):
    _, kern = long_rules
    inputs = _inputs(lens, 4, 32, seed)
    for n, g, r in zip(lens, kern(**inputs).to_list(), _reference(inputs, 32), strict=True):
        assert g.shape == (n, 4, 32)
        np.testing.assert_allclose(g, r, rtol=2e-4, atol=2e-5)


def test_random_points_with_a_panel_compute_the_reference_or_are_refused(cpu_target):
    """Points asking for V's panel, the rest random (where P V is computed, and so its panel: per entry,
    or per entry and head; none where no nest computes it per entry): each computes the reference on lengths with an
    empty entry, or is refused with a ValueError before generated code runs; drawn until one with a
    panel has run (at most 24)."""
    out = _attention(4, 32)
    funcs = analyze(rs.Pipeline([out]).program(), cpu_target.natural_vector_size)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=5))
    inputs = _inputs([7, 0, 19, 3], 4, 32, seed=1)
    want = _reference(inputs, 32)
    ran = 0
    for _ in range(24):
        study.enqueue_trial({"PV.s1.panel.V": True, "PV.s1.lanes": "d"})
        sched = suggest(study.ask(), funcs)
        try:
            kern = checked_kernel(rs.Pipeline([_attention(4, 32)]), inputs, threads=2, schedule=sched)
        except ValueError:
            continue
        got = kern(**inputs)
        for g, r in zip(got.to_list(), want, strict=True):
            ok, err = matches(g, r.astype(np.float32))
            assert ok, (err, sched.to_python())
        ran += any(isinstance(d, S.Wrap) and d.func == "V_in_PV" for d in sched)
        if ran:
            break
    assert ran


PINNED = Machine(2, 512 * 1024, 32 * 1024, 8)  # a 32 KB 8-way L1: 16 rows 2 KB apart fit in its sets


def test_a_panel_pays_where_most_work_is_in_entries_longer_than_the_l1_sets_hold():
    assert not _panel_pays(2048, [16, 16, 3], PINNED)  # 16 rows 2 KB apart: 2 sets of 8 ways
    assert _panel_pays(2048, [17, 17, 3], PINNED)
    assert not _panel_pays(2048, [40] + [10] * 17, PINNED)  # 1600 of 3300: less than half the work
    assert _panel_pays(2048, [40] + [10] * 16, PINNED)  # 1600 of 3200
    assert _panel_pays(None, [9, 9], PINNED) and not _panel_pays(None, [8, 8], PINNED)  # (worst case: 8)
    assert _panel_pays(256, [200], PINNED) and not _panel_pays(256, [128], PINNED)  # 16 sets: 128 rows
    assert not _panel_pays(2048, None, PINNED) and not _panel_pays(2048, [0, 0], PINNED)


@pytest.mark.parametrize("lanes", [8, 16])
def test_the_rules_take_the_panel_where_the_lanes_run_along_long_rows(lanes):
    """By analysis alone, the cache pinned (so the 16-lane case is checked on every host): short and
    medium entries take the heads' lanes (8 heads: a vector at 8 lanes, half of one at 16, which costs no
    more than rows padded to 16: ``HALF_VECTOR_COST``), the nest per entry, where a copy of V would only
    reorder an entry's contiguous block (measured as fast: no panel); long ones keep the rows' lanes per
    (entry, head), where V's rows 2 KB apart are read through its panel once most work is in entries
    longer than the 16 rows the L1 holds of them."""
    from ragsched.autosched.heuristic import HALF_VECTOR_COST

    program = rs.Pipeline([_attention(8, 64)]).program()
    funcs = analyze(program, lambda dtype: lanes)
    medium = lanes == 16 and HALF_VECTOR_COST > 1.05  # (rows padded 5% at 16 lanes)
    for lens, want in (([13, 9, 0, 12, 7], False), ([43, 40, 60, 30], medium), (LONG, True)):
        sched, params = heuristic(funcs, None, PINNED, lens)
        assert (S.Wrap("V_in_PV", "V", "PV") in sched) is want, (lanes, lens)
        assert params.get("PV.s1.panel.V", False) is want


def _strip_layouts(schedule):
    return [d for d in schedule if isinstance(d, S.StoreLayout)]


def test_a_strip_of_weights_is_copied_as_panels_a_tile_wide_where_the_tiles_are_aligned(cpu_target):
    """A linear layer (strips of whole tiles, the last strip apart): its strip of weights is stored as
    panels of one tile's columns, each panel's rows after one another, and computes the reference; a
    matrix product whose last strip is shifted (its tiles at no multiple of their width) keeps rows."""
    from ragsched.pipeline_file import load
    from tests.autosched.test_autoschedule import ROOT

    lanes = cpu_target.natural_vector_size(rs.float32)
    pf = load(ROOT / "pipelines" / "linear.py")
    inputs = pf.inputs("small")
    rules = rs.autoschedule(pf.pipeline(), trials=0, inputs=inputs)
    (panel,) = _strip_layouts(rules)
    width = lanes * (4 if lanes >= 16 else 2)  # the rules' register tile
    assert panel.func == "W_in_total" and panel.layout.out_sizes == {"_0": 1, "_1": width}
    assert any(isinstance(d, S.ReorderStorage) and d.func == "W_in_total" and d.vars == ("_1", "_0")
               for d in rules)
    got = pf.pipeline(rules).compile()(**inputs)
    ok, err = matches(got, pf.reference(inputs))
    assert ok, err
    matmul = load(ROOT / "pipelines" / "matmul.py")
    rules = rs.autoschedule(matmul.pipeline(), trials=0, inputs=matmul.inputs("full"))  # (not compiled)
    assert any(isinstance(d, S.Wrap) for d in rules) and not _strip_layouts(rules)


@pytest.mark.parametrize("seed", range(4))
def test_random_points_that_ask_for_strip_panels_compute_the_reference(seed, cpu_target):
    """Random points of the space with a strip copy as panels where their tiles allow one (else rows)."""
    from ragsched.pipeline_file import load
    from tests.autosched.test_autoschedule import ROOT

    pf = load(ROOT / "pipelines" / "linear.py")
    inputs = pf.inputs("small")
    funcs = analyze(pf.pipeline().program(), cpu_target.natural_vector_size)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # the strip copy and its panels asked for wherever they apply; the rest at random
    study.enqueue_trial({"Y.s0.columns_first": True, "total.s1.strip_copy.W": True, "total.s1.strip_panels.W": True},
                        skip_if_exists=False)
    sched = suggest(study.ask(), funcs)
    try:
        kern = checked_kernel(pf.pipeline(sched), inputs)
    except ValueError:  # a point refused before running (the space's points may be)
        return
    got = kern(**inputs)
    ok, err = matches(got, pf.reference(inputs))
    assert ok, (err, sched.to_python())
