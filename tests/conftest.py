"""Shared test fixtures: where the real data lies (../shared/data, never copied into the repo)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Worker modules (tests/dist_workers.py) must be importable by spawned processes.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# The tests' own process runs thousands of tiny ops on torch's 2 intra-op threads, beside the
# other files' processes (-n 3 on 2 cores): OpenMP's default policy spins an idle thread on a core
# another process needs, and a region waits for its thread to be back on a core. Measured here
# (test_typed_layers' 20-step training of a 4-type model, AMD EPYC, 2 cores, other jobs
# running): 3.6-7.6 CPU s per model spinning, 0.3-0.8 sleeping (OMP_WAIT_POLICY=PASSIVE), the
# same values (the policy changes when threads wait, not the work they share). The variable stays
# set for the processes the tests start (issue 54 item 9): the CLI subprocesses, the fork servers
# and the lone workers, which take the policy the user set (launch.thread_env; workers of several
# processes and typed runs sleep anyway): a 1-worker GCNII-16 run of docs/training.md took 49-72 s
# spinning at load 10, 10.6-11.3 s sleeping. A test that checks a lone worker's own default takes
# it out for its launch.
if "OMP_WAIT_POLICY" not in os.environ and "torch" not in sys.modules:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    import torch  # noqa: E402,F401

# The suite launches local workers a few hundred times, mostly 2 at a time: fork those from a
# server that has imported torch once (launch.start_workers_by_fork; the same environment as
# spawned ones) instead of spawning interpreters that import it each time. A launch of another
# worker or thread count (1 worker: 2 threads) forks from a server
# of its own, started at its first launch (each spawned 1-worker launch cost about 3-4 CPU s of
# imports; test_docs[training.md] 90 -> 56 CPU s). Runs through the CLI (subprocesses) spawn as
# users' do. A launch whose environment differs from the one the servers started in spawns too, so scikit-learn, which sets KMP_* variables when
# imported, is imported first (ogb's and inductor's variables, and pytest's test name, are
# among those the forked workers set themselves: launch.READ_LATE).
import sklearn.metrics  # noqa: E402,F401

# The suite writes nothing into the user's home (issue 54 item 9: five partitions were left in
# ~/.cache/gnnscale/partitions): every run that cuts a --dataset without --cache-dir caches it in
# this process's temporary folder ($GNNSCALE_CACHE, which the launched workers, the forked ones and
# the CLI subprocesses inherit; set before the fork server starts, so launches still fork). A
# user's own $GNNSCALE_CACHE is not used either. Removed when the session ends.
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

SUITE_CACHE = tempfile.mkdtemp(prefix="gnnscale-test-cache-")
os.environ["GNNSCALE_CACHE"] = SUITE_CACHE
_OWNER = os.getpid()
# only this process removes it (a process forked from it that exits through Python would too)
atexit.register(lambda: os.getpid() == _OWNER and shutil.rmtree(SUITE_CACHE, ignore_errors=True))

from gnnscale.process.launch import READ_LATE, start_workers_by_fork  # noqa: E402

# CI=1 (set by the tests that run the CLI as CI does: test_cli_checks.main_cli, and by CI itself)
# only turns the trainer's progress bar off, read when a run starts (gnnscale.training.trainer), never
# at import by the server's modules: a launch that differs in it still forks (issue 54 item 9: each
# such launch spawned 2 interpreters importing torch).
# The servers import torch_geometric too (issue 54 item 9): the suite's launches with a PyG layer
# (gat-pyg, gin, gine, a user's MessagePassing, TransformerConv by import path, the PyG stores'
# workers) imported it in every worker, about 5 CPU s each, while a server pays it once.
try:
    start_workers_by_fork(2, preload=("gnnscale.process.fork_preload", "torch_geometric"), read_late=(*READ_LATE, "CI"))
except OSError as err:  # a host without Unix sockets for the server: every launch spawns, as before
    print(f"conftest: workers will be spawned (the forkserver did not start: {err})", file=sys.stderr)


# The suite's wall time on CI's two cores is the sum of the files' seconds / the cores, plus the
# tail: the last files to start run alone. pytest-xdist (--dist loadfile) hands files out in
# collection order (its default reorders them by test count, not by time), so the longest files
# go first, as measured on a fresh clone (2026-12-06, `--durations=0`, each file's setup, calls and
# teardowns summed; seconds, beside another job: the order matters, not the figures):
# longest-processing-time-first leaves short files for the end. A file not listed sorts as 5 s.
# Since the tests' own process lets idle OpenMP threads sleep (2026-12-07), the files measured again
# are scaled by their CPU seconds after / before (user+sys, each file alone, this 2-core AMD EPYC at load 13-25):
# test_typed_layers 31.4 -> 9.9, test_pyg_loaders 36.0 -> 14.4, test_datasets 25.0 -> 19.7,
# test_checkpoint 90.1 -> 82.0, test_layer_pipeline 47.3 -> 40.8, test_typed_partitions 31.8 -> 31.6
# (kept); test_benchmarks_smoke 583.7 -> 478.9 (its smoke runs' threads sleep too).
# 2026-12-07, issue 54 item 9 (CPU of each process tree: the fork servers and their workers too; load ~30):
# test_output_paths 40.5 -> 16.1 (launches under CI=1 fork); test_benchmarks_smoke about 516 -> 445
# (faults.py 60.7 -> 31.8, fixed_runs.py 35.4 -> 12.4, cache.py 24.4 -> 12.1, pipeline.py 18.8 -> 11.5).
# test_readme 215.9 -> 88.6 (its gnnscale commands in this process, as test_docs').
# 2026-12-07, issue 54 item 9 (CPU of each file's process tree alone, load 16-30): test_benchmarks_smoke
# 604.7 -> 433.0 (smoke runs forked from one server, tests/script_forks.py), test_docs 117.0 -> 84.7
# (its 1-worker launch forked from a server of its own).
# 2026-12-08, issue 54 item 9 (process trees, each file alone; lone workers sleep in the suite, the fork servers
# import PyG, one-process runs in-process): test_benchmarks_smoke 464.0 (load 8) -> 371.7 (load 3), test_docs
# 113.1 (load 6-11) -> 62.4 (load 2-4), test_examples 142.8 (load 9) -> 91.3 (load 3), test_edge_feature_training
# 44.8 -> 26.4, test_zoo 60.4 -> 48.5, test_pyg_dist_api 54.9 -> 42.2 (scaled below).
FILE_SECONDS: dict[str, float] = {
    "test_benchmarks_smoke.py": 205, "test_readme.py": 151, "test_docs.py": 144, "test_output_paths.py": 60,
    "test_partition_cache_identity.py": 50, "test_early_stop.py": 45, "test_typed_layers.py": 104,
    "test_pyg_loaders.py": 94, "test_examples.py": 140, "test_datasets.py": 139,
    "test_typed_partitions.py": 170, "test_layer_pipeline.py": 129, "test_chunk_pipeline.py": 131,
    "test_checkpoint.py": 115, "test_sampler_local.py": 117, "test_hangs.py": 114, "test_multilevel.py": 112,
    "test_user_model.py": 108, "test_link_training.py": 100, "test_sampler_edge_attr.py": 85,
    "test_cli_checks.py": 85, "test_sampler_weighted.py": 82, "test_ddp_unused.py": 79, "test_zoo.py": 55,
    "test_pyg_global_steps.py": 64, "test_multihost.py": 61, "test_cache_pipeline.py": 59,
    "test_run_config.py": 58, "test_bench_partition.py": 56, "test_pyg_distributed.py": 55,
    "test_pyg_upstream.py": 30, "test_pyg_dist_api.py": 46,
    "test_end_to_end.py": 51, "test_edge_feature_training.py": 30, "test_edge_task.py": 48,
    "test_layers.py": 46, "test_part_memory.py": 44, "test_distributed.py": 43, "test_options.py": 41,
    "test_run_output.py": 40, "test_eager.py": 37, "test_memory.py": 36, "test_typed_datasets.py": 36,
    "test_cli.py": 35, "test_out_of_core.py": 32, "test_dist_partition.py": 30, "test_typed_inference.py": 29,
    "test_typed_training.py": 28, "test_node_targets.py": 27, "test_exchange.py": 23,
    "test_partition_checks.py": 23, "test_multihost_partition.py": 23, "test_weight_decay_groups.py": 21
}


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order below
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.path.name, i)
    items.sort(key=lambda it: (-FILE_SECONDS.get(it.path.name, 5.0), first_seen[it.path.name]))


# A test that leaves a variable set in this process changes the environment of every later launch in
# it: the launches then differ from the fork server's and spawn (CI, 2026-12-07: test_benchmarks_smoke's
# peer check cached GNNSCALE_PEER_OK_* here, and test_distributed's fork check, run after it on the same
# xdist worker, failed). Each test gets back the environment it started with; what it left is counted
# (the summary names it), so a leak is seen, and never changes a later test.
LEAKED: dict[str, list[str]] = {}


@pytest.fixture(autouse=True)
def _environment_restored(request):
    before = dict(os.environ)
    yield
    after = dict(os.environ)
    changed = sorted(k for k in set(before) | set(after)
                     if before.get(k) != after.get(k) and k != "PYTEST_CURRENT_TEST")  # pytest's own
    if changed:
        # inductor and ogb set theirs when first used (launch.READ_LATE): put back, not reported
        leaks = [k for k in changed if k not in READ_LATE]
        if leaks:
            LEAKED.setdefault(request.node.nodeid, []).extend(leaks)
        for k in changed:
            if k in before:
                os.environ[k] = before[k]
            else:
                del os.environ[k]


def _counts() -> dict:
    from gnnscale.process.launch import fork_counts

    return {**fork_counts(), "leaked": dict(LEAKED)}


def pytest_sessionfinish(session):
    if hasattr(session.config, "workeroutput"):  # an xdist worker: its figures go to the controller
        session.config.workeroutput["gnnscale_counts"] = json.dumps(_counts())


WORKER_COUNTS: list[dict] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):  # the xdist controller: each worker's figures
    if "gnnscale_counts" in getattr(node, "workeroutput", {}):
        WORKER_COUNTS.append(json.loads(node.workeroutput["gnnscale_counts"]))


def pytest_terminal_summary(terminalreporter):
    forked, spawned, leaked = 0, {}, {}
    for c in WORKER_COUNTS or [_counts()]:
        forked += c["forked"]
        leaked.update(c["leaked"])
        for k, n in c["spawned"].items():
            spawned[k] = spawned.get(k, 0) + n
    terminalreporter.write_line(f"local launches: {forked} forked from the server; launches spawned "
                                f"because these variables differed: {spawned or 'none'}")
    if leaked:
        terminalreporter.write_line(f"tests that left variables set (put back after each): {leaked}")


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


@pytest.fixture(scope="module")
def acm_data(acm):
    """ACM as PyG's ``HeteroData`` (``to_hetero_data``; a module's own copy: tests may add attributes)."""
    from gnnscale.datasets.hetero_data import to_hetero_data

    return to_hetero_data(acm)


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
