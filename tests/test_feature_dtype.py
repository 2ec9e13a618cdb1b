"""Feature rows stored at lower precision (issue 47 item 4): the values round-trip as float16 /
bfloat16 of the float32 rows, meta.json and `gnnscale info` say the dtype, old folders read as
float32, the bytes fetched are exactly half, and accuracy stays within half a point."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from gnnscale.errors import PartitionError
from gnnscale.partitioning import assign_parts, load_part, partition_graph, summarize
from gnnscale.partitioning.feature_dtype import encode_rows, row_bytes
from gnnscale.partitioning.format import write_partitions
from gnnscale.partitioning.validate import check_folder

LOW = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.fixture(scope="module")
def cora_real(shared_data):
    """Cora with row-normalized (real-valued) features, which float16 and bfloat16 round."""
    from gnnscale.datasets import load_dataset

    return load_dataset("planetoid:cora?normalize=row", root=str(shared_data / "planetoid"))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_rows_round_trip_as_the_lower_precision_of_the_float32_rows(cora_real, tmp_path, dtype):
    meta = partition_graph(cora_real, 2, tmp_path / dtype, feature_dtype=dtype)
    assert meta["feature_dtype"] == dtype and json.loads((tmp_path / dtype / "meta.json").read_text())["feature_dtype"] == dtype
    check_folder(tmp_path / dtype)  # dtypes, shapes and finite values of the stored rows
    rounded = 0
    for p in range(2):
        part = load_part(tmp_path / dtype, p)
        want = cora_real.x[part.orig_ids].to(LOW[dtype])
        stored = part.stored_rows()
        assert stored.dtype == LOW[dtype] and torch.equal(stored.view(torch.int16), want.view(torch.int16))
        rows = part.feature_rows()
        assert rows.dtype == torch.float32 and torch.equal(rows, want.to(torch.float32))
        idx = torch.tensor([0, 5, 3])
        assert torch.equal(part.features(idx), want[idx].to(torch.float32))
        rounded += int((rows != cora_real.x[part.orig_ids]).sum())
        assert (tmp_path / dtype / f"part{p}" / "x.npy").stat().st_size == 128 + part.num_owned * 1433 * 2
    assert rounded > 0  # the normalized values are not all exact at 16 bits
    assert summarize(tmp_path / dtype)["feature_dtype"] == dtype


def test_old_folders_without_the_key_read_as_float32(cora_real, tmp_path):
    partition_graph(cora_real, 2, tmp_path)
    meta = json.loads((tmp_path / "meta.json").read_text())
    del meta["feature_dtype"]  # as written before the key existed
    (tmp_path / "meta.json").write_text(json.dumps(meta))
    part = load_part(tmp_path, 0)
    assert part.feature_dtype == "float32" and summarize(tmp_path)["feature_dtype"] == "float32"
    assert torch.equal(part.feature_rows(), cora_real.x[part.orig_ids])


def test_refusals_are_one_line(cora_real, tmp_path):
    with pytest.raises(PartitionError, match=r"expected --feature-dtype from \['float32', 'float16', 'bfloat16'\]"):
        partition_graph(cora_real, 2, tmp_path / "a", feature_dtype="int8")
    with pytest.raises(PartitionError, match="within float16's range"):
        encode_rows(torch.tensor([[1.0, 1e6]]), "float16")
    assert encode_rows(torch.tensor([[1.0, 1e6]]), "bfloat16").dtype == np.uint16  # bfloat16 has float32's range
    assert row_bytes("float16", 100) == 200 and row_bytes("float32", 100) == 400


def _train(folder, seed=0, epochs=20):
    import gnnscale

    return gnnscale.train(parts_dir=str(folder), workers=2, seed=seed, epochs=epochs, fanouts=(10, 10), batch_size=64,
                          hidden=64, lr=0.01, host_features=False, host_graph=False, threads=1)


@pytest.mark.slow
def test_bytes_fetched_halved_exactly_and_accuracy_within_half_a_point(cora_real, tmp_path):
    """The same cut stored at 32 and 16 bits: the same rows are fetched, in half the bytes; the
    run's test accuracy (at the best validation epoch) moves by at most half a point."""
    parts = assign_parts(cora_real, 2)
    res = {}
    for dtype in ("float32", "float16"):
        write_partitions(cora_real, parts, tmp_path / dtype, method="metis", dataset="cora", feature_dtype=dtype)
        res[dtype] = _train(tmp_path / dtype)
    for e32, e16 in zip(res["float32"]["epochs"], res["float16"]["epochs"]):
        f32 = e32["bytes_received_by_category"]["feature"]
        assert f32 > 0 and e16["bytes_received_by_category"]["feature"] * 2 == f32
        assert e16["feature_rows_remote_fetched"] == e32["feature_rows_remote_fetched"]
        assert e16["feature_bytes_fetched"] * 2 == e32["feature_bytes_fetched"]
    assert abs(res["float16"]["test_acc_at_best_val"] - res["float32"]["test_acc_at_best_val"]) <= 0.005
