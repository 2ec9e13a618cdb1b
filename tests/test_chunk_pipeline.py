"""Chunk pipelining (issue 14, GNNPipe): full-graph training whose chunks flow through layer
stages; exact with one chunk, bounded staleness with several (real processes over gloo, Cora)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from references import full_graph_reference, load_saved_state

from gnnscale.config import TrainConfig
from gnnscale.nn.models import LayerHooks
from gnnscale.parallel.chunk_graph import chunk_block, load_chunk_graph
from gnnscale.parallel.chunk_pipeline import StalenessError
from gnnscale.parallel.chunk_tables import HaloGradients, StageTables
from gnnscale.process.launch import launch_local
from gnnscale.training.trainer import train_worker


def _cfg(**kw) -> TrainConfig:
    base = dict(epochs=3, hidden=16, lr=0.01, dropout=0.5, seed=3, timeout=60.0, device="cpu", layer="gcnii",
                num_layers=4, chunks=True, eval_every=0, verify=False, progress=False)
    base.update(kw)
    return TrainConfig(**base)


def _chunks(parts: str, cfg: TrainConfig, k: int, tmp_path=None, **kw) -> list[dict]:
    """A chunk pipeline of ``k`` stages through the one trainer (``--save-model`` in ``tmp_path``)."""
    cfg = TrainConfig(**{**cfg.__dict__, "pipeline_stages": k, **kw,
                         **({"save_model": str(tmp_path / "model.pt")} if tmp_path is not None else {})})
    return launch_local(train_worker, k, args=(parts, cfg))


def _stage(res: list[dict], s: int, epoch: int = -1) -> dict:
    """Stage ``s``'s figures of an epoch (the same list on every rank)."""
    return next(st for st in res[0]["epochs"][epoch]["pipeline"] if st["stage"] == s)


def test_chunk_block_holds_full_neighborhoods_and_the_halo():
    # Chunk [2, 5) of a 7-node graph; in-edges (src -> dst) given as CSC over its 3 nodes.
    indptr = torch.tensor([0, 2, 3, 6])
    indices = torch.tensor([0, 3, 6, 2, 4, 0])  # node 2 <- 0, 3; node 3 <- 6; node 4 <- 2, 4, 0
    b = chunk_block(indptr, indices, 2, 5)
    assert b.dst_ids.tolist() == [2, 3, 4]
    assert b.src_ids.tolist() == [2, 3, 4, 0, 6] and b.num_hist == 2 and b.hist_ids.tolist() == [0, 6]
    edges = sorted(zip(b.src_ids[b.edge_index[0]].tolist(), b.dst_ids[b.edge_index[1]].tolist()))
    assert edges == sorted([(0, 2), (3, 2), (6, 3), (2, 4), (4, 4), (0, 4)])


def test_chunks_cover_the_graph(cora, cora_partition):
    g = load_chunk_graph(cora_partition(4), verify=False)
    assert g.num_chunks == 4 and g.num_nodes == 2708
    full = g.full_block()
    assert full.num_edges == sum(b.num_edges for b in g.blocks) == int(g.degree.sum())
    # Each chunk's halo is exactly the in-neighbours outside it.
    for c, b in enumerate(g.blocks):
        lo, hi = g.bounds(c)
        src = b.src_ids[b.edge_index[0]]
        outside = torch.unique(src[(src < lo) | (src >= hi)])
        assert torch.equal(outside, b.hist_ids)


def test_stage_tables_check_every_read():
    t = StageTables([1, 2], num_nodes=6, dims=[3, 4, 4], bound=2, what="chunk stage 0")
    t.write(1, 0, 6, torch.ones(6, 4), step=-1)
    assert t.read(1, torch.tensor([0, 4]), step=1).tolist() == [[1.0] * 4] * 2  # two steps old: within the bound
    t.write(1, 0, 3, torch.full((3, 4), 2.0), step=2)
    assert t.read(1, torch.tensor([0, 1]), step=2).tolist() == [[2.0] * 4] * 2
    with pytest.raises(StalenessError, match=r"chunk stage 0, layer-1 table, step 2: 1 of 2 rows read are older than "
                                             r"the staleness bound \(2 steps; 0 never written, the oldest written one 3 "
                                             r"steps; e.g. \[4\]\)"):
        t.read(1, torch.tensor([0, 4]), step=2)
    with pytest.raises(StalenessError, match="2 never written, none written"):
        t.read(2, torch.tensor([0, 1]), step=0)
    assert (t.reads, t.stale_reads, t.max_age) == (4, 2, 2)


def test_halo_gradients_reach_each_rows_owner_once():
    # chunks [0, 2) [2, 4) [4, 6); chunk 0 reads rows 3 and 4, chunk 2 rows 1 and 3 (chunk 1 hands in nothing)
    halos = [torch.tensor([3, 4]), torch.tensor([1, 5]), torch.tensor([1, 3])]
    g = HaloGradients([1], torch.tensor([0, 2, 4, 6]), halos, bound=1)
    assert g.take(1, 1, step=0) is None  # nothing waits yet
    g.add(1, 0, torch.tensor([[1.0, 2.0], [3.0, 4.0]]), step=0)  # chunk 0's backward: rows 3, 4
    g.add(1, 2, torch.tensor([[5.0, 5.0], [1.0, 1.0]]), step=0)  # chunk 2's: rows 1, 3
    assert g.take(1, 1, step=0).tolist() == [[0.0, 0.0], [2.0, 3.0]]  # rows 2, 3: row 3 from chunks 0 and 2
    assert g.take(1, 0, step=1).tolist() == [[0.0, 0.0], [5.0, 5.0]]  # chunk 2's, one step old
    assert (g.rows_taken, g.stale_rows, g.max_age) == (3, 1, 1)
    with pytest.raises(StalenessError, match=r"step 2, layer 1: chunk 2's halo gradients from chunk 0 are 2 steps "
                                             r"old, beyond the staleness bound \(1 steps\)"):
        g.take(1, 2, step=2)
    assert g.nbytes == 2 * 2 * 2 * 4


def test_stage_balancing_costs_fold_in_what_a_stage_runs_besides_its_layers(cora_partition, monkeypatch):
    import gnnscale.parallel.costs as cp
    from gnnscale.nn.spec import ModelSpec

    g = load_chunk_graph(cora_partition(4), verify=False)
    model = ModelSpec.of(_cfg(num_layers=6), g.feature_dim, g.num_classes).build(3)
    # Layers 1..5 are alike: one median each, whatever the noise of a pass.
    costs = cp.chunk_layer_costs(model, g)
    assert len(costs) == 6 and min(costs) > 0 and len(set(costs[1:])) == 1
    # Stage 0 gathers and encodes the halo's rows (layer 0's leaves); every later stage encodes
    # the chunk's own rows for x0: with costs of 1 per layer and 1 ms per encoded row, layer 0
    # carries + halo rows - chunk rows (ms), beside the timed gather (on a clock that stands
    # still here, so that the sum is exact: the test asserts values, not the machine's speed).
    monkeypatch.setattr(cp, "measure_layer_costs", lambda m, blocks, x, hist=None: [1.0] * 6)
    monkeypatch.setattr(cp, "_encoder_seconds", lambda m, x: 1e-3 * x.shape[0])
    table = cp._table_seconds(g, 16, True)  # a table layer's reads, writes and halo gradients
    assert table > 0 and cp._table_seconds(g, 16, False) > 0
    monkeypatch.setattr(cp, "_table_seconds", lambda graph, d, halo_gradients: 0.5 if halo_gradients else 0.25)
    monkeypatch.setattr(cp, "time", SimpleNamespace(perf_counter=lambda: 0.0))
    costs = cp.chunk_layer_costs(model, g)
    lo, hi = g.bounds(0)
    expected = 1.0 + 1e-3 * (g.blocks[0].num_hist - (hi - lo))
    assert costs[1:] == [1.5] * 5 and costs[0] == pytest.approx(expected, rel=1e-12)
    assert cp.chunk_layer_costs(model, g, halo_gradients=False)[1:] == [1.25] * 5
    # A large chunk is probed on its first rows, with chunk 0's halo rows per node.
    costs = cp.chunk_layer_costs(model, g, max_rows=300)
    expected = 1.0 + 1e-3 * (round(g.blocks[0].num_hist * 300 / (hi - lo)) - 300)
    assert costs[0] == pytest.approx(expected, rel=1e-12) and costs[1] == pytest.approx(1.0 + 0.5 * 300 / (hi - lo))
    probe, full = cp._probe_block(g.blocks[0], lo, 300), g.blocks[0]
    keep = full.edge_index[1] < 300
    src = full.src_ids[full.edge_index[0][keep]]
    assert probe.dst_ids.tolist() == list(range(lo, lo + 300))
    assert torch.equal(probe.hist_ids, torch.unique(src[(src < lo) | (src >= lo + 300)]))
    assert sorted(zip(probe.src_ids[probe.edge_index[0]].tolist(), probe.dst_ids[probe.edge_index[1]].tolist())) \
        == sorted(zip(src.tolist(), full.dst_ids[full.edge_index[1][keep]].tolist()))
    # A halo larger than the chunk puts fewer layers on stage 0.
    assert g.blocks[0].num_hist > 0
    from gnnscale.planning.schedules import plan_stages

    heavy = [2.5] + [1.0] * 5
    assert plan_stages(6, 2, None, heavy) == [(0, 2), (2, 6)]


@pytest.mark.parametrize("k, schedule, layer", [(2, "1f1b", "gcnii"), (3, "gpipe", "gcnii"), (2, "gpipe", "sage")])
def test_one_chunk_equals_full_graph_training(cora_partition, tmp_path, k, schedule, layer):
    """With one chunk there is no halo: K pipelined stages train exactly as one process does
    full-graph training (same losses, same final weights, GCNII's encoder copies summing their
    gradients across the stages)."""
    parts = cora_partition(1)
    cfg = _cfg(layer=layer, eval_every=3)
    ref = full_graph_reference(parts, cfg)
    res = _chunks(parts, cfg, k, tmp_path, schedule=schedule)
    assert res[-1]["step_losses"] == pytest.approx(ref["losses"], abs=1e-5)  # the last stage's, one per epoch
    state = load_saved_state(str(tmp_path / "model.pt"))
    assert set(state) == set(ref["state"])
    for name, v in ref["state"].items():
        assert torch.allclose(state[name], v, atol=1e-5), name
    if layer == "gcnii":
        assert all(_stage(res, s)["encoder_gradient_bytes"] > 0 for s in range(k))
    assert res[0]["epochs"][-1]["test_acc"] == pytest.approx(ref["accuracy"]["test"], abs=1e-9)
    assert all(_stage(res, s)["reads"] == 0 and _stage(res, s)["max_age"] == 0 for s in range(k))


@pytest.mark.parametrize("schedule", ["1f1b", "gpipe"])
def test_several_chunks_read_no_row_older_than_one_step(cora_partition, schedule):
    """Four METIS chunks, 2 stages: every historical read is at most one step old (the bound is
    checked on every read), later chunks' rows are read from the previous pass, earlier ones
    fresh; the held chunks are 1F1B's <= K and GPipe's = M, measured; bytes between stages are
    the whole graph's rows once per pass each way (the tables are filled without a message)."""
    parts = cora_partition(4)
    cfg = _cfg(epochs=2)
    res = _chunks(parts, cfg, 2, stage_layers=(2, 2), schedule=schedule)
    g = load_chunk_graph(parts, verify=False, features=False)
    halo = sum(g.halo_sizes)
    for s in (0, 1):
        per_epoch = [_stage(res, s, e) for e in range(cfg.epochs)]
        lo, hi = per_epoch[0]["layers"]
        assert all(st["reads"] == halo * len(range(max(lo, 1), hi)) for st in per_epoch)
        assert all(st["max_age"] == 1 and 0 < st["stale_reads"] < st["reads"] for st in per_epoch)
        assert [st["peak_micro_batches"] for st in per_epoch] == ([4, 4] if schedule == "gpipe" else [2 - s] * 2)
    for e in range(cfg.epochs):
        assert _stage(res, 0, e)["bytes_sent"]["activation"] == 2708 * 16 * 4
        assert _stage(res, 1, e)["bytes_sent"]["activation_grad"] == 2708 * 16 * 4
        assert res[0]["epochs"][e]["embedding_age_max"] == 1  # the tables' ages, in the one schema
    assert res[0]["final_weights_sha256"] == res[1]["final_weights_sha256"]


def test_chunk_pipeline_reaches_full_graph_accuracy_on_cora(cora_partition):
    """GCNII 8 layers, 4 chunks through 2 stages: test accuracy within 3 points of full-graph
    training of the same model (the benchmark runs 16 layers, 3 datasets, 3 seeds)."""
    parts4, parts1 = cora_partition(4), cora_partition(1)
    cfg = _cfg(epochs=80, num_layers=8, hidden=64, dropout=0.6, weight_decay=5e-4, eval_every=80)
    ref = full_graph_reference(parts1, cfg, eval_every=40)
    res = _chunks(parts4, cfg, 2)
    acc = res[0]["epochs"][-1]["test_acc"]
    assert ref["accuracy"]["test"] > 0.75
    assert [h["epoch"] for h in ref["history"]] == [39, 79] and ref["history"][-1]["test"] == ref["accuracy"]["test"]
    # Evaluations along the way (model selection on validation) leave the training unchanged
    # (checked on 6 epochs: the 80 would only repeat it).
    short = _cfg(epochs=6, num_layers=8, hidden=64, dropout=0.6, weight_decay=5e-4, eval_every=6)
    evaluated = full_graph_reference(parts1, short, eval_every=2)
    assert [h["epoch"] for h in evaluated["history"]] == [1, 3, 5]
    assert evaluated["losses"] == full_graph_reference(parts1, short)["losses"]
    assert acc > 0.75 and abs(acc - ref["accuracy"]["test"]) <= 0.03, (acc, ref["accuracy"])


def test_cli_chunk_pipeline_and_its_errors(cora_partition, tmp_path):
    parts = cora_partition(4)
    metrics = tmp_path / "m.json"
    base = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts, "--chunks", "--layer", "gcnii",
            "--num-layers", "4", "--hidden", "16", "--epochs", "2", "--timeout", "60", "--no-verify"]
    done = subprocess.run(base + ["--pipeline-stages", "2", "--metrics", str(metrics), "--no-halo-gradients"],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "done: 2 epochs, chunk pipeline of 2 stages over 4 chunks, 1f1b" in done.stderr, done.stderr[-2000:]
    assert "test_acc" in done.stderr and ", 1f1b, halo gradients off" in done.stderr
    # a split measured by timings is logged as the flag that repeats it
    split = re.search(r"layers 0-(\d) \| (\d)-3 \(balanced by measured ms per layer: .*to repeat this run exactly, "
                      r"give --stage-layers (\d),(\d)\)", done.stderr)
    assert split, done.stderr[-2000:]
    first_end, second_start, n0, n1 = map(int, split.groups())
    assert second_start == first_end + 1 and (n0, n1) == (first_end + 1, 3 - first_end)
    m = json.loads(metrics.read_text())
    assert m["plan"]["mode"] == "chunk_pipeline" and m["plan"]["micro_batches"] == 4 and len(m["epochs"]) == 2
    for e in m["epochs"]:
        stages = sorted(e["pipeline"], key=lambda st: st["stage"])
        assert len(stages) == 2 and stages[0]["bytes_sent"]["activation"] == 2708 * 16 * 4
        assert {"bubble", "peak_activation_bytes", "peak_micro_batches", "max_age"} <= set(stages[1])
        assert e["bytes_sent_by_category"]["activation"] == 2708 * 16 * 4 and e["val_acc"] is not None
    bad = subprocess.run(base + ["--pipeline-stages", "2", "--workers", "4"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--chunks runs one pipeline of 2 stages over the whole graph" in bad.stderr
    bad = subprocess.run(base + ["--pipeline-stages", "5"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--pipeline-stages must be between 1 and the model's 4 layers" in bad.stderr
    # Issue 26's second failure: the report draws a chunk run as any other.
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "gnnscale", "report", str(metrics), "--out", str(out)],
                         capture_output=True, text=True, timeout=120)
    assert rep.returncode == 0, rep.stderr[-2000:]
    assert {p.name for p in out.iterdir()} >= {"loss.png", "accuracy.png", "stages.png", "bytes.png", "summary.txt"}
    assert "Traceback" not in rep.stderr


@pytest.mark.parametrize("halo_gradients", [True, False])
def test_halo_gradients_make_a_chunked_step_the_full_graph_gradient(cora_partition, halo_gradients):
    """Weights that do not move (lr 0) and no dropout make every table row current, so a step
    over 4 chunks through 2 stages (2 processes, layers 0-1 | 2-3) computes full-graph training's
    forward exactly. With halo gradients its gradient becomes exact too: every halo read's
    gradient reaches the row's owner, at stage 1's first layer as at any other (a later chunk's
    from the pass before, so gradients that cross chunks at several layers take a few passes to be
    complete: here, 4 layers, from the third step on). Without them it stays off."""
    from dist_workers import chunk_step_gradients

    from gnnscale.nn.spec import ModelSpec

    parts = cora_partition(4)
    cfg = _cfg(dropout=0.0, lr=0.0, weight_decay=0.0, num_layers=4)
    graph = load_chunk_graph(parts, verify=False)
    layers = cfg.model_layers()

    model = ModelSpec.of(cfg, graph.feature_dim, graph.num_classes).build(cfg.seed)
    full = graph.full_block()
    out, _ = model.forward_layers(graph.x, None, [full] * layers, 0, layers, LayerHooks(node_degree=graph.degree))
    train = graph.masks["train"]
    loss = torch.nn.functional.cross_entropy(out[train], graph.y[train])
    loss.backward()
    loss = float(loss.detach())
    want = {n: p.grad.clone() for n, p in model.named_parameters()}

    res = launch_local(chunk_step_gradients, 2, args=(parts, cfg, [(0, 2), (2, layers)], 4, halo_gradients),
                       threads_per_worker=1)
    errors = []
    for first, last in zip(res[0], res[1]):
        assert abs(last["loss"] - loss) < 1e-6  # the forward is exact
        got = {**last["grads"], **first["grads"]}  # the encoder: stage 0's copy (the copies' sum on each)
        assert set(got) == set(want)
        assert torch.allclose(first["grads"]["encoder.weight"], last["grads"]["encoder.weight"], atol=1e-7)
        errors.append(max(float((got[n] - want[n]).abs().max() / want[n].abs().max()) for n in want))
    if halo_gradients:  # the first step misses the later chunks' gradients (no pass before it)
        assert errors[0] > 1e-2 and errors[1] > 1e-4 and max(errors[2:]) < 1e-5, errors
    else:
        assert min(errors) > 1e-2 and max(errors) - min(errors) < 1e-5, errors


def test_halo_gradients_are_counted_and_aged(cora_partition):
    """One stage, in this process: the tables' reads and the halo gradients passed on, with their ages."""
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.parallel.chunk_pipeline import ChunkStage
    from gnnscale.process.comm import Communicator

    parts = cora_partition(4)
    cfg = _cfg(dropout=0.0, lr=0.0, weight_decay=0.0, num_layers=4)
    graph = load_chunk_graph(parts, verify=False)
    layers = cfg.model_layers()
    model = ModelSpec.of(cfg, graph.feature_dim, graph.num_classes).build(cfg.seed)
    stage = ChunkStage(model, [(0, layers)], 0, [0], Communicator(), graph, lr=0.0)
    for step in range(4):
        stage.step(step, [0] * graph.num_chunks, "1f1b")
    t, g = stage.tables, stage.halo_grads
    assert t.max_age == 1 and t.reads == 4 * sum(graph.halo_sizes) * (layers - 1)
    # some reached their owner a pass late; the last pass's reads of earlier chunks still wait
    assert g.max_age == 1 and 0 < g.stale_rows < g.rows_taken < t.reads
