"""The CUDA target: CUDA C of low-level IR (``emit.py``), the device functions and kernel modules of
a function's programs (``programs.py``), their launch through CuPy and a host build of the same
source (``launch.py``)."""
