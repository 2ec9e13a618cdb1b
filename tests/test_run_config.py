"""Runs people can configure, watch and compare (issue 17): YAML configs, TensorBoard scalars,
``gnnscale report``. Real 2-worker runs on Cora."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

ARGS = ["--workers", "2", "--epochs", "3", "--fanouts", "5,5", "--batch-size", "32", "--hidden", "16",
        "--lr", "0.01", "--timeout", "60", "--no-verify"]


def gnnscale(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"CI": "1"}
    return subprocess.run([sys.executable, "-m", "gnnscale", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_yaml_and_flags_give_the_same_run(cora_partition, tmp_path):
    parts = cora_partition(2)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"parts-dir: {parts}\nworkers: 2\nepochs: 3\nfanouts: [5, 5]\nbatch_size: 32\nhidden: 16\n"
                   "lr: 0.01\ntimeout: 60\nverify: false\nexchange: historical\n")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    ra = gnnscale("train", "--config", str(cfg), "--exchange", "exact", "--metrics", str(a))  # the flag wins
    rb = gnnscale("train", "--parts-dir", parts, *ARGS, "--metrics", str(b))
    assert ra.returncode == 0 and rb.returncode == 0, (ra.stderr[-2000:], rb.stderr[-2000:])
    conf_a, conf_b = (yaml.safe_load((tmp_path / f"{x}.config.yaml").read_text()) for x in "ab")
    for c in (conf_a, conf_b):
        c.pop("metrics")
    assert conf_a == conf_b and conf_a["exchange"] == "exact" and conf_a["fanouts"] == [5, 5]
    ma, mb = (json.loads(p.read_text()) for p in (a, b))
    assert ma["final_weights_sha256"] == mb["final_weights_sha256"]
    printed = gnnscale("train", "--config", str(cfg), "--print-config", "--epochs", "7")
    assert printed.returncode == 0 and yaml.safe_load(printed.stdout)["epochs"] == 7


@pytest.mark.parametrize("text, message", [
    ("epochs: 3\nfanout: [5, 5]\n", "line 2: unknown option 'fanout' (did you mean 'fanouts'?)"),
    ("epochs: three\n", "line 1: option 'epochs' expects an integer, found 'three' (str)"),
    ("hidden: 16\nfanouts: 5,x\n", "line 2: option 'fanouts' expects a list of integers"),
    ("pipeline: yes please\n", "line 1: option 'pipeline' expects true or false"),
    ("exchange: sometimes\n", "line 1: option 'exchange' expects one of exact, historical, local"),
    ("- epochs\n", "line 1: expected a mapping of option names to values"),
    ("epochs: [1\n", "not valid YAML"),
])
def test_bad_config_files_name_the_key_file_and_line(tmp_path, text, message):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    r = gnnscale("train", "--config", str(cfg))
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"gnnscale train: error: {cfg}" in r.stderr and message in r.stderr, r.stderr[-2000:]
    assert "Traceback" not in r.stderr


def test_tensorboard_holds_every_scalar_for_every_epoch(cora_partition, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = tmp_path / "tb"
    r = gnnscale("train", "--parts-dir", cora_partition(2), *ARGS, "--exchange", "historical", "--batch-size", "16",
                 "--tensorboard", str(tb), "--log-every", "2", "--metrics", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stderr[-3000:]
    acc = EventAccumulator(str(tb))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    want = {"loss/train", "accuracy/train", "accuracy/val", "accuracy/test", "time/epoch", "time/sample", "time/fetch",
            "time/compute", "time/wait", "time/grad_sync", "bytes/total", "bytes/gradient", "bytes/embedding",
            "cache/hit_rate", "embedding/age_mean", "embedding/age_max"}
    assert want <= tags, want - tags
    for tag in want:
        assert [e.step for e in acc.Scalars(tag)] == [0, 1, 2], tag
    m = json.loads((tmp_path / "m.json").read_text())
    assert [e.value for e in acc.Scalars("loss/train")] == pytest.approx([e["loss"] for e in m["epochs"]])
    steps = sum(e["steps"] for e in m["epochs"])
    assert [e.step for e in acc.Scalars("step/loss")] == list(range(2, steps + 1, 2))
    assert len(acc.Scalars("step/seconds")) == steps // 2


def test_report_plots_two_runs(cora_partition, tmp_path):
    runs = []
    for mode in ("exact", "historical"):
        m = tmp_path / f"{mode}.json"
        r = gnnscale("train", "--parts-dir", cora_partition(2), *ARGS, "--exchange", mode, "--metrics", str(m))
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(str(m))
    out = tmp_path / "report"
    r = gnnscale("report", *runs, "--out", str(out))
    assert r.returncode == 0, r.stderr[-3000:]
    for name in ("loss.png", "accuracy.png", "stages.png", "bytes.png"):
        blob = (out / name).read_bytes()
        assert blob[:8] == b"\x89PNG\r\n\x1a\n" and len(blob) > 5000, name
    text = (out / "summary.txt").read_text()
    assert "exchange=exact" in text and "exchange=historical" in text and text == r.stdout
    bad = gnnscale("report", str(tmp_path / "missing.json"), "--out", str(out))
    assert bad.returncode == 2 and "cannot read a metrics file" in bad.stderr
