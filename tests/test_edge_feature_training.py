"""Edge features in the model (docs/targets_and_edge_features.md section 5): ``--edge-features``,
layers built with ``edge_dim`` and called with each block's ``edge_attr``, exact layer-wise
inference with the part's edge rows, ``--edge-to-node``. Real multi-process runs on HumLoc
(3,106 proteins, 21 interaction scores per edge, multilabel targets), 2 METIS parts."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import gnnscale
from gnnscale.config import TrainConfig
from gnnscale.errors import GnnscaleError
from gnnscale.process.launch import launch_local

HIDDEN = 16
# host_graph off: the remote edges' rows come with their owners' sampling responses (the edge_attr
# bytes these tests count); test_host_parts_bring_their_edge_features reads them from the folder
BASE = dict(epochs=2, fanouts=(5, 5), batch_size=128, hidden=HIDDEN, eval_every=0, verify=False, progress=False,
            timeout=60.0, device="cpu", seed=3, host_graph=False)
GAT = dict(layer="gat-pyg", layer_kwargs={"heads": 2})  # torch_geometric.nn.GATConv, built with edge_dim=21


def _cfg(**over) -> TrainConfig:
    return TrainConfig(**(BASE | over))


@pytest.fixture(scope="module")
def humloc(shared_data):
    from gnnscale.datasets import load_dataset

    return load_dataset("humloc:" + str(shared_data / "humloc"))


@pytest.fixture(scope="module")
def humloc2(humloc, tmp_path_factory) -> str:
    from gnnscale.partitioning import partition_graph

    out = tmp_path_factory.mktemp("humloc_edges2")
    partition_graph(humloc, 2, out, method="metis", dataset="humloc")
    return str(out)


def _edge_bytes(run: dict) -> int:
    return int(run["last"]["bytes_sent_by_category"].get("edge_attr", 0))


def test_two_workers_train_with_edge_features_and_without(humloc2):
    """(a) GATConv with edge_dim and GINEConv read the sampled edges' features (remote rows sent
    by their owners: edge_attr bytes); --edge-features off is the same model without them."""
    from dist_workers import run_configs

    runs = [_cfg(**GAT),                                          # 0 auto: on (HumLoc has 21 per edge)
            _cfg(**GAT, edge_features="on"),                      # 1 the same run
            _cfg(**GAT, edge_features="off"),                     # 2 GATConv without edge_dim, no edge rows
            _cfg(layer="gine", epochs=1, eval_every=1, eval_fanouts=(-1, -1))]  # 3 GINE, exact evaluation
    got = launch_local(run_configs, 2, args=(humloc2, runs))[0]
    assert not [g["error"] for g in got if "error" in g]
    auto, on, off, gine = got
    assert _edge_bytes(auto) > 0 and auto["digest"] == on["digest"]
    # every remote sampled edge's row, 21 float32 each: a whole number of rows
    assert _edge_bytes(auto) % (21 * 4) == 0
    assert _edge_bytes(off) == 0 and off["digest"] != auto["digest"]
    assert off["steps"] == auto["steps"]  # the same seeds and draws: only the features differ
    # without edge features the sampling traffic is the same (the draws do not depend on them)
    assert off["last"]["bytes_sent_by_category"]["sample_response"] == \
        auto["last"]["bytes_sent_by_category"]["sample_response"]
    assert _edge_bytes(gine) > 0 and gine["last"]["evaluation"]["method"] == "layerwise"
    print(f"edge_attr bytes per epoch (2 ranks): GAT {_edge_bytes(auto)}, GINE {_edge_bytes(gine)}")


def test_resumed_run_with_edge_features_is_bit_equal(humloc2, tmp_path):
    """(c) A run checkpointed after its first epoch and resumed ends with the uninterrupted run's weights."""
    from dist_workers import run_configs

    ck = str(tmp_path / "ck")
    runs = [_cfg(**GAT), _cfg(**GAT, epochs=1, checkpoint_dir=ck),
            _cfg(**GAT, checkpoint_dir=ck, resume=True)]
    got = launch_local(run_configs, 2, args=(humloc2, runs))[0]
    assert not [g["error"] for g in got if "error" in g]
    assert _edge_bytes(got[2]) > 0
    assert got[2]["resumed_at"] == got[1]["steps"][0] and got[2]["digest"] == got[0]["digest"]


def test_every_exchange_mode_reads_edge_features(humloc2):
    """Local exchange (cross-part edges dropped: each rank's own rows) and historical exchange (halo
    tables filled by layer-wise inference and refreshed one hop per layer, each reading the edges'
    rows) train with edge features: other weights than without them, no edge row sent."""
    from dist_workers import run_configs

    runs = [_cfg(**GAT, exchange=x, edge_features=e, epochs=1) for x in ("local", "historical") for e in ("on", "off")]
    got = launch_local(run_configs, 2, args=(humloc2, runs))[0]
    assert not [g["error"] for g in got if "error" in g]
    local_on, local_off, hist_on, hist_off = got
    assert local_on["digest"] != local_off["digest"] and hist_on["digest"] != hist_off["digest"]
    assert all(_edge_bytes(g) == 0 for g in got)  # every edge read is the rank's own
    assert hist_on["last"]["bytes_sent_by_category"]["embedding"] > 0 and hist_on["exchange"]["mode"] == "historical"


def test_layerwise_inference_with_edge_features_equals_one_process(humloc, humloc2):
    """(b) Exact layer-wise inference on 2 parts (streamed in several slices, and over halo tables),
    each slice's layer given its edges' rows of the part's edge_attr, equals the full-graph
    forward of the same weights with the dataset's edge_attr in one process."""
    from edge_workers import streamed_edge_logits

    from gnnscale.nn.spec import ModelSpec
    from gnnscale.samplers.block import Block
    from gnnscale.training.model_io import predict_full_graph

    n, f = humloc.x.shape
    specs = [ModelSpec(int(f), HIDDEN, 14, 2, layer="gat-pyg", layer_kwargs={"heads": 2}, edge_dim=21),
             ModelSpec(int(f), HIDDEN, 14, 2, layer="gine", edge_dim=21)]
    models = [s.build(seed=11).eval() for s in specs]
    ids = torch.arange(n)
    whole = Block(ids, ids, humloc.edge_index, edge_attr=humloc.edge_attr)
    with torch.no_grad():
        refs = [m(humloc.x, [whole, whole]) for m in models]
        # the edge features matter: the same weights without them give other logits
        plain = models[0](humloc.x, [Block(ids, ids, humloc.edge_index, edge_attr=torch.zeros_like(humloc.edge_attr))] * 2)
    assert (plain - refs[0]).abs().max() > 1e-3
    # gnnscale predict's whole-graph inference (one process) is the same forward
    assert torch.allclose(predict_full_graph(models[1], humloc.x, humloc.edge_index, humloc.edge_attr), refs[1],
                          atol=1e-5, rtol=0)
    records = [s.record() for s in specs]
    assert records[0]["edge_dim"] == 21 and ModelSpec(**records[0]) == specs[0]
    got = launch_local(streamed_edge_logits, 2,
                       args=(humloc2, records, [m.state_dict() for m in models], 64 << 10))
    for k, ref in enumerate(refs):
        # 1e-5 of the logits' scale: GINE sums up to 131 messages into logits up to ~180, whose float32
        # sums in another order differ by ~1e-7 of it (GAT's attention-weighted means stay below 1e-5)
        scale = max(1.0, float(ref.abs().max()))
        for driver in ("streamed", "halo"):
            out = torch.empty_like(ref)
            for g in got:
                out[g["orig_ids"]] = g[driver][k]
            err = float((out - ref).abs().max())
            assert err < 1e-5 * scale, (specs[k].layer, driver, err, scale)
            print(f"{specs[k].layer} {driver}: max |2 parts - 1 process| = {err:.2e} (logits up to {scale:.1f})")
    # inference reads each rank's own edge rows: no edge feature crosses between the ranks
    assert all(g["sent"].get("edge_attr", 0) == 0 for g in got)


def test_historical_exchange_with_edge_features_equals_exact_after_fill(humloc2):
    """Historical mode's parts read the edges' rows: on full neighbourhoods, after the halo fill
    (layer-wise, each slice with its edge rows), blocks whose remote leaves come from the tables
    give the exact blocks' outputs, and the one-hop refresh over histories reproduces the tables."""
    from edge_workers import historical_vs_exact_edges

    from gnnscale.nn.spec import ModelSpec

    spec = ModelSpec(32, HIDDEN, 14, 2, layer="gat-pyg", layer_kwargs={"heads": 2}, edge_dim=21)
    net = spec.build(seed=5)
    got = launch_local(historical_vs_exact_edges, 2, args=(humloc2, spec.record(), net.state_dict(), [-1, -1]))
    for res in got:
        assert res["leaves"] > 0  # remote nodes really were cut off and read from the tables
        assert torch.allclose(res["historical"], res["exact"], atol=1e-5, rtol=0)
        assert res["refreshed"] > 0 and res["refresh_err"] < 1e-5


def test_edge_features_on_without_them_is_refused_in_one_line(cora_partition):
    """(d) --edge-features on with a partition that has none: refused before any worker starts, in one line."""
    parts = cora_partition(2)
    with pytest.raises(GnnscaleError, match=r"--edge-features on does not apply to data-parallel training on .*: it "
                                            r"has no edge features"):
        gnnscale.train(parts_dir=parts, workers=2, **(BASE | {"edge_features": "on"}))
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts, "--edge-features", "on",
           "--epochs", "1", "--no-verify"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("gnnscale train: error: --edge-features on does not apply to "
                                                   "data-parallel training on"), res.stderr


def test_edge_feature_resolution(humloc2):
    """auto / on / off against the layer, the mode and the partition (the workers' resolution)."""
    from gnnscale.nn.edge_features import EdgeFeatureError, layer_reads_edges, resolve_edge_dim
    from gnnscale.planning.plan import DATA_PARALLEL, LAYER_PIPELINE, PlanError, check_edge_options, plan_run
    from gnnscale.partitioning import load_meta

    meta = load_meta(humloc2)
    assert meta["edge_feature_dim"] == 21
    dp = DATA_PARALLEL
    assert resolve_edge_dim(_cfg(**GAT), meta, dp) == 21
    assert resolve_edge_dim(_cfg(**GAT, edge_features="off"), meta, dp) == 0
    assert resolve_edge_dim(_cfg(layer="sage"), meta, dp) == 0  # auto: sage reads none
    assert resolve_edge_dim(_cfg(**GAT, exchange="historical"), meta, dp) == 21
    assert resolve_edge_dim(_cfg(**GAT, pipeline_stages=2), meta, LAYER_PIPELINE) == 0
    assert resolve_edge_dim(_cfg(**GAT), {"edge_feature_dim": 0}, dp) == 0
    with pytest.raises(EdgeFeatureError, match=r"--edge-features on, but layer 'sage' reads no edge features"):
        resolve_edge_dim(_cfg(layer="sage", edge_features="on"), meta, dp)
    with pytest.raises(PlanError, match=r"--edge-features on does not apply here: the layer pipeline"):
        plan_run(_cfg(**GAT, edge_features="on", pipeline_stages=2), {"num_parts": 2, "edge_feature_dim": 21}, 4)
    assert plan_run(_cfg(**GAT, edge_features="on", exchange="historical"), {"num_parts": 2, "edge_feature_dim": 21}, 2).dp == 2
    with pytest.raises(PlanError, match=r"--edge-features on does not apply here: --task link"):
        check_edge_options(_cfg(edge_features="on", task="link"), dp, "HumLoc", None, 21)
    assert plan_run(_cfg(**GAT, edge_features="off", exchange="historical"), {"num_parts": 2, "edge_feature_dim": 21}, 2).dp == 2
    assert [layer_reads_edges(s) for s in ("gat", "gat-pyg", "gine", "sage", "gcn", "rel:gat",
                                           "torch_geometric.nn:TransformerConv", "torch_geometric.nn:SAGEConv")] == \
        [True, True, True, False, False, False, True, False]


class EdgeGate(torch.nn.Module):
    """A user layer reading edge features: out[v] = W x_v + sum_{u -> v} sigmoid(w . e_uv) U x_u."""

    def __init__(self, in_dim: int, out_dim: int, edge_dim: int = 0) -> None:
        super().__init__()
        self.lin, self.nbr = torch.nn.Linear(in_dim, out_dim), torch.nn.Linear(in_dim, out_dim, bias=False)
        self.gate = torch.nn.Linear(edge_dim, 1)

    def forward(self, x, edge_index, edge_attr):
        x_src, x_dst = x
        msg = torch.sigmoid(self.gate(edge_attr)) * self.nbr(x_src)[edge_index[0]]
        return self.lin(x_dst) + torch.zeros(x_dst.shape[0], msg.shape[1]).index_add_(0, edge_index[1], msg)


def test_a_user_layer_is_built_with_edge_dim_and_called_with_edge_attr():
    """A class whose constructor takes edge_dim gets De; its forward gets each block's rows; a block
    without them, a layer_kwargs edge_dim or edge_dim on a layer that reads none are refused."""
    from gnnscale.nn.edge_features import EdgeFeatureError
    from gnnscale.nn.models import ModelError
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.samplers.block import Block

    net = ModelSpec(4, 8, 3, 2, layer=EdgeGate, edge_dim=5).build(seed=0)
    assert net.edge_layers == [True, True] and net.convs[0].gate.in_features == 5
    ids = torch.arange(6)
    edge_index = torch.tensor([[1, 2, 3, 4, 5, 0], [0, 0, 1, 2, 3, 4]])
    attr = torch.rand(6, 5)
    x = torch.randn(6, 4)
    one = net(x, [Block(ids, ids, edge_index, edge_attr=attr)] * 2)
    two = net(x, [Block(ids, ids, edge_index, edge_attr=attr * 2)] * 2)
    assert one.shape == (6, 3) and not torch.allclose(one, two)
    with pytest.raises(ModelError, match=r"reads edge features .* but the block has none"):
        net(x, [Block(ids, ids, edge_index)] * 2)
    with pytest.raises(EdgeFeatureError, match=r"edge_dim is the partition's edge feature size"):
        ModelSpec(4, 8, 3, 2, layer="gat-pyg", layer_kwargs={"edge_dim": 5}).build()
    with pytest.raises(EdgeFeatureError, match=r"no layer of 'sage' reads edge_attr"):
        ModelSpec(4, 8, 3, 2, layer="sage", edge_dim=5).build()


def test_edge_to_node_mean_on_humloc(humloc, shared_data, tmp_path):
    """(e) --edge-to-node mean: x gains HumLoc's 21 edge columns, each node's mean over its in-edges
    (zeros without any), computed here by a pandas group-by; the partition records it, and a cached
    partition of another setting is not reused."""
    import pandas as pd

    from gnnscale.cli.main import main
    from gnnscale.data.partition_cache import cache_folder
    from gnnscale.partitioning import load_meta, load_part

    out = tmp_path / "mean2"
    assert main(["partition", "--dataset", f"humloc:{shared_data / 'humloc'}", "--parts", "2", "--out", str(out),
                 "--edge-to-node", "mean"]) == 0
    meta = load_meta(out)
    assert meta["edge_to_node"] == "mean" and meta["feature_dim"] == 32 + 21
    n = humloc.num_nodes
    x = np.zeros((n, 53), dtype=np.float32)
    for p in range(2):
        part = load_part(out, p)
        x[part.orig_ids.numpy()] = part.x
    frame = pd.DataFrame(humloc.edge_attr.numpy().astype(np.float64))
    means = frame.groupby(humloc.edge_index[1].numpy()).mean()
    want = np.zeros((n, 21))
    want[means.index.to_numpy()] = means.to_numpy()
    assert np.array_equal(x[:, :32], humloc.x.numpy())
    assert np.abs(x[:, 32:] - want).max() < 1e-6
    no_in = np.setdiff1d(np.arange(n), humloc.edge_index[1].numpy())
    assert no_in.size > 0 and not x[no_in, 32:].any()
    # the partition cache keys the setting: no folder is reused across settings
    folders = {cache_folder("humloc", 2, cache_dir=str(tmp_path), edge_to_node=e) for e in (None, "mean", "sum")}
    assert len(folders) == 3


def test_host_parts_bring_their_edge_features(humloc2):
    """--host-graph with edge features: the rows of the edges drawn from a part read on this host
    are the owner's (equal to the rows it sends), and no edge row crosses the communicator."""
    from dist_workers import sample_asked_and_here

    seeds = torch.arange(0, 3106, 7)
    res = launch_local(sample_asked_and_here, 2, args=(humloc2, seeds, [5, 5], 3, [[1], [0]]))
    for got in res:
        asked, here = got["asked"], got["here"]
        for a, h in zip(asked["blocks"], here["blocks"]):
            assert all(torch.equal(x, y) for x, y in zip(a, h))
            assert a[3].shape == (a[2].shape[1], 21)
        assert asked["stats"]["sent"]["edge_attr"] > 0 and here["stats"]["bytes_sent"] == 0 and here["host"] > 0
