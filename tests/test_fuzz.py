"""Fuzzed inputs (issue 15): property-based malformed datasets (``npz:`` in three layouts,
``dir:``) and partition folders. Every case must end with exit code 2 and one line naming the
file and what is wrong: never a traceback, a hang, or training on wrong data.

The CLI runs in this process (``gnnscale.cli.main``): a malformed folder is refused by the
launcher before any worker starts, so a case that slipped through would start training and
fail the test by returning 0.
"""
from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gnnscale.cli import main

N, F, C = 40, 5, 3
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _graph(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, N, 160)
    dst = rng.integers(0, N, 160)
    keep = src != dst
    return dict(x=rng.normal(size=(N, F)).astype(np.float32), y=rng.integers(0, C, N).astype(np.int64),
                edges=np.stack([src[keep], dst[keep]], 1).astype(np.int64),
                train=np.arange(N) < 20, val=(np.arange(N) >= 20) & (np.arange(N) < 30), test=np.arange(N) >= 30)


def _csr(edges: np.ndarray) -> tuple:
    import scipy.sparse as sp

    m = sp.csr_matrix((np.ones(len(edges), np.float32), (edges[:, 0], edges[:, 1])), shape=(N, N))
    return m.data, m.indices.astype(np.int64), m.indptr.astype(np.int64), np.array([N, N], np.int64)


def _layouts() -> dict[str, dict]:
    g = _graph()
    d, i, p, shp = _csr(g["edges"])
    return {
        "hetero": dict(node_features=g["x"], node_labels=g["y"], edges=g["edges"], train_masks=g["train"][None],
                       val_masks=g["val"][None], test_masks=g["test"][None]),
        "bench": dict(adj_data=d, adj_indices=i, adj_indptr=p, adj_shape=shp, attr_matrix=g["x"], labels=g["y"]),
        "sparsegraph": {"adj_matrix.data": d, "adj_matrix.indices": i, "adj_matrix.indptr": p, "adj_matrix.shape": shp,
                        "attr_matrix": g["x"], "labels": g["y"]},
        "dir": {"edge_index.npy": g["edges"].T.copy(), "x.npy": g["x"], "y.npy": g["y"],
                "split.npz": None},  # split.npz written from the masks
    }


# Which keys of each layout hold what (for the mutations that need a kind of array).
FEATURES = {"hetero": "node_features", "bench": "attr_matrix", "sparsegraph": "attr_matrix", "dir": "x.npy"}
LABELS = {"hetero": "node_labels", "bench": "labels", "sparsegraph": "labels", "dir": "y.npy"}
EDGES = {"hetero": "edges", "bench": "adj_indices", "sparsegraph": "adj_matrix.indices", "dir": "edge_index.npy"}
REQUIRED = {"hetero": ["node_features", "node_labels", "edges", "train_masks"],
            "bench": ["adj_data", "adj_indptr", "attr_matrix", "labels"],
            "sparsegraph": ["adj_matrix.indptr", "adj_matrix.shape", "attr_matrix", "labels"],
            "dir": ["edge_index.npy", "x.npy", "y.npy"]}


def _write(layout: str, arrays: dict, where: Path) -> str:
    """Write a dataset; its ``--dataset`` name."""
    if layout == "dir":
        where.mkdir()
        g = _graph()
        for name, arr in arrays.items():
            if name == "split.npz":
                np.savez(where / name, train_mask=g["train"], val_mask=g["val"], test_mask=g["test"])
            elif arr is not None:
                np.save(where / name, arr)
        return f"dir:{where}"
    path = where.with_suffix(".npz")
    np.savez(path, **arrays)
    return f"npz:{path}"


def _run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


def _assert_one_line_error(code: int, err: str, command: str, names: list[str]) -> None:
    assert code == 2, (code, err[-2000:])
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.strip().splitlines() if line.startswith(f"gnnscale {command}: error:")]
    assert len(lines) == 1, err[-2000:]
    assert any(n in lines[0] for n in names), (names, lines[0])


MUTATIONS = ["drop", "truncate_rows", "nan", "inf", "edge_out_of_range", "negative_edge", "label_out_of_range",
             "string_dtype", "empty", "truncate_file", "extra_dim"]


def _mutate(layout: str, arrays: dict, kind: str, rng: np.random.Generator) -> tuple[dict, bool]:
    """A malformed copy of ``arrays``; also whether to truncate the written file itself."""
    a = {k: (None if v is None else np.array(v, copy=True)) for k, v in arrays.items()}
    feat, lab, edge = FEATURES[layout], LABELS[layout], EDGES[layout]
    if kind == "drop":
        a.pop(REQUIRED[layout][int(rng.integers(len(REQUIRED[layout])))])
    elif kind == "truncate_rows":
        key = [feat, lab][int(rng.integers(2))]
        a[key] = a[key][: int(rng.integers(1, N - 1))]
    elif kind in ("nan", "inf"):
        a[feat][int(rng.integers(N)), int(rng.integers(F))] = np.nan if kind == "nan" else -np.inf
    elif kind in ("edge_out_of_range", "negative_edge"):
        flat = a[edge].reshape(-1)
        flat[int(rng.integers(flat.size))] = N + int(rng.integers(1, 10**6)) if kind == "edge_out_of_range" \
            else -int(rng.integers(1, 10**6))
    elif kind == "label_out_of_range":
        a[lab][int(rng.integers(20))] = N + int(rng.integers(1, 10**9))  # a training node
    elif kind == "string_dtype":
        key = [feat, edge][int(rng.integers(2))]
        a[key] = a[key].astype("U8")
    elif kind == "empty":
        for k, v in a.items():
            if v is not None and k in (feat, lab):
                a[k] = v[:0]
    elif kind == "extra_dim":
        a[feat] = a[feat][:, :, None]
    return a, kind == "truncate_file"


@settings(max_examples=170, **SETTINGS)
@given(layout=st.sampled_from(["hetero", "bench", "sparsegraph", "dir"]), kind=st.sampled_from(MUTATIONS),
       seed=st.integers(0, 2**31 - 1))
def test_malformed_datasets_end_in_one_clean_line(tmp_path_factory, layout, kind, seed):
    rng = np.random.default_rng(seed)
    arrays, cut = _mutate(layout, _layouts()[layout], kind, rng)
    base = tmp_path_factory.mktemp("ds")
    name = _write(layout, arrays, base / "g")
    target = Path(name.split(":", 1)[1])
    if cut:
        victim = target if target.is_file() else target / ["x.npy", "edge_index.npy", "y.npy"][int(rng.integers(3))]
        blob = victim.read_bytes()
        victim.write_bytes(blob[: int(rng.integers(0, len(blob) - 1))])
    code, err = _run("partition", "--dataset", name, "--parts", "2", "--out", str(base / "out"))
    _assert_one_line_error(code, err, "partition", [str(target)])


def test_sparsegraph_npz_layout_loads(tmp_path):
    from gnnscale.datasets import load_dataset

    for layout in ("sparsegraph", "bench"):
        name = _write(layout, _layouts()[layout], tmp_path / layout)
        data = load_dataset(name)
        assert data.num_nodes == N and data.x.shape == (N, F) and data.num_classes == C


# -- partition folders -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def good_folder(tmp_path_factory) -> Path:
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    base = tmp_path_factory.mktemp("good")
    name = _write("dir", _layouts()["dir"], base / "g")
    out = base / "parts"
    partition_graph(load_dataset(name), 2, out, method="random", dataset="fuzz")
    return out


PART_MUTATIONS = ["truncate", "wrong_dtype", "meta_drop", "meta_edit", "ids_out_of_range", "nan", "inf",
                  "label_out_of_range", "mask_length", "indptr_broken", "orig_out_of_range", "meta_garbage"]
META_EDITS = {"num_nodes": lambda m: m["num_nodes"] + 1, "num_parts": lambda m: m["num_parts"] + 1,
              "feature_dim": lambda m: m["feature_dim"] + 2, "format_version": lambda m: 99,
              "offsets": lambda m: [0, m["num_nodes"], m["offsets"][1]], "num_classes": lambda m: "three",
              "files": lambda m: {}}


def _rehash(folder: Path, rel: str) -> None:
    from gnnscale.partitioning.manifest import sha256_file

    meta = json.loads((folder / "meta.json").read_text())
    meta["files"][rel] = sha256_file(folder / rel)
    (folder / "meta.json").write_text(json.dumps(meta))


@settings(max_examples=170, **SETTINGS)
@given(kind=st.sampled_from(PART_MUTATIONS), part=st.integers(0, 1), rehash=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_malformed_partition_folders_end_in_one_clean_line(good_folder, tmp_path_factory, kind, part, rehash, seed):
    rng = np.random.default_rng(seed)
    folder = tmp_path_factory.mktemp("pf") / "parts"
    shutil.copytree(good_folder, folder)
    meta = json.loads((folder / "meta.json").read_text())
    pdir = folder / f"part{part}"
    touched = None
    if kind == "meta_drop":
        meta.pop(["num_parts", "num_nodes", "offsets", "feature_dim", "files", "format_version"][int(rng.integers(6))])
        (folder / "meta.json").write_text(json.dumps(meta))
    elif kind == "meta_edit":
        key = list(META_EDITS)[int(rng.integers(len(META_EDITS)))]
        meta[key] = META_EDITS[key](meta)
        (folder / "meta.json").write_text(json.dumps(meta))
    elif kind == "meta_garbage":
        blob = (folder / "meta.json").read_bytes()
        (folder / "meta.json").write_bytes(blob[: int(rng.integers(0, len(blob) - 1))])
    else:
        fname = {"truncate": ["indptr.npy", "indices.npy", "x.npy", "y.npy", "train_mask.npy", "orig_ids.npy"],
                 "wrong_dtype": ["indptr.npy", "indices.npy", "x.npy", "y.npy", "val_mask.npy"],
                 "ids_out_of_range": ["indices.npy"], "nan": ["x.npy"], "inf": ["x.npy"], "label_out_of_range": ["y.npy"],
                 "mask_length": ["train_mask.npy", "val_mask.npy", "test_mask.npy"], "indptr_broken": ["indptr.npy"],
                 "orig_out_of_range": ["orig_ids.npy"]}[kind]
        fname = fname[int(rng.integers(len(fname)))]
        path = pdir / fname
        arr = np.load(path)
        if kind == "truncate":
            blob = path.read_bytes()
            path.write_bytes(blob[: int(rng.integers(0, len(blob) - 1))])
        else:
            if kind == "wrong_dtype":
                arr = arr.astype({np.dtype(np.int64): np.int32, np.dtype(np.float32): np.float64,
                                  np.dtype(np.bool_): np.int64}[arr.dtype])
            elif kind == "ids_out_of_range":
                arr[int(rng.integers(arr.size))] = [meta["num_nodes"] + int(rng.integers(0, 10**6)), -1][int(rng.integers(2))]
            elif kind in ("nan", "inf"):
                arr[int(rng.integers(arr.shape[0])), int(rng.integers(arr.shape[1]))] = np.nan if kind == "nan" else np.inf
            elif kind == "label_out_of_range":
                train = np.load(pdir / "train_mask.npy") | np.load(pdir / "test_mask.npy")
                arr[int(np.flatnonzero(train)[int(rng.integers(int(train.sum())))])] = meta["num_classes"] + int(rng.integers(0, 99))
            elif kind == "mask_length":
                arr = np.concatenate([arr, arr[:1 + int(rng.integers(3))]]) if rng.integers(2) else arr[:-1]
            elif kind == "indptr_broken":
                arr[int(rng.integers(1, arr.size))] += [-10**6, 10**6][int(rng.integers(2))]
            elif kind == "orig_out_of_range":
                arr[int(rng.integers(arr.size))] = -1 - int(rng.integers(0, 10))
            np.save(path, arr)
        touched = f"part{part}/{fname}"
        if rehash:  # as if the writer itself had written wrong data: the content checks must catch it
            _rehash(folder, touched)
    code, err = _run("train", "--parts-dir", str(folder), "--epochs", "1", "--fanouts", "2", "--timeout", "20")
    # A file mutation is named by its file (or by meta.json's sha256 of it); a meta.json edit by
    # meta.json or by the part file that no longer fits it.
    names = [str(folder / "meta.json"), str(folder / touched)] if touched else [str(folder)]
    _assert_one_line_error(code, err, "train", names)


def test_a_good_folder_still_trains(good_folder, tmp_path):
    code, err = _run("train", "--parts-dir", str(good_folder), "--epochs", "1", "--fanouts", "2", "--timeout", "60",
                     "--metrics", str(tmp_path / "m.json"))
    assert code == 0, err[-3000:]
