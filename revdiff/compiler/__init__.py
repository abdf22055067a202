"""The compiler driver: the passes each program runs, the callees it depends on, and the compiled callables."""
