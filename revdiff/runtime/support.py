"""Names generated code imports. Kept tiny: generated modules must import fast."""


class CheckFailed(Exception):
    """Raised by generated code: (function key, check index, value, value)."""
