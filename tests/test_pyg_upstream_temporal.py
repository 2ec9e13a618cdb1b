"""PyG's distributed temporal link example on gnnscale (issue 57): the drop-in's DistLinkNeighborLoader
with PyG's time arguments is the run's typed temporal link loader, and
examples/pyg_upstream/temporal_link_movielens_cpu.py (import line changed, users' features from the
synthetic graph) trains on 2 processes under torchrun over the synthetic user-rates-movie graph."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import torch
import torch_geometric.transforms as T

from gnnscale.datasets.temporal_ratings import generate_temporal_ratings
from gnnscale.partitioning import partition_graph

from test_pyg_dist_api import torchrun_upstream

UPSTREAM = Path(__file__).resolve().parents[1] / "examples" / "pyg_upstream"
REL = ("user", "rates", "movie")


def test_the_drop_in_link_loader_in_time_is_the_runs_typed_temporal_loader(tmp_path):
    from gnnscale.pyg import start_run
    from gnnscale.pyg.distributed import DistContext, DistLinkNeighborLoader, LocalFeatureStore, LocalGraphStore

    data = T.ToUndirected(merge=True)(generate_temporal_ratings(num_users=60, num_movies=40, num_ratings=800))
    folder = tmp_path / "ml1"
    partition_graph(data, 1, folder, method="random", dataset="ratings")
    pairs, label, t = data[REL].edge_index[:, :200], data[REL].edge_label[:200], data[REL].time[:200] - 1
    kw = dict(edge_label=label, disjoint=True, time_attr="edge_time", temporal_strategy="last", batch_size=32,
              shuffle=True, seed=3)
    feature, graph = LocalFeatureStore.from_partition(folder, 0), LocalGraphStore.from_partition(folder, 0)
    mine = DistLinkNeighborLoader((feature, graph), [5, 3], current_ctx=DistContext(0, 0, 1, 1, "g"),
                                  edge_label_index=(REL, pairs), edge_label_time=t, master_addr="localhost",
                                  master_port=1, num_workers=0, **kw)
    with mine as iterator:  # PyG's DistLoader form
        got = list(iterator)
    run = start_run(str(folder), timeout=30)
    want = list(run.link_loader([5, 3], (REL, pairs), edge_label_time=t, **kw))
    assert len(got) == len(want) == 7
    sampled = 0
    for a, b in zip(got, want):
        assert torch.equal(a[REL].edge_label, b[REL].edge_label)
        for s in b.node_types:
            assert torch.equal(a[s].n_id, b[s].n_id)
        for et in b.edge_types:
            assert torch.equal(a[et].e_id, b[et].e_id) and torch.equal(a[et].edge_time, b[et].edge_time)
            tree_time = t[a[REL].input_id][a[et[2]].batch[a[et].edge_index[1]]]
            assert bool((a[et].edge_time <= tree_time).all())  # PyG's cut: at or before the pair's time
            sampled += a[et].e_id.numel()
    assert sampled > 500


def test_pyg_temporal_link_movielens_cpu_trains_under_torchrun(tmp_path, shared_data):
    """Its partition_graph.py cuts the synthetic ratings graph (the MovieLens line: MovieLens cannot be
    downloaded here) into 2 typed temporal parts; 2 processes train 5 epochs of temporal link batches;
    the loss falls and the test RMSE is printed by both."""
    env = dict(os.environ, GNNSCALE_SHARED_DATA=str(shared_data), OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "partition_graph.py", "--dataset", "MovieLens", "--root_dir", str(tmp_path),
                        "--num_partitions", "2"], cwd=UPSTREAM, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    parts = tmp_path / "partitions" / "MovieLens" / "2-parts"
    script = (f"exec {sys.executable} temporal_link_movielens_cpu.py --dataset_root_dir {parts} --num_nodes 2 "
              "--node_rank $RANK --num_epochs 5 --batch_size 256 --num_neighbors 10,5 --master_addr $MASTER_ADDR "
              "--ddp_port $MASTER_PORT")
    r, loss = torchrun_upstream(script, env)
    rmse = {int(n): float(v) for n, v in re.findall(r"\[Node (\d)\] Test epoch 5 END: rmse=([\d.]+)", r.stdout)}
    assert sorted(loss) == [(n, e) for n in (0, 1) for e in range(1, 6)], r.stdout[-2000:]
    assert all(loss[n, 5] < loss[n, 1] - 1.0 for n in (0, 1)), loss
    assert sorted(rmse) == [0, 1] and all(0.0 < v < 3.0 for v in rmse.values()), rmse
