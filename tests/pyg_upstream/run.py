"""PyG's own loader tests run against gnnscale.pyg's loaders (issue 56 item 3).

The two files beside this one are PyG's ``test/loader/test_neighbor_loader.py`` and
``test/loader/test_link_neighbor_loader.py``, unmodified, from pyg-team/pytorch_geometric at commit
``PYG_COMMIT`` (MIT licence: ``LICENSE`` here). They are named ``pyg_test_*.py`` so that the suite
does not collect them with PyG's own loaders. This runner copies them into a temporary folder as
``test_*.py`` beside a small conftest plug-in, and runs pytest there in a child process. The plug-in:

- puts ``gnnscale.pyg.NeighborLoader`` / ``LinkNeighborLoader`` in place of
  ``torch_geometric.loader``'s before the files import them (subclasses of the same names that
  count how many loaders each test builds);
- lifts the skips that only test for a sampling package (PyG's own samplers need pyg-lib or
  torch-sparse; gnnscale's do not): ``onlyNeighborSampler``, ``withPackage('pyg_lib')``, the
  ``WITH_WEIGHTED_NEIGHBOR_SAMPLE`` / ``WITH_EDGE_TIME_NEIGHBOR_SAMPLE`` skips, and the files' own
  ``WITH_PYG_LIB`` / ``WITH_TORCH_SPARSE`` early returns (set True in the test modules only, not in
  PyG). Kept: ``withPackage('pyg_lib', 'torch_sparse')`` (those tests call the two packages' kernels
  directly) and every other package check (``torch_frame``);
- gives PyG's ``get_dataset`` fixture for the one data set these tests load (``karate``: built in).

It prints passed / failed / skipped counts (a pass that built no loader counted apart) and each
failure's one-line reason::

    python tests/pyg_upstream/run.py [-k EXPR] [--json FILE] [--from-git PYG_GIT_DIR]

``--from-git`` copies the two files (and the LICENSE) again from a PyG git directory's HEAD and
prints the commit to write into ``PYG_COMMIT``. tests/test_pyg_upstream.py runs it in the suite.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYG_COMMIT = "5c6461b2305ad068a6d61165b3c55852a11aaa41"
FILES = {"pyg_test_neighbor_loader.py": "test/loader/test_neighbor_loader.py",
         "pyg_test_link_neighbor_loader.py": "test/loader/test_link_neighbor_loader.py"}

CONFTEST = r'''
"""Written by tests/pyg_upstream/run.py: PyG's loader tests on gnnscale.pyg's loaders."""
import json
import os

import pytest
import torch_geometric.loader
import torch_geometric.testing
from torch_geometric.testing import decorators

import gnnscale.pyg

BUILT = {"count": 0}


class NeighborLoader(gnnscale.pyg.NeighborLoader):
    def __init__(self, *args, **kwargs):
        BUILT["count"] += 1
        super().__init__(*args, **kwargs)


class LinkNeighborLoader(gnnscale.pyg.LinkNeighborLoader):
    def __init__(self, *args, **kwargs):
        BUILT["count"] += 1
        super().__init__(*args, **kwargs)


torch_geometric.loader.NeighborLoader = NeighborLoader
torch_geometric.loader.LinkNeighborLoader = LinkNeighborLoader

_with_package = decorators.withPackage
SAMPLING = {"pyg_lib"}  # a test that needs only this package tests a sampler: ours stands in


def withPackage(*names):
    if set(names) <= SAMPLING:
        return lambda func: func
    return _with_package(*names)


torch_geometric.testing.withPackage = withPackage
torch_geometric.testing.onlyNeighborSampler = lambda func: func

LIFTED = ("does not support weighted neighbor sampling", "No neighbor sampler installed")


def pytest_configure(config):
    config.addinivalue_line("markers", "dataset: loads a data set")


@pytest.fixture(scope="session")
def get_dataset():
    def load(name, *args, **kwargs):
        if "karate" in name.lower():
            from torch_geometric.datasets import KarateClub
            return KarateClub(*args, **kwargs)
        raise ValueError(f"the runner loads karate only; found {name!r}")
    return load


def pytest_collection_modifyitems(session, config, items):
    for item in items:
        mod = item.module
        for name in ("WITH_PYG_LIB", "WITH_TORCH_SPARSE", "WITH_WEIGHTED_NEIGHBOR_SAMPLE",
                     "WITH_EDGE_TIME_NEIGHBOR_SAMPLE"):
            if hasattr(mod, name):
                setattr(mod, name, True)
        item.own_markers[:] = [m for m in item.own_markers if not (
            m.name == "skipif" and any(r in str(m.kwargs.get("reason", "")) for r in LIFTED))]


RESULTS = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    BUILT["count"] = 0
    yield
    item.gnnscale_built = BUILT["count"]


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        reason = ""
        if report.failed:
            crash = getattr(report.longrepr, "reprcrash", None)
            reason = crash.message if crash is not None else str(report.longrepr)
            reason = " ".join(reason.split())[:300]
        elif report.skipped:
            reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else ""
        RESULTS.append({"test": report.nodeid, "outcome": report.outcome, "reason": reason,
                        "built": getattr(report, "gnnscale_built", None)})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    out.get_result().gnnscale_built = getattr(item, "gnnscale_built", None)


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["GNNSCALE_PYG_RESULTS"], "w") as f:
        json.dump(RESULTS, f)
'''


def from_git(git_dir: str) -> None:
    """Copy the two files and PyG's LICENSE again from ``git_dir``'s HEAD; print the commit."""
    show = lambda path: subprocess.run(["git", "--git-dir", git_dir, "show", f"HEAD:{path}"], check=True,
                                       capture_output=True, text=True).stdout
    for name, path in FILES.items():
        (HERE / name).write_text(show(path))
    (HERE / "LICENSE").write_text(show("LICENSE"))
    head = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    print(f"copied at {head}: set PYG_COMMIT in {__file__}")


def run(k: str | None = None, timeout: float = 600) -> list[dict]:
    """Each test's ``{test, outcome, reason, built}`` (``built``: loaders it built)."""
    work = Path(tempfile.mkdtemp(prefix="gnnscale-pyg-tests-"))
    try:
        for name in FILES:
            shutil.copyfile(HERE / name, work / name.removeprefix("pyg_"))
        (work / "conftest.py").write_text(CONFTEST)
        (work / "pytest.ini").write_text("[pytest]\n")
        env = dict(os.environ, GNNSCALE_PYG_RESULTS=str(work / "results.json"))
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
               *(["-k", k] if k else []), "."]
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        if not (work / "results.json").is_file():
            raise RuntimeError(f"pytest wrote no results (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
                               f"{proc.stderr[-3000:]}")
        return json.loads((work / "results.json").read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def counts(results: list[dict]) -> dict:
    """passed (built a loader), passed_without_loader, failed, skipped, total."""
    out = {"passed": 0, "passed_without_loader": 0, "failed": 0, "skipped": 0}
    for r in results:
        if r["outcome"] == "passed":
            out["passed" if r["built"] else "passed_without_loader"] += 1
        else:
            out[r["outcome"]] += 1
    out["total"] = len(results)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", help="pytest -k expression")
    ap.add_argument("--json", help="write the counts and every test's outcome here")
    ap.add_argument("--from-git", help="copy the files again from this PyG git directory's HEAD and stop")
    args = ap.parse_args(argv)
    if args.from_git:
        from_git(args.from_git)
        return 0
    results = run(args.k)
    for r in results:
        if r["outcome"] != "passed":
            print(f"{r['outcome'].upper()} {r['test']}: {r['reason']}")
    c = counts(results)
    print(f"PyG {PYG_COMMIT[:12]} loader tests on gnnscale.pyg: {c['passed']} passed, {c['passed_without_loader']} "
          f"passed without building a loader, {c['failed']} failed, {c['skipped']} skipped of {c['total']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"commit": PYG_COMMIT, "counts": c, "tests": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
