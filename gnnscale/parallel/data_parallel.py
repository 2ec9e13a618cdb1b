"""Data parallelism: every worker trains the whole model on mini-batches of its own part, DDP
averaging the gradients (the plain step).

A step: the loader's MiniBatch (sampled across the parts by the owners, input rows from the
part, the cache or their owners), the exchange mode's historical rows (``historical``),
forward, loss, backward inside DDP's gradient all-reduce, the optimizer step, then the exchange
mode's push and refresh. Every rank takes the same number of steps per epoch
(:class:`~gnnscale.samplers.seeds.SeedSchedule`), so no rank waits in a collective for a peer
that has stopped issuing them.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterator

import torch

from gnnscale.data.loader import MiniBatchLoader, wait_ready
from gnnscale.data.open import open_data
from gnnscale.history.modes import exchange_mode
from gnnscale.nn.spec import ModelSpec
from gnnscale.parallel.axis import Axis, RunContext, StepResult
from gnnscale.parallel.stage import rng_key
from gnnscale.parallel.step_hooks import step_hooks
from gnnscale.process.eager import adam, ddp
from gnnscale.process.threads import serial_step
from gnnscale.partitioning import load_part
from gnnscale.samplers import check_fanouts
from gnnscale.samplers.seeds import SeedSchedule
from gnnscale.tasks.evaluation import use_layerwise
from gnnscale.tasks.task import make_task

log = logging.getLogger("gnnscale.train")

_COLLECTIVE_MARKERS = ("gloo", "nccl", "timed out", "connection closed", "connection reset", "c10d", "processgroup")


def is_collective_error(err: Exception) -> bool:
    """Whether ``err`` (raised by a DDP model's step) came from a collective: torch's process
    groups name their transport or say a wait timed out or a connection closed."""
    text = str(err).lower()
    return any(m in text for m in _COLLECTIVE_MARKERS)


def collective_step(comm, opt, compute: Callable[[], tuple[torch.Tensor, torch.Tensor]],
                    complete: "Callable[[], None] | None" = None) -> tuple:
    """``compute()`` (forward and loss), backward (DDP's gradient all-reduce) and the optimizer step.

    Returns ``compute``'s (output, loss). ``complete``: called after the backward, before the
    optimizer (a :class:`FullGradients`: the gradients of the parameters the step left unused).
    A failed collective of DDP's (a gradient bucket's all-reduce; its buffer broadcast in
    forward) surfaces as a plain RuntimeError; on more than one rank it is re-raised as the
    communicator's PeerError, which names the silent rank. A layer's own error stays itself.
    """
    try:
        out, loss = compute()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if complete is not None:
            complete()
    except RuntimeError as err:
        if comm.failure is None and (comm.world_size == 1 or not is_collective_error(err)):
            raise  # a layer's own error stays itself
        raise comm.collective_failed("all_reduce", "gradient", err) from err
    opt.step()
    return out, loss


class FullGradients:
    """What DDP's ``find_unused_parameters`` does, without its search of the autograd graph after
    every backward (nor its warning, printed by every rank whenever a step used every parameter).

    DDP built without the search all-reduces a bucket once every parameter in it has a gradient.
    After the backward, ``self()`` (every rank, every step):

    1. gives the parameters this rank's step left without a gradient (``grad`` None) a zero
       gradient through a second backward of ``0 * sum(p.sum())``: their buckets all-reduce, in
       bucket order on every rank, as DDP's search marks them ready with zeros;
    2. all-reduces how many ranks used each parameter (int32 [P], ``control``: after DDP's
       buckets, so on the same group as they); a parameter no rank used gets ``grad`` None again,
       as DDP leaves it (the optimizer skips it). One used elsewhere keeps the average, with this
       rank's zeros in it, as with the search.

    Args:
        params: the DDP module's parameters that require a gradient, in a fixed order.
        comm: the Communicator of DDP's group (its ``all_reduce``).
    """

    def __init__(self, params: list, comm) -> None:
        self.params, self.comm = list(params), comm

    def __call__(self) -> None:
        params = self.params
        used = [p.grad is not None for p in params]
        missing = [p for p, u in zip(params, used) if not u]
        if missing:
            torch.autograd.backward(torch.stack([p.sum() for p in missing]).sum() * 0.0)
        users = self.comm.all_reduce(torch.tensor(used, dtype=torch.int32), "sum", "control")
        if bool((users == 0).any()):
            for p, n in zip(params, users.tolist()):
                if n == 0:
                    p.grad = None


def may_skip_parameters(net: torch.nn.Module, cfg) -> bool:
    """Whether a step may leave some of ``net``'s parameters without a gradient (so DDP must look
    for them): a typed model (a batch may miss a relation or a node type) or a layer that is not
    one of the zoo's homogeneous layers (a user's layer, an import path: unknown). The zoo's
    layers, decoders, edge heads, jumping knowledge and norms use every parameter every step."""
    from gnnscale.nn.layers.registry import ZOO
    from gnnscale.nn.link import gnn_of

    gnn = gnn_of(net)
    return getattr(gnn, "node_types", None) is not None or not (isinstance(cfg.layer, str) and cfg.layer in ZOO) \
        or getattr(cfg, "model", None) is not None  # a user's whole model: unknown


def train_counts(comm, n: int) -> list[int]:
    """Every rank's training-node count (one reduction by name)."""
    mine = {f"rank{r}": n if r == comm.rank else 0 for r in range(comm.world_size)}
    counts = comm.all_reduce_named(mine, "sum")
    return [int(counts[f"rank{r}"]) for r in range(comm.world_size)]


class DataParallel(Axis):
    """One rank's data-parallel training: its part, sampler, feature store, model (DDP) and optimizer."""

    replicated = True

    def __init__(self, ctx: RunContext) -> None:
        cfg, dims, device = ctx.cfg, ctx.dims, ctx.device
        self.cfg, self.dims, self.device, self.copier = cfg, dims, device, ctx.copier
        self.rank, self.world = dims.rank, dims.world
        self.parts_dir = ctx.parts_dir
        self.part = part = load_part(ctx.parts_dir, dims.rank, verify=cfg.verify)
        ctx.phase("part load")
        fanouts = check_fanouts(cfg.fanouts)
        self.edge_dim = ctx.edge_dim  # edge features per edge the layers and samplers read (0: none)
        # what is trained: nodes (the sampler's seeds) or edges (a link sampler around it)
        self.task = task = make_task(part, cfg, dims.comm)  # a node task's --pos-weight auto: every rank's labels
        meta = part.meta
        # the outputs: a node target kind's width (C, 1, C or D), or an edge head's (C classes or D targets)
        self.spec = ModelSpec.of(cfg, meta.get("feature_dim", 0), task.out_dim,
                                 num_layers=len(fanouts), typed=meta.get("typed"), edge_dim=self.edge_dim)
        # what a step does beside the replicated model: a typed graph's featureless node types' learned
        # embeddings, sharded by owner, pulled before each forward and updated by a sparse Adam after
        # each backward, outside DDP (gnnscale.parallel.step_hooks)
        self.hooks = hooks = step_hooks(part, cfg, dims.comm, device)
        net = self.spec.build(seed=cfg.seed, external_embeddings=hooks.external_embeddings).to(device)  # identical
        self.net = net
        # samplers, feature store (the other parts on this host read from their files) and, for
        # GCN-style layers on sampled blocks, the degree store (own nodes' in-degrees, others' asked)
        self.data = data = open_data(part, cfg, dims.data, device, ctx.plan.mode, parts_dir=ctx.parts_dir,
                                     fanouts=fanouts, edge_attr=self.edge_dim > 0 and not task.own_edge_features,
                                     degrees=net.uses_degree)
        self.sampler, self.eval_sampler, eval_fanouts = data.sampler, data.eval_sampler, data.eval_fanouts
        self.features, self.degrees, self.host_reads = data.features, data.degrees, data.host_reads
        self.sampler.kernels.warmup()
        self.batch_sampler = task.batch_sampler(self.sampler, dims.data)
        ctx.phase("groups and samplers")
        # a typed step is hundreds of small per-relation ops: one thread each, the worker's threads
        # for the wide ones (gnnscale.process.threads; issue 44 4c)
        self.serial_steps = meta.get("typed") is not None
        self.mode = exchange_mode(net, part, self.sampler, self.features, self.degrees, dims.embedding, dims.comm,
                                  cfg, device, inputs=hooks.eval_inputs)
        ctx.phase("model and halo")
        self.complete = None
        if self.world > 1:
            # DDP without its search for unused parameters (and its warning): models that may leave
            # some without a gradient in a step get them from FullGradients after the backward, as
            # the search would. Without the search DDP rebuilds its buckets after the first step,
            # so the hook reduces each gradient on its own: a run resumed from a checkpoint reduces
            # every gradient as the uninterrupted run does (bit-equal final weights).
            try:  # DDP broadcasts rank 0's weights: a peer that died before it is named, not a crash
                self.model = ddp(net, device_ids=[device.index] if device.type == "cuda" else None,
                                 find_unused_parameters=False)
            except RuntimeError as err:
                if not is_collective_error(err):
                    raise
                raise dims.comm.collective_failed("broadcast", "control", err) from err
            self.model.register_comm_hook(None, dims.comm.ddp_comm_hook(per_tensor=True))
            if may_skip_parameters(net, cfg):
                self.complete = FullGradients([p for p in net.parameters() if p.requires_grad], dims.comm)
        else:
            self.model = net
        # the model's dropout is keyed by node (node_keys); this seeds what else draws from torch
        torch.manual_seed(cfg.seed * 1000 + self.rank + 1)
        self.opt = adam(net.named_parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)  # DDP wraps the same
        ctx.phase("DDP and optimizer")
        self.train_ids = task.train_ids()
        counts = train_counts(dims.comm, self.train_ids.numel())
        self.schedule = SeedSchedule(self.train_ids, counts, cfg.batch_size, cfg.seed, self.rank, cfg.max_steps)
        # a node task's loss is the mean over every rank's seeds of the step (DDP averages the ranks')
        self.step_totals = self.schedule.step_totals(counts) if task.seed_mean and self.world > 1 else None
        historical = self.mode.halo is not None
        # typed graphs too: streamed layer-wise inference (the sharded rows attached by ``inputs``)
        self.layerwise_eval = use_layerwise(cfg.eval_method, eval_fanouts, historical)
        hold = historical and cfg.halo_features == "hold"
        self.cache_info = data.fill_cache(self._sample_epoch, dims.comm, held=self.mode.halo.halo_ids if hold else None,
                                          resumed=ctx.resume.get("cache_ids"), complete=hold and self.layerwise_eval)
        ctx.phase("feature cache")
        self.loader = MiniBatchLoader(self.batch_sampler, self.features, task.labels(), self.degrees, self.copier,
                                      dims.health, keys=self.node_keys())
        # the task's evaluator: nodes' metric by the evaluation sampler or layer-wise, or the pairs' scored
        # layer-wise (the sharded rows attached to the inputs by the hooks)
        self.evaluator = task.evaluator(data, dims.comm, self.layerwise_eval,
                                        tables=self.mode.full_logits if historical else None,
                                        inputs=hooks.eval_inputs)
        self._prefetch = None
        self._held = None

    def node_keys(self):
        """The keyed dropout's :class:`~gnnscale.data.node_keys.NodeKeyStore` of a node task whose model
        drops out (None otherwise): masks keyed by (seed, epoch, step, layer, original id, column),
        the same whatever the number of workers (ARCHITECTURE.md, "The same masks on any number of workers")."""
        if not self.task.keyed_dropout or not self.cfg.dropout > 0:
            return None
        from gnnscale.data.node_keys import NodeKeyStore

        host = {k: g.owned_keys for k, g in self.sampler.host.items()}
        return NodeKeyStore(self.part.orig_ids, self.part.book, self.dims.data, host, self.sampler.host_complete)

    def _sample_epoch(self, epoch: int):
        for step, seeds in enumerate(self.schedule.epoch(epoch)):
            yield self.batch_sampler.sample(seeds, epoch=epoch, step=step)

    def start(self, gstep: int) -> dict[str, float]:
        if self.mode.halo is None:
            return {}
        return {"halo table fill": self.mode.start(step=gstep - 1)}

    def steps(self) -> int:
        return self.schedule.steps

    def batches(self, epoch: int, first: int) -> Iterator:
        self.model.train()
        batches = self.schedule.epoch(epoch)
        cfg = self.cfg
        feed = self.loader.stream(lambda step: self.loader.load(batches[step], epoch, step), first, len(batches),
                                  cfg.pipeline, cfg.pipeline_depth, self.features.comm.wait_bound())
        self._prefetch = feed if cfg.pipeline else None
        return iter(feed)

    def step(self, epoch: int, step: int, gstep: int, mb) -> StepResult:
        with serial_step(self.serial_steps):
            return self._step(epoch, step, gstep, mb)

    def _step(self, epoch: int, step: int, gstep: int, mb) -> StepResult:
        wait_ready(self.copier, mb)
        health = self.dims.health
        health.enter("forward/backward and gradient all-reduce", epoch, step)
        hist, emit = self.mode.reads(mb, gstep)
        x, blocks, seeds = mb.x, mb.device_blocks, mb.seeds
        x = self.hooks.before_forward(x, health, epoch, step)  # a typed graph: this step's rows of the sharded tables

        task = self.task

        keyed = {}
        if mb.node_keys is not None:  # dropout keyed by (seed, epoch, step, layer) and each row's node
            keyed = {"rng_key": rng_key(self.cfg.seed, epoch, step, 0), "row_keys": mb.node_keys}

        # this rank's share of the step's seeds (x world, as DDP divides by it): the ranks' scaled
        # means average to the mean over all seeds, as one process computes it
        share = seeds.numel() * self.world / self.step_totals[step] if self.step_totals else 1.0
        means = []

        def compute():
            if hist is not None:
                out = self.model(x, blocks, hist=hist, emit=emit, node_degree=mb.degrees, **keyed)
            else:
                out = task.forward(self.model, x, blocks, mb, node_degree=mb.degrees, **keyed)
            if not seeds.numel():  # a rank with no training seeds still joins DDP's gradient all-reduce
                means.append(out.sum() * 0.0)
                return out, means[0]
            means.append(task.loss(out, mb))
            return out, (means[0] * share if share != 1.0 else means[0])

        out, _ = collective_step(self.dims.comm, self.opt, compute, self.complete)
        loss = means[0]  # reported: this rank's mean, as before
        self.hooks.after_backward(self.world, health, epoch, step)  # sharded rows' gradients to their owners
        # The step's graph (and the block adjacencies its nodes keep) is freed once the next step
        # has run, as the loop always did: freed at once, its pages went back to the OS and were
        # faulted in again by the next batch (2.5x the minor page faults, epochs ~10% slower).
        self._held = (out, loss)
        if self.mode.halo is not None:
            health.enter("embedding refresh and push", epoch, step)
            self.mode.after_step(epoch, gstep, mb, emit)
        value = float(loss.detach())
        correct, n = task.correct(out, mb)
        return StepResult(value, value * n, correct, n)

    def end_epoch(self, epoch: int, times: dict) -> dict:
        import time

        self._held = None  # the last step's graph, before evaluation
        t0 = time.perf_counter()
        self.mode.end_epoch()
        times = dict(times)
        times["compute"] += time.perf_counter() - t0
        if self._prefetch is not None:
            times["wait"] = self._prefetch.wait_seconds
        times.update(sample=self.loader.times["sample"], fetch=self.loader.times["fetch"], bubble=0.0,
                     grad_sync=self.dims.comm.stats.grad_sync_seconds)
        return {"stage_seconds": times, "prefetch_depth": self._prefetch.queue.maxsize if self._prefetch else None}

    def evaluate(self, splits, gstep: int) -> dict:
        with serial_step(self.serial_steps):  # a typed graph's inference: small per-relation ops too
            acc = self.evaluator.splits(self.net, self.model, splits, step=gstep - 1)
        return {**acc, "evaluation": dict(self.evaluator.last)}

    def whole_state(self) -> dict | None:
        whole = self.whole_model()
        return whole.state_dict() if whole is not None else None

    def whole_model(self):
        """The whole model on rank 0 (None elsewhere); with sharded embeddings a model holding
        the gathered tables (collective)."""
        return self.hooks.whole_model(self.net, self.spec, self.rank, self.parts_dir, self.part.meta.get("typed"))

    def rank_state(self) -> dict | None:
        return self.hooks.state_dict()

    def load_rank_state(self, state: dict | None) -> None:
        self.hooks.load_state_dict(state)

    def digest_params(self):
        return self.hooks.digest_params(self.model)

    def feature_counters(self) -> dict:
        return dict(self.features.stats)

    def ages(self) -> tuple[dict, int]:
        return self.mode.age_counts(), (self.mode.staleness if self.mode.halo is not None else 0)

    def reset_stats(self) -> None:
        self.features.reset_stats()
        self.mode.reset_stats()
        self.loader.times = {"sample": 0.0, "fetch": 0.0}

    def info(self) -> dict:
        return {"cache": self.cache_info, "exchange": self.mode.info(), "sampler_backend": self.sampler.kernels.name,
                "task": self.task.name, "metric": self.task.metric, "host_reads": self.host_reads.info()}

    def cache_ids(self):
        cache = self.features.cache
        return cache.ids.clone() if cache is not None else None

