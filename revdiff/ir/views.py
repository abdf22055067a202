"""Array views as the vector instructions see them: ``Q[:, :k]``, ``v[lo:hi]``, ``A[i]``, ``x``.

A view is a whole array (a Name) or an Index whose indices are integers (fixed axes) and slices of
step 1 (view axes); axes beyond the written indices are whole. A negative constant bound counts
from the end (``x[:-1]``); any other bound must lie inside the array (checked at run time). These helpers give a view's lengths
and the element at view coordinates, as IR expressions the instruction rules lower into loops.
"""
from __future__ import annotations

from revdiff.ir import algebra as A
from revdiff.ir.high import Compare, Const, Expr, Index, Name, Shape, Slice


def _indices(view, rank: int) -> tuple:
    """Every axis's index; a negative constant slice bound counts from the end, as in Python."""
    written = () if isinstance(view, Name) else view.indices
    out = []
    for axis, i in enumerate(tuple(written) + (Slice(),) * (rank - len(written))):
        if isinstance(i, Slice):
            i = Slice(*(_from_end(b, base(view), axis) for b in (i.lower, i.upper)))
        out.append(i)
    return tuple(out)


def _from_end(bound, name: str, axis: int):
    if isinstance(bound, Const) and not isinstance(bound.value, bool) and bound.value < 0:
        return A.sub(Shape(name, axis), Const(-bound.value))
    return bound


def base(view) -> str:
    return view.id if isinstance(view, Name) else view.base


def view_axes(view, rank: int) -> list:
    """(axis of the base array, lower bound, length) of every view axis, in order."""
    out = []
    for axis, i in enumerate(_indices(view, rank)):
        if isinstance(i, Slice):
            lower = i.lower if i.lower is not None else Const(0)
            upper = i.upper if i.upper is not None else Shape(base(view), axis)
            out.append((axis, lower, A.sub(upper, lower)))
    return out


def lengths(view, rank: int) -> list:
    return [n for _, _, n in view_axes(view, rank)]


def element(view, rank: int, coords: tuple) -> Index:
    """The element of ``view`` at view coordinates ``coords`` (one per view axis)."""
    coords = list(coords)
    out = []
    for i in _indices(view, rank):
        if isinstance(i, Slice):
            lower = i.lower if i.lower is not None else Const(0)
            out.append(A.add(lower, coords.pop(0)))
        else:
            out.append(i)
    return Index(base(view), tuple(out))


def normalized(view, rank: int):
    """The view with every axis written out and negative constant bounds counted from the end:
    how generated code passes it, as an array slice, to a host routine."""
    return view if isinstance(view, Name) else Index(base(view), _indices(view, rank))


def fixed_axes(view, rank: int) -> list:
    """Axes a view fixes at an integer index (``A[:, k]``: axis 1)."""
    return [axis for axis, i in enumerate(_indices(view, rank)) if not isinstance(i, Slice)]


def bound_conditions(view, rank: int) -> list:
    """(condition, description) pairs that hold when every written slice lies inside the array:
    NumPy would silently shorten an out-of-range slice, so revdiff reports it instead."""
    out = []
    for axis, i in enumerate(_indices(view, rank)):
        if not isinstance(i, Slice) or (i.lower is None and i.upper is None):
            continue
        lower = i.lower if i.lower is not None else Const(0)
        upper = i.upper if i.upper is not None else Shape(base(view), axis)
        out.append((Compare("<=", Const(0), lower), lower, upper, axis))
        out.append((Compare("<=", lower, upper), lower, upper, axis))
        out.append((Compare("<=", upper, Shape(base(view), axis)), lower, upper, axis))
    return [(c, lo, up, ax) for c, lo, up, ax in out if not _trivially_true(c)]


def _trivially_true(c: Compare) -> bool:
    if isinstance(c.left, Const) and isinstance(c.right, Const):
        return c.left.value <= c.right.value
    if isinstance(c.left, Const) and c.left.value == 0 and isinstance(c.right, Shape):
        return True
    return c.left == c.right


__all__ = ["base", "view_axes", "lengths", "element", "normalized", "fixed_axes", "bound_conditions", "Expr"]
