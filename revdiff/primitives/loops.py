"""The loops vector instructions lower to, shared by their rules (``vector.py``, ``outer.py``): views'
elements and lengths, the checks of their operands, reductions as four partial sums in a fixed order,
and walks over a matrix's columns (or rows) in blocks, in SIMD lanes (register blocking). Every
helper keeps each element's operations in one fixed order, so an instruction and its inverse see the
same bits."""
from __future__ import annotations

from revdiff.ir import algebra as A
from revdiff.ir import views as V
from revdiff.ir.high import BinOp, Compare, Const
from revdiff.ir.low import AugAssign
from revdiff.ir.types import is_real
from revdiff.primitives.printer import expr_source

PARTIAL_SUMS = 4  # independent accumulators of a reduction: instruction-level parallelism
#: columns (or rows) of a matrix one walk along its other axis serves in SIMD lanes (register blocking):
#: 4 would hold a block's dot products in 16 partial sums of 8 lanes, and measures slower than 2
#: (alternating runs at 10000 x 32x16 and 1000 x 64x32, QR and projection gradients)
WALK_BLOCK = 2


def rank_of(ctx, view) -> int:
    return ctx.rank(V.base(view))


def length(ctx, view, axis: int = 0):
    return V.lengths(view, rank_of(ctx, view))[axis]


def element(ctx, view, *coords):
    return V.element(view, rank_of(ctx, view), coords)


def host_view(ctx, view):
    """The view as generated code writes it, as an array slice for a host routine."""
    return V.normalized(view, rank_of(ctx, view))


def blas_operands(ctx, *views) -> bool:
    """All operands share one real BLAS dtype, so the instruction may call host BLAS on them."""
    dtypes = {ctx.dtype(V.base(v)) for v in views}
    return len(dtypes) == 1 and dtypes <= {"float32", "float64"}


def any_complex(ctx, *operands) -> bool:
    return any(not is_real(ctx.kind(v)) for v in operands)


def check_views(ctx, syntax: str, *views) -> None:
    """Every integer index of a view lies in its array and every written slice inside it (NumPy
    would silently shorten it): the instruction's loops then run unchecked."""
    for v in views:
        rank = rank_of(ctx, v)
        for axis in V.fixed_axes(v, rank):
            ctx.check_index(V.normalized(v, rank), axis)
        for ok, lower, upper, axis in V.bound_conditions(v, rank):
            ctx.require(ok, f"{syntax}: the slice {expr_source(lower)}:{expr_source(upper)} of "
                            f"'{V.base(v)}' (axis {axis}) is outside the array", lower, upper,
                        labels=("start", "stop"))


def check_lengths(ctx, syntax: str, a, what_a: str, b, what_b: str) -> None:
    if a == b:
        return
    ctx.require(Compare("==", a, b), f"{syntax}: {what_a} and {what_b} differ", a, b,
                labels=(what_a, what_b))


def partial_sum(ctx, n, term, like):
    """sum(term(j) for j in range(n)) as four interleaved partial sums, combined in a fixed order;
    returns the expression of the total (the accumulators are typed like ``like``)."""
    return partial_sums(ctx, n, [term], like)[0]


def partial_sums(ctx, n, terms: list, like) -> list:
    """``partial_sum`` of each of ``terms`` in one loop over j, each in its own four partial sums (so
    each total has exactly the bits ``partial_sum`` gives it): terms that read one element let LLVM
    load it once."""
    accs = [[ctx.accumulator("acc", like) for _ in range(PARTIAL_SUMS)] for _ in terms]
    bulk = ctx.temp(A.sub(n, BinOp("%", n, Const(PARTIAL_SUMS))), "bulk")

    def unrolled(j):
        for u in range(PARTIAL_SUMS):
            for term, partial in zip(terms, accs):
                ctx.emit(AugAssign(partial[u], "+", term(A.add(j, Const(u)))))

    ctx.loop(Const(0), bulk, unrolled, "j", Const(PARTIAL_SUMS))
    ctx.loop(bulk, n, lambda j: [ctx.emit(AugAssign(partial[0], "+", term(j))) for term, partial in zip(terms, accs)],
             "j")
    totals = []
    for partial in accs:
        while len(partial) > 1:  # pairwise: (a0 + a1) + (a2 + a3)
            partial = [A.add(partial[k], partial[k + 1]) if k + 1 < len(partial) else partial[k]
                       for k in range(0, len(partial), 2)]
        totals.append(partial[0])
    return totals


def index_blocks(ctx, n, block, hint: str = "j") -> None:
    """``block(ks)`` for ks = [k, ..., k + WALK_BLOCK - 1] over the leading multiple of WALK_BLOCK
    of range(n), then ``block([k])`` for each index left (loop variables named after ``hint``): one
    walk along a matrix's other axis then serves several of its columns (or rows), loading what they
    share once (register blocking). Every element sees the operations of one-at-a-time loops in the
    same order, so the bits are theirs. The bound is written out, not a temporary, so that the blocks
    of consecutive statements fuse. Only programs lowered for SIMD lanes (``ctx.options.lanes``) take
    blocks: the others, which run small matrices one at a time, are spared the compile time of the
    second loop."""
    if not ctx.options.lanes:
        ctx.loop(Const(0), n, lambda k: block([k]), hint)
        return
    left = BinOp("%", n, Const(WALK_BLOCK))
    bulk = A.sub(n, left)
    ctx.loop(Const(0), bulk, lambda k: block([k] + [A.add(k, Const(c)) for c in range(1, WALK_BLOCK)]), hint,
             Const(WALK_BLOCK))
    ctx.loop(Const(0), left, lambda k: block([A.add(bulk, k)]), hint)


def signed(sign: int, e):
    return e if sign > 0 else A.neg(e)


__all__ = ["WALK_BLOCK", "PARTIAL_SUMS", "any_complex", "blas_operands", "check_lengths", "check_views",
           "index_blocks", "element", "host_view", "length", "partial_sum", "partial_sums", "rank_of", "signed"]
