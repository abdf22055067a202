import ctypes
import os

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("default", deadline=None, max_examples=40,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", deadline=None, max_examples=25, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")


def _malloc_trim():
    """glibc's ``malloc_trim``, or None elsewhere."""
    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


@pytest.fixture(autouse=True)
def _return_freed_memory():
    """After each test, give the memory malloc holds free back to the system: NVRTC frees the
    ~470 MB it used for the kernel module of the CUDA tests, but glibc would keep it."""
    yield
    if _TRIM is not None:
        _TRIM(0)
