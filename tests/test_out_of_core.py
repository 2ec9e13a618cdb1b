"""The out-of-core partition pipeline (issue 47 item 2): the same folder as today's pipeline for the
same assignment, LDG/Fennel streamed from disk, the memory budget's refusal."""
from __future__ import annotations

import filecmp
import json
from pathlib import Path

import numpy as np
import pytest

from gnnscale.datasets import load_dataset
from gnnscale.errors import PartitionError
from gnnscale.partitioning import partition_graph, write_partitions
from gnnscale.partitioning.graph import edge_cut
from gnnscale.partitioning.out_of_core import partition_on_disk, plan_memory

# meta.json entries that differ between two writes of the same assignment: the time of the write,
# the costs measured, and the out-of-core run's own report
VOLATILE = {"created", "partition_seconds", "partition_peak_rss_bytes", "write_seconds", "total_seconds",
            "peak_rss_bytes", "peak_rss_growth_bytes", "peak_rss_exact", "out_of_core"}


def planted(n: int, e: int, communities: int, p_in: float, seed: int = 0) -> np.ndarray:
    """int64 [2, E]: node v in community v % C; an edge stays inside with probability p_in."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n, e)
    inside = rng.random(e) < p_in
    dst = rng.integers(0, n, e)
    same = (rng.integers(0, n // communities, e) * communities + src % communities) % n
    dst[inside] = same[inside]
    return np.stack([src, dst])


def write_graph(root: Path, ei: np.ndarray, n: int, *, chunks: int = 1, dtype=np.float16, seed: int = 0) -> Path:
    """A dir: folder: edge_index.npy (chunks=1) or edges/*.npy (some stored [E_i, 2]), x, y."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    if chunks == 1:
        np.save(root / "edge_index.npy", ei.astype(np.int32))
    else:
        (root / "edges").mkdir()
        for i, piece in enumerate(np.array_split(ei, chunks, axis=1)):
            np.save(root / "edges" / f"{i:03d}.npy", piece.T.copy() if i % 2 else piece.astype(np.int32))
    np.save(root / "x.npy", rng.standard_normal((n, 6)).astype(dtype))
    np.save(root / "y.npy", rng.integers(-1, 5, n))
    return root


def assert_same_folder(a: Path, b: Path) -> None:
    """Every part file byte for byte; meta.json equal but for the volatile entries."""
    ma, mb = (json.loads((d / "meta.json").read_text()) for d in (a, b))
    assert list(ma["files"]) == list(mb["files"]) and len(ma["files"]) == 8 * ma["num_parts"]
    for rel in mb["files"]:
        assert filecmp.cmp(a / rel, b / rel, shallow=False), rel
    for key in set(ma) | set(mb):
        if key not in VOLATILE:
            assert ma.get(key) == mb.get(key), key


def run_entries(options: dict | None = None) -> dict:
    """The entries partition_graph adds to meta.json (write_partitions alone does not)."""
    return {"balance_constraints": ["nodes", "train"], "imbalance": 0.05, "seed": 0, "options": options or {}}


def assignment_of(folder: Path) -> np.ndarray:
    meta = json.loads((folder / "meta.json").read_text())
    out = np.empty(meta["num_nodes"], dtype=np.int64)
    for p in range(meta["num_parts"]):
        out[np.load(folder / f"part{p}" / "orig_ids.npy")] = p
    return out


@pytest.mark.parametrize("undirected,chunks,feature_dtype", [(False, 1, "float32"), (True, 3, "float16"),
                                                             (False, 3, "bfloat16")])
def test_same_files_as_the_in_memory_writer_for_the_same_assignment(tmp_path, undirected, chunks, feature_dtype):
    """Every file equal to write_partitions' for the same assignment, the feature rows stored as
    ``feature_dtype`` (issue 47 item 4 in the out-of-core writer)."""
    n = 900
    ei = planted(n, 7000, 6, 0.8)
    ei[:, :40] = ei[:, 40:80]  # duplicates
    ei[1, 80:90] = ei[0, 80:90]  # self loops
    root = write_graph(tmp_path / "g", ei, n, chunks=chunks)
    parts = np.random.default_rng(1).integers(0, 4, n)
    # chunks of 500 edges: 14+ buckets per part, several edge chunks per file
    meta = partition_on_disk(root, 4, tmp_path / "ooc", parts=parts, method="given", chunk_edges=500,
                             undirected=undirected, show_progress=False, feature_dtype=feature_dtype)
    ref = write_graph(tmp_path / "ref", ei, n)  # the same graph as one edge_index.npy, for the dir: loader
    spec = f"dir:{ref}" + ("?undirected=true" if undirected else "")
    data = load_dataset(spec)
    write_partitions(data, parts, tmp_path / "mem", method="given", dataset=meta["dataset"],
                     extra_meta=run_entries(), feature_dtype=feature_dtype)
    assert_same_folder(tmp_path / "ooc", tmp_path / "mem")
    assert meta["feature_dtype"] == feature_dtype
    assert np.load(tmp_path / "ooc" / "part0" / "x.npy").dtype == {"float32": np.float32, "float16": np.float16,
                                                                   "bfloat16": np.uint16}[feature_dtype]
    assert not (tmp_path / "ooc" / ".spill").exists()
    assert meta["out_of_core"]["spill_bytes"] > 0
    assert meta["edge_cut"] == edge_cut(data.edge_index, parts, n)[0]


@pytest.mark.parametrize("method", ["metis", "kaminpar"])
def test_in_memory_methods_within_the_budget_equal_partition_graph(tmp_path, method):
    if method == "kaminpar":
        pytest.importorskip("kaminpar")
    n = 600
    root = write_graph(tmp_path / "g", planted(n, 5000, 4, 0.9), n, dtype=np.float32)
    partition_on_disk(root, 3, tmp_path / "ooc", method=method, memory_budget_gb=4, show_progress=False)
    partition_graph(load_dataset(f"dir:{root}"), 3, tmp_path / "mem", method=method, dataset=f"dir:{root}")
    assert_same_folder(tmp_path / "ooc", tmp_path / "mem")


@pytest.mark.parametrize("method", ["ldg", "fennel"])
def test_streaming_from_disk_cuts_a_planted_graph(tmp_path, method):
    n = 4000
    ei = planted(n, 40000, 4, 0.9)
    root = write_graph(tmp_path / "g", ei, n)
    meta = partition_on_disk(root, 4, tmp_path / "a", method=method, chunk_edges=3000, show_progress=False,
                             options={"passes": 2})
    parts = assignment_of(tmp_path / "a")
    cut, total = edge_cut(ei, parts, n)
    random_cut, _ = edge_cut(ei, np.random.default_rng(0).integers(0, 4, n), n)
    assert meta["edge_cut"] == cut
    assert cut < 0.6 * random_cut  # communities found (random: ~0.75 of the edges cut)
    assert max(np.bincount(parts, minlength=4)) <= 1.05 * n / 4 + 1
    partition_on_disk(root, 4, tmp_path / "b", method=method, chunk_edges=3000, show_progress=False,
                      options={"passes": 2})
    np.testing.assert_array_equal(assignment_of(tmp_path / "b"), parts)  # same seed, same parts
    data = load_dataset(f"dir:{root}")
    write_partitions(data, parts, tmp_path / "mem", method=method, dataset=meta["dataset"],
                     extra_meta=run_entries({"passes": 2}))
    assert_same_folder(tmp_path / "a", tmp_path / "mem")


@pytest.mark.parametrize("method", ["ldg", "fennel"])
def test_restreaming_from_disk_is_the_in_memory_stream_on_one_block(tmp_path, method):
    """Two passes over a graph that fits one block (so the disk stream's block order cannot differ): the
    assignment is the in-memory stream's passes (streaming._one_pass) over the same draws (each pass
    draws the block's node order, then the placement noise), so the restreaming rule is the same: a
    neighbour not yet placed in this pass counts in its last pass's part, one placed earlier in this
    pass in its new part. Duplicate-free edges: the disk CSR keeps duplicates, the in-memory one not.
    (stream_partition itself draws one node order for all its passes, the disk stream one per pass: from
    the second pass on their assignments differ, 42 of these 400 nodes for LDG.)"""
    from gnnscale.partitioning import to_undirected_csr
    from gnnscale.partitioning.streaming import _one_pass, capacity, default_chunk_size, fennel_alpha

    n, num_parts = 400, 4
    ei = planted(n, 3000, 4, 0.9)
    lo, hi = np.minimum(ei[0], ei[1]), np.maximum(ei[0], ei[1])
    pairs = np.unique(lo[lo < hi] * n + hi[lo < hi])
    ei = np.stack([pairs // n, pairs % n])
    root = write_graph(tmp_path / "g", ei, n)
    partition_on_disk(root, num_parts, tmp_path / "a", method=method, chunk_edges=1 << 20, seed=3,
                      options={"passes": 2}, show_progress=False)
    got = assignment_of(tmp_path / "a")
    indptr, indices = to_undirected_csr(ei, n)
    rng = np.random.default_rng(3)
    rng.permutation(np.zeros(1, dtype=np.int64))  # the order of the one block
    previous = None
    for _ in range(2):  # the passes
        previous = _one_pass(indptr, indices, np.diff(indptr), rng.permutation(n), num_parts, method,
                             capacity(n, num_parts, 0.05), default_chunk_size(n, num_parts),
                             fennel_alpha(n, indptr[-1] / 2.0, num_parts), 1.5, None, rng, previous)
    moved = int((got != previous).sum())
    assert moved == 0, f"{moved} of {n} nodes in another part than the in-memory stream's"


def test_the_budget_refuses_before_starting(tmp_path):
    with pytest.raises(PartitionError, match=r"memory budget of at least .* GB for 50000000 nodes"):
        plan_memory(50_000_000, 1_000_000_000, 8, 2.0)
    plan = plan_memory(50_000_000, 1_000_000_000, 8, 8.0)
    assert plan["estimate_bytes"] <= 8e9 and plan["chunk_edges"] >= 1 << 16
    with pytest.raises(PartitionError, match="in-memory graph of method 'metis'"):
        plan_memory(50_000_000, 1_000_000_000, 8, 8.0, method="metis")
    root = write_graph(tmp_path / "g", planted(100, 300, 2, 0.5), 100)
    with pytest.raises(PartitionError, match="memory budget"):
        partition_on_disk(root, 2, tmp_path / "out", memory_budget_gb=0.1, show_progress=False)
    assert not (tmp_path / "out").exists()


def test_gnnscale_partition_memory_budget(tmp_path):
    """``gnnscale partition --memory-budget``: METIS within the budget writes the folder the plain command writes
    (feature rows as bfloat16 in both);
    the plan is printed; a dataset that is not dir: or a link option is refused in one line, exit 2."""
    import subprocess
    import sys

    n = 500
    root = write_graph(tmp_path / "g", planted(n, 4000, 4, 0.9), n, dtype=np.float32)
    base = [sys.executable, "-m", "gnnscale", "partition", "--dataset", f"dir:{root}", "--parts", "3", "--method", "metis",
            "--feature-dtype", "bfloat16"]
    r = subprocess.run(base + ["--out", str(tmp_path / "ooc"), "--memory-budget", "4"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "plan: O(N) arrays" in r.stdout and "estimate" in r.stdout
    subprocess.run(base + ["--out", str(tmp_path / "mem")], check=True, capture_output=True, timeout=300)
    assert_same_folder(tmp_path / "ooc", tmp_path / "mem")
    r = subprocess.run(base + ["--out", str(tmp_path / "x"), "--memory-budget", "4", "--edge-split", "0.8,0.1,0.1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and "--edge-split" in r.stderr and len(r.stderr.strip().splitlines()) == 1
