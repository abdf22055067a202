"""The examples run and check themselves."""
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path, capsys, monkeypatch):
    for framework in ("torch", "jax"):
        if f"import {framework}" in path.read_text() or f"revdiff.{framework}" in path.read_text():
            pytest.importorskip(framework)
    monkeypatch.setattr(sys, "argv", [str(path)])
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()
