"""Layer pipeline parallelism: K stages, each running a run of consecutive layers on its own
worker, fed with M sampled micro-batches per optimizer step (GPipe or 1F1B, flushed); D
pipelines, one per part, average each stage's gradients (W = D x K workers).

One step of stage ``s`` of pipeline ``d`` (layers ``[start, end)``, see
:func:`gnnscale.planning.schedules.plan_stages`):

- every stage draws the step's M micro-batches itself, and only the hops it reads: the
  sampler's draws are keyed by (epoch, step, hop, node), so stage s, sampling the first
  L - start hops from the seeds, rebuilds exactly the whole sample's ``blocks[start:]`` and no
  block crosses a link (``block_bytes`` says what receiving them would cost instead: the ids
  and edges of the stage's blocks). The last stage samples least, the first everything;
  stage 0 fetches the input rows, the last stage the labels (the loader; ``--pipeline``
  prefetches them in a thread, as in data-parallel training);
- the stage runs its layers under the schedule (:class:`~gnnscale.parallel.stage.PipelineStage`),
  activations and their gradients between neighbour stages through the communicator;
- after the flush each stage averages its layers' gradients with its replicas (stage s of
  every pipeline), then steps its own optimizer.

The loss of a step is the mean loss of the target kind (cross-entropy, binary cross-entropy,
MSE: :class:`~gnnscale.tasks.node_metrics.NodeTarget`) over all seeds of its M micro-batches, so a
pipelined step equals one unpipelined step accumulating the same M micro-batches. Dropout
masks are keyed by (step, micro-batch, layer) (``LayerHooks.rng_key``), so they
too are equal whichever process runs a layer. The seeds are the data-parallel seed schedule
at ``batch_size x M`` seeds a step (:class:`~gnnscale.samplers.seeds.SeedSchedule`).
"""
from __future__ import annotations

import logging
from typing import Iterator, Sequence

import torch

from gnnscale.data.loader import MiniBatchLoader, wait_ready
from gnnscale.data.open import open_data
from gnnscale.nn.models import LayerHooks
from gnnscale.nn.spec import ModelSpec
from gnnscale.parallel.axis import Axis, RunContext, StepResult, merge_states, resumed_bounds
from gnnscale.parallel.costs import mean_over_ranks, measure_layer_costs
from gnnscale.parallel.data_parallel import train_counts
from gnnscale.planning.schedules import plan_stages
from gnnscale.parallel.stage import PipelineStage, StepStats, epoch_summary, rng_key
from gnnscale.partitioning import load_part
from gnnscale.samplers import check_fanouts
from gnnscale.samplers.block import Block, MiniBatch
from gnnscale.samplers.seeds import SeedSchedule
from gnnscale.tasks.evaluation import shared, use_layerwise
from gnnscale.tasks.task import make_task

log = logging.getLogger("gnnscale.pipeline")


def block_bytes(blocks: Sequence[Block]) -> int:
    """Bytes of the blocks if a stage received them instead of rebuilding them: ids and edges."""
    return int(sum(b.src_ids.numel() * 8 + b.edge_index.numel() * 8 for b in blocks if b is not None))


class LayerPipeline(Axis):
    """Stage ``s`` of pipeline ``d``: its part's sampler for its hops, its layers, its optimizer."""

    def __init__(self, ctx: RunContext) -> None:
        cfg, dims, plan = ctx.cfg, ctx.dims, ctx.plan
        self.cfg, self.dims, self.plan, self.copier = cfg, dims, plan, ctx.copier
        d, s, k = dims.d, dims.s, plan.pp
        self.part = part = load_part(ctx.parts_dir, d, verify=cfg.verify)
        ctx.phase("part load")
        meta = part.meta
        fanouts = check_fanouts(cfg.fanouts)
        # the targets' kind: output width, loss (last stage), metric (stage 0); --pos-weight auto counts
        # every part's training labels over the stage's replicas (one per part)
        self.task = make_task(part, cfg, dims.grad)
        outputs = int(self.task.out_dim or int(part.y.max()) + 1)
        self.spec = ModelSpec.of(cfg, meta["feature_dim"], outputs, num_layers=len(fanouts))
        model = self.spec.build(seed=cfg.seed)  # the whole model, identical on every rank
        layers = model.num_layers
        # samplers, feature store and degree store (the other parts on this host read from their files)
        self.data = data = open_data(part, cfg, dims.data, mode=plan.mode, parts_dir=ctx.parts_dir, fanouts=fanouts,
                                     degrees=model.uses_degree)
        full, self.eval_sampler, eval_fanouts = data.sampler, data.eval_sampler, data.eval_fanouts
        self.features, self.degrees, self.host_reads = data.features, data.degrees, data.host_reads
        self.train_ids = torch.nonzero(part.train_mask).flatten() + part.offset
        ctx.phase("groups and samplers")
        self.costs = None
        self.bounds = resumed_bounds(ctx, k, plan.stage_layers)  # a resumed run keeps its checkpoint's split
        if self.bounds is None:
            if plan.stage_layers is None and k > 1:  # balance the stages by measured per-layer cost
                probe = full.sample(self.train_ids[:cfg.batch_size], 0, 0)
                mine = measure_layer_costs(model, probe.blocks, self.features.fetch(probe.input_ids))
                self.costs = mean_over_ranks(dims.comm, mine)
            self.bounds = plan_stages(layers, k, plan.stage_layers, self.costs)
        if dims.rank == 0:
            log.info("pipeline: %d x %d stages, layers %s%s, %d micro-batches per step, %s", plan.dp, k,
                     " | ".join(f"{a}-{b - 1}" for a, b in self.bounds),
                     "" if self.costs is None else " (balanced by measured ms per layer: "
                     + ", ".join(f"{1e3 * c:.1f}" for c in self.costs) + ")", plan.micro_batches, plan.schedule)
        self.start_layer, self.end_layer = self.bounds[s]
        # A stage samples only the hops its layers and the later ones read: the first hops from
        # the seeds are drawn with the same keys whatever the depth, so its blocks equal the
        # whole sample's blocks[start:]. The last stage samples least, the first everything.
        self.sampler = full if self.start_layer == 0 else data.hop_sampler(list(fanouts)[:layers - self.start_layer])
        self.first, self.last = s == 0, s == k - 1
        self.whole = self.spec.build() if self.first else None  # stage 0 evaluates the whole model
        self.stage = PipelineStage(model, self.bounds, s, plan.stage_ranks(d), dims.comm, lr=cfg.lr,
                                   weight_decay=cfg.weight_decay, replicas=dims.grad, health=dims.health, pipeline=d)
        self.net, self.opt = self.stage.model, self.stage.opt
        self.micro = plan.micro_batches
        self.schedule = SeedSchedule(self.train_ids, train_counts(dims.grad, self.train_ids.numel()),
                                     cfg.batch_size * self.micro, cfg.seed, d, cfg.max_steps, micro=self.micro)
        self.cache_info = {"policy": "none", "rows": 0, "bytes": 0}
        if self.first:  # stage 0 fetches the input rows: the cache is its
            self.cache_info = data.fill_cache(self._sample_epoch, resumed=ctx.resume.get("cache_ids"))
        ctx.phase("feature cache")
        labels = self.task.labels() if self.last else None
        self.loader = MiniBatchLoader(self.sampler, self.features if self.first else None, labels, self.degrees,
                                      self.copier, dims.health)
        self.evaluator = self.task.evaluator(data, dims.data, use_layerwise(cfg.eval_method, eval_fanouts, False)) \
            if self.first else None
        self.step_stats: list[StepStats] = []
        self._prefetch = None
        self._blocks = 0

    def _sample_epoch(self, epoch: int):
        for i, step in enumerate(self.schedule.epoch(epoch)):
            for m, seeds in enumerate(step):
                yield self.sampler.sample(seeds, epoch, i * self.micro + m)

    def steps(self) -> int:
        return self.schedule.steps

    def _load_step(self, seeds: list[torch.Tensor], epoch: int, i: int) -> list[MiniBatch]:
        batches = []
        for m, s in enumerate(seeds):  # micro-batch m of step i: step key i * M + m on every stage
            mb = self.loader.load(s, epoch, i, key=i * self.micro + m)
            pad = [None] * self.start_layer  # model order: the stage's blocks are the last L - start
            mb.blocks, mb.device_blocks = pad + mb.blocks, pad + mb.device_blocks
            batches.append(mb)
        return batches

    def batches(self, epoch: int, first: int) -> Iterator:
        steps = self.schedule.epoch(epoch)
        cfg = self.cfg
        feed = self.loader.stream(lambda i: self._load_step(steps[i], epoch, i), first, len(steps), cfg.pipeline,
                                  cfg.pipeline_depth, self.dims.data.wait_bound())
        self._prefetch = feed if cfg.pipeline else None
        return iter(feed)

    def step(self, epoch: int, i: int, gstep: int, batches: list[MiniBatch]) -> StepResult:
        for mb in batches:
            wait_ready(self.copier, mb)
        self.dims.health.enter(f"pipeline stage {self.stage.stage}: forwards and backwards", epoch, i)
        keys = [rng_key(self.cfg.seed, epoch, i, m) for m in range(len(batches))]
        stats = self._run(batches, keys, epoch * 100_000 + i)
        self.step_stats.append(stats)
        self._blocks += sum(block_bytes(b.blocks[self.start_layer:self.end_layer]) for b in batches)
        if stats.loss is None:
            return StepResult()
        return StepResult(stats.loss, stats.loss * stats.count, stats.correct, stats.count)

    def _run(self, batches: Sequence[MiniBatch], keys: Sequence[int], tag: int) -> StepStats:
        """One flushed step over the M micro-batches (the same seeds on every stage)."""
        st, model, start, end = self.stage, self.stage.model, self.start_layer, self.end_layer
        total = sum(int(b.seeds.numel()) for b in batches)
        correct = [0]
        target = self.task.target

        def recv_shapes(m: int) -> list[tuple[int, ...]]:
            block = batches[m].blocks[start]
            rows = block.num_src - block.num_hist  # = blocks[start - 1].num_dst
            return [(rows, model.dims[start])] + ([(rows, model.dims[0])] if st.uses_x0 else [])

        def forward(m: int, inp: list[torch.Tensor]):
            mb = batches[m]
            h, x0 = model.forward_layers(inp[0], inp[1] if len(inp) > 1 else None, mb.device_blocks, start, end,
                                         LayerHooks(node_degree=mb.degrees, rng_key=keys[m]))
            if st.last:
                correct[0] += target.correct(h, mb.y)[0]
                return target.loss(h, mb.y, reduction="sum") / total
            return [h] + ([x0] if st.uses_x0 else [])

        stats = st.run(len(batches), self.plan.schedule, tag, recv_shapes, lambda m: [batches[m].x], forward)
        if st.last:
            stats.correct, stats.count = correct[0], total
        return stats

    def end_epoch(self, epoch: int, times: dict) -> dict:
        mine = epoch_summary(self.step_stats)
        mine.update(pipeline=self.dims.d, stage=self.dims.s, layers=[self.start_layer, self.end_layer],
                    block_bytes=self._blocks)
        every = self.dims.comm.all_gather_object(mine)
        times = dict(times, sample=self.loader.times["sample"], fetch=self.loader.times["fetch"],
                     compute=mine["busy_seconds"], bubble=mine["wait_seconds"], grad_sync=mine["grad_sync_seconds"])
        if self._prefetch is not None:
            times["wait"] = self._prefetch.wait_seconds
        return {"stage_seconds": times, "pipeline": every,
                "prefetch_depth": self._prefetch.queue.maxsize if self._prefetch else None}

    def _gather(self) -> dict | None:
        """The whole model's state on every pipeline's stage 0 (one all-gather of the stages' states)."""
        states = self.dims.comm.all_gather_object({n: v.detach() for n, v in self.net.state_dict().items()})
        if not self.first:
            return None
        return merge_states(states[r] for r in self.plan.stage_ranks(self.dims.d))

    def evaluate(self, splits, gstep: int) -> dict[str, float]:
        merged = self._gather()
        acc = None
        if self.first:
            self.whole.load_state_dict(merged)
            acc = self.evaluator.splits(self.whole, self.whole, splits, step=gstep - 1)
            acc["evaluation"] = dict(self.evaluator.last)
        acc = shared(self.dims.comm, acc)
        self.dims.comm.barrier()  # the next epoch's seconds hold no wait for the evaluation
        return acc

    def whole_state(self) -> dict | None:
        merged = self._gather()
        return merged if self.dims.rank == 0 else None

    def feature_counters(self) -> dict:
        return dict(self.features.stats) if self.first else {}

    def reset_stats(self) -> None:
        self.features.reset_stats()
        self.loader.times = {"sample": 0.0, "fetch": 0.0}
        self.step_stats, self._blocks = [], 0

    def step_loss(self, result: StepResult) -> float | None:
        got = self.dims.comm.all_reduce_named({"loss": result.loss_sum, "count": result.count})
        return got["loss"] / got["count"] if got["count"] else None

    def info(self) -> dict:
        return {"cache": self.cache_info, "exchange": {"mode": self.cfg.exchange, "staleness": None},
                "stages": [list(b) for b in self.bounds], "layer_costs": self.costs,
                "sampler_backend": self.sampler.kernels.name, "task": "node", "metric": self.task.metric,
                "host_reads": self.host_reads.info()}

    def cache_ids(self):
        cache = self.features.cache
        return cache.ids.clone() if cache is not None else None
