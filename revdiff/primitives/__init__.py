"""The instruction table and the pure-function table: the single source of every rule."""
from revdiff.primitives import instructions as _instructions  # noqa: F401  (registers the entries)
from revdiff.primitives import vector as _vector  # noqa: F401  (registers the vector instructions)
from revdiff.primitives import norm as _norm  # noqa: F401  (registers s += np.linalg.norm(x))
from revdiff.primitives import outer as _outer  # noqa: F401  (registers Y[:, :] += np.outer(u, v))
from revdiff.primitives import elementwise as _elementwise  # noqa: F401  (registers the whole-array statements)
from revdiff.primitives.functions import FUNCTIONS, USER_FUNCTIONS, PureFunction, applied
from revdiff.primitives.instructions import AUGMENTED
from revdiff.primitives.table import INSTRUCTIONS, Instruction, called, inverse_of

__all__ = ["INSTRUCTIONS", "Instruction", "inverse_of", "FUNCTIONS", "USER_FUNCTIONS", "PureFunction", "applied",
           "AUGMENTED", "called"]
