"""The step interface every parallelism mode implements, which the one trainer drives.

A mode (:class:`~gnnscale.parallel.data_parallel.DataParallel`,
:class:`~gnnscale.parallel.layer_pipeline.LayerPipeline`,
:class:`~gnnscale.parallel.chunk_pipeline.ChunkPipeline`) is built from a :class:`RunContext`
and answers the trainer's calls in the same order on every rank:

- :meth:`Axis.start`: work after building, before the first step (table fills);
- :meth:`Axis.batches`: the epoch's step inputs from a step on, in order (sampled and
  fetched in line or in a prefetching thread); :meth:`Axis.step` trains one of them;
- :meth:`Axis.end_epoch`: what lands at the epoch's end, and the epoch's own figures;
- :meth:`Axis.evaluate`: accuracies of the whole model, the same on every rank;
- :meth:`Axis.state` / :meth:`Axis.load_state`: this rank's part of a checkpoint;
  :meth:`Axis.whole_state`: the whole model's weights on rank 0 (the model file, the digest).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterator


@dataclass
class StepResult:
    """One step on one rank: ``loss`` (the step's mean loss where this rank computes it, else
    None), ``loss_sum`` over its ``count`` seeds, ``correct`` of them."""

    loss: float | None = None
    loss_sum: float = 0.0
    correct: int = 0
    count: int = 0


@dataclass
class RunContext:
    """What every mode is built from: the options, the plan, the process groups, the device,
    the partition folder and its metadata, a start-up phase timer and this rank's resume state."""

    cfg: Any
    plan: Any
    dims: Any
    parts_dir: str
    meta: dict
    device: Any
    copier: Any
    phase: Callable[[str], None]
    resume: dict = field(default_factory=dict)


class Axis:
    """Defaults shared by the modes (see the module docstring)."""

    #: every rank holds the same whole model: rank 0's weights and optimizer are the run's
    replicated = False
    #: this rank's module and optimizer
    net: Any = None
    opt: Any = None

    def start(self, gstep: int) -> dict[str, float]:
        """Start-up work after building (and after a checkpoint's state is loaded: ``gstep`` is
        the step training goes on at); seconds by phase name."""
        return {}

    def steps(self) -> int:
        """Steps per epoch (the same on every rank)."""
        raise NotImplementedError

    def batches(self, epoch: int, first: int) -> Iterator[Any]:
        raise NotImplementedError

    def step(self, epoch: int, step: int, gstep: int, batch: Any) -> StepResult:
        raise NotImplementedError

    def end_epoch(self, epoch: int, times: dict) -> dict:
        """After the epoch's last step: the stage seconds (``times`` holds the trainer's
        ``compute`` and ``wait``) and the epoch's mode figures (``pipeline``)."""
        return {"stage_seconds": times}

    def evaluate(self, splits, gstep: int) -> dict[str, float]:
        raise NotImplementedError

    def state(self) -> dict:
        return {"model": self.net.state_dict(), "optimizer": self.opt.state_dict()}

    def load_state(self, state: dict) -> None:
        self.net.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])

    def whole_state(self) -> dict | None:
        """The whole model's state dict on rank 0, None elsewhere (collective)."""
        raise NotImplementedError

    #: the whole model a pipelined mode builds on rank 0 (weights gathered into it)
    whole: Any = None

    def whole_model(self):
        """The whole model on rank 0 (the model file, the digest), None elsewhere (collective)."""
        merged = self.whole_state()
        if merged is None:
            return None
        self.whole.load_state_dict(merged)
        return self.whole

    def feature_counters(self) -> dict:
        """This rank's feature store counters (cache hits, remote and local rows)."""
        return {}

    def ages(self) -> tuple[dict, int]:
        """({age: rows read} of this rank's stale-row tables this epoch, the bound)."""
        return {}, 0

    def reset_stats(self) -> None:
        pass

    def info(self) -> dict:
        """Run-level figures: the cache, the exchange mode, the stages' layers."""
        return {}

    def step_loss(self, result: StepResult) -> float | None:
        """The step's loss for rank 0's logs (collective in modes where rank 0 computes none)."""
        return result.loss

    def close(self) -> None:
        pass


def merge_states(states) -> dict:
    """One state dict from stages' (in stage order): each entry from the first stage holding it
    (the encoder copies of chunk mode: stage 0's)."""
    merged: dict = {}
    for st in states:
        for k, v in st.items():
            merged.setdefault(k, v)
    return merged
