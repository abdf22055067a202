"""The compiler driver: a function specialised on its argument types and the passes each of its programs
runs (``specialization``), the program graph (``graph``), batched entry signatures (``entries``),
and the modules of batched functions in SIMD lanes (``lanes``) and as CUDA kernels (``cuda``)."""
