"""gnnscale bench-partition and info --json on real graphs (issue 3, items 3 and the CLI)."""
from __future__ import annotations

import json

import pytest

from test_cli import run_cli


@pytest.mark.parametrize(
    "dataset,root",
    [
        ("planetoid:cora", "planetoid/raw"),
        ("planetoid:citeseer", "planetoid/raw"),
        ("npz:{shared}/squirrel/squirrel.npz", None),
    ],
)
def test_metis_cuts_at_most_a_quarter_of_random(shared_data, tmp_path, dataset, root):
    dataset = dataset.format(shared=shared_data)
    args = ["bench-partition", "--dataset", dataset, "--parts", "4", "--methods", "metis,random,ldg",
            "--out", str(tmp_path / "bench")]
    if root:
        args += ["--root", str(shared_data / root)]
    r = run_cli(*args, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads((tmp_path / "bench" / "results.json").read_text())["results"]
    cut = {row["method"]: row["edge_cut"] for row in res}
    assert cut["metis"] <= cut["random"] / 4, cut
    assert cut["ldg"] < cut["random"], cut
    for png in ("edge_cut.png", "remote_bytes.png", "balance.png"):
        assert (tmp_path / "bench" / png).stat().st_size > 1000
    metis = next(row for row in res if row["method"] == "metis")
    assert metis["remote_bytes_per_epoch"] > 0
    assert metis["remote_bytes_per_epoch"] < next(row for row in res if row["method"] == "random")["remote_bytes_per_epoch"]
    assert "metis" in r.stdout and "random" in r.stdout  # the table


def test_info_json_has_quality_keys(shared_data, tmp_path):
    out = tmp_path / "p"
    r = run_cli("partition", "--dataset", "planetoid:cora", "--root", str(shared_data / "planetoid" / "raw"),
                "--parts", "4", "--method", "fennel", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    r = run_cli("info", str(out), "--json", timeout=60)
    info = json.loads(r.stdout)
    for key in ("edge_cut", "edge_cut_fraction", "balance", "halo", "replication_factor"):
        assert key in info, key
    assert info["method"] == "fennel" and len(info["halo"]) == 4
    assert 0 < info["edge_cut_fraction"] < 1
