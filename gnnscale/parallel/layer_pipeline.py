"""Layer pipeline parallelism: K stages, each running a run of consecutive layers on its own
worker, fed with M sampled micro-batches per optimizer step (GPipe or 1F1B, flushed).

One step of stage ``s`` (layers ``[start, end)``, see :func:`gnnscale.parallel.schedules.plan_stages`):

- every stage draws the step's M micro-batches itself, and only the hops it reads: the
  sampler's draws are keyed by (epoch, step, hop, node), so stage s, sampling the first
  L - start hops from the seeds, rebuilds exactly the whole sample's ``blocks[start:]`` and no
  block crosses a link (:func:`block_bytes` says what receiving them would cost instead: the
  ids and edges of the stage's blocks). The last stage samples least, the first everything;
- forward of micro-batch m: stage 0 reads its input rows, any other stage receives h^{start}
  (float32 [blocks[start-1].num_dst, dims[start]], and GCNII's x0 at the same rows) from
  stage s-1, runs its layers and sends h^{end} on; the last stage computes the loss;
- backward of m: the last stage back-propagates its loss; any other receives the gradient of
  its output from stage s+1; every stage but the first sends the gradient of its input back;
- after the M backwards (a flush) each stage steps its own optimizer over its own layers.

The loss of a step is the mean cross-entropy over all seeds of its M micro-batches, so a
pipelined step equals one unpipelined step accumulating the same M micro-batches
(:func:`reference_steps`). Dropout masks are keyed by (step, micro-batch, layer)
(``GNN.forward_layers(rng_key=...)``), so they too are equal whichever process runs a layer.

Every receive waits at most the run's timeout, and a silent neighbour stage is named in the
error. Per step each stage reports the bytes it sent and received between stages, the seconds
it waited for its neighbours (the bubble), and its peak of stored activations (micro-batches
held and the bytes autograd saved for them, measured with saved-tensor hooks).
"""
from __future__ import annotations

import datetime
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Sequence

import torch
import torch.distributed as dist
import torch.nn.functional as F

from gnnscale.samplers.seeds import epoch_steps, shuffled_batches
from gnnscale.process.comm import Communicator
from gnnscale.errors import PeerError
from gnnscale.nn.models import GNN
from gnnscale.parallel.schedules import PipelineError, check_pipeline, plan_stages, schedule
from gnnscale.samplers.block import Block, MiniBatch

log = logging.getLogger("gnnscale.data.prefetch")


@dataclass
class PipelineConfig:
    """A layer pipeline: ``stages`` K, ``stage_layers`` (None: balanced), ``micro_batches`` M
    per optimizer step, ``schedule`` ``gpipe`` or ``1f1b``."""

    stages: int = 2
    stage_layers: Sequence[int] | None = None
    micro_batches: int = 4
    schedule: str = "1f1b"


@dataclass
class StepStats:
    """One stage's figures for one optimizer step (or summed over steps)."""

    loss: float | None = None  # last stage: the step's mean loss
    bytes_sent: dict = field(default_factory=lambda: {"activation": 0, "activation_grad": 0})
    bytes_received: dict = field(default_factory=lambda: {"activation": 0, "activation_grad": 0})
    wait_seconds: float = 0.0  # blocked on a neighbour stage: the bubble
    busy_seconds: float = 0.0  # forward, backward and optimizer
    step_seconds: float = 0.0
    peak_micro_batches: int = 0  # most micro-batches whose activations were held at once
    peak_activation_bytes: int = 0  # most bytes autograd held saved for them at once


def block_bytes(blocks: Sequence[Block]) -> int:
    """Bytes of the blocks if a stage received them instead of rebuilding them: ids and edges."""
    return int(sum(b.src_ids.numel() * 8 + b.edge_index.numel() * 8 for b in blocks))


def epoch_seeds(train_ids: torch.Tensor, batch_size: int, micro: int, seed: int, epoch: int, rank: int,
                steps: int) -> list[list[torch.Tensor]]:
    """The epoch's steps of pipeline ``rank``, each a list of at most ``micro`` seed batches.

    The data-parallel seed schedule (:func:`gnnscale.samplers.seeds.shuffled_batches`) at
    ``batch_size * micro`` seeds per step (``steps`` of them, agreed by every pipeline with
    :func:`gnnscale.samplers.seeds.epoch_steps`), each step cut into ``micro`` near-equal micro-batches
    (fewer when the step has fewer seeds than ``micro``). No seed is left out: a part with fewer
    training nodes than a step holds gets smaller micro-batches. Every stage of a pipeline gets
    the same seeds.
    """
    out = []
    for ids in shuffled_batches(train_ids, batch_size * micro, seed, epoch, rank, steps):
        out.append(list(torch.tensor_split(ids, min(micro, ids.numel()))) if ids.numel() else [])
    return out


def agreed_steps(comm: Communicator, num_train: int, per_step: int) -> int:
    """Steps per epoch for every replica of ``comm`` (each with ``num_train`` training nodes):
    :func:`gnnscale.samplers.seeds.epoch_steps` of their counts at ``per_step`` seeds a step."""
    counts = comm.all_reduce_named({f"{r:05d}": num_train if r == comm.rank else 0 for r in range(comm.world_size)})
    return epoch_steps([int(counts[f"{r:05d}"]) for r in range(comm.world_size)], per_step)


def sample_step(sampler, seeds: Sequence[torch.Tensor], epoch: int, step: int) -> list[MiniBatch]:
    """Micro-batch m of ``step`` sampled with step key ``step * M + m`` (the same blocks on every
    stage; a distributed sampler's collectives run in the same order on each of its peers)."""
    return [sampler.sample(s, epoch, step * len(seeds) + m) for m, s in enumerate(seeds)]


def rng_key(seed: int, epoch: int, step: int, micro: int) -> int:
    """The dropout key of micro-batch ``micro`` of ``step`` (see ``GNN.forward_layers``)."""
    return ((seed * 1_000_003 + epoch) * 1_000_003 + step) * 1_000_003 + micro


def stage_model(model: GNN, start: int, end: int, keep_encoder: bool = False) -> GNN:
    """``model`` keeping only the parameters of layers ``[start, end)`` (and the encoder on the
    first stage, or on every stage with ``keep_encoder``; the head on the last): the others
    become empty placeholders, so a stage holds (and its optimizer steps) only its own layers.
    Built from the whole model, so every stage's weights equal the unpipelined model's."""
    for i in range(model.num_layers):
        if not start <= i < end:
            model.convs[i] = torch.nn.Identity()
            if model.norms is not None and i < len(model.norms):
                model.norms[i] = torch.nn.Identity()
    if start > 0 and not keep_encoder:
        model.encoder = None
    if end < model.num_layers:
        model.head = None
    return model


def all_reduce_gradients(params: Sequence[torch.Tensor], comm: Communicator, category: str, mean: bool) -> None:
    """Sum (``mean``: average) the gradients of ``params`` over ``comm``'s ranks: one all-reduce of
    their flat concatenation (a missing gradient counts as zeros), counted as ``category``."""
    grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
    flat = torch.cat([g.reshape(-1) for g in grads])
    comm.all_reduce(flat, "sum", category=category)
    if mean:
        flat /= comm.world_size
    for p, part in zip(params, torch.split(flat, [g.numel() for g in grads])):
        p.grad = part.view_as(p)


def mean_over_ranks(comm: Communicator, values: Sequence[float]) -> list[float]:
    """Each of ``values`` averaged over every rank of ``comm`` (one all-reduce, figures by name)."""
    total = comm.all_reduce_named({f"{i:04d}": v for i, v in enumerate(values)}, op="sum")
    return [total[f"{i:04d}"] / comm.world_size for i in range(len(values))]


class _SavedBytes:
    """Counts the bytes autograd saves for backward while active (saved-tensor hooks)."""

    def __init__(self) -> None:
        self.bytes = 0

    def __enter__(self):
        def pack(t: torch.Tensor) -> torch.Tensor:
            self.bytes += t.numel() * t.element_size()
            return t

        self._hooks = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._hooks.__exit__(*exc)


class PipelineStage:
    """Stage ``stage`` of ``num_stages``: its layers, its optimizer, its neighbours.

    Args:
        model: the whole model, built identically on every stage (same seed); pruned here to
            layers ``bounds[stage]``.
        bounds: every stage's ``(start, end)`` layers (:func:`plan_stages`).
        stage: this stage. ranks: the global rank of each stage of this pipeline.
        comm: the :class:`Communicator` whose group holds ``ranks`` (its timeout bounds every receive).
        lr, weight_decay: Adam's, over this stage's parameters only.
        replicas: data parallelism: the communicator of this stage's D replicas (the same stage
            of every pipeline); after each flush their gradients are averaged (one all-reduce of
            the stage's flat gradient, counted as ``gradient``). None: one pipeline.
        keep_encoder: every stage keeps the encoder (chunk mode rebuilds x0 on each stage).
    """

    def __init__(self, model: GNN, bounds: Sequence[tuple[int, int]], stage: int, ranks: Sequence[int],
                 comm: Communicator, lr: float = 0.003, weight_decay: float = 0.0,
                 replicas: Communicator | None = None, keep_encoder: bool = False) -> None:
        self.start, self.end = bounds[stage]
        self.stage, self.num_stages = stage, len(bounds)
        self.first, self.last = stage == 0, stage == len(bounds) - 1
        self.prev = ranks[stage - 1] if not self.first else None
        self.next = ranks[stage + 1] if not self.last else None
        self.model = stage_model(model, self.start, self.end, keep_encoder)
        self.uses_x0 = model.uses_x0
        self.comm = comm
        self.replicas = replicas if replicas is not None and replicas.world_size > 1 else None
        self.params = list(self.model.parameters())
        self.opt = torch.optim.Adam(self.params, lr=lr, weight_decay=weight_decay)

    # -- point to point ----------------------------------------------------------------------
    def _send(self, tensors: list[torch.Tensor], dst: int, tag: int, category: str, stats: StepStats) -> list:
        works = []
        for j, t in enumerate(tensors):
            t = t.detach().contiguous()
            works.append((dist.isend(t, dst, tag=tag * 2 + j), t))  # t lives until the send is done
            stats.bytes_sent[category] += t.numel() * t.element_size()
        return works

    def _post_recv(self, shapes: list[tuple[int, ...]], src: int, tag: int) -> list[tuple]:
        """Post receives of float32 tensors of ``shapes`` from ``src`` now, so that they arrive
        while this stage computes; :meth:`_wait_recv` collects them."""
        out = []
        for j, shape in enumerate(shapes):
            t = torch.empty(shape, dtype=torch.float32)
            out.append((dist.irecv(t, src, tag=tag * 2 + j), t))
        return out

    def _wait_recv(self, posted: list[tuple], src: int, category: str, what: str,
                   stats: StepStats) -> list[torch.Tensor]:
        """The tensors of ``posted`` receives, each waited for within the run's timeout.

        Raises:
            PeerError: naming the neighbour stage and its rank, when one does not arrive in time.
        """
        t0 = time.perf_counter()
        for work, t in posted:
            try:
                work.wait(datetime.timedelta(seconds=self.comm.timeout))
            except Exception as err:  # noqa: BLE001 - gloo: timeout or closed connection
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise PeerError(
                    f"rank {self.comm.rank} (pipeline stage {self.stage}): no {what} from stage "
                    f"{self.stage + (1 if src == self.next else -1)} (rank {src}) within {self.comm.timeout:.0f} s; "
                    f"rank {src} died or stopped answering. ({first}) If it is merely slow, raise --timeout."
                ) from err
            stats.bytes_received[category] += t.numel() * t.element_size()
        stats.wait_seconds += time.perf_counter() - t0
        return [t for _, t in posted]

    def _recv(self, shapes: list[tuple[int, ...]], src: int, tag: int, category: str, what: str,
              stats: StepStats) -> list[torch.Tensor]:
        """Receive float32 tensors of ``shapes`` from ``src`` (posted and waited for now)."""
        return self._wait_recv(self._post_recv(shapes, src, tag), src, category, what, stats)

    # -- one step ------------------------------------------------------------------------------
    def step(self, batches: Sequence[MiniBatch], keys: Sequence[int], schedule_name: str, step_tag: int,
             x_rows=None, labels=None) -> StepStats:
        """Run one flushed step over ``batches`` (the M micro-batches, same on every stage).

        Args:
            keys: the M dropout keys. step_tag: a number unique to this step (message tags).
            x_rows: first stage: callable ``ids -> float32 [n, F]`` input rows.
            labels: last stage: callable ``ids -> int64 [n]`` labels of the seeds.
        """
        total = sum(int(b.seeds.numel()) for b in batches)

        def recv_shapes(m: int) -> list[tuple[int, ...]]:
            block = batches[m].blocks[self.start]
            rows = block.num_src - block.num_hist  # = blocks[start - 1].num_dst
            return [(rows, self.model.dims[self.start])] + ([(rows, self.model.dims[0])] if self.uses_x0 else [])

        def forward(m: int, inp: list[torch.Tensor]):
            blocks = batches[m].blocks
            h, x0 = self.model.forward_layers(inp[0], inp[1] if len(inp) > 1 else None, blocks,
                                              self.start, self.end, rng_key=keys[m])
            if self.last:
                return F.cross_entropy(h, labels(batches[m].seeds), reduction="sum") / total
            return [h] + ([x0] if self.uses_x0 else [])

        return self.run(len(batches), schedule_name, step_tag, recv_shapes,
                        lambda m: [x_rows(batches[m].blocks[0].src_ids)], forward)

    def before_optimizer(self) -> None:
        """Called after the flush, before the optimizer step (gradients are complete here)."""
        if self.replicas is not None:  # average over the stage's replicas
            all_reduce_gradients(self.params, self.replicas, "gradient", mean=True)

    def run(self, m_count: int, schedule_name: str, step_tag: int, recv_shapes, first_input, forward) -> StepStats:
        """One flushed step of ``m_count`` micro-batches under ``schedule_name``.

        Args:
            recv_shapes: ``m -> [shape, ...]`` of the tensors a stage but the first receives.
            first_input: ``m -> [tensor, ...]`` the first stage's input.
            forward: ``(m, inputs) -> outputs``: the stage's layers on micro-batch m; on the last
                stage a scalar loss tensor (this micro-batch's share of the step's loss),
                elsewhere the list of tensors sent to the next stage.
        """
        ops = schedule(schedule_name, self.stage, self.num_stages, m_count) if m_count else []  # no seeds: no ops
        stats = StepStats()
        t_step = time.perf_counter()
        self.model.train()
        self.opt.zero_grad(set_to_none=True)
        held: dict[int, tuple] = {}
        held_bytes: dict[int, int] = {}
        pending: list = []
        loss_sum = 0.0

        def tag_of(m: int) -> int:
            return (step_tag * m_count + m) * 2

        # Receives are posted a micro-batch ahead (activations) or as soon as their shape is
        # known (gradients, after the forward), so that a neighbour's tensors travel while this
        # stage computes instead of after it asks for them.
        acts: dict[int, list] = {}
        grads_posted: dict[int, list] = {}

        def post_activations(m: int) -> None:
            if m < m_count and m not in acts:
                acts[m] = self._post_recv(recv_shapes(m), self.prev, tag_of(m))

        for op, m in ops:
            tag = tag_of(m)
            if op == "F":
                if self.first:
                    inp = first_input(m)
                else:
                    post_activations(m)
                    post_activations(m + 1)
                    inp = self._wait_recv(acts.pop(m), self.prev, "activation", f"activations of micro-batch {m}",
                                          stats)
                    for t in inp:
                        t.requires_grad_(True)
                t0 = time.perf_counter()
                with _SavedBytes() as saved:
                    out = forward(m, inp)
                    if self.last:
                        loss_sum += float(out.detach())
                        out = [out]
                stats.busy_seconds += time.perf_counter() - t0
                held[m] = (inp, out)
                held_bytes[m] = saved.bytes + sum(t.numel() * t.element_size() for t in out)
                stats.peak_micro_batches = max(stats.peak_micro_batches, len(held))
                stats.peak_activation_bytes = max(stats.peak_activation_bytes, sum(held_bytes.values()))
                if not self.last:
                    pending += self._send(out, self.next, tag, "activation", stats)
                    grads_posted[m] = self._post_recv([tuple(t.shape) for t in out], self.next, tag + 1)
            else:
                inp, out = held.pop(m)
                held_bytes.pop(m)
                if self.last:
                    grads = None
                else:
                    grads = self._wait_recv(grads_posted.pop(m), self.next, "activation_grad",
                                            f"gradients of micro-batch {m}", stats)
                t0 = time.perf_counter()
                torch.autograd.backward(out, grads)
                stats.busy_seconds += time.perf_counter() - t0
                if not self.first:
                    grads_in = [t.grad if t.grad is not None else torch.zeros_like(t) for t in inp]
                    pending += self._send(grads_in, self.prev, tag + 1, "activation_grad", stats)
        self.wait_sends(pending, stats)
        t0 = time.perf_counter()
        self.before_optimizer()  # an all-reduce: mostly waiting for the slowest replica or stage
        stats.wait_seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
        self.opt.step()
        stats.busy_seconds += time.perf_counter() - t0
        stats.loss = loss_sum if self.last else None
        stats.step_seconds = time.perf_counter() - t_step
        return stats

    def wait_sends(self, pending: list, stats: StepStats) -> None:
        """Wait (bounded by the timeout) until the neighbours received every send in ``pending``."""
        t0 = time.perf_counter()
        for w, _ in pending:
            w.wait(datetime.timedelta(seconds=self.comm.timeout))
        stats.wait_seconds += time.perf_counter() - t0


def reference_steps(model: GNN, steps: Sequence[Sequence[Sequence[MiniBatch]]], keys: Sequence[Sequence[int]],
                    x_rows, labels, lr: float = 0.003, weight_decay: float = 0.0) -> list[list[float]]:
    """The unpipelined run: one process, the whole model. ``steps[i][d]`` are the M micro-batches
    pipeline d trains in step i (``keys[i]`` their dropout keys, the same for every d): the step's
    loss is the mean over d of (cross-entropy summed over d's seeds / their number), what D
    data-parallel pipelines averaging their gradients optimize; one Adam step per step. Returns
    the losses per step and pipeline (``[i][d]``); ``model`` is trained in place."""
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
                                            rng_key=k)
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


def measure_layer_costs(model: GNN, blocks: Sequence[Block], x: torch.Tensor, repeats: int = 3,
                        hist: Sequence[torch.Tensor | None] | None = None) -> list[float]:
    """Seconds of each layer's forward and backward on one batch (``blocks``, input rows ``x``):
    the fastest of ``repeats - 1`` timed passes after one that loads compiled kernels (the
    fastest, because what slows a pass on a shared machine is noise, not the layer). The
    model's weights, gradients and buffers (batch-norm statistics) are left as they were.

    ``hist``: per layer, float32 [blocks[i].num_hist, dims[i]] rows of the block's historical
    leaves (None where a block has none); their gathering is not timed.
    """
    saved = {name: b.detach().clone() for name, b in model.named_buffers()}
    costs = [float("inf")] * model.num_layers
    model.train()
    for rep in range(max(2, repeats)):
        h, x0 = x, None
        for i in range(model.num_layers):
            inp = h.detach().requires_grad_(i > 0)
            x0_in = x0.detach().requires_grad_() if x0 is not None else None
            rows = [None] * model.num_layers
            if hist is not None and hist[i] is not None:
                rows[i] = hist[i].detach().requires_grad_(i > 0)
            t0 = time.perf_counter()
            h, x0 = model.forward_layers(inp, x0_in, blocks, i, i + 1, hist=rows)
            (h.sum() + (x0.sum() if x0 is not None else 0)).backward()
            if rep:
                costs[i] = min(costs[i], time.perf_counter() - t0)
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        for name, b in model.named_buffers():
            b.copy_(saved[name])
    return costs


def _build(cfg, part) -> GNN:
    """The whole model, identical on every rank (seeded by the run's seed)."""
    torch.manual_seed(cfg.seed)
    return GNN(part.meta["feature_dim"], cfg.hidden, int(part.meta.get("num_classes") or int(part.y.max()) + 1),
               num_layers=len(cfg.fanouts), layer=cfg.layer, layer_kwargs=cfg.layer_kwargs, dropout=cfg.dropout,
               norm=cfg.norm, residual=cfg.residual, jk=cfg.jk)


def pipeline_worker(parts_dir: str, cfg, pipe: PipelineConfig | None = None) -> dict:
    """One rank of D pipelines of K stages (a process of :func:`gnnscale.process.launch.launch_local` or
    torchrun; W = D x K workers, D = the parts in ``parts_dir``): rank r is stage r % K of
    pipeline r // K, which trains part r // K. Trains ``cfg.epochs`` epochs (``cfg.max_steps``
    steps each at most) of ``pipe.micro_batches`` micro-batches per step.

    With D > 1, stage s of every pipeline forms one group: it samples across the parts there
    (:class:`~gnnscale.samplers.DistNeighborSampler`), stage 0 fetches remote input rows there
    (:class:`~gnnscale.data.feature_store.DistFeatureStore`), and each stage averages its gradients
    there after every flush. Every pipeline runs the same number of steps (the fewest any part
    has).

    Returns a dict: ``pipeline``, ``stage``, ``layers`` (start, end), ``losses`` (a last stage's
    step losses; empty elsewhere), ``steps`` (per step: bytes sent and received between stages
    by category, wait and busy seconds, peak micro-batches and activation bytes held) and
    ``state`` (this stage's parameters by name, float32 tensors).
    """
    from gnnscale.logs import setup_logging
    from gnnscale.partitioning import load_meta, load_part
    from gnnscale.process.groups import init_distributed, new_group, shutdown_distributed
    from gnnscale.samplers import DistNeighborSampler, NeighborSampler

    pipe = pipe or PipelineConfig(cfg.pipeline_stages, cfg.stage_layers, cfg.micro_batches, cfg.schedule)
    setup_logging(rank=int(os.environ.get("RANK", "0")))
    info = init_distributed(timeout=cfg.timeout)
    try:
        k, w = pipe.stages, info.world_size
        check_pipeline(k, pipe.stage_layers, pipe.micro_batches, pipe.schedule, len(cfg.fanouts), w)
        d_count, (d, s) = w // k, divmod(info.rank, k)
        meta = load_meta(parts_dir)
        if meta["num_parts"] != d_count:
            raise PipelineError(
                f"{parts_dir} holds {meta['num_parts']} parts but {w} workers in stages of {k} form {d_count} "
                f"pipelines (one per part): start --workers {meta['num_parts'] * k}, or re-partition into {d_count}"
            )
        # Every rank creates every stage's group, in the same order (torch.distributed's rule).
        groups = [new_group(cfg.timeout, ranks=[j * k + t for j in range(d_count)]) for t in range(k)] \
            if d_count > 1 else [None] * k
        replicas = Communicator(d, d_count, group=groups[s], timeout=cfg.timeout)
        comm = Communicator(info.rank, w, timeout=cfg.timeout)
        part = load_part(parts_dir, d, verify=cfg.verify)
        model = _build(cfg, part)
        train_ids = torch.nonzero(part.train_mask).flatten() + part.offset

        def make_sampler(hops: int):
            fanouts = list(cfg.fanouts)[:hops]
            if d_count == 1:
                return NeighborSampler(part.indptr, part.indices, fanouts, seed=cfg.seed)
            return DistNeighborSampler(part.indptr, part.indices, part.book, replicas, fanouts, seed=cfg.seed,
                                       owned_keys=part.orig_ids, backend=cfg.sampler_backend)

        if d_count == 1:
            x_rows = lambda ids: part.features(ids - part.offset)  # noqa: E731
        else:
            from gnnscale.data.feature_store import DistFeatureStore

            x_rows = DistFeatureStore(part, part.book, replicas, part.meta["feature_dim"]).fetch
        costs = None
        if pipe.stage_layers is None and k > 1:  # balance the stages by measured per-layer cost
            probe = make_sampler(model.num_layers).sample(train_ids[:cfg.batch_size], 0, 0)
            mine = measure_layer_costs(model, probe.blocks, x_rows(probe.blocks[0].src_ids))
            costs = mean_over_ranks(comm, mine)
        bounds = plan_stages(model.num_layers, k, pipe.stage_layers, costs)
        if info.rank == 0:
            log.info("pipeline: %d x %d stages, layers %s%s, %d micro-batches per step, %s", d_count, k,
                     " | ".join(f"{a}-{b - 1}" for a, b in bounds),
                     "" if costs is None else " (balanced by measured ms per layer: "
                     + ", ".join(f"{1e3 * c:.1f}" for c in costs) + ")", pipe.micro_batches, pipe.schedule)
        start, end = bounds[s]
        # A stage samples only the hops its layers and the later ones read: the first hops from
        # the seeds are drawn with the same keys whatever the depth, so its blocks equal the
        # whole sample's blocks[start:]. The last stage samples least, the first everything.
        sampler = make_sampler(model.num_layers - start)
        labels = lambda ids: part.y[ids - part.offset]  # noqa: E731  (the seeds are this part's)
        stage = PipelineStage(model, bounds, s, [d * k + t for t in range(k)], comm, lr=cfg.lr,
                              weight_decay=cfg.weight_decay, replicas=replicas)
        evaluate = PipelineEvaluator(cfg, comm, Communicator(d, d_count, group=groups[0], timeout=cfg.timeout),
                                     stage, part, k)
        losses, per_step, epoch_seconds, accuracy = [], [], [], []
        steps = agreed_steps(replicas, train_ids.numel(), cfg.batch_size * pipe.micro_batches)
        for epoch in range(cfg.epochs):
            t_epoch = time.perf_counter()
            seeds = epoch_seeds(train_ids, cfg.batch_size, pipe.micro_batches, cfg.seed, epoch, d, steps)
            n = int(min(steps, cfg.max_steps) if cfg.max_steps else steps)
            for i in range(n):
                batches = sample_step(sampler, seeds[i], epoch, i)
                for b in batches:  # model order: the stage's blocks are the last L - start
                    b.blocks = [None] * start + b.blocks
                keys = [rng_key(cfg.seed, epoch, i, m) for m in range(len(batches))]
                st = stage.step(batches, keys, pipe.schedule, epoch * 100_000 + i, x_rows=x_rows if s == 0 else None,
                                labels=labels)
                if st.loss is not None:
                    losses.append(st.loss)
                per_step.append(dict(epoch=epoch, bytes_sent=dict(st.bytes_sent), bytes_received=dict(st.bytes_received),
                                     wait_seconds=st.wait_seconds, busy_seconds=st.busy_seconds,
                                     step_seconds=st.step_seconds, peak_micro_batches=st.peak_micro_batches,
                                     peak_activation_bytes=st.peak_activation_bytes,
                                     block_bytes=sum(block_bytes(b.blocks[start:end]) for b in batches)))
            epoch_seconds.append(time.perf_counter() - t_epoch)  # sampling included
            _log_epoch(comm, epoch, [st for st in per_step if st["epoch"] == epoch], losses[-n:] if n else [])
            if cfg.eval_every and ((epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1):
                acc = evaluate()
                if acc is not None:
                    accuracy.append(dict(epoch=epoch, **acc))
                    if info.rank == 0:
                        log.info("epoch %3d | evaluation (whole model, layer-wise, full graph): train %.4f val %.4f "
                                 "test %.4f", epoch, acc["train"], acc["val"], acc["test"])
        state = {name: v.detach().clone() for name, v in stage.model.state_dict().items()}
        return dict(pipeline=d, stage=s, layers=(start, end), losses=losses, steps=per_step, state=state,
                    epoch_seconds=epoch_seconds, layer_costs=costs, accuracy=accuracy,
                    gradient_bytes=replicas.stats.sent.get("gradient", 0))
    finally:
        shutdown_distributed()


class PipelineEvaluator:
    """Accuracy of the pipelines' model on the whole graph, every ``--eval-every`` epochs.

    Each call gathers every rank's stage weights (one all-gather of the state dicts), so that
    every pipeline's stage 0 holds the whole model; the stage-0 ranks (one per part,
    ``first_stages``) then run exact layer-wise inference over their parts
    (:func:`gnnscale.training.inference.streamed_inference`: remote rows asked of their owners slice by
    slice). Their model, feature store and degrees are built at the first call and kept.
    """

    def __init__(self, cfg, comm: Communicator, first_stages: Communicator, stage: PipelineStage, part,
                 num_stages: int) -> None:
        self.cfg, self.comm, self.first_stages, self.stage, self.part = cfg, comm, first_stages, stage, part
        self.num_stages = num_stages
        self.ctx: dict | None = None

    def __call__(self) -> dict | None:
        """``train``/``val``/``test`` accuracies on stage-0 ranks, None on the others (collective
        over every rank; every stage starts the next epoch together, after it)."""
        states = self.comm.all_gather_object({n: v.detach() for n, v in self.stage.model.state_dict().items()})
        result = self._first_stage(states) if self.stage.stage == 0 else None
        self.comm.barrier()  # the next epoch's seconds hold no wait for the evaluation
        return result

    def _setup(self) -> dict:
        from gnnscale.data.degrees import DegreeStore
        from gnnscale.data.feature_store import DistFeatureStore

        part, group = self.part, self.first_stages
        model = _build(self.cfg, part)
        return dict(model=model, features=DistFeatureStore(part, part.book, group, part.meta["feature_dim"]),
                    degree=DegreeStore(part.indptr, part.book, group) if model.uses_degree else None)

    def _first_stage(self, states: list) -> dict:
        from gnnscale.training.inference import streamed_inference

        self.ctx = self.ctx or self._setup()
        ctx, part, k = self.ctx, self.part, self.num_stages
        d = self.comm.rank // k
        merged: dict = {}
        for t in range(k):
            merged.update(states[d * k + t])
        model = ctx["model"]
        model.load_state_dict(merged)
        model.eval()
        pred = streamed_inference(model, part.indptr, part.indices, ctx["features"], node_degree=ctx["degree"],
                                  backend=self.cfg.sampler_backend).argmax(1)
        counts = {}
        for name in ("train", "val", "test"):
            mask = getattr(part, f"{name}_mask")
            counts[f"{name}_correct"] = int((pred[mask] == part.y[mask]).sum())
            counts[f"{name}_total"] = int(mask.sum())
        counts = self.first_stages.all_reduce_named(counts, op="sum")
        return {name: counts[f"{name}_correct"] / max(1.0, counts[f"{name}_total"])
                for name in ("train", "val", "test")}


def epoch_summary(steps: Sequence[dict]) -> dict:
    """One stage's epoch from its per-step figures: bytes by category, seconds, bubble fraction
    (waiting / step time), peaks."""
    wait, step = sum(st["wait_seconds"] for st in steps), sum(st["step_seconds"] for st in steps)
    cats = ("activation", "activation_grad")
    return dict(
        steps=len(steps), step_seconds=step, wait_seconds=wait, bubble=wait / step if step else 0.0,
        bytes_sent={c: sum(st["bytes_sent"][c] for st in steps) for c in cats},
        peak_micro_batches=max((st["peak_micro_batches"] for st in steps), default=0),
        peak_activation_bytes=max((st["peak_activation_bytes"] for st in steps), default=0),
    )


def _log_epoch(comm: Communicator, epoch: int, steps: Sequence[dict], losses: Sequence[float]) -> None:
    """Every stage's epoch, gathered; rank 0 logs one line (the loss is the last stages' mean)."""
    mine = epoch_summary(steps)
    mine["loss"] = sum(losses) / len(losses) if losses else None
    every = comm.all_gather_object(mine) if comm.world_size > 1 else [mine]
    if comm.rank != 0 or not steps:
        return
    known = [e["loss"] for e in every if e["loss"] is not None]
    log.info("epoch %3d | loss %.4f | %s", epoch, sum(known) / max(1, len(known)), stage_figures(every, "micro-batches"))


def stage_figures(every: Sequence[dict], held: str) -> str:
    """Every stage's epoch (:func:`epoch_summary` of each) as one log phrase: the slowest
    stage's seconds, bytes each way, each stage's bubble and peak of held ``held`` and bytes."""
    mb = 1e6
    return (f"{max(e['step_seconds'] for e in every):.2f} s | activations "
            f"{sum(e['bytes_sent']['activation'] for e in every) / mb:.2f} MB forward, gradients "
            f"{sum(e['bytes_sent']['activation_grad'] for e in every) / mb:.2f} MB backward | bubble "
            + "/".join(f"{e['bubble']:.0%}" for e in every) + " | peak held "
            + "/".join(str(e["peak_micro_batches"]) for e in every) + f" {held}, "
            + "/".join(f"{e['peak_activation_bytes'] / mb:.1f}" for e in every) + " MB")


def reference_run(parts_dir: str, cfg, micro: int) -> dict:
    """The unpipelined run of :func:`pipeline_worker` on every part of ``parts_dir``, in this
    process: one sampler over the whole graph keyed like the distributed one (original ids,
    pipeline d's streams), the same seeds and dropout keys. Returns ``losses`` (per pipeline d,
    its step losses) and the whole model's ``state``."""
    from gnnscale.partitioning import load_meta, load_part
    from gnnscale.samplers import NeighborSampler

    parts = [load_part(parts_dir, d, verify=False) for d in range(load_meta(parts_dir)["num_parts"])]
    edges = torch.tensor([0] + [int(p.indptr[-1]) for p in parts]).cumsum(0)
    indptr = torch.cat([parts[0].indptr[:1]] + [p.indptr[1:] + edges[d] for d, p in enumerate(parts)])
    sampler = NeighborSampler(indptr, torch.cat([p.indices for p in parts]), list(cfg.fanouts), seed=cfg.seed,
                              node_keys=torch.cat([p.orig_ids for p in parts]))
    x = torch.cat([p.features(torch.arange(p.num_owned)) for p in parts])
    y = torch.cat([p.y for p in parts])
    train = [torch.nonzero(p.train_mask).flatten() + p.offset for p in parts]
    model = _build(cfg, parts[0])
    steps, keys = [], []
    per_epoch = epoch_steps([t.numel() for t in train], cfg.batch_size * micro)
    for epoch in range(cfg.epochs):
        seeds = [epoch_seeds(t, cfg.batch_size, micro, cfg.seed, epoch, d, per_epoch) for d, t in enumerate(train)]
        n = min(per_epoch, cfg.max_steps) if cfg.max_steps else per_epoch
        for i in range(n):
            steps.append([[sampler.sample(s, epoch, i * micro + m, rank=d) for m, s in enumerate(seeds[d][i])]
                          for d in range(len(parts))])
            keys.append([rng_key(cfg.seed, epoch, i, m) for m in range(micro)])
    losses = reference_steps(model, steps, keys, lambda ids: x[ids], lambda ids: y[ids], lr=cfg.lr,
                             weight_decay=cfg.weight_decay)
    return dict(losses=[[step[d] for step in losses] for d in range(len(parts))],
                state={name: v.detach().clone() for name, v in model.state_dict().items()})
