"""revdiff over Dask arrays: the high-level programs and their vjps on batches chunked along their
batch axes, on whatever scheduler is active (threads, processes, a ``dask.distributed`` cluster).

Each chunk of matrices is one call of the ``revdiff.programs`` function (its batch runs in parallel
inside the worker, as on one machine), so results equal a single-process call bit for bit. The
matrix and vector axes (the last two of A, the last of y) must each lie in one chunk: a chunked
core axis raises ``ValueError`` naming the argument and the axis. Batch axes of the arguments are
aligned as ``dask.array.apply_gufunc`` aligns them (equal shapes, or broadcast). Workers compile the
programs on first use into their ``REVDIFF_CACHE_DIR`` (the default ``~/.cache/revdiff`` on each
machine); a cache on a shared file system serves every worker.

An error inside a chunk (a rank-deficient matrix, say) names the batch index within that chunk.
Importing this module imports dask; importing revdiff does not (``pip install ".[dask]"`` from a
checkout).
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

import dask.array as da
import numpy as np

from revdiff import programs as P
from revdiff.programs.methods import q_columns

__all__ = ["qr", "qr_vjp", "project", "project_vjp", "lstsq", "lstsq_vjp", "normalize", "normalize_vjp",
           "tangent_project", "tangent_project_vjp"]


def _computed(*arrays) -> np.dtype:
    """The dtype the programs compute in: the promoted dtype, integers and bools as float64."""
    dtypes = [a.dtype if a.dtype.kind in "fc" else np.dtype(np.float64) for a in arrays]
    return np.result_type(*dtypes)


def _given(a) -> np.dtype:
    """The dtype of an argument's gradient, as the programs return it: the argument's own (integers
    and bools as float64, which they compute in), whatever the other arguments' dtypes."""
    return a.dtype if a.dtype.kind in "fc" else np.dtype(np.float64)


def _dask(name: str, value: Any, core: int) -> da.Array:
    """``value`` as a Dask array whose ``core`` last axes lie in one chunk each."""
    a = value if isinstance(value, da.Array) else da.asarray(value)
    if a.ndim < core:
        raise ValueError(f"'{name}' needs at least {core} dimension(s), got shape {a.shape}")
    for axis in range(a.ndim - core, a.ndim):
        if len(a.chunks[axis]) > 1:
            raise ValueError(f"'{name}' is split into {len(a.chunks[axis])} chunks along axis {axis} "
                             f"(chunks {a.chunks[axis]}), one of its matrix/vector axes: revdiff runs whole "
                             f"matrices; rechunk it, e.g. {name}.rechunk({{{axis}: -1}}), and chunk the "
                             "batch axes instead")
    a._revdiff_name = name  # for the message of ``_aligned``
    return a


def _aligned(arguments: list) -> None:
    """ValueError naming the arguments whose chunk sizes are unknown (``A[mask]`` leaves them so), when
    there are several arguments: their batch axes cannot be aligned without the sizes."""
    unknown = [getattr(a, "_revdiff_name", f"argument {k}") for k, a in enumerate(arguments)
               if any(np.isnan(size) for sizes in a.chunks for size in sizes)]
    if unknown and len(arguments) > 1:
        names = ", ".join(f"'{n}'" for n in unknown)
        first = unknown[0] if not unknown[0].startswith("argument") else "A"
        raise ValueError(f"{names} {'has' if len(unknown) == 1 else 'have'} unknown chunk sizes (as A[mask] "
                         "gives): their batch axes cannot be aligned with the other arguments'; call "
                         f"compute_chunk_sizes() first, e.g. {first} = {first}.compute_chunk_sizes()")


def _broadcasting(function: Callable, cores: tuple) -> Callable:
    """``function`` on blocks whose batch axes broadcast (as a gufunc's do): the programs take equal
    batch shapes, so each block is broadcast to the common one first."""

    def on_blocks(*blocks):
        batch = np.broadcast_shapes(*(b.shape[:b.ndim - c] for b, c in zip(blocks, cores)))
        return function(*(np.broadcast_to(b, batch + b.shape[b.ndim - c:]) for b, c in zip(blocks, cores)))

    return on_blocks


def _gufunc(function: Callable, signature: str, arguments: list, output_dtypes, output_sizes=None):
    inputs = signature.split("->")[0]
    cores = tuple(part.count(",") + 1 if part.strip("()") else 0 for part in inputs[1:-1].split("),("))
    _aligned(arguments)
    if any(0 in a.shape for a in arguments):  # empty: no work, and apply_gufunc cannot align empty axes
        out = _broadcasting(function, cores)(*(np.asarray(a) for a in arguments))
        return tuple(da.from_array(o) for o in out) if isinstance(out, tuple) else da.from_array(out)
    with warnings.catch_warnings():  # Dask casts an empty complex meta array to a real output's dtype
        warnings.simplefilter("ignore", getattr(np, "exceptions", np).ComplexWarning)  # np.ComplexWarning before NumPy 1.25
        return da.apply_gufunc(_broadcasting(function, cores), signature, *arguments, output_dtypes=output_dtypes,
                               output_sizes=output_sizes or {}, vectorize=False,
                               allow_rechunk=True)  # core axes are checked whole (``_dask``): this aligns batch chunks


def qr(A, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced"):
    """Q, R of every matrix of A (..., m, n), as ``revdiff.programs.qr`` (R alone for mode "r")."""
    A = _dask("A", A, 2)
    q = q_columns(method, mode, A.shape)
    dtype = _computed(A)
    if mode == "r":
        return _gufunc(lambda a: P.qr(a, method, rank_tol, mode), "(m,n)->(q,n)", [A], dtype, {"q": q})
    return _gufunc(lambda a: P.qr(a, method, rank_tol, mode), "(m,n)->(m,q),(q,n)", [A], (dtype, dtype), {"q": q})


def qr_vjp(A, gQ, gR, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced"):
    """The cotangent of A given those of Q and R (zeros where one is None), as ``revdiff.programs.qr_vjp``."""
    A = _dask("A", A, 2)
    m, n = A.shape[-2:]
    q = q_columns(method, mode, A.shape)
    dtype = _computed(A)
    if mode == "r" and gQ is not None:
        raise ValueError("mode='r' has no Q output: pass gQ=None")
    gR = _dask("gR", gR, 2) if gR is not None else da.zeros(A.shape[:-2] + (q, n), dtype,
                                                            chunks=A.chunks[:-2] + ((q,), (n,)))
    if mode == "r":
        return _gufunc(lambda a, r: P.qr_vjp(a, None, r, method, rank_tol, mode), "(m,n),(q,n)->(m,n)", [A, gR],
                       _given(A))
    gQ = _dask("gQ", gQ, 2) if gQ is not None else da.zeros(A.shape[:-1] + (q,), dtype, chunks=A.chunks[:-1] + ((q,),))
    return _gufunc(lambda a, g, r: P.qr_vjp(a, g, r, method, rank_tol, mode), "(m,n),(m,q),(q,n)->(m,n)",
                   [A, gQ, gR], _given(A))


def _matrix_and_vector(A, y) -> tuple:
    return _dask("A", A, 2), _dask("y", y, 1)


def _vectors(g, z) -> tuple:
    return _dask("g", g, 1), _dask("z", z, 1)


def project(A, y, method: str = "auto", rank_tol: float | None = None):
    """Q Q^H y for every matrix of A (..., m, n) and vector of y (..., m)."""
    A, y = _matrix_and_vector(A, y)
    return _gufunc(lambda a, b: P.project(a, b, method, rank_tol), "(m,n),(m)->(m)", [A, y], _computed(A, y))


def project_vjp(A, y, gz, method: str = "auto", rank_tol: float | None = None) -> tuple:
    """(gA, gy) given the cotangent of the projection z."""
    A, y = _matrix_and_vector(A, y)
    return _gufunc(lambda a, b, g: P.project_vjp(a, b, g, method, rank_tol), "(m,n),(m),(m)->(m,n),(m)",
                   [A, y, _dask("gz", gz, 1)], (_given(A), _given(y)))


def _tall(A) -> None:
    if A.shape[-2] < A.shape[-1]:
        raise ValueError(f"lstsq needs a tall or square A (m >= n) of full column rank; A has shape {A.shape}")


def lstsq(A, y, method: str = "auto", rank_tol: float | None = None):
    """The least-squares solution x (..., n) for every matrix of A (..., m, n), m >= n, of full column rank."""
    A, y = _matrix_and_vector(A, y)
    _tall(A)
    return _gufunc(lambda a, b: P.lstsq(a, b, method, rank_tol), "(m,n),(m)->(n)", [A, y], _computed(A, y))


def lstsq_vjp(A, y, gx, method: str = "auto", rank_tol: float | None = None) -> tuple:
    """(gA, gy) given the cotangent of the least-squares solution x."""
    A, y = _matrix_and_vector(A, y)
    _tall(A)
    return _gufunc(lambda a, b, g: P.lstsq_vjp(a, b, g, method, rank_tol), "(m,n),(m),(n)->(m,n),(m)",
                   [A, y, _dask("gx", gx, 1)], (_given(A), _given(y)))


def normalize(x):
    """x / |x| along the last axis."""
    x = _dask("x", x, 1)
    return _gufunc(P.normalize, "(n)->(n)", [x], _computed(x))


def normalize_vjp(x, gy):
    """The cotangent of x given that of x / |x|."""
    x = _dask("x", x, 1)
    return _gufunc(P.normalize_vjp, "(n),(n)->(n)", [x, _dask("gy", gy, 1)], _given(x))


def tangent_project(g, z):
    """g - (z_hat^H g) z_hat along the last axis, z_hat = z / |z|."""
    g, z = _vectors(g, z)
    return _gufunc(P.tangent_project, "(n),(n)->(n)", [g, z], _computed(g, z))


def tangent_project_vjp(g, z, gout) -> tuple:
    """(gg, gz) given the cotangent of the tangent projection."""
    g, z = _vectors(g, z)
    return _gufunc(P.tangent_project_vjp, "(n),(n),(n)->(n),(n)", [g, z, _dask("gout", gout, 1)],
                   (_given(g), _given(z)))
