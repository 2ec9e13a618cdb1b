"""Partitioning across processes (issue 47 item 3): 2-3 ranks on 127.0.0.1 (gloo, a free port, timeouts)
write the same folder as the single-process out-of-core pipeline for the same assignment."""
from __future__ import annotations

import numpy as np
import pytest

from gnnscale.partitioning.out_of_core import partition_on_disk
from gnnscale.process.launch import launch_local

from partition_workers import partition_worker
from test_out_of_core import assert_same_folder, assignment_of, planted, write_graph


@pytest.mark.parametrize("world,num_parts,undirected", [(2, 3, False), (3, 4, True)])
def test_ranks_write_the_single_process_folder(tmp_path, world, num_parts, undirected):
    n = 1200
    root = write_graph(tmp_path / "g", planted(n, 9000, 6, 0.8), n, chunks=3)
    parts = np.random.default_rng(2).integers(0, num_parts, n)
    partition_on_disk(root, num_parts, tmp_path / "one", parts=parts, method="given", chunk_edges=700,
                      undirected=undirected, show_progress=False)
    res = launch_local(partition_worker, world,
                       args=(str(root), num_parts, str(tmp_path / "many"), parts, "given", undirected, 700))
    assert_same_folder(tmp_path / "many", tmp_path / "one")
    assert sorted(p for r in res for p in r["parts_written"]) == list(range(num_parts))
    assert [r["has_meta"] for r in res] == [True] + [False] * (world - 1)
    # every edge row (bucket, a, b: 3 int32) that leaves a rank is counted, and what one rank sends others receive
    sent = sum(r["stats"]["sent"]["partition_edges"] for r in res)
    received = sum(r["stats"]["received"]["partition_edges"] for r in res)
    assert sent == received > 0 and sent % 12 == 0
    assert not (tmp_path / "many" / ".spill").exists()


@pytest.mark.parametrize("sizes", [(100, 8900), (8900, 100)], ids=["rank0-reads-more", "rank1-reads-more"])
def test_ranks_reading_different_chunk_counts_write_the_single_process_folder(tmp_path, sizes):
    """Two edge files of 100 and 8,900 columns (and the reverse): the shards [0, 4500) and [4500, 9000) read
    in 700-column chunks cut at file ends give one rank 8 chunks and the other 7, so every rank must make the
    larger count of exchange rounds (the smaller would drop the longer shard's last chunk)."""
    from gnnscale.partitioning.disk_graph import DiskGraph

    n, e = 1000, sum(sizes)
    root = write_graph(tmp_path / "g", planted(n, e, 5, 0.8), n)
    ei = np.load(root / "edge_index.npy")
    (root / "edge_index.npy").unlink()
    (root / "edges").mkdir()
    np.save(root / "edges" / "000.npy", ei[:, :sizes[0]])
    np.save(root / "edges" / "001.npy", ei[:, sizes[0]:])
    graph = DiskGraph.open(root)
    counts = [len(graph.edge_slices(700, r * e // 2, (r + 1) * e // 2)) for r in range(2)]
    assert counts == ([8, 7] if sizes[0] < sizes[1] else [7, 8])
    parts = np.random.default_rng(3).integers(0, 3, n)
    partition_on_disk(root, 3, tmp_path / "one", parts=parts, method="given", chunk_edges=700, show_progress=False)
    launch_local(partition_worker, 2, args=(str(root), 3, str(tmp_path / "many"), parts, "given", False, 700))
    assert_same_folder(tmp_path / "many", tmp_path / "one")


def test_rank_zero_streams_the_assignment_for_everyone(tmp_path):
    n = 1500
    root = write_graph(tmp_path / "g", planted(n, 12000, 3, 0.9), n)
    res = launch_local(partition_worker, 2, args=(str(root), 3, str(tmp_path / "many"), None, "ldg", False, 2000))
    parts = assignment_of(tmp_path / "many")
    partition_on_disk(root, 3, tmp_path / "one", parts=parts, method="ldg", chunk_edges=2000, show_progress=False)
    assert_same_folder(tmp_path / "many", tmp_path / "one")
    # the same stream as one process's ldg (rank 0 ran it), broadcast in one all-reduce of int32 [N]
    partition_on_disk(root, 3, tmp_path / "ldg", method="ldg", chunk_edges=2000, show_progress=False)
    np.testing.assert_array_equal(assignment_of(tmp_path / "ldg"), parts)
    assert all(r["stats"]["sent"]["partition_assignment"] == 4 * n for r in res)


def test_torchrun_runs_the_module_on_two_processes(tmp_path):
    """``torchrun -m gnnscale.dist_partition`` (2 processes, 127.0.0.1, a free port, a deadline), feature
    rows stored as float16: the single process's folder for the same assignment."""
    import subprocess
    import sys

    from gnnscale.process.launch import find_free_port

    n = 800
    root = write_graph(tmp_path / "g", planted(n, 5000, 4, 0.9), n)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(find_free_port()), "-m", "gnnscale.dist_partition",
           str(root), "--parts", "4", "--out", str(tmp_path / "many"), "--memory-budget", "2", "--timeout", "60",
           "--feature-dtype", "float16"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "plan: 800 nodes, 5,000 edges, 4 parts on 2 process(es)" in r.stdout
    assert "wrote 4 parts" in r.stdout
    parts = assignment_of(tmp_path / "many")
    partition_on_disk(root, 4, tmp_path / "one", parts=parts, method="ldg", show_progress=False,
                      feature_dtype="float16")
    assert_same_folder(tmp_path / "many", tmp_path / "one")
    assert np.load(tmp_path / "many" / "part0" / "x.npy").dtype == np.float16
