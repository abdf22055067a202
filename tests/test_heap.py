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
    if not hasattr(libc, "mallinfo2"):
        raise SystemExit("not glibc 2.33 or later")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)

    class Mallinfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd",
                                                          "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc.mallinfo2.restype = Mallinfo2

    def mapped_on_its_own(size):
        """Whether a block of this size gets a mapping of its own (kept: a free would raise the thresholds)."""
        before = libc.mallinfo2().hblks
        libc.malloc(size)
        return libc.mallinfo2().hblks > before

    before = mapped_on_its_own(4 << 20)

    @revdiff.reversible
    def double(x):
        x[:] *= 2.0

    double(np.ones(3))
    print(before, mapped_on_its_own(4 << 20))
''')


#: settings that turn glibc's dynamic thresholds off (a dask.distributed LocalCluster, which the dask tests
#: start, leaves MALLOC_TRIM_THRESHOLD_ in the environment of the process)
_SWITCHING_THE_RULE_OFF = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_",
                           "GLIBC_TUNABLES")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc thresholds")
@pytest.mark.parametrize("switch, expected", [("1", "True False"), ("0", "True True"), (" Off ", "True True")])
def test_compiled_programs_raise_glibcs_malloc_thresholds_unless_switched_off(tmp_path, switch, expected):
    """After the first compiled program a 4 MiB block comes from the heap, not a mapping of its own
    (``runtime/heap.py``; glibc's count of such mappings, ``mallinfo2().hblks``, says which);
    REVDIFF_MALLOC_THRESHOLDS=0 (or off, any case) leaves glibc's thresholds as they were."""
    script = tmp_path / "probe.py"
    script.write_text(_HEAP_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in _SWITCHING_THE_RULE_OFF}
    env.update(REVDIFF_MALLOC_THRESHOLDS=switch, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    if done.stderr.strip().endswith("not glibc 2.33 or later"):
        pytest.skip("not glibc 2.33 or later")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == expected.split()
