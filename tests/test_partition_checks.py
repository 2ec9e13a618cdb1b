"""A partition folder with a missing or damaged file (issue 44, items 1 and 7): `train` says which
file in one line and exits 2; `info` lists every file that fails its check and exits 2; a typed
folder's `info` shows each node type's feature width; `partition` logs its write once."""
from __future__ import annotations

import json
import shutil

import pytest
from test_cli import run_cli

RERUN = "re-run `gnnscale partition` to rewrite the partition folder"
_LOGS: dict = {}


@pytest.fixture(scope="module")
def cora2(shared_data, tmp_path_factory):
    out = tmp_path_factory.mktemp("checks") / "cora2"
    r = run_cli("partition", "--dataset", "planetoid:cora", "--root", str(shared_data / "planetoid" / "raw"),
                "--parts", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    _LOGS["partition"] = r.stderr
    return out


def _one_line_error(r, command: str) -> str:
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"gnnscale {command}: error: "), r.stderr[-3000:]
    return lines[0]


def test_partition_logs_its_write_once(cora2):
    written = [line for line in _LOGS["partition"].splitlines() if "parts to" in line or "written to" in line]
    assert len(written) == 1, written
    assert f"wrote 2 parts to {cora2} in " in written[0] and "(2708 nodes, 10556 edges, edge cut" in written[0]


def test_a_missing_file_or_part_folder_is_one_line_and_exit_2(cora2, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(cora2, bad)
    (bad / "part1" / "indptr.npy").unlink()
    line = _one_line_error(run_cli("train", "--parts-dir", str(bad), "--epochs", "1"), "train")
    assert line == f"gnnscale train: error: expected {bad}/part1/indptr.npy, found no such file; {RERUN}"
    shutil.rmtree(bad / "part1")
    line = _one_line_error(run_cli("train", "--parts-dir", str(bad), "--epochs", "1"), "train")
    assert line == (f"gnnscale train: error: expected the folder {bad}/part1 with part 1's 8 files, found no such "
                    f"folder; {RERUN}")


def test_info_names_the_files_that_fail_their_check_and_exits_2(cora2, tmp_path):
    r = run_cli("info", str(cora2))
    assert r.returncode == 0, r.stderr
    assert "  files              every part's files match meta.json's sha256" in r.stdout
    bad = tmp_path / "bad"
    shutil.copytree(cora2, bad)
    x = bad / "part0" / "x.npy"
    x.write_bytes(x.read_bytes()[:1000])  # truncated
    (bad / "part1" / "y.npy").unlink()
    r = run_cli("info", str(bad))
    line = _one_line_error(r, "info")
    assert "found 2 that do not (part(s) [0, 1], listed above)" in line
    assert f"    part 0: expected {x} to have sha256 " in r.stdout and "(1000 bytes: the file is truncated" in r.stdout
    assert f"    part 1: expected {bad}/part1/y.npy, found no such file" in r.stdout
    r = run_cli("info", str(bad), "--json")
    assert r.returncode == 2
    check = json.loads(r.stdout)["check"]
    assert check["ok"] is False and sorted(check["problems"]) == ["0", "1"]


def test_info_shows_each_node_types_feature_dim(acm_partition):
    r = run_cli("info", acm_partition(2))
    assert r.returncode == 0, r.stderr
    assert "  feature_dim        per node type: paper 1902, author 1902, subject 0 (learned embedding)" in r.stdout
    assert "feature_dim        0" not in r.stdout
    info = json.loads(run_cli("info", acm_partition(2), "--json").stdout)
    assert info["feature_dims"] == {"paper": 1902, "author": 1902, "subject": 0}
    assert info["feature_dim"] == 0  # the key existing tools read keeps its value
