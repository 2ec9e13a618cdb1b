"""The OGB example scripts run unchanged, offline, on tiny OGB-layout copies of their datasets.

Each script is started as a user would start it on one machine (``--root``, ``--epochs 5``,
``--workers 2``, ``--cache-dir``; no other flag), on a few hundred nodes written by
``ogb_fixture.write_tiny_ogb`` in OGB's own raw layout (csv for arxiv/products, npz for
papers100M), so the path through ``ogb``, partitioning, the spawned workers and OGB's Evaluator
is the real one. The scripts run in the test's process, as ``python examples/SCRIPT ARGS`` runs
them (``runpy``, as ``__main__``, argv set; :func:`run_example`): their workers are forked from the
suite's server (tests/conftest.py) and import the script as ``__mp_main__`` as spawned ones do,
without an interpreter's imports per process; runs through the command line spawn (test_cli.py,
test_readme.py, the PyG loops below). ``examples/ogbn_mag.py`` (a typed graph, R-GCN) runs the same way on
``ogb_fixture.write_tiny_ogb_mag``'s heterogeneous raw layout, with smaller settings, and
``examples/ogbn_proteins.py`` (multi-label, edge features moved to the nodes, ROC-AUC) on
``ogb_fixture.write_tiny_ogbn_proteins``'s.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ogb_fixture import write_tiny_ogb, write_tiny_ogb_mag, write_tiny_ogbn_proteins

REPO = Path(__file__).resolve().parents[1]


ACC = re.compile(r"^test accuracy \(OGB Evaluator\): (\S+) ", re.MULTILINE)
SECONDS = re.compile(r"^epoch seconds: (\S+)$", re.MULTILINE)


@pytest.mark.slow
@pytest.mark.parametrize(
    "script, name",
    [("ogbn_arxiv.py", "ogbn-arxiv"), ("ogbn_products.py", "ogbn-products"), ("ogbn_papers100M.py", "ogbn-papers100M")],
)
def test_example_runs_on_tiny_ogb(tmp_path: Path, run_example, script: str, name: str) -> None:
    pytest.importorskip("ogb")
    root, cache = tmp_path / "ogb", tmp_path / "cache"
    write_tiny_ogb(root, name, num_nodes=240, num_features=16, num_classes=4, seed=0)
    r = run_example(tmp_path, script, "--root", str(root), "--epochs", "5", "--workers", "2", "--cache-dir", str(cache))
    assert r.returncode == 0, f"{script} exited with {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
    acc = ACC.search(r.stdout)
    assert acc, f"no test accuracy line in the output of {script}:\n{r.stdout}"
    # 4 classes (chance 0.25), labels learnable from features + graph; 5 epochs (one step each:
    # every script's batch holds all the train nodes) so that every script learns. Measured with
    # the fixture's seed 0 and the scripts' --seed 0: arxiv 1.000, products 0.958, papers100M
    # 0.791 (48, 48, 43 test nodes); over --seed 0..2 the lowest were 0.979, 0.938, 0.721. With
    # --epochs 1, products stayed near chance (0.29-0.48 over --seed 0..3).
    assert float(acc.group(1)) > 0.6, f"{script}: {acc.group(0)}"
    secs = SECONDS.search(r.stdout)
    assert secs and float(secs.group(1)) > 0.0, r.stdout
    assert any(cache.iterdir()), "the partition was not written to --cache-dir"


@pytest.mark.slow
def test_ogbn_mag_example_trains_rgcn_on_tiny_ogb_mag(tmp_path: Path, run_example) -> None:
    """examples/ogbn_mag.py on a 3000-node ogbn-mag in OGB's raw layout: typed METIS parts, R-GCN
    data parallel over 2 workers, learned embeddings for the featureless types, OGB's Evaluator."""
    pytest.importorskip("ogb")
    root, cache, metrics = tmp_path / "ogb", tmp_path / "cache", tmp_path / "metrics.json"
    write_tiny_ogb_mag(root, num_nodes=3000, num_features=16, num_classes=5, seed=0)
    r = run_example(tmp_path, "ogbn_mag.py", "--root", str(root), "--workers", "2", "--epochs", "2", "--fanouts",
                    "10,10", "--relation-fanouts", '{"cites": [5, 5]}', "--batch-size", "256", "--hidden", "32",
                    "--cache-dir", str(cache), "--metrics", str(metrics))
    assert r.returncode == 0, (f"ogbn_mag.py exited with {r.returncode}\nstdout:\n{r.stdout}\n"
                               f"stderr:\n{r.stderr[-4000:]}")
    acc = ACC.search(r.stdout)
    assert acc, f"no test accuracy line in the output of ogbn_mag.py:\n{r.stdout}"
    assert 0.0 <= float(acc.group(1)) <= 1.0, acc.group(0)
    secs = SECONDS.search(r.stdout)
    assert secs and float(secs.group(1)) > 0.0, r.stdout

    m = json.loads(metrics.read_text())
    last = m["epochs"][-1]
    assert len(m["epochs"]) == 2 and all(math.isfinite(e["loss"]) for e in m["epochs"]), m["epochs"]
    assert 0.0 <= m["test_acc"] <= 1.0 and abs(m["test_acc"] - float(acc.group(1))) < 1e-4
    # OGB's Evaluator scored it: the ogbn-* path of Evaluator.scores reports no macro-F1
    assert m["dataset"] == "ogbn-mag" and last["evaluation"]["method"] == "sampled"
    assert last["evaluation"]["macro_f1"] == {"val": None, "test": None}, last["evaluation"]
    # the typed plan: R-GCN, data parallel over the 2 workers, per-relation fan-outs honoured
    assert m["plan"]["mode"] == "data_parallel" and m["plan"]["world"] == 2 and m["plan"]["num_layers"] == 2
    assert m["config"]["layer"] == "rgcn" and m["config"]["relation_fanouts"] == {"cites": [5, 5]}
    # authors, institutions and fields of study have no features: learned rows, pulled and trained by owner
    sent = last["bytes_sent_by_category"]
    assert sent["embedding_pull"] > 0 and sent["embedding_grad"] > 0, sent
    # the partition (METIS, cached in --cache-dir) is typed: format 2, papers the only type with features
    (part_meta,) = cache.glob("ogbn-mag-metis-2parts-*/meta.json")
    meta = json.loads(part_meta.read_text())
    assert meta["format_version"] == 2 and meta["typed"]["target_type"] == "paper"
    assert dict(zip(meta["typed"]["node_types"], meta["typed"]["feature_dims"])) == {
        "author": 0, "field_of_study": 0, "institution": 0, "paper": 16}


def test_ogbn_mag_example_help_names_its_anchors(tmp_path: Path, run_example) -> None:
    r = run_example(tmp_path, "ogbn_mag.py", "--help")
    assert r.returncode == 0, r.stderr
    for text in ("0.4727 ± 0.0031", "42.32%", "--relation-fanouts", "--fanouts", "--workers", "--hidden", "fixture"):
        assert text in r.stdout, text


PROTEINS_AUC = re.compile(r"^test ROC-AUC \(OGB Evaluator\): (\S+) \(last epoch\); (\S+) at the best validation "
                          r"epoch (\d+) \(validation (\S+)\)$", re.MULTILINE)


@pytest.mark.slow
def test_ogbn_proteins_example_trains_sage_on_mean_edge_features(tmp_path: Path, run_example) -> None:
    """examples/ogbn_proteins.py on a 400-node ogbn-proteins in OGB's raw layout (112 labels, 8
    features per edge, no node features, split by species): each node's features are the mean of
    its in-edges' (--edge-to-node mean, in the cached partition), full-batch GraphSAGE over 2
    workers, ROC-AUC from OGB's Evaluator, evaluated every 5 epochs."""
    pytest.importorskip("ogb")
    root, cache, metrics = tmp_path / "ogb", tmp_path / "cache", tmp_path / "metrics.json"
    write_tiny_ogbn_proteins(root, seed=0)
    r = run_example(tmp_path, "ogbn_proteins.py", "--root", str(root), "--workers", "2", "--epochs", "10",
                    "--cache-dir", str(cache), "--metrics", str(metrics))
    assert r.returncode == 0, (f"ogbn_proteins.py exited with {r.returncode}\nstdout:\n{r.stdout}\n"
                               f"stderr:\n{r.stderr[-4000:]}")
    line = PROTEINS_AUC.search(r.stdout)
    assert line, f"no test ROC-AUC line in the output of ogbn_proteins.py:\n{r.stdout}"
    last, best, epoch, val = float(line.group(1)), float(line.group(2)), int(line.group(3)), float(line.group(4))
    secs = SECONDS.search(r.stdout)
    assert secs and float(secs.group(1)) > 0.0, r.stdout
    m = json.loads(metrics.read_text())
    assert abs(last - m["test_roc_auc"]) < 1e-4 and abs(best - m["test_roc_auc_at_best_val"]) < 1e-4, (line.group(0), m)
    assert epoch == m["best_epoch"] and abs(val - m["best_val_roc_auc"]) < 1e-4
    # Chance is 0.5; a node's labels follow its community, which its in-edges' mean features tell.
    # Measured with the fixture's seed 0: 0.7982 at the best validation epoch 9 (--seed 0; 0.7842-0.7982
    # over --seed 0..2).
    assert best > 0.7, line.group(0)
    assert m["dataset"] == "ogbn-proteins" and m["metric"] == "roc_auc" and m["config"]["layer"] == "sage"
    assert m["plan"]["mode"] == "data_parallel" and m["plan"]["world"] == 2
    # evaluated every 5 epochs (and after the last), as OGB's script; one full-batch step an epoch
    assert [e["epoch"] for e in m["epochs"] if e.get("val_roc_auc") is not None] == [4, 9]
    assert all(e["steps"] == 1 and math.isfinite(e["loss"]) for e in m["epochs"]), m["epochs"]
    # GraphSAGE reads no edge features: none sampled or sent (they are in the nodes' features)
    assert "edge_attr" not in m["epochs"][-1]["bytes_sent_by_category"]
    (part_meta,) = cache.glob("ogbn-proteins-metis-2parts-*/meta.json")
    meta = json.loads(part_meta.read_text())
    assert meta["edge_to_node"] == "mean" and meta["feature_dim"] == 8 and meta["edge_feature_dim"] == 8
    assert meta["target"]["kind"] == "multilabel" and meta["target"]["num_classes"] == 112


def test_ogbn_proteins_example_help_names_its_anchors(tmp_path: Path, run_example) -> None:
    r = run_example(tmp_path, "ogbn_proteins.py", "--help")
    assert r.returncode == 0, r.stderr
    for text in ("0.7768 ± 0.0020", "0.8334 ± 0.0013", "--edge-to-node mean", "ROC-AUC", "--fanouts", "--workers",
                 "--hidden"):
        assert text in r.stdout, text


LINK_METRIC = re.compile(r"^test (Hits@50|MRR) \(OGB's definition\): (\S+) \(last epoch\); (\S+) at the best "
                         r"validation epoch (-?\d+)$", re.MULTILINE)


def _run_link_example(run_example, tmp_path: Path, script: str, args: list[str]) -> tuple[Any, dict]:
    metrics = tmp_path / "metrics.json"
    r = run_example(tmp_path, script, "--root", str(tmp_path / "ogb"), "--workers", "2", "--cache-dir",
                    str(tmp_path / "cache"), "--metrics", str(metrics), *args)
    assert r.returncode == 0, f"{script} exited with {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr[-4000:]}"
    return r, json.loads(metrics.read_text())


@pytest.mark.slow
def test_ogbl_collab_example_reports_hits_at_50_on_tiny_ogbl_collab(tmp_path: Path, run_example) -> None:
    """examples/ogbl_collab.py on a 300-node ogbl-collab in OGB's raw layout: OGB's split in METIS
    parts, sampled GraphSAGE + MLP decoder data parallel over 2 workers, Hits@50 as OGB defines it."""
    pytest.importorskip("ogb")
    from ogb_link_fixture import write_tiny_ogbl

    _, split = write_tiny_ogbl(tmp_path / "ogb", "ogbl-collab")
    r, m = _run_link_example(run_example, tmp_path, "ogbl_collab.py", [
        "--epochs", "2", "--hidden", "32", "--fanouts", "5,5", "--batch-size", "64", "--lr", "0.02"])
    line = LINK_METRIC.search(r.stdout)
    assert line and line.group(1) == "Hits@50", f"no test Hits@50 line in the output of ogbl_collab.py:\n{r.stdout}"
    hits = float(line.group(2))
    assert 0.0 <= hits <= 1.0 and abs(hits - m["test_acc"]) < 1e-4, (line.group(0), m["test_acc"])
    secs = SECONDS.search(r.stdout)
    assert secs and float(secs.group(1)) > 0.0, r.stdout
    # Random scores put a positive above the 50th-highest of the test's n negatives with
    # probability 50 / (n + 1): 50/177 = 0.28 here. Measured with the fixture's seed 0: 0.602
    # (--seed 0; 0.568-0.625 over --seed 0..3).
    chance = 50 / (len(split["test"]["edge_neg"]) + 1)
    assert hits > 1.5 * chance, f"test Hits@50 {hits:.4f} is near chance ({chance:.3f}): {line.group(0)}"
    assert m["task"] == "link" and m["metric"] == "hits@50" and m["dataset"] == "ogbl-collab"
    assert m["plan"]["mode"] == "data_parallel" and m["plan"]["world"] == 2
    assert m["config"]["decoder"] == "mlp" and m["config"]["neg_sampling"] == "uniform"
    assert len(m["epochs"]) == 2 and all(math.isfinite(e["loss"]) for e in m["epochs"]), m["epochs"]


@pytest.mark.slow
def test_ogbl_citation2_example_reports_mrr_on_tiny_ogbl_citation2(tmp_path: Path, run_example) -> None:
    """examples/ogbl_citation2.py on a 1000-node ogbl-citation2 in OGB's raw layout: per-source
    negatives in training, each test source ranked against its own 1000 fixed negatives (MRR)."""
    pytest.importorskip("ogb")
    from ogb_link_fixture import write_tiny_ogbl

    _, split = write_tiny_ogbl(tmp_path / "ogb", "ogbl-citation2", num_nodes=1000)
    r, m = _run_link_example(run_example, tmp_path, "ogbl_citation2.py", [
        "--epochs", "2", "--hidden", "64", "--fanouts", "5,5", "--batch-size", "32", "--lr", "0.005",
        "--num-negatives", "4", "--max-steps", "0", "--eval-every", "1"])
    line = LINK_METRIC.search(r.stdout)
    assert line and line.group(1) == "MRR", f"no test MRR line in the output of ogbl_citation2.py:\n{r.stdout}"
    mrr = float(line.group(2))
    assert 0.0 <= mrr <= 1.0 and abs(mrr - m["test_acc"]) < 1e-4, (line.group(0), m["test_acc"])
    secs = SECONDS.search(r.stdout)
    assert secs and float(secs.group(1)) > 0.0, r.stdout
    # Random scores against K distinct negatives give MRR H(K+1)/(K+1): 0.0075 for K = 1000 (0.0071
    # on this fixture, whose negatives repeat nodes). Its links carry little beyond class and
    # degree (the true class alone scores 0.016), so trained figures stay low: measured 0.023 with
    # the fixture's seed 0 and --seed 0 (0.023-0.025 over --seed 0..3).
    k = split["test"]["target_node_neg"].shape[1]
    chance = sum(1.0 / i for i in range(1, k + 2)) / (k + 1)
    assert mrr > 2 * chance, f"test MRR {mrr:.4f} is near chance ({chance:.4f}): {line.group(0)}"
    assert m["task"] == "link" and m["metric"] == "mrr" and m["dataset"] == "ogbl-citation2"
    assert m["plan"]["mode"] == "data_parallel" and m["plan"]["world"] == 2
    assert m["config"]["neg_sampling"] == "per_source" and m["config"]["num_negatives"] == 4
    assert len(m["epochs"]) == 2 and all(e.get("test_acc") is not None for e in m["epochs"]), m["epochs"]


def test_ogbl_examples_help_names_their_anchors(tmp_path: Path, run_example) -> None:
    for script, texts in (("ogbl_collab.py", ("48.10 ± 0.81", "Hits@50", "--decoder", "fixture")),
                          ("ogbl_citation2.py", ("0.8044 ± 0.0010", "MRR", "--max-steps", "fixture"))):
        r = run_example(tmp_path, script, "--help")
        assert r.returncode == 0, r.stderr
        for text in (*texts, "--fanouts", "--workers", "--hidden"):
            assert text in r.stdout, (script, text)


# --- PyG loops (issue 46 item 5): each runs as is in one process and under torchrun ------------------

PYG_LOOPS = {"pyg_loop_node.py": (r"test accuracy: (\S+)", 0.3), "pyg_loop_typed.py": (r"test accuracy: (\S+)", 0.4),
             "pyg_loop_link.py": (r"test AUC: ([0-9.]+)", 0.6)}


# the link loop's one-process run is test_pyg_link_loop_gives_the_same_auc_for_the_same_seed's (twice, same seed)
PYG_RUNS = [(script, procs) for script in sorted(PYG_LOOPS) for procs in (1, 2)
            if (script, procs) != ("pyg_loop_link.py", 1)]


@pytest.mark.slow
@pytest.mark.parametrize("script, procs", PYG_RUNS)
def test_pyg_loop_runs_in_one_process_and_under_torchrun(tmp_path: Path, script: str, procs: int,
                                                         run_example) -> None:
    """One epoch of the plain PyG loop, alone and as 2 processes (torchrun, gloo, a free port): both
    print their test figure, above chance (node classes 7 -> 0.14, ACM 3 -> 0.33, AUC 0.5). The typed
    loop runs in memory alone and over a typed folder (--parts) as 2 processes. The link loop alone:
    the next test. Alone, the loop runs in this process (run_example: no interpreter importing torch
    and PyG for it); under torchrun as users start it."""
    pattern, floor = PYG_LOOPS[script]
    args = [str(REPO / "examples" / script), "--epochs", "1", "--timeout", "60"]
    if script == "pyg_loop_node.py" or (script == "pyg_loop_typed.py" and procs == 2):  # typed: 1 in memory, 2 a folder
        args += ["--parts", str(tmp_path / "parts")]
    if procs == 1:
        r = run_example(tmp_path, script, *args[1:])
        assert r.returncode == 0, r.stderr[-3000:]
        found = re.findall(pattern, r.stdout)
        assert len(found) == 1, r.stdout
        assert floor < float(found[0]) <= 1.0, r.stdout
        return
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(procs), *args]
    env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"OMP_NUM_THREADS": "1"}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=env, cwd=tmp_path)
    except subprocess.TimeoutExpired as stalled:  # the rank loaders print every thread's stack while stalled
        err = stalled.stderr.decode(errors="replace") if isinstance(stalled.stderr, bytes) else stalled.stderr or ""
        pytest.fail(f"{script} on {procs} process(es) ran past 400 s; its stderr ends:\n{err[-6000:]}")
    assert r.returncode == 0, r.stderr[-3000:]
    found = re.findall(pattern, r.stdout)
    assert len(found) == 1, r.stdout  # printed by rank 0 only
    assert floor < float(found[0]) <= 1.0, r.stdout


@pytest.mark.slow
def test_pyg_link_loop_gives_the_same_auc_for_the_same_seed(tmp_path: Path) -> None:
    """Two one-process runs of the link loop with one seed print the same losses and the same test AUC.
    RandomLinkSplit's validation and test negatives come from Python's ``random`` (PyG's
    negative_sampling), which the example seeds; unseeded, reruns scored other negatives (0.8139,
    0.8068, 0.8063 with equal training losses). They are also the link loop's one-process run of
    test_pyg_loop_runs_in_one_process_and_under_torchrun: one test AUC printed, above its floor."""
    args = [sys.executable, str(REPO / "examples" / "pyg_loop_link.py"), "--epochs", "1", "--seed", "3",
            "--timeout", "60"]
    env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"OMP_NUM_THREADS": "1"}
    outs = []
    for _ in range(2):
        r = subprocess.run(args, capture_output=True, text=True, timeout=400, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        outs.append(r.stdout)
    pattern, floor = PYG_LOOPS["pyg_loop_link.py"]
    found = re.findall(pattern, outs[0])
    assert len(found) == 1 and floor < float(found[0]) <= 1.0, outs[0]
    (hits, mrr), = re.findall(r"hits@20 ([0-9.]+), mrr ([0-9.]+)", outs[0])  # run.link_metrics
    assert 0 < float(hits) <= 1 and 1 / 21 < float(mrr) <= 1, outs[0]
    assert outs[0] == outs[1]
