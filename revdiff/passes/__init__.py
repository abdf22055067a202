"""Passes over the high-level IR: analysis, type inference, inversion, lowering to low IR (with its index and division checks), the adjoint, and the fused vjp."""
