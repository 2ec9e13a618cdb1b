"""gnnscale bench-partition and info --json on real graphs (issue 3, items 3 and the CLI)."""
from __future__ import annotations

import json

import pytest

from test_cli import cli_in_process


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
    r = cli_in_process(*args)  # the command's code path in this process (each method still in its own)
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
    r = cli_in_process("partition", "--dataset", "planetoid:cora", "--root", str(shared_data / "planetoid" / "raw"),
                       "--parts", "4", "--method", "fennel", "--out", str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    r = cli_in_process("info", str(out), "--json")
    info = json.loads(r.stdout)
    for key in ("edge_cut", "edge_cut_fraction", "balance", "halo", "replication_factor"):
        assert key in info, key
    assert info["method"] == "fennel" and len(info["halo"]) == 4
    assert 0 < info["edge_cut_fraction"] < 1


HUNGRY = '''
import numpy as np

from gnnscale.partitioning.strategies import random_strategy


def hungry(data, num_parts, seed=0):
    """random's parts, after touching 100 MiB."""
    block = np.ones(100 * 2**20 // 8)
    return random_strategy(data, num_parts, seed=seed) + int(block[0]) - 1
'''


def test_bench_rows_printed_once_with_each_methods_own_peak(shared_data, tmp_path):
    """Issue 44: the table once on stdout (progress lines on stderr), peak_MB the method's own
    peak (a method touching 100 MiB shows ~100, random ~0, not the process's ~500 MB), and a note
    where two methods gave the same assignment (ldg and fennel on Cora, see streaming.py)."""
    import os
    import subprocess
    import sys

    (tmp_path / "hungry_mod.py").write_text(HUNGRY)
    env = dict(os.environ, CI="1", PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run(
        [sys.executable, "-m", "gnnscale", "bench-partition", "--dataset", "planetoid:cora",
         "--root", str(shared_data / "planetoid" / "raw"), "--parts", "2",
         "--methods", "random,ldg,fennel,hungry_mod:hungry", "--out", str(tmp_path / "bench")],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [line for line in r.stdout.splitlines() if line.split()[:1] == ["2"] and "parts:" not in line]
    assert [line.split()[1] for line in rows] == ["random", "ldg", "fennel", "hungry_mod:hungry"], r.stdout
    mib = {line.split()[1]: float(line.split()[3]) for line in rows}  # the peak_MB column
    assert 100 <= mib["hungry_mod:hungry"] < 130, mib
    assert mib["random"] < 5 and mib["ldg"] < 20, mib
    assert not any(line in r.stderr for line in rows), r.stderr  # the rows are not logged as well
    progress = [line for line in r.stderr.splitlines() if "bench-partition [" in line]
    assert len(progress) == 4 and "[4/4] 2 parts, hungry_mod:hungry" in progress[-1], r.stderr
    res = {row["method"]: row for row in json.loads((tmp_path / "bench" / "results.json").read_text())["results"]}
    for method, row in res.items():
        assert row["memory_measured"] == "own process" and f"{row['peak_rss_growth_bytes'] / 2**20:.1f}" == f"{mib[method]:.1f}"
    assert res["hungry_mod:hungry"]["edge_cut"] == res["random"]["edge_cut"]
    assert "2 parts: fennel gave the same assignment as ldg" in r.stdout
    assert "gave the same assignment as random" in r.stdout  # hungry: random's parts
