"""The launch path through CuPy, without a GPU: a stand-in ``cupy`` module (arrays that are NumPy arrays
with ``.get()``, a module loader that checks it was given NVRTC's cubin, functions that run the named
kernel in the GPU emulator) takes the place of the real one, so what ``target="cuda"`` does around a
launch runs here: the argument checks on CuPy arrays, outputs allocated on the device, host code that
allocates and reads device buffers, each kernel's arguments (buffers, then scalars of the kernel's types)
and its grid and block, ragged calls copied to the device and back."""

from __future__ import annotations

import sys
import types
from collections import OrderedDict

import numpy as np
import pytest

import ragsched as rs
from ragsched.codegen import target as targets
from ragsched.codegen.gpu.emulate import compile_kernel, run_kernel
from ragsched.pipeline_file import load
from ragsched.runtime import compiler
from ragsched.runtime.interop import to_device, to_host
from tests import ROOT
from tests.cuda.stand_in import DeviceArray, cupy_module, device_array


def fake_cupy(kernels: dict, launches: list) -> types.ModuleType:
    """``kernels``: name -> DeviceKernel (the emulator's, for the same lowered code)."""

    class Module:
        def load(self, cubin: bytes):
            assert cubin[:4] == b"\x7fELF"  # NVRTC's cubin, not a placeholder
            self.loaded = True

        def get_function(self, name):
            k = kernels[name]
            fn = compile_kernel(k)

            def launch(grid, block, args):
                assert block == k.block_dims and len(grid) == 3
                n = len(k.buffers)
                arrays, scalars = args[:n], args[n:]
                assert all(isinstance(a, DeviceArray) for a in arrays), "a kernel got a host array"
                for (name_, t), v in zip(k.scalars, scalars, strict=True):
                    assert type(v) is t.np.type, (name_, type(v), t)
                launches.append(name)
                run_kernel(k, fn, grid, [np.asarray(a).reshape(-1) for a in arrays],
                           {name_: v.item() for (name_, _), v in zip(k.scalars, scalars, strict=True)})
            return launch

    return cupy_module(Module)


@pytest.fixture
def on_fake_gpu(monkeypatch):
    def use(kern_emulated):
        kernels = {k.name: k for k in kern_emulated._code.loaded.program.program.kernels}
        launches: list = []
        monkeypatch.setitem(sys.modules, "cupy", fake_cupy(kernels, launches))
        monkeypatch.setattr(targets, "gpu_present", lambda: True)
        # kernels loaded through the stand-in stay out of the process's cache of loaded code, where a
        # later test on a real GPU would be handed them (seen on one)
        monkeypatch.setattr(compiler, "_loaded", OrderedDict())
        return launches
    return use


def test_a_dense_pipeline_takes_and_returns_cupy_arrays(on_fake_gpu):
    pf = load(ROOT / "pipelines" / "blur.py")
    launches = on_fake_gpu(pf.pipeline("gpu").compile(target="cuda", device="emulate"))
    kern = pf.pipeline("gpu").compile(target="cuda")
    img = pf.inputs("small")["img"]
    got = kern(img=device_array(img))
    assert isinstance(got, DeviceArray) and launches == ["blur_y_k0"]
    np.testing.assert_allclose(got.get(), pf.reference({"img": img}), rtol=1e-6)
    with pytest.raises(TypeError, match="argument img must be a CuPy array"):
        kern(img=img)


def test_a_ragged_pipeline_runs_through_device_copies(on_fake_gpu):
    pf = load(ROOT / "pipelines" / "attention.py")
    launches = on_fake_gpu(pf.pipeline("gpu").compile(target="cuda", device="emulate"))
    kern = pf.pipeline("gpu").compile(target="cuda")
    inputs = pf.inputs("small")
    got = kern(**inputs)
    assert isinstance(got, rs.RaggedArray) and len(launches) > 5
    want = pf.reference(inputs)
    np.testing.assert_allclose(got.values, want.values, rtol=1e-4, atol=1e-5)


def test_inputs_go_to_the_device_and_results_come_back(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(asarray=device_array))
    img = np.arange(6, dtype=np.float32).reshape(2, 3)
    moved = to_device({"img": img, "scale": 2.0})
    assert isinstance(moved["img"], DeviceArray) and moved["scale"] == 2.0
    ragged = {"X": rs.RaggedArray.from_list([np.ones((2, 4), np.float32)], ragged_axes=[0]), "n": img}
    assert to_device(ragged) is ragged  # a ragged call copies its arrays itself
    back = to_host((moved["img"], img))
    assert type(back[0]) is np.ndarray and back[1] is img
    np.testing.assert_array_equal(back[0], img)
