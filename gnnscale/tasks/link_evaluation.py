"""The one evaluation of link prediction: every node's embedding once, then the split's pairs
scored in bounded slices (``docs/link_prediction.md`` section 5).

1. The encoder runs layer-wise over the whole graph
   (:func:`~gnnscale.tasks.inference.streamed_inference`): each rank gets its own nodes' final
   embeddings, float32 [n_owned, H]; no rank ever holds another's. With ``--eval-method sampled``
   (what a user's ``--model``, which has no layers to stream, evaluates with), each owned node's
   embedding comes instead from its subgraph drawn by the evaluation sampler (``--eval-fanouts``),
   ``--eval-batch-size`` nodes at a time (:func:`~gnnscale.tasks.evaluation.sampled_outputs`).
2. Each rank scores the pairs whose source it owns (``part.link``): the destinations' rows are
   fetched from their owners, at most ``slice_rows`` rows per exchange (category
   ``link_fetch``), so memory follows the part plus one slice, however many pairs or
   negatives per source the split has (ogbl-citation2: 1000 per source).
3. :class:`~gnnscale.tasks.scores.LinkMetrics` keeps what the metric needs (the
   scores for AUC/AP, the top K negatives for Hits@K, sums for MRR) and reduces it.

Every rank runs the same number of fetch rounds (the most any rank needs), so the exchanges
stay collective.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np
import torch

from gnnscale.data.feature_store import DistFeatureStore
from gnnscale.nn.link import gnn_of
from gnnscale.tasks.evaluation import eval_steps, sampled_outputs
from gnnscale.tasks.inference import streamed_inference
from gnnscale.tasks.scores import EdgeMetrics, LinkMetrics


EDGE_METRICS = ("accuracy", "rmse")  # --task edge: classes, regression targets (gnnscale.tasks.task.edge_metric)


class _Rows:
    """A rank's embedding table as a feature store's part (``x``: float32 [n_owned, H])."""

    def __init__(self, h: torch.Tensor) -> None:
        self.x = np.ascontiguousarray(h.numpy())

    def features(self, local_idx: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(self.x[local_idx.numpy()])


class LinkEvaluator:
    """The split's metric over every rank (collective over ``comm``).

    Args:
        part: this rank's part (``part.link``: the split's pairs whose source it owns).
        comm: the evaluating ranks' communicator. features: their feature store.
        degrees: their degree store (degree-normalized layers) or None.
        metric: ``auc`` (ROC-AUC and average precision), ``hits@K`` or ``mrr``; edge
            classification ``accuracy`` (and macro-F1) or regression ``rmse`` (and MAE): the
            split's labelled positives (``{split}_label``), no negatives.
        backend: the sampler kernels of the streamed inference. inputs: as
            :class:`~gnnscale.tasks.evaluation.Evaluator`'s.
        slice_rows: destination rows fetched per round.
        relation: a typed graph's split relation (the decoder's ``relation``), or None.
        sampler: the evaluation sampler: given, the embeddings are sampled (``batch_size`` owned
            nodes a batch), not streamed layer by layer.
    """

    def __init__(self, part, comm, features, degrees, metric: str, backend: str = "auto",
                 inputs: Callable | None = None, slice_rows: int = 1 << 17, relation: int | None = None,
                 sampler=None, batch_size: int = 0) -> None:
        self.part, self.comm, self.features, self.degrees = part, comm, features, degrees
        self.sampler, self.batch_size = sampler, int(batch_size)
        self.relation = relation  # a typed graph's split: the relation a DistMult decoder scores
        self.metric, self.backend, self.inputs, self.slice_rows = metric, backend, inputs, int(slice_rows)
        self.offset = int(part.offset)
        self.last: dict = {}

    @torch.no_grad()
    def splits(self, net, forward, splits: Sequence[str], step: int) -> dict[str, float | None]:
        """{split: the metric's value} of the model ``net`` (a :class:`~gnnscale.nn.link.LinkModel`)
        for ``splits`` among val and test; every metric by name in ``self.last``."""
        net.eval()
        before = self.comm.stats.snapshot()
        h, how = self.embeddings(gnn_of(net))
        rows = DistFeatureStore(_Rows(h), self.part.book, self.comm, h.shape[1])
        figures, out = {}, {}
        for split in splits:
            res = self.score_split(net, h, rows, split)
            figures[split] = res
            out[split] = res.get(self.primary)
        after = self.comm.stats.snapshot()
        self.last = {"metric": self.metric, "metrics": figures, **how,
                     "bytes_sent_by_category": _diff(after["sent"], before["sent"])}
        return out

    def embeddings(self, encoder) -> tuple[torch.Tensor, dict]:
        """(float32 [n_owned, H] embeddings of this rank's nodes, how they were computed: method,
        batches, fanouts); collective."""
        if self.sampler is not None:
            ids = self.part.owned_ids
            steps = eval_steps(self.comm, ids.numel(), self.batch_size)
            outs = [out for _, out in sampled_outputs(encoder, ids, self.sampler, self.features, self.degrees,
                                                      self.batch_size, steps, self.inputs)]
            h = torch.cat(outs).float().cpu() if outs else torch.zeros(0, 0)
            return h, {"method": "sampled", "batches": steps, "fanouts": list(self.sampler.fanouts)}
        typed = getattr(self.part, "typed", None)
        h = streamed_inference(encoder, self.part.indptr, self.part.indices, self.features,
                               node_degree=self.degrees, backend=self.backend, inputs=self.inputs,
                               edge_type=typed.etype if typed is not None else None)
        return h, {"method": "layerwise", "batches": 0, "fanouts": None}

    @property
    def primary(self) -> str:
        """The metric's key in :class:`LinkMetrics`' result (``auc`` for auc/ap; lower case)."""
        return str(self.metric).strip().lower()

    def score_split(self, net, h: torch.Tensor, rows: DistFeatureStore, split: str) -> dict:
        """Every metric of ``split`` (collective)."""
        link = self.part.link
        if self.primary in EDGE_METRICS:  # edge classification / regression: the labelled positives
            label = self.part.meta["link"]["label"]
            acc, pos, y = EdgeMetrics(label["kind"], label["num_classes"]), link[split], link[f"{split}_label"]
            for a, b in self._slices(pos.shape[1], self.slice_rows):
                src, dst = pos[0, a:b], pos[1, a:b]
                acc.add(net.score(h[src - self.offset], rows.fetch(dst, category="link_fetch"), self.relation), y[a:b])
            return acc.result(self.comm)
        acc = LinkMetrics(self.metric)
        pos = link[split]
        neg_dst = link.get(f"{split}_neg_dst")
        if neg_dst is not None:  # per-source negatives (MRR): a slice of sources with all their negatives
            per = max(1, self.slice_rows // (neg_dst.shape[1] + 1))
            for a, b in self._slices(pos.shape[1], per):
                src, dst = pos[0, a:b], pos[1, a:b]
                cand = torch.cat([dst.unsqueeze(1), neg_dst[a:b]], 1)  # [s, 1 + K]
                uniq, inv = torch.unique(cand, return_inverse=True)
                got = rows.fetch(uniq, category="link_fetch")[inv]  # [s, 1 + K, H]
                scores = net.score(h[src - self.offset].unsqueeze(1).expand_as(got), got, self.relation)
                del got
                acc.add_ranked(scores[:, 0], scores[:, 1:])
            return acc.result(self.comm)
        acc_pairs = ((pos, acc.add_pos),)
        neg = link.get(f"{split}_neg")
        if neg is not None:
            acc_pairs += ((neg, acc.add_neg),)
        for pairs, add in acc_pairs:
            for a, b in self._slices(pairs.shape[1], self.slice_rows):
                src, dst = pairs[0, a:b], pairs[1, a:b]
                add(net.score(h[src - self.offset], rows.fetch(dst, category="link_fetch"), self.relation))
        return acc.result(self.comm)

    def _slices(self, n: int, per: int) -> list[tuple[int, int]]:
        """``[a, b)`` slices of ``n`` pairs, ``per`` at a time, as many on every rank (empty ones
        past a rank's own)."""
        t = torch.tensor([math.ceil(n / per)], dtype=torch.int64)
        count = int(self.comm.all_reduce(t, "max")[0])
        return [(min(n, i * per), min(n, (i + 1) * per)) for i in range(count)]


def _diff(after: dict, before: dict) -> dict:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
