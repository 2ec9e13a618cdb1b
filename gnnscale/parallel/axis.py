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
    the partition folder and its metadata, a start-up phase timer, this rank's resume state and
    the edge features per edge the model and samplers read (``edge_dim``, 0: none; resolved once
    for the run by :func:`~gnnscale.nn.edge_features.resolve_edge_dim`)."""

    cfg: Any
    plan: Any
    dims: Any
    parts_dir: str
    meta: dict
    device: Any
    copier: Any
    phase: Callable[[str], None]
    resume: dict = field(default_factory=dict)
    edge_dim: int = 0


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
        return {"model": self.net.state_dict(), "optimizer": self.opt.state_dict(),
                "bounds": getattr(self, "bounds", None)}

    def load_state(self, state: dict) -> None:
        self.net.load_state_dict(state["model"])
        self.opt.load_state_dict(state["optimizer"])

    def rank_state(self) -> dict | None:
        """What this rank alone holds beyond :meth:`state` (a replicated model's sharded tables),
        for its own checkpoint file; None: nothing."""
        return None

    def load_rank_state(self, state: dict | None) -> None:
        """Load :meth:`rank_state`'s dict from a resumed checkpoint (None: nothing was saved)."""

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

    def digest_params(self):
        """This rank's parameters when they are the whole model's, in its order (every rank the
        same: a replicated model); None: the digest is of :meth:`whole_model`'s (gathered)."""
        return None

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


def resumed_bounds(ctx: RunContext, num_stages: int, stage_layers) -> list[tuple[int, int]] | None:
    """The stage split a resumed pipeline's checkpoint was written with (None: not resuming, or a
    checkpoint without one). Stages balanced by measured costs could split otherwise on a busier
    machine, and a stage would then load another stage's layers; a split given by
    ``--stage-layers`` must be the checkpoint's."""
    saved = (ctx.resume or {}).get("axis") or {}
    bounds = saved.get("bounds") if isinstance(saved, dict) else None
    if not bounds:
        return None
    bounds = [(int(a), int(b)) for a, b in bounds]
    if stage_layers is not None and [b - a for a, b in bounds] != [int(n) for n in stage_layers]:
        from gnnscale.errors import RuntimeSetupError

        raise RuntimeSetupError(f"the checkpoint's {num_stages} stages hold {[b - a for a, b in bounds]} layers, but "
                                f"--stage-layers gives {list(stage_layers)}; resume with --stage-layers "
                                f"{','.join(str(b - a) for a, b in bounds)} (or leave it out)")
    return bounds
