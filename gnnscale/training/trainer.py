"""The one trainer: a run's plan, its process groups and the mode's axis, driven by one loop.

:class:`Trainer` resolves the :class:`~gnnscale.planning.plan.ParallelPlan` (rejecting any
option the mode would not honour), builds :class:`~gnnscale.process.dims.ParallelDims` (every
process group, the heartbeat), finds the checkpoint to resume from, and builds the mode's axis
(data parallel, layer pipeline or chunk pipeline, :mod:`gnnscale.parallel.axis`). :meth:`Trainer.fit`
is the same loop for every mode: the epoch's steps (progress bar, per-step TensorBoard figures,
checkpoints every N steps), the end of the epoch, evaluation, the epoch's figures by name
(:mod:`gnnscale.training.metrics`), the log line, TensorBoard, the epoch's checkpoint; then
the model file and the result, which ``--metrics`` writes.
"""
from __future__ import annotations

import copy
import json
import logging
import os
import sys
import time

import torch

from gnnscale.config import TrainConfig
from gnnscale.errors import RuntimeSetupError
from gnnscale.outputs import write_or_keep
from gnnscale.nn.edge_features import resolve_edge_dim
from gnnscale.parallel.axis import RunContext, StepResult
from gnnscale.partitioning.feature_dtype import meta_feature_dtype, row_bytes
from gnnscale.partitioning.resources import ResourceMeter
from gnnscale.planning.plan import DATA_PARALLEL, LAYER_PIPELINE, plan_run
from gnnscale.process.comm import NetworkModel
from gnnscale.process.eager import stay_eager
from gnnscale.process.device import DeviceCopier, process_group_backend, resolve_device
from gnnscale.process.memory import keep_freed_memory
from gnnscale.process.dims import ParallelDims, local_rank
from gnnscale.process.groups import local_world_size
from gnnscale.training import checkpoint, metrics
from gnnscale.training.model_io import config_record

log = logging.getLogger("gnnscale.train")


def _evaluations_since(history: list, best: metrics.Selection) -> int:
    """Evaluated epochs in ``history`` after the best one (all of them before any best)."""
    return sum(1 for rec in history if rec.get("val_acc") is not None and rec["epoch"] > best.epoch)


def _progress_enabled(cfg: TrainConfig, rank: int) -> bool:
    if rank != 0:
        return False
    if cfg.progress is not None:
        return cfg.progress
    return sys.stderr.isatty() and not os.environ.get("CI")


def _axis_class(mode: str):
    if mode == DATA_PARALLEL:
        from gnnscale.parallel.data_parallel import DataParallel

        return DataParallel
    if mode == LAYER_PIPELINE:
        from gnnscale.parallel.layer_pipeline import LayerPipeline

        return LayerPipeline
    from gnnscale.parallel.chunk_pipeline import ChunkPipeline

    return ChunkPipeline


class Trainer:
    """One rank's run (see the module docstring)."""

    def __init__(self, parts_dir: str, cfg: TrainConfig) -> None:
        from gnnscale.partitioning import load_meta

        self._t_init = time.perf_counter()  # start-up: from here to the first step (after imports)
        stay_eager()  # the optimizer's first step would import torch._dynamo (2-3 s), unused here
        self.heap = keep_freed_memory()  # each step's large tensors reuse the last step's pages
        self.cfg = cfg
        meta = load_meta(parts_dir)
        world = int(os.environ.get("WORLD_SIZE", "1"))
        self.plan = plan = plan_run(cfg, meta, world, where=str(parts_dir))
        if plan.mode == DATA_PARALLEL:
            self.device = resolve_device(cfg.device, local_rank(), local_world_size())
        else:  # the stages exchange activations over gloo: the CPU (--device cuda was refused by the plan)
            self.device = torch.device("cpu")
        self.network = NetworkModel(cfg.net_bandwidth_gbps, cfg.net_latency_ms) if cfg.net_bandwidth_gbps else None
        self.dims = dims = ParallelDims.build(plan, cfg.timeout, process_group_backend(self.device), self.network,
                                              embedding=plan.mode == DATA_PARALLEL and cfg.exchange == "historical")
        self.rank, self.world = dims.rank, dims.world
        self.startup_phases = {"process group": time.perf_counter() - self._t_init}
        mark = [time.perf_counter()]

        def phase(name: str) -> None:  # seconds of each start-up phase, by name (metrics and log)
            now = time.perf_counter()
            self.startup_phases[name] = self.startup_phases.get(name, 0.0) + now - mark[0]
            mark[0] = now

        dims.health.enter("start-up")
        self.meta = meta
        self.verified = bool(cfg.verify)  # every part loads with its checksums checked
        self.resume_from, resume_rank = checkpoint.find_resume(cfg, dims.comm, self.rank, self.world)
        # edge features: De when the partition has them, the layers read them and the mode runs them (else 0)
        edge_dim = resolve_edge_dim(cfg, meta, plan.mode, self.rank)
        ctx = RunContext(cfg, plan, dims, str(parts_dir), meta, self.device, DeviceCopier(self.device), phase,
                         resume_rank, edge_dim)
        self.axis = _axis_class(plan.mode)(ctx)
        self.resume_rank = resume_rank
        self.global_step = 0
        self.tb = None  # rank 0's TensorBoard writer, made by fit() with --tensorboard
        self.best_state: dict | None = None  # --early-stop-patience: this rank's weights at the best evaluation
        self.unwritten: list[str] = []  # rank 0: outputs whose write failed at the end, and where they are kept

    # -- checkpoints ------------------------------------------------------------------------
    def _save_checkpoint(self, epoch: int, step: int, history: list, best: metrics.Selection,
                         partial: dict | None) -> None:
        """A checkpoint to resume at ``step`` of ``epoch`` (collective)."""
        cfg, axis = self.cfg, self.axis
        cache_ids = getattr(axis, "cache_ids", lambda: None)()
        mine = {"rng": torch.get_rng_state(), "cache_ids": cache_ids, "partial": partial,
                "axis": None if axis.replicated else axis.state(), "axis_rank": axis.rank_state(),
                "best_state": self.best_state}
        shared = None
        if self.rank == 0:
            shared = {"epoch": epoch, "step": step, "global_step": self.global_step, "history": history, "best": best.record(),
                      "config": config_record(cfg)}
            if axis.replicated:  # every rank holds the same model: rank 0's is the run's
                shared.update(axis.state())
        self.dims.health.enter("checkpoint", epoch, step)
        try:
            path = checkpoint.save(cfg.checkpoint_dir, self.global_step, self.rank, self.dims.comm, mine, shared,
                                   {"epoch": epoch, "step": step}, cfg.keep_checkpoints)
        except checkpoint.CheckpointWriteError as err:  # every rank: the weights trained so far kept as a model file
            raise checkpoint.CheckpointWriteError(f"{err}; {self._keep_model()}") from None
        if self.rank == 0:
            log.info("checkpoint %s written (epoch %d, step %d)", path, epoch, step)

    def _restore(self) -> tuple[int, int, list, metrics.Selection, dict | None]:
        """Load the resume checkpoint into the model and optimizer; (epoch, step, history, best,
        this rank's partial epoch sums)."""
        state = checkpoint.load(self.resume_from, "train.pt")
        checkpoint.check_config(state["config"], config_record(self.cfg), self.resume_from.path)
        self.axis.load_state(state if self.axis.replicated else self.resume_rank["axis"])
        self.axis.load_rank_state(self.resume_rank.get("axis_rank"))
        self.global_step = int(state["global_step"])
        self.best_state = self.resume_rank.get("best_state")
        torch.set_rng_state(self.resume_rank["rng"])
        return (int(state["epoch"]), int(state["step"]), list(state["history"]),
                metrics.Selection.from_record(state["best"]), self.resume_rank.get("partial"))

    def _snapshot(self) -> dict:
        """This rank's whole training state now (a copy): what :meth:`_restore_best` loads back."""
        return copy.deepcopy({"axis": self.axis.state(), "axis_rank": self.axis.rank_state(),
                              "global_step": self.global_step})

    def _restore_best(self, history: list, best: metrics.Selection) -> dict | None:
        """--early-stop-patience: load the best evaluation's weights (every rank its own) and
        evaluate them again with that evaluation's draws (its global step): the run's final
        evaluation and --save-model are the best epoch's. None when the last epoch was the best."""
        if self.best_state is None or best.epoch == history[-1]["epoch"]:
            return None
        self.axis.load_state(self.best_state["axis"])
        self.axis.load_rank_state(self.best_state["axis_rank"])
        scores = self.axis.evaluate(("val", "test"), int(self.best_state["global_step"]))
        if self.rank == 0:
            log.info("restored the weights of epoch %d (best validation): val %.4f, test %.4f", best.epoch,
                     scores["val"], scores["test"])
        return {"epoch": best.epoch, "val": scores["val"], "test": scores["test"]}

    def save_model(self, path: str) -> None:
        """Rank 0 writes the whole trained model (collective: pipeline stages gather their weights)."""
        from gnnscale.training.model_io import save_model

        model = self.axis.whole_model()
        if self.rank == 0:  # a write that fails now keeps the model beside (gnnscale.outputs), said in one line
            kept = write_or_keep(lambda where: save_model(where, model, self.axis.spec, self.cfg, self.meta), path,
                                 "--save-model", "the trained model", [self.cfg.checkpoint_dir])
            if kept:
                self.unwritten.append(kept)
            else:
                log.info("model written to %s", path)

    def _keep_model(self) -> str:
        """The model trained so far written where a file can be (beside --save-model, the working or the
        temporary folder; collective): the words saying where, the same on every rank."""
        from gnnscale.outputs import keep
        from gnnscale.training.model_io import save_model

        model = self.axis.whole_model()
        words = None
        if self.rank == 0:
            kept, tried = keep(lambda where: save_model(where, model, self.axis.spec, self.cfg, self.meta), "model.pt",
                               [os.path.dirname(os.path.abspath(self.cfg.save_model)) if self.cfg.save_model else None])
            words = (f"the model trained so far (global step {self.global_step}) is kept in {kept}" if kept else
                     f"the model trained so far could not be kept either (tried {', '.join(tried)})")
        return self.dims.comm.all_gather_object(words)[0] if self.world > 1 else words

    # -- the loop -----------------------------------------------------------------------------
    def train_epoch(self, epoch: int, first: int, partial: dict | None, history: list,
                    best: metrics.Selection) -> dict:
        """Train steps ``first ..`` of ``epoch`` (``partial``: this rank's sums over the steps
        before ``first``, from a checkpoint). With ``--checkpoint-every N``, a checkpoint follows
        every N-th global step (``history``/``best``: the metrics so far, saved with it)."""
        cfg, axis, health = self.cfg, self.axis, self.dims.health
        steps = axis.steps()
        partial = partial or {}
        sums = StepResult(None, partial.get("loss_sum", 0.0), partial.get("correct", 0), partial.get("count", 0))
        times = {"compute": 0.0, "wait": 0.0}
        bar = None
        if _progress_enabled(cfg, self.rank):
            from tqdm import tqdm

            bar = tqdm(total=steps, desc=f"epoch {epoch}", leave=False, dynamic_ncols=True, initial=first)
        first_step = self.global_step - first
        t_last = time.perf_counter()  # --log-every: mean step seconds since the last logged step
        log_steps = bool(cfg.tensorboard and cfg.log_every)
        for batch in axis.batches(epoch, first):
            t2 = time.perf_counter()
            gstep = self.global_step
            step = gstep - first_step
            res = axis.step(epoch, step, gstep, batch)
            self.global_step += 1
            times["compute"] += time.perf_counter() - t2
            if res.loss is not None:
                self.step_losses.append(res.loss)
            if log_steps and self.global_step % cfg.log_every == 0:
                loss = axis.step_loss(res)  # collective where rank 0 computes no loss
                if self.tb is not None:
                    now = time.perf_counter()
                    if loss is not None:
                        self.tb.add_scalar("step/loss", float(loss), self.global_step)
                    self.tb.add_scalar("step/seconds", (now - t_last) / cfg.log_every, self.global_step)
                    t_last = now
            sums.loss_sum += res.loss_sum
            sums.correct += res.correct
            sums.count += res.count
            if bar is not None:
                bar.update(1)
                if res.loss is not None:
                    bar.set_postfix(loss=f"{res.loss:.3f}")
            if cfg.checkpoint_dir and cfg.checkpoint_every and self.global_step % cfg.checkpoint_every == 0:
                self._save_checkpoint(epoch, step + 1, history, best,
                                      {"loss_sum": sums.loss_sum, "correct": sums.correct, "count": sums.count})
        if bar is not None:
            bar.close()
        health.enter("end of epoch: last push and metrics", epoch)
        out = axis.end_epoch(epoch, times)
        loss, acc = metrics.reduce_counts(self.dims.comm, sums.loss_sum, sums.correct, sums.count)
        return {"loss": loss, "train_acc": acc, "steps": steps, "stage_seconds": out["stage_seconds"],
                "pipeline": out.get("pipeline"), "prefetch_depth": out.get("prefetch_depth")}

    def fit(self) -> dict:
        """Train ``--epochs`` epochs (from the resume checkpoint's step, if any), evaluating every
        ``--eval-every``; the run's result (:func:`~gnnscale.training.metrics.run_result`), also
        written to ``--metrics`` by rank 0."""
        cfg, dims, axis = self.cfg, self.dims, self.axis
        history: list = []
        best = metrics.Selection()  # the selection metric's best validation so far: accuracy, RMSE, ROC-AUC, ...
        start_epoch, start_step, partial = 0, 0, None
        self.step_losses: list[float] = []
        if self.resume_from is not None:
            start_epoch, start_step, history, best, partial = self._restore()
        if cfg.tensorboard and self.rank == 0:
            from torch.utils.tensorboard import SummaryWriter

            self.tb = SummaryWriter(cfg.tensorboard)
        startup, phases, startup_memory = self._start()
        info = axis.info()
        for epoch in range(start_epoch, cfg.epochs):
            dims.reset_stats()
            axis.reset_stats()
            t0 = (time.perf_counter(), time.process_time())
            first = start_step if epoch == start_epoch else 0
            rec = self.train_epoch(epoch, first, partial if epoch == start_epoch else None, history, best)
            rec = self._close_epoch(epoch, rec, t0, info)
            history.append(rec)
            if rec.get("val_acc") is not None and best.improves(rec["val_acc"], rec.get("metric")):
                best = metrics.Selection(rec["val_acc"], rec["test_acc"], epoch)
                if cfg.early_stop_patience:
                    self.best_state = self._snapshot()
            if self.rank == 0:
                log.info(metrics.epoch_line(rec, info.get("cache", {}).get("rows", 0), self.network is not None))
            if self.tb is not None:
                metrics.tensorboard_epoch(self.tb, rec)
            stop = cfg.early_stop_patience is not None and _evaluations_since(history, best) >= cfg.early_stop_patience
            if cfg.checkpoint_dir and cfg.checkpoint_every is None:
                self._save_checkpoint(epoch + 1, 0, history, best, None)
            if stop:
                if self.rank == 0:
                    log.info("early stop after epoch %d: validation %s has not improved in %d evaluations since epoch "
                             "%d (%.4f)", epoch, rec.get("metric", "accuracy"), cfg.early_stop_patience, best.epoch,
                             best.val)
                break
        if not history:
            raise RuntimeSetupError(f"nothing to train: the checkpoint resumed from is already at epoch {start_epoch} "
                                    f"of --epochs {cfg.epochs}; raise --epochs to train on")
        if self.tb is not None:
            self.tb.close()
        restored = self._restore_best(history, best) if cfg.early_stop_patience else None
        if cfg.save_model:
            self.save_model(cfg.save_model)
        dynamo = dims.comm.all_gather_object("torch._dynamo" in sys.modules)  # kept off the step path (process/eager.py)
        result = metrics.run_result(
            config=config_record(cfg), plan=self.plan.record(), meta=self.meta, info=info, history=history, best=best,
            startup=startup, phases=phases, startup_memory=startup_memory, device=self.device.type,
            network=self.network.describe() if self.network else None, digest=self._digest(),
            resumed_at=self.resume_from.global_step if self.resume_from is not None else None,
            process={"timeout": dims.comm.timeout, "progress_bar": _progress_enabled(cfg, 0),
                     "sampler_backend": info.get("sampler_backend"), "verified": bool(self.verified),
                     # other parts on this host read from the folder (features, graph; parts: how many)
                     "host_reads": info.get("host_reads"),
                     "threads": torch.get_num_threads(), "torch_dynamo_imported_by_rank": dynamo,
                     "heap": self.heap},  # freed memory kept mapped (process/memory.py) or why not
            step_losses=self.step_losses)
        if cfg.early_stop_patience:
            result["early_stop"] = {"patience": cfg.early_stop_patience, "stopped_after_epoch": history[-1]["epoch"],
                                    "stopped": history[-1]["epoch"] + 1 < cfg.epochs, "restored": restored}
        if self.unwritten:  # the model's: the metrics file says where it is kept
            result["unwritten"] = self.unwritten
        if self.rank == 0 and cfg.metrics:
            def write(where: str) -> None:
                os.makedirs(os.path.dirname(os.path.abspath(where)), exist_ok=True)
                with open(where, "w") as f:
                    json.dump(metrics.as_tensor_free(result), f, indent=2)

            kept = write_or_keep(write, cfg.metrics, "--metrics", "the metrics file", [cfg.checkpoint_dir])
            if kept:
                self.unwritten.append(kept)
            else:
                log.info("metrics written to %s", cfg.metrics)
        if self.unwritten:  # the launcher reports them in one line (gnnscale.api.finished)
            result["unwritten"] = self.unwritten
        return result

    def _start(self) -> tuple[float, dict, list[dict]]:
        """The axis started; (start-up seconds, each start-up phase's seconds, every rank's memory),
        max over the ranks where a figure is one (collective)."""
        comm, axis = self.dims.comm, self.axis
        if self.rank == 0:
            log.info("training on %s: %s, %d nodes, fanouts %s, batch %d", self.meta.get("dataset"),
                     self.plan.describe(), int(self.meta["num_nodes"]), list(self.cfg.fanouts), self.cfg.batch_size)
        if axis.steps() == 0:
            raise RuntimeSetupError(f"no part of the partition has a training node, so an epoch has no step: check "
                                    f"the dataset's train mask ({self.meta.get('dataset')})")
        self.startup_phases.update(axis.start(self.global_step))
        # As DistDGL's trainers count it: after the imports, until the first step (max over ranks).
        startup = float(comm.all_reduce(torch.tensor([time.perf_counter() - self._t_init], dtype=torch.float64),
                                        "max")[0])
        phases = comm.all_reduce_named(self._phase_names(), "max")  # same names on every rank
        # Memory once the part is loaded and everything is built, before the first step: the
        # steps' own working set is each epoch's peak_rss_mb minus this.
        startup_memory = comm.all_gather_object(metrics.process_figures())
        if self.rank == 0:
            log.info("start-up %.2f s (max over ranks: %s)", startup,
                     ", ".join(f"{k} {v:.2f}" for k, v in phases.items() if k in self.startup_phases))
        return startup, phases, startup_memory

    def _close_epoch(self, epoch: int, rec: dict, t0: tuple[float, float], info: dict) -> dict:
        """Epoch ``epoch``'s record (:func:`~gnnscale.training.metrics.epoch_record`) from its
        training figures ``rec`` (``t0``: its start, wall and this process's CPU clock): the traffic
        counted by training, the evaluation when one is due, then every figure reduced over the
        ranks (collective)."""
        cfg, dims, axis = self.cfg, self.dims, self.axis
        comm = dims.comm
        train_seconds = time.perf_counter() - t0[0]
        train_cpu = time.process_time() - t0[1]  # every thread of this process; time stolen by a hypervisor is not in it
        mine = metrics.traffic(dims.communicators(), dims.data, dims.embedding)  # before evaluation's own
        feat = axis.feature_counters()
        ages, bound = axis.ages()
        trained_peak = metrics.process_figures()["peak_rss_mb"]  # the peak so far: training's (and start-up's)
        eval_peak = None
        if cfg.eval_every > 0 and ((epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1):
            dims.health.enter("evaluation", epoch)
            with ResourceMeter() as meter:  # exact where evaluation raises the peak, else sampled every 50 ms
                scores = axis.evaluate(("val", "test"), self.global_step)
            eval_peak = meter.peak_rss_bytes / 1e6
            metrics.add_evaluation(rec, scores, info.get("metric", "accuracy"))
        dims.health.enter("epoch metrics", epoch)
        vec = torch.tensor([train_seconds, time.perf_counter() - t0[0]] + [rec["stage_seconds"][k]
                                                                       for k in metrics.STAGES], dtype=torch.float64)
        comm.all_reduce(vec, "max")
        totals = metrics.sum_traffic(comm, mine, feat, rec["steps"], ages, bound,
                                     row_bytes(meta_feature_dtype(self.meta), _row_width(self.meta)),
                                     self.network)
        procs = comm.all_gather_object(metrics.process_figures() | {"training_peak_rss_mb": trained_peak,
                                                                     "evaluation_peak_rss_mb": eval_peak,
                                                                     "epoch_cpu_seconds": train_cpu})
        return metrics.epoch_record(rec, epoch, vec, totals, procs)

    def _phase_names(self) -> dict:
        """Every start-up phase any mode has (zeros for the ones this run has not), by name."""
        names = ("process group", "part load", "groups and samplers", "model and halo", "DDP and optimizer",
                 "feature cache", "stages and tables", "halo table fill")
        return {k: self.startup_phases.get(k, 0.0) for k in names}

    def _digest(self) -> str:
        """sha256 of the whole model's parameters, in the model's order (every rank gets rank 0's)."""
        params = self.axis.digest_params()  # a replicated model's own parameters, when they are the whole model
        if params is not None:
            return metrics.weights_digest(params)
        model = self.axis.whole_model()
        mine = metrics.weights_digest(model.parameters()) if model is not None else None
        return self.dims.comm.all_gather_object(mine)[0]

    def close(self) -> None:
        self.axis.close()
        self.dims.stop()


def train_worker(parts_dir: str, cfg: TrainConfig) -> dict:
    """The body of one training process (spawned by launch_local or started by torchrun), in every mode."""
    from gnnscale.logs import setup_logging

    setup_logging(rank=int(os.environ.get("RANK", "0")))
    trainer = Trainer(parts_dir, cfg)
    try:
        return trainer.fit()
    finally:
        trainer.close()  # no heartbeat thread outlives training (gnnscale.train under torchrun)


def _row_width(meta: dict) -> int:
    """Floats in a feature row (a typed graph: its widest type's, what sizes cache figures)."""
    typed = meta.get("typed") or {}
    return int(meta.get("feature_dim") or max(typed.get("feature_dims") or [0]))


