"""Names generated code imports. Kept tiny: generated modules must import fast."""


class CheckFailed(Exception):
    """A failed runtime check as generated code records it: (function key, check index, value, value)."""
