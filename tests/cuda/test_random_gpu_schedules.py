"""Random GPU schedules, run in the GPU emulator, against the NumPy reference.

Three small pipelines: a two-stage stencil (its producer inline, at root, staged per block in shared
memory, or per thread in registers), a reduction feeding a pointwise stage, and a ragged pointwise pair
over a flattened (b, i) loop with random lengths (0 and 1 among them). Block and thread tiles, tail
strategies and sizes are random; whatever the compiler refuses (ValueError) is a rejected example, and
each test checks that enough schedules were accepted that it cannot pass by refusing everything. The
emulator checks every access for bounds and races on top of the values; where there is a GPU, the same
schedules also run on it (CuPy arrays in and out for the dense pipelines).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

import ragsched as rs
from ragsched.reference import run
from ragsched.runtime.interop import to_device, to_host
from tests.cuda import DEVICES

EXAMPLES = int(os.environ.get("RAGSCHED_EXAMPLES", "40"))
FACTORS = [1, 2, 3, 4, 8]
_accepted: dict[str, int] = {}


def _compile_or_reject(out, device):
    try:
        return rs.Pipeline([out]).compile(target="cuda", device=device)
    except ValueError:
        reject()


def _call(kern, device, **inputs):
    """``kern`` on ``inputs``, dense arrays as CuPy arrays on a GPU and the result back as NumPy."""
    return kern(**inputs) if device == "emulate" else to_host(kern(**to_device(inputs)))


def _count(name: str) -> None:
    _accepted[name] = _accepted.get(name, 0) + 1


def stencil():
    x, y = rs.Var("x"), rs.Var("y")
    inp = rs.Input("inp", rs.float32, 2)
    f = rs.Func("f")
    f[y, x] = inp[y, x] * 2.0 + inp[y, x + 1]
    g = rs.Func("g")
    g[y, x] = f[y, x] + f[y + 1, x] * f[y, x]
    return f, g


def _grid(draw, func, y, x):
    """A random mapping of a 2-D stage to blocks and threads; returns the names of its block loops."""
    tail = draw(st.sampled_from(["guard", "auto"]))
    fy, fx = draw(st.sampled_from(FACTORS)), draw(st.sampled_from(FACTORS))
    if draw(st.booleans()):
        func.gpu_tile(y, x, "yo", "xo", "yi", "xi", fy, fx, tail=tail)
        return ["yo", "xo"], ["yi", "xi"]
    func.split(x, "xo", "xi", fx, tail=tail).reorder(y, "xo", "xi").gpu_blocks(y, "xo").gpu_threads("xi")
    return [y, "xo"], ["xi"]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), h=st.integers(1, 12), w=st.integers(1, 12), seed=st.integers(0, 2**16))
def _random_stencil_schedules(device, data, h, w, seed):
    f, g = stencil()
    blocks, thread_loops = _grid(data.draw, g, "y", "x")
    where = data.draw(st.sampled_from(["inline", "root", "shared", "register", "block_serial"]))
    if where == "inline":
        f.compute_inline()
    elif where == "root":
        if data.draw(st.booleans()):
            _grid(data.draw, f, "y", "x")
    elif where == "shared":
        f.compute_at(g, blocks[-1]).gpu_threads("y", "x")
    elif where == "register":
        f.compute_at(g, thread_loops[-1])
    else:  # computed per block by one thread, then read by all after a barrier
        f.compute_at(g, blocks[-1])
    kern = _compile_or_reject(g, device)
    inp = np.random.default_rng(seed).standard_normal((h + 1, w + 1)).astype(np.float32)
    try:
        got = _call(kern, device, inp=inp, out_shape=(h, w))
    except ValueError:  # a shifted tile larger than this small output: refused before the call
        reject()
    np.testing.assert_allclose(got, run(g, inp=inp, out_shape=(h, w)), rtol=1e-5, atol=1e-5)
    _count("stencil")


def reduction():
    x, y = rs.Var("x"), rs.Var("y")
    H, W = rs.Size("H"), rs.Size("W")
    inp = rs.Input("inp", rs.float32, [H, W])
    r = rs.RDom(0, W, name="r")
    s = rs.Func("s", dtype=rs.float32)
    s[y] = 0.0
    s[y] += inp[y, r]
    out = rs.Func("out", shape=[H, W])
    out[y, x] = s[y] * inp[y, x]
    return s, out


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), h=st.integers(1, 10), w=st.integers(1, 10), seed=st.integers(0, 2**16))
def _random_reduction_schedules(device, data, h, w, seed):
    s, out = reduction()
    _grid(data.draw, out, "y", "x")
    for stage in (s, s.update(0)):
        if data.draw(st.booleans()):
            stage.split("y", "yo", "yi", data.draw(st.sampled_from(FACTORS))).gpu_blocks("yo").gpu_threads("yi")
    if data.draw(st.booleans()):
        s.compute_at(out, "xo" if data.draw(st.booleans()) else "y")
    kern = _compile_or_reject(out, device)
    inp = np.random.default_rng(seed).standard_normal((h, w)).astype(np.float32)
    try:
        got = _call(kern, device, inp=inp)
    except ValueError:
        reject()
    np.testing.assert_allclose(got, run(out, inp=inp), rtol=1e-4, atol=1e-4)
    _count("reduction")


def ragged_pair():
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L, 4])
    b, i, c = rs.vars("b i c")
    Y = rs.Func("Y", shape=[B, L, 4])
    Y[b, i, c] = X[b, i, c] * 2.0 + 1.0
    Z = rs.Func("Z", shape=[B, L, 4])
    Z[b, i, c] = Y[b, i, c] * Y[b, i, 3 - c]
    return Y, Z


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), lengths=st.lists(st.integers(0, 7), min_size=1, max_size=5), seed=st.integers(0, 2**16))
def _random_ragged_schedules(device, data, lengths, seed):
    Y, Z = ragged_pair()
    if data.draw(st.booleans()):
        Z.fuse("b", "i", "bi").split("bi", "bo", "bt", data.draw(st.sampled_from([1, 4, 16, 64])))
        Z.gpu_blocks("bo").gpu_threads("bt")
        where = data.draw(st.sampled_from(["inline", "root", "register"]))
        if where == "inline":
            Y.compute_inline()
        elif where == "register":
            Y.compute_at(Z, "bt")
    rng = np.random.default_rng(seed)
    X = rs.RaggedArray.from_list([rng.standard_normal((n, 4)).astype(np.float32) for n in lengths], ragged_axes=[0])
    lens = np.array(lengths, np.int32)
    kern = _compile_or_reject(Z, device)
    got = kern(X=X, lens=lens)
    want = run(Z, X=X, lens=lens)
    assert got.lengths.tolist() == lengths
    np.testing.assert_allclose(got.values, want.values, rtol=1e-6)
    _count("ragged")


def _accepted_enough(run, name: str, device: str) -> None:
    """``run``'s examples, then at least a third of them accepted: the test cannot pass by refusing all."""
    _accepted[name] = 0
    run(device)
    assert _accepted[name] >= EXAMPLES // 3, (name, _accepted[name])


@pytest.mark.parametrize("device", DEVICES)
def test_random_stencil_schedules(device):
    _accepted_enough(_random_stencil_schedules, "stencil", device)


@pytest.mark.parametrize("device", DEVICES)
def test_random_reduction_schedules(device):
    _accepted_enough(_random_reduction_schedules, "reduction", device)


@pytest.mark.parametrize("device", DEVICES)
def test_random_ragged_schedules(device):
    _accepted_enough(_random_ragged_schedules, "ragged", device)
