"""The examples run and check themselves."""
import runpy
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path, capsys, monkeypatch):
    for framework, module in (("torch", "torch"), ("jax", "jax"), ("dask", "dask.distributed")):
        if f"import {framework}" in path.read_text() or f"revdiff.{framework}" in path.read_text():
            pytest.importorskip(module)
    assert "assert " in path.read_text(), f"{path.name} shows results without checking them"
    monkeypatch.setattr(sys, "argv", [str(path)])
    runpy.run_path(str(path), run_name="__main__")
    assert capsys.readouterr().out.strip()
