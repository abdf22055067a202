"""The on-disk cache across processes: a program edited two calls deep must not reuse a caller
compiled against its old version (the caller's own generated text is unchanged)."""
import os
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import numpy as np
    import revdiff
    from revdiff import reversible

    @reversible
    def inner(y, x):
        y += {scale} * x

    @reversible
    def middle(y, x):
        inner(y, x)

    @reversible
    def outer(y, x):
        middle(y, x)

    print(revdiff.batched(outer, ("y", "x"))(np.zeros(4), np.ones(4))[0].tolist())
""")


def run_edited(tmp_path, scale: str) -> str:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM.format(scale=scale))
    env = dict(os.environ, REVDIFF_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_callee_edited_two_calls_deep_recompiles_its_callers(tmp_path):
    assert run_edited(tmp_path, "2.0") == "[2.0, 2.0, 2.0, 2.0]"
    assert run_edited(tmp_path, "3.0") == "[3.0, 3.0, 3.0, 3.0]"
