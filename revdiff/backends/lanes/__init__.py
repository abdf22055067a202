"""The SIMD-lane backend: a program rewritten to run on several batch elements per call."""
