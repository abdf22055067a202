"""Host routines that generated CPU code calls: BLAS for vector instructions on large views, and the
largest magnitude of a view (the scale of an ancilla's zero check).

Each routine returns False, touching nothing, when its operands do not suit BLAS (a dtype other
than float32/float64, mixed dtypes, a matrix strided along both axes, an empty view); the
generated code then runs its own loops (``revdiff.ir.low.HostCall``). The CUDA emitter prints only
those loops.

Reversibility: ``y += A @ x`` computes ``t = A @ x`` into scratch with one BLAS call and then adds
``t`` element by element, so the inverse ``y -= A @ x`` subtracts exactly the value the forward
added: the same call on the same operands returns the same ``t``, also when parallel batch
elements call BLAS at once (tested: ``test_blas_products_are_deterministic_in_parallel_batches``).
Gradient updates accumulate into the gradient arrays directly (``beta = 1``).

BLAS is Numba's own binding to SciPy's ``cython_blas`` (the functions behind ``np.dot`` in Numba
code), so these routines and the generated code that calls them stay cacheable on disk.
"""
from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import intrinsic, overload

from revdiff.ir.checks import INTERRUPT
from revdiff.ir.low import host_symbol
from revdiff.runtime.cache import cached_njit

_VOID = types.voidptr
_GEMV = types.ExternalFunction(  # y = alpha op(A) x + beta y, A column-major; x, y contiguous
    "numba_xxgemv", types.intc(types.char, types.char, types.intp, types.intp, _VOID, _VOID, types.intp,
                               _VOID, _VOID, _VOID))
_GEMM = types.ExternalFunction(  # C = alpha op(A) op(B) + beta C, all column-major
    "numba_xxgemm", types.intc(types.char, types.char, types.char, types.intp, types.intp, types.intp, _VOID,
                               _VOID, types.intp, _VOID, types.intp, _VOID, _VOID, types.intp))

_NOT_BLAS = 0


def blas_kind(a):  # pragma: no cover - replaced by its overload inside compiled code
    """The BLAS letter of an array's dtype as its code point (0: no real BLAS type)."""


@overload(blas_kind)
def _blas_kind(a):
    code = {types.float64: ord("d"), types.float32: ord("s")}.get(getattr(a, "dtype", None), _NOT_BLAS)
    return lambda a: code


_jit = cached_njit(nogil=True, fastmath=False)


@_jit
def _column_major(M):
    """How BLAS sees matrix view ``M`` (rows x cols): (True, ld) when it is stored as the
    column-major M^T (C order), (False, ld) when column-major M (F order), (False, 0) otherwise."""
    rows, cols = M.shape
    item = M.itemsize
    s0, s1 = M.strides
    if s1 == item and s0 % item == 0 and s0 // item >= max(1, cols):
        return True, s0 // item
    if s0 == item and s1 % item == 0 and s1 // item >= max(1, rows):
        return False, s1 // item
    return False, 0


@_jit
def _contiguous(v):
    """``v`` itself when its elements are adjacent, else a contiguous copy (exact)."""
    if v.strides[0] == v.itemsize:
        return v
    return v.copy()


@_jit
def _usable(a, b, c) -> bool:
    """Three non-empty views of one real BLAS dtype."""
    k = blas_kind(a)
    return (k != _NOT_BLAS and blas_kind(b) == k and blas_kind(c) == k
            and a.size > 0 and b.size > 0 and c.size > 0)


@_jit
def _product(out, M, x, transpose, alpha, beta) -> bool:
    """out = alpha * op(M) @ x + beta * out, op(M) = M.T when ``transpose``; ``out`` and ``x`` contiguous."""
    stored_transposed, ld = _column_major(M)
    if ld == 0:
        return False
    rows, cols = M.shape
    m, n = (cols, rows) if stored_transposed else (rows, cols)
    trans = ord("n") if stored_transposed == transpose else ord("t")
    scalars = np.empty(2, M.dtype)
    scalars[0] = alpha
    scalars[1] = beta
    status = _GEMV(blas_kind(M), trans, m, n, scalars[0:].ctypes, M.ctypes, ld, x.ctypes, scalars[1:].ctypes,
                   out.ctypes)
    return status == 0


@_jit
def matvec(y, M, x, transpose, sign) -> bool:
    """``y += sign * op(M) @ x`` (op(M) = M.T when ``transpose``), through a scratch product."""
    if not _usable(y, M, x):
        return False
    t = np.empty(y.shape[0], y.dtype)
    if not _product(t, M, _contiguous(x), transpose, 1.0, 0.0):
        return False
    if sign > 0:
        for i in range(t.shape[0]):
            y[i] += t[i]
    else:
        for i in range(t.shape[0]):
            y[i] -= t[i]
    return True


@_jit
def matvec_input_gradient(gx, M, gy, transpose, sign) -> bool:
    """Gradient of ``y += sign * op(M) @ x`` into x (real): ``gx += sign * op(M).T @ gy``."""
    if not _usable(gx, M, gy):
        return False
    if gx.strides[0] == gx.itemsize:
        return _product(gx, M, _contiguous(gy), not transpose, sign, 1.0)
    t = np.empty(gx.shape[0], gx.dtype)
    if not _product(t, M, _contiguous(gy), not transpose, 1.0, 0.0):
        return False
    for i in range(t.shape[0]):
        gx[i] += sign * t[i]
    return True


@_jit
def outer_update(G, u, v, sign) -> bool:
    """``G += sign * outer(u, v)`` for a real matrix view G (BLAS ger, as a rank-1 gemm)."""
    if not _usable(G, u, v):
        return False
    stored_transposed, ld = _column_major(G)
    if ld == 0:
        return False
    first, second = (v, u) if stored_transposed else (u, v)  # column-major C += first @ second.T
    a = _contiguous(first)
    inc = second.strides[0] // second.itemsize
    if second.strides[0] % second.itemsize != 0 or inc < 1:
        second = second.copy()
        inc = 1
    scalars = np.empty(2, G.dtype)
    scalars[0] = sign
    scalars[1] = 1.0
    status = _GEMM(blas_kind(G), ord("n"), ord("n"), a.shape[0], second.shape[0], 1, scalars[0:].ctypes, a.ctypes,
                   a.shape[0], second.ctypes, inc, scalars[1:].ctypes, G.ctypes, ld)
    return status == 0


@_jit
def _as_stored(M, want_transposed):
    """(BLAS trans code, ld) that make column-major BLAS read M.T (``want_transposed``) or M; ld 0: no way."""
    stored_transposed, ld = _column_major(M)
    return (ord("n") if stored_transposed == want_transposed else ord("t")), ld


@_jit
def matmat(Y, A, B, transpose_a, transpose_b, sign) -> bool:
    """``Y += sign * op(A) @ op(B)`` (op: transpose when asked), through a scratch product T, so the
    inverse subtracts the same T. Column-major BLAS computes T.T = op(B).T @ op(A).T into C-ordered T."""
    if not (_usable(Y, A, B)):
        return False
    rows, cols = Y.shape
    inner = A.shape[0] if transpose_a else A.shape[1]
    trans_b, ldb = _as_stored(B, not transpose_b)
    trans_a, lda = _as_stored(A, not transpose_a)
    if ldb == 0 or lda == 0:
        return False
    T = np.empty((rows, cols), Y.dtype)
    scalars = np.empty(2, Y.dtype)
    scalars[0] = 1.0
    scalars[1] = 0.0
    status = _GEMM(blas_kind(Y), trans_b, trans_a, cols, rows, inner, scalars[0:].ctypes, B.ctypes, ldb, A.ctypes,
                   lda, scalars[1:].ctypes, T.ctypes, max(1, cols))
    if status != 0:
        return False
    if sign > 0:
        for i in range(rows):
            for j in range(cols):
                Y[i, j] += T[i, j]
    else:
        for i in range(rows):
            for j in range(cols):
                Y[i, j] -= T[i, j]
    return True


@_jit
def matmat_gradient(G, A, B, transpose_a, transpose_b, sign) -> bool:
    """Gradient of a matrix product (real): ``G += sign * op(A) @ op(B)`` accumulated by BLAS straight
    into G (``beta = 1``): gradients are never inverted, so no scratch product is needed."""
    if not (_usable(G, A, B)):
        return False
    stored_transposed, ldg = _column_major(G)
    if ldg == 0:
        return False
    rows, cols = G.shape
    inner = A.shape[0] if transpose_a else A.shape[1]
    scalars = np.empty(2, G.dtype)
    scalars[0] = sign
    scalars[1] = 1.0
    if stored_transposed:  # column-major G.T += sign op(B).T op(A).T
        trans_b, ldb = _as_stored(B, not transpose_b)
        trans_a, lda = _as_stored(A, not transpose_a)
        if ldb == 0 or lda == 0:
            return False
        status = _GEMM(blas_kind(G), trans_b, trans_a, cols, rows, inner, scalars[0:].ctypes, B.ctypes, ldb,
                       A.ctypes, lda, scalars[1:].ctypes, G.ctypes, ldg)
    else:  # column-major G += sign op(A) op(B)
        trans_a, lda = _as_stored(A, transpose_a)
        trans_b, ldb = _as_stored(B, transpose_b)
        if ldb == 0 or lda == 0:
            return False
        status = _GEMM(blas_kind(G), trans_a, trans_b, rows, cols, inner, scalars[0:].ctypes, A.ctypes, lda,
                       B.ctypes, ldb, scalars[1:].ctypes, G.ctypes, ldg)
    return status == 0


@_jit
def _largest_in_vector(scale, v):
    """max(scale, |x|) over vector view ``v``, in four running maxima: independent chains the
    compiler can interleave (one chain's compare-and-select waits on the previous element)."""
    n = v.shape[0]
    a0 = a1 = a2 = a3 = scale
    bulk = n - n % 4
    for j in range(0, bulk, 4):
        x0, x1, x2, x3 = abs(v[j]), abs(v[j + 1]), abs(v[j + 2]), abs(v[j + 3])
        a0 = x0 if x0 > a0 else a0  # as max(a, x): a NaN element leaves the scale as it was
        a1 = x1 if x1 > a1 else a1
        a2 = x2 if x2 > a2 else a2
        a3 = x3 if x3 > a3 else a3
    for j in range(bulk, n):
        x0 = abs(v[j])
        a0 = x0 if x0 > a0 else a0
    return max(max(a0, a1), max(a2, a3))


def _largest_in_view(scale, V):  # pragma: no cover - replaced by its overload inside compiled code
    """max(scale, |x|) over every element x of view ``V``."""


@overload(_largest_in_view)
def _largest_in_view_by_rank(scale, V):
    if V.ndim == 1:
        return lambda scale, V: _largest_in_vector(scale, V)
    if V.ndim == 2:
        def by_rows(scale, V):
            for i in range(V.shape[0]):
                scale = _largest_in_vector(scale, V[i])
            return scale
        return by_rows

    def flat(scale, V):
        for x in V.flat:
            scale = max(scale, abs(x))
        return scale
    return flat


@_jit
def largest_magnitude(scale, V):
    """max(scale, |x|) over every element x of view ``V``: the scale of an ancilla's zero check,
    raised after a statement wrote the ancilla. One call in place of a loop per write keeps the
    checks' generated code small (Numba compiles one statement, not a loop, at each write).
    Vectors and matrices go row by row in four running maxima, 3-4x faster than one (measured on
    500x32 and 500x224 float64 views: 0.26-0.35 against 1 ns per element)."""
    return _largest_in_view(scale, V)


@intrinsic
def _load_acquire(typingctx, record, index):
    """record[index] read with acquire ordering: a load the optimiser may not hoist out of a loop
    (an ordinary one of memory the loop does not write is read once, before the loop)."""
    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.gep(array.data, [args[1]])
        return builder.load_atomic(pointer, "acquire", 8)
    return types.float64(record, index), codegen


@_jit
def interrupt_requested(record) -> bool:
    """Whether the caller set the interrupt field of the error record (Ctrl-C): read by every
    iteration of a while loop, from memory another thread writes (``calls.interruptible``)."""
    return _load_acquire(record, INTERRUPT) != 0.0


ROUTINES = {"interrupt_requested": interrupt_requested, "largest_magnitude": largest_magnitude, "matvec": matvec, "matvec_input_gradient": matvec_input_gradient,
            "outer_update": outer_update, "matmat": matmat, "matmat_gradient": matmat_gradient}


def routines(names) -> dict:
    """The routines ``names``, under the names generated code calls them by (its globals)."""
    return {host_symbol(r): ROUTINES[r] for r in sorted(names)}
