"""The CUDA backend: CUDA C from the loop IR (``render``), compiled by NVRTC (``nvrtc``), launched through
CuPy or run in the GPU emulator (``backend``)."""
