"""Dropout keyed by node, so that a PyG model's masks are the same on 1 or N processes.

``torch.nn.Dropout`` draws from each process's generator: with N processes the rows of a step's
subgraph get other masks than one process gives them, and the runs differ by more than float
order (the remaining difference of :mod:`gnnscale.pyg.steps`' contract). :class:`KeyedDropout`
draws element (row i, column j) of its c-th call in a batch from a counter-based hash of
(seed, pass, step, c, the row's node id ``n_id[i]``, j) (:mod:`gnnscale.samplers.rng`, the
sampler's own streams), as the engine keys its dropout: a node present in several ranks'
subgraphs of a step gets one mask, the one of one process's batch, so every seed's computation is
one process's.

The rank loaders (:meth:`gnnscale.pyg.DistRun.node_loader` / ``link_loader``) tell this module the
batch they hand out (its ``n_id``, the pass and the step); :func:`keyed_dropout` swaps a model's
``torch.nn.Dropout`` modules (e.g. PyG's ``BasicGNN.dropout``) for :class:`KeyedDropout`::

    model = run.ddp(keyed_dropout(GraphSAGE(F, 64, num_layers=2, out_channels=C, dropout=0.5)))

Rows must be the batch's nodes in ``n_id`` order (PyG's layout: every layer's input of a
``BasicGNN``); typed batches (``HeteroData``) are refused. Cost: one int64 hash and one float64
draw per element of the dropped tensor.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
from torch import nn

from gnnscale.errors import SamplerError
from gnnscale.pyg.world import refuse_unjoined_world
from gnnscale.samplers.rng import node_hash, stream_key, uniform

_STATE = threading.local()


@dataclass
class BatchKeys:
    """What keys the masks of one batch: ``n_id`` int64 [n] original ids of its rows (None for a
    typed batch), the loader's ``seed``, the ``pass`` and ``step`` numbers, and ``calls`` so far."""

    n_id: torch.Tensor | None
    seed: int
    pass_: int
    step: int
    calls: int = 0


def set_batch(keys: BatchKeys | None) -> None:
    """Record the batch this thread trains now (the rank loaders call it as they hand one out)."""
    _STATE.keys = keys


def current_batch() -> BatchKeys | None:
    return getattr(_STATE, "keys", None)


class KeyedDropout(nn.Module):
    """``torch.nn.Dropout(p)`` with masks keyed by (seed, pass, step, call, node id, column).

    Args:
        p: the probability of zeroing an element (kept ones scaled by 1 / (1 - p)).

    Input x float [n, ...] with n the batch's node count, in ``n_id`` order; output the same shape.
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        if not 0.0 <= float(p) < 1.0:
            raise SamplerError(f"KeyedDropout needs 0 <= p < 1; found {p}.")
        self.p = float(p)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        keys = current_batch()
        if keys is None:
            raise SamplerError("KeyedDropout keys its masks by the batch being trained: iterate a run.node_loader or "
                               "run.link_loader of gnnscale.pyg.start_run, or use torch.nn.Dropout.")
        if keys.n_id is None:
            raise SamplerError("KeyedDropout keys rows by n_id, which a typed (HeteroData) batch holds per node type; "
                               "use torch.nn.Dropout in a typed model.")
        if x.size(0) != keys.n_id.numel():
            raise SamplerError(f"KeyedDropout keys row i by the batch's n_id[i]; found {x.size(0)} rows and "
                               f"{keys.n_id.numel()} nodes in the batch. Apply it to node rows in n_id order.")
        key = stream_key(keys.seed, keys.pass_, keys.step, keys.calls, 0x6B)
        keys.calls += 1
        rows = node_hash(key, keys.n_id.to(torch.int64).to(x.device))
        width = x[0].numel() if x.size(0) else 0
        cols = torch.arange(width, dtype=torch.int64, device=x.device)
        keep = uniform(rows[:, None], cols[None, :]) >= self.p  # bool [n, width]
        return x * keep.view(x.shape).to(x.dtype) * (1.0 / (1.0 - self.p))

    def extra_repr(self) -> str:
        return f"p={self.p}, keyed by node"


def keyed_dropout(model: nn.Module) -> nn.Module:
    """``model`` with every ``torch.nn.Dropout`` submodule replaced by :class:`KeyedDropout` of the
    same ``p`` (in place; returns the model). Functional ``F.dropout`` calls are not reached."""
    refuse_unjoined_world("keyed_dropout")
    for name, child in list(model.named_children()):
        if type(child) is nn.Dropout:
            setattr(model, name, KeyedDropout(child.p))
        else:
            keyed_dropout(child)
    return model
