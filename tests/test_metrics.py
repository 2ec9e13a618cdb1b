"""Tests of partition_metrics against small graphs computed by hand, and of ResourceMeter."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnscale.errors import GnnscaleError, PartitionError
from gnnscale.partitioning import ResourceMeter, partition_metrics

# two triangles {0,1,2} and {3,4,5} joined by the edge 2-3, both directions stored
TRIANGLES = np.array(
    [
        [0, 1, 1, 2, 2, 0, 3, 4, 4, 5, 5, 3, 2, 3],
        [1, 0, 2, 1, 0, 2, 4, 3, 5, 4, 3, 5, 3, 2],
    ]
)
HALVES = np.array([0, 0, 0, 1, 1, 1])
F = 5


def triangles(train: list[bool] | None = None) -> Data:
    n = 6
    data = Data(
        x=torch.zeros(n, F),
        edge_index=torch.from_numpy(TRIANGLES),
        num_nodes=n,
        train_mask=torch.tensor(train if train is not None else [True] * n),
    )
    return data


def test_two_triangles_by_hand():
    m = partition_metrics(triangles([True, True, True, True, False, False]), HALVES, 2)
    assert m["num_nodes"] == 6 and m["num_parts"] == 2
    assert m["num_edges"] == 14 and m["undirected_edges"] == 7
    assert m["edge_cut"] == 1 and m["edge_cut_fraction"] == pytest.approx(1 / 7)
    # part 0's node 2 has the remote in-neighbor 3, part 1's node 3 the remote in-neighbor 2
    assert m["halo"] == [1, 1]
    assert m["replication_factor"] == pytest.approx(8 / 6)
    assert m["replication_factor_per_part"] == pytest.approx([4 / 3, 4 / 3])
    assert m["sizes"] == {"nodes": [3, 3], "train": [3, 1], "in_edges": [7, 7]}
    assert m["balance"] == {"nodes": 1.0, "train": 1.5, "in_edges": 1.0}
    json.dumps(m)  # plain JSON
    assert "communication" not in m


def test_path_with_duplicates_and_a_self_loop():
    # 0 -> 1 -> 2 -> 3 -> 4 (one direction), plus a duplicate 0 -> 1 and a self loop 4 -> 4
    ei = np.array([[0, 1, 2, 3, 0, 4], [1, 2, 3, 4, 1, 4]])
    parts = np.array([0, 0, 1, 1, 1])
    m = partition_metrics(ei, parts, 2)  # an edge_index alone: N = len(parts), no train mask
    assert m["undirected_edges"] == 4 and m["edge_cut"] == 1
    assert m["edge_cut_fraction"] == 0.25
    assert m["num_edges"] == 5  # distinct directed edges, the self loop included
    # part 0 owns {0, 1}: in-edge 0->1 is local; part 1 owns {2, 3, 4}: 1->2 comes from part 0
    assert m["halo"] == [0, 1]
    assert m["sizes"]["in_edges"] == [1, 4]
    assert m["sizes"]["train"] is None and m["balance"]["train"] is None
    assert m["balance"]["nodes"] == pytest.approx(3 / 2.5)
    assert m["balance"]["in_edges"] == pytest.approx(4 / 2.5)
    assert m["replication_factor"] == pytest.approx(6 / 5)
    assert m["replication_factor_per_part"] == pytest.approx([1.0, 4 / 3])


def test_one_part_and_an_empty_part():
    m = partition_metrics(TRIANGLES, np.zeros(6, dtype=np.int64), 2)
    assert m["edge_cut"] == 0 and m["halo"] == [0, 0]
    assert m["replication_factor"] == 1.0
    assert m["replication_factor_per_part"] == [1.0, None]
    assert m["balance"]["nodes"] == 2.0  # 6 / mean(6, 0)


@pytest.mark.parametrize(
    "hops, batch_size, expected_rows, expected_edges",
    [
        # one batch per part holding all its nodes: part 0's seeds {0,1,2} reach {0,1,2,3} in
        # one hop (remote: 3) and {0..5} in two (remote: 3, 4, 5); part 1 mirrors it
        ([-1], 3, [1, 1], 7 * 2),
        ([-1, -1], 3, [3, 3], 17 * 2),
        # one seed per batch: seeds 0 and 1 reach {0,1,2,3} (remote 1 each), seed 2 reaches
        # {0..5} (remote 3): 5 per part
        ([-1, -1], 1, [5, 5], None),
    ],
)
def test_communication_rows_by_hand(hops, batch_size, expected_rows, expected_edges):
    m = partition_metrics(triangles(), HALVES, 2, fanouts=hops, batch_size=batch_size)
    c = m["communication"]
    assert c["remote_rows_per_part"] == expected_rows
    assert c["remote_rows"] == sum(expected_rows)
    assert c["remote_bytes"] == sum(expected_rows) * F * 4
    assert c["remote_bytes_per_part"] == [r * F * 4 for r in expected_rows]
    assert c["steps_per_epoch"] == 3 // batch_size
    if expected_edges is not None:
        assert c["sampled_edges"] == expected_edges
    json.dumps(m)


def test_communication_wraps_short_parts_like_the_trainer():
    # training nodes {0,1,2} on part 0 and {3} on part 1, batch size 1: the mean part needs
    # 2 steps per epoch (epoch_steps), so part 0 takes batches of 2 and 1 seeds and part 1
    # samples seed 3 twice; each of its steps reaches {0..5} in two hops: 3 remote rows
    m = partition_metrics(
        triangles([True, True, True, True, False, False]), HALVES, 2, fanouts=[-1, -1],
        batch_size=1, feature_dim=7,
    )
    c = m["communication"]
    assert c["steps_per_epoch"] == 2
    assert c["remote_rows_per_part"] == [4, 6]
    assert c["remote_bytes"] == 10 * 7 * 4
    # sampling requests for remote nodes: part 1 seed 3 hop 2 frontier {3, 2, 4, 5} -> 1 remote
    assert c["remote_sample_requests_per_part"][1] == 2


def test_communication_with_fanouts_is_seeded_and_bounded():
    rng = np.random.default_rng(0)
    n = 300
    ei = rng.integers(0, n, (2, 3000))
    parts = np.arange(n) % 3
    train = torch.from_numpy(rng.random(n) < 0.5)
    kw = dict(train_mask=train, fanouts=[3, 2], batch_size=16, feature_dim=10)
    a = partition_metrics(ei, parts, 3, seed=1, **kw)["communication"]
    b = partition_metrics(ei, parts, 3, seed=1, **kw)["communication"]
    c = partition_metrics(ei, parts, 3, seed=2, **kw)["communication"]
    assert a == b and a != c
    assert 0 < a["remote_rows"] < a["input_rows"]
    full = partition_metrics(ei, parts, 3, seed=1, **{**kw, "fanouts": [-1, -1]})
    assert a["remote_rows"] < full["communication"]["remote_rows"]
    # one part owns everything: nothing is remote
    one = partition_metrics(ei, np.zeros(n, dtype=np.int64), 1, seed=1, **kw)["communication"]
    assert one["remote_rows"] == 0 and one["remote_sample_requests"] == 0


def test_bad_inputs():
    data = triangles()
    with pytest.raises(PartitionError, match=r"parts of shape \[6\]"):
        partition_metrics(data, np.zeros(5, dtype=np.int64), 2)
    with pytest.raises(PartitionError, match="integer part ids, found dtype float"):
        partition_metrics(data, np.zeros(6), 2)
    with pytest.raises(PartitionError, match=r"part ids in \[0, 2\), found ids in \[0, 2\]"):
        partition_metrics(data, np.array([0, 1, 2, 0, 1, 0]), 2)
    with pytest.raises(PartitionError, match="both fanouts and batch_size"):
        partition_metrics(data, HALVES, 2, fanouts=[2])
    with pytest.raises(PartitionError, match="train_mask"):
        partition_metrics(TRIANGLES, HALVES, 2, fanouts=[2], batch_size=2, feature_dim=3)
    with pytest.raises(PartitionError, match="feature_dim"):
        partition_metrics(
            TRIANGLES, HALVES, 2, train_mask=np.ones(6, bool), fanouts=[2], batch_size=2
        )
    with pytest.raises(PartitionError, match="positive integer batch_size"):
        partition_metrics(data, HALVES, 2, fanouts=[2], batch_size=0)
    with pytest.raises(GnnscaleError, match="fanouts"):
        partition_metrics(data, HALVES, 2, fanouts=[0], batch_size=2)
    with pytest.raises(PartitionError, match=r"node ids in \[0, 6\)"):
        partition_metrics(np.array([[0], [9]]), np.zeros(6, dtype=np.int64), 1)


def test_resource_meter_sees_an_allocation():
    with ResourceMeter(interval=0.01) as meter:
        block = np.ones(300_000_000 // 8)  # 300 MB, touched
        block.sum()
        del block
    assert meter.seconds > 0
    assert meter.peak_rss_growth_bytes > 200_000_000
    assert meter.peak_rss_bytes >= meter.start_rss_bytes + meter.peak_rss_growth_bytes - 1
    d = meter.as_dict("partition_")
    assert set(d) == {
        "partition_seconds",
        "partition_peak_rss_bytes",
        "partition_peak_rss_growth_bytes",
        "partition_peak_rss_exact",
    }
