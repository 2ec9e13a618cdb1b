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
from dataclasses import asdict, dataclass, field
from typing import Sequence

import torch
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from gnnscale.comm import Communicator
from gnnscale.errors import RuntimeSetupError
from gnnscale.feature_store import DistFeatureStore
from gnnscale.models import GraphSAGE
from gnnscale.partitioning import load_part
from gnnscale.runtime import init_distributed
from gnnscale.samplers import DistNeighborSampler, check_fanouts

log = logging.getLogger("gnnscale.train")


@dataclass
class TrainConfig:
    """Hyperparameters and run options of ``gnnscale train`` (defaults are the CLI's)."""

    epochs: int = 10
    fanouts: Sequence[int] = (10, 10)
    eval_fanouts: Sequence[int] | None = None  # None: same as fanouts
    batch_size: int = 512
    eval_batch_size: int = 2048
    hidden: int = 128
    lr: float = 0.003
    weight_decay: float = 0.0
    dropout: float = 0.5
    seed: int = 0
    eval_every: int = 1
    timeout: float = 300.0
    metrics: str | None = None
    progress: bool | None = None  # None: a bar only when stderr is a terminal and not in CI
    verify: bool = True
    sampler_backend: str = "auto"  # "auto" | "numba" | "torch" (identical draws)


def _progress_enabled(cfg: TrainConfig, rank: int) -> bool:
    if rank != 0:
        return False
    if cfg.progress is not None:
        return cfg.progress
    return sys.stderr.isatty() and not os.environ.get("CI")


def _batches(ids: torch.Tensor, batch_size: int, steps: int, wrap: bool) -> list[torch.Tensor]:
    """Cut ``ids`` into exactly ``steps`` batches; wrap around (training) or pad with empties."""
    if wrap and ids.numel():
        need = steps * batch_size
        reps = math.ceil(need / ids.numel())
        ids = ids.repeat(reps)[:need] if reps > 1 else ids
    out = [ids[i * batch_size:(i + 1) * batch_size] for i in range(steps)]
    return out


class Worker:
    """One rank's training state: its part, sampler, feature store, model and optimizer."""

    def __init__(self, parts_dir: str, cfg: TrainConfig) -> None:
        info = init_distributed(timeout=cfg.timeout)
        self.rank, self.world = info.rank, info.world_size
        self.cfg = cfg
        self.part = load_part(parts_dir, self.rank, verify=cfg.verify)
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
        self.comm = Communicator(self.rank, self.world, timeout=cfg.timeout)
        fanouts = check_fanouts(cfg.fanouts)
        eval_fanouts = check_fanouts(cfg.eval_fanouts or cfg.fanouts, num_layers=len(fanouts))
        self.sampler = DistNeighborSampler(
            self.part.indptr, self.part.indices, self.book, self.comm, fanouts, seed=cfg.seed,
            owned_keys=self.part.orig_ids, backend=cfg.sampler_backend,
        )
        self.eval_sampler = DistNeighborSampler(
            self.part.indptr, self.part.indices, self.book, self.comm, eval_fanouts, seed=cfg.seed + 7919,
            owned_keys=self.part.orig_ids, backend=cfg.sampler_backend,
        )
        self.features = DistFeatureStore(self.part, self.book, self.comm, meta["feature_dim"])
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        model = GraphSAGE(meta["feature_dim"], cfg.hidden, meta["num_classes"], len(fanouts), cfg.dropout)
        if self.world > 1:
            self.model = DDP(model)
            self.model.register_comm_hook(None, self.comm.ddp_comm_hook())
        else:
            self.model = model
        torch.manual_seed(cfg.seed * 1000 + self.rank + 1)  # distinct dropout streams per rank
        self.opt = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.train_ids = self._owned(self.part.train_mask)
        self.val_ids = self._owned(self.part.val_mask)
        self.test_ids = self._owned(self.part.test_mask)
        self.is_ogb = str(meta.get("dataset", "")).startswith("ogbn-")

    def _owned(self, mask: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(mask).flatten() + self.offset

    def _labels(self, seeds: torch.Tensor) -> torch.Tensor:
        return self.part.y[seeds - self.offset]

    def _steps(self, n_local: int, batch_size: int) -> int:
        t = torch.tensor([math.ceil(n_local / batch_size)], dtype=torch.int64)
        return int(self.comm.all_reduce(t, "max")[0])

    def train_epoch(self, epoch: int) -> dict:
        cfg = self.cfg
        self.model.train()
        g = torch.Generator().manual_seed(cfg.seed * 100003 + epoch * 101 + self.rank)
        ids = self.train_ids[torch.randperm(self.train_ids.numel(), generator=g)]
        steps = self._steps(ids.numel(), cfg.batch_size)
        batches = _batches(ids, cfg.batch_size, steps, wrap=True)
        times = {"sample": 0.0, "fetch": 0.0, "compute": 0.0}
        loss_sum, correct, count = 0.0, 0, 0
        bar = None
        if _progress_enabled(cfg, self.rank):
            from tqdm import tqdm

            bar = tqdm(total=steps, desc=f"epoch {epoch}", leave=False, dynamic_ncols=True)
        for step, seeds in enumerate(batches):
            t0 = time.perf_counter()
            mb = self.sampler.sample(seeds, epoch=epoch, step=step)
            t1 = time.perf_counter()
            x = self.features.fetch(mb.input_ids)
            y = self._labels(seeds)
            t2 = time.perf_counter()
            out = self.model(x, mb.blocks)
            if seeds.numel():
                loss = F.cross_entropy(out, y)
            else:  # a rank with no training nodes still joins DDP's gradient all-reduce
                loss = out.sum() * 0.0
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            self.opt.step()
            t3 = time.perf_counter()
            times["sample"] += t1 - t0
            times["fetch"] += t2 - t1
            times["compute"] += t3 - t2
            loss_sum += float(loss.detach()) * seeds.numel()
            correct += int((out.argmax(1) == y).sum()) if seeds.numel() else 0
            count += int(seeds.numel())
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{float(loss):.3f}")
        if bar is not None:
            bar.close()
        tot = self.comm.all_reduce(torch.tensor([loss_sum, float(correct), float(count)], dtype=torch.float64))
        return {
            "loss": float(tot[0] / max(tot[2], 1)),
            "train_acc": float(tot[1] / max(tot[2], 1)),
            "steps": steps,
            "stage_seconds": times,
        }

    @torch.no_grad()
    def evaluate(self, ids: torch.Tensor) -> float:
        """Accuracy over the nodes ``ids`` of every rank (distributed, summed by all_reduce)."""
        cfg = self.cfg
        self.model.eval()
        steps = self._steps(ids.numel(), cfg.eval_batch_size)
        preds, labels = [], []
        for step, seeds in enumerate(_batches(ids, cfg.eval_batch_size, steps, wrap=False)):
            mb = self.eval_sampler.sample(seeds, epoch=0, step=step)
            x = self.features.fetch(mb.input_ids)
            out = self.model(x, mb.blocks)
            preds.append(out.argmax(1))
            labels.append(self._labels(seeds))
        pred = torch.cat(preds) if preds else torch.empty(0, dtype=torch.int64)
        true = torch.cat(labels) if labels else torch.empty(0, dtype=torch.int64)
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

    def fit(self) -> dict:
        cfg = self.cfg
        history = []
        best = {"val_acc": -1.0, "test_acc": 0.0, "epoch": -1}
        if self.rank == 0:
            log.info(
                "training on %s: %d parts, %d nodes, %d train nodes on this rank, fanouts %s, batch %d",
                self.meta.get("dataset"), self.world, self.book.num_nodes, self.train_ids.numel(),
                list(cfg.fanouts), cfg.batch_size,
            )
        for epoch in range(cfg.epochs):
            self.comm.stats.reset()
            t0 = time.perf_counter()
            rec = self.train_epoch(epoch)
            train_seconds = time.perf_counter() - t0
            if (epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
                rec["val_acc"] = self.evaluate(self.val_ids)
                rec["test_acc"] = self.evaluate(self.test_ids)
            seconds = torch.tensor([train_seconds, time.perf_counter() - t0], dtype=torch.float64)
            self.comm.all_reduce(seconds, "max")
            traffic = torch.tensor([self.comm.stats.bytes_sent, self.comm.stats.bytes_received], dtype=torch.float64)
            per_rank = self.comm.stats.snapshot()
            self.comm.all_reduce(traffic)
            rec.update(
                epoch=epoch,
                epoch_seconds=float(seconds[0]),
                epoch_seconds_with_eval=float(seconds[1]),
                bytes_sent=int(traffic[0]),
                bytes_received=int(traffic[1]),
                rank0_traffic=per_rank,
            )
            history.append(rec)
            if "val_acc" in rec and rec["val_acc"] > best["val_acc"]:
                best = {"val_acc": rec["val_acc"], "test_acc": rec["test_acc"], "epoch": epoch}
            if self.rank == 0:
                acc = (
                    f" val {rec['val_acc']:.4f} test {rec['test_acc']:.4f}" if "val_acc" in rec else ""
                )
                log.info(
                    "epoch %3d | loss %.4f | train %.4f%s | %.2f s | sent %.2f MB recv %.2f MB (all ranks)",
                    epoch, rec["loss"], rec["train_acc"], acc, rec["epoch_seconds"],
                    rec["bytes_sent"] / 1e6, rec["bytes_received"] / 1e6,
                )
        last = history[-1]
        result = {
            "config": asdict(self.cfg) | {"fanouts": list(cfg.fanouts)},
            "dataset": self.meta.get("dataset"),
            "num_parts": self.world,
            "epochs": history,
            "val_acc": last.get("val_acc"),
            "test_acc": last.get("test_acc"),
            "best_val_acc": best["val_acc"],
            "test_acc_at_best_val": best["test_acc"],
            "best_epoch": best["epoch"],
            "epoch_seconds": sum(h["epoch_seconds"] for h in history) / len(history),
            "bytes_sent": sum(h["bytes_sent"] for h in history),
            "bytes_received": sum(h["bytes_received"] for h in history),
        }
        if self.rank == 0 and cfg.metrics:
            os.makedirs(os.path.dirname(os.path.abspath(cfg.metrics)), exist_ok=True)
            with open(cfg.metrics, "w") as f:
                json.dump(result, f, indent=2)
            log.info("metrics written to %s", cfg.metrics)
        return result


def train_worker(parts_dir: str, cfg: TrainConfig) -> dict:
    """The body of one training process (spawned by launch_local or started by torchrun)."""
    from gnnscale.logs import setup_logging

    setup_logging(rank=int(os.environ.get("RANK", "0")))
    worker = Worker(parts_dir, cfg)
    return worker.fit()
