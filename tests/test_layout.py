"""The layout shows the design (issue 26): no import cycles between the engine's modules, the data
side (datasets, partitioning, samplers) free of the engine, files of one concept."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"gnnscale": ROOT / "gnnscale", "gnnscale.partitioning": ROOT / "partitioning",
            "gnnscale.samplers": ROOT / "samplers", "gnnscale.datasets": ROOT / "datasets"}


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            if pkg == "gnnscale" and path.relative_to(folder).parts[0] in ("partitioning", "samplers", "datasets"):
                continue
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = path
    return out


def _imports(path: Path, name: str, modules: dict) -> set[str]:
    """The gnnscale modules ``path`` imports when it is imported (module level, not inside functions)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + ([node.module] or []))
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if full in modules else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m in modules and m != name}


def test_no_module_imports_one_that_imports_it_back():
    modules = _modules()
    graph = {name: _imports(path, name, modules) for name, path in modules.items()}
    state: dict[str, int] = {}
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for dep in graph[node]:
            if state.get(dep) == 1:
                cycles.append(stack[stack.index(dep):] + [dep] if dep in stack else [node, dep])
            elif dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not cycles, cycles


def test_the_data_side_imports_nothing_of_the_engine():
    modules = _modules()
    allowed = ("gnnscale.errors", "gnnscale.lazy", "gnnscale.partitioning", "gnnscale.samplers", "gnnscale.datasets")
    for name, path in modules.items():
        if not name.startswith(allowed[2:]):
            continue
        text = path.read_text()
        for node in ast.walk(ast.parse(text)):  # inside functions too
            mod = node.module if isinstance(node, ast.ImportFrom) and node.module else None
            if mod and mod.startswith("gnnscale") and not mod.startswith(allowed):
                raise AssertionError(f"{path.relative_to(ROOT)} imports {mod}")


def test_engine_files_hold_one_concept_each():
    """About 500 lines at most per engine file (a longer one holds a second concept)."""
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "gnnscale").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 520}
    assert not long, long
