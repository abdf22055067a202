"""High-level functions over the reversible programs: check the arguments, run every batch element
in parallel, differentiate by running the programs backwards. Every input gets the right answer or
a named error (``inputs.py``): NaN, Inf, rank deficiency (``RankDeficientError``, with the batch
element and column) and overflowing results are refused; extreme magnitudes are scaled by powers
of two; empty matrices and batches give empty results, as in NumPy."""
from __future__ import annotations

import numpy as np

from revdiff.batch import BatchedFunction
from revdiff.programs import givens, projection
from revdiff.programs.arguments import Matrices, Vectors, scanned
from revdiff.programs.methods import (COMPLETE_METHODS, LSTSQ_METHODS, PROJECT_METHODS, QR_METHODS, QR_MODES,
                                      check_method, chosen_method, program_for, q_columns, resolved)
from revdiff.programs.inputs import (DTYPES, array_module, as_array, check_rank, check_result, flat,
                                     negated, one_device, rank_tolerance, require_finite, scale_exponents)
from revdiff.programs.pivoting import column_pivots
from revdiff.programs.plans import Rule, record, run_plan, usual
from revdiff.programs.ranked import cgs2_where_refused, fresh, numerical_rank, ranked
from revdiff.programs.scan import largest_per_element

__all__ = ["DTYPES", "QR_METHODS", "QR_MODES", "COMPLETE_METHODS", "RANK_DEFICIENT",
           "PROJECT_METHODS", "LSTSQ_METHODS", "qr", "qr_vjp", "project", "project_vjp", "lstsq", "lstsq_vjp",
           "rank"]


_BATCHED: dict = {}


def _batched(program) -> BatchedFunction:
    """The program over a batch of every parameter (cached). Calls here donate their arguments
    (``donate=True``): the outputs are fresh zeros, and the programs never write the inputs."""
    if program not in _BATCHED:
        _BATCHED[program] = BatchedFunction(program, program.params)
    return _BATCHED[program]


def _program(table: dict, method: str, M: Matrices) -> BatchedFunction:
    """The batched program ``method`` (resolved) runs on M's matrices (``methods.chosen_method``)."""
    return _batched(program_for(table, method, M.shape, M.gpu))


def _resolved_program(table: dict, method: str, M: Matrices) -> tuple:
    """(the method "auto" or ``method`` names for M's matrices, its batched program): of ``table``,
    the projections' or the least squares' programs."""
    method = resolved(method, M.shape, M.gpu, dtype=M.dtype, projection=True)
    return method, _program(table, method, M)


def last_run(function: str, method: str, shape: tuple, mode: str = "reduced", dtype="float64") -> str:
    """"program, path" of the last ``function`` call ("qr", "qr_vjp", "project", "project_vjp",
    "lstsq" or "lstsq_vjp", with ``rank_deficient="raise"``) with ``method`` on CPU matrices of
    ``shape`` (..., m, n) (and QR ``mode`` and ``dtype``, which "auto" reads): the program the method
    chose for the shape (``methods.chosen_method``) and how its batch ran (``Batching.last_paths``)."""
    tables = {"qr": QR_METHODS, "project": PROJECT_METHODS, "lstsq": LSTSQ_METHODS}
    name, _, kind = function.partition("_")
    if name not in tables or kind not in ("", "vjp"):
        raise ValueError(f"last_run reports qr, project, lstsq and their _vjp, not {function!r}")
    program = program_for(tables[name], resolved(method, shape, mode=mode, dtype=dtype, projection=name != "qr"),
                          shape)
    return f"{program.__name__}, {_batched(program).last_paths.get(kind or 'value', 'not run')}"


def _leading_projection(method: str, M: Matrices) -> BatchedFunction:
    """The batched projection onto leading columns of ``method``'s program for M."""
    return _batched(projection.LEADING_PROJECTIONS[chosen_method(method, M.shape, M.gpu)])


def _qr_run(method: str, M: Matrices, mode: str = "reduced"):
    """The batched QR program and its zero outputs for M: Q (m, q) and R (q, n), q from ``mode``,
    then the rotation angles (givens)."""
    program = program_for(QR_METHODS, method, M.shape, M.gpu)
    q = q_columns(method, mode, M.shape)
    outputs = (M.zeros(M.m, q), M.zeros(q, M.n))
    if program is givens.givens:
        if np.iscomplexobj(M.flat):
            raise TypeError(f"method 'givens' takes real matrices; 'A' has dtype {M.dtype} "
                            "(use 'householder' or 'cgs2' for complex input)")
        outputs += (M.zeros(M.m, M.p),)  # the rotation angles
    return _batched(program), outputs, q


def _pivoted(M: Matrices, pivoting) -> tuple:
    """(the matrices QR factors, perm or None): with ``pivoting``, M's columns in the pivoted order
    (chosen on A itself, unscaled), each scaled as in M."""
    if not isinstance(pivoting, bool):
        raise TypeError(f"pivoting must be True or False, got {pivoting!r}")
    if not pivoting:
        return M, None
    perm = column_pivots(M.flat, M.xp)[0]
    return M.permuted(perm), perm


def _largest(*arrays):
    """The common scale exponent of cotangents per batch element: their largest magnitude."""
    big = None
    for a in arrays:
        m = largest_per_element(a, array_module(a)) if a.shape[0] else array_module(a).zeros(0)
        big = m if big is None else array_module(a).maximum(big, m)
    return big


@one_device
@cgs2_where_refused
def qr(A, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced", pivoting: bool = False):
    """Q, R of A (..., m, n) with diag(R) real nonnegative, p = min(m, n):

    - ``mode="reduced"`` (default): Q (..., m, p), R (..., p, n);
    - ``mode="complete"``: Q (..., m, m) orthogonal (unitary), R (..., m, n), its rows below p zero;
      for a tall A only ``householder``, ``blocked_householder`` and ``givens`` complete Q (which
      "auto" then runs as ``householder``; others raise ValueError);
    - ``mode="r"``: R (..., p, n) alone (NumPy's and JAX's convention; ``revdiff.torch.qr`` returns
      an empty Q beside it, as ``torch.linalg.qr`` does).

    ``pivoting=True``: column pivoting, as ``scipy.linalg.qr(pivoting=True)``: also returns perm
    (..., n), int64, with A[..., perm] = Q R and |R[k, k]| non-increasing; (Q, R, perm), or (R, perm)
    for mode "r". The order is chosen as Businger and Golub choose it (``pivoting.py``), and
    ``method`` factors A[..., perm].

    method: "auto" (default: "householder" for real A with min(m, n) >= 128 on the CPU, where it
    measured the faster, and for the complete Q of a tall A, else "cgs2": ``methods.resolved``),
    "cgs2", "bcgs2", "mgs", "cgs", "householder" or "givens" (real only; the rotation angles are an
    extra output of ``revdiff.programs.givens``). Batches run in parallel.
    Raises RankDeficientError where a column's residual is at most ``rank_tol`` (default 100 eps)
    of its norm: Q is not determined by A there."""
    options = (method, rank_tol, mode, pivoting)
    planned = run_plan("qr", options, (A,))
    if planned is not None:
        return planned
    M = Matrices(A)
    tol = rank_tolerance(rank_tol, M.dtype)
    method = resolved(method, M.shape, M.gpu, mode, M.dtype)
    program, outputs, q = _qr_run(method, M, mode)
    M, perm = _pivoted(M, pivoting)
    if M.empty:
        Q, R = _empty_qr(M, q, outputs)
    else:
        (Q, R), rows = ranked(lambda rows: program.value(*fresh(outputs, rows), rows(M.A), donate=True)[:2], M, tol,
                              method)
        Q = rows.back(Q)
        check_rank(R, M.batch, tol, M.xp, perm)
        R = M.scaled(R, M.e)  # A D = Q R' for the column scaling D: R = R' D^-1
        check_result("qr", "R", R, M.batch, M.xp)
        if not pivoting and usual(M, rows):
            returned = (("out", 1),) if mode == "r" else (("out", 0), ("out", 1))  # R alone, or Q and R
            record("qr", options, (A,), (), program, "value", Rule(options[0], mode, False, QR_METHODS),
                   tuple(o.shape[1:] for o in outputs), tol, returned)
    out = (M.unflat(R, q, M.n),) if mode == "r" else (M.unflat(Q, M.m, q), M.unflat(R, q, M.n))
    if pivoting:
        out += (M.unflat(perm, M.n),)
    return out[0] if len(out) == 1 else out


def _empty_qr(M: Matrices, q: int, outputs: tuple) -> tuple:
    """Q, R of empty matrices: the complete Q of an m x 0 matrix is the identity, as in NumPy."""
    Q, R = outputs[:2]
    if Q.size:
        Q[:] = M.xp.eye(M.m, q, dtype=M.dtype)
    return Q, R


@one_device
@cgs2_where_refused
def qr_vjp(A, gQ, gR, method: str = "auto", rank_tol: float | None = None, mode: str = "reduced",
           pivoting: bool = False) -> np.ndarray:
    """Cotangent of A given those of Q and R (None: zero), by running the QR program backwards.
    ``mode`` as in ``qr``: gQ (..., m, m) and gR (..., m, n) for "complete" (R's rows below p are
    constant zeros: their cotangents contribute nothing); gQ must be None for "r". With
    ``pivoting=True`` the cotangents are those of the pivoted factors, and the gradient is that of
    QR of A[..., perm] with perm fixed (the permutation has none)."""
    options = (method, rank_tol, mode, pivoting)
    planned = run_plan("qr_vjp", options, (A,), (gQ, gR))
    if planned is not None:
        return planned
    run = QrCotangents(A, gQ, gR, method, rank_tol, mode, pivoting)
    if run.M.empty:
        return run.M.xp.zeros(run.M.shape, run.M.dtype)
    (outs, grads), rows = ranked(
        lambda rows: run.program.vjp(run.arguments(rows), run.cotangents_in(rows), donate=True, wrt=("A",)), run.M,
        run.tol, run.method)
    check_rank(outs[1], run.M.batch, run.tol, run.M.xp, run.perm)  # outs: (Q, R, [angles,] A)
    gA = run.gradient(rows.back(grads[-1]), "qr_vjp", "gA")
    if not pivoting and usual(run.M, rows, run.h):
        record("qr_vjp", options, (A,), (gQ, gR), run.program, "vjp", Rule(options[0], mode, False, QR_METHODS),
               tuple(o.shape[1:] for o in run.outputs), run.tol, (("grad", len(run.outputs)),))
    return gA


class QrCotangents:
    """A QR vjp's checked arguments: the program, its outputs and the cotangents of Q and R, scaled
    (R = R' D^-1 for the column scaling D: the cotangent of R' is gR D^-1, and gA = gA' D; both
    cotangents scaled by 2**-h), and the way back to A's gradient (``gradient``)."""

    def __init__(self, A, gQ, gR, method, rank_tol, mode, pivoting):
        M = Matrices(A)
        self.tol = rank_tolerance(rank_tol, M.dtype)
        self.method = resolved(method, M.shape, M.gpu, mode, M.dtype)
        self.program, self.outputs, q = _qr_run(self.method, M, mode)
        self.M, self.perm = _pivoted(M, pivoting)
        if mode == "r" and gQ is not None:
            raise ValueError("mode='r' has no Q output: pass gQ=None")
        cotangents = []
        for name, g, core in (("gQ", gQ, (M.m, q)), ("gR", gR, (q, M.n))):
            if g is None:
                cotangents.append(M.zeros(*core))
                continue
            g = as_array(name, g, 2, cotangent_of=M.dtype)
            if tuple(g.shape) != M.batch + core:
                what = {"reduced": "thin Q", "complete": "complete Q"}.get(mode) if name == "gQ" else "R"
                raise ValueError(f"for A of shape {M.shape} and mode={mode!r}, '{name}' must have shape "
                                 f"{M.batch + core} ({what}); got {tuple(g.shape)}")
            g = flat(g, 2)
            require_finite(name, g, M.batch, M.xp)
            cotangents.append(g)
        M = self.M
        gQ, gR = cotangents[0], M.scaled(cotangents[1], M.e)
        self.h = scale_exponents(_largest(gQ, gR), M.dtype, M.xp)
        self.cotangents = (M.scaled(gQ, negated(self.h)), M.scaled(gR, negated(self.h))) + \
            (None,) * (len(self.outputs) - 1)  # none for the angles and A

    def arguments(self, rows) -> tuple:
        """The program's arguments: fresh outputs and A, its rows in the order of ``rows`` (``ranked.Rows``)."""
        return fresh(self.outputs, rows) + (rows(self.M.A),)

    def cotangents_in(self, rows) -> tuple:
        """The cotangents, Q's rows in the order of ``rows``."""
        return (rows(self.cotangents[0]),) + self.cotangents[1:]

    def gradient(self, g, function: str, name: str, *exponents):
        """A's gradient from the program's: scaled back (``exponents``: those of a tangent, too) and
        in A's column order."""
        M = self.M
        g = M.scaled(g, negated(M.e), self.h, *exponents)
        if self.perm is not None:  # back to A's column order
            g = M.xp.take_along_axis(g, M.xp.argsort(self.perm, axis=1)[:, None, :], axis=2)
        check_result(function, name, g, M.batch, M.xp)
        return M.unflat(g, M.m, M.n)


def _with_vector(A, y, scan: bool = True) -> tuple:
    """Checked (M, y) for the projection and least squares, computed in one dtype; each remembers
    its own (``given``): a real argument gets a real gradient, as in PyTorch, also when the other
    is complex. ``scan=False``: the caller scans them with its other arguments (``scanned``)."""
    A_array, y_array = as_array("A", A, 2, core=" (..., m, n)"), as_array("y", y, 1)
    M = Matrices(A_array, A_array.dtype if A_array.dtype is y_array.dtype else
                 np.result_type(A_array.dtype, y_array.dtype), scan=False)
    Y = Vectors("y", y_array, M, M.batch + (M.m,), why="for A of shape {like} it needs", scan=False)
    M.given, Y.given = A_array.dtype, y_array.dtype
    return scanned(M, Y) if scan else (M, Y)


def _as_given(g, given):
    """A gradient in its argument's dtype, as in PyTorch; a real argument's the real part."""
    if g.dtype == given:  # the usual case
        return g
    real = np.iscomplexobj(g) and not np.issubdtype(given, np.complexfloating)
    return (g.real if real else g).astype(given, copy=False)


#: what project and lstsq do with a (numerically) rank-deficient A
RANK_DEFICIENT = ("raise", "truncate")


def _truncating(rank_deficient) -> bool:
    if not isinstance(rank_deficient, str) or rank_deficient not in RANK_DEFICIENT:
        raise ValueError(f"unknown rank_deficient {rank_deficient!r}; choose 'raise' or 'truncate'")
    return rank_deficient == "truncate"


class _Kept:
    """The columns that ``rank_deficient="truncate"`` keeps: QR with column pivoting of A
    (``pivoting.column_pivots``) orders them; the numerical rank is r = #{k : |R[k, k]| > tol
    |R[0, 0]|} (|R[k, k]| estimates the k-th singular value), and the pivoted columns k >= r are
    left out. ``A`` (b, m, p): the first p = min(m, n) pivoted columns, those at r and beyond
    zero, which the programs pass over as they pass over a zero column; ``columns`` (b, p): their
    indices in A."""

    def __init__(self, M: Matrices, tol: float):
        xp, p = M.xp, M.p
        perm, residuals = column_pivots(M.flat, xp)  # on A itself: M.A's columns may be scaled apart
        self.rank = numerical_rank(residuals, tol, xp)
        self.columns = perm[:, :p]
        self.left_out = xp.arange(p)[None, :] >= self.rank[:, None]
        taken = xp.take_along_axis(M.A, self.columns[:, None, :], axis=2)
        self.A = xp.where(self.left_out[:, None, :], 0, taken)
        self.n = M.n
        self.unpermute = xp.argsort(perm, axis=1)

    def scatter(self, g_kept, xp):
        """Values over the kept columns (b, [m,] p) as values over A's columns (b, [m,] n): zero for
        those left out."""
        left_out = self.left_out if g_kept.ndim == 2 else self.left_out[:, None, :]
        g = xp.where(left_out, 0, g_kept)
        g = xp.concatenate([g, xp.zeros(g.shape[:-1] + (self.n - g.shape[-1],), g.dtype)], axis=-1)
        index = self.unpermute if g.ndim == 2 else self.unpermute[:, None, :]
        return xp.take_along_axis(g, index, axis=-1)


@one_device
def rank(A, rank_tol: float | None = None):
    """The numerical rank of each matrix of A (..., m, n), int64 (...): the number of columns that
    ``rank_deficient="truncate"`` keeps, from Householder QR with column pivoting (|R[k, k]| >
    rank_tol |R[0, 0]|, rank_tol 100 eps by default), as the singular values would count it
    except, usually, where they lie within a small factor of the threshold (pivoted QR can misjudge
    them by up to about 2**n on adversarial matrices, Kahan's)."""
    M = Matrices(A)
    tol = rank_tolerance(rank_tol, M.dtype)  # checked for empty input too
    if M.empty:
        return M.xp.zeros(M.batch, np.int64)
    return _Kept(M, tol).rank.reshape(M.batch)


@one_device
@cgs2_where_refused
def project(A, y, method: str = "auto", rank_tol: float | None = None, rank_deficient: str = "raise"):
    """z = Q Q^H y, the orthogonal projection of y (..., m) onto the column space of A (..., m, n);
    a matrix without columns projects onto {0}.

    ``rank_deficient="raise"`` (default): RankDeficientError, as ``qr``, where a column of A is
    (numerically) dependent on the earlier ones. ``"truncate"``: the projection onto the numerical
    column space, the span of the columns that QR with column pivoting keeps (those left out have
    |R[k, k]| <= rank_tol |R[0, 0]|); returns (z, rank), rank (...) int64. Its gradient
    (``project_vjp``) is exact along directions that keep the rank."""
    options = (method, rank_tol, rank_deficient)
    planned = run_plan("project", options, (A, y))
    if planned is not None:
        return planned
    truncate = _truncating(rank_deficient)
    check_method(PROJECT_METHODS, method)
    M, Y = _with_vector(A, y)
    method, program = _resolved_program(PROJECT_METHODS, method, M)
    tol = rank_tolerance(rank_tol, M.dtype)
    if M.empty:
        z = M.unflat(M.xp.zeros_like(Y.flat), M.m)
        return (z, M.xp.zeros(M.batch, np.int64)) if truncate else z
    if truncate:
        kept = _Kept(M, tol)
        leading = _leading_projection(method, M)
        z, rows = ranked(lambda rows: leading.value(M.zeros(M.m), M.zeros(M.p, M.p), rows(kept.A), rows(Y.v),
                                                    kept.rank, donate=True)[0], M, tol, method, truncated=True)
        z = rows.back(z)
    else:
        (z, R), rows = ranked(lambda rows: program.value(M.zeros(M.m), M.zeros(M.p, M.n), rows(M.A), rows(Y.v),
                                                         donate=True)[:2], M, tol, method)
        z = rows.back(z)
        check_rank(R, M.batch, tol, M.xp)
    z = Y.scaled(z, Y.e)  # z is linear in y and the same for every column scaling of A
    check_result("project", "z", z, M.batch, M.xp)
    if not truncate and usual(M, rows, Y.e):
        record("project", options, (A, y), (), program, "value", Rule(options[0], "reduced", True, PROJECT_METHODS),
               ((M.m,), (M.p, M.n)), tol, (("out", 0),))
    return (M.unflat(z, M.m), kept.rank.reshape(M.batch)) if truncate else M.unflat(z, M.m)


@one_device
@cgs2_where_refused
def project_vjp(A, y, gz, method: str = "auto", rank_tol: float | None = None, rank_deficient: str = "raise") -> tuple:
    """(gA, gy): cotangents of A and y given that of z = Q Q^H y. With ``rank_deficient="truncate"``
    (see ``project``), the gradient of the projection onto the kept columns, zero for the columns
    left out: its inner product with a direction that keeps the rank (dA = A X + Y A) is the
    derivative along it; components across the rank-r matrices are not determined by A and differ
    from the Golub-Pereyra formula's."""
    options = (method, rank_tol, rank_deficient)
    planned = run_plan("project_vjp", options, (A, y), (gz,))
    if planned is not None:
        return planned
    truncate = _truncating(rank_deficient)
    check_method(PROJECT_METHODS, method)
    M, Y = _with_vector(A, y, scan=False)
    method, program = _resolved_program(PROJECT_METHODS, method, M)
    tol = rank_tolerance(rank_tol, M.dtype)
    G = Vectors("gz", gz, M, M.batch + (M.m,), cotangent=True, why="as the cotangent of z it needs the shape of y,",
                scan=False)
    scanned(M, Y, G)
    if M.empty:
        return M.xp.zeros(M.shape, M.dtype), M.unflat(M.xp.zeros_like(Y.flat), M.m)
    if truncate:
        kept = _Kept(M, tol)
        leading = _leading_projection(method, M)
        (_, (_, _, gA, gy, _)), rows = ranked(
            lambda rows: leading.vjp((M.zeros(M.m), M.zeros(M.p, M.p), rows(kept.A), rows(Y.v), kept.rank),
                                     (rows(G.v), None, None, None, None), donate=True, wrt=("A", "y")), M, tol,
            method, truncated=True)
        gA, gy = kept.scatter(rows.back(gA), M.xp), rows.back(gy)
    else:
        (outs, (_, _, gA, gy)), rows = ranked(
            lambda rows: program.vjp((M.zeros(M.m), M.zeros(M.p, M.n), rows(M.A), rows(Y.v)),
                                     (rows(G.v), None, None, None), donate=True, wrt=("A", "y")), M, tol, method)
        gA, gy = rows.back(gA), rows.back(gy)
        check_rank(outs[1], M.batch, tol, M.xp)
    gA = _as_given(M.scaled(gA, negated(M.e), Y.e, G.e), M.given)  # z(A D, y) = z(A, y), linear in y and gz
    gy = _as_given(G.scaled(gy, G.e), Y.given)
    check_result("project_vjp", "gA", gA, M.batch, M.xp)
    check_result("project_vjp", "gy", gy, M.batch, M.xp)
    if not truncate and usual(M, rows, Y.e, G.e):
        record("project_vjp", options, (A, y), (gz,), program, "vjp", Rule(options[0], "reduced", True,
               PROJECT_METHODS), ((M.m,), (M.p, M.n)), tol, (("grad", 2), ("grad", 3)))
    return M.unflat(gA, M.m, M.n), M.unflat(gy, M.m)


def _least_squares(A, y, method: str, rank_tol, rank_deficient, scan: bool = True):
    truncate = _truncating(rank_deficient)
    check_method(LSTSQ_METHODS, method)
    M, Y = _with_vector(A, y, scan)
    method, program = _resolved_program(LSTSQ_METHODS, method, M)
    if M.m < M.n and not truncate:
        raise ValueError(f"lstsq needs a tall or square A (m >= n) of full column rank; A has shape {M.shape}, "
                         "and a wide A's least-squares problem has infinitely many solutions, of which "
                         "revdiff picks the basic one only with rank_deficient='truncate'")
    return program, method, M, Y, rank_tolerance(rank_tol, M.dtype), truncate


@one_device
@cgs2_where_refused
def lstsq(A, y, method: str = "auto", rank_tol: float | None = None, rank_deficient: str = "raise"):
    """x minimising |A x - y| for A (..., m, n), through the QR program.

    ``rank_deficient="raise"`` (default): A must be tall or square (m >= n) and of full column
    rank; RankDeficientError, as ``qr``, where a column is (numerically) dependent.
    ``"truncate"``: the basic solution, any shape: the columns that QR with column pivoting keeps
    (as in ``project``) get the least-squares solution on their span, the columns left out zero
    (not the minimum-norm solution, which ``np.linalg.lstsq`` returns); returns (x, rank)."""
    options = (method, rank_tol, rank_deficient)
    planned = run_plan("lstsq", options, (A, y))
    if planned is not None:
        return planned
    program, method, M, Y, tol, truncate = _least_squares(A, y, method, rank_tol, rank_deficient)
    if M.empty:
        x = M.xp.zeros(M.batch + (M.n,), M.dtype)
        return (x, M.xp.zeros(M.batch, np.int64)) if truncate else x
    if truncate:
        kept = _Kept(M, tol)
        x, _ = ranked(lambda rows: program.value(M.zeros(M.p), M.zeros(M.p, M.p), rows(kept.A), rows(Y.v),
                                                 donate=True)[0], M, tol, method, truncated=True)
        x = kept.scatter(x, M.xp)
    else:
        (x, R), rows = ranked(lambda rows: program.value(M.zeros(M.n), M.zeros(M.n, M.n), rows(M.A), rows(Y.v),
                                                         donate=True)[:2], M, tol, method)
        check_rank(R, M.batch, tol, M.xp)
    x = M.scaled(x, negated(M.e), Y.e)  # (A D) x' = y: x = D x', linear in y
    check_result("lstsq", "x", x, M.batch, M.xp)
    if not truncate and usual(M, rows, Y.e):
        record("lstsq", options, (A, y), (), program, "value", Rule(options[0], "reduced", True, LSTSQ_METHODS),
               ((M.n,), (M.n, M.n)), tol, (("out", 0),))
    return (M.unflat(x, M.n), kept.rank.reshape(M.batch)) if truncate else M.unflat(x, M.n)


def _solution_cotangent(G: Vectors, M: Matrices) -> tuple:
    """(g, h): x = D x'(A D, y), so the cotangent of x' is D gx, scaled by 2**-h (h per element) for
    the program; gA = gA' D 2**h."""
    g = M.scaled(G.flat, negated(M.e))
    h = scale_exponents(_largest(g), M.dtype, M.xp)
    return M.scaled(g, negated(h)), h


@one_device
@cgs2_where_refused
def lstsq_vjp(A, y, gx, method: str = "auto", rank_tol: float | None = None, rank_deficient: str = "raise") -> tuple:
    """(gA, gy) given the cotangent of the least-squares solution x (``rank_deficient`` as in
    ``lstsq``: the basic solution's gradient with the kept columns fixed, zero for those left out)."""
    options = (method, rank_tol, rank_deficient)
    planned = run_plan("lstsq_vjp", options, (A, y), (gx,))
    if planned is not None:
        return planned
    program, method, M, Y, tol, truncate = _least_squares(A, y, method, rank_tol, rank_deficient, scan=False)
    G = Vectors("gx", gx, M, M.batch + (M.n,), cotangent=True, why="as the cotangent of x it needs the shape of x,",
                scan=False)
    scanned(M, Y, G)
    if M.empty:
        return M.xp.zeros(M.shape, M.dtype), M.unflat(M.xp.zeros_like(Y.flat), M.m)
    gx_scaled, h = _solution_cotangent(G, M)
    if truncate:
        kept = _Kept(M, tol)
        g_kept = M.xp.take_along_axis(gx_scaled, kept.columns, axis=1)
        (_, (_, _, gA, gy)), rows = ranked(
            lambda rows: program.vjp((M.zeros(M.p), M.zeros(M.p, M.p), rows(kept.A), rows(Y.v)),
                                     (g_kept, None, None, None), donate=True, wrt=("A", "y")), M, tol, method,
            truncated=True)
        gA, gy = kept.scatter(rows.back(gA), M.xp), rows.back(gy)
    else:
        (outs, (_, _, gA, gy)), rows = ranked(
            lambda rows: program.vjp((M.zeros(M.n), M.zeros(M.n, M.n), rows(M.A), rows(Y.v)),
                                     (gx_scaled, None, None, None), donate=True, wrt=("A", "y")), M, tol, method)
        gA, gy = rows.back(gA), rows.back(gy)
        check_rank(outs[1], M.batch, tol, M.xp)
    gA = _as_given(M.scaled(gA, negated(M.e), Y.e, h), M.given)
    gy = _as_given(M.scaled(gy, h), Y.given)
    check_result("lstsq_vjp", "gA", gA, M.batch, M.xp)
    check_result("lstsq_vjp", "gy", gy, M.batch, M.xp)
    if not truncate and usual(M, rows, Y.e, G.e, h):
        record("lstsq_vjp", options, (A, y), (gx,), program, "vjp",
               Rule(options[0], "reduced", True, LSTSQ_METHODS), ((M.n,), (M.n, M.n)), tol, (("grad", 2), ("grad", 3)))
    return M.unflat(gA, M.m, M.n), M.unflat(gy, M.m)
