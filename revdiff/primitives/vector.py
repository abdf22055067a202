"""Vector instructions: ``y += A @ x`` (and ``A.T``, ``A.conj().T``), ``Y[:, :] += A @ B`` (same
forms), ``s += np.dot(x, y)`` and ``s += np.vdot(x, y)`` on array views, with ``-=`` as their
inverses, and the rules of ``y += a * x``, which the whole-array statements (``elementwise.py``) use
for that form (``norm.py`` has ``s += np.linalg.norm(x)``, ``outer.py`` ``Y[:, :] += np.outer(u, v)``).

Each is one instruction of the table with its own forward and gradient rule: the adjoint of
``y += A @ x`` pushes ``gA += gy x^H`` and ``gx += A^H gy`` directly, never a closed-form adjoint
of the program around it. The rules lower to loops whose innermost index walks the last axis of
the matrix (contiguous for C-ordered arrays), or, for small matrices, the longer axis (in SIMD lanes
a block of rows or columns at a time, ``loops.index_blocks``). Reductions use four partial sums in a
fixed order, so the inverse subtracts exactly the value the forward added.
On the CPU, real ``A @ x`` on large views and its gradient call BLAS instead (``ctx.host_call``,
``targets/llvm/host.py``); those loops remain the fallback and the GPU's code.

Cotangent convention (as for scalar ``t *= e``): for ``t += a * b``, ``ga += gt * conj(b)``.
"""
from __future__ import annotations

from functools import partial

from revdiff.ir import algebra as A
from revdiff.ir import views as V
from revdiff.ir.high import Compare, Const, Name
from revdiff.ir.low import AugAssign
from revdiff.ir.types import is_real
from revdiff.primitives.loops import (any_complex, blas_operands, check_lengths, check_views, index_blocks, element,
                                      host_view, length, partial_sum, partial_sums, rank_of, signed)
from revdiff.primitives.table import Instruction, instruction

# Up to this many elements, A @ x runs column by column (long inner loops over rows, which small
# matrices need to vectorise); above it, row by row (contiguous in C order, which large ones need).
# The choice depends only on shapes, so an instruction and its inverse always take the same one.
SMALL_MATRIX = 1024
# The real gradient of A @ x outside BLAS walks A column by column only up to this many rows (it
# fuses restoring y and pushing both cotangents into one walk), the rows of taller ones (in lanes a
# column walk steps over whole rows of lanes, 32 float64 columns of 8 lanes: 2 KiB, which the
# ancillas' padded rows, ``targets/llvm/memory.py``, keep from evicting each other). In lanes 64
# rows ran no faster at 64x32 and 16 rows slower at 32x16 (``benchmarks/ab.py``).
COLUMN_WALK_MAX_ROWS = 32
# Above this many elements, real A @ x and its gradient call BLAS on the CPU (targets/llvm/host.py),
# falling back to the loops (by columns or by rows) for layouts BLAS cannot take; below it the calls
# cost more than the loops. It is also the largest element run in SIMD lanes (lanes never call BLAS,
# and a batch must equal one element at a time bit for bit): 64x32 runs faster in lanes than with
# BLAS, 64x64 slower.
BLAS_MIN_ELEMENTS = 2048


# ---------------------------------------------------------------- y += A @ x  (and A.T, A.conj().T)

_MATVEC_SYNTAX = {"n": "y += A @ x", "t": "y += A.T @ x", "h": "y += A.conj().T @ x"}


def _matvec_shapes(ctx, ops, form: str) -> tuple:
    """(rows, cols) of A as stored, checked against y and x: y has len(op(A)) and x len of op(A)'s columns."""
    y, M, x = ops
    syntax = _MATVEC_SYNTAX[form]
    check_views(ctx, syntax, y, M, x)
    rows, cols = V.lengths(M, rank_of(ctx, M))
    out_len, in_len = (rows, cols) if form == "n" else (cols, rows)
    check_lengths(ctx, syntax, length(ctx, y), "len(y)", out_len, "rows of op(A)")
    check_lengths(ctx, syntax, length(ctx, x), "len(x)", in_len, "columns of op(A)")
    return rows, cols


def _matvec_forward(form: str, sign: int):
    op = "+" if sign > 0 else "-"

    def rule(ops, ctx):
        y, M, x = ops
        rows, cols = _matvec_shapes(ctx, ops, form)
        opM = lambda i, j: A.conj_if(element(ctx, M, i, j), form == "h" and any_complex(ctx, M))  # noqa: E731

        def by_rows():  # contiguous along each row of A (in lanes a block of rows at a time): large A
            if form == "n":  # y[i] op= sum_j A[i, j] x[j]: a row dot product per i
                def block(block_rows):
                    terms = [lambda j, i=i: A.mul(opM(i, j), element(ctx, x, j)) for i in block_rows]
                    totals = partial_sums(ctx, cols, terms, element(ctx, y, block_rows[0]))
                    for i, total in zip(block_rows, totals):
                        ctx.emit(AugAssign(element(ctx, y, i), op, total))
            else:  # y[j] op= op(A[i, j]) x[i]: row i of A scaled into y
                def block(block_rows):
                    xs = [ctx.temp(element(ctx, x, i), "x") for i in block_rows]
                    ctx.loop(Const(0), cols, lambda j: [
                        ctx.emit(AugAssign(element(ctx, y, j), op, A.mul(opM(i, j), xi)))
                        for i, xi in zip(block_rows, xs)], "j")
            index_blocks(ctx, rows, block, "i")

        def by_columns():  # long inner loops over the rows of A (in lanes a block of columns at a time): small A
            if form == "n":  # y op= A[:, j] x[j], column by column
                def columns(block_cols):
                    xs = [ctx.temp(element(ctx, x, j), "x") for j in block_cols]
                    ctx.loop(Const(0), rows, lambda i: [
                        ctx.emit(AugAssign(element(ctx, y, i), op, A.mul(opM(i, j), xj)))
                        for j, xj in zip(block_cols, xs)], "i")
            else:  # y[j] op= sum_i op(A[i, j]) x[i]: a column dot product per j
                def columns(block_cols):
                    terms = [lambda i, j=j: A.mul(opM(i, j), element(ctx, x, i)) for j in block_cols]
                    totals = partial_sums(ctx, rows, terms, element(ctx, y, block_cols[0]))
                    for j, total in zip(block_cols, totals):
                        ctx.emit(AugAssign(element(ctx, y, j), op, total))
            index_blocks(ctx, cols, columns)

        if blas_operands(ctx, y, M, x):  # real: one BLAS gemv into scratch on large views, then y op= it
            ctx.host_call("matvec", (host_view(ctx, y), host_view(ctx, M), host_view(ctx, x), Const(form != "n"),
                                     Const(sign)), by_columns,
                          Compare(">", A.mul(rows, cols), Const(BLAS_MIN_ELEMENTS)))
        else:
            ctx.choose(Compare(">", A.mul(rows, cols), Const(SMALL_MATRIX)), by_rows, by_columns)

    return rule


def _matvec_gradient(form: str, sign: int):
    def rule(ops, ctx):
        y, M, x = ops
        gy = ctx.grad(y)
        if gy is None:
            return
        rows, cols = V.lengths(M, rank_of(ctx, M))
        if not blas_operands(ctx, y, M, x):
            _matvec_gradient_rows(ctx, form, sign, ops, gy, rows, cols, True, True)
            return
        # real: BLAS on large views. The fallback (views up to BLAS_MIN_ELEMENTS, the SIMD lanes) walks
        # the columns of matrices of few rows, as the forward does (long inner loops over the rows,
        # gx_j of A @ x summed in registers), and the rows of taller ones (COLUMN_WALK_MAX_ROWS)
        large = Compare(">", A.mul(rows, cols), Const(BLAS_MIN_ELEMENTS))
        gM, gx = ctx.grad(M), ctx.grad(x)

        def fallback(to_matrix: bool, to_input: bool):
            args = (ctx, form, sign, ops, gy, rows, cols, to_matrix, to_input)
            return lambda: ctx.choose(Compare(">", rows, Const(COLUMN_WALK_MAX_ROWS)),
                                      lambda: _matvec_gradient_rows(*args), lambda: _matvec_gradient_columns(*args))

        if gM is not None:  # real: gA += sign * gy x^T (form n) or sign * x gy^T (A.T, A.conj().T)
            u, v = (gy, x) if form == "n" else (x, gy)
            ctx.host_call("outer_update", (host_view(ctx, gM), host_view(ctx, u), host_view(ctx, v), Const(sign)),
                          fallback(True, False), large)
        if gx is not None:  # real: gx += sign * op(A)^T gy
            ctx.host_call("matvec_input_gradient",
                          (host_view(ctx, gx), host_view(ctx, M), host_view(ctx, gy), Const(form != "n"), Const(sign)),
                          fallback(False, True), large)

    return rule


def _matvec_gradient_columns(ctx, form: str, sign: int, ops, gy, rows, cols, to_matrix: bool, to_input: bool):
    """The gradient of ``y (+/-)= op(A) @ x`` as loops over the columns of A, each a long loop over
    its rows, pushing the cotangents of A (``to_matrix``) and/or of x (``to_input``)."""
    y, M, x = ops
    cplx = any_complex(ctx, y, M, x)
    conj = lambda e: A.conj_if(e, cplx)  # noqa: E731
    if form == "n":  # y_i += A_ij x_j:  gA_ij += gy_i conj(x_j);  gx_j += sum_i conj(A_ij) gy_i
        def columns(block_cols):
            if to_input:
                terms = [lambda i, j=j: A.mul(conj(element(ctx, M, i, j)), element(ctx, gy, i)) for j in block_cols]
                totals = partial_sums(ctx, rows, terms, gy)
                for j, total in zip(block_cols, totals):
                    ctx.push(element(ctx, x, j), signed(sign, total))
            if to_matrix:
                xs = [ctx.temp(signed(sign, conj(element(ctx, x, j))), "x") for j in block_cols]
                ctx.loop(Const(0), rows, lambda i: [ctx.push(element(ctx, M, i, j), A.mul(element(ctx, gy, i), xj))
                                                    for j, xj in zip(block_cols, xs)], "i")
    else:  # A.T:      y_j += A_ij x_i:        gA_ij += gy_j conj(x_i);  gx_i += conj(A_ij) gy_j
        # A.conj().T: y_j += conj(A_ij) x_i:  gA_ij += conj(gy_j) x_i;  gx_i += A_ij gy_j
        hermitian = form == "h"

        def columns(block_cols):
            gys = [ctx.temp(signed(sign, element(ctx, gy, j)), "gy") for j in block_cols]
            if to_input:
                ctx.loop(Const(0), rows, lambda i: [ctx.push(
                    element(ctx, x, i), A.mul(element(ctx, M, i, j) if hermitian else conj(element(ctx, M, i, j)), gyj))
                    for j, gyj in zip(block_cols, gys)], "i")
            if to_matrix:
                gs = [conj(gyj) if hermitian else gyj for gyj in gys]
                ctx.loop(Const(0), rows, lambda i: [ctx.push(
                    element(ctx, M, i, j), A.mul(g, element(ctx, x, i) if hermitian else conj(element(ctx, x, i))))
                    for j, g in zip(block_cols, gs)], "i")
    index_blocks(ctx, cols, columns)


def _matvec_gradient_rows(ctx, form: str, sign: int, ops, gy, rows, cols, to_matrix: bool, to_input: bool):
    """The gradient of ``y (+/-)= op(A) @ x`` as loops over the rows of A, pushing the cotangents
    of A (``to_matrix``) and/or of x (``to_input``)."""
    y, M, x = ops
    cplx = any_complex(ctx, y, M, x)
    conj = lambda e: A.conj_if(e, cplx)  # noqa: E731

    def push_matrix(i, j, e):
        if to_matrix:
            ctx.push(element(ctx, M, i, j), e)

    if form == "n":  # y_i += A_ij x_j:  gA_ij += gy_i conj(x_j);  gx_j += conj(A_ij) gy_i
        def block(block_rows):
            gys = [ctx.temp(signed(sign, element(ctx, gy, i)), "gy") for i in block_rows]

            def column(j):
                for i, gyi in zip(block_rows, gys):
                    push_matrix(i, j, A.mul(gyi, conj(element(ctx, x, j))))
                    if to_input:
                        ctx.push(element(ctx, x, j), A.mul(conj(element(ctx, M, i, j)), gyi))
            ctx.loop(Const(0), cols, column, "j")
    else:  # A.T:      y_j += A_ij x_i:        gA_ij += gy_j conj(x_i);  gx_i += sum_j conj(A_ij) gy_j
        # A.conj().T: y_j += conj(A_ij) x_i:  gA_ij += conj(gy_j) x_i;  gx_i += sum_j A_ij gy_j
        hermitian = form == "h"

        def block(block_rows):
            if to_input:
                terms = [lambda j, i=i: A.mul(element(ctx, M, i, j) if hermitian else conj(element(ctx, M, i, j)),
                                              element(ctx, gy, j)) for i in block_rows]
                for i, total in zip(block_rows, partial_sums(ctx, cols, terms, gy)):
                    ctx.push(element(ctx, x, i), signed(sign, total))
            if to_matrix:
                xs = [ctx.temp(signed(sign, element(ctx, x, i) if hermitian else conj(element(ctx, x, i))), "x")
                      for i in block_rows]
                ctx.loop(Const(0), cols, lambda j: [push_matrix(
                    i, j, A.mul(conj(element(ctx, gy, j)) if hermitian else element(ctx, gy, j), xi))
                    for i, xi in zip(block_rows, xs)], "j")
    index_blocks(ctx, rows, block, "i")


# ---------------------------------------------------------------- Y += A @ B  (and A.T, A.conj().T)

_MATMAT_SYNTAX = {"n": "Y[:, :] += A @ B", "t": "Y[:, :] += A.T @ B", "h": "Y[:, :] += A.conj().T @ B"}


def _matmat_shapes(ctx, ops, form: str) -> tuple:
    """(rows of Y, inner length, columns of Y), checked: op(A) is rows x inner, B inner x columns."""
    Y, M, B = ops
    syntax = _MATMAT_SYNTAX[form]
    check_views(ctx, syntax, Y, M, B)
    a_rows, a_cols = V.lengths(M, rank_of(ctx, M))
    rows, inner = (a_rows, a_cols) if form == "n" else (a_cols, a_rows)
    y_rows, y_cols = V.lengths(Y, rank_of(ctx, Y))
    b_rows, b_cols = V.lengths(B, rank_of(ctx, B))
    check_lengths(ctx, syntax, y_rows, "rows of Y", rows, "rows of op(A)")
    check_lengths(ctx, syntax, b_rows, "rows of B", inner, "columns of op(A)")
    check_lengths(ctx, syntax, y_cols, "columns of Y", b_cols, "columns of B")
    return rows, inner, b_cols


def _op_element(ctx, form: str, M, i, k):
    """Element (i, k) of op(A): A[i, k], A[k, i] or conj(A[k, i])."""
    if form == "n":
        return element(ctx, M, i, k)
    return A.conj_if(element(ctx, M, k, i), form == "h" and any_complex(ctx, M))


def _matmat_forward(form: str, sign: int):
    op = "+" if sign > 0 else "-"

    def rule(ops, ctx):
        Y, M, B = ops
        rows, inner, cols = _matmat_shapes(ctx, ops, form)

        def loops():  # Y[i, j] op= sum_k op(A)[i, k] B[k, j], four partial sums in a fixed order
            def column(j):
                def row(i):
                    total = partial_sum(ctx, inner, lambda k: A.mul(_op_element(ctx, form, M, i, k),
                                                                    element(ctx, B, k, j)), element(ctx, Y, i, j))
                    ctx.emit(AugAssign(element(ctx, Y, i, j), op, total))
                ctx.loop(Const(0), rows, row, "i")
            ctx.loop(Const(0), cols, column, "j")

        if blas_operands(ctx, Y, M, B):  # real: one BLAS gemm into scratch, then Y op= it (targets/llvm/host.py)
            ctx.host_call("matmat", (host_view(ctx, Y), host_view(ctx, M), host_view(ctx, B), Const(form != "n"),
                                     Const(False), Const(sign)), loops, _large_product(rows, inner, cols))
        else:
            loops()

    return rule


def _large_product(rows, inner, cols):
    return Compare(">", A.mul(A.mul(rows, inner), cols), Const(BLAS_MIN_ELEMENTS))


def _matmat_gradient(form: str, sign: int):
    # Y_ij += sum_k op(A)_ik B_kj:  gB_kj += conj(op(A)_ik) gY_ij;  op(A)_ik receives gY_ij conj(B_kj)
    def rule(ops, ctx):
        Y, M, B = ops
        gY = ctx.grad(Y)
        if gY is None:
            return
        rows, inner = (V.lengths(M, rank_of(ctx, M)) if form == "n" else V.lengths(M, rank_of(ctx, M))[::-1])
        cols = V.lengths(B, rank_of(ctx, B))[1]
        gM, gB = ctx.grad(M), ctx.grad(B)
        blas = blas_operands(ctx, Y, M, B)
        large = _large_product(rows, inner, cols)

        def loops(to_matrix: bool, to_right: bool):
            def push_term(i, k, j):
                g = signed(sign, element(ctx, gY, i, j))
                a = _op_element(ctx, form, M, i, k)
                if to_matrix:
                    ctx.push(a, A.mul(g, A.conj_if(element(ctx, B, k, j), any_complex(ctx, Y, M, B))))
                if to_right:
                    ctx.push(element(ctx, B, k, j), A.mul(A.conj_if(a, any_complex(ctx, Y, M, B)), g))
            ctx.loop(Const(0), cols, lambda j: ctx.loop(Const(0), rows, lambda i: ctx.loop(
                Const(0), inner, lambda k: push_term(i, k, j), "k"), "i"), "j")

        if not blas:
            loops(True, True)
            return
        if gM is not None:  # real: gA += sign gY B^T (A @ B) or sign B gY^T (A.T @ B)
            args = (gY, B, Const(False), Const(True)) if form == "n" else (B, gY, Const(False), Const(True))
            ctx.host_call("matmat_gradient", (host_view(ctx, gM), host_view(ctx, args[0]), host_view(ctx, args[1]),
                                              args[2], args[3], Const(sign)), lambda: loops(True, False), large)
        if gB is not None:  # real: gB += sign op(A)^T gY
            ctx.host_call("matmat_gradient", (host_view(ctx, gB), host_view(ctx, M), host_view(ctx, gY),
                                              Const(form == "n"), Const(False), Const(sign)),
                          lambda: loops(False, True), large)

    return rule


# ---------------------------------------------------------------- s += np.dot(x, y), s += np.vdot(x, y)


def _dot_forward(conjugate_first: bool, sign: int):
    syntax = "s += np.vdot(x, y)" if conjugate_first else "s += np.dot(x, y)"

    def rule(ops, ctx):
        s, x, y = ops
        check_views(ctx, syntax, x, y)
        n = length(ctx, x)
        check_lengths(ctx, syntax, n, "len(x)", length(ctx, y), "len(y)")
        cplx = conjugate_first and any_complex(ctx, x)
        total = partial_sum(ctx, n, lambda i: A.mul(A.conj_if(element(ctx, x, i), cplx), element(ctx, y, i)), s)
        ctx.emit(AugAssign(s, "+" if sign > 0 else "-", total))

    return rule


def _dot_gradient(conjugate_first: bool, sign: int):
    def rule(ops, ctx):
        s, x, y = ops
        gs = ctx.grad(s)
        if gs is None:
            return
        cplx = any_complex(ctx, x, y) or not is_real(ctx.kind(s))
        conj = lambda e: A.conj_if(e, cplx)  # noqa: E731
        g = ctx.temp(signed(sign, gs), "gs")

        def push_term(i):
            xi, yi = element(ctx, x, i), element(ctx, y, i)
            if conjugate_first:  # s += conj(x_i) y_i:  gx_i += conj(gs) y_i;  gy_i += gs x_i
                ctx.push(xi, A.mul(conj(g), yi))
                ctx.push(yi, A.mul(g, xi))
            else:  # s += x_i y_i:  gx_i += gs conj(y_i);  gy_i += gs conj(x_i)
                ctx.push(xi, A.mul(g, conj(yi)))
                ctx.push(yi, A.mul(g, conj(xi)))

        ctx.loop(Const(0), length(ctx, x), push_term, "i")

    return rule


# ---------------------------------------------------------------- y += a * x


def axpy_forward(sign: int):
    def rule(ops, ctx):
        y, a, x = ops
        syntax = "y += a * x"
        check_views(ctx, syntax, y, x)
        n = length(ctx, y)
        check_lengths(ctx, syntax, n, "len(y)", length(ctx, x), "len(x)")
        scale = a if isinstance(a, (Const, Name)) else ctx.temp(a, "a")
        ctx.loop(Const(0), n, lambda i: ctx.emit(
            AugAssign(element(ctx, y, i), "+" if sign > 0 else "-", A.mul(scale, element(ctx, x, i)))), "i")

    return rule


def axpy_gradient(sign: int):
    # y_i += a x_i:  gx_i += gy_i conj(a);  ga += sum_i gy_i conj(x_i)
    def rule(ops, ctx):
        y, a, x = ops
        gy = ctx.grad(y)
        if gy is None:
            return
        cplx = any_complex(ctx, y, x) or not is_real(ctx.kind(a))
        conj = lambda e: A.conj_if(e, cplx)  # noqa: E731
        n = length(ctx, y)
        if ctx.kind(a) in ("float", "complex") and not isinstance(a, Const):
            total = partial_sum(ctx, n, lambda i: A.mul(element(ctx, gy, i), conj(element(ctx, x, i))), gy)
            ctx.push(a, signed(sign, total))
        scale = ctx.temp(signed(sign, conj(a)), "a")
        ctx.loop(Const(0), n, lambda i: ctx.push(element(ctx, x, i), A.mul(element(ctx, gy, i), scale)), "i")

    return rule


# ---------------------------------------------------------------- registration

_NUMERIC = ("int", "float", "complex")


def _add_and_sub(stem: str, syntax: str, forward, gradient, ranks: tuple, rank_hints: dict | None = None) -> None:
    """Register ``<stem>_add`` and its inverse ``<stem>_sub``: the same rules with the sign flipped."""
    for op, inverse, sign in (("add", "sub", 1), ("sub", "add", -1)):
        instruction(Instruction(f"{stem}_{op}", syntax if sign > 0 else syntax.replace("+=", "-="),
                                ("target", "expr", "expr"), f"{stem}_{inverse}", forward(sign), gradient(sign),
                                _NUMERIC, operand_ranks=ranks, additive=True, rank_hints=rank_hints or {}))


for _form, _syntax in _MATVEC_SYNTAX.items():
    _add_and_sub(f"matvec{_form}", _syntax, partial(_matvec_forward, _form), partial(_matvec_gradient, _form),
                 (1, 2, 1), {(0, 0): "a dot product into a number is written s += np.dot(x, y)",
                             (0, 2): "a matrix product names both axes of its target: Y[:, :] += A @ B"})
for _form, _syntax in _MATMAT_SYNTAX.items():
    _add_and_sub(f"matmat{_form}", _syntax, partial(_matmat_forward, _form), partial(_matmat_gradient, _form),
                 (2, 2, 2))
for _conj, _name, _syntax in ((False, "dot", "s += np.dot(x, y)"), (True, "vdot", "s += np.vdot(x, y)")):
    _add_and_sub(_name, _syntax, partial(_dot_forward, _conj), partial(_dot_gradient, _conj), (0, 1, 1))

# surface forms the parser recognises -> instruction names (op is "add" or "sub")
MATVEC = {form: {"add": f"matvec{form}_add", "sub": f"matvec{form}_sub"} for form in _MATVEC_SYNTAX}
MATMAT = {form: {"add": f"matmat{form}_add", "sub": f"matmat{form}_sub"} for form in _MATMAT_SYNTAX}
DOT = {"dot": {"add": "dot_add", "sub": "dot_sub"}, "vdot": {"add": "vdot_add", "sub": "vdot_sub"}}
