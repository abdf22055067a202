"""A process-wide setting held while any caller is inside (the recursion limit while generated code
compiles, BLAS's thread count while a batch runs): the first to enter sets it, the last to leave
restores what it was, so that overlapping callers never restore each other's value."""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator


class HeldSetting:
    """``apply()`` sets the setting and returns what restores it."""

    def __init__(self, apply: Callable[[], Callable[[], None]]):
        self._apply = apply
        self._lock = threading.Lock()
        self._inside = 0
        self._restore: Callable[[], None] | None = None

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._lock:
            if self._inside == 0:
                self._restore = self._apply()
            self._inside += 1
        try:
            yield
        finally:
            with self._lock:
                self._inside -= 1
                if self._inside == 0:
                    restore, self._restore = self._restore, None
                    restore()
