"""revdiff: instruction-level reversible differentiation in Python.

Write a reversible function under ``@reversible``; run it forward (``f(*args)``), backwards
(``(~f)(*args)``), and differentiate it by running it backwards (``vjp``, ``grad``), forward (``jvp``) or both
(``hvp``, ``hessian``).
"""
from revdiff.ad import check_grad, grad, vjp
from revdiff.forward_mode import hessian, hvp, jvp, vjp_jvp
from revdiff.batch import BatchedFunction, batched
from revdiff.diagnostics import Drift, peak_memory_growth, roundtrip_error
from revdiff.errors import CacheDirectoryError, RankDeficientError, ResultOverflowError, ReversibilityError
from revdiff.function import InverseFunction, ReversibleFunction, reversible
from revdiff.language import ancilla, irot, release, rot, routine, zero, zeros
from revdiff.runtime.threads import set_num_threads

__version__ = "0.1.0"

__all__ = ["reversible", "ReversibleFunction", "InverseFunction", "ReversibilityError", "RankDeficientError",
           "ResultOverflowError", "CacheDirectoryError", "rot", "irot", "zero", "zeros", "ancilla", "release",
           "routine", "vjp", "grad", "check_grad", "jvp", "hvp", "hessian", "vjp_jvp", "roundtrip_error", "Drift",
           "peak_memory_growth", "batched", "BatchedFunction", "set_num_threads"]
