"""Single-process references the pipelines are tested against (test code, not the engine's).

- :func:`reference_run`: the unpipelined run of the layer pipeline over every part of a folder
  in this process: one sampler over the whole graph keyed like the distributed one (original
  ids, pipeline d's streams), the same seed schedule and dropout keys, the pipelines'
  gradients averaged as the stage replicas' all-reduce averages them;
- :func:`full_graph_reference`: full-graph training of the same model on the same graph (the
  unpipelined, unchunked run of chunk pipelining), with dropout keys equal to a one-chunk
  pipeline's.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from gnnscale.nn.models import LayerHooks
from gnnscale.nn.spec import ModelSpec
from gnnscale.parallel.chunk_graph import load_chunk_graph
from gnnscale.parallel.stage import rng_key
from gnnscale.samplers.seeds import SeedSchedule
from gnnscale.tasks.evaluation import mask_accuracy


def one_thread(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with one torch thread, as each test worker has
    (``threads_per_worker=1``): matrix products then sum in the same order as theirs."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return fn(*args, **kwargs)
    finally:
        torch.set_num_threads(threads)


def reference_steps(model, steps, keys, x_rows, labels, degree=None, lr: float = 0.003,
                    weight_decay: float = 0.0) -> list[list[float]]:
    """One process, the whole model. ``steps[i][d]`` are the micro-batches pipeline d trains in
    step i (``keys[i]`` their dropout keys): each pipeline's gradient is its seeds' mean
    cross-entropy, the step's gradient their mean; one Adam step per step. Returns the losses
    per step and pipeline (``[i][d]``); ``model`` is trained in place."""
    opt = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    params = list(model.parameters())
    model.train()
    losses = []
    for groups, ks in zip(steps, keys):
        step_losses, summed = [], None
        for batches in groups:  # pipeline d's gradient, then their mean (as the replicas' all-reduce)
            opt.zero_grad(set_to_none=True)
            total = sum(int(b.seeds.numel()) for b in batches)
            loss_sum = 0.0
            for b, k in zip(batches, ks):
                h, _ = model.forward_layers(x_rows(b.blocks[0].src_ids), None, b.blocks, 0, model.num_layers,
                                            LayerHooks(node_degree=degree, rng_key=k))
                loss = F.cross_entropy(h, labels(b.seeds), reduction="sum") / total
                loss.backward()
                loss_sum += float(loss.detach())
            step_losses.append(loss_sum)
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            summed = grads if summed is None else [a + g for a, g in zip(summed, grads)]
        for p, g in zip(params, summed):
            p.grad = g / len(groups) if len(groups) > 1 else g
        opt.step()
        losses.append(step_losses)
    return losses


def reference_run(parts_dir: str, cfg, micro: int) -> dict:
    """The layer pipeline's run in one process; ``losses`` (per pipeline d, its step losses) and
    the whole model's ``state``."""
    from gnnscale.partitioning import load_meta, load_part
    from gnnscale.samplers import NeighborSampler

    parts = [load_part(parts_dir, d, verify=False) for d in range(load_meta(parts_dir)["num_parts"])]
    edges = torch.tensor([0] + [int(p.indptr[-1]) for p in parts]).cumsum(0)
    indptr = torch.cat([parts[0].indptr[:1]] + [p.indptr[1:] + edges[d] for d, p in enumerate(parts)])
    sampler = NeighborSampler(indptr, torch.cat([p.indices for p in parts]), list(cfg.fanouts), seed=cfg.seed,
                              node_keys=torch.cat([p.orig_ids for p in parts]))
    x = torch.cat([p.features(torch.arange(p.num_owned)) for p in parts])
    y = torch.cat([p.y for p in parts])
    degree = torch.diff(indptr)
    train = [torch.nonzero(p.train_mask).flatten() + p.offset for p in parts]
    meta = parts[0].meta
    model = ModelSpec.of(cfg, meta["feature_dim"], meta["num_classes"], num_layers=len(cfg.fanouts)).build(cfg.seed)
    counts = [t.numel() for t in train]
    schedules = [SeedSchedule(t, counts, cfg.batch_size * micro, cfg.seed, d, cfg.max_steps, micro=micro)
                 for d, t in enumerate(train)]
    steps, keys = [], []
    for epoch in range(cfg.epochs):
        seeds = [s.epoch(epoch) for s in schedules]
        for i in range(schedules[0].steps):
            steps.append([[sampler.sample(s, epoch, i * micro + m) for m, s in enumerate(seeds[d][i])]
                          for d in range(len(parts))])
            keys.append([rng_key(cfg.seed, epoch, i, m) for m in range(micro)])
    losses = reference_steps(model, steps, keys, lambda ids: x[ids], lambda ids: y[ids],
                             degree=degree if model.uses_degree else None, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return dict(losses=[[step[d] for step in losses] for d in range(len(parts))],
                state={name: v.detach().clone() for name, v in model.state_dict().items()})


def full_graph_reference(parts_dir: str, cfg, epochs: int | None = None, eval_every: int = 0) -> dict:
    """Full-graph training in one process: ``losses`` per epoch, ``accuracy`` (train/val/test of
    the final weights, exact inference), ``history`` (the same with ``epoch``, every
    ``eval_every`` epochs and after the last; empty when 0) and ``state``."""
    graph = load_chunk_graph(parts_dir, verify=False)
    num_layers = cfg.model_layers()
    model = ModelSpec.of(cfg, graph.feature_dim, graph.num_classes, num_layers=num_layers).build(cfg.seed)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    blocks = [graph.full_block()] * num_layers
    train = graph.masks["train"]
    total = cfg.epochs if epochs is None else epochs

    def evaluate() -> dict:
        model.eval()
        with torch.no_grad():
            pred = model.forward_layers(graph.x, None, blocks, 0, num_layers, LayerHooks(node_degree=graph.degree))[0].argmax(1)
        return mask_accuracy(pred, graph.y, graph.masks)

    losses, history = [], []
    for epoch in range(total):
        model.train()
        opt.zero_grad(set_to_none=True)
        out, _ = model.forward_layers(graph.x, None, blocks, 0, num_layers,
                                      LayerHooks(node_degree=graph.degree, rng_key=rng_key(cfg.seed, epoch, 0, 0)))
        loss = F.cross_entropy(out[train], graph.y[train])
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if eval_every and ((epoch + 1) % eval_every == 0 or epoch == total - 1):
            history.append(dict(epoch=epoch, **evaluate()))
    accuracy = {k: v for k, v in history[-1].items() if k != "epoch"} if history else evaluate()
    return dict(losses=losses, accuracy=accuracy, history=history,
                state={n: v.detach().clone() for n, v in model.state_dict().items()})


def load_saved_state(path: str) -> dict:
    """The weights of a ``--save-model`` file."""
    from gnnscale.training.model_io import read_model_file

    return read_model_file(path)["state"]
