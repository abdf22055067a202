"""One call of a reversible function on GPU arrays (``f(*args)``, ``revdiff.vjp``, ``revdiff.jvp``,
``revdiff.vjp_jvp``): run as a batch of one by the batched CUDA entries, so every program on the GPU
is a batched kernel."""
from __future__ import annotations

import numpy as np

from revdiff.batch import BatchedFunction, is_array
from revdiff.calls import Reversible, check_array_cotangent, cotangent_value, scalar_expected
from revdiff.runtime.device import cupy_module



#: (function, batched parameters) -> its BatchedFunction, so that repeated calls (and a Hessian's
#: columns) reuse one compiled kernel module: the modules are cached per BatchedFunction
_BATCHES: dict = {}


def _batch_of(f: Reversible, names: tuple) -> BatchedFunction:
    key = (f, names)
    if key not in _BATCHES:
        _BATCHES[key] = BatchedFunction(f, names)
    return _BATCHES[key]


def _as_batch_of_one(f: Reversible, args: tuple) -> tuple:
    """(BatchedFunction, arguments) running one call of ``f`` as a batch of one on the GPU: arrays
    gain a leading axis of length 1, and so do the scalars ``f`` modifies."""
    f.argument_types(args)  # what the CPU refuses (0-d arrays, unsupported dtypes), refused alike
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
    return _batch_of(f, tuple(names)), tuple(wrapped)


def _as_batch_values(bf: BatchedFunction, args: tuple, values, what: str) -> tuple:
    """Per-parameter cotangents or tangents (``what``) of a call as the batch of one reads them: those
    of batched parameters gain the leading axis of length one (None stays None). A sequence of the
    wrong length is passed on as it is, for the batched function to refuse by name."""
    if not isinstance(values, (tuple, list)) or len(values) != len(args):
        return values
    out = []
    for p, shown, a, v in zip(bf.f.params, bf.f.parameter_names, args, values):
        if v is not None and p in bf.batched:
            if is_array(a):  # checked against the element, so that errors name its shape
                v = v if is_array(v) else np.asarray(cotangent_value(shown, v, what))
                check_array_cotangent(shown, a, v, what)
                v = v[None]
            elif is_array(v) or isinstance(v, (list, tuple)):
                raise scalar_expected(p, what)
            else:
                v = np.asarray(cotangent_value(p, v, what)).reshape(1)
        out.append(v)
    return tuple(out)


def _first(values: tuple, args: tuple) -> tuple:
    """Element 0 of each batched value: an array for an array argument, else a Python number (as
    the CPU's single calls return scalars, NumPy scalar arguments included)."""
    def first(v, a):
        if not is_array(v):
            return v
        return v[0] if is_array(a) else v[0].item()
    return tuple(first(v, a) for v, a in zip(values, args))


def device_call(f: Reversible, args: tuple) -> tuple:
    """``f(*args)`` where some arguments are GPU arrays: every parameter's final value."""
    bf, wrapped = _as_batch_of_one(f, args)
    return _first(bf(*wrapped), args)


def device_vjp(f: Reversible, args: tuple) -> tuple:
    """``revdiff.vjp`` on GPU arrays: (outs, pullback); the pullback reruns the fused kernel."""
    bf, wrapped = _as_batch_of_one(f, args)
    outs = _first(bf(*wrapped), args)

    def pullback(*cotangents):
        return _first(bf.vjp(wrapped, _as_batch_values(bf, args, cotangents, "cotangent"))[1], args)

    return outs, pullback


def device_jvp(f: Reversible, args: tuple, tangents) -> tuple:
    """``revdiff.jvp`` on GPU arrays: (outs, out_tangents), from the batched tangent kernel."""
    bf, wrapped = _as_batch_of_one(f, args)
    outs, out_tangents = bf.jvp(wrapped, _as_batch_values(bf, args, tangents, "tangent"))
    return _first(outs, args), _first(out_tangents, args)


def device_vjp_jvp(f: Reversible, args: tuple, cotangents, tangents) -> tuple:
    """``revdiff.vjp_jvp`` on GPU arrays: (outs, grads, out_tangents, grad_tangents), from the batched
    kernel of the tangent of the fused vjp."""
    bf, wrapped = _as_batch_of_one(f, args)
    values = bf.vjp_jvp(wrapped, _as_batch_values(bf, args, cotangents, "cotangent"),
                        _as_batch_values(bf, args, tangents, "tangent"))
    return tuple(_first(v, args) for v in values)
