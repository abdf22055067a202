"""The CUDA backend: CUDA C of low-level IR, kernel modules, their launch, and a host build of the same source."""
