"""Shared test fixtures: where the real data lies (../shared/data, never copied into the repo)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# Worker modules (tests/dist_workers.py) must be importable by spawned processes.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The suite launches local workers a few hundred times, mostly 2 at a time: fork those from a
# server that has imported torch once (launch.start_workers_by_fork; the same environment as
# spawned ones) instead of spawning interpreters that import it each time. Other launches,
# and runs through the CLI (subprocesses), spawn as users' do. A launch whose environment
# differs from the server's spawns too, so scikit-learn, which sets KMP_* variables when
# imported, is imported first (ogb's and inductor's variables, and pytest's test name, are
# among those the forked workers set themselves: launch.READ_LATE).
import sklearn.metrics  # noqa: E402,F401

from gnnscale.process.launch import start_workers_by_fork  # noqa: E402

try:
    start_workers_by_fork(2)
except OSError as err:  # a host without Unix sockets for the server: every launch spawns, as before
    print(f"conftest: workers will be spawned (the forkserver did not start: {err})", file=sys.stderr)


def pytest_terminal_summary(terminalreporter):
    from gnnscale.process.launch import fork_counts

    counts = fork_counts()
    terminalreporter.write_line(f"local launches: {counts['forked']} forked from the server; launches spawned "
                                f"because these variables differed: {counts['spawned'] or 'none'}")


def shared_data_dir() -> Path:
    """``$GNNSCALE_SHARED_DATA`` or ``<repo>/../shared/data``."""
    env = os.environ.get("GNNSCALE_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"real data folder {path} not found (set GNNSCALE_SHARED_DATA)")
    return path


@pytest.fixture(scope="session")
def cora(shared_data):
    """Planetoid Cora from the shared data folder (``Data``: 2708 nodes, 1433 features, 7 classes)."""
    from gnnscale.datasets import load_dataset

    return load_dataset("planetoid:cora", root=str(shared_data / "planetoid" / "raw"))


@pytest.fixture(scope="session")
def cora_partition(cora, tmp_path_factory):
    """``cora_partition(n, method="metis")``: the folder of Cora cut into n parts, made once per session."""
    made: dict = {}

    def get(parts: int, method: str = "metis") -> str:
        if (parts, method) not in made:
            from gnnscale.partitioning import partition_graph

            out = tmp_path_factory.mktemp(f"cora_{method}{parts}")
            partition_graph(cora, parts, out, method=method, dataset="planetoid:cora")
            made[parts, method] = str(out)
        return made[parts, method]

    return get


@pytest.fixture(scope="session")
def acm(shared_data):
    """ACM (typed: paper 4019 / author 7167 / subject 60, 4 relations; train_20 split) from the shared data."""
    from gnnscale.datasets import load_dataset

    return load_dataset(f"acm:{shared_data / 'acm'}?split=20")


@pytest.fixture(scope="session")
def acm_partition(acm, tmp_path_factory):
    """``acm_partition(n)``: ACM cut by METIS into n typed parts (format 2), made once per session."""
    made: dict = {}

    def get(parts: int) -> str:
        if parts not in made:
            from gnnscale.partitioning import partition_graph

            out = tmp_path_factory.mktemp(f"acm{parts}")
            partition_graph(acm, parts, out, method="metis", dataset=acm.name)
            made[parts] = str(out)
        return made[parts]

    return get


@pytest.fixture
def run_example(monkeypatch, capsys):
    """``run_example(cwd, script, *args)``: ``python examples/SCRIPT ARGS`` in this process, in ``cwd``, as
    a CompletedProcess (exit status 0 when main returns, SystemExit's code otherwise; what it printed).
    An exception (a traceback) propagates and fails the test. No variable is set: a launch whose
    environment differs from the fork server's would spawn its workers (--cache-dir keeps every
    partition in the test's folder)."""
    import runpy

    def run(cwd: Path, script: str, *args: str) -> subprocess.CompletedProcess:
        path = str(Path(__file__).resolve().parents[1] / "examples" / script)
        monkeypatch.delenv("GNNSCALE_FAULT", raising=False)
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "argv", [path, *args])
        capsys.readouterr()
        try:
            runpy.run_path(path, run_name="__main__")
            code = 0
        except SystemExit as exit:
            code = exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess([script, *args], code, out, err)

    return run
