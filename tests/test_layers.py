"""The package's imports go one way: every import (module-level, inside functions and under ``if
TYPE_CHECKING:`` alike) points to a lower layer or to its own, and no chain of imports leads back to
where it started."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "revdiff"

#: the layers, lowest first; a module may import from its own layer or any below it
LAYERS = [
    ["revdiff.errors", "revdiff.language", "revdiff.user_names"],
    ["revdiff.ir"],
    ["revdiff.primitives"],
    ["revdiff.frontend", "revdiff.passes"],
    ["revdiff.optimize"],
    ["revdiff.runtime"],
    ["revdiff.targets"],
    ["revdiff.compiler"],
    ["revdiff.calls", "revdiff.extend"],  # the API, from finding and running a program up to differentiation
    ["revdiff.batching"],
    ["revdiff.execute"],
    ["revdiff.function", "revdiff.batch"],
    ["revdiff.ad", "revdiff.diagnostics"],
    ["revdiff.forward_mode"],
    ["revdiff.programs"],
    ["revdiff.torch", "revdiff.jax", "revdiff.dask", "revdiff.formulas", "revdiff.tools", "revdiff.__main__", "revdiff"],
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> dict:
    """{imported revdiff module: line} for every import statement in module ``name``."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: dict = {}
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        else:
            continue
        for target in targets:
            if target in MODULES and target != name:
                found.setdefault(target, node.lineno)
    return found


def layer_of(name: str) -> int:
    best = None
    for k, layer in enumerate(LAYERS):
        for prefix in layer:
            if name == prefix or (prefix != "revdiff" and name.startswith(prefix + ".")):
                if best is None or len(prefix) > best[1]:
                    best = (k, len(prefix))
    assert best is not None, f"{name} belongs to no layer: add it to LAYERS"
    return best[0]


GRAPH = {name: imports_of(name) for name in MODULES}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down(name):
    wrong = [f"{MODULES[name].name}:{line} imports {target} (layer {layer_of(target)} > {layer_of(name)})"
             for target, line in GRAPH[name].items() if layer_of(target) > layer_of(name)]
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    state: dict = {}
    cycles = []

    def visit(name: str, path: list) -> None:
        state[name] = "open"
        for target in GRAPH[name]:
            if state.get(target) == "open":
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[name] = "done"

    for name in MODULES:
        if name not in state:
            visit(name, [name])
    assert not cycles, "\n".join(cycles)


def test_no_module_over_500_lines():
    long = [f"{name}: {n} lines" for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 500]
    assert not long, "\n".join(long)


def test_every_module_below_the_api_is_in_the_compiler_fingerprint():
    """Cache keys hash the compiler's sources: a module generated code depends on and the
    fingerprint leaves out would let a cached program outlive a change to its code generator."""
    from revdiff.runtime.loader import _COMPILER_PARTS
    api = next(k for k, layer in enumerate(LAYERS) if "revdiff.forward_mode" in layer)
    not_codegen = {"revdiff.ad", "revdiff.forward_mode", "revdiff.diagnostics", "revdiff.extend", "revdiff.execute",
                   "revdiff.batch"}
    missing = [name for name, path in MODULES.items() if layer_of(name) <= api and name not in not_codegen
               and path.relative_to(PACKAGE).parts[0] not in _COMPILER_PARTS]
    assert not missing, missing
