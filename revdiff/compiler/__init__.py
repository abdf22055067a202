"""The compiler driver: a function specialised on its argument types and the passes each of its
programs runs from the high-level IR to the low-level IR the targets compile (``specialization``)."""
