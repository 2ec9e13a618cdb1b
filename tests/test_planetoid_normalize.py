"""``planetoid:<name>?normalize=row`` (issue 44, item 11): the GCN / GCNII reference code's
feature preprocessing (each row divided by its sum), a dataset option, so every mode trains on
the partition's normalised rows."""
from __future__ import annotations

import pytest
import torch

from gnnscale.datasets import load_dataset
from gnnscale.errors import DatasetError


def test_row_normalised_features(shared_data):
    root = str(shared_data / "planetoid")
    raw = load_dataset("planetoid:citeseer", root=root)
    row = load_dataset("planetoid:citeseer?normalize=row", root=root)
    sums = raw.x.sum(1, keepdim=True)
    assert int((sums == 0).sum()) == 15  # CiteSeer's test-range gaps: zero rows stay zero
    assert torch.equal(row.x, torch.where(sums > 0, raw.x / sums.clamp(min=1e-30), torch.zeros_like(raw.x)))
    assert torch.allclose(row.x.sum(1)[sums[:, 0] > 0], torch.ones(int((sums > 0).sum())))
    assert row.name == "planetoid:citeseer?normalize=row" and raw.name == "planetoid:citeseer"
    assert torch.equal(row.edge_index, raw.edge_index) and torch.equal(row.y, raw.y)
    assert torch.equal(load_dataset("planetoid:citeseer", root=root, normalize="none").x, raw.x)


def test_unknown_normalization_is_one_line(shared_data):
    with pytest.raises(DatasetError) as err:
        load_dataset("planetoid:cora?normalize=col", root=str(shared_data / "planetoid"))
    assert str(err.value) == ("expected normalize to be one of none, row for planetoid:cora, found 'col'; use e.g. "
                              "planetoid:cora?normalize=row")
