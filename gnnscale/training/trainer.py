"""Distributed mini-batch training and evaluation of one worker (one partition).

Every rank runs the same number of steps per epoch (the maximum over ranks, agreed by an
all_reduce): a rank with fewer training nodes wraps around its own shuffled list, so no
rank ever waits in a collective for a peer that has stopped issuing them.
"""
from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from typing import Sequence

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from gnnscale.samplers.seeds import cut_batches as _batches
from gnnscale.samplers.seeds import epoch_steps, shuffled_batches
from gnnscale.process.comm import CATEGORIES, Communicator, NetworkModel
from gnnscale.config import TrainConfig
from gnnscale.process.device import DeviceCopier, process_group_backend, resolve_device
from gnnscale.data.feature_cache import CacheContext, CacheSize, choose_cache_ids
from gnnscale.data.prefetch import Prefetcher
from gnnscale.errors import RuntimeSetupError
from gnnscale.data.feature_store import DistFeatureStore
from gnnscale.process.health import Health
from gnnscale.data.degrees import DegreeStore
from gnnscale.history.halo import HaloExchange, check_mode, check_staleness
from gnnscale.training.inference import layerwise_inference, refresh_embeddings, streamed_inference
from gnnscale.training.model_io import config_record
from gnnscale.nn.models import GNN
from gnnscale.partitioning import load_part
from gnnscale.process.groups import init_distributed, local_world_size, new_group
from gnnscale.samplers.block import Block
from gnnscale.samplers import DistNeighborSampler, check_fanouts
from gnnscale.samplers.kernels import Kernels

log = logging.getLogger("gnnscale.train")


def _embedding_dtype(name: str) -> torch.dtype:
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
    if name not in table:
        raise RuntimeSetupError(f"embedding_dtype must be one of {', '.join(table)}; found {name!r}")
    return table[name]


def _progress_enabled(cfg: TrainConfig, rank: int) -> bool:
    if rank != 0:
        return False
    if cfg.progress is not None:
        return cfg.progress
    return sys.stderr.isatty() and not os.environ.get("CI")


_COLLECTIVE_MARKERS = ("gloo", "nccl", "timed out", "connection closed", "connection reset", "c10d", "processgroup")


def _is_collective_error(err: Exception) -> bool:
    """Whether ``err`` (raised by a DDP model's step) came from a collective: torch's process
    groups name their transport or say a wait timed out or a connection closed."""
    text = str(err).lower()
    return any(m in text for m in _COLLECTIVE_MARKERS)


class Worker:
    """One rank's training state: its part, sampler, feature store, model and optimizer."""

    def __init__(self, parts_dir: str, cfg: TrainConfig) -> None:
        self._t_init = time.perf_counter()  # start-up: from here to the first step (after imports)
        if cfg.pipeline_stages != 1:
            raise RuntimeSetupError(f"pipeline_stages={cfg.pipeline_stages}: a layer pipeline runs "
                                    "gnnscale.parallel.layer_pipeline.pipeline_worker, not train_worker")
        local_rank = int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
        self.device = resolve_device(cfg.device, local_rank, local_world_size())
        info = init_distributed(timeout=cfg.timeout, backend=process_group_backend(self.device))
        self.copier = DeviceCopier(self.device)
        self.rank, self.world = info.rank, info.world_size
        self.cfg = cfg
        # Heartbeats and phases: a timed-out collective names the silent rank and its phase.
        self.health = Health(self.rank, self.world, cfg.timeout).start()
        self.startup_phases = {"process group": time.perf_counter() - self._t_init}
        mark = time.perf_counter()

        def phase(name: str) -> None:  # seconds of each start-up phase, by name (metrics and log)
            nonlocal mark
            now = time.perf_counter()
            self.startup_phases[name] = self.startup_phases.get(name, 0.0) + now - mark
            mark = now

        self.health.enter("start-up")
        self.part = load_part(parts_dir, self.rank, verify=cfg.verify)
        phase("part load")
        meta = self.part.meta
        if meta["num_parts"] != self.world:
            raise RuntimeSetupError(
                f"{parts_dir} holds {meta['num_parts']} parts but {self.world} workers were started; "
                f"start exactly {meta['num_parts']} workers (--workers {meta['num_parts']}), or re-partition "
                f"with `gnnscale partition --parts {self.world}`"
            )
        self.meta = meta
        self.book = self.part.book
        self.offset = self.part.offset
        network = NetworkModel(cfg.net_bandwidth_gbps, cfg.net_latency_ms) if cfg.net_bandwidth_gbps else None
        self.network = network
        # Control and gradients on the default group; sampling and features on their own group,
        # so a prefetching thread's collectives never interleave with DDP's all-reduce.
        self.comm = Communicator(self.rank, self.world, timeout=cfg.timeout, network=network, health=self.health)
        data_group = new_group(cfg.timeout) if self.world > 1 else None
        self.data_comm = Communicator(self.rank, self.world, group=data_group, timeout=cfg.timeout, network=network,
                                      health=self.health)
        fanouts = check_fanouts(cfg.fanouts)
        eval_fanouts = check_fanouts(cfg.eval_fanouts or cfg.fanouts, num_layers=len(fanouts))
        self.mode = check_mode(cfg.exchange)
        check_staleness(cfg.staleness)
        if cfg.halo_features not in ("hold", "fetch"):
            raise RuntimeSetupError(f"halo_features must be hold or fetch; found {cfg.halo_features!r}")
        if cfg.eval_method not in ("auto", "layerwise", "sampled"):
            raise RuntimeSetupError(f"eval_method must be auto, layerwise or sampled; found {cfg.eval_method!r}")
        self.layerwise_eval = cfg.eval_method == "layerwise" or (
            cfg.eval_method == "auto" and (self.mode == "historical" or all(f == -1 for f in eval_fanouts)))
        self.sampler = DistNeighborSampler(
            self.part.indptr, self.part.indices, self.book, self.data_comm, fanouts, seed=cfg.seed,
            owned_keys=self.part.orig_ids, backend=cfg.sampler_backend, mode=self.mode,
        )
        self.eval_sampler = DistNeighborSampler(
            self.part.indptr, self.part.indices, self.book, self.data_comm, eval_fanouts, seed=cfg.seed + 7919,
            owned_keys=self.part.orig_ids, backend=cfg.sampler_backend,
        )
        self.sampler.kernels.warmup()
        phase("groups and samplers")
        self.resume_from = self._find_resume()
        self.features = DistFeatureStore(self.part, self.book, self.data_comm, meta["feature_dim"], self.device)
        self.refresh_features = None  # historical mode: the refresh's fetches, on the exchange's group
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        model = GNN(meta["feature_dim"], cfg.hidden, meta["num_classes"], len(fanouts), layer=cfg.layer,
                    layer_kwargs=cfg.layer_kwargs, dropout=cfg.dropout, norm=cfg.norm, residual=cfg.residual,
                    jk=cfg.jk).to(self.device)
        self.net = model
        # Halo tables on a third process group: pushes run in a thread beside the prefetcher's.
        emb_group = new_group(cfg.timeout) if self.world > 1 else None
        self.emb_comm = Communicator(self.rank, self.world, group=emb_group, timeout=cfg.timeout, network=network,
                                     health=self.health)
        self.halo = None
        # Historical mode's halo tables; layer-wise evaluation without them streams by slices.
        if self.mode == "historical":
            self.halo = HaloExchange(self.part.indptr, self.part.indices, self.book, self.emb_comm,
                                     model.dims[1:len(fanouts)], cfg.staleness,
                                     dtype=_embedding_dtype(cfg.embedding_dtype))
        self.global_step = 0
        # GCN-style layers on sampled blocks: own nodes' in-degrees, the others' asked per batch.
        self.degrees = DegreeStore(self.part.indptr, self.book, self.data_comm) if model.uses_degree else None
        self.exchange_info = {"mode": self.mode, "staleness": cfg.staleness if self.mode == "historical" else None}
        if self.halo is not None:
            self.exchange_info.update(halo_rows=self.halo.num_halo, halo_table_bytes=self.halo.table_bytes,
                                      boundary_rows=int(self.halo.boundary.numel()))
        if self.mode == "historical" and self.halo is not None:
            self.refresh_features = DistFeatureStore(self.part, self.book, self.emb_comm, meta["feature_dim"],
                                                     self.device)
            self.refresh_degrees = DegreeStore(self.part.indptr, self.book, self.emb_comm) if model.uses_degree \
                else None
            # Its own kernels: the compiled relabeler keeps a table that the prefetch thread also uses.
            self.refresh_kernels = Kernels(self.book.num_nodes, self.part.indptr.device, cfg.sampler_backend,
                                           held=(self.part.offset, self.part.offset + self.part.num_owned))
            extra = self.halo.refresh_seeds(0).numel()
            if extra > cfg.batch_size:
                log.warning(
                    "rank %d: to keep every halo embedding at most %d steps old, each step refreshes %d boundary "
                    "nodes (1/%d of %d; one hop per layer) beside its %d seeds; raise --staleness to make steps "
                    "cheaper (and push fewer bytes)", self.rank, cfg.staleness, extra, self.halo.refresh_period,
                    self.halo.boundary.numel(), cfg.batch_size)
        if self.rank == 0 and self.halo is not None:
            log.info("exchange mode %s: %d halo rows on rank 0, halo tables %.1f MB (%d rows x %s x 4 B)%s",
                     self.mode, self.halo.num_halo, self.halo.table_bytes / 1e6, self.halo.num_halo,
                     "+".join(map(str, self.halo.dims)) or "0",
                     f", staleness bound {cfg.staleness} steps" if self.mode == "historical" else "")
        phase("model and halo")
        if self.world > 1:
            # find_unused_parameters=True also keeps DDP's gradient buckets as first laid out (it
            # never rebuilds them after the first step), so a run resumed from a checkpoint reduces
            # every gradient as the uninterrupted run does: bit-equal final weights.
            self.model = DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                             find_unused_parameters=True)
            self.model.register_comm_hook(None, self.comm.ddp_comm_hook())
        else:
            self.model = model
        torch.manual_seed(cfg.seed * 1000 + self.rank + 1)  # distinct dropout streams per rank
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        phase("DDP and optimizer")
        self.train_ids = self._owned(self.part.train_mask)
        self.val_ids = self._owned(self.part.val_mask)
        self.test_ids = self._owned(self.part.test_mask)
        self.is_ogb = str(meta.get("dataset", "")).startswith("ogbn-")
        self._train_steps: int | None = None
        self.cache_info = self._setup_cache()
        phase("feature cache")
        self.tb = None  # rank 0's TensorBoard writer, made by fit() with --tensorboard

    # -- feature cache ---------------------------------------------------------------------
    def _presample_counts(self, epochs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """How often each remote node was an input row over ``epochs`` pre-sampling epochs:
        (ids int64 [K] sorted, counts int64 [K]) over the K remote nodes drawn at least once.

        Sparse, so its memory follows what the sampler touched, not the graph's node count.
        """
        lo, hi = self.part.offset, self.part.offset + self.part.num_owned
        ids, counts = torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
        pending: list[torch.Tensor] = []
        held = 0

        def merge() -> None:
            nonlocal ids, counts, pending, held
            allv = torch.cat([ids] + pending)
            weight = torch.cat([counts, torch.ones(allv.numel() - ids.numel(), dtype=torch.int64)])
            ids, inv = torch.unique(allv, return_inverse=True)
            counts = torch.zeros(ids.numel(), dtype=torch.int64).index_add_(0, inv, weight)
            pending, held = [], 0

        for e in range(epochs):
            epoch = 1_000_000 + e  # streams disjoint from the training epochs'
            for step, seeds in enumerate(self._train_batches(epoch)):
                mb = self.sampler.sample(seeds, epoch=epoch, step=step)
                got = mb.input_ids[(mb.input_ids < lo) | (mb.input_ids >= hi)]
                pending.append(got)
                held += got.numel()
                if held > max(1 << 22, 2 * ids.numel()):  # merge in rounds: bounded buffer, few sorts
                    merge()
        merge()
        return ids, counts

    def _setup_cache(self) -> dict:
        cfg = self.cfg
        hold = self.mode == "historical" and cfg.halo_features == "hold" and self.halo is not None
        if cfg.cache_policy == "none" and not hold:
            return {"policy": "none", "rows": 0, "bytes": 0}
        t0 = time.perf_counter()
        row_bytes = 4 * self.meta["feature_dim"]
        ctx = CacheContext(self.part, self.book.num_nodes, presample=self._presample_counts,
                           epochs=cfg.presample_epochs, file=cfg.cache_file)
        if hold:
            # Every remote row historical mode reads (last-hop leaves, refresh inputs, the fill)
            # is a halo node: holding the halo's rows leaves no feature to fetch while training.
            if cfg.cache_policy != "none" and self.rank == 0:
                log.info("historical mode holds every halo feature row (--halo-features hold): "
                         "--cache-policy %s is not needed and not used", cfg.cache_policy)
            policy, ids = "halo", self.halo.halo_ids
        elif self.resume_from is not None and self.resume_rank.get("cache_ids") is not None:
            policy, ids = cfg.cache_policy, self.resume_rank["cache_ids"]  # the checkpoint's rows: no re-counting
        else:
            policy = cfg.cache_policy
            ids = choose_cache_ids(policy, ctx, CacheSize.parse(cfg.cache_size), row_bytes)
        self.features.fill_cache(ids)
        # Held halo: every rank's store serves every row training and layer-wise evaluation can
        # ask for, so fetching needs no exchange round (sampled evaluation reads any node).
        self.features.complete = hold and self.layerwise_eval
        if self.refresh_features is not None:  # the refresh reads through the same cache
            self.refresh_features.cache = self.features.cache
            self.refresh_features.complete = hold
        moved = self.data_comm.stats.bytes_received
        moved_all = int(self.comm.all_reduce(torch.tensor([moved], dtype=torch.int64))[0])
        self.data_comm.stats.reset()
        info = {"policy": policy, "size": "all halo rows" if hold else cfg.cache_size, "rows": int(ids.numel()),
                "bytes": int(ids.numel()) * row_bytes, "remote_rows": ctx.remote_rows,
                "fill_bytes_received": int(moved), "fill_bytes_received_all_ranks": moved_all,
                "seconds": time.perf_counter() - t0}
        if self.rank == 0:
            log.info("feature cache %s on rank 0: %d rows (%.1f MB) of %d remote rows, built in %.2f s",
                     policy, info["rows"], info["bytes"] / 1e6, ctx.remote_rows, info["seconds"])
        return info

    def _owned(self, mask: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(mask).flatten() + self.offset

    def _labels(self, seeds: torch.Tensor) -> torch.Tensor:
        return self.part.y[seeds - self.offset]

    def _steps(self, n_local: int, batch_size: int) -> int:
        t = torch.tensor([math.ceil(n_local / batch_size)], dtype=torch.int64)
        return int(self.comm.all_reduce(t, "max")[0])

    def _train_batches(self, epoch: int) -> list[torch.Tensor]:
        """This rank's seed batches of ``epoch``: the same count on every rank (see epoch_steps)."""
        cfg = self.cfg
        if self._train_steps is None:  # every rank's count of training nodes, once
            mine = {f"rank{r}": self.train_ids.numel() if r == self.rank else 0 for r in range(self.world)}
            counts = self.comm.all_reduce_named(mine, "sum")
            self._train_steps = epoch_steps([int(counts[f"rank{r}"]) for r in range(self.world)], cfg.batch_size)
        batches = shuffled_batches(self.train_ids, cfg.batch_size, cfg.seed, epoch, self.rank, self._train_steps)
        # --max-steps keeps the epoch's first batches (cutting fewer steps would enlarge them)
        return batches[:cfg.max_steps] if cfg.max_steps is not None else batches

    def _produce(self, epoch: int, batches: list[torch.Tensor], times: dict):
        """The data stages of one step: sample, then fetch features and labels onto the device.

        Returns (seeds, mb, x, y, blocks, event): ``mb`` stays on the host (ids for the halo
        tables); ``x``, ``y`` and ``blocks`` are on the training device, copied on a side
        stream whose ``event`` the step waits for (None on CPU, where ``blocks`` is ``mb.blocks``).
        """

        def produce(step: int):
            seeds = batches[step]
            t0 = time.perf_counter()
            self.health.enter("sampling", epoch, step)
            mb = self.sampler.sample(seeds, epoch=epoch, step=step)
            t1 = time.perf_counter()
            self.health.enter("fetching features", epoch, step)
            with self.copier.side_stream():
                x = self.features.fetch(mb.input_ids)
                self._fetch_degrees(mb)
                y = self.copier.move(self._labels(seeds))
                blocks = self._device_blocks(mb.blocks)
                event = self.copier.record()
            times["sample"] += t1 - t0
            times["fetch"] += time.perf_counter() - t1
            return seeds, mb, x, y, blocks, event

        return produce

    def _fetch_degrees(self, mb) -> None:
        """``mb.degrees``: the in-degrees of its blocks' sources, on the device (collective on the
        data group, like the feature fetch; nothing without a degree-normalized layer)."""
        if self.degrees is not None:
            ids = torch.unique(torch.cat([b.src_ids for b in mb.blocks] + [mb.seeds]))
            mb.degrees = self.degrees.lookup(ids).to(self.device)

    def _device_blocks(self, blocks: list[Block]) -> list[Block]:
        if self.device.type == "cpu":
            return blocks
        return [b.to(self.device, non_blocking=True) for b in blocks]

    def train_epoch(self, epoch: int, first: int = 0, partial: dict | None = None, history: list | None = None,
                    best: dict | None = None) -> dict:
        """Train steps ``first ..`` of ``epoch`` (``partial``: this rank's sums over the steps
        before ``first``, from a checkpoint). With ``--checkpoint-every N``, a checkpoint follows
        every N-th global step (``history``/``best``: the metrics so far, saved with it)."""
        cfg = self.cfg
        self.model.train()
        batches = self._train_batches(epoch)
        steps = len(batches)
        times = {"sample": 0.0, "fetch": 0.0, "compute": 0.0, "wait": 0.0}
        produce = self._produce(epoch, batches, times)
        if cfg.pipeline:
            feed = Prefetcher(lambda i: produce(first + i), steps - first, cfg.pipeline_depth,
                              timeout=self.data_comm.wait_bound(), describe=self.health.phase,
                              on_exit=self.health.leave)
        else:
            feed = (produce(step) for step in range(first, steps))
        partial = partial or {}
        loss_sum, correct, count = partial.get("loss_sum", 0.0), partial.get("correct", 0), partial.get("count", 0)
        bar = None
        if _progress_enabled(cfg, self.rank):
            from tqdm import tqdm

            bar = tqdm(total=steps, desc=f"epoch {epoch}", leave=False, dynamic_ncols=True)
        self.losses = []
        first_step = self.global_step - first
        t_last = time.perf_counter()  # --log-every: mean step seconds since the last logged step
        historical = self.mode == "historical"
        for seeds, mb, x, y, blocks, event in feed:
            t2 = time.perf_counter()
            gstep = self.global_step
            step = gstep - first_step
            self.copier.ready(event, x, y, *(t for b in blocks for t in (b.src_ids, b.dst_ids, b.edge_index)))
            self.health.enter("forward/backward and gradient all-reduce", epoch, step)
            out, loss, emit = self._step(x, y, mb, blocks, seeds, gstep)
            if historical:
                self.health.enter("embedding refresh and push", epoch, step)
                self._push_and_refresh(epoch, gstep, mb, emit)
            self.global_step += 1
            times["compute"] += time.perf_counter() - t2
            self.losses.append(float(loss.detach()))
            if self.tb is not None and cfg.log_every and self.global_step % cfg.log_every == 0:
                now = time.perf_counter()
                self.tb.add_scalar("step/loss", float(loss.detach()), self.global_step)
                self.tb.add_scalar("step/seconds", (now - t_last) / cfg.log_every, self.global_step)
                t_last = now
            loss_sum += float(loss.detach()) * seeds.numel()
            correct += int((out.argmax(1) == y).sum()) if seeds.numel() else 0
            count += int(seeds.numel())
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{float(loss):.3f}")
            if cfg.checkpoint_dir and cfg.checkpoint_every and self.global_step % cfg.checkpoint_every == 0:
                self._save_checkpoint(epoch, step + 1, history or [], best or {},
                                      {"loss_sum": loss_sum, "correct": correct, "count": count})
        if bar is not None:
            bar.close()
        self.health.enter("end of epoch: last push and metrics", epoch)
        if historical:
            t3 = time.perf_counter()
            self.halo.drain()
            times["compute"] += time.perf_counter() - t3
        if cfg.pipeline:
            times["wait"] = feed.wait_seconds
        times["grad_sync"] = self.comm.stats.grad_sync_seconds
        tot = self.comm.all_reduce(torch.tensor([loss_sum, float(correct), float(count)], dtype=torch.float64))
        return {
            "loss": float(tot[0] / max(tot[2], 1)),
            "train_acc": float(tot[1] / max(tot[2], 1)),
            "steps": steps,
            "stage_seconds": times,
        }

    def _step(self, x: torch.Tensor, y: torch.Tensor, mb, blocks: list[Block], seeds: torch.Tensor, gstep: int):
        """Forward, loss, backward (DDP's gradient all-reduce) and the optimizer step.

        Returns (logits, loss, emitted hidden rows or None). A failed collective of DDP's
        (a gradient bucket's all-reduce; with ``find_unused_parameters`` its unused-parameter
        map's, which bypasses the comm hook; its buffer broadcast in forward) surfaces as a
        plain RuntimeError; on more than one rank it is re-raised as the communicator's
        PeerError, which names the silent rank.
        """
        try:
            if self.mode == "historical":
                hist = [self.halo.lookup(i, b.hist_ids, gstep) if b.num_hist else None for i, b in enumerate(mb.blocks)]
                emit: list | None = []
                out = self.model(x, blocks, hist=hist, emit=emit, node_degree=mb.degrees)
            else:
                emit = None
                out = self.model(x, blocks, node_degree=mb.degrees)
            if seeds.numel():
                loss = F.cross_entropy(out, y)
            else:  # a rank with no training nodes still joins DDP's gradient all-reduce
                loss = out.sum() * 0.0
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
        except RuntimeError as err:
            if self.comm.failure is None and (self.world == 1 or not _is_collective_error(err)):
                raise  # a layer's own error stays itself
            raise self.comm.collective_failed("all_reduce", "gradient", err) from err
        self.opt.step()
        return out, loss, emit

    def _push_and_refresh(self, epoch: int, gstep: int, mb, emit: list) -> None:
        """Historical mode, end of a step: recompute this step's refresh slice, push what is due."""
        cfg = self.cfg
        self.halo.drain()  # the previous push (overlapped with this step) lands; its group is free
        nodes = self.halo.refresh_seeds(gstep)
        key = self.sampler.keys(epoch, gstep, self.rank, 1000)  # a stream of its own

        def sample_fn(ids: torch.Tensor):
            return self.sampler.sample_owned(ids, cfg.fanouts[0], key, kernels=self.refresh_kernels)

        self.net.eval()
        fresh = refresh_embeddings(self.net, nodes, sample_fn, self.refresh_kernels.relabel, self.refresh_features,
                                   self.halo, node_degree=self.refresh_degrees)
        self.net.train()
        ids, rows = [], []
        for l in range(len(self.cfg.fanouts) - 1):  # loop over hidden layers
            computed = mb.blocks[l].dst_ids
            extra = ~torch.isin(nodes, computed)
            ids.append(torch.cat([computed, nodes[extra]]))
            rows.append(torch.cat([emit[l].cpu(), fresh[l][extra]]))
        self.halo.push(gstep, ids, rows)

    def fill_tables(self) -> float:
        """Fill the halo tables with one layer-wise inference pass (current weights); seconds."""
        t0 = time.perf_counter()
        self.health.enter("halo table fill (layer-wise inference)")
        self.net.eval()
        self._full_logits()
        self.net.train()
        return time.perf_counter() - t0

    def _full_logits(self) -> torch.Tensor:
        """float32 [n_owned, C] logits of the owned nodes by layer-wise inference (collective).

        In historical mode the halo tables get the new embeddings, stamped as computed at the
        previous step; otherwise there are no tables and the inference streams by slices.
        """
        if self.halo is None:  # no halo tables to fill: hold the part and one slice, never the halo
            return streamed_inference(self.net, self.part.indptr, self.part.indices, self.features,
                                      node_degree=self.degrees, backend=self.cfg.sampler_backend)
        return layerwise_inference(self.net, self.part.indptr, self.part.feature_rows(), self.features, self.halo,
                                   step=self.global_step - 1, node_degree=self.degrees,
                                   backend=self.cfg.sampler_backend)

    @torch.no_grad()
    def evaluate_splits(self, splits: Sequence[torch.Tensor]) -> list[float]:
        """Accuracy over each set of node ids (every rank's, summed by all_reduce)."""
        if not self.layerwise_eval:
            return [self.evaluate(ids) for ids in splits]
        self.net.eval()
        pred_all = self._full_logits().argmax(1)
        return [self._accuracy(pred_all[ids - self.offset], self._labels(ids)) for ids in splits]

    @torch.no_grad()
    def evaluate(self, ids: torch.Tensor) -> float:
        """Accuracy over the nodes ``ids`` of every rank, with the sampled evaluation blocks."""
        cfg = self.cfg
        self.model.eval()
        steps = self._steps(ids.numel(), cfg.eval_batch_size)
        preds, labels = [], []
        for step, seeds in enumerate(_batches(ids, cfg.eval_batch_size, steps, wrap=False)):
            mb = self.eval_sampler.sample(seeds, epoch=0, step=step)
            x = self.features.fetch(mb.input_ids)
            self._fetch_degrees(mb)
            out = self.model(x, self._device_blocks(mb.blocks), node_degree=mb.degrees)
            preds.append(out.argmax(1).cpu())
            labels.append(self._labels(seeds))
        pred = torch.cat(preds) if preds else torch.empty(0, dtype=torch.int64)
        true = torch.cat(labels) if labels else torch.empty(0, dtype=torch.int64)
        return self._accuracy(pred, true)

    def _accuracy(self, pred: torch.Tensor, true: torch.Tensor) -> float:
        """Accuracy of this rank's predictions together with every other rank's (collective)."""
        if self.is_ogb:
            return self._ogb_accuracy(pred, true)
        tot = self.comm.all_reduce(torch.tensor([int((pred == true).sum()), pred.numel()], dtype=torch.int64))
        return float(tot[0]) / max(int(tot[1]), 1)

    def _ogb_accuracy(self, pred: torch.Tensor, true: torch.Tensor) -> float:
        """OGB's own Evaluator on the predictions gathered from every rank."""
        from ogb.nodeproppred import Evaluator

        gathered = self.comm.all_gather_object((pred.numpy(), true.numpy()))
        import numpy as np

        y_pred = np.concatenate([g[0] for g in gathered]).reshape(-1, 1)
        y_true = np.concatenate([g[1] for g in gathered]).reshape(-1, 1)
        if y_true.shape[0] == 0:
            return 0.0
        return float(Evaluator(name=self.meta["dataset"]).eval({"y_true": y_true, "y_pred": y_pred})["acc"])

    def _weights_digest(self) -> str:
        """sha256 of the model's parameters (to compare runs bit for bit)."""
        import hashlib

        h = hashlib.sha256()
        for p in self.model.parameters():
            h.update(p.detach().cpu().numpy().tobytes())
        return h.hexdigest()

    def _traffic(self) -> dict:
        """This rank's bytes per category (both communicators) and modelled seconds."""
        sent, received = {}, {}
        for c in (self.comm, self.data_comm, self.emb_comm):
            for k, v in c.stats.sent.items():
                sent[k] = sent.get(k, 0) + v
            for k, v in c.stats.received.items():
                received[k] = received.get(k, 0) + v
        comms = (self.comm, self.data_comm, self.emb_comm)
        modelled = {"seconds": sum(c.stats.modelled_seconds for c in comms),
                    "exchanges": sum(c.stats.modelled_exchanges for c in comms),
                    "bytes": sum(c.stats.modelled_bytes for c in comms)}
        rounds = dict(self.data_comm.stats.rounds)
        for k, v in self.emb_comm.stats.rounds.items():  # pushes and the refresh's feature fetch
            if k in ("embedding", "feature_request"):
                rounds[k] = rounds.get(k, 0) + v
        return {"sent": sent, "received": received, "modelled": modelled, "rounds": rounds}

    def _sum_traffic(self, traffic: dict, feat: dict, steps: int) -> dict:
        """Sum the per-category bytes, cache, embedding and modelled-link figures of every rank.

        Every figure travels by name (:meth:`Communicator.all_reduce_named`): one reduction,
        plus one for the per-rank modelled-link figures when a link is modelled.
        """
        cats = list(CATEGORIES) + ["cache_fill_request", "cache_fill", "degree_request", "degree"]
        ages = self.halo.stats["age_counts"] if self.halo is not None else {}
        vals = {f"sent.{c}": traffic["sent"].get(c, 0) for c in cats}
        vals |= {f"received.{c}": traffic["received"].get(c, 0) for c in cats}
        vals |= {"cache_hits": feat["cache_hits"], "remote_rows": feat["remote_rows"],
                 "local_rows": feat["local_rows"], "modelled_seconds": traffic["modelled"]["seconds"]}
        # Ages read, as a histogram over 0..S (a fixed set of names on every rank; lookup refuses
        # older rows): the rows used and the mean, min and max ages all derive from it.
        bound = self.cfg.staleness if self.mode == "historical" else 0
        vals |= {f"age.{a}": ages.get(a, 0) for a in range(bound + 1)}
        t = self.comm.all_reduce_named(vals, "sum")
        age_counts = {a: int(t[f"age.{a}"]) for a in range(bound + 1) if t[f"age.{a}"]}
        used = sum(age_counts.values())
        sent = {c: int(t[f"sent.{c}"]) for c in cats if t[f"sent.{c}"]}
        received = {c: int(t[f"received.{c}"]) for c in cats if t[f"received.{c}"]}
        hits, misses, local = int(t["cache_hits"]), int(t["remote_rows"]), int(t["local_rows"])
        row_bytes = 4 * self.meta["feature_dim"]
        rounds = traffic["rounds"]
        per = max(steps, 1)
        out = {
            "sampling_rounds_per_batch": rounds.get("sample_request", 0) / per,
            "feature_rounds_per_batch": rounds.get("feature_request", 0) / per,
            "embedding_rounds_per_batch": rounds.get("embedding", 0) / per,
            "embedding_bytes": received.get("embedding", 0),
            "embedding_rows_used": used,
            "embedding_age_mean": sum(a * n for a, n in age_counts.items()) / used if used else None,
            "embedding_age_max": max(age_counts) if used else None,
            "embedding_age_min": min(age_counts) if used else None,
            "embedding_age_counts": age_counts,
            "bytes_sent": sum(sent.values()),
            "bytes_received": sum(received.values()),
            "bytes_sent_by_category": sent,
            "bytes_received_by_category": received,
            "sampling_rounds_rank0": traffic["rounds"],
            "feature_rows_local": local,
            "feature_rows_remote_fetched": misses,
            "feature_rows_from_cache": hits,
            "cache_hit_rate": hits / max(hits + misses, 1),
            "cache_bytes_served": hits * row_bytes,
            "feature_bytes_fetched": received.get("feature", 0),
            "modelled_network_seconds": t["modelled_seconds"],
        }
        if self.network is not None:
            # Per rank, by name: each rank fills its own entries, the others add zeros.
            names = ("seconds", "exchanges", "bytes")
            mine = {f"{r}.{k}": (traffic["modelled"][k] if r == self.rank else 0)
                    for r in range(self.world) for k in names}
            got = self.comm.all_reduce_named(mine, "sum")
            by_rank = [{k: got[f"{r}.{k}"] for k in names} for r in range(self.world)]
            for rec in by_rank:
                rec["exchanges"], rec["bytes"] = int(rec["exchanges"]), int(rec["bytes"])
            out["modelled_network_by_rank"] = by_rank
            out["modelled_network_seconds_max_over_ranks"] = max(r["seconds"] for r in by_rank)
        return out

    # -- checkpoints ------------------------------------------------------------------------
    def _find_resume(self):
        """The checkpoint this run resumes from (None: a fresh start); every rank agrees.

        ``--resume``, or a restart under torchrun's elastic agent (``TORCHELASTIC_RESTART_COUNT``
        above 0) with a checkpoint folder, resumes from the newest valid checkpoint."""
        from gnnscale.training import checkpoint

        cfg = self.cfg
        self.resume_rank: dict = {}
        restarted = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0
        if not cfg.checkpoint_dir or not (cfg.resume or restarted):
            return None
        found = checkpoint.find_latest(cfg.checkpoint_dir, self.world,
                                       report=log.warning if self.rank == 0 else None)
        step = found.global_step if found is not None else -1
        agreed = self.comm.all_reduce_named({"min": step, "max": -step}, "min")
        if int(agreed["min"]) != -int(agreed["max"]):
            raise RuntimeSetupError(f"rank {self.rank}: the ranks found different newest checkpoints in "
                                    f"{cfg.checkpoint_dir} (steps {int(agreed['min'])} to {-int(agreed['max'])}); "
                                    "is the folder shared by every worker?")
        if found is None:
            if cfg.resume and not restarted:
                raise RuntimeSetupError(f"--resume: no complete checkpoint in {cfg.checkpoint_dir}; run without "
                                        "--resume to start afresh")
            return None
        self.resume_rank = checkpoint.load(found, f"rank{self.rank}.pt")
        if self.rank == 0:
            log.info("resuming from %s (epoch %d, step %d of it, global step %d)", found.path,
                     found.manifest["epoch"], found.manifest["step"], found.global_step)
        return found

    def _save_checkpoint(self, epoch: int, step: int, history: list, best: dict, partial: dict | None) -> None:
        """A checkpoint to resume at ``step`` of ``epoch`` (collective)."""
        from gnnscale.training import checkpoint

        cfg = self.cfg
        cache = self.features.cache
        mine = {"rng": torch.get_rng_state(), "cache_ids": cache.ids.clone() if cache is not None else None,
                "partial": partial}
        shared = None
        if self.rank == 0:
            shared = {"model": self.net.state_dict(), "optimizer": self.opt.state_dict(), "epoch": epoch,
                      "step": step, "global_step": self.global_step, "history": history, "best": best,
                      "config": config_record(cfg)}
        self.health.enter("checkpoint", epoch, step)
        path = checkpoint.save(cfg.checkpoint_dir, self.global_step, self.rank, self.comm, mine, shared,
                               {"epoch": epoch, "step": step}, cfg.keep_checkpoints)
        if self.rank == 0:
            log.info("checkpoint %s written (epoch %d, step %d)", path, epoch, step)

    def _restore(self) -> tuple[int, int, list, dict, dict | None]:
        """Load the resume checkpoint into the model and optimizer; (epoch, step, history,
        best, this rank's partial epoch sums)."""
        from gnnscale.training import checkpoint

        state = checkpoint.load(self.resume_from, "train.pt")
        mine, want = state["config"], config_record(self.cfg)
        # Options that change what is trained must match; run options (epochs, timeout, ...) may not.
        for key in ("fanouts", "hidden", "layer", "layer_kwargs", "dropout", "norm", "residual", "jk", "lr",
                    "weight_decay", "seed", "batch_size", "exchange", "staleness"):
            if key in mine and mine[key] != want.get(key):
                raise RuntimeSetupError(f"--resume: the checkpoint in {self.resume_from.path} was written with "
                                        f"{key}={mine[key]!r}, this run has {key}={want.get(key)!r}; resume with the "
                                        "same options, or start afresh in another --checkpoint-dir")
        self.net.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])
        self.global_step = int(state["global_step"])
        torch.set_rng_state(self.resume_rank["rng"])
        return int(state["epoch"]), int(state["step"]), list(state["history"]), dict(state["best"]), \
            self.resume_rank.get("partial")

    def save_model(self, path: str) -> None:
        """Rank 0 writes the trained model (see :func:`gnnscale.training.model_io.save_model`)."""
        from gnnscale.training.model_io import save_model

        if self.rank == 0:
            save_model(path, self.net, self.cfg, self.meta)
            log.info("model written to %s", path)

    def fit(self) -> dict:
        cfg = self.cfg
        history = []
        best = {"val_acc": -1.0, "test_acc": 0.0, "epoch": -1}
        start_epoch, start_step, partial = 0, 0, None
        if self.resume_from is not None:
            start_epoch, start_step, history, best, partial = self._restore()
        self.tb = None
        if cfg.tensorboard and self.rank == 0:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(cfg.tensorboard)
        if self.rank == 0:
            log.info(
                "training on %s: %d parts, %d nodes, %d train nodes on this rank, fanouts %s, batch %d",
                self.meta.get("dataset"), self.world, self.book.num_nodes, self.train_ids.numel(),
                list(cfg.fanouts), cfg.batch_size,
            )
        if self.mode == "historical":
            secs = self.fill_tables()
            self.startup_phases["halo table fill"] = secs
            got = torch.tensor([self.emb_comm.stats.received.get("embedding", 0),
                                self.data_comm.stats.received.get("feature", 0)], dtype=torch.float64)
            got = self.comm.all_reduce(got)
            fill_bytes = int(got.sum())
            self.exchange_info.update(fill_seconds=secs, fill_embedding_bytes=int(got[0]),
                                      fill_feature_bytes=int(got[1]), push_interval=self.halo.push_interval,
                                      refresh_period=self.halo.refresh_period)
            if self.rank == 0:
                log.info("halo tables filled by layer-wise inference in %.2f s (%.1f MB received, all ranks)",
                         secs, fill_bytes / 1e6)
        # As DistDGL's trainers count it: after the imports, until the first step (max over ranks).
        startup = float(self.comm.all_reduce(torch.tensor([time.perf_counter() - self._t_init],
                                                          dtype=torch.float64), "max")[0])
        phases = self.comm.all_reduce_named(self.startup_phases, "max")  # same names on every rank
        # Memory once the part is loaded and everything is built, before the first step: the
        # steps' own working set is each epoch's peak_rss_mb minus this.
        startup_memory = self.comm.all_gather_object(_process_figures())
        if self.rank == 0:
            log.info("start-up %.2f s (max over ranks: %s)", startup,
                     ", ".join(f"{k} {phases[k]:.2f}" for k in self.startup_phases))
        for epoch in range(start_epoch, cfg.epochs):
            for c in (self.comm, self.data_comm, self.emb_comm):
                c.stats.reset()
            self.features.reset_stats()
            if self.halo is not None:
                self.halo.reset_stats()
            t0 = time.perf_counter()
            first = start_step if epoch == start_epoch else 0
            rec = self.train_epoch(epoch, first, partial if epoch == start_epoch else None, history, best)
            train_seconds = time.perf_counter() - t0
            traffic = self._traffic()  # training only, before evaluation adds its own
            feat = dict(self.features.stats)
            if cfg.eval_every > 0 and ((epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1):
                self.health.enter("evaluation", epoch)
                rec["val_acc"], rec["test_acc"] = self.evaluate_splits([self.val_ids, self.test_ids])
            self.health.enter("epoch metrics", epoch)
            stages = ["sample", "fetch", "compute", "wait", "grad_sync"]
            vec = torch.tensor([train_seconds, time.perf_counter() - t0] + [rec["stage_seconds"][k] for k in stages],
                               dtype=torch.float64)
            self.comm.all_reduce(vec, "max")
            totals = self._sum_traffic(traffic, feat, rec["steps"])
            procs = self.comm.all_gather_object(_process_figures())  # one dict per rank
            for key in ("rss_mb", "peak_rss_mb", "rss_anon_mb", "rss_file_mb", "open_fds"):
                rec[f"{key}_by_rank"] = [p.get(key) for p in procs]
            rec.update(
                epoch=epoch,
                epoch_seconds=float(vec[0]),
                epoch_seconds_with_eval=float(vec[1]),
                stage_seconds_max_over_ranks={k: float(v) for k, v in zip(stages, vec[2:])},
                **totals,
            )
            history.append(rec)
            if "val_acc" in rec and rec["val_acc"] > best["val_acc"]:
                best = {"val_acc": rec["val_acc"], "test_acc": rec["test_acc"], "epoch": epoch}
            if self.rank == 0:
                acc = (
                    f" val {rec['val_acc']:.4f} test {rec['test_acc']:.4f}" if "val_acc" in rec else ""
                )
                extra = ""
                if self.cache_info["rows"]:
                    extra += f" | cache hit {rec['cache_hit_rate']:.1%}"
                if self.network is not None:
                    extra += f" | {rec['modelled_network_seconds']:.2f} s modelled network (all ranks)"
                if rec["embedding_age_mean"] is not None:
                    extra += (f" | embeddings {rec['embedding_bytes'] / 1e6:.2f} MB, age mean "
                              f"{rec['embedding_age_mean']:.2f} max {rec['embedding_age_max']}")
                st = rec["stage_seconds_max_over_ranks"]
                log.info(
                    "epoch %3d | loss %.4f | train %.4f%s | %.2f s (sample %.2f fetch %.2f compute %.2f wait %.2f) | "
                    "sent %.2f MB recv %.2f MB (all ranks)%s",
                    epoch, rec["loss"], rec["train_acc"], acc, rec["epoch_seconds"], st["sample"], st["fetch"],
                    st["compute"], st["wait"], rec["bytes_sent"] / 1e6, rec["bytes_received"] / 1e6, extra,
                )
            if self.tb is not None:
                _tensorboard_epoch(self.tb, rec)
            if cfg.checkpoint_dir and cfg.checkpoint_every is None:
                self._save_checkpoint(epoch + 1, 0, history, best, None)
        if not history:
            raise RuntimeSetupError(f"nothing to train: the checkpoint resumed from is already at epoch {start_epoch} "
                                    f"of --epochs {cfg.epochs}; raise --epochs to train on")
        if self.tb is not None:
            self.tb.close()
        if cfg.save_model:
            self.save_model(cfg.save_model)
        last = history[-1]
        result = {
            "config": config_record(self.cfg),
            "dataset": self.meta.get("dataset"),
            "num_parts": self.world,
            "epochs": history,
            "val_acc": last.get("val_acc"),
            "test_acc": last.get("test_acc"),
            "best_val_acc": best["val_acc"],
            "test_acc_at_best_val": best["test_acc"],
            "best_epoch": best["epoch"],
            "epoch_seconds": sum(h["epoch_seconds"] for h in history) / len(history),
            "startup_seconds": startup,
            "startup_phase_seconds_max_over_ranks": phases,
            "startup_rss_mb_by_rank": [p["rss_mb"] for p in startup_memory],
            "startup_rss_anon_mb_by_rank": [p["rss_anon_mb"] for p in startup_memory],
            "device": self.device.type,
            "bytes_sent": sum(h["bytes_sent"] for h in history),
            "bytes_received": sum(h["bytes_received"] for h in history),
            "cache": self.cache_info,
            "exchange": self.exchange_info,
            "network_model": self.network.describe() if self.network else None,
            "final_weights_sha256": self._weights_digest(),
        }
        if self.rank == 0 and cfg.metrics:
            os.makedirs(os.path.dirname(os.path.abspath(cfg.metrics)), exist_ok=True)
            with open(cfg.metrics, "w") as f:
                json.dump(result, f, indent=2)
            log.info("metrics written to %s", cfg.metrics)
        return result


def _tensorboard_epoch(writer, rec: dict) -> None:
    """One epoch's figures (already reduced over the ranks) as TensorBoard scalars."""
    epoch = rec["epoch"]
    scalars = {"loss/train": rec["loss"], "accuracy/train": rec["train_acc"], "accuracy/val": rec.get("val_acc"),
               "accuracy/test": rec.get("test_acc"), "time/epoch": rec["epoch_seconds"],
               "bytes/total": rec["bytes_sent"], "cache/hit_rate": rec["cache_hit_rate"],
               "embedding/age_mean": rec["embedding_age_mean"], "embedding/age_max": rec["embedding_age_max"]}
    scalars |= {f"time/{k}": v for k, v in rec["stage_seconds_max_over_ranks"].items()}
    scalars |= {f"bytes/{k}": v for k, v in rec["bytes_sent_by_category"].items()}
    for tag, value in scalars.items():
        if value is not None:
            writer.add_scalar(tag, float(value), epoch)
    writer.flush()


def _process_figures() -> dict:
    """This process's memory and open file descriptors now (None where unknown).

    ``rss_mb`` resident now, ``peak_rss_mb`` the lifetime peak (``VmHWM``), ``rss_anon_mb``
    and ``rss_file_mb`` the resident split between private memory and file pages (memory-mapped
    part arrays and shared libraries, which the kernel can drop and reread), ``open_fds``.
    """
    from gnnscale.partitioning.resources import current_rss_bytes, lifetime_peak_rss_bytes, proc_status_bytes

    split = proc_status_bytes("RssAnon", "RssFile")
    out: dict = {"rss_mb": (current_rss_bytes() / 1e6) or None, "peak_rss_mb": lifetime_peak_rss_bytes() / 1e6,
                 "rss_anon_mb": None if split["RssAnon"] is None else split["RssAnon"] / 1e6,
                 "rss_file_mb": None if split["RssFile"] is None else split["RssFile"] / 1e6, "open_fds": None}
    try:
        out["open_fds"] = len(os.listdir("/proc/self/fd"))
    except OSError:
        pass
    return out


def evaluate_worker(parts_dir: str, cfg: TrainConfig, model_path: str) -> dict:
    """One process of ``gnnscale evaluate``: the saved model's train/val/test accuracy over the
    parts, computed as the training run computed it (same evaluation method and draws)."""
    from gnnscale.logs import setup_logging
    from gnnscale.training.model_io import read_model_file

    setup_logging(rank=int(os.environ.get("RANK", "0")))
    worker = Worker(parts_dir, cfg)
    try:
        blob = read_model_file(model_path)
        worker.net.load_state_dict(blob["state"])
        train, val, test = worker.evaluate_splits([worker.train_ids, worker.val_ids, worker.test_ids])
        return {"train_acc": train, "val_acc": val, "test_acc": test}
    finally:
        worker.health.stop()


def train_worker(parts_dir: str, cfg: TrainConfig) -> dict:
    """The body of one training process (spawned by launch_local or started by torchrun)."""
    from gnnscale.logs import setup_logging

    setup_logging(rank=int(os.environ.get("RANK", "0")))
    worker = Worker(parts_dir, cfg)
    try:
        return worker.fit()
    finally:
        worker.health.stop()  # no heartbeat thread outlives training (gnnscale.train under torchrun)
