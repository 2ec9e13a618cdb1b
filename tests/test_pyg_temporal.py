"""gnnscale.pyg's loaders with time (issue 57): the time rule checked edge by edge, and the options
refused in one line. PyG's own temporal loader tests (test_edge_level_temporal_homo_neighbor_loader,
test_temporal_homo_link_neighbor_loader, the temporal triplets, the typed ones) run unmodified on these
loaders in tests/test_pyg_upstream.py (tests/pyg_upstream/, PyG's files at a pinned commit); typed
graphs with time: tests/test_pyg_temporal_hetero.py."""
from __future__ import annotations

import pytest
import torch
from torch_geometric.data import Data

from gnnscale.errors import SamplerError
from gnnscale.pyg import LinkNeighborLoader, NeighborLoader


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
    from gnnscale.pyg.memory_stores import memory_stores

    d = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), time=torch.arange(3), num_nodes=3)
    with pytest.raises(SamplerError, match=r"time_attr with a \(FeatureStore, GraphStore\) of untyped edges is not"):
        NeighborLoader(memory_stores(d), num_neighbors=[1], time_attr="time", batch_size=1)
    d = Data(edge_index=torch.tensor([[0, 1], [1, 2]]), edge_time=torch.tensor([1, 2]), num_nodes=3)
    with pytest.raises(SamplerError, match="expected temporal_strategy among uniform, last"):
        NeighborLoader(d, num_neighbors=[1], time_attr="edge_time", temporal_strategy="newest", input_time=
                       torch.zeros(3, dtype=torch.long), batch_size=1)
    with pytest.raises(SamplerError, match="time_attr='when' names no attribute"):
        NeighborLoader(d, num_neighbors=[1], time_attr="when", batch_size=1)
    with pytest.raises(SamplerError, match="time_window=5 needs time_attr"):
        NeighborLoader(d, num_neighbors=[1], time_window=5, batch_size=1)
