"""Soak (issue 15): 100 epochs on Cora with 2 workers and a checkpoint after every epoch: no
memory growth, no file-descriptor leak, exactly K checkpoints kept."""
from __future__ import annotations

import json
import subprocess
import sys


def test_hundred_epochs_leak_nothing(cora_partition, tmp_path):
    out, ck = tmp_path / "m.json", tmp_path / "ck"
    r = subprocess.run([sys.executable, "-m", "gnnscale", "train", "--parts-dir", cora_partition(2), "--workers", "2",
                        "--epochs", "100", "--fanouts", "5,5", "--batch-size", "64", "--hidden", "16",
                        "--eval-every", "10", "--checkpoint-dir", str(ck), "--keep-checkpoints", "3",
                        "--metrics", str(out), "--timeout", "60", "--no-verify"],
                       capture_output=True, text=True, timeout=900, env=_env() | {"CI": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    epochs = json.loads(out.read_text())["epochs"]
    assert len(epochs) == 100
    for rank in (0, 1):
        rss = [e["rss_mb_by_rank"][rank] for e in epochs]
        fds = [e["open_fds_by_rank"][rank] for e in epochs]
        assert rss[99] <= 1.05 * rss[9], (rank, rss[9], rss[99])  # from epoch 10 to epoch 100
        assert max(fds[9:]) <= fds[9], (rank, fds[9], max(fds[9:]))
    per = epochs[0]["steps"]
    assert sorted(p.name for p in ck.iterdir()) == [f"step-{e * per:09d}" for e in (98, 99, 100)]


def _env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"}
