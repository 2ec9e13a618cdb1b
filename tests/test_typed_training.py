"""Typed graphs through the one engine (issue 27): real partitions, real processes, ACM.

Distributed relation-wise sampling over METIS parts equals the single-process sampler over the
whole graph; a data-parallel run trains ACM with every option that applies to typed graphs
honoured (per-relation fan-outs, the feature cache, --pipeline, checkpoints and resume,
--save-model), and the options that do not apply are refused before any worker starts."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import gnnscale
from gnnscale.config import TrainConfig
from gnnscale.errors import GnnscaleError
from gnnscale.process.launch import launch_local

BASE = dict(layer="rel:sage", fanouts=(5, 5), batch_size=16, hidden=16, epochs=2, eval_every=0, verify=False,
            progress=False, timeout=60.0, device="cpu", lr=0.01)


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**(BASE | kw))


def test_typed_sampling_over_metis_parts_equals_one_process(acm_partition):
    from dist_workers import typed_part_sample

    from gnnscale.data.loader import typed_graph
    from gnnscale.partitioning import load_part
    from gnnscale.samplers import NeighborSampler

    whole = load_part(acm_partition(1), 0)  # one part: the whole graph, in original ids
    assert torch.equal(whole.orig_ids, torch.arange(whole.num_owned))
    fanouts = {"writes": [2, 3], "has_subject": [1, 1]}
    seeds = torch.arange(0, 4019, 37)  # papers
    res = launch_local(typed_part_sample, 2, args=(acm_partition(2), seeds, [4, 2], fanouts))
    for got in res:
        ref = NeighborSampler(whole.indptr, whole.indices, [4, 2], seed=3, node_keys=whole.orig_ids,
                              typed=typed_graph(whole, [4, 2], fanouts)).sample(seeds, epoch=1, step=2)
        for b, want in zip(got["blocks"], ref.blocks):
            assert torch.equal(b["src"], want.src_ids)
            assert torch.equal(b["edge_index"], want.edge_index)
            assert torch.equal(b["edge_type"], want.edge_type)
            assert torch.equal(b["node_type"], want.node_type)
        per_rel = torch.bincount(got["blocks"][-1]["edge_type"], minlength=4)
        assert per_rel[3] <= seeds.numel()  # subject_of: at most 1 per paper (has_subject fan-out... into papers)


def test_typed_runs_honour_their_options(acm, acm_partition, tmp_path):
    from dist_workers import run_configs

    ck = str(tmp_path / "ck")
    model = str(tmp_path / "model.pt")
    cfgs = [
        _cfg(),                                                            # 0 baseline
        _cfg(relation_fanouts={"writes": [1, 1]}),                         # 1 fewer author->paper draws
        _cfg(pipeline=True),                                               # 2 the same batches, prefetched
        _cfg(cache_policy="degree", cache_size="rows=100"),                # 3 cached remote rows
        _cfg(checkpoint_dir=ck, epochs=1),                                 # 4 first epoch, checkpointed
        _cfg(checkpoint_dir=ck, resume=True, save_model=model),           # 5 resumed to epoch 2 (= 0)
        _cfg(layer="rgcn", layer_kwargs={"num_bases": 2}, epochs=8, eval_every=8, batch_size=32),  # 6
        _cfg(layer="hgt", epochs=1),                                       # 7
    ]
    got = launch_local(run_configs, 2, args=(acm_partition(2), cfgs))[0]
    assert not [g["error"] for g in got if "error" in g]
    base = got[0]
    sent = base["last"]["bytes_sent_by_category"]
    # subjects have no features: their learned rows come from their owners and their gradients go back
    assert sent["embedding_pull"] > 0 and sent["embedding_grad"] > 0 and sent["embedding_pull_request"] > 0
    assert got[1]["digest"] != base["digest"]
    assert got[1]["last"]["bytes_sent_by_category"]["sample_response"] < base["last"]["bytes_sent_by_category"]["sample_response"]
    assert got[2]["digest"] == base["digest"] and got[2]["last"]["prefetch_depth"] == 2
    assert got[3]["cache"]["rows"] == 100 and got[3]["last"]["feature_rows_from_cache"] > 0 and got[3]["digest"] == base["digest"]
    assert got[5]["resumed_at"] == sum(got[4]["steps"]) and got[5]["digest"] == base["digest"]  # bit-equal resume
    assert got[6]["last"]["test_acc"] > 0.6, got[6]["last"]  # R-GCN learns ACM (3 classes)
    assert got[7]["steps"][0] > 0
    saved = gnnscale.load_model(model)
    from gnnscale.training.metrics import weights_digest

    assert weights_digest(saved.parameters()) == base["digest"]
    # The file's learned tables are in the dataset's per-type order: predicting on the dataset in one
    # process (gnnscale predict) and evaluating on the partition (gnnscale evaluate, which permutes
    # them back) agree, up to near-ties that the two paths may flip: test nodes whose top-2 logits
    # (of ~0.07 after 2 epochs at hidden 16) are within 1e-3 (seen: 4 such nodes, 3 flipped, the
    # same on 1 part as on 2; with the sampling draws of d455bdd, 9 and 1); with the tables left in
    # the partition's order 394 test nodes changed.
    import json
    import subprocess
    import sys

    from gnnscale.training.model_io import predict_typed_graph

    every = predict_typed_graph(saved, acm)
    pred, logits = every.argmax(1), every[acm.test_mask]
    want = float((pred[acm.test_mask] == acm.y[acm.test_mask]).float().mean())
    top2 = logits.topk(2, dim=1).values
    near_ties = int(((top2[:, 0] - top2[:, 1]) < 1e-3).sum())
    ev = subprocess.run([sys.executable, "-m", "gnnscale", "evaluate", "--model", model, "--parts-dir",
                         acm_partition(2), "--json", "--timeout", "60"], capture_output=True, text=True, timeout=300)
    assert ev.returncode == 0, ev.stderr[-2000:]
    got = json.loads(ev.stdout)["test_acc"]
    assert abs(got - want) <= near_ties / logits.size(0) + 1e-6, (got, want, near_ties)
    from gnnscale.data.embeddings import embedding_order
    from gnnscale.nn.typed_encoder import tables_to_dataset_order

    misordered = gnnscale.load_model(model)
    meta = json.loads((Path(acm_partition(2)) / "meta.json").read_text())
    tables_to_dataset_order(misordered, embedding_order(acm_partition(2), meta["typed"]), inverse=True)
    moved = predict_typed_graph(misordered, acm).argmax(1)
    assert int((moved[acm.test_mask] != pred[acm.test_mask]).sum()) > 50  # the order matters


def test_learned_tables_start_from_the_same_rows_at_any_worker_count(acm_partition):
    """The featureless subjects' learned rows (the data-parallel step's tables) start from values keyed by
    the original per-type id, not by the partition's: the row of one subject is the same on 1 part as on 2
    (their per-type ids differ there), so the run trains the same tables at any worker count."""
    from types import SimpleNamespace

    from gnnscale.data.embeddings import embedding_order
    from gnnscale.parallel.step_hooks import step_hooks
    from gnnscale.partitioning import load_part
    from gnnscale.process.comm import Communicator

    cfg = SimpleNamespace(hidden=8, seed=5, lr=0.01)

    def tables(parts: int) -> tuple[dict, dict]:
        """{t: float32 [N_t, 8]} the initial rows of every rank, in the partition's per-type order."""
        got = [step_hooks(load_part(acm_partition(parts), r), cfg, Communicator(r, parts)).embeddings.tables
               for r in range(parts)]
        return {t: torch.cat([g[t].weight for g in got]) for t in got[0]}, load_part(acm_partition(parts), 0).typed.meta

    one, _ = tables(1)
    two, meta = tables(2)
    assert list(one) == list(two) == [2]  # ACM's subjects
    order = embedding_order(acm_partition(2), meta)[2]  # the original id of each per-type id of the 2 parts
    assert not torch.equal(order, torch.arange(order.numel()))  # the parts renumber the subjects
    moved = int((two[2] != one[2][order]).any(1).sum())
    assert moved == 0, f"{moved} of {order.numel()} subjects start from another row on 2 parts than on 1"


def test_typed_historical_exchange_trains_and_pushes_halo_embeddings_instead_of_sampling(acm_partition):
    """--exchange historical on a typed graph (issue 45 item 6): owned nodes are drawn by relation
    as in exact mode, remote ones are leaves read from the halo tables (one row per halo node of
    any type), so no sampling request and no per-step feature row crosses (the halo's input rows
    are held), the boundary embeddings are pushed instead; the model, its gradient all-reduce
    and the featureless subjects' learned rows are those of exact mode."""
    from dist_workers import run_configs

    cfgs = [_cfg(epochs=3, eval_every=3), _cfg(exchange="historical", epochs=3, eval_every=3)]
    got = launch_local(run_configs, 2, args=(acm_partition(2), cfgs))[0]
    assert not [g["error"] for g in got if "error" in g]
    exact, hist = got
    se, sh = exact["last"]["bytes_sent_by_category"], hist["last"]["bytes_sent_by_category"]
    assert se["sample_request"] > 0 and se["sample_response"] > 0 and se["feature"] > 0 and "embedding" not in se
    assert "sample_request" not in sh and "sample_response" not in sh and "feature" not in sh
    assert sh["embedding"] > 0 and sh["embedding_pull"] > 0 and sh["embedding_grad"] > 0
    assert sh["gradient"] == se["gradient"]  # the same model, the same DDP all-reduce
    ex = hist["exchange"]
    assert ex["mode"] == "historical" and ex["halo_rows"] > 0 and ex["fill_embedding_bytes"] > 0
    assert 0 < hist["last"]["embedding_age_max"] <= ex["staleness"]
    assert hist["steps"] == exact["steps"]
    assert hist["last"]["test_acc"] > 0.5 and abs(hist["last"]["test_acc"] - exact["last"]["test_acc"]) < 0.1, \
        (hist["last"]["test_acc"], exact["last"]["test_acc"])


@pytest.mark.parametrize("kw, message", [
    (dict(exchange="local"), "--exchange local does not apply to typed graphs"),
    (dict(exchange="historical", pipeline_stages=2, micro_batches=2),
     "--exchange historical does not apply to the layer pipeline"),
    (dict(pipeline_stages=2, micro_batches=2), "does not run typed graphs yet"),
    (dict(layer="sage"), "--layer sage does not read relations"),
    (dict(relation_fanouts={"cites": [1, 1]}), r"names relation\(s\) \['cites'\] that the graph does not have"),
    (dict(relation_fanouts={"writes": [1]}), "relation 'writes' has 1 fan-outs"),
    # given explicitly (auto is off for typed graphs): refused, not silently dropped (issue 44)
    (dict(host_graph=True), "--host-graph does not apply to typed graphs"),
    (dict(host_features=True), "--host-features does not apply to typed graphs"),
])
def test_what_typed_graphs_do_not_run_is_refused_before_any_worker(acm_partition, kw, message):
    with pytest.raises(GnnscaleError, match=message):
        gnnscale.train(parts_dir=acm_partition(2), workers=2 * (2 if "pipeline_stages" in kw else 1), **(BASE | kw))
