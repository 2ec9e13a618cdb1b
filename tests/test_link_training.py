"""Link prediction through the one engine (issue 28): real Cora, real processes.

The split is written into the partition and read back by owner; a data-parallel run trains a
GCN encoder with a dot-product decoder (the graph auto-encoder) to the published AUC range on
1 and 2 workers; the options of link prediction are honoured or refused before any worker
starts; ``gnnscale embed`` writes every node's embedding per part and reads them back whole,
equal to one process's."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from gnnscale.config import TrainConfig
from gnnscale.process.launch import launch_local

# host reads off: the endpoints' samples and rows come from their owners (the bytes these tests count)
BASE = dict(task="link", layer="gcn", fanouts=(-1, -1), batch_size=256, hidden=32, epochs=30, lr=0.01, dropout=0.0,
            verify=False, progress=False, timeout=120.0, device="cpu", eval_every=30, host_features=False,
            host_graph=False)


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**(BASE | kw))


@pytest.fixture(scope="module")
def cora_link(cora, tmp_path_factory):
    """``get(parts)``: Cora split 85/5/10 at random (seed 0), cut into ``parts`` METIS parts."""
    from gnnscale.datasets.link_split import random_link_split
    from gnnscale.partitioning import partition_graph

    data = random_link_split(cora, val=0.05, test=0.10, seed=0)
    made = {}

    def get(parts: int) -> str:
        if parts not in made:
            out = tmp_path_factory.mktemp(f"cora_link{parts}")
            partition_graph(data, parts, out, dataset="planetoid:cora")
            made[parts] = str(out)
        return made[parts]

    get.data = data
    return get


def test_the_split_is_written_by_source_owner_in_new_ids(cora_link):
    from gnnscale.partitioning import load_meta, load_part

    parts = cora_link(2)
    data = cora_link.data
    meta = load_meta(parts)
    assert meta["link"]["metric"] == "auc"
    assert meta["link"]["counts"] == {k: int(getattr(data.link_split, f"{k}_pos" if k in ("train", "val", "test")
                                                     else k).shape[1])
                                      for k in ("train", "val", "test", "val_neg", "test_neg")}
    for key in ("train", "val", "test", "val_neg", "test_neg"):
        want = getattr(data.link_split, f"{key}_pos" if key in ("train", "val", "test") else key)
        got = []
        for p in range(2):
            part = load_part(parts, p)
            edges = part.link[key]
            if key == "train":  # balanced shares, in source-owner order
                assert abs(edges.shape[1] - want.shape[1] / 2) <= 1
            else:
                assert bool((part.book.owner(edges[0]) == p).all())  # by source owner
            old = torch.empty(part.book.num_nodes, dtype=torch.int64)
            for q in range(2):
                other = load_part(parts, q, verify=False)
                old[other.offset:other.offset + other.num_owned] = other.orig_ids
            got.append(old[edges])
        got = torch.cat(got, 1)
        n = data.num_nodes
        assert torch.equal(torch.sort(got[0] * n + got[1]).values, torch.sort(want[0] * n + want[1]).values), key
    # a changed link file is caught by its checksum
    from gnnscale.errors import PartitionError
    from gnnscale.partitioning import verify_part

    path = f"{parts}/part1/link_test.npy"
    arr = np.load(path)
    arr[0, 0] += 1
    np.save(path, arr)
    try:
        with pytest.raises(PartitionError, match="link_test.npy"):
            verify_part(parts, 1)
    finally:
        arr[0, 0] -= 1
        np.save(path, arr)


def test_graph_autoencoder_reaches_published_auc_on_1_and_2_workers(cora_link, tmp_path):
    from dist_workers import run_configs

    fit = dict(batch_size=1024, epochs=15, eval_every=15)  # 0.90 test AUC on 1 worker (256 x 30 epochs: 0.91)
    one = launch_local(run_configs, 1, args=(cora_link(1), [_cfg(**fit)]))[0][0]
    two = launch_local(run_configs, 2, args=(cora_link(2), [_cfg(**fit), _cfg(filter_negatives=True, num_negatives=2,
                                                                             epochs=2, eval_every=2),
                                                             _cfg(decoder="mlp", link_loss="margin", epochs=2,
                                                                  eval_every=2)]))[0]
    assert not [g["error"] for g in two if "error" in g]
    for run in (one, two[0]):
        last = run["last"]
        assert last["metric"] == "auc"
        figs = last["evaluation"]["metrics"]["test"]
        # Kipf & Welling (2016): GAE on Cora, test AUC 91.0, AP 92.0
        assert figs["auc"] > 0.85 and figs["ap"] > 0.85, figs
        assert last["test_acc"] == figs["auc"]
    sent = two[0]["last"]["bytes_sent_by_category"]
    assert sent["sample_request"] > 0 and sent["feature"] > 0
    assert two[0]["last"]["evaluation"]["bytes_sent_by_category"]["link_fetch"] > 0
    assert "negative_filter" not in sent
    assert two[1]["last"]["bytes_sent_by_category"]["negative_filter"] > 0 and two[1]["digest"] != two[0]["digest"]
    assert two[2]["digest"] != two[0]["digest"]


@pytest.mark.parametrize("kw, match", [
    (dict(pipeline_stages=2), "--task link does not apply to the layer pipeline"),
    (dict(exchange="historical"), "--exchange historical does not apply to --task link"),
    (dict(task="node", decoder="mlp"), r"--decoder \(decoder='mlp'\) applies only with --task link"),
    (dict(link_metric="hits@0"), "--link-metric must be auc, mrr or hits@K"),
])
def test_link_options_are_refused_where_they_do_not_apply(cora_link, kw, match):
    from gnnscale.errors import GnnscaleError
    from gnnscale.planning.plan import plan_run
    from gnnscale.partitioning import load_meta

    meta = load_meta(cora_link(2))
    with pytest.raises(GnnscaleError, match=match):
        plan_run(_cfg(**kw).check(), {"num_parts": 2, "link": meta["link"]}, 4 if kw.get("pipeline_stages") else 2)


def test_a_partition_without_a_split_is_refused_for_link_and_one_with_a_split_for_nodes(cora_partition, cora_link):
    from gnnscale.errors import GnnscaleError
    from gnnscale.planning.plan import plan_run

    with pytest.raises(GnnscaleError, match="--task link needs a link-prediction split"):
        plan_run(_cfg(), {"num_parts": 2}, 2, where=cora_partition(2))
    with pytest.raises(GnnscaleError, match="holds a link-prediction split"):
        plan_run(TrainConfig(), {"num_parts": 2, "link": {"metric": "auc"}}, 2, where=cora_link(2))


def test_cli_link_run_then_embed_per_part_reads_back_as_one_array(cora_link, tmp_path):
    from gnnscale.training.embed import load_embeddings
    from gnnscale.training.model_io import load_model, predict_full_graph

    model = tmp_path / "m.pt"
    cmd = [sys.executable, "-m", "gnnscale.cli.main", "train", "--parts-dir", cora_link(2), "--task", "link",
           "--layer", "gcn", "--fanouts", "5,5", "--epochs", "1", "--hidden", "16", "--batch-size", "512",
           "--save-model", str(model), "--no-progress", "--timeout", "60", "--metrics", str(tmp_path / "m.json")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "val_auc" in out.stderr and "test_auc" in out.stderr
    emb = tmp_path / "emb"
    from test_cli import cli_in_process

    out = cli_in_process("embed", "--model", str(model), "--parts-dir", cora_link(2), "--out", str(emb), "--timeout", "60")
    assert out.returncode == 0, out.stderr[-3000:]
    got = load_embeddings(emb)
    data = cora_link.data
    net = load_model(model)
    want = predict_full_graph(net.encoder, data.x.float(), data.edge_index)
    assert got.shape == (data.num_nodes, 16)
    assert np.allclose(got, want.numpy(), atol=1e-4)
    bad = cli_in_process(*cmd[3:6], "--edge-split", "0.8,0.1,0.1", "--task", "link")  # refused before workers
    assert bad.returncode == 2 and "a partition folder keeps the split it was written with" in bad.stderr


def test_every_link_option_is_honoured_on_a_link_partition(cora_link):
    """Each option of --task link changes what it says, against a baseline in the same processes
    (test_options refuses them on Cora's node partition, which has no split)."""
    from dist_workers import run_configs

    small = dict(epochs=1, fanouts=(5, 5), eval_every=1)
    runs = [_cfg(**small), _cfg(**small, decoder="mlp"), _cfg(**small, link_loss="margin"),
            _cfg(**small, neg_sampling="per_source"), _cfg(**small, neg_sampling="in_batch"),
            _cfg(**small, num_negatives=3), _cfg(**small, filter_negatives=True), _cfg(**small, link_metric="hits@20"),
            _cfg(**small, exclude_seed_edges=False)]
    got = launch_local(run_configs, 2, args=(cora_link(2), runs))[0]
    assert not [g["error"] for g in got if "error" in g]
    base = got[0]
    for i in range(1, 6):  # the model, the loss and the negatives change the weights
        assert got[i]["digest"] != base["digest"], runs[i]
    assert got[5]["last"]["bytes_sent_by_category"]["feature"] > base["last"]["bytes_sent_by_category"]["feature"]
    assert got[6]["last"]["bytes_sent_by_category"]["negative_filter"] > 0
    assert "negative_filter" not in base["last"]["bytes_sent_by_category"]
    assert got[7]["last"]["metric"] == "hits@20" and set(got[7]["last"]["evaluation"]["metrics"]["test"]) == {"hits@20"}
    assert base["last"]["metric"] == "auc"
    assert got[8]["digest"] != base["digest"]  # the batch's own edges stay in its blocks


def test_mrr_on_a_split_without_per_source_negatives_is_refused(cora_link):
    from gnnscale.errors import GnnscaleError
    from gnnscale.planning.plan import plan_run
    from gnnscale.partitioning import load_meta

    with pytest.raises(GnnscaleError, match="--link-metric mrr ranks each source's positive among its own negatives"):
        plan_run(_cfg(link_metric="mrr"), load_meta(cora_link(2)), 2)


def test_mrr_evaluation_is_exact_and_the_same_on_1_and_2_parts(cora, tmp_path):
    """A split with 50 fixed negatives per source (MRR): the model trained on 2 parts, evaluated by
    `gnnscale evaluate` on the same split cut into 1 and into 2 parts, gives the same MRR, equal to
    OGB's Evaluator on scores computed in one process from the whole graph."""
    import json

    from ogb.linkproppred import Evaluator

    from gnnscale.datasets.link_split import random_link_split
    from gnnscale.partitioning import partition_graph
    from gnnscale.training.model_io import load_model, predict_full_graph
    from test_cli import cli_in_process

    data = random_link_split(cora, val=0.05, test=0.10, seed=1, neg_per_source=50)
    for p in (1, 2):
        partition_graph(data, p, tmp_path / f"p{p}", dataset="planetoid:cora")
    model = tmp_path / "m.pt"
    cmd = [sys.executable, "-m", "gnnscale.cli.main", "train", "--parts-dir", str(tmp_path / "p2"), "--task", "link",
           "--layer", "sage", "--fanouts", "5,5", "--epochs", "2", "--hidden", "16", "--neg-sampling", "per_source",
           "--save-model", str(model), "--no-progress", "--timeout", "60"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "val_mrr" in out.stderr
    got = {}
    for p in (1, 2):
        ev = cli_in_process("evaluate", "--model", str(model), "--parts-dir", str(tmp_path / f"p{p}"), "--json",
                            "--timeout", "60")  # in this process: its workers forked from the suite's server
        assert ev.returncode == 0, ev.stderr[-3000:]
        got[p] = json.loads(ev.stdout.strip().splitlines()[-1])
    net = load_model(model)
    h = predict_full_graph(net.encoder, data.x.float(), data.edge_index)
    split = data.link_split
    pos = net.score(h[split.test_pos[0]], h[split.test_pos[1]])
    neg = net.score(h[split.test_pos[0]].unsqueeze(1), h[split.test_neg_dst])
    want = float(Evaluator("ogbl-citation2").eval({"y_pred_pos": pos, "y_pred_neg": neg})["mrr_list"].mean())
    assert got[1]["metric"] == "mrr"
    assert abs(got[1]["test_mrr"] - got[2]["test_mrr"]) < 1e-6
    assert abs(got[2]["test_mrr"] - want) < 1e-4, (got, want)


def test_typed_graph_link_prediction_of_one_relation_with_distmult(acm, tmp_path):
    """ACM's author -> paper relation (`writes`) split 85/5/10: validation and test edges and their
    reverses (`written_by`) leave message passing; negatives pair authors with papers; R-GCN-style
    relation-wise SAGE layers with a DistMult decoder train data parallel on 2 workers (subjects,
    featureless, through sharded learned embeddings) and separate the held-out edges."""
    from dist_workers import run_configs

    from gnnscale.data.partition_cache import link_data
    from gnnscale.partitioning import load_part, partition_graph

    data = link_data(acm, "0.85,0.05,0.10", relation="writes", seed=0)
    split = data.link_split
    n = acm.num_nodes
    r = [r for _, r, _ in acm.edge_types].index("writes")
    assert split.info["relation"] == r and split.metric == "auc"
    mp = data.edge_index[0] * n + data.edge_index[1]
    held = torch.cat([split.val_pos, split.test_pos], 1)
    assert not torch.isin(held[0] * n + held[1], mp).any() and not torch.isin(held[1] * n + held[0], mp).any()
    authors, papers = (int(acm.type_ptr[1]), int(acm.type_ptr[2])), (0, int(acm.type_ptr[1]))
    for neg in (split.val_neg, split.test_neg):
        assert bool(((neg[0] >= authors[0]) & (neg[0] < authors[1])).all())
        assert bool(((neg[1] >= papers[0]) & (neg[1] < papers[1])).all())
    parts = tmp_path / "acm-link2"
    partition_graph(data, 2, parts, dataset="acm")
    part = load_part(parts, 0)
    assert part.meta["link"]["info"]["relation_name"] == "writes" and part.typed is not None
    cfg = _cfg(layer="rel:sage", fanouts=(5, 5), epochs=6, eval_every=6, batch_size=512, hidden=32, decoder="distmult",
               neg_sampling="per_source", dropout=0.0)
    got = launch_local(run_configs, 2, args=(str(parts), [cfg]))[0]
    assert not [g["error"] for g in got if "error" in g], got
    test = got[0]["last"]["evaluation"]["metrics"]["test"]
    print(f"ACM writes, 2 workers, rel:sage + DistMult: test AUC {test['auc']:.4f} AP {test['ap']:.4f}")
    assert test["auc"] > 0.75, test
    sent = got[0]["last"]["bytes_sent_by_category"]
    assert sent["embedding_pull"] > 0 and sent["embedding_grad"] > 0  # subjects' learned rows


def test_a_relation_that_does_not_exist_ends_with_one_line(tmp_path):
    from conftest import shared_data_dir
    from test_cli import cli_in_process

    bad = cli_in_process("partition", "--dataset", f"acm:{shared_data_dir() / 'acm'}", "--parts", "2", "--out",
                         str(tmp_path / "p"), "--edge-split", "0.85,0.05,0.10", "--link-relation", "cites")
    assert bad.returncode == 2
    lines = [ln for ln in bad.stderr.strip().splitlines() if "Warning" not in ln and "warn" not in ln]
    assert lines[-1].startswith("gnnscale partition: error: relation 'cites' does not exist in acm"), bad.stderr
    assert "written_by, writes, has_subject, subject_of" in lines[-1]


def test_a_resumed_link_run_ends_bit_equal(cora_link, tmp_path):
    from dist_workers import run_configs

    ck = str(tmp_path / "ck")
    small = dict(fanouts=(5, 5), eval_every=0, filter_negatives=True, num_negatives=2)
    runs = [_cfg(**small, epochs=2), _cfg(**small, epochs=1, checkpoint_dir=ck),
            _cfg(**small, epochs=2, checkpoint_dir=ck, resume=True)]
    got = launch_local(run_configs, 2, args=(cora_link(2), runs))[0]
    assert not [g["error"] for g in got if "error" in g]
    assert got[2]["resumed_at"] == got[1]["steps"][0] and got[2]["digest"] == got[0]["digest"]


def test_sampled_link_evaluation_with_every_neighbour_equals_the_layer_wise_one(cora_link):
    """--eval-method sampled embeds each owned node by its drawn subgraph; with --eval-fanouts -1,-1
    that subgraph is the whole neighbourhood, so the figures are the layer-wise ones."""
    from dist_workers import run_configs

    cfgs = [_cfg(epochs=3, eval_every=3), _cfg(epochs=3, eval_every=3, eval_method="sampled", eval_batch_size=300)]
    runs = launch_local(run_configs, 2, args=(cora_link(2), cfgs))[0]
    assert not [g["error"] for g in runs if "error" in g]
    layer, sampled = (r["last"]["evaluation"] for r in runs)
    assert (layer["method"], sampled["method"]) == ("layerwise", "sampled") and sampled["batches"] >= 2
    assert runs[0]["digest"] == runs[1]["digest"]  # the same training
    for split in ("val", "test"):
        for k in ("auc", "ap"):
            assert sampled["metrics"][split][k] == pytest.approx(layer["metrics"][split][k], abs=1e-6)
