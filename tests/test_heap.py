"""glibc's malloc thresholds (revdiff/runtime/heap.py): raised before the first compiled program runs,
unless switched off."""
import os
import subprocess
import sys
import textwrap

import pytest

_HEAP_PROBE = textwrap.dedent('''
    import ctypes
    import numpy as np
    import revdiff
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "gnu_get_libc_version"):
        raise SystemExit("not glibc")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)

    def in_heap(address):
        for line in open("/proc/self/maps"):
            if line.rstrip().endswith("[heap]"):
                low, high = (int(x, 16) for x in line.split()[0].split("-"))
                return low <= address < high
        return False

    before = in_heap(libc.malloc(4 << 20))  # not freed: a free would raise the thresholds itself

    @revdiff.reversible
    def double(x):
        x[:] *= 2.0

    double(np.ones(3))
    print(before, in_heap(libc.malloc(4 << 20)))
''')


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc thresholds")
@pytest.mark.parametrize("switch, expected", [("1", "False True"), ("0", "False False"), (" Off ", "False False")])
def test_compiled_programs_raise_glibcs_malloc_thresholds_unless_switched_off(tmp_path, switch, expected):
    """After the first compiled program a 4 MiB block comes from the heap, not fresh pages of its own
    (``runtime/heap.py``); REVDIFF_MALLOC_THRESHOLDS=0 (or off, any case) leaves glibc's thresholds as they were."""
    script = tmp_path / "probe.py"
    script.write_text(_HEAP_PROBE)
    env = dict(os.environ, REVDIFF_MALLOC_THRESHOLDS=switch, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    if done.stderr.strip().endswith("not glibc"):
        pytest.skip("not glibc")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected.split()
