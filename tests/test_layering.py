"""One-way layers: catalog/topology -> cost -> search -> report -> cli (STYLE.md rule 1)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "planner"
LAYERS = {
    "units": 0,
    "errors": 0,
    "limits": 0,
    "interrupt": 0,
    "specs": 1,
    "catalog": 2,
    "topology": 2,
    "cost": 3,
    "search": 4,
    "report": 5,
    "accuracy": 5,
    "measure": 5,
    "api": 6,
    "cli": 6,
    "__main__": 6,
}


def _layer_of(module: str) -> str:
    return module.split(".")[1] if module.count(".") else "__init__"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
    return out


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        out.append((".".join(rel.parts), path))
    return out


def test_no_upward_imports() -> None:
    bad = []
    for module, path in _modules():
        own = _layer_of(module)
        if own == "__init__":
            continue
        for imported in _imports(path):
            if not imported.startswith("planner."):
                continue
            target = _layer_of(imported)
            if target == own:
                continue
            if LAYERS[target] > LAYERS[own] or (LAYERS[target] == LAYERS[own] == 2):
                bad.append(f"{module} imports {imported}")
    assert bad == []


def test_only_topology_imports_networkx_and_cost_never_sees_a_solver() -> None:
    for module, path in _modules():
        imports = _imports(path)
        if any(i.split(".")[0] == "networkx" for i in imports):
            assert _layer_of(module) == "topology", module
        if _layer_of(module) == "cost":
            assert not any(i.startswith(("ortools", "planner.topology")) for i in imports), module


def test_cli_imports_nothing_heavy_at_module_level() -> None:
    """`layout --help` stays instant: the CLI modules import only the stdlib and each other at
    module level (the library is imported inside the subcommand functions)."""
    for path in sorted((PACKAGE / "cli").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        names = {getattr(n, "module", None) or n.names[0].name for n in top_level}
        heavy = [
            n
            for n in names
            if str(n).startswith(("planner", "numpy", "ortools", "pydantic"))
            and not str(n).startswith("planner.cli")
        ]
        assert heavy == [], path.name
