"""The layout shows the design (issues 26, 45): the packages are floors, each importing only from its
own floor or those below it; no import cycles between the engine's modules; the data side
(datasets, partitioning, samplers) free of the engine; files of one concept. Imports made inside
functions count as much as those at the top of a module: they are dependencies too."""
from __future__ import annotations

import ast
import os
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


# The floors, bottom to top: a module imports modules of its own floor or of floors below it, never
# one above (at the top of the module or inside a function). A new package or top-level module
# takes its place here.
FLOORS = [
    ("gnnscale.errors", "gnnscale.lazy", "gnnscale.logs", "gnnscale.outputs"),
    ("gnnscale.datasets", "gnnscale.partitioning", "gnnscale.samplers"),  # the data side
    ("gnnscale.config", "gnnscale.options"),
    ("gnnscale.planning",),  # torch-free: the launcher checks a run with it
    ("gnnscale.process",),
    ("gnnscale.data",),
    ("gnnscale.nn",),  # model code only
    ("gnnscale.tasks",),  # what a run learns and how it is scored; layer-wise inference over the stores
    ("gnnscale.history",),  # bounded staleness: exchange modes as hooks for the axes
    ("gnnscale.parallel",),  # the axes
    ("gnnscale.training",),  # the loop, the model file, gnnscale evaluate and embed
    ("gnnscale.pyg", "gnnscale.dist_partition"),
    ("gnnscale.api",),
    ("gnnscale.cli", "gnnscale.__main__", "gnnscale"),
]


def _floor(name: str) -> int:
    for i, floor in enumerate(FLOORS):
        if any(name == f or name.startswith(f + ".") for f in floor if f != "gnnscale"):
            return i
    if name == "gnnscale":
        return len(FLOORS) - 1
    raise AssertionError(f"{name} is on no floor: add its package to FLOORS in tests/test_layout.py")


def _imports(path: Path, name: str, modules: dict) -> dict[str, int]:
    """``{gnnscale module: line}`` of every import in ``path``: at the top of the module and inside
    functions alike (a function's import is a dependency that runs later, not none)."""
    tree = ast.parse(path.read_text())
    found: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
                base = ".".join(pkg.split(".")[: len(pkg.split(".")) - node.level + 1] + [node.module])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.setdefault(full if full in modules else base, node.lineno)
        elif isinstance(node, ast.Import):
            for a in node.names:
                found.setdefault(a.name, node.lineno)
    return {m: line for m, line in found.items() if m in modules and m != name}


def _graph() -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    modules = _modules()
    return modules, {name: _imports(path, name, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (each holds a cycle), Tarjan's."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _record(**counts: int) -> None:
    """Print the counts (``pytest -s`` shows them) and, with GNNSCALE_LAYOUT_JSON set, add them to that file."""
    print(" ".join(f"{k}={v}" for k, v in counts.items()))
    out = os.environ.get("GNNSCALE_LAYOUT_JSON")
    if out:
        import json

        old = json.loads(Path(out).read_text()) if Path(out).exists() else {}
        Path(out).write_text(json.dumps(old | counts, indent=1))


def test_no_module_imports_one_from_a_floor_above_it():
    modules, graph = _graph()
    against = sorted(f"{modules[a].relative_to(ROOT)}:{line} imports {b} (floor {_floor(b)} above {_floor(a)})"
                     for a, deps in graph.items() for b, line in deps.items() if _floor(b) > _floor(a))
    inside = set()  # gnnscale imports inside functions (nested functions' counted once)
    for path in modules.values():
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inside.update((path, sub.lineno) for sub in ast.walk(fn)
                              if isinstance(sub, ast.ImportFrom) and (sub.level or (sub.module or "").startswith("gnnscale"))
                              or isinstance(sub, ast.Import) and any(a.name.startswith("gnnscale") for a in sub.names))
    _record(imports_against_the_order=len(against), imports_inside_functions=len(inside),
            modules=len(modules), import_edges=sum(len(d) for d in graph.values()))
    assert not against, "\n".join(against)


def test_no_module_imports_one_that_imports_it_back():
    """No cycle, counting imports inside functions too."""
    _, graph = _graph()
    cycles = _cycles(graph)
    _record(import_cycles=len(cycles))
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
