"""Transforms over the IR: type inference, inversion, lowering to low IR, and the adjoint."""
