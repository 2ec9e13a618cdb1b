"""Layer-wise inference of typed graphs (ACM, 2 METIS parts, real gloo processes).

The streamed inference of a typed part (inputs fetched per node type, the featureless types'
rows from their sharded tables, every in-edge with its relation) equals the model on
full-neighbourhood sampled blocks (eval fanouts -1) node for node, and a data-parallel run
evaluated layer-wise scores exactly as one evaluated with sampled blocks of fanouts -1.
"""
from __future__ import annotations

import pytest
import torch

from gnnscale.config import TrainConfig
from gnnscale.process.launch import launch_local

BASE = dict(fanouts=(5, 5), batch_size=16, hidden=16, epochs=1, eval_every=1, max_steps=3, verify=False,
            progress=False, timeout=60.0, device="cpu", lr=0.01, seed=5)

MODELS = [
    dict(layer="rel:sage"),
    dict(layer="rgcn", layer_kwargs={"num_bases": 2}),
    dict(layer="rel:sage", jk="cat", residual=True, norm="layer"),
    dict(layer="hgt"),
]


def streamed_vs_sampled(parts_dir: str, models: list, hidden: int, slice_bytes: int):
    """On this rank, for each model of ``models`` (TrainConfig fields; fixed random weights, the
    featureless types' rows sharded as in training): the logits of every owned node by
    :func:`streamed_inference` and by the model on sampled blocks with fanouts -1 (all owned
    nodes, in batches: the same count on every rank)."""
    from types import SimpleNamespace

    from gnnscale.data.embeddings import TypedEmbeddings
    from gnnscale.data.loader import build_samplers
    from gnnscale.data.typed_store import open_features
    from gnnscale.tasks.inference import streamed_inference
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.partitioning import load_part
    from gnnscale.process.comm import Communicator
    from gnnscale.process.groups import init_distributed
    from gnnscale.samplers.seeds import cut_batches

    info = init_distributed(timeout=60)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    part = load_part(parts_dir, info.rank)
    typed = part.typed
    features = open_features(part, comm)
    emb = TypedEmbeddings(typed.book, typed.meta["feature_dims"], hidden, comm, seed=11,
                          node_types=list(typed.meta["node_types"]))
    attach = lambda x: emb.attach(x, record=False)  # noqa: E731
    cfg = SimpleNamespace(fanouts=[-1, -1], eval_fanouts=[-1, -1], seed=3, sampler_backend="auto",
                          relation_fanouts=None)
    _, sampler, _ = build_samplers(part, comm, cfg, [-1, -1])
    ids = torch.arange(part.offset, part.offset + part.num_owned)
    batch = 1024
    steps = int(comm.all_reduce(torch.tensor([(ids.numel() + batch - 1) // batch]), "max")[0])
    out = []
    for kw in models:
        full = dict(hidden=hidden, dropout=0.5, layer_kwargs={}, norm="none", residual=False, jk="none") | kw
        net = ModelSpec.of(SimpleNamespace(**full), 0, part.meta["num_classes"], num_layers=2,
                           typed=part.meta["typed"]).build(seed=7, external_embeddings=True).eval()
        streamed = streamed_inference(net, part.indptr, part.indices, features, slice_bytes=slice_bytes,
                                      edge_type=typed.etype, inputs=attach)
        sampled = []
        with torch.no_grad():
            for step, seeds in enumerate(cut_batches(ids, batch, steps, wrap=False)):
                mb = sampler.sample(seeds, epoch=0, step=step)
                x = attach(features.fetch(mb.input_ids))
                sampled.append(net(x, mb.blocks))
        out.append({"streamed": streamed, "sampled": torch.cat(sampled)})
    return {"rank": info.rank, "n": part.num_owned, "models": out}


def test_streamed_typed_inference_equals_full_neighbourhood_blocks(acm_partition):
    # slices of ~a few hundred in-edges: many collective rounds, and a different count per rank
    got = launch_local(streamed_vs_sampled, 2, args=(acm_partition(2), MODELS, 16, 16 << 10))
    for rank in got:
        for kw, res in zip(MODELS, rank["models"]):
            s, d = res["streamed"], res["sampled"]
            assert s.shape == d.shape == (rank["n"], s.shape[1]), (kw, s.shape, d.shape)
            assert torch.allclose(s, d, atol=1e-5, rtol=1e-5), (kw, float((s - d).abs().max()))
            assert torch.equal(s.argmax(1), d.argmax(1)), kw


def _cfg(**kw) -> TrainConfig:
    return TrainConfig(**(BASE | kw))


def test_typed_runs_evaluate_layerwise_as_sampled_with_full_fanouts(acm_partition):
    from dist_workers import run_configs

    rgcn = dict(layer="rgcn", layer_kwargs={"num_bases": 2})
    cfgs = [
        _cfg(layer="rel:sage", eval_method="layerwise"),                     # 0
        _cfg(layer="rel:sage", eval_method="sampled", eval_fanouts=(-1, -1)),  # 1 = 0
        _cfg(eval_method="layerwise", **rgcn),                               # 2
        _cfg(eval_method="sampled", eval_fanouts=(-1, -1), **rgcn),          # 3 = 2
        _cfg(layer="rel:sage", eval_fanouts=(-1, -1)),                       # 4 auto: layer-wise, = 0
    ]
    got = launch_local(run_configs, 2, args=(acm_partition(2), cfgs))[0]
    assert not [g["error"] for g in got if "error" in g]
    for lw, sp in ((got[0], got[1]), (got[2], got[3]), (got[4], got[1])):
        assert lw["digest"] == sp["digest"]  # the same training
        a, b = lw["last"], sp["last"]
        assert a["evaluation"]["method"] == "layerwise" and b["evaluation"]["method"] == "sampled"
        assert a["val_acc"] == b["val_acc"] and a["test_acc"] == b["test_acc"], (a, b)
        assert a["evaluation"]["macro_f1"] == pytest.approx(b["evaluation"]["macro_f1"], abs=1e-12)
        assert a["evaluation"]["macro_f1"]["test"] is not None
