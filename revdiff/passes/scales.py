"""The scales of the lowerer's ancilla zero checks: the largest magnitude each float ancilla held,
or the magnitudes of the terms it summed, against which ``del`` checks it is back to zero within
rounding (``Lowerer`` supplies ``emit``, ``temp``, ``fresh``, ``env``, ``options`` and the sets of
ancillas)."""
from __future__ import annotations

from revdiff.ir import algebra as A
from revdiff.ir import views
from revdiff.ir.high import Call, CallFn, Const, Index, Instr, Name, Slice, base_name
from revdiff.ir.low import Assign, HostCall, Loop
from revdiff.ir.types import VarType
from revdiff.passes.infer import expr_type
from revdiff.primitives import INSTRUCTIONS


class ScaleTracking:
    """The scale tracking of the lowerer."""

    def track_scales(self, s: Instr) -> None:
        """Remember the largest magnitude each ancilla target held (the scale of its zero check). A
        vector instruction's target also takes the scales of the ancilla arrays it read: ``S += Q.T @ V``
        with V nearly orthogonal to Q gives coefficients of rounding size, which the inverse
        cancels only to within rounding of V's size (block CGS2's second coefficients in float32).
        Where no operand is an ancilla here, the target's scale rises to the product of the operands'
        largest magnitudes (``track_product_scale``)."""
        entry = INSTRUCTIONS[s.op]
        for i in entry.targets:
            self.track_scale(s.operands[i])
            if entry.is_vector:
                reads = [s.operands[k] for k in entry.reads if isinstance(s.operands[k], (Name, Index))]
                arrays = [x for x in reads if expr_type(x, self.env, None).is_array]
                if arrays and not any(base_name(x) in self.ancillas for x in arrays):
                    self.track_product_scale(s.operands[i], arrays)
                else:
                    self.inherit_scales(s.operands[i], reads)

    def track_scale(self, t, sources: tuple = ()) -> None:
        """Raise ancilla ``t``'s scale to the magnitude of ``t`` (element) or of every element of
        ``t``, and of the scalars ``sources`` (after a call, whose terms are as large as what it read)."""
        name = base_name(t)
        if not self.tracks_scale(name):
            return
        scale = Name(f"_scale_{name}")
        for x in (t,) + tuple(sources):
            xt = expr_type(x, self.env, None)
            if xt.kind in ("int", "bool"):
                continue
            if not xt.is_array:
                self.emit(Assign((scale,), (Call("max", (scale, Call("abs", (x,)))),)))
                continue
            self.raise_to_largest(scale, x)  # every element of the view written

    def raise_to_largest(self, scale: Name, x) -> None:
        """``scale = max(scale, |e|)`` over every element e of the view x (x[:, j] scans a column,
        not the whole array)."""
        rank = self.env[base_name(x)].ndim
        lengths = views.lengths(x, rank)
        idx = [self.fresh("i") for _ in lengths]
        for i in idx:
            self.env.types[i] = VarType("int", 0, "int64")
        element = views.element(x, rank, tuple(Name(i) for i in idx))
        body = [Assign((scale,), (Call("max", (scale, Call("abs", (element,)))),))]
        for axis in reversed(range(len(lengths))):
            body = [Loop(idx[axis], Const(0), lengths[axis], Const(1), body)]
        whole = isinstance(x, Index) and all(i == Slice(None, None, None) for i in x.indices)
        self.emit(HostCall("largest_magnitude", (scale, Name(x.base) if whole else x), body, result=scale.id))

    def track_product_scale(self, target, arrays: list) -> None:
        """Raise ancilla ``target``'s scale to the product of the largest magnitudes of ``arrays``, the
        operands of a vector instruction none of which is an ancilla here: the size of the terms the
        target sums. A reflection's coefficients d += C^H u of a C nearly orthogonal to u are of
        rounding size and cancel to within rounding of C's size, not their own; C is an ancilla of
        the caller, whose scale the callee cannot see (Householder's reflections in float32).
        Measured once per ancilla, operand arrays and block, by the first such product after the
        ancilla's allocation: the later ones (the uncompute, d += (H C)^H u) read arrays of the same
        column norms (a scan per product cost Householder's gradients 20-55 %). The tolerance's
        margin (about 2000 units of rounding, ``Options.rtol_for``) covers the growth of a product's
        rounding with its length and the largest entry's growth under a reflection (up to sqrt(m))."""
        name = base_name(target)
        key = (name,) + tuple(sorted({base_name(x) for x in arrays}))
        if not self.tracks_scale(name) or key in self.product_scaled:
            return
        self.product_scaled.add(key)
        product = None
        for x in arrays:
            largest = self.temp(Const(0.0), "largest")
            self.raise_to_largest(largest, x)
            product = largest if product is None else A.mul(product, largest)
        scale = Name(f"_scale_{name}")
        self.emit(Assign((scale,), (Call("max", (scale, product)),)))

    def tracks_scale(self, name: str) -> bool:
        """Whether writes to ``name`` here raise a scale: a float ancilla, checks on, neither being
        uncomputed nor left unchecked by a vjp's forward half."""
        return (self.options.check and name in self.ancillas and name not in self.scales_known
                and name not in self.unverified and self.env[name].kind not in ("int", "bool"))

    def track_call_scales(self, s: CallFn, modified: set) -> None:
        """After a call, a modified ancilla's scale rises to its own magnitude, to that of the scalars
        the call read, and to the scales of the ancilla arrays it read: a coefficient computed from
        an ancilla vector cancels to within rounding of that vector's size, not of its own (CGS2's
        second coefficients are themselves of rounding size). Other arrays are not scanned: that
        costs O(size) per call, as much as the call's own work in Gram-Schmidt."""
        args = [a for a in s.args if isinstance(a, (Name, Index))]
        for k, a in enumerate(s.args):
            if k not in modified or not isinstance(a, (Name, Index)):
                continue
            scalars = tuple(x for x in args if x is not a and not expr_type(x, self.env, None).is_array)
            self.track_scale(a, scalars)
            self.inherit_scales(a, [x for x in args if expr_type(x, self.env, None).is_array])

    def inherit_scales(self, target, sources: list) -> None:
        """Raise ancilla ``target``'s scale to the scales of the ancilla arrays among ``sources``."""
        name = base_name(target)
        if not self.tracks_scale(name):
            return
        scale = Name(f"_scale_{name}")
        for src in sorted({base_name(x) for x in sources} - {name}):  # sorted: the same source every time
            if src in self.ancillas and self.env[src].kind not in ("int", "bool"):
                self.emit(Assign((scale,), (Call("max", (scale, Name(f"_scale_{src}"))),)))
