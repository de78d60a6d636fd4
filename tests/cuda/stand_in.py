"""A stand-in ``cupy`` module for running the CUDA launch path without a GPU: NumPy arrays marked as
device arrays (``__cuda_array_interface__``, ``.get()``), the array functions the runtime calls, and a
module loader class supplied by the test (what a launch runs)."""

from __future__ import annotations

import types

import numpy as np


class DeviceArray(np.ndarray):
    """A NumPy array standing for one on the device."""

    __cuda_array_interface__ = {}  # what marks an array on a CUDA device

    def get(self):
        return np.asarray(self).copy()


def device_array(a) -> DeviceArray:
    return np.ascontiguousarray(a).view(DeviceArray)


def cupy_module(module_class: type) -> types.ModuleType:
    """A ``cupy`` whose arrays are DeviceArrays and whose ``cuda.function.Module`` is ``module_class``."""
    cp = types.ModuleType("cupy")
    cp.ndarray = DeviceArray
    cp.empty = lambda shape, dtype: np.empty(shape, dtype).view(DeviceArray)
    cp.asarray = device_array
    cp.ascontiguousarray = device_array
    cp.may_share_memory = np.may_share_memory
    cp.cuda = types.SimpleNamespace(function=types.SimpleNamespace(Module=module_class))
    return cp
