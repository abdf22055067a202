"""The SIMD-lane target: a program rewritten to run on several batch elements per call
(``rewrite.py``), and the modules of lane entries, compiled by the CPU target (``modules.py``)."""
