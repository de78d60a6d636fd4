"""CUDA tests. ``DEVICES``: where a test runs GPU kernels: the emulator everywhere, and the GPU itself where
CuPy sees one (skipped cleanly elsewhere)."""

import pytest

from ragsched.codegen import target as targets

DEVICES = ["emulate", pytest.param("gpu", marks=pytest.mark.skipif(not targets.gpu_present(),
                                                                   reason="no CUDA GPU here"))]
