"""Runtime: what generated code and its callers need while they run: the verified on-disk cache and the
loader, the host (BLAS) routines generated CPU code calls, lane buffers, BLAS threads, CuPy on first
use, and the scans the high-level functions make over their inputs."""
