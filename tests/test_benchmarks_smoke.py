"""Every shipped benchmark still runs (issue 44 item 13): each script in benchmarks/ with ``--smoke``
(a tiny graph, 1-2 epochs, 1 repeat) in its own process with a deadline, writing its JSON: a fork of
one server that imported torch, torch_geometric and gnnscale once (tests/script_forks.py), running the
script as ``python SCRIPT --smoke`` would; those in ``OWN_INTERPRETER`` in a subprocess.

A script that rots (an option the plan now refuses, a division by a figure that became zero)
fails here instead of at its next real run. Scripts that need DGL's environment or a GPU are
skipped with the reason when those are absent; scripts that compare against DGL run gnnscale's
side alone in ``--smoke`` when DGL is absent. A new script must be added to ``SMOKE`` (or to
``LIBRARIES`` if it is only imported): ``test_every_benchmark_has_a_smoke_run`` checks it.
Each smoke run prints its CPU seconds (``pytest -rP``); keep a new one to a few CLI runs: every
``gnnscale`` process pays its imports (torch about 2 CPU seconds, torch_geometric about 6 more):
in ``--smoke``, ``_common.smoke_in_process()`` runs ``_common.gnnscale``/``run_gnnscale`` commands in the
script's process and forks 2-worker launches from one server (``_common.fork_smoke_workers``).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
sys.path.insert(0, str(BENCH))
import _common  # noqa: E402  (benchmarks/_common.py: dgl_python, the peers' environment if it imports)

# Imported by the scripts, not run on their own.
LIBRARIES = {"_common.py", "machine_rates.py", "link_quality.py"}  # link_quality: run by link.py --what cora,memory
# Run by another script with DGL's Python (covered by that script's smoke run when DGL is there).
NEEDS_DGL = {"dgl_hetero_sampling.py": "hetero.py --what sampling", "dgl_link.py": "link.py --what throughput"}

# script -> (extra arguments besides --smoke and --json, deadline in seconds, writes JSON)
SMOKE: dict[str, tuple[list[str], int, bool]] = {
    "accuracy.py": ([], 300, True),
    "cache.py": ([], 300, True),
    "chunk_pipeline.py": (["--workdir", "{tmp}"], 500, True),
    "compute_split.py": ([], 300, True),
    "datasets.py": ([], 200, True),
    "dgl_partition.py": (["--workdir", "{tmp}"], 300, True),
    "epoch.py": (["--workdir", "{tmp}"], 400, True),
    "exchange.py": (["--workdir", "{tmp}"], 400, True),
    "faults.py": (["--workdir", "{tmp}"], 600, True),
    "feature_dtype.py": (["--work", "{tmp}"], 400, True),
    "fixed_runs.py": (["--workdir", "{tmp}"], 300, True),
    "gcnii_cora.py": ([], 300, True),
    "hetero.py": (["--work", "{tmp}"], 500, True),
    "keyed_cost.py": (["--workdir", "{tmp}"], 400, True),
    "layer_pipeline.py": (["--workdir", "{tmp}"], 300, True),
    "labor.py": ([], 400, True),
    "layers.py": ([], 200, True),
    "link.py": (["--work", "{tmp}"], 600, True),
    "out_of_core.py": (["--workdir", "{tmp}"], 300, True),
    "partition_scale.py": (["--workdir", "{tmp}"], 300, True),
    "pipeline.py": (["--workdir", "{tmp}"], 300, True),
    "pyg_accuracy.py": ([], 300, True),
    "pyg_examples_speed.py": ([], 400, True),
    "pyg_loader.py": ([], 300, True),
    "pyg_own_part.py": (["--workdir", "{tmp}"], 400, True),
    "pyg_run_overhead.py": ([], 300, True),
    "pyg_sgformer.py": ([], 400, True),
    "pyg_step_draws.py": ([], 200, True),
    "roofline.py": ([], 300, True),
    "sampler.py": ([], 200, True),
    "scale.py": (["--workdir", "{tmp}"], 400, True),
    "scaling_model.py": (["--work", "{tmp}"], 500, True),
    "tasks.py": (["--work", "{tmp}"], 600, True),
    "temporal.py": ([], 200, True),
    "user_model.py": ([], 300, True),
    "threads_typed.py": (["--work", "{tmp}"], 400, True),
    "typed_exchange.py": (["--workdir", "{tmp}"], 400, True),
    "worker_count.py": ([], 400, True),
    "zoo.py": ([], 400, True),
}


def _scripts() -> list[str]:
    return sorted(p.name for p in BENCH.iterdir() if p.suffix in (".py", ".sh"))


def test_every_benchmark_has_a_smoke_run():
    missing = [s for s in _scripts() if s not in SMOKE and s not in LIBRARIES and s not in NEEDS_DGL
               and s != "gpu_check.sh"]
    assert not missing, f"benchmarks without a --smoke run in {__file__}: {missing}"
    for name in SMOKE:
        if (BENCH / name).exists():
            assert "--smoke" in (BENCH / name).read_text(), f"{name} has no --smoke setting"


# Smoke runs wait much of their time (process start, gloo rendezvous, files): two at a time keep
# two cores busy and halve the file's wall time (20 min -> about 11 on 2 cores). $GNNSCALE_SMOKE_JOBS sets it.
JOBS = max(1, int(os.environ.get("GNNSCALE_SMOKE_JOBS", "2")))


# A smoke run is a fork of one server that imported torch, torch_geometric and gnnscale once
# (tests/script_forks.py): a fresh interpreter pays those imports, about 2-8 CPU seconds, before the
# script's first line. The script runs as ``python SCRIPT`` would (its __main__, argv, environment,
# folder and files; its exit status or traceback). These run in an interpreter of their own:
OWN_INTERPRETER = {
    "epoch.py": "sets the workers' heap (THP_MEM_ALLOC_ENABLE) before it imports torch, and checks that it did",
    "tasks.py": "sets THP_MEM_ALLOC_ENABLE before it imports torch (torch reads it once)",
}
PRELOAD = ("torch", "numpy", "scipy.sparse", "torch_geometric", "gnnscale", "gnnscale.cli.main",
           "gnnscale.process.fork_preload", "gnnscale.training.trainer")
SERVER = Path(__file__).resolve().parent / "script_forks.py"


class SmokeRuns:
    """Starts the selected smoke runs in the tests' order, at most ``JOBS`` at once, and hands each
    test its own run's result when it ends (each run has its own deadline from its own start)."""

    def __init__(self, scripts: list[str], shared_data: Path, root: Path):
        self.order = [s for s in scripts if (BENCH / s).exists()]
        self.shared_data, self.root = shared_data, root
        self.procs: dict[str, tuple[subprocess.Popen | int, float, Path]] = {}
        self.done: dict[str, dict] = {}
        self.server: subprocess.Popen | None = None
        self.answers: dict[str, dict] = {}  # script -> the server's last answer about it
        self.buf = b""

    def _env(self, tmp: Path) -> dict[str, str]:
        env = dict(os.environ, GNNSCALE_SHARED_DATA=str(self.shared_data), TMPDIR=str(tmp))
        # A smoke run's tiny steps beside the suite's other processes: idle OpenMP threads sleep
        # instead of spinning on the cores the others need (as the tests' own process: conftest).
        # Its figures are not asserted, only that it runs and writes them.
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        return env

    def _server(self) -> subprocess.Popen:
        if self.server is None:
            tmp = self.root / "_server"
            tmp.mkdir()
            self.server = subprocess.Popen([sys.executable, str(SERVER), *PRELOAD], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, cwd=tmp, env=self._env(tmp))
            os.set_blocking(self.server.stdout.fileno(), False)
        return self.server

    def _read_answers(self, timeout: float = 0.0) -> None:
        import select

        fd = self.server.stdout.fileno()
        if select.select([fd], [], [], timeout)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(f"the smoke runs' fork server ended (exit {self.server.wait(30)})")
            self.buf += chunk
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                a = json.loads(line)
                self.answers[a["id"]] = a

    def _start(self, script: str) -> None:
        extra, _, writes_json = SMOKE[script]
        tmp = self.root / script.removesuffix(".py")
        work = tmp / "work"
        work.mkdir(parents=True)
        argv = ["--smoke", *[a.format(tmp=work) for a in extra]]
        if writes_json:
            argv += ["--json", str(tmp / "out.json")]
        env = self._env(tmp)
        if script in OWN_INTERPRETER:
            with open(tmp / "stdout", "w") as out, open(tmp / "stderr", "w") as err:
                proc = subprocess.Popen([sys.executable, str(BENCH / script), *argv], stdout=out, stderr=err, cwd=tmp,
                                        env=env, start_new_session=True)
            self.procs[script] = (proc, time.monotonic(), tmp)
            return
        server = self._server()
        req = {"id": script, "script": str(BENCH / script), "argv": argv, "cwd": str(tmp), "env": env,
               "stdout": str(tmp / "stdout"), "stderr": str(tmp / "stderr")}
        server.stdin.write((json.dumps(req) + "\n").encode())
        server.stdin.flush()
        started = time.monotonic()
        while "pid" not in self.answers.get(script, {}):
            self._read_answers(1.0)
            if time.monotonic() - started > 60:
                raise RuntimeError(f"the smoke runs' fork server did not start {script} within 60 s")
        self.procs[script] = (self.answers[script]["pid"], started, tmp)

    def _fill(self, upto: str) -> None:
        """Start every run up to ``upto`` and then more, until ``JOBS`` run."""
        for script in self.order:
            running = sum(1 for s in self.procs if s not in self.done)
            if script in self.procs:
                continue
            if self.order.index(script) > self.order.index(upto) and running >= JOBS:
                break
            self._start(script)

    def _ended(self, script: str) -> tuple[int, float] | None:
        """``(returncode, CPU seconds)`` when the run has ended, else None."""
        proc = self.procs[script][0]
        if isinstance(proc, int):  # a fork of the server: its answer
            self._read_answers()
            a = self.answers[script]
            return (a["rc"], a["cpu"]) if "rc" in a else None
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid == 0:
            return None
        proc.returncode = os.waitstatus_to_exitcode(status)
        return proc.returncode, usage.ru_utime + usage.ru_stime

    def _kill(self, script: str) -> None:
        proc = self.procs[script][0]
        pid = proc if isinstance(proc, int) else proc.pid
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        end = time.monotonic() + 30
        while self._ended(script) is None and time.monotonic() < end:
            time.sleep(0.1)

    def _reap(self, script: str) -> bool:
        ended = self._ended(script)
        if ended is None:
            _, started, tmp = self.procs[script]
            if time.monotonic() - started > SMOKE[script][1]:
                self._kill(script)
                self.done[script] = {"timeout": True, "tmp": tmp, "cpu": None, "rc": None}
                return True
            return False
        self.done[script] = {"timeout": False, "tmp": self.procs[script][2], "rc": ended[0], "cpu": ended[1]}
        return True

    def result(self, script: str) -> dict:
        self._fill(script)
        while script not in self.done:
            for s in [s for s in self.procs if s not in self.done]:
                if self._reap(s) and s != script:
                    self._fill(script)
            time.sleep(0.2)
        return self.done[script]

    def close(self) -> None:
        for script in self.procs:
            if script not in self.done:
                self._kill(script)
        if self.server is not None:
            self.server.stdin.close()  # the server ends, and kills what still runs
            self.server.wait(timeout=60)


@pytest.fixture(scope="module")
def smoke_runs(request, shared_data, tmp_path_factory):
    selected = [item.callspec.params["script"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_benchmark_smoke"]
    runs = SmokeRuns(selected, shared_data, tmp_path_factory.mktemp("smoke"))
    yield runs
    runs.close()


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMOKE))
def test_benchmark_smoke(script, smoke_runs):
    if not (BENCH / script).exists():
        pytest.skip(f"{script} is not in this checkout")
    deadline, writes_json = SMOKE[script][1], SMOKE[script][2]
    res = smoke_runs.result(script)
    tmp = res["tmp"]
    stdout, stderr = (tmp / "stdout").read_text(), (tmp / "stderr").read_text()
    if res["timeout"]:
        pytest.fail(f"{script} --smoke still ran after its {deadline} s deadline:\n{stderr[-3000:]}")
    # What the smoke run costs the suite (printed, not asserted: pytest -rP shows it)
    print(f"{script} --smoke: {res['cpu']:.1f} CPU seconds (the script and the processes it waited for; not the "
          "workers forked from a server by _common.fork_smoke_workers, nor the imports it found done in "
          "tests/script_forks.py's server)")
    assert res["rc"] == 0, f"{script} --smoke failed (exit {res['rc']}):\n{stdout[-2000:]}\n{stderr[-4000:]}"
    assert "Traceback" not in stderr, stderr[-4000:]
    if writes_json:
        out = tmp / "out.json"
        assert out.exists() and json.loads(out.read_text()), f"{script} wrote no JSON or an empty one"


@pytest.fixture
def peer_answers_dropped():
    """The peer checks' answers that a test's ``_common.dgl_python()`` keeps in this process's environment
    (``GNNSCALE_PEER_OK_*``) taken out after it, as every variable a test sets (conftest)."""
    before = {k for k in os.environ if k.startswith("GNNSCALE_PEER_OK_")}
    yield
    for k in [k for k in os.environ if k.startswith("GNNSCALE_PEER_OK_") and k not in before]:
        del os.environ[k]


@pytest.mark.parametrize("script", sorted(NEEDS_DGL))
def test_dgl_scripts_run_with_dgl(script, tmp_path, peer_answers_dropped):
    python, why = _common.dgl_python()
    if python is None:
        pytest.skip(f"{script} needs DGL's environment: {why}; its caller runs gnnscale's side alone: "
                    f"{NEEDS_DGL[script]} --smoke")
    r = subprocess.run([python, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]


def test_a_peer_environment_that_cannot_import_its_packages_counts_as_absent(tmp_path, monkeypatch,
                                                                          peer_answers_dropped):
    """Issue 54 item 8: a DGL interpreter that exists but cannot import torch (a broken venv) was run
    by epoch.py --smoke and failed it. A peer environment counts only if ``python -c 'import torch,
    dgl'`` succeeds (asked once: the answer is kept in the environment the scripts inherit); the
    scripts then run gnnscale's side alone, or refuse, with the reason in one line."""
    calls = tmp_path / "calls"
    fake = tmp_path / "bin" / "python"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\necho x >> {calls}\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\n"
                    "exit 1\n")
    fake.chmod(0o755)
    for key in [k for k in os.environ if k.startswith("GNNSCALE_PEER_OK_")]:
        monkeypatch.delenv(key)
    monkeypatch.setattr(_common, "DGL_PYTHON", str(fake))
    why = (f"no usable DGL environment: {fake} cannot import torch, dgl (exit 1: ModuleNotFoundError: No module "
           "named 'torch') (bash ../shared/peers/setup_peers.sh dgl)")
    assert _common.dgl_python() == (None, why)
    assert _common.dgl_python() == (None, why)
    assert calls.read_text() == "x\n"  # asked once
    assert _common.peer_python(str(tmp_path / "none"), ("torch",)) == (None, f"{tmp_path / 'none'} not found")
    assert _common.peer_python(sys.executable, ("json",)) == (sys.executable, "")
    # the scripts, given the broken interpreter: gnnscale's sides alone, or a one-line refusal
    env = {k: v for k, v in os.environ.items() if not k.startswith("GNNSCALE_PEER_OK_")}
    env["GNNSCALE_DGL_PYTHON"] = str(fake)
    r = subprocess.run([sys.executable, str(BENCH / "dgl_partition.py"), "--sizes", "2000:10000", "--sides", "dgl",
                        "--workdir", str(tmp_path / "work"), "--json", str(tmp_path / "out.json")],
                       capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"{why}: gnnscale's sides only" in r.stdout
    assert json.loads((tmp_path / "out.json").read_text())["rows"] == [{"num_nodes": 2000, "num_edges": 10000}]
    r = subprocess.run([sys.executable, str(BENCH / "epoch.py"), "--sizes", "5000", "--what", "1proc",
                        "--workdir", str(tmp_path / "work")], capture_output=True, text=True, timeout=120, env=env)
    assert (r.returncode, r.stderr) == (1, why + "\n")
    assert calls.read_text() == "x\nx\nx\n"  # once per script


@pytest.mark.slow
def test_gpu_check_smoke(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("benchmarks/gpu_check.sh needs a CUDA GPU")
    if shutil.which("bash") is None:
        pytest.skip("bash not found")
    r = subprocess.run(["bash", str(BENCH / "gpu_check.sh"), "--smoke", str(tmp_path)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads((tmp_path / "gpu_check.json").read_text())
