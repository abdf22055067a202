"""On/off switches read from the environment (``REVDIFF_COMPILE_NOTICE``, ``REVDIFF_MALLOC_THRESHOLDS``)."""
from __future__ import annotations

import os

#: the values that switch a setting off, case and surrounding spaces ignored
OFF = ("0", "false", "no", "off")


def switched_off(variable: str) -> bool:
    """Whether environment ``variable`` switches its setting off (unset: on)."""
    return os.environ.get(variable, "1").strip().lower() in OFF
