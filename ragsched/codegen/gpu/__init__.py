"""What every GPU backend shares: the split of a lowered nest into host code and kernels (``kernels``),
barrier placement (``barriers``), the Python rendering of host code and kernels (``pyrender``) and the
GPU emulator (``emulate``)."""
