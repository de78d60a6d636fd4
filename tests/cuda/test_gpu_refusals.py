"""What a GPU schedule cannot mean is refused before any code is made, naming the loop or Func: a thread
loop of data-dependent extent, a block loop whose extent depends on another GPU loop, shared memory asked
for a buffer outside every kernel, a vectorized loop on the GPU, and a GPU target on a machine without
one (the message points at the emulator). Also: a GPU schedule on the CPU target."""

from __future__ import annotations

import numpy as np
import pytest

import ragsched as rs
from ragsched.codegen import target as targets


def ragged():
    B = rs.Size("B")
    lens = rs.Input("lens", rs.int32, [B])
    L = rs.Ragged("L", lens)
    X = rs.Input("X", rs.float32, [B, L])
    b, i = rs.vars("b i")
    Y = rs.Func("Y", shape=[B, L])
    Y[b, i] = X[b, i] + 1.0
    return Y


def stencil():
    x, y = rs.Var("x"), rs.Var("y")
    inp = rs.Input("inp", rs.float32, 2)
    f = rs.Func("f")
    f[y, x] = inp[y, x] * 2.0
    g = rs.Func("g")
    g[y, x] = f[y, x] + f[y, x + 1]
    return f, g


def test_a_ragged_thread_loop_is_refused():
    Y = ragged()
    Y.gpu_blocks("b").gpu_threads("i")
    with pytest.raises(ValueError, match=r"GPU thread loop Y\.s0\.i has extent .*not a constant.*fuse\(b, i\)"):
        Y.compile(target="cuda", device="emulate")


def test_a_ragged_block_loop_inside_the_batch_block_loop_is_refused():
    Y = ragged()
    Y.split("i", "io", "ii", 4).gpu_blocks("b", "io").gpu_threads("ii")
    with pytest.raises(ValueError, match=r"(GPU block loop Y\.s0\.io has extent .*depends on Y\.s0\.b)|"
                                         r"(block loops of a kernel must be nested directly)"):
        Y.compile(target="cuda", device="emulate")


def test_shared_memory_for_a_buffer_outside_every_kernel_is_refused():
    f, g = stencil()
    f.store_in(rs.MemoryType.Shared)
    with pytest.raises(ValueError, match=r"Func f: store_in\('shared'\) needs its buffer inside a GPU kernel"):
        g.compile(target="cuda", device="emulate")


def test_a_vectorized_loop_is_refused_on_the_gpu():
    f, g = stencil()
    g.vectorize("x", 4)
    with pytest.raises(ValueError, match=r"vectorized loop.*cuda.*gpu_blocks/gpu_threads"):
        g.compile(target="cuda", device="emulate")


def test_a_gpu_schedule_is_refused_on_the_cpu():
    f, g = stencil()
    g.gpu_tile("y", "x", "yo", "xo", "yi", "xi", 4, 4)
    with pytest.raises(ValueError, match=r"gpu_block loop, which target cpu.*GPU loops need target='cuda'"):
        g.compile()


def test_device_applies_to_cuda_only():
    _, g = stencil()
    with pytest.raises(ValueError, match=r"device='emulate' applies to target='cuda' only"):
        g.compile(target="cpu", device="emulate")
    with pytest.raises(ValueError, match=r"device must be one of 'gpu', 'emulate'"):
        g.compile(target="cuda", device="tpu")


@pytest.mark.skipif(targets.gpu_present(), reason="this machine has a GPU")
def test_without_a_gpu_the_cuda_target_points_at_the_emulator():
    _, g = stencil()
    with pytest.raises(ValueError, match=r"no CUDA GPU.*device='emulate'"):
        g.compile(target="cuda")


def test_the_emulated_kernel_checks_its_arguments_like_the_cpu_kernel():
    _, g = stencil()
    kern = g.compile(target="cuda", device="emulate")
    with pytest.raises(TypeError, match=r"argument inp has dtype float64, expected float32"):
        kern(inp=np.zeros((4, 5)), out_shape=(4, 4))
    with pytest.raises(ValueError, match=r"reads inp along dimension 1 from index 0 to 5, outside its extent 5"):
        kern(inp=np.zeros((4, 5), np.float32), out_shape=(4, 5))
