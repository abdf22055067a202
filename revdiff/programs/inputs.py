"""Arguments and results of the high-level functions: dtypes, shapes, finiteness, the power-of-two
scaling of extreme magnitudes, rank checks and non-finite results, each refused with a named error
that says which argument, batch element and column.

Scaling: a column of A (a vector, for the vector arguments) whose largest magnitude lies outside
[2**-s, 2**s] (s = 500 in double, 52 in single precision) is multiplied by a power of two that
brings it to [0.5, 1) before the programs run, and the results are scaled back. Multiplying by a
power of two is exact, Q and the column space do not change under positive column scaling, and
the results and gradients are homogeneous in each argument, so the results are those of the
unscaled arguments, computed where no intermediate overflows or underflows; values inside the
range are left as they are. Cotangents are scaled the same way (gradients are linear in them).
"""
from __future__ import annotations

import functools
import math
import numbers

import numpy as np

from revdiff.errors import RankDeficientError, ResultOverflowError
from revdiff.runtime.device import any_on_device, cupy_module, on_device
from revdiff.programs.scan import (in_range, largest, largest_per_column, largest_per_element, rank_ratios,
                                   safe_exponent, smallest)

DTYPES = (np.float32, np.float64, np.complex64, np.complex128)


def array_module(a):
    """The array module of ``a``: CuPy for GPU arrays (the programs then run as CUDA kernels), else NumPy."""
    if on_device(a):
        return cupy_module()
    return np


def one_device(program):
    """``program`` (a public high-level function) with its arguments on one device: NumPy arrays
    move to the GPU when any argument lives there, as ``revdiff.batched`` moves them, so a host
    direction or cotangent for GPU values is accepted everywhere."""
    @functools.wraps(program)
    def on_one_device(*args, **kwargs):
        if any_on_device(args) or any_on_device(kwargs.values()):
            cp = cupy_module()
            move = lambda a: cp.asarray(a) if isinstance(a, np.ndarray) else a
            args, kwargs = tuple(move(a) for a in args), {k: move(v) for k, v in kwargs.items()}
        return program(*args, **kwargs)
    return on_one_device


def as_array(name: str, value, min_ndim: int, dtype=None, cotangent_of=None, core: str = "",
             role: str = "cotangent"):
    """``value`` as a contiguous array of a supported dtype with at least ``min_ndim`` axes
    (``core`` names them in the error). Integers and bools become float64, as in NumPy's linalg;
    ``dtype``: cast to it. ``cotangent_of``: the dtype of the value this array is the ``role``
    ("cotangent" or "tangent") of; the array gets that dtype, and a complex one of a real value is
    refused (its imaginary part would be dropped)."""
    if type(value) is np.ndarray and value.dtype.type in DTYPES and value.dtype.isnative and value.ndim >= min_ndim \
            and value.flags.c_contiguous and value.dtype == (cotangent_of if cotangent_of is not None else
                                                          dtype if dtype is not None else value.dtype):
        return value  # as it would come out (the usual case, checked in a few attribute reads)
    if value is None:
        raise TypeError(f"'{name}' is None; pass an array (zeros for a zero {role})" if cotangent_of is not None
                        else f"'{name}' is None; pass an array")
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(f"'{name}' is a masked array, whose masked entries would be read; pass np.asarray(a) "
                        "or a.filled(value)")
    xp = array_module(value)
    try:
        a = xp.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"'{name}' is not a numeric array: {exc}") from None
    if a.dtype.type not in DTYPES:
        if a.dtype == np.bool_ or np.issubdtype(a.dtype, np.integer):
            a = a.astype(np.float64)
        else:
            raise TypeError(f"'{name}' has dtype {a.dtype}; revdiff's programs run in float32, float64, "
                            "complex64 and complex128 (convert it, e.g. with .astype(np.float32))")
    if cotangent_of is not None:
        if np.iscomplexobj(a) and not np.issubdtype(cotangent_of, np.complexfloating):
            raise TypeError(f"'{name}' is complex but the value it is the {role} of is real "
                            f"({cotangent_of}); pass its real part")
        dtype = cotangent_of
    if dtype is not None:
        a = a.astype(dtype, copy=False)
    if not a.dtype.isnative:  # the programs read native byte order
        a = a.astype(a.dtype.newbyteorder("="))
    if a.ndim < min_ndim:
        raise ValueError(f"'{name}' needs at least {min_ndim} dimension(s){core}, got shape {tuple(a.shape)}")
    return xp.ascontiguousarray(a)


def batch_index(shape: tuple, flat: int) -> tuple:
    return tuple(int(i) for i in np.unravel_index(flat, shape)) if shape else ()


def flat(a, core: int):
    """``a`` with its batch axes merged into one (a single matrix becomes a batch of one)."""
    batch = a.shape[:a.ndim - core]
    return a.reshape((math.prod(batch),) + tuple(a.shape[a.ndim - core:]))


def require_finite(name: str, a, batch_shape: tuple, xp, per_column: bool = False):
    """The largest magnitude of each batch element of ``a`` (flattened to one batch axis), or of
    each of its columns (last axis); ValueError naming the first element that holds a NaN or an
    infinity."""
    return _finite(name, _magnitudes(a, xp, per_column), batch_shape, xp, per_column)


def magnitudes_and_exponents(arguments: list, xp) -> list:
    """Per (name, a, batch_shape, per_column) of ``arguments`` (``a`` flattened to one batch axis):
    (``require_finite``'s largest magnitudes, ``scale_exponents``' exponents) of ``a``. Where every
    magnitude is finite and in range (the usual case) they come from one compiled pass over all the
    arrays on the CPU (``scan.in_range``; NumPy's or CuPy's reductions on a GPU or where an array is
    empty); otherwise (a zero column or vector included) from those two functions' own steps."""
    if xp is np and all(a.size for _, a, _, _ in arguments):
        bigs, inside = in_range([(a, per_column) for _, a, _, per_column in arguments])
    else:
        bigs = [_magnitudes(a, xp, per_column) for _, a, _, per_column in arguments]
        inside = [bool(big.size) and _inside(big, a.dtype, xp) for big, (_, a, _, _) in zip(bigs, arguments)]
    return [(big, None) if ok else (_finite(name, big, batch, xp, per_column), scale_exponents(big, a.dtype, xp))
            for big, ok, (name, a, batch, per_column) in zip(bigs, inside, arguments)]


def _magnitudes(a, xp, per_column: bool):
    """The largest magnitude of each batch element of ``a``, or of each of its columns."""
    if per_column:
        return largest_per_column(a, xp) if a.shape[0] else xp.zeros((0, a.shape[-1]))
    return largest_per_element(a, xp) if a.shape[0] else xp.zeros(0)


def _finite(name: str, big, batch_shape: tuple, xp, per_column: bool):
    """``big`` (largest magnitudes), or ValueError naming the first batch element where one is not finite."""
    if big.size == 0 or bool(xp.isfinite(largest(big, xp))):  # the max of magnitudes is NaN or inf with any of them
        return big
    bad = ~xp.all(xp.isfinite(big), axis=1) if per_column else ~xp.isfinite(big)
    if bool(xp.any(bad)):
        b = int(xp.argmax(bad))
        raise ValueError(f"'{name}' contains NaN or Inf (at batch index {batch_index(batch_shape, b)})")
    return big


def outside_range(big, dtype):
    """Where largest magnitudes ``big`` lie outside [2**-s, 2**s] (``safe_exponent``): the values to
    scale; zeros and NaN are not (a zero needs no scaling; a NaN is refused by the finiteness check)."""
    s = safe_exponent(dtype)
    return (big > 2.0 ** s) | ((big < 2.0 ** -s) & (big > 0))


def scale_exponents(big, dtype, xp):
    """The exponent e with big * 2**-e in [0.5, 1) where ``big`` (largest magnitudes) lies outside
    [2**-s, 2**s] (0 elsewhere), or None when every value lies inside."""
    if big.size == 0 or _inside(big, dtype, xp):
        return None  # every value inside (the usual case)
    outside = outside_range(big, dtype)
    if not bool(xp.any(outside)):
        return None
    return xp.where(outside, xp.frexp(big)[1], 0).astype(np.int32)


def _inside(big, dtype, xp) -> bool:
    """Whether every magnitude of ``big`` (not empty) lies in [2**-s, 2**s], ``safe_exponent``'s s:
    two reductions, or one read for a single value; a NaN fails the comparisons."""
    s = 2.0 ** safe_exponent(dtype)
    lo, hi = (big.item(),) * 2 if big.size == 1 else (float(smallest(big, xp)), float(largest(big, xp)))
    return 1 / s <= lo and hi <= s


def direction_exponents(directions, dtype, xp):
    """h per batch element for tangents that a program reads scaled as their values: for pairs
    (D, e), D a tangent flattened to one batch axis and e the exponents its value is scaled by (per
    element, per column of a matrix, or None), the exponent that brings the largest |D 2**-e| into
    [2**-s, 2**s] (as ``scale_exponents``; 0 where it lies inside), or None when every one does.
    Found from D's own exponents, so that D 2**(-e-h) is formed in one exact step: a tangent far
    below or above its value would underflow or overflow if scaled as the value first."""
    s = safe_exponent(dtype)
    never = -(1 << 30)  # the exponent of a zero tangent: never outside
    top = None
    for D, e in directions:
        if D.shape[0] == 0:
            return None
        per_column = e is not None and e.ndim == 2
        big = largest_per_column(D, xp) if per_column else largest_per_element(D, xp)
        k = xp.where(big > 0, xp.frexp(big)[1].astype(np.int64) - (0 if e is None else e), never)
        if per_column:
            k = k.max(axis=1)
        top = k if top is None else xp.maximum(top, k)
    outside = (top > s) | ((top <= -s) & (top > never))
    if not bool(xp.any(outside)):
        return None
    return xp.where(outside, top, 0).astype(np.int32)


def times_power_of_two(a, e, xp):
    """a * 2**e, exactly (ldexp on the real and imaginary parts); ``e`` per batch element (one
    axis: every value of the element) or per column (two axes: the last axis of ``a``)."""
    if e is None:
        return a
    e = e.reshape((e.shape[0],) + (1,) * (a.ndim - e.ndim) + e.shape[1:])
    with np.errstate(over="ignore", under="ignore"):  # a result that overflows is refused by check_result
        if not xp.iscomplexobj(a):
            return xp.ldexp(a, e).astype(a.dtype, copy=False)
        out = xp.empty_like(a)
        out.real = xp.ldexp(a.real, e)
        out.imag = xp.ldexp(a.imag, e)
    return out


def combined(*exponents):
    """The sum of exponent arrays (None: 0; per element and per column alike), or None when all
    are None."""
    present = [e for e in exponents if e is not None]
    if not present:
        return None
    ndim = max(e.ndim for e in present)  # per-element exponents apply to every column
    total = 0
    for e in present:
        total = total + (e.reshape(e.shape + (1,) * (ndim - e.ndim)))
    return total


def negated(e):
    return None if e is None else -e


def rank_tolerance(rank_tol, dtype) -> float:
    """``rank_tol`` checked (a finite number in [0, 1)), or 100 eps of ``dtype``."""
    if rank_tol is None:
        return _default_tolerance(dtype)
    if isinstance(rank_tol, bool) or not isinstance(rank_tol, numbers.Real):
        raise TypeError(f"rank_tol must be a real number or None, got {rank_tol!r}")
    if not 0 <= float(rank_tol) < 1:  # NaN fails both comparisons
        raise ValueError(f"rank_tol must lie in [0, 1), got {rank_tol!r}")
    return float(rank_tol)


@functools.cache
def _default_tolerance(dtype) -> float:
    return 100 * float(np.finfo(dtype).eps)


def check_rank(R, batch_shape: tuple, tol: float, xp, perm=None) -> None:
    """RankDeficientError for the first batch element and column k < min(m, n) of A = Q R whose
    distance from the span of the earlier columns, relative to its own norm (|R[k, k]| / ||R[:, k]||),
    is at most ``tol``: there the projection, the least-squares solution and the gradients are not
    determined by A to working precision (R flattened to one batch axis). ``perm`` (b, n): R is that
    of A[:, perm], and the error names A's column perm[k]."""
    if R.size == 0:
        return
    ratios, lowest = rank_ratios(R, xp)
    if float(lowest[0] if len(lowest) == 1 else smallest(lowest, xp)) > tol:  # every column independent (the
        return  # usual case); NaN fails
    bad = ~(ratios > tol)  # a NaN ratio counts as deficient
    if bool(xp.any(bad)):
        b, k = (int(i) for i in xp.argwhere(bad)[0])
        what = "is zero" if float(ratios[b, k]) == 0 and not bool(xp.any(R[b, :, k])) else \
            "is linearly dependent on the previous ones"
        column = k if perm is None else int(perm[b, k])
        earlier = "previous ones" if perm is None else "columns pivoted before it"
        what = what.replace("previous ones", earlier)
        raise RankDeficientError(f"matrix at batch index {batch_index(batch_shape, b)}: column {column} {what} "
                                 f"(residual norm / column norm = {float(ratios[b, k]):.3e} <= {tol:.1e})")


def all_finite(a) -> bool:
    """Whether host array ``a`` has no NaN or infinity (element by element: a sum would overflow or
    meet inf - inf, and warn, under ``np.seterr(all="raise")`` raise, where the values are fine)."""
    return bool(np.logical_and.reduce(np.isfinite(a), axis=None))


def check_result(function: str, name: str, a, batch_shape: tuple, xp) -> None:
    """ResultOverflowError naming the first batch element where result ``name`` is not finite
    although the inputs were: the exact value overflows its dtype, or an intermediate does."""
    if a.size == 0 or (xp is np and all_finite(a)):  # the usual case
        return
    big = largest_per_element(a, xp)
    bad = ~xp.isfinite(big)
    if bool(xp.any(bad)):
        b = int(xp.argmax(bad))
        raise ResultOverflowError(f"{function}: '{name}' at batch index {batch_index(batch_shape, b)} is not "
                                  f"finite although the inputs are: its value overflows {a.dtype} (or an "
                                  "intermediate does); nothing was returned")
