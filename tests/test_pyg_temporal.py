"""gnnscale.pyg's loaders with time (issue 57): PyG's own homogeneous temporal loader tests, run on
gnnscale's loaders (test bodies as in pyg-team/pytorch_geometric test/loader/, only the imports
differ), and the time rule checked edge by edge."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data, HeteroData

from gnnscale.errors import SamplerError
from gnnscale.pyg import LinkNeighborLoader, NeighborLoader


def test_edge_level_temporal_homo_neighbor_loader():  # PyG test/loader/test_neighbor_loader.py
    edge_index = torch.tensor([
        [0, 1, 1, 2, 2, 3, 3, 4],
        [1, 0, 2, 1, 3, 2, 4, 3],
    ])
    edge_time = torch.arange(edge_index.size(1))

    data = Data(edge_index=edge_index, edge_time=edge_time, num_nodes=5)

    loader = NeighborLoader(
        data,
        num_neighbors=[-1, -1],
        input_time=torch.tensor([4, 4, 4, 4, 4]),
        time_attr='edge_time',
        batch_size=1,
    )

    for batch in loader:
        assert batch.edge_time.numel() == batch.num_edges
        if batch.edge_time.numel() > 0:
            assert batch.edge_time.max() <= 4


@pytest.mark.parametrize('batch_size', [1])
def test_temporal_homo_link_neighbor_loader(batch_size):  # PyG test/loader/test_link_neighbor_loader.py
    data = Data(
        x=torch.randn(10, 5),
        edge_index=torch.randint(0, 10, (2, 123)),
        time=torch.arange(10),
    )

    # Ensure that nodes exist at the time of the `edge_label_time`:
    edge_label_time = torch.max(
        data.time[data.edge_index[0]],
        data.time[data.edge_index[1]],
    )

    loader = LinkNeighborLoader(
        data,
        num_neighbors=[-1],
        time_attr='time',
        edge_label=torch.ones(data.num_edges),
        edge_label_time=edge_label_time,
        batch_size=batch_size,
        shuffle=True,
    )

    for batch in loader:
        assert batch.edge_label_index.size() == (2, batch_size)
        assert batch.edge_label_time.size() == (batch_size, )
        assert batch.edge_label.size() == (batch_size, )
        assert torch.all(batch.time <= batch.edge_label_time)


@pytest.mark.parametrize("strategy, window", [("uniform", 0), ("last", 0), ("uniform", 30)])
def test_every_edge_of_every_tree_is_before_its_seeds_time_with_the_strict_cut(strategy, window):
    g = torch.Generator().manual_seed(0)
    data = Data(edge_index=torch.randint(0, 50, (2, 800), generator=g), num_nodes=50)
    data.edge_time = torch.randint(0, 100, (800,), generator=g)
    seeds_time = torch.randint(0, 120, (50,), generator=g)
    loader = NeighborLoader(data, num_neighbors=[3, 2], input_time=seeds_time, time_attr="edge_time", batch_size=8,
                            temporal_strategy=strategy, time_window=window, time_cut="<", seed=1)
    seen = 0
    for batch in loader:
        tree_time = seeds_time[batch.input_id][batch.batch]  # each node's tree's seed time
        dst_time = tree_time[batch.edge_index[1]]
        assert bool((batch.edge_time < dst_time).all())
        assert bool((batch.batch[batch.edge_index[0]] == batch.batch[batch.edge_index[1]]).all())  # one tree
        if window:
            assert bool((batch.edge_time >= dst_time - window).all())
        seen += batch.num_edges
    assert seen > 0
    link = LinkNeighborLoader(data, num_neighbors=[2], edge_label_time=data.edge_time, time_attr="edge_time",
                              neg_sampling_ratio=1.0, batch_size=16, time_cut="<", seed=1)
    for batch in link:
        t = batch.edge_label_time[batch.batch]
        assert bool((batch.edge_time < t[batch.edge_index[1]]).all())


def test_temporal_options_are_one_line_where_not_honoured():
    data = HeteroData()
    data["v"].x = torch.ones(3, 1)
    data["v"].time = torch.arange(3)
    data["v", "v"].edge_index = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(SamplerError, match="do not support time_attr on HeteroData yet"):
        NeighborLoader(data, num_neighbors=[1], input_nodes="v", time_attr="time", batch_size=1)
    d = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), edge_time=torch.tensor([1, 2]), num_nodes=3)
    with pytest.raises(SamplerError, match="expected temporal_strategy among uniform, last"):
        NeighborLoader(d, num_neighbors=[1], time_attr="edge_time", temporal_strategy="newest", input_time=
                       torch.zeros(3, dtype=torch.long), batch_size=1)
    with pytest.raises(SamplerError, match="time_attr='when' names no attribute"):
        NeighborLoader(d, num_neighbors=[1], time_attr="when", batch_size=1)
    with pytest.raises(SamplerError, match="time_window=5 needs time_attr"):
        NeighborLoader(d, num_neighbors=[1], time_window=5, batch_size=1)
