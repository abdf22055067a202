"""Passes over the low-level IR: prune checks that cannot fail, inline functions called once, hoist allocations out of loops."""
