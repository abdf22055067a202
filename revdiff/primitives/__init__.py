"""The instruction table and the pure-function table: the single source of every rule."""
from . import instructions as _instructions  # noqa: F401  (registers the entries)
from . import vector as _vector  # noqa: F401  (registers the vector instructions)
from .functions import FUNCTIONS, USER_FUNCTIONS, PureFunction
from .instructions import AUGMENTED, CALL_INSTRUCTIONS
from .table import INSTRUCTIONS, Instruction, inverse_of

__all__ = ["INSTRUCTIONS", "Instruction", "inverse_of", "FUNCTIONS", "USER_FUNCTIONS", "PureFunction",
           "AUGMENTED", "CALL_INSTRUCTIONS"]
