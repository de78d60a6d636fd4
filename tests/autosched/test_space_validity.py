"""Points of the search space that lowering or the call refused, now mapped to valid ones or refused
with a clear message. A Func read through a copy (``in_()``, a consumer's transposed copy of it) is
computed where every copy is: at root when a copy is, else no deeper in its nest than the copy's loop
(before, 19 of 40 uniform points of ragged attention and 31 of 60 of the encoder layer were refused:
"also used outside that loop"). A tile is no larger than a dimension a few points long, or not shifted.
A region computed from a flat loop's table outside it is refused naming both Funcs (it was a KeyError)."""

from __future__ import annotations

import optuna
import pytest

import ragsched as rs
from ragsched import schedule as S
from ragsched.autosched.space import analyze, suggest
from ragsched.codegen.lower import lower
from ragsched.pipeline_file import load
from tests.autosched.test_autoschedule import ROOT


@pytest.mark.parametrize("seed", range(0, 40, 4))
def test_no_point_computes_a_func_inside_a_loop_that_misses_its_copy(seed):
    pf = load(ROOT / "pipelines" / "attention.py")
    funcs = analyze(pf.pipeline().program(), rs.natural_vector_size)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for k in range(4):
        sched = suggest(optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed + k)).ask(), funcs)
        copied = {d.wrapped for d in sched if isinstance(d, S.Wrap)}
        p = pf.pipeline(sched)
        try:
            lower(p.program(), p.schedule())
        except ValueError as err:
            assert "used outside that loop" not in str(err) or not any(f"Func {n} " in str(err) for n in copied), \
                (str(err), sched.to_python())


def test_a_region_computed_from_a_flat_loops_table_outside_it_is_refused_naming_both():
    """A point the tuner drew (encoder layer, space 21): the FFN's input y at root, its region set by the
    tiles of down's fused (b, i) loop, whose table of entry starts exists only inside down's nest. Code
    generation raised a KeyError on the table; lowering now refuses it, naming y and down."""
    pf = load(ROOT / "pipelines" / "encoder.py")
    sched = rs.Schedule.from_json((ROOT / "tests" / "autosched" / "encoder_flat_table.json").read_text())
    with pytest.raises(ValueError, match=r"Func y's region .* the table of Func down's fused ragged loop"):
        pf.pipeline(sched).compile(threads=2)


@pytest.mark.parametrize("seed", range(0, 40, 8))
def test_no_tile_is_larger_than_a_dimension_a_few_points_long_unless_guarded(seed):
    """The encoder's heads (8) and a head's dims (64): a Func read at them (V = qkv[b, i, 2, h, d]) split
    by 32 along h shifted its tile to -24 and read qkv before its start, refused at the call (10 of the 25
    refused trials of a 5-minute tuning). Tiles are no larger than such a dimension now, or not shifted
    (guarded, or whole tiles and the rest apart)."""
    pf = load(ROOT / "pipelines" / "encoder.py")
    funcs = analyze(pf.pipeline().program(), rs.natural_vector_size)
    bounded = {f.name: dict(f.bounded) for f in funcs}
    assert bounded["V"] == {"h": 8, "d": 64} and bounded["a"] == {"h": 8, "d": 64}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for k in range(8):
        sched = suggest(optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed + k)).ask(), funcs)
        for d in sched:
            if isinstance(d, S.Split) and d.var in bounded.get(d.func, {}):
                assert d.factor <= bounded[d.func][d.var] or d.tail in ("guard", "split"), (d, sched.to_python())


def _small_blur():
    H, W = rs.Size("H"), rs.Size("W")
    y, x = rs.vars("y x")
    img = rs.Input("img", rs.float32, [H, W])
    e = rs.clamp_edge(img)
    bx = rs.Func("bx")
    bx[y, x] = e[y, x - 1] + e[y, x] + e[y, x + 1]
    out = rs.Func("out", shape=[H, W])
    out[y, x] = bx[y - 1, x] + bx[y, x] + bx[y + 1, x]
    return rs.Pipeline([out])


@pytest.mark.parametrize("seed", range(0, 24, 6))
def test_no_tile_of_an_output_is_larger_than_it_is_at_the_inputs_tuned_on(seed):
    """An output of 9 x 21 points: a tile of 64 columns shifted inwards started at -43, and the call
    refused it ("computes dimension 1 from index -43 to 20"): a quarter of the random points of random
    pipelines on small images. With the extents at the tuning inputs, every point computes the reference."""
    import numpy as np

    from ragsched.autosched.heuristic import estimate_extents
    from ragsched.reference import run

    pipe = _small_blur()
    img = np.random.default_rng(seed).random((9, 21), dtype=np.float32)
    program = pipe.program()
    funcs = analyze(program, rs.natural_vector_size, estimate_extents(program, {"img": img}))
    assert dict(next(f for f in funcs if f.name == "out").bounded) == {"y": 9, "x": 21}
    want = run(pipe.outputs, img=img)[0]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for k in range(6):
        sched = suggest(optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed + k)).ask(), funcs)
        got = pipe.compile(threads=2, schedule=sched)(img=img)
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=sched.to_python())


def test_no_point_flattens_a_func_computed_in_another_nest_that_several_funcs_read():
    """A Func computed in another Func's flat loop and fusing its own (b, i) is stored by flat position,
    which only that loop's Func reads (lowering refuses a second reader: it read wrong values before).
    Uniform points of the encoder layer (seeds 21 and 43 among them) flattened the projection and the
    FFN's down-projection so, both read by a layer norm's mean and by its output."""
    pf = load(ROOT / "pipelines" / "encoder.py")
    funcs = analyze(pf.pipeline().program(), rs.natural_vector_size)
    readers = {f.name: f.consumers for f in funcs}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for seed in range(60):
        sched = suggest(optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed)).ask(), funcs)
        fused = {d.func for d in sched if isinstance(d, S.Fuse) and (d.outer, d.inner) == ("b", "i")}  # (ragged)
        nested = {d.func for d in sched if isinstance(d, S.ComputeAt)}
        for name in fused & nested:
            assert len(readers[name]) == 1, (seed, name, readers[name])


def test_no_copy_moves_a_ragged_batch_inside_the_dims_whose_extents_depend_on_it():
    """A batch of ragged images summed per image: a transposed copy of img for the sum ran its batch
    innermost (the sum's lanes across images), inside the rows and columns whose extents depend on it,
    and lowering refused it ("loop '_1' cannot be outside loop '_0'"): 14 of 30 uniform points."""
    pf = load(ROOT / "pipelines" / "image_batch.py")
    funcs = analyze(pf.pipeline().program(), rs.natural_vector_size)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for seed in range(30):
        sched = suggest(optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed)).ask(), funcs)
        copies = {d.func for d in sched if isinstance(d, S.Wrap) and d.wrapped == "img"}
        for d in sched:
            if isinstance(d, S.ReorderStorage) and d.func in copies:
                assert d.vars[0] == "_0", (seed, d)
