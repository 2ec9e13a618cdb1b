"""Targets and edge features (docs/targets_and_edge_features.md sections 1-2): gnnscale.datasets.targets,
HumLoc, ogbn-proteins (offline fixture), dir: multi-hot / float y and edge_attr.npy, binary .npz files."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from gnnscale.datasets import DATASET_HELP, load_dataset
from gnnscale.datasets.targets import check_targets, dedupe_edges, num_outputs, target_kind
from gnnscale.errors import DatasetError
from ogb_fixture import PROTEIN_SPECIES, write_tiny_ogbn_proteins


def one_line_error(name: str, **kwargs) -> str:
    """The DatasetError message of ``load_dataset(name)``, checked to be one line."""
    with pytest.raises(DatasetError) as info:
        load_dataset(name, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- HumLoc (real data)


@pytest.fixture(scope="module")
def humloc_dir(shared_data: Path) -> Path:
    path = shared_data / "humloc"
    if not (path / "edge_list.csv").is_file():
        pytest.skip(f"{path}/edge_list.csv not found")
    return path


@pytest.fixture(scope="module")
def humloc(humloc_dir: Path):
    return load_dataset(f"humloc:{humloc_dir}")


def test_humloc_statistics(humloc, humloc_dir: Path) -> None:
    """The README's statistics: 3,106 nodes, 18,496 stored edges (no duplicates to drop), 530 self
    loops, 21 edge features (each row nonzero), 14 labels, 1.185 per node, split 1675/187/1244."""
    data = humloc
    n = 3106
    assert data.num_nodes == n and data.name == f"humloc:{humloc_dir}"
    assert data.x.dtype == torch.float32 and data.x.shape == (n, 32)
    assert data.y.dtype == torch.float32 and data.y.shape == (n, 14)
    assert data.target_kind == "multilabel" and data.num_classes == 14
    assert target_kind(data) == "multilabel" and num_outputs(data) == 14
    assert set(data.y.unique().tolist()) == {0.0, 1.0} and bool((data.y.sum(1) >= 1).all())
    assert data.y.sum(0).long().tolist() == [77, 817, 79, 24, 229, 385, 161, 77, 24, 364, 1021, 47, 354, 22]
    assert abs(float(data.y.sum()) / n - 1.185) < 5e-4

    ei = data.edge_index
    assert ei.dtype == torch.int64 and ei.shape == (2, 18496)
    assert int((ei[0] == ei[1]).sum()) == 530
    keys = ei[0] * n + ei[1]
    assert torch.unique(keys).numel() == 18496
    assert int(torch.isin(ei[1] * n + ei[0], keys).sum()) == 4506  # stored with their reverse (README)
    assert int(torch.bincount(ei.reshape(-1), minlength=n).eq(0).sum()) == 517  # nodes without any edge
    assert ei[:, :2].tolist() == [[2746, 105], [2223, 3103]]  # file order: the first rows of edge_list.csv

    assert data.edge_attr.dtype == torch.float32 and data.edge_attr.shape == (18496, 21)
    assert bool((data.edge_attr != 0).any(1).all())
    assert 0.0 <= float(data.edge_attr.min()) and float(data.edge_attr.max()) <= 0.99 + 1e-6
    assert data.edge_attr[0, :3].tolist() == pytest.approx([0.57, 0.57, 0.57])

    split = torch.load(humloc_dir / "split.pt", weights_only=True)
    for mask, key, size in ((data.train_mask, "train_mask", 1675), (data.val_mask, "val_mask", 187),
                            (data.test_mask, "test_mask", 1244)):
        assert mask.dtype == torch.bool and int(mask.sum()) == size
        assert torch.equal(torch.nonzero(mask).reshape(-1), torch.sort(split[key]).values)
    assert check_targets(data, "humloc") == "multilabel"


def test_humloc_plain_name_and_help(humloc_dir: Path, humloc) -> None:
    plain = load_dataset("humloc", root=str(humloc_dir.parent))
    assert plain.name == "humloc" and torch.equal(plain.edge_index, humloc.edge_index)
    assert "humloc:PATH" in DATASET_HELP
    assert "humloc:PATH" in one_line_error("hum:x")  # listed among the valid names
    assert "edge_list.csv" in one_line_error(f"humloc:{humloc_dir / 'missing'}")


def test_humloc_missing_file(humloc_dir: Path, tmp_path: Path) -> None:
    folder = tmp_path / "h"
    folder.mkdir()
    for f in ("edge_list.csv", "features.csv", "labels.csv"):
        (folder / f).symlink_to(humloc_dir / f)
    message = one_line_error(f"humloc:{folder}")
    assert message.startswith(f"expected the file split.pt in {folder}, found no such file")


# --------------------------------------------------------------------------- target_kind of sources


def _write_heterophilous_npz(path: Path, labels: np.ndarray) -> None:
    """A tiny file in the heterophilous-graphs layout (Platonov et al.: tolokers.npz ...)."""
    n = labels.shape[0]
    rng = np.random.default_rng(0)
    edges = np.stack([np.arange(n - 1), np.arange(1, n)], axis=1)
    masks = np.zeros((2, n), dtype=bool)
    train, val, test = masks.copy(), masks.copy(), masks.copy()
    train[:, : n // 2] = True
    val[:, n // 2 : 3 * n // 4] = True
    test[:, 3 * n // 4 :] = True
    np.savez(path, node_features=rng.standard_normal((n, 3)).astype(np.float32), node_labels=labels,
             edges=edges, train_masks=train, val_masks=val, test_masks=test)


def test_target_kind_of_sources(cora, humloc, tmp_path: Path) -> None:
    assert target_kind(cora) == "class" and num_outputs(cora) == 7 and check_targets(cora, "cora") == "class"
    assert target_kind(humloc) == "multilabel"

    n = 20
    reg = Data(x=torch.zeros(n, 2), y=torch.randn(n), edge_index=torch.zeros(2, 0, dtype=torch.long), num_nodes=n)
    assert target_kind(reg) == "regression" and num_outputs(reg) == 1
    reg.y = torch.randn(n, 3)
    assert target_kind(reg) == "regression" and num_outputs(reg) == 3
    reg.y = torch.randint(0, 2, (n, 5)).float()  # 0/1 float [N, C]: multi-hot
    assert target_kind(reg) == "multilabel" and num_outputs(reg) == 5
    reg.y[3, 1] = 0.5
    reg.train_mask = torch.zeros(n, dtype=torch.bool)
    reg.train_mask[5:] = True  # row 3 is unlabelled: only labelled rows count
    assert target_kind(reg) == "multilabel"
    reg.train_mask[3] = True
    assert target_kind(reg) == "regression"

    labels = np.random.default_rng(1).integers(0, 2, 40)
    _write_heterophilous_npz(tmp_path / "tolokers.npz", labels)
    tol = load_dataset(f"npz:{tmp_path / 'tolokers.npz'}")
    assert tol.target_kind == "binary" and target_kind(tol) == "binary"
    assert tol.y.dtype == torch.int64 and tol.num_classes == 2 and num_outputs(tol) == 1
    assert tol.edge_index.shape[1] == 2 * 39  # symmetrized like any heterophilous file
    _write_heterophilous_npz(tmp_path / "Minesweeper.npz", labels)
    assert load_dataset(f"npz:{tmp_path / 'Minesweeper.npz'}").target_kind == "binary"
    _write_heterophilous_npz(tmp_path / "renamed.npz", labels)
    other = load_dataset(f"npz:{tmp_path / 'renamed.npz'}")
    assert target_kind(other) == "class" and other.num_classes == 2 and num_outputs(other) == 2
    assert load_dataset(f"npz:{tmp_path / 'renamed.npz'}?target=binary").target_kind == "binary"
    assert target_kind(load_dataset(f"npz:{tmp_path / 'tolokers.npz'}", target="class")) == "class"
    _write_heterophilous_npz(tmp_path / "questions.npz", np.arange(40) % 3)
    assert one_line_error(f"npz:{tmp_path / 'questions.npz'}").startswith(
        f"expected binary targets 0/1 on labelled rows in {tmp_path / 'questions.npz'}, found ")


# --------------------------------------------------------------------------- ogbn-proteins (fixture)


def test_ogbn_proteins_fixture_loads_offline(tmp_path: Path, monkeypatch) -> None:
    import builtins
    import gzip

    monkeypatch.setattr(builtins, "input", lambda *a: pytest.fail(f"ogb prompted: {a}"))
    folder = Path(write_tiny_ogbn_proteins(tmp_path, num_nodes=300, duplicate_pairs=3, seed=0))
    assert folder == tmp_path / "ogbn_proteins"
    with gzip.open(folder / "raw" / "edge.csv.gz", "rt") as f:
        stored = np.array([[int(v) for v in line.split(",")] for line in f])
    with gzip.open(folder / "raw" / "node_species.csv.gz", "rt") as f:
        species = np.array([int(line) for line in f])
    for attempt in range(2):  # the second load reads ogb's processed/ cache
        data = load_dataset("ogbn-proteins", root=str(tmp_path))
        n = 300
        assert data.name == "ogbn-proteins" and data.num_nodes == n
        assert data.x.dtype == torch.float32 and data.x.shape == (n, 0)
        assert data.y.dtype == torch.float32 and data.y.shape == (n, 112)
        assert data.target_kind == "multilabel" and target_kind(data) == "multilabel"
        assert data.num_classes == 112 and num_outputs(data) == 112
        ei = data.edge_index
        # ogb stores each edge once and inserts its reverse; 3 pairs were stored in both directions: 2 x 3 dropped
        assert ei.shape == (2, 2 * stored.shape[0] - 6)
        keys = ei[0] * n + ei[1]
        assert torch.unique(keys).numel() == keys.numel()
        assert torch.equal(torch.sort(keys).values, torch.sort(ei[1] * n + ei[0]).values)  # both directions
        assert ei[:, :2].tolist() == [stored[0].tolist(), stored[0][::-1].tolist()]  # ogb's order
        assert data.edge_attr.dtype == torch.float32 and data.edge_attr.shape == (ei.shape[1], 8)
        assert torch.equal(data.edge_attr[0], data.edge_attr[1])  # an edge and its reverse share features
        assert torch.equal(data.node_species, torch.from_numpy(species))
        sizes = [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)]
        assert sizes == [int((~np.isin(species, PROTEIN_SPECIES[-2:])).sum()),
                         int((species == PROTEIN_SPECIES[-2]).sum()), int((species == PROTEIN_SPECIES[-1]).sum())]
        assert set(data.node_species[data.test_mask].tolist()) == {PROTEIN_SPECIES[-1]}
    assert (folder / "processed" / "data_processed").is_file()


def test_ogbn_proteins_missing_edge_features_named(tmp_path: Path) -> None:
    folder = Path(write_tiny_ogbn_proteins(tmp_path, num_nodes=60))
    (folder / "raw" / "edge-feat.csv.gz").unlink()
    message = one_line_error("ogbn-proteins", root=str(tmp_path))
    assert message.startswith(f"expected a complete ogbn-proteins dataset in {folder}/, found these files missing: "
                              "raw/edge-feat.csv.gz;")


# --------------------------------------------------------------------------- dir: targets and edge_attr.npy


def _write_dir(folder: Path, y: np.ndarray, edges: np.ndarray, edge_attr: np.ndarray | None = None,
               split: dict | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "x.npy", np.random.default_rng(0).standard_normal((y.shape[0], 3)).astype(np.float32))
    np.save(folder / "y.npy", y)
    np.save(folder / "edge_index.npy", edges)
    if edge_attr is not None:
        np.save(folder / "edge_attr.npy", edge_attr)
    if split is not None:
        np.savez(folder / "split.npz", **split)


EDGES = np.array([[0, 1], [1, 2], [1, 2], [3, 3], [4, 0], [9, 5], [2, 1]]).T  # a duplicate, a self loop, a reverse
SPLIT = {"train_idx": np.arange(0, 6), "val_idx": np.array([6, 7]), "test_idx": np.array([8, 9])}


def test_dir_multihot_float_targets_and_edge_attr(tmp_path: Path) -> None:
    n = 10
    rng = np.random.default_rng(2)
    multi = rng.integers(0, 2, (n, 4))
    attr = (EDGES[0] * 100 + EDGES[1]).astype(np.float32)[:, None] * np.array([1.0, -1.0], dtype=np.float32)
    _write_dir(tmp_path / "m", multi, EDGES, edge_attr=attr, split=SPLIT)
    data = load_dataset(f"dir:{tmp_path / 'm'}")
    assert data.target_kind == "multilabel" and data.y.dtype == torch.float32 and data.y.shape == (n, 4)
    assert torch.equal(data.y, torch.from_numpy(multi).float()) and data.num_classes == 4
    # the same edges as without features (directed, deduped, no self loop, sorted), each with its own row
    assert data.edge_index.tolist() == [[0, 1, 2, 4, 9], [1, 2, 1, 0, 5]]
    assert data.edge_attr.dtype == torch.float32 and data.edge_attr[:, 0].tolist() == [1, 102, 201, 400, 905]
    und = load_dataset(f"dir:{tmp_path / 'm'}?undirected=true")
    src, dst = und.edge_index
    assert und.edge_index.shape[1] == 8
    code = und.edge_attr[:, 0].long()
    assert bool(((code == src * 100 + dst) | (code == dst * 100 + src)).all())  # a reverse edge: its edge's row
    # a stored (2, 1) keeps its own row; the reverse of (1, 2) does not replace it
    assert int(code[(src == 2) & (dst == 1)]) == 201

    reg = rng.standard_normal((n, 2)).astype(np.float32)
    reg[9] = np.nan  # an unlabelled row: in no mask of the random split
    _write_dir(tmp_path / "r", reg, EDGES)
    data = load_dataset(f"dir:{tmp_path / 'r'}")
    assert data.target_kind == "regression" and num_outputs(data) == 2 and data.num_classes == 2
    assert not bool(data.train_mask[9] or data.val_mask[9] or data.test_mask[9]) and data.edge_attr is None
    one = rng.standard_normal(n).astype(np.float32)
    _write_dir(tmp_path / "r1", one, EDGES)
    data = load_dataset(f"dir:{tmp_path / 'r1'}")
    assert target_kind(data) == "regression" and data.y.shape == (n,) and num_outputs(data) == 1
    _write_dir(tmp_path / "f", multi.astype(np.float32), EDGES)
    assert load_dataset(f"dir:{tmp_path / 'f'}").target_kind == "multilabel"
    _write_dir(tmp_path / "c", np.arange(n) % 3, EDGES, edge_attr=attr)  # class ids with edge features
    data = load_dataset(f"dir:{tmp_path / 'c'}")
    assert target_kind(data) == "class" and data.num_classes == 3 and data.edge_attr.shape == (5, 2)


def test_bad_targets_and_edge_attr_one_line(tmp_path: Path) -> None:
    n = 10
    rng = np.random.default_rng(3)
    multi = rng.integers(0, 2, (n, 4))
    attr = np.ones((EDGES.shape[1], 2), dtype=np.float32)

    folder = tmp_path / "rows"
    _write_dir(folder, multi, EDGES, edge_attr=attr[:-1])
    assert one_line_error(f"dir:{folder}") == (
        f"expected edge_attr with 7 rows (one per edge of edge_index) in {folder / 'edge_attr.npy'}, found 6 rows; "
        "the edge features must list the same edges, in the same order")

    folder = tmp_path / "two"
    bad = multi.copy()
    bad[2, 1] = 2  # row 2 is in train
    _write_dir(folder, bad, EDGES, split=SPLIT)
    assert one_line_error(f"dir:{folder}") == (
        f"expected multi-hot targets of 0/1 on labelled rows in {folder}, found 1 other values (the first 2 in row 2); "
        "store 0/1 per label")

    folder = tmp_path / "nan"
    y = multi.astype(np.float32)
    y[7, 3] = np.nan  # row 7 is in val
    _write_dir(folder, y, EDGES, split=SPLIT)
    assert one_line_error(f"dir:{folder}") == (
        f"expected no NaN targets on labelled rows (rows in a mask) in {folder}, found 1 NaN values in 1 labelled "
        "rows (the first in row 7); fill them or take those nodes out of the masks")
    y = rng.standard_normal(n).astype(np.float32)
    y[0] = np.nan  # regression, row 0 in train
    _write_dir(folder, y, EDGES, split=SPLIT)
    assert "NaN values in 1 labelled rows (the first in row 0)" in one_line_error(f"dir:{folder}")

    folder = tmp_path / "flat_attr"
    _write_dir(folder, multi, EDGES, edge_attr=np.ones(EDGES.shape[1], dtype=np.float32))
    assert one_line_error(f"dir:{folder}").startswith(
        f"expected edge_attr float32 [E, De] in {folder / 'edge_attr.npy'}, found float32 (7,);")


def test_check_targets_direct() -> None:
    n = 6
    data = Data(x=torch.zeros(n, 1), y=torch.zeros(n - 1, 2), edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=n)
    with pytest.raises(DatasetError) as info:
        check_targets(data, "here")
    assert str(info.value) == ("expected targets y with 6 rows (one per node) in here, found shape (5, 2); "
                               "the targets must describe the same nodes as the features")
    data.y = torch.zeros(n, 2)
    data.edge_attr = torch.zeros(3, 4)
    with pytest.raises(DatasetError, match=r"^expected edge_attr with 2 rows \(one per edge of edge_index\) in here, "
                                           r"found 3 rows;"):
        check_targets(data, "here")
    data.edge_attr = torch.zeros(2, 4, dtype=torch.float64)
    with pytest.raises(DatasetError, match=r"^expected edge_attr float32 \[E, De\] in here, found torch.float64"):
        check_targets(data, "here")
    data.edge_attr = torch.zeros(2, 4)
    data.target_kind = "multilabel"
    data.y[4, 0] = 3.0
    data.train_mask = torch.tensor([True, True, False, False, False, False])
    assert check_targets(data, "here") == "multilabel"  # row 4 is in no mask: any values there
    data.train_mask[4] = True
    with pytest.raises(DatasetError, match=r"found 1 other values \(the first 3 in row 4\)"):
        check_targets(data, "here")
    data.target_kind = "ordinal"
    with pytest.raises(DatasetError, match="expected target_kind among class, binary, multilabel, regression"):
        check_targets(data, "here")


def test_dedupe_edges_keeps_first_and_its_features() -> None:
    src = np.array([0, 1, 0, 2, 2])
    dst = np.array([1, 2, 1, 2, 0])
    attr = np.arange(5, dtype=np.float32)[:, None]
    ei, a, counts = dedupe_edges(src, dst, 3, attr)
    assert ei.tolist() == [[0, 1, 2, 2], [1, 2, 2, 0]] and a[:, 0].tolist() == [0, 1, 3, 4]
    assert counts == {"stored": 5, "self_loops_dropped": 0, "duplicates_dropped": 1, "kept": 4}
    ei, a, counts = dedupe_edges(src, dst, 3, attr, undirected=True, drop_self_loops=True, sort=True)
    assert ei.tolist() == [[0, 0, 1, 1, 2, 2], [1, 2, 0, 2, 0, 1]]
    assert a[:, 0].tolist() == [0, 4, 0, 1, 4, 1] and counts["self_loops_dropped"] == 1
