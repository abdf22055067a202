"""The column order of QR with column pivoting (Businger and Golub): at step k, of the columns not
yet taken, the one farthest from the span of those taken (the first of equal ones), and that
distance, |R[k, k]| of the pivoted factor. The high-level functions then run the QR programs on
A[:, perm]: the gradient is that of QR of A[:, perm] with perm fixed (the choice has none).

The choice is made here, by a compiled Householder triangularisation that keeps nothing
(``kernels.py``), and not by a reversible program: a program would have to uncompute the choice,
and its uncompute sees the reduced columns restored only to rounding, so equal residuals (an
orthogonal matrix's) and those at rounding level (every rank-deficient matrix has them) would choose
differently going back.

Any finite magnitudes, each column its own: the remaining part of every column is kept scaled by a
power of two of its own (exact), its largest entry in [1/2, 1), so that no norm or reflection
overflows or underflows, and distances are compared as (scaled norm, exponent) pairs, exactly. A
matrix-wide scale would drop a column of 1e-200 beside one of 1e200 to zero.
"""
from __future__ import annotations

import numpy as np

from revdiff.ir.high import BinOp, Call, Compare, Const, Index, Name, Select, Shape, Unary
from revdiff.ir.low import Assign, AugAssign, Branch, Local, Loop, Zero
from revdiff.programs.kernels import run_kernel

_NONE = -(1 << 40)  # the exponent of a matrix with no nonzero entry


def _add(a, b):
    return BinOp("+", a, b)


def _sub(a, b):
    return BinOp("-", a, b)


def _mul(a, b):
    return BinOp("*", a, b)


def _power_of_two(e):
    """2.0 ** e for an integer expression e in (-2200, 2200), as two exact factors' product is used."""
    return BinOp("**", Const(2.0), e)


def _scaled(x, e, tag: str) -> list:
    """Statements leaving x * 2**e (e an int) in ``_sc{tag}``, in two exact scalings: 2**e alone
    would overflow or underflow where the product does not."""
    half = f"_h{tag}"
    return [Local(half, BinOp("//", e, Const(2))),
            Local(f"_sc{tag}", _mul(_mul(x, _power_of_two(Name(half))), _power_of_two(_sub(e, Name(half)))))]


def _normalize(c, first) -> list:
    """Scale rows ``first``.. of column ``c`` of W by a power of two so that their largest magnitude
    lies in [1/2, 1), and add its exponent to S[c] (nothing for a zero column)."""
    i = Name("_i")
    big = Name("_nb")
    w = Index("W", (i, c))
    exponent = [Local("_ne", _add(Call("round", (BinOp("//", Call("log2", (big,)), Const(1.0)),)), Const(1)))]
    exponent += _scaled(big, Unary("-", Name("_ne")), "n")  # big 2**-e: in [1/2, 1) but for log2's rounding
    exponent += [Branch(Compare(">=", Name("_scn"), Const(1.0)), [AugAssign(Name("_ne"), "+", Const(1))],
                        [Branch(Compare("<", Name("_scn"), Const(0.5)), [AugAssign(Name("_ne"), "-", Const(1))], [])])]
    half = Name("_nh")
    rescale = [Local("_nh", BinOp("//", Unary("-", Name("_ne")), Const(2))),
               Local("_f1", _power_of_two(half)), Local("_f2", _power_of_two(_sub(Unary("-", Name("_ne")), half))),
               Loop("_i", first, Shape("W", 0), Const(1), [Assign((w,), (_mul(_mul(w, Name("_f1")), Name("_f2")),))]),
               AugAssign(Index("S", (c,)), "+", Name("_ne"))]
    return [Local("_nb", Const(0.0)),
            Loop("_i", first, Shape("W", 0), Const(1),
                 [Local("_na", Call("abs", (w,))), Assign((big,), (Select(Compare(">", Name("_na"), big), Name("_na"), big),))]),
            Branch(Compare(">", big, Const(0.0)), exponent + rescale, [])]


def _greater() -> list:
    """``_win``: the distance ``_norm`` 2**S[c] exceeds ``_best`` 2**``_bs`` (the first candidate, with
    ``_best`` < 0, always does). Scaled norms lie in [1/2, 2**26) or are 0: beyond 27 the exponents
    decide, within it an exact product does."""
    norm, best, d = Name("_norm"), Name("_best"), Name("_d")
    return [Local("_d", _sub(Index("S", (Name("_c"),)), Name("_bs"))),
            Local("_win", Select(Compare("<", best, Const(0.0)), Const(True),
                                 Select(Compare("==", norm, Const(0.0)), Const(False),
                                        Select(Compare("==", best, Const(0.0)), Const(True),
                                               Select(Compare(">", d, Const(27)), Const(True),
                                                      Select(Compare("<", d, Const(-27)), Const(False),
                                                             Compare(">", _mul(norm, _power_of_two(d)), best)))))))]


def _pivots(types: dict) -> list:
    dtype = types["A"].dtype
    b, k, c, i, j = Name("_b"), Name("_k"), Name("_c"), Name("_i"), Name("_j")
    m, n = Shape("A", 1), Shape("A", 2)
    p = Call("min", (m, n))
    W = lambda r, col: Index("W", (r, col))  # noqa: E731
    start = [Local("_E", Const(_NONE))]
    start.append(Loop("_c", Const(0), n, Const(1), [
        Assign((Index("perm", (b, c)),), (c,)), Assign((Index("S", (c,)),), (Const(0),)),
        Loop("_i", Const(0), m, Const(1), [Assign((W(i, c),), (Index("A", (b, i, c)),))])]
        + _normalize(c, Const(0))
        + [Branch(Compare(">", Name("_nb"), Const(0.0)),
                  [Assign((Name("_E"),), (Call("max", (Name("_E"), Index("S", (c,)))),))], [])]))
    # the distance of each remaining column: its rows k.. (largest in [1/2, 1)), scaled like LAPACK's norms
    norm = [Local("_big", Const(0.0)),
            Loop("_i", k, m, Const(1), [Local("_a", Call("abs", (W(i, c),))),
                                        Assign((Name("_big"),), (Select(Compare(">", Name("_a"), Name("_big")),
                                                                        Name("_a"), Name("_big")),))]),
            Local("_s", Const(0.0)),
            Branch(Compare(">", Name("_big"), Const(0.0)),
                   [Loop("_i", k, m, Const(1),
                         [AugAssign(Name("_s"), "+", BinOp("**", Call("abs", (BinOp("/", W(i, c), Name("_big")),)),
                                                             Const(2)))])], []),
            Local("_norm", _mul(Name("_big"), Call("sqrt", (Name("_s"),))))]
    choose = norm + _greater() + [Branch(Name("_win"), [Assign((j, Name("_best"), Name("_bs")),
                                                             (c, Name("_norm"), Index("S", (c,))))], [])]
    swap = [Loop("_i", Const(0), m, Const(1), [Assign((W(i, k), W(i, j)), (W(i, j), W(i, k)))]),
            Assign((Index("perm", (b, k)), Index("perm", (b, j))), (Index("perm", (b, j)), Index("perm", (b, k)))),
            Assign((Index("S", (k,)), Index("S", (j,))), (Index("S", (j,)), Index("S", (k,))))]
    report = Select(Compare("==", Name("_best"), Const(0.0)), Const(0.0), Name("_scr"))
    x0, best = Name("_x0"), Name("_best")
    unit = Select(Compare("!=", x0, Const(0)), BinOp("/", x0, Call("abs", (x0,))), Const(1.0))
    reflect = [Local("_x0", W(k, k)), Local("_phase", unit),
               Local("_nv", _mul(_mul(Call("sqrt", (Const(2.0),)), Call("sqrt", (best,))),
                                 Call("sqrt", (_add(best, Call("abs", (x0,))),)))),
               Assign((W(k, k),), (_add(x0, _mul(Name("_phase"), best)),)),
               Loop("_i", k, m, Const(1), [Assign((W(i, k),), (BinOp("/", W(i, k), Name("_nv")),))]),
               Loop("_c", _add(k, Const(1)), n, Const(1), [
                   Local("_dot", _mul(Const(0.0), W(k, c))),
                   Loop("_i", k, m, Const(1), [AugAssign(Name("_dot"), "+", _mul(Call("conj", (W(i, k),)), W(i, c)))]),
                   Loop("_i", k, m, Const(1), [AugAssign(W(i, c), "-", _mul(_mul(Const(2.0), Name("_dot")), W(i, k)))])]
                   + _normalize(c, _add(k, Const(1))))]
    step = [Local("_j", k), Local("_best", Const(-1.0)), Local("_bs", Const(0)),
            Loop("_c", k, n, Const(1), choose),
            Branch(Compare("!=", j, k), swap, []),
            *_scaled(best, _sub(Name("_bs"), Name("_E")), "r"),
            Assign((Index("residuals", (b, k)),), (report,)),
            Branch(Compare(">", best, Const(0.0)), reflect, [])]
    return [Zero("W", (m, n), dtype), Zero("S", (n,), "int64"),
            Loop("_b", Name("_lo"), Name("_hi"), Const(1), start + [Loop("_k", Const(0), p, Const(1), step)])]


def column_pivots(A, xp=np) -> tuple:
    """(perm, residuals) for a batch of finite matrices A (b, m, n) of any magnitude: perm (b, n)
    int64 with the pivoted column order, residuals (b, min(m, n)) the distances |R[k, k]| of A
    scaled by a power of two per matrix (its largest entry in [1/2, 1): the order and the ratios,
    all that callers read, are A's own; distances below 2**-1074 of the largest entry read 0),
    non-increasing. GPU arrays are copied to the host for it and the results back."""
    host = A if xp is np else xp.asnumpy(A)
    host = np.array(host, dtype=np.complex128 if np.iscomplexobj(host) else np.float64, order="C")
    b, m, n = host.shape
    perm, residuals = np.empty((b, n), np.int64), np.zeros((b, min(m, n)))
    if host.size:
        run_kernel("pivots", _pivots, b, A=host, perm=perm, residuals=residuals)
    else:
        perm[:] = np.arange(n)
    return (perm, residuals) if xp is np else (xp.asarray(perm), xp.asarray(residuals))
