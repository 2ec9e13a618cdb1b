"""Every shipped benchmark still runs (issue 44 item 13): each script in benchmarks/ with ``--smoke``
(a tiny graph, 1-2 epochs, 1 repeat) in its own subprocess with a deadline, writing its JSON.

A script that rots (an option the plan now refuses, a division by a figure that became zero)
fails here instead of at its next real run. Scripts that need DGL's environment or a GPU are
skipped with the reason when those are absent; scripts that compare against DGL run gnnscale's
side alone in ``--smoke`` when DGL is absent. A new script must be added to ``SMOKE`` (or to
``LIBRARIES`` if it is only imported): ``test_every_benchmark_has_a_smoke_run`` checks it.
Each smoke run prints its CPU seconds (``pytest -rP``); keep a new one to a few CLI runs: every
``gnnscale`` process pays its imports (torch about 2 CPU seconds, torch_geometric about 6 more).
"""
from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
DGL_PY = Path("/tmp/peers/dgl/bin/python")

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
    "epoch.py": (["--workdir", "{tmp}"], 400, True),
    "exchange.py": (["--workdir", "{tmp}"], 400, True),
    "faults.py": (["--workdir", "{tmp}"], 600, True),
    "fixed_runs.py": (["--workdir", "{tmp}"], 300, True),
    "gcnii_cora.py": ([], 300, True),
    "hetero.py": (["--work", "{tmp}"], 500, True),
    "layer_pipeline.py": (["--workdir", "{tmp}"], 300, True),
    "layers.py": ([], 200, True),
    "link.py": (["--work", "{tmp}"], 600, True),
    "partition_scale.py": (["--workdir", "{tmp}"], 300, True),
    "pipeline.py": (["--workdir", "{tmp}"], 300, True),
    "pyg_loader.py": ([], 300, True),
    "roofline.py": ([], 300, True),
    "sampler.py": ([], 200, True),
    "scale.py": (["--workdir", "{tmp}"], 400, True),
    "tasks.py": (["--work", "{tmp}"], 600, True),
    "threads_typed.py": (["--work", "{tmp}"], 400, True),
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


@pytest.mark.slow
@pytest.mark.parametrize("script", sorted(SMOKE))
def test_benchmark_smoke(script, shared_data, tmp_path):
    if not (BENCH / script).exists():
        pytest.skip(f"{script} is not in this checkout")
    extra, deadline, writes_json = SMOKE[script]
    out = tmp_path / "out.json"
    work = tmp_path / "work"
    work.mkdir()
    cmd = [sys.executable, str(BENCH / script), "--smoke", *[a.format(tmp=work) for a in extra]]
    if writes_json:
        cmd += ["--json", str(out)]
    env = dict(os.environ, GNNSCALE_SHARED_DATA=str(shared_data), TMPDIR=str(tmp_path))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=deadline, cwd=tmp_path, env=env)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{script} --smoke still ran after its {deadline} s deadline:\n{(exc.stderr or '')[-3000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # What the smoke run costs the suite (printed, not asserted: pytest -rP shows it)
    print(f"{script} --smoke: {after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime:.1f} CPU seconds "
          "(the script and the processes it waited for)")
    assert r.returncode == 0, f"{script} --smoke failed (exit {r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}"
    assert "Traceback" not in r.stderr, r.stderr[-4000:]
    if writes_json:
        assert json.loads(out.read_text()), f"{script} wrote an empty JSON"


@pytest.mark.parametrize("script", sorted(NEEDS_DGL))
def test_dgl_scripts_run_with_dgl(script, tmp_path):
    if not DGL_PY.exists():
        pytest.skip(f"{script} needs DGL's environment {DGL_PY} (bash ../shared/peers/setup_peers.sh dgl); "
                    f"its caller runs gnnscale's side alone: {NEEDS_DGL[script]} --smoke")
    r = subprocess.run([str(DGL_PY), str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]


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
