"""The high-level functions' checked arguments: batches of matrices and vectors with their batch
axes merged into one, their array module, and the powers of two that bring extreme magnitudes into
range (``inputs.py`` has the checks and the scaling)."""
from __future__ import annotations

import copy

from revdiff.programs.inputs import (array_module, as_array, batch_index, combined, flat, magnitudes_and_exponents,
                                     times_power_of_two)


class Batch:
    """A checked argument with its batch axes merged into one (``flat``: a single value becomes a
    batch of one), the array module it lives in, and its shapes. ``name`` and ``per_column`` say how
    ``scanned`` scans it, ``_scale`` takes what the scan found."""

    name, per_column = "", False

    def _scale(self, big, e) -> None:
        raise NotImplementedError

    def __getattr__(self, attribute: str):  # only for attributes not set: an argument made with scan=False
        if attribute in ("e", "A", "v"):
            raise AttributeError(f"{type(self).__name__} '{self.name}' was made with scan=False and never "
                                 "scanned: pass it to scanned()")
        raise AttributeError(f"{type(self).__name__} has no attribute '{attribute}'")

    def __init__(self, array, core: int):
        self.xp = array_module(array)
        self.shape, self.dtype = tuple(array.shape), array.dtype
        self.batch = self.shape[:len(self.shape) - core]
        self.flat = flat(array, core)
        self.b = self.flat.shape[0]

    @property
    def gpu(self) -> bool:
        """Whether the arrays live on a GPU (in CuPy)."""
        return self.xp.__name__ != "numpy"

    @property
    def empty(self) -> bool:
        return self.flat.size == 0

    def zeros(self, *core):
        return self.xp.zeros((self.b,) + core, self.dtype)

    def unflat(self, a, *core):
        return a.reshape(self.batch + core)

    def scaled(self, a, *exponents):
        """``a * 2**(sum of exponents)``, per batch element or per column (``inputs.combined``)."""
        return times_power_of_two(a, combined(*exponents), self.xp)


class Matrices(Batch):
    """A checked batch of matrices A (..., m, n), its columns scaled by powers of two where their
    magnitude is extreme: ``A = scaled * 2**e``, e per batch element and column (None: no column
    needed it). ``scan=False``: checked and scaled later, with other arguments (``scanned``)."""

    name, per_column = "A", True

    def __init__(self, A, dtype=None, scan: bool = True):
        A = as_array("A", A, 2, dtype=dtype, core=" (..., m, n)")
        super().__init__(A, 2)
        self.m, self.n = self.shape[-2:]
        self.p = min(self.m, self.n)
        if scan:
            scanned(self)

    def _scale(self, big, e) -> None:
        self.e = e
        self.A = self.flat if e is None else self.scaled(self.flat, -e)

    def permuted(self, perm) -> "Matrices":
        """The same matrices with the columns of each in the order ``perm`` (b, n)."""
        out = copy.copy(self)
        xp = self.xp
        out.flat = xp.take_along_axis(self.flat, perm[:, None, :], axis=2)
        out.A = xp.take_along_axis(self.A, perm[:, None, :], axis=2)
        out.e = None if self.e is None else xp.take_along_axis(self.e, perm, axis=1)
        return out


class Vectors(Batch):
    """A checked batch of vectors (..., n), scaled by a power of two per element where its magnitude
    is extreme (``v = scaled * 2**e``). ``direction``: none may be zero (it is normalised).
    ``cotangent``/``tangent``: it takes the dtype of ``like``, a complex one for a real ``like`` refused.
    ``why``: what the shape error says it needs the shape for ("{like}": the shape of ``like``).
    ``scan=False``: checked and scaled later, with other arguments (``scanned``)."""

    def __init__(self, name: str, value, like: Batch, shape: tuple | None = None, cotangent: bool = False,
                 direction: bool = False, why: str = "", tangent: bool = False, scan: bool = True):
        v = as_array(name, value, 1, **({"cotangent_of": like.dtype, "role": "tangent" if tangent else "cotangent"}
                                        if cotangent or tangent else {"dtype": like.dtype}))
        if shape is not None and tuple(v.shape) != shape:
            raise ValueError(f"'{name}' has shape {tuple(v.shape)}; {why.format(like=like.shape)} {shape}")
        super().__init__(v, 1)
        self.name, self.direction = name, direction
        if scan:
            scanned(self)

    def _scale(self, big, e) -> None:
        if self.direction and self.shape[-1] and bool(self.xp.any(big == 0)):
            b = int(self.xp.argmax(big == 0))
            raise ValueError(f"'{self.name}' at batch index {batch_index(self.batch, b)} is zero and has no direction")
        self.e = e
        self.v = self.flat if e is None else self.scaled(self.flat, -e)


def scanned(*arguments: Batch) -> tuple:
    """``arguments`` (Matrices and Vectors on one device), each with NaN and Inf refused and its
    extreme magnitudes scaled, all in one pass over them (``inputs.magnitudes_and_exponents``)."""
    found = magnitudes_and_exponents([(a.name, a.flat, a.batch, a.per_column) for a in arguments], arguments[0].xp)
    for a, (big, e) in zip(arguments, found):
        a._scale(big, e)
    return arguments
