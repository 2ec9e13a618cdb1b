"""The fault matrix (issue 15): every way a run can be interrupted, and what it costs to go on.
Prints one line per case and writes JSON.

Cases (2 workers on Cora's 2 METIS parts, 6 epochs, batch 16, a checkpoint after every epoch):

- ``exact_resume``: SIGKILL worker 1 in epoch 3; rerun with --resume; final weights' sha256
  against the uninterrupted run's;
- ``historical_resume``: the same in historical exchange mode; test accuracy against the
  uninterrupted run's (the halo tables are refilled at resume, not saved);
- ``damaged_checkpoint``: the newest checkpoint's file torn; --resume reports it and uses the
  one before; final weights against the uninterrupted run's;
- ``elastic``: the same kill under ``torchrun --max-restarts 1``: the group restarts and
  resumes by itself;
- ``saved_model``: ``--save-model``, then ``gnnscale evaluate`` (test accuracy against the
  run's) and ``gnnscale predict`` against ``load_model`` on one process;
- ``soak``: 100 epochs, resident memory and open descriptors from epoch 10 to 100, checkpoints kept;
- ``multihost``: two hosts as network namespaces (tests/test_multihost.py): equal weights to a
  local run, and the seconds host 0 takes to end after host 1 is lost;
- ``fuzz``: the generated malformed datasets and partition folders (tests/test_fuzz.py).

    python benchmarks/faults.py --json results/faults.json
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import SHARED, smoke_in_process, write_json  # noqa: E402

BASE = ["--workers", "2", "--epochs", "6", "--fanouts", "5,5", "--batch-size", "16", "--hidden", "32",
        "--timeout", "30", "--eval-every", "3", "--no-verify"]
KILL = "rank=1,epoch=3,step=1,phase=sampling,action=kill"
CASES = ("exact_resume", "historical_resume", "damaged_checkpoint", "elastic", "saved_model", "soak", "multihost", "fuzz")


# --smoke: the commands whose figures need no process of their own (no fault injected, no worker's log
# line read) run in this process (_common.smoke_in_process: torch imported once, their 2-worker
# launches forked from one server); the killed runs and the resumes whose log lines are read stay
# subprocesses, as a user's.
IN_PROCESS = {"on": False}


def run(*args: str, fault: str | None = None, cmd: list[str] | None = None, timeout: float = 600,
        reads_log: bool = False) -> tuple:
    if IN_PROCESS["on"] and cmd is None and fault is None and not reads_log:
        import contextlib
        import io

        from gnnscale.cli.main import main as cli_main

        out = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(out):
            rc = cli_main(list(args))
        return subprocess.CompletedProcess(list(args), rc, out.getvalue(), ""), time.perf_counter() - t0
    env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"CI": "1"}
    if fault:
        env["GNNSCALE_FAULT"] = fault
    t0 = time.perf_counter()
    r = subprocess.run((cmd or [sys.executable, "-m", "gnnscale"]) + list(args), capture_output=True, text=True,
                       timeout=timeout, env=env)
    return r, time.perf_counter() - t0


def need(r, what: str) -> None:
    if r.returncode != 0:
        raise SystemExit(f"{what} failed (exit {r.returncode}):\n{r.stderr[-3000:]}")


def metrics(path: Path) -> dict:
    return json.loads(path.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "gnnscale_faults"))
    ap.add_argument("--cases", default=",".join(CASES), help="which cases to run")
    ap.add_argument("--smoke", action="store_true", help="exact_resume, damaged_checkpoint and saved_model only")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.cases = "exact_resume,damaged_checkpoint,saved_model"
        smoke_in_process()
        IN_PROCESS["on"] = True
    cases = set(args.cases.split(","))
    if cases - set(CASES):
        ap.error(f"--cases: expected among {', '.join(CASES)}, found {', '.join(sorted(cases - set(CASES)))}")
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    root = str(SHARED / "planetoid" / "raw")
    parts = str(work / "cora2")
    need(run("partition", "--dataset", "planetoid:cora", "--root", root, "--parts", "2", "--out", parts)[0], "partition")
    out: dict = {}

    def ref(mode: str) -> dict:
        """The uninterrupted run of ``mode`` (exact's model saved to ref_exact.pt, for saved_model)."""
        m = work / f"ref_{mode}.json"
        if not m.exists():
            save = ["--save-model", str(work / "ref_exact.pt")] if mode == "exact" else []
            need(run("train", "--parts-dir", parts, *BASE, "--exchange", mode, "--metrics", str(m), *save)[0],
                 f"{mode} run")
        return metrics(m)

    for mode in [m for m in ("exact", "historical") if f"{m}_resume" in cases]:
        ck, m = work / f"ck_{mode}", work / f"resumed_{mode}.json"
        killed, t_killed = run("train", "--parts-dir", parts, *BASE, "--exchange", mode, "--checkpoint-dir", str(ck),
                               fault=KILL)
        resumed, t_resumed = run("train", "--parts-dir", parts, *BASE, "--exchange", mode, "--checkpoint-dir", str(ck),
                                 "--resume", "--metrics", str(m), reads_log=True)
        need(resumed, f"{mode} resume")
        got, want = metrics(m), ref(mode)
        out[f"{mode}_resume"] = dict(
            killed_exit=killed.returncode, killed_error=killed.stderr.strip().splitlines()[-1][:300],
            killed_seconds=t_killed, resumed_seconds=t_resumed,
            resumed_from=re.search(r"resuming from (\S+)", resumed.stderr).group(1),
            sha256_equal=got["final_weights_sha256"] == want["final_weights_sha256"],
            test_acc=got["test_acc"], uninterrupted_test_acc=want["test_acc"],
            test_acc_difference_points=100 * (got["test_acc"] - want["test_acc"]))
        print(f"{mode}_resume: {out[f'{mode}_resume']}", flush=True)

    ck, m = work / "ck_damaged", work / "damaged.json"
    if "damaged_checkpoint" in cases:
        damaged(parts, ck, m, ref, out)
    if "elastic" in cases:
        elastic(parts, work, ref, out)
    if "saved_model" in cases:
        saved_model(parts, work, root, ref, out)
    if "soak" in cases:
        soak(parts, work, out)
    # Two hosts (network namespaces) and the fuzzed inputs run as their tests do (pytest -s prints
    # the figures they measure); the hosts' case needs root and `ip netns`, else it says skipped.
    for case, test in [(c, t) for c, t in (("multihost", "tests/test_multihost.py"), ("fuzz", "tests/test_fuzz.py"))
                       if c in cases]:
        r, t = run("-m", "pytest", "-q", "-s", "-p", "no:cacheprovider", "--hypothesis-show-statistics", test,
                   cmd=[sys.executable], timeout=900)
        text = r.stdout + r.stderr
        found = re.search(r"host 0 ended ([\d.]+) s after host 1 was lost", text)
        out[case] = dict(passed=r.returncode == 0, seconds=t, summary=text.strip().splitlines()[-1][:300],
                         generated_cases=sum(int(n) for n in re.findall(r"- (\d+) passing", text)),
                         host0_end_seconds_after_host1_lost=float(found.group(1)) if found else None)
        print(f"{case}: {out[case]}", flush=True)
    write_json(args.json, out)


def damaged(parts: str, ck: Path, m: Path, ref, out: dict) -> None:
    """The newest checkpoint torn: --resume reports it and uses the one before."""
    need(run("train", "--parts-dir", parts, *BASE, "--epochs", "4", "--checkpoint-dir", str(ck))[0], "damaged: first run")
    newest = sorted(ck.iterdir())[-1]
    (newest / "rank1.pt").write_bytes(b"torn")
    r, _ = run("train", "--parts-dir", parts, *BASE, "--checkpoint-dir", str(ck), "--resume", "--metrics", str(m),
               reads_log=True)
    need(r, "damaged: resume")
    out["damaged_checkpoint"] = dict(
        report=next(line for line in r.stderr.splitlines() if "is not usable" in line).split("] ", 1)[-1],
        resumed_from=re.search(r"resuming from (\S+)", r.stderr).group(1),
        sha256_equal=metrics(m)["final_weights_sha256"] == ref("exact")["final_weights_sha256"])
    print(f"damaged_checkpoint: {out['damaged_checkpoint']}", flush=True)


def elastic(parts: str, work: Path, ref, out: dict) -> None:
    """The kill under ``torchrun --max-restarts 1``."""
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun:
        m, once = work / "elastic.json", work / "elastic-fault-done"
        r, t = run("--standalone", "--nproc-per-node", "2", "--max-restarts", "1", "-m", "gnnscale", "train",
                   "--parts-dir", parts, *[a for a in BASE if a not in ("--workers", "2")], "--checkpoint-dir",
                   str(work / "ck_elastic"), "--metrics", str(m), fault=f"{KILL},once={once}", cmd=[torchrun])
        need(r, "elastic run")
        out["elastic"] = dict(seconds=t, killed_once=once.exists(), restarts=r.stderr.count("resuming from"),
                              sha256_equal=metrics(m)["final_weights_sha256"] == ref("exact")["final_weights_sha256"])
    else:
        out["elastic"] = dict(skipped="torchrun not found")
    print(f"elastic: {out['elastic']}", flush=True)


def saved_model(parts: str, work: Path, root: str, ref, out: dict) -> None:
    """--save-model (the uninterrupted exact run's), then ``gnnscale evaluate`` and ``gnnscale
    predict`` against ``load_model``."""
    ref("exact")
    model, m, npy = work / "ref_exact.pt", work / "ref_exact.json", work / "pred.npy"
    ev, _ = run("evaluate", "--model", str(model), "--parts-dir", parts, "--json")
    need(ev, "evaluate")
    need(run("predict", "--model", str(model), "--dataset", "planetoid:cora", "--root", root, "--out", str(npy))[0],
         "predict")
    import numpy as np

    from gnnscale import load_model
    from gnnscale.datasets import load_dataset
    from gnnscale.training.model_io import predict_full_graph

    data = load_dataset("planetoid:cora", root=root)
    mine = predict_full_graph(load_model(model), data.x, data.edge_index).argmax(1).numpy()
    got = json.loads(ev.stdout.strip().splitlines()[-1])
    out["saved_model"] = dict(run_test_acc=metrics(m)["test_acc"], evaluate_test_acc=got["test_acc"],
                              evaluate_equal=got["test_acc"] == metrics(m)["test_acc"],
                              predict_equals_load_model=bool(np.array_equal(np.load(npy), mine)),
                              model_file_bytes=model.stat().st_size)
    print(f"saved_model: {out['saved_model']}", flush=True)


def soak(parts: str, work: Path, out: dict) -> None:
    """100 epochs with checkpoints: memory and open files stay flat."""
    m, ck = work / "soak.json", work / "ck_soak"
    r, t = run("train", "--parts-dir", parts, "--workers", "2", "--epochs", "100",
               "--fanouts", "5,5", "--batch-size", "64", "--hidden", "16", "--eval-every", "10", "--checkpoint-dir",
               str(ck), "--keep-checkpoints", "3", "--metrics", str(m), "--timeout", "60", "--no-verify")
    need(r, "soak")
    ep = metrics(m)["epochs"]
    out["soak"] = dict(seconds=t, epochs=len(ep),
                       rss_mb_epoch10=[ep[9]["rss_mb_by_rank"][k] for k in (0, 1)],
                       rss_mb_epoch100=[ep[99]["rss_mb_by_rank"][k] for k in (0, 1)],
                       rss_growth=[ep[99]["rss_mb_by_rank"][k] / ep[9]["rss_mb_by_rank"][k] - 1 for k in (0, 1)],
                       open_fds_epoch10=ep[9]["open_fds_by_rank"], open_fds_max_after=[
                           max(e["open_fds_by_rank"][k] for e in ep[9:]) for k in (0, 1)],
                       checkpoints_kept=sorted(p.name for p in ck.iterdir()))
    print(f"soak: {out['soak']}", flush=True)

if __name__ == "__main__":
    main()
