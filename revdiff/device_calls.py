"""One call of a reversible function on GPU arrays (``f(*args)``, ``revdiff.vjp``): run as a batch of
one by the batched CUDA entries, so every program on the GPU is a batched kernel."""
from __future__ import annotations

from typing import TYPE_CHECKING

from revdiff.batch import BatchedFunction, is_array
from revdiff.runtime.device import cupy_module

if TYPE_CHECKING:
    from revdiff.function import ReversibleFunction


def _as_batch_of_one(f: ReversibleFunction, args: tuple) -> tuple:
    """(BatchedFunction, arguments) running one call of ``f`` as a batch of one on the GPU: arrays
    gain a leading axis of length 1, and so do the scalars ``f`` modifies."""
    cp = cupy_module()
    modified = f.forward_function.modified_positions()
    names, wrapped = [], []
    for k, (p, a) in enumerate(zip(f.params, args)):
        if is_array(a):
            names.append(p)
            wrapped.append(cp.asarray(a)[None])
        elif k in modified:
            names.append(p)
            wrapped.append(cp.asarray([a]))
        else:
            wrapped.append(a)
    return BatchedFunction(f, names), tuple(wrapped)


def _first(values: tuple, args: tuple) -> tuple:
    return tuple(None if v is None else (v[0] if is_array(a) else v[0].item()) if is_array(v) else v
                 for v, a in zip(values, args))


def device_call(f: ReversibleFunction, args: tuple) -> tuple:
    """``f(*args)`` where some arguments are GPU arrays: every parameter's final value."""
    bf, wrapped = _as_batch_of_one(f, args)
    return _first(bf(*wrapped), args)


def device_vjp(f: ReversibleFunction, args: tuple) -> tuple:
    """``revdiff.vjp`` on GPU arrays: (outs, pullback); the pullback reruns the fused kernel."""
    bf, wrapped = _as_batch_of_one(f, args)
    outs = _first(bf(*wrapped), args)

    def pullback(*cotangents):
        cts = []
        for p, a, c in zip(f.params, args, cotangents):
            if c is not None and p in bf.batched:
                c = c[None] if is_array(a) else [c]  # the leading batch axis of length one
            cts.append(c)
        return _first(bf.vjp(wrapped, tuple(cts))[1], args)

    return outs, pullback
