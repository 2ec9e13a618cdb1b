"""The typed feature store's cache (issue 44): ids of a type without features have no rows, so
``fill_cache`` must not list them as cached (the metrics and checkpoints read ``cache.ids``)."""
from __future__ import annotations

import numpy as np
import torch

from gnnscale.data.typed_store import TypedFeatureStore
from gnnscale.partitioning import load_part, partition_graph
from gnnscale.process.comm import Communicator

from test_typed_partitions import make_typed


def test_fill_cache_lists_only_rows_of_featured_types(tmp_path):
    data = make_typed()  # author (3 features), field (none), paper (6)
    partition_graph(data, 1, tmp_path / "p")
    part = load_part(str(tmp_path / "p"), 0)
    store = TypedFeatureStore(part, Communicator(0, 1))
    book = part.typed.book
    assert sorted(store.stores) == [0, 2]  # field has no store
    field = torch.nonzero(book.ntype(torch.arange(part.num_owned)) == 1).flatten()
    others = torch.nonzero(book.ntype(torch.arange(part.num_owned)) != 1).flatten()
    ids = torch.cat([field[:5], others[:7], field[5:8], others[7:9]])
    store.fill_cache(ids)
    want = ids[book.ntype(ids) != 1]
    assert want.numel() == 9
    assert torch.equal(store.cache.ids, want) and store.cache.num_rows == 9
    cached = sum(s.cache.num_rows for s in store.stores.values())
    assert cached == 9  # each featured type's store holds its own rows
    # the rows are the ones fetched
    x = store.fetch(want)
    t, tid = book.map_to_per_ntype(want)
    for ty, rows in x.rows.items():
        assert torch.equal(rows, torch.as_tensor(np.asarray(part.typed.x_by_type[ty]))[tid[t == ty]])
