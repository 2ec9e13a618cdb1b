"""A pipeline stage: a run of consecutive layers on one worker, its optimizer, and the point-to-point
exchange with its neighbour stages that a flushed schedule (GPipe or 1F1B) drives.

:meth:`PipelineStage.run` executes one optimizer step of M micro-batches under a schedule
(:func:`gnnscale.planning.schedules.schedule`): forward of micro-batch m (stage 0 reads its
input, any other stage receives h^{start} from the stage before), backward (the last stage
back-propagates its loss, any other receives the gradient of its output), sends on, and after
the M backwards (a flush) the stage's gradients are reduced over its replicas and its own
optimizer steps. Every message goes through the run's :class:`~gnnscale.process.comm.Communicator`
(its timeout, byte accounting under ``activation`` / ``activation_grad``, the modelled link, and
the heartbeat's diagnosis of a silent neighbour). Receives are posted ahead (a micro-batch's
activations one ahead, its gradients as soon as its forward has run) so that tensors travel
while the stage computes.

Per step a stage reports (:class:`StepStats`) the bytes it sent and received, the seconds it
waited for its neighbours (the bubble), its busy and gradient-sync seconds, and its peak of
stored activations (micro-batches held and the bytes autograd saved for them, measured with
saved-tensor hooks).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Sequence

import torch

from gnnscale.nn.models import GNN
from gnnscale.planning.schedules import schedule
from gnnscale.process.comm import Communicator
from gnnscale.process.eager import adam


@dataclass
class StepStats:
    """One stage's figures for one optimizer step."""

    loss: float | None = None  # last stage: the step's mean loss
    correct: int = 0  # last stage: seeds (training nodes) predicted right
    count: int = 0  # last stage: seeds (training nodes) in the loss
    bytes_sent: dict = field(default_factory=lambda: {"activation": 0, "activation_grad": 0})
    bytes_received: dict = field(default_factory=lambda: {"activation": 0, "activation_grad": 0})
    wait_seconds: float = 0.0  # blocked on a neighbour stage: the bubble
    busy_seconds: float = 0.0  # forward, backward and optimizer
    grad_sync_seconds: float = 0.0  # the gradient all-reduce after the flush
    step_seconds: float = 0.0
    peak_micro_batches: int = 0  # most micro-batches whose activations were held at once
    peak_activation_bytes: int = 0  # most bytes autograd held saved for them at once


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
        bounds: every stage's ``(start, end)`` layers (:func:`~gnnscale.planning.schedules.plan_stages`).
        stage: this stage. ranks: the global rank of each stage of this pipeline.
        comm: the world's :class:`Communicator` (point to point between stages).
        lr, weight_decay: Adam's, over this stage's parameters only (a decay by prefix,
            ``convs=0.01,5e-4``, checked against the whole model's parameter names).
        replicas: the communicator of this stage's D replicas (the same stage of every
            pipeline); after each flush their gradients are averaged (one all-reduce of the
            stage's flat gradient, counted as ``gradient``). None: one pipeline.
        keep_encoder: every stage keeps the encoder (chunk mode rebuilds x0 on each stage).
        health: the heartbeat (phases of the step). pipeline: this stage's pipeline (messages).
    """

    def __init__(self, model: GNN, bounds: Sequence[tuple[int, int]], stage: int, ranks: Sequence[int],
                 comm: Communicator, lr: float = 0.003, weight_decay: float = 0.0,
                 replicas: Communicator | None = None, keep_encoder: bool = False, health=None,
                 pipeline: int = 0) -> None:
        self.start, self.end = bounds[stage]
        self.bounds = list(bounds)
        self.stage, self.num_stages = stage, len(bounds)
        self.first, self.last = stage == 0, stage == len(bounds) - 1
        self.prev = ranks[stage - 1] if not self.first else None
        self.next = ranks[stage + 1] if not self.last else None
        names = [n for n, _ in model.named_parameters()]  # the whole model's: --weight-decay's prefixes
        self.model = stage_model(model, self.start, self.end, keep_encoder)
        self.uses_x0 = model.uses_x0
        self.comm = comm
        self.health = health
        self.me = f"rank {comm.rank} (pipeline stage {stage})" if pipeline == 0 else \
            f"rank {comm.rank} (stage {stage} of pipeline {pipeline})"
        self.replicas = replicas if replicas is not None and replicas.world_size > 1 else None
        self.params = list(self.model.parameters())
        self.opt = adam(self.model.named_parameters(), lr=lr, weight_decay=weight_decay, names=names)

    def _send(self, tensors: list[torch.Tensor], dst: int, tag: int, category: str, what: str,
              stats: StepStats) -> list:
        works = self.comm.send(tensors, dst, tag, category, what=what, me=self.me)
        stats.bytes_sent[category] += sum(t.numel() * t.element_size() for _, t in works)
        return works

    def _wait(self, posted: tuple, category: str, what: str, stats: StepStats) -> list[torch.Tensor]:
        tensors, waited = self.comm.wait_recv(posted, category, what, me=self.me)
        stats.bytes_received[category] += sum(t.numel() * t.element_size() for t in tensors)
        stats.wait_seconds += waited
        return tensors

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
        comm = self.comm
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
                acts[m] = comm.post_recv(recv_shapes(m), self.prev, 2 * tag_of(m))

        for op, m in ops:
            tag = tag_of(m)
            if op == "F":
                if self.first:
                    inp = first_input(m)
                else:
                    post_activations(m)
                    post_activations(m + 1)
                    inp = self._wait(acts.pop(m), "activation", f"activations of micro-batch {m} from stage "
                                     f"{self.stage - 1}", stats)
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
                    pending += self._send(out, self.next, 2 * tag, "activation",
                                          f"activations of micro-batch {m} to stage {self.stage + 1}", stats)
                    grads_posted[m] = comm.post_recv([tuple(t.shape) for t in out], self.next, 2 * (tag + 1))
            else:
                inp, out = held.pop(m)
                held_bytes.pop(m)
                if self.last:
                    grads = None
                else:
                    grads = self._wait(grads_posted.pop(m), "activation_grad", f"gradients of micro-batch {m} from "
                                       f"stage {self.stage + 1}", stats)
                t0 = time.perf_counter()
                torch.autograd.backward(out, grads)
                stats.busy_seconds += time.perf_counter() - t0
                if not self.first:
                    grads_in = [t.grad if t.grad is not None else torch.zeros_like(t) for t in inp]
                    pending += self._send(grads_in, self.prev, 2 * (tag + 1), "activation_grad",
                                          f"gradients of micro-batch {m} to stage {self.stage - 1}", stats)
        stats.wait_seconds += comm.wait_sends(pending, me=self.me)
        t0 = time.perf_counter()
        self.before_optimizer()  # an all-reduce: mostly waiting for the slowest replica or stage
        stats.grad_sync_seconds += time.perf_counter() - t0
        t0 = time.perf_counter()
        self.opt.step()
        stats.busy_seconds += time.perf_counter() - t0
        stats.loss = loss_sum if self.last else None
        stats.step_seconds = time.perf_counter() - t_step
        return stats


def epoch_summary(steps: Sequence[StepStats]) -> dict:
    """One stage's epoch from its per-step figures: bytes by category, seconds, bubble fraction
    (waiting / step time), peaks."""
    wait, step = sum(st.wait_seconds for st in steps), sum(st.step_seconds for st in steps)
    cats = ("activation", "activation_grad")
    return dict(
        steps=len(steps), step_seconds=step, wait_seconds=wait, bubble=wait / step if step else 0.0,
        busy_seconds=sum(st.busy_seconds for st in steps), grad_sync_seconds=sum(st.grad_sync_seconds for st in steps),
        bytes_sent={c: sum(st.bytes_sent[c] for st in steps) for c in cats},
        bytes_received={c: sum(st.bytes_received[c] for st in steps) for c in cats},
        peak_micro_batches=max((st.peak_micro_batches for st in steps), default=0),
        peak_activation_bytes=max((st.peak_activation_bytes for st in steps), default=0),
    )


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


