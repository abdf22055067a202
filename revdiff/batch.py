"""Run a reversible function over a batch: ``revdiff.batched(f, ("Q", "R", "A"))``.

The named parameters carry a leading batch axis (scalars become 1-D arrays); the others are shared
by every element. Calls, vjps (forward then adjoint, element by element, so a matrix is still in
cache when its gradient is computed), jvps and Hessian-vector products each run as one generated
entry over the batch, split among threads (``batching.py``: one element per iteration or SIMD lanes;
CUDA kernels for GPU arrays), through the call driver (``execute.py``).
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np

from revdiff.batching import LAYOUTS, Batching
from revdiff.calls import Reversible, loss_index
from revdiff.execute import execute
from revdiff.runtime.device import any_on_device, cupy_module

__all__ = ["BatchedFunction", "batched", "LAYOUTS"]


class BatchedFunction(Batching):
    """``f`` mapped over the leading axis of the parameters named in ``batched``. ``layout``: "lanes"
    runs groups of elements in SIMD lanes, "elements" one element per iteration, "auto" lanes
    where they apply and pay (real data, small elements, large batches, control flow that does not
    depend on the data), else elements."""

    def __call__(self, *args: Any, donate: bool = False, **kwargs: Any) -> tuple:
        """Run ``f`` on every element, on copies of the arguments; returns every parameter's final
        value. CuPy arrays (or anything with __cuda_array_interface__) run on the GPU. ``donate``:
        run on the arrays given, without copying them (those ``f`` modifies end up holding their
        final values, and the results are those arrays; after a failure, the elements that failed, and
        in SIMD lanes the others of their group, hold partial values: every element runs, each with
        its own error record, and the first failed one is raised; in SIMD lanes a group stops at its
        first failing check, whose element is then the group's failed one)."""
        return execute(self.f, "call", self.f.bind(args, kwargs), batch=self, donate=donate)

    def value(self, *args: Any, donate: bool = False, **kwargs: Any) -> tuple:
        """``__call__``'s final values from the fused vjp's forward half, which frees the ancillas the
        call uncomputes and checks (a gradient recomputes and uncomputes them, checked): the same
        bits, in less time, and no refusal from an uncompute (nor its check: a NaN the call meets
        there comes out in the values). For the inverse ``~f``, its call."""
        return execute(self.f, "value", self.f.bind(args, kwargs), batch=self, donate=donate)

    def vjp(self, args: Sequence, cotangents: Sequence, donate: bool = False,
            wrt: Iterable[str] | None = None) -> tuple:
        """``(outs, grads)``: final values and, from ``cotangents`` of the final values (None: zero),
        the cotangents of the initial values (None for integer and bool parameters). ``donate``: the
        arrays of ``args`` are run on in place, not copies (a 10000 x 32x16 batch spends about a
        tenth of its gradient's time copying A otherwise); afterwards those of parameters ``f``
        modifies hold scratch values (the final values are in ``outs``, also after a failure), the
        others are unchanged. ``wrt``: the names of the parameters whose cotangents the caller
        reads (default: all); the others come back as None, and SIMD lanes leave them in their
        buffers instead of copying them out."""
        return execute(self.f, "vjp", self.f.bind(tuple(args)), cotangents, batch=self, donate=donate,
                       wrt=wrt)

    def jvp(self, args: Sequence, tangents: Sequence) -> tuple:
        """``(outs, out_tangents)``: ``revdiff.jvp`` of every element, tangents shaped like their
        arguments (None: zero; None for integer parameters). In SIMD lanes where calls run in them; GPU
        arrays as CUDA kernels."""
        return execute(self.f, "jvp", self.f.bind(tuple(args)), None, tangents, batch=self)

    def value_jvp(self, args: Sequence, tangents: Sequence) -> tuple:
        """``jvp``'s outs and out_tangents from the tangent of the fused vjp's forward half (``value``):
        the same bits, without the tangents of the uncomputes (nor their checks)."""
        return execute(self.f, "value_jvp", self.f.bind(tuple(args)), None, tangents, batch=self)

    def vjp_jvp(self, args: Sequence, cotangents: Sequence, tangents: Sequence) -> tuple:
        """``(outs, grads, out_tangents, grad_tangents)``: ``vjp(args, cotangents)``, and the
        derivatives of the final values and of the gradients along ``tangents`` (the cotangents held
        fixed), in one run of the tangent of the fused vjp per element. With the cotangent of a loss,
        ``grad_tangents`` is its Hessian times the tangents; a second derivative's backward pass
        reads both (``revdiff.torch``)."""
        return execute(self.f, "vjp_jvp", self.f.bind(tuple(args)), cotangents, tangents, batch=self)

    def hvp(self, loss: str | int, args: Sequence, v: Sequence) -> tuple:
        """``revdiff.hvp`` of every element: the Hessian of each element's final ``loss`` (a batched
        real scalar) times ``v``, per parameter (shared ones: summed over the batch, as the Hessian
        of the summed loss)."""
        k = loss_index(self.f, loss)
        args = self.f.bind(tuple(args))
        types = self._element_types(args)
        if self.f.params[k] not in self.batched or types[k].kind != "float" or types[k].ndim:
            raise TypeError(f"hvp: the loss '{self.f.parameter_names[k]}' must be a batched real scalar (one loss per element)")
        xp = cupy_module() if any_on_device(args) else np
        seeds = [xp.ones(self._size(args), types[k].dtype) if j == k else None for j in range(len(args))]
        return self.vjp_jvp(args, seeds, v)[3]


def batched(f: Reversible, batched: Sequence[str], layout: str = "auto") -> BatchedFunction:
    """``f`` over a leading batch axis of the parameters named in ``batched``, in parallel;
    ``layout`` "auto", "lanes" (SIMD lanes) or "elements" (one element per iteration)."""
    return BatchedFunction(f, batched, layout)
