"""The partition cache of ``--dataset`` runs serves the graph on disk now, not the one it cut once
(issue 54 item 1): its folders are keyed on the input's absolute location, and meta.json keeps the
input's identity (each file's size, modification time and digest), so a rewritten file is cut
again (after one line saying what changed), a relative ``dir:`` in another working folder is
another partition, an unchanged input stays cached, and ``gnnscale info`` shows the identity.
Tiny graphs; every partition goes to the test's own --cache-dir (never ~/.cache/gnnscale)."""
from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np

from test_cli import cli_in_process

TRAIN = ("--workers", "2", "--epochs", "1", "--fanouts", "5,5", "--hidden", "8", "--batch-size", "64")


def write_graph(folder: Path, n: int, features: int, classes: int, seed: int = 0) -> None:
    """A ``dir:`` graph: n nodes, 4n random edges, ``features`` float32 columns, ``classes`` labels."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "x.npy", rng.standard_normal((n, features)).astype(np.float32))
    np.save(folder / "y.npy", np.arange(n, dtype=np.int64) % classes)  # every class present
    np.save(folder / "edge_index.npy", rng.integers(0, n, (2, 4 * n)).astype(np.int64))


def meta_of(folder) -> dict:
    return json.loads((Path(folder) / "meta.json").read_text())


def test_a_rewritten_input_is_cut_again_and_the_new_graph_trained(tmp_path, monkeypatch):
    """The issue's case: the same command in the same folder after x.npy (16 -> 24 features) and y.npy
    (4 -> 6 classes) were rewritten trains the new graph, after one line naming the changed files;
    before the rewrite the second run is served from the cache."""
    from gnnscale.training.model_io import read_model_file

    monkeypatch.chdir(tmp_path)
    write_graph(tmp_path / "graphs" / "mine", 300, 16, 4)
    cache = tmp_path / "cache"
    train = ("train", "--dataset", "dir:graphs/mine", "--cache-dir", str(cache), *TRAIN)
    r = cli_in_process(*train)
    assert r.returncode == 0, r.stderr[-3000:]
    (folder,) = cache.iterdir()
    r = cli_in_process(*train)  # nothing changed: the cache serves it
    assert r.returncode == 0, r.stderr[-3000:]
    assert "using cached partition" in r.stderr and "re-partitioning" not in r.stderr

    write_graph(tmp_path / "graphs" / "mine", 300, 24, 6, seed=1)
    model = tmp_path / "m.pt"
    r = cli_in_process(*train, "--save-model", str(model))
    assert r.returncode == 0, r.stderr[-3000:]
    assert "using cached partition" not in r.stderr
    (line,) = [s for s in r.stderr.splitlines() if "re-partitioning" in s]  # one line says why
    assert "re-partitioning dir:graphs/mine: edge_index.npy changed (same size, other content), x.npy changed " \
           "(size 19,328 -> 28,928 bytes), y.npy changed (same size, other content) since the cached partition " \
           f"{folder} was cut" in line, line
    assert list(cache.iterdir()) == [folder]  # cut again in place
    meta = meta_of(folder)
    assert (meta["num_nodes"], meta["feature_dim"], meta["num_classes"]) == (300, 24, 6)
    identity = meta["input"]  # what the cut was read from
    assert identity["location"] == str(tmp_path / "graphs" / "mine")
    assert sorted(identity["files"]) == ["edge_index.npy", "x.npy", "y.npy"]
    assert identity["files"]["x.npy"]["size"] == 128 + 300 * 24 * 4 == 28_928  # the .npy header and the rows
    spec = read_model_file(model)["spec"]  # the trained model is the new graph's
    assert (spec["in_dim"], spec["out_dim"]) == (24, 6)


def test_one_relative_dir_in_two_working_folders_is_two_partitions(tmp_path, monkeypatch, caplog):
    """``dir:graphs/mine`` names another graph in another working folder: the 300-node graph of b/ is
    not served the 200-node cut of a/."""
    from gnnscale.data.partition_cache import prepare_parts

    caplog.set_level(logging.INFO, logger="gnnscale")
    cache = str(tmp_path / "cache")
    write_graph(tmp_path / "a" / "graphs" / "mine", 200, 8, 3)
    write_graph(tmp_path / "b" / "graphs" / "mine", 300, 8, 3)
    got = {}
    for where in ("a", "b"):
        monkeypatch.chdir(tmp_path / where)
        got[where] = prepare_parts("dir:graphs/mine", 2, cache_dir=cache)
    assert got["a"] != got["b"]
    assert [meta_of(got[w])["num_nodes"] for w in ("a", "b")] == [200, 300]
    assert meta_of(got["b"])["input"]["location"] == str(tmp_path / "b" / "graphs" / "mine")
    assert not any("using cached partition" in r.getMessage() for r in caplog.records)
    monkeypatch.chdir(tmp_path / "a")  # and each folder's own cut is still served to it
    assert prepare_parts("dir:graphs/mine", 2, cache_dir=cache) == got["a"]


def test_an_unchanged_input_stays_cached_and_a_large_file_is_judged_by_its_time(tmp_path, monkeypatch, caplog):
    """A file read whole (up to 16 MiB) is judged by its content: touched, the cut stays. A larger
    one is judged by its size, its first MiB and its modification time: touched, it is cut again,
    and the line says so."""
    from gnnscale.data.partition_cache import prepare_parts
    from gnnscale.datasets import inputs

    caplog.set_level(logging.INFO, logger="gnnscale")
    graph = tmp_path / "g"
    write_graph(graph, 200, 8, 3)
    cache = str(tmp_path / "cache")
    folder = prepare_parts(f"dir:{graph}", 2, cache_dir=cache)
    assert set(meta_of(folder)["input"]["files"]["x.npy"]) == {"size", "mtime_ns", "sha256"}
    later = os.stat(graph / "x.npy").st_mtime_ns + 5 * 10**9
    os.utime(graph / "x.npy", ns=(later, later))
    caplog.clear()
    assert prepare_parts(f"dir:{graph}", 2, cache_dir=cache) == folder
    assert [r.getMessage() for r in caplog.records] == [f"using cached partition {folder}"]

    monkeypatch.setattr(inputs, "FULL_DIGEST_BYTES", 1024)  # x.npy (6,528 bytes) now counts as large
    prepare_parts(f"dir:{graph}", 2, cache_dir=cache)  # (cut again: its record holds a whole-file digest)
    assert set(meta_of(folder)["input"]["files"]["x.npy"]) == {"size", "mtime_ns", "head_sha256"}
    caplog.clear()
    assert prepare_parts(f"dir:{graph}", 2, cache_dir=cache) == folder  # unchanged: cached
    assert [r.getMessage() for r in caplog.records] == [f"using cached partition {folder}"]
    os.utime(graph / "x.npy", ns=(later + 10**9, later + 10**9))
    caplog.clear()
    prepare_parts(f"dir:{graph}", 2, cache_dir=cache)
    (line,) = [r.getMessage() for r in caplog.records if "re-partitioning" in r.getMessage()]
    assert line.startswith(f"re-partitioning dir:{graph}: x.npy changed (modified ") and ", was " in line, line


def test_info_shows_the_input_identity(tmp_path):
    """``gnnscale info`` of a cached cut and of a ``gnnscale partition`` folder: where it was read
    from, and each file's size, time and digest (``--json``: meta.json's ``input``)."""
    from gnnscale.data.partition_cache import prepare_parts

    graph = tmp_path / "g"
    write_graph(graph, 200, 8, 3)
    made = tmp_path / "made"
    r = cli_in_process("partition", "--dataset", f"dir:{graph}", "--parts", "2", "--out", str(made))
    assert r.returncode == 0, r.stderr[-3000:]
    for folder in (prepare_parts(f"dir:{graph}", 2, cache_dir=str(tmp_path / "cache")), made):
        r = cli_in_process("info", str(folder))
        assert r.returncode == 0, r.stderr[-3000:]
        lines = r.stdout.splitlines()
        # x.npy 6,528 + y.npy 1,728 + edge_index.npy 12,928 bytes
        at = lines.index(f"  input              {graph} (3 file(s), 21,184 bytes)")
        sha = meta_of(folder)["input"]["files"]["x.npy"]["sha256"]
        assert lines[at + 2].startswith("    x.npy: 6,528 bytes, modified ") and lines[at + 2].endswith(f"sha256 {sha[:12]}")
        assert [s.split(":")[0] for s in lines[at + 1:at + 4]] == ["    edge_index.npy", "    x.npy", "    y.npy"]
        r = cli_in_process("info", str(folder), "--json")
        assert json.loads(r.stdout)["input"] == meta_of(folder)["input"]


def test_each_source_names_its_input_files(tmp_path, monkeypatch):
    """What each source that reads files contributes to the identity: its own files of a shared
    folder (Planetoid's one name, acm's split files), a typed folder's tree, an OGB dataset folder
    whole; a generated graph has none. (Empty files: nothing is parsed.)"""
    from gnnscale.datasets.inputs import input_identity

    def touch(*names):
        for name in names:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_bytes(b"")

    planetoid = [f"p/ind.cora.{f}" for f in ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")]
    touch(*planetoid, "p/ind.citeseer.x", "p/README",
          "acm/labels.npy", "acm/p_feat.npz", "acm/a_feat.npz", "acm/pa.txt", "acm/ps.txt", "acm/train_20.npy",
          "acm/val_20.npy", "acm/test_20.npy", "acm/pap.txt",
          "h/meta.json", "h/nodes/paper/x.npy", "h/edges/a__r__b/edge_index.npy", "h/notes.txt",
          "ogb/ogbn_arxiv/RELEASE_v1.txt", "ogb/ogbn_arxiv/raw/edge.csv.gz", "ogb/ogbn_arxiv/processed/data_processed",
          "f.npz", "graphs/mine/x.npy", "graphs/mine/y.npy", "graphs/mine/edge_index.npy", "graphs/mine/m.json")
    monkeypatch.chdir(tmp_path)

    def files(name, root=None):
        identity = input_identity(name, root)
        return sorted(identity["files"]), identity["location"]

    assert files("planetoid:cora", root="p") == (sorted(Path(p).name for p in planetoid), str(tmp_path / "p"))
    assert files("acm:acm") == (["a_feat.npz", "labels.npy", "p_feat.npz", "pa.txt", "ps.txt", "test_20.npy",
                                 "train_20.npy", "val_20.npy"], str(tmp_path / "acm"))
    assert files("hetero-dir:h")[0] == ["edges/a__r__b/edge_index.npy", "meta.json", "nodes/paper/x.npy"]
    assert files("ogbn-arxiv", root="ogb") == (["RELEASE_v1.txt", "processed/data_processed", "raw/edge.csv.gz"],
                                               str(tmp_path / "ogb" / "ogbn_arxiv"))
    touch("ogb/ogbl_collab/RELEASE_v1.txt", "ogb/ogbl_collab/split/time/train.pt")
    assert files("ogbl-collab", root="ogb")[0] == ["RELEASE_v1.txt", "split/time/train.pt"]
    assert files("npz:f.npz") == (["f.npz"], str(tmp_path / "f.npz"))
    assert files("dir:mine?undirected=true", root="graphs") == (["edge_index.npy", "x.npy", "y.npy"],
                                                                 str(tmp_path / "graphs" / "mine"))
    assert input_identity("synthetic?num_nodes=100") is None and input_identity("inmemory-0123") is None
