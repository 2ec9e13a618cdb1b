"""Auto host reads judge each kind by its own files (issue 44): the graph by the peers' CSC
(``indptr.npy``, ``indices.npy``), the features by their ``x.npy``. A folder where a peer's CSC is
missing but its ``x.npy`` is there turns graph reads off (features stay on), the mirror case turns
feature reads off, and the step's data path then runs: owners asked for what is not read."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from gnnscale.partitioning import load_part
from gnnscale.partitioning.manifest import part_dir_name
from gnnscale.process.launch import launch_local

from dist_workers import host_reads_from_views

GRAPH_FILES, FEATURE_FILES = ("indptr.npy", "indices.npy"), ("x.npy",)


def _view(src: Path, dst: Path, own: int, missing: tuple[str, ...], whole: tuple[int, ...] = ()) -> str:
    """A folder of symlinks to ``src``'s files: part ``own`` and the parts ``whole`` whole, the other parts
    without ``missing``."""
    dst.mkdir()
    keep = {part_dir_name(p) for p in (own, *whole)}
    for entry in src.iterdir():
        if entry.is_dir():
            (dst / entry.name).mkdir()
            for f in entry.iterdir():
                if entry.name in keep or f.name not in missing:
                    os.symlink(f, dst / entry.name / f.name)
        else:
            os.symlink(entry, dst / entry.name)
    return str(dst)


@pytest.mark.parametrize("missing, want", [
    (GRAPH_FILES, {"features": True, "graph": False, "parts": 1}),
    (FEATURE_FILES, {"features": False, "graph": True, "parts": 1}),
])
def test_a_peers_missing_files_turn_off_only_their_reads(cora_partition, tmp_path, missing, want):
    src = Path(cora_partition(2))
    # rank 0 sees part 1 without ``missing`` (as a host holding another copy), rank 1 sees everything
    views = [_view(src, tmp_path / "v0", 0, missing), _view(src, tmp_path / "v1", 1, ())]
    assert not (Path(views[0]) / part_dir_name(1) / missing[0]).exists()
    seeds = torch.tensor([0, 5, 900, 1500, 2000, 2700])  # both parts' nodes, on both ranks
    res = launch_local(host_reads_from_views, 2, args=(views, seeds, [5, 3], 3))
    parts = [load_part(str(src), p) for p in range(2)]
    x_all = torch.cat([torch.as_tensor(np.asarray(p.x)) for p in parts])  # new ids, part by part
    for r, got in enumerate(res):
        assert got["reads"] == want, r  # the same on every rank: one gathered answer
        for b, a in zip(got["blocks"], got["asked"]):
            assert all(torch.equal(u, v) for u, v in zip(b, a)), r
        assert torch.equal(got["x"], x_all[got["blocks"][0][0]]), r
        # what is not read from the folder is asked of its owner
        assert ("sample_request" in got["rounds"]) == (not want["graph"]), (r, got["rounds"])
        assert ("feature_request" in got["rounds"]) == (not want["features"]), (r, got["rounds"])


def test_a_view_missing_one_of_two_peers_turns_every_read_off(cora_partition, tmp_path):
    """Three ranks on one host, a mixed layout: ranks 0 and 1 see the whole folder, rank 2 its own part and
    part 0 but nothing of part 1. Rank 2 does not find every peer's files, so every rank reads nothing
    from the folder (one gathered answer) and asks the owners, with the blocks and rows of a whole folder."""
    src = Path(cora_partition(3))
    everything = GRAPH_FILES + FEATURE_FILES
    views = [str(src), str(src), _view(src, tmp_path / "v2", 2, everything, whole=(0,))]
    assert (Path(views[2]) / part_dir_name(0) / "x.npy").exists()
    assert not (Path(views[2]) / part_dir_name(1) / "x.npy").exists()
    seeds = torch.tensor([0, 5, 900, 1500, 2000, 2700])  # every part's nodes, on every rank
    res = launch_local(host_reads_from_views, 3, args=(views, seeds, [5, 3], 3))
    parts = [load_part(str(src), p) for p in range(3)]
    x_all = torch.cat([torch.as_tensor(np.asarray(p.x)) for p in parts])
    for r, got in enumerate(res):
        assert got["reads"] == {"features": False, "graph": False, "parts": 0}, r
        for b, a in zip(got["blocks"], got["asked"]):
            assert all(torch.equal(u, v) for u, v in zip(b, a)), r
        assert torch.equal(got["x"], x_all[got["blocks"][0][0]]), r
        assert "sample_request" in got["rounds"] and "feature_request" in got["rounds"], (r, got["rounds"])
