"""One generic round-trip checker and one generic gradient checker, used by every test, and a
small reversible function the interop tests share."""
from __future__ import annotations

import numpy as np

import revdiff
from revdiff.language import routine, zero


@revdiff.reversible
def scaled_norm(out, x, c):
    """out += c |x|, with |x|² computed, used and uncomputed."""
    s = zero(float)
    with routine:
        for i in range(len(x)):
            s += x[i] * x[i]
    out += c * np.sqrt(s)
    ~routine
    del s


def marked_line(path: str, marker: str) -> int:
    """The number of the line of file ``path`` that ends with the marker comment ``# E:<marker>``."""
    with open(path) as f:
        for k, line in enumerate(f, 1):
            if line.rstrip().endswith(f"# E:{marker}"):
                return k
    raise LookupError(marker)


def assert_error_at(exc_info, path: str, marker: str, *phrases: str) -> None:
    """The error points at the line of ``path`` marked ``# E:<marker>`` and says ``phrases``."""
    err = exc_info.value
    assert (err.filename, err.lineno) == (path, marked_line(path, marker)), str(err)
    for p in phrases:
        assert p in str(err), str(err)


def copy_args(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) else a for a in args)


def assert_state_close(got, want, rtol=1e-12, atol=1e-12, exact=False):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if exact:
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
        else:
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)


def assert_round_trip(f, *args, rtol=1e-12, atol=1e-12, exact=False):
    """(~f)(*f(*args)) restores the state; returns the forward result."""
    original = copy_args(args)
    out = f(*copy_args(args))
    back = (~f)(*copy_args(out))
    assert_state_close(back, original, rtol, atol, exact)
    return out


def both_backends(f):
    return [f.with_options(backend="llvm"), f.with_options(backend="python")]


def assert_backends_agree(f, *args, rtol=1e-14, atol=0.0):
    a, b = (g(*copy_args(args)) for g in both_backends(f))
    assert_state_close(a, b, rtol, atol)
    return a


def assert_gradient(f, *args, tol=1e-6, eps=1e-6):
    """Inner-product test <u, J v> vs <J^T u, v> against central differences.

    Central differences have truncation error O(eps^2 * f''') ~ 1e-12 and rounding error
    O(u / eps) ~ 1e-10 relative for float64 with eps = 1e-6, so 1e-6 leaves a wide margin while
    still catching any wrong rule (those give O(1) errors)."""
    err = revdiff.check_grad(f, *args, eps=eps)
    assert err < tol, f"gradient check failed for {f}: relative error {err:.3e}"
    return err


def fused_vjp(f, args, cotangents):
    """(outputs, gradients) from f's fused vjp program, called directly."""
    from revdiff.calls import run
    spec = f.specialize(f.argument_types(args))
    types = spec.types
    grads = [np.array(c, dtype=np.asarray(a).dtype) if c is not None else np.zeros_like(np.asarray(a))
             for a, c, t in zip(args, cotangents, types) if t.differentiable]
    modified = sorted(f.modified_positions())
    saved = [np.zeros(np.shape(args[k]) or (1,), np.asarray(args[k]).dtype) for k in modified]
    result = run(spec.callable("vjp"), tuple(copy_args(args)) + tuple(g if g.ndim else g.item() for g in grads)
                 + tuple(saved))
    n = len(args)
    return saved, result[n:n + len(grads)]


def leaves(value) -> list:
    """The arrays of a nested tuple of results, in order."""
    return [v for item in value for v in leaves(item)] if isinstance(value, tuple) else [value]
