"""The one row reader (gnnscale.data.rows): own part, cache, host's parts, owners, each answering
what it can and passing the rest on; rows counted by source; a reader over another communicator
reads through the first one's cache, filled after it was made."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from gnnscale.data.feature_cache import FeatureCache
from gnnscale.data.rows import RowReader
from gnnscale.errors import GnnscaleError
from gnnscale.partitioning.book import PartitionBook


class NoComm:
    """Rank 0 of 3; any exchange is an error (every row must come from a source on this rank)."""

    rank, world_size = 0, 3

    def exchange_flat(self, *a, **k):
        raise AssertionError("this reader must not ask the owners")


def test_sources_answer_in_order_and_count_by_source():
    book = PartitionBook([0, 4, 8, 12])  # parts of 4 rows each
    x = torch.arange(12 * 3, dtype=torch.float32).reshape(12, 3)
    reader = RowReader(x[:4].numpy(), book, NoComm(), (3,), torch.float32, "feature", file_dtype=np.dtype(np.float32),
                       owners=False)
    reader.read_host_parts({1: x[4:8].numpy()}, complete=False)  # part 2: only in the cache
    reader.hold(FeatureCache(torch.tensor([9, 10, 5]), x[[9, 10, 5]]))
    ids = torch.tensor([9, 0, 5, 6, 3, 10, 6])
    assert torch.equal(reader.read(ids), x[ids])
    # 5 is both host-read and cached: the cache answers first
    assert reader.stats == {"local_rows": 2, "cache_hits": 3, "host_rows": 2, "remote_rows": 0}
    assert reader.bytes_by_source() == {"local_rows": 24, "cache_hits": 36, "host_rows": 24, "remote_rows": 0}
    with pytest.raises(GnnscaleError, match=r"ids \[11\] are neither owned nor read on this host"):
        reader.read(torch.tensor([11, 0]))


def test_a_reader_over_another_comm_reads_through_the_same_cache():
    book = PartitionBook([0, 4, 8, 12])
    y = torch.arange(12) * 10  # one value per node (labels, degrees, keys)
    train = RowReader(y[:4], book, NoComm(), (), torch.int64, "label", owners=True)
    refresh = train.over(NoComm(), complete=True)  # made before the cache is filled
    with pytest.raises(GnnscaleError, match=r"ids \[7\] are neither owned nor held"):
        refresh.read(torch.tensor([7]))
    train.hold(FeatureCache(torch.arange(4, 12), y[4:].unsqueeze(1)[:, 0]))
    ids = torch.tensor([7, 1, 11])
    assert torch.equal(refresh.read(ids), y[ids])  # no exchange: complete, every row held
    assert refresh.stats["cache_hits"] == 2 and train.stats["cache_hits"] == 0
