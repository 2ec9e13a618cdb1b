"""``--task temporal_link``: temporal link prediction through the engine's plan, loader and trainer
(docs/temporal.md section 5).

A temporal partition's events are its edges: each in-edge ``src -> dst`` at time ``t`` of a node is
held by the node's owner, so rank r's events are its part's in-edges, and every event of a pair
``(s, d)`` lies in ``d``'s part.

- **Split**: chronological, by time thresholds found over the ranks (a binary search on time, one
  all-reduce of two counts per probe, no rank holding another's times): the earliest
  ``--temporal-split`` fraction of the events train, then validation, then test; events at a
  boundary's time go to the later split.
- **A batch** of training events ``(s, d, t)`` (the schedule's seeds are positions of this rank's
  training events): ``--num-negatives`` K destinations ``d'`` per event, uniform, at the event's
  time; every endpoint is sampled in time (:class:`~gnnscale.samplers.temporal.DistTemporalSampler`,
  one tree per endpoint, only edges before t, ``--temporal-strategy``, ``--time-window``,
  ``--time-cut``); each block's edges carry their age (``edge_attr``, for layers that read it:
  ``--layer tgat``); with ``--pair-features`` each scored pair's own history before t
  (:class:`DistPairHistory`, asked of the destination's owner). The model is the link model
  (encoder, ``--decoder``, the pair score); loss ``--link-loss``.
- **Evaluation** (:class:`TemporalLinkEvaluator`): each rank scores its events of the split (about
  ``--eval-events`` of them, chosen by each event's key) against one uniform negative (AP, AUC) and ``--eval-negatives``
  (half from the source's training destinations, TGB's historical negatives: MRR), every
  ``(node, time)`` embedded once per slice, and **EdgeBank** (unlimited memory: a pair seen before
  t) on the same events and negatives from the same pair histories; the metrics are reduced over
  the ranks (:func:`gnnscale.tasks.temporal_link.evaluate`).
"""
from __future__ import annotations

import logging
from typing import Callable

import numpy as np
import torch

from gnnscale.errors import DatasetError
from gnnscale.samplers.rng import stream_key
from gnnscale.samplers.temporal import DistTemporalSampler
from gnnscale.tasks.temporal_link import (PairHistory, evaluate, event_keys, event_uniforms, negatives,
                                          pair_features)

log = logging.getLogger("gnnscale.train")

SPLIT_NAMES = ("train", "val", "test")


class TemporalEvents:
    """This rank's events: its part's in-edges as ``src``, ``dst`` (global ids) and ``t`` (int64 [E_r])."""

    def __init__(self, part) -> None:
        if getattr(part, "edge_time", None) is None:
            raise DatasetError("expected a temporal partition (part{p}/edge_time.npy, meta's 'temporal') for --task "
                               "temporal_link, found none; partition an events:PATH, jodie:PATH or dir:PATH with "
                               "edge_time.npy")
        deg = torch.diff(part.indptr).numpy()
        row = torch.from_numpy(np.repeat(np.arange(deg.shape[0], dtype=np.int64), deg))
        self.dst = row + int(part.offset)
        self.src = part.indices.to(torch.int64)
        self.t = part.edge_time.to(torch.int64)
        # each event's key: its destination's original id, its place among that node's in-edges (ordered
        # by time and input column whatever the partitioning) and its time: the same at any worker count
        place = torch.arange(row.numel(), dtype=torch.int64) - part.indptr[:-1].to(torch.int64)[row]
        self.key = event_keys(part.orig_ids.to(torch.int64)[row], place, self.t)


def split_times(t: torch.Tensor, comm, fractions) -> tuple[int, int]:
    """(T_val, T_test): the chronological split's boundaries over every rank's event times ``t``:
    train ``t < T_val``, validation ``T_val <= t < T_test``, test ``t >= T_test``; T_val is the
    ``round(f_train * E)``-th smallest time of all E events (0-based), T_test the
    ``round((f_train + f_val) * E)``-th. A binary search on time, one all-reduce per probe."""
    st = np.sort(t.numpy())
    total = int(comm.all_reduce(torch.tensor([st.size], dtype=torch.int64), "sum")[0])
    big = 1 << 62
    ends = comm.all_reduce(torch.tensor([-int(st[0]) if st.size else -big, int(st[-1]) if st.size else -big],
                                        dtype=torch.int64), "max")
    tmin, tmax = -int(ends[0]), int(ends[1])
    ks = [int(round(fractions[0] * total)), int(round((fractions[0] + fractions[1]) * total))]
    lo, hi = [tmin, tmin], [tmax + 1, tmax + 1]
    while lo[0] < hi[0] or lo[1] < hi[1]:  # every rank probes the same times: the loop runs alike
        mid = [(a + b) // 2 for a, b in zip(lo, hi)]
        mine = torch.tensor([int(np.searchsorted(st, m, "right")) for m in mid], dtype=torch.int64)
        counts = comm.all_reduce(mine, "sum")
        for j in range(2):
            if lo[j] < hi[j]:
                if int(counts[j]) >= ks[j] + 1:
                    hi[j] = mid[j]
                else:
                    lo[j] = mid[j] + 1
    return lo[0], lo[1]


class DistPairHistory:
    """Each pair's history before a time, over the ranks: the events ``a -> b`` are ``b``'s
    owner's in-edges, so a query ``(a, b, t)`` is answered there (:class:`PairHistory` over the
    part's events; one request/response exchange per call, collective: every rank calls as often)."""

    def __init__(self, events: TemporalEvents, book, comm) -> None:
        self.local = PairHistory(events.src, events.dst, events.t, book.num_nodes)
        self.book, self.comm = book, comm

    def counts(self, a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(events ``a -> b`` before ``t``, the latest one's time or ``t``), int64 [n] each."""
        comm = self.comm
        P, rank = comm.world_size, comm.rank
        if P == 1:
            return self.local.counts(a, b, t)
        from gnnscale.partitioning.routing import Route

        route = Route.build(self.book.owner(b), P)
        pa, pb, pt = route.split(a), route.split(b), route.split(t)
        req = [torch.cat([x, y, z]) if r != rank else a.new_empty(0) for r, (x, y, z) in enumerate(zip(pa, pb, pt))]
        got = comm.exchange(req, "sample_request")
        reply = []
        for r, g in enumerate(got):  # a loop over ranks (a handful), not over queries
            k = g.numel() // 3
            n, last = self.local.counts(g[:k], g[k:2 * k], g[2 * k:]) if r != rank and k else (g[:0], g[:0])
            reply.append(torch.cat([n, last]))
        back = comm.exchange(reply, "sample_response")
        rows = []
        for r in range(P):
            if r == rank:
                n, last = self.local.counts(pa[r], pb[r], pt[r])
            else:
                k = pa[r].numel()
                n, last = back[r][:k], back[r][k:]
            rows.append(torch.stack([n, last], 1))
        merged = route.merge_rows(rows)
        return merged[:, 0], merged[:, 1]

    def features(self, s: torch.Tensor, d: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(float32 [n, 6] :func:`pair_features` of the pairs, int64 [n] events ``s -> d`` before t):
        both directions in one exchange; the counts are EdgeBank's memory."""
        n = s.numel()
        cnt, last = self.counts(torch.cat([s, d]), torch.cat([d, s]), torch.cat([t, t]))
        return pair_features(cnt[:n], last[:n], cnt[n:], last[n:], t), cnt[:n]


class EdgeRows:
    """Each sampled edge's own features (the partition's ``edge_attr``, e.g. JODIE's), read from the
    part that holds the edge: an edge ``s -> d`` is an in-edge of ``d``, stored by ``d``'s owner at a
    position of its part (what :class:`PositionSampler` gives each block's edges). One request /
    response exchange per call (collective: every rank calls as often), none on one rank."""

    def __init__(self, part, comm) -> None:
        self.attr, self.book, self.comm = part.edge_attr, part.book, comm
        self.dim = int(part.edge_attr.shape[1])

    def _take(self, pos: torch.Tensor) -> torch.Tensor:
        from gnnscale.samplers.local import gather_edge_attr

        return gather_edge_attr(self.attr, pos)

    def rows(self, dst: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """float32 [m, De]: the features of the edges into ``dst`` (global ids, int64 [m]) at ``pos``
        (int64 [m], positions in the destination's owner's part)."""
        comm = self.comm
        P, rank = comm.world_size, comm.rank
        if P == 1:
            return self._take(pos)
        from gnnscale.partitioning.routing import Route

        route = Route.build(self.book.owner(dst), P)
        ask = route.split(pos)
        got = comm.exchange([a if r != rank else pos.new_empty(0) for r, a in enumerate(ask)], "feature_request")
        back = comm.exchange([self._take(g) for g in got], "feature")
        return route.merge_rows([self._take(ask[r]) if r == rank else back[r] for r in range(P)])


def reads_ages(cfg) -> bool:
    """Whether the run's layers read each edge's age (:func:`~gnnscale.nn.edge_features.temporal_edge_dim`)."""
    from gnnscale.nn.edge_features import layer_reads_edges

    return layer_reads_edges(cfg.layer) and getattr(cfg, "edge_features", "auto") != "off"


class TemporalLinkTask:
    """``--task temporal_link`` (see the module docstring): the Task of the engine's loop."""

    name = "temporal_link"
    own_edge_features = True  # each block's edge_attr: its edges' ages (embed_batch)
    keyed_dropout = False
    seed_mean = False
    splits = ("val", "test")

    def __init__(self, part, cfg, comm) -> None:
        from gnnscale.config import temporal_fractions

        self.part, self.cfg, self.comm = part, cfg, comm
        self.events = TemporalEvents(part)
        self.bounds = split_times(self.events.t, comm, temporal_fractions(cfg.temporal_split))
        self.metric = str(cfg.link_metric or "mrr").lower()
        self.out_dim = int(cfg.hidden)
        self.num_nodes = int(part.book.num_nodes)
        self.pairs = DistPairHistory(self.events, part.book, comm)
        self.ages = reads_ages(cfg)
        # the partition's own edge features, beside each edge's age (where the layers read edges)
        self.edge_rows = EdgeRows(part, comm) if self.ages and getattr(part, "edge_attr", None) is not None else None

    @staticmethod
    def model_misfit(meta: dict, blob: dict) -> str | None:
        """A temporal link model fits a temporal partition of its features: the events' times replayed
        (the split, the draws in time), its edge columns the partition's (the age, then its edge features)."""
        de = int(meta.get("edge_feature_dim") or 0)
        have = int(blob["spec"].get("edge_dim") or 0)
        if not meta.get("temporal"):
            return ("no edge times (a temporal link model replays its events' times: partition an events:, jodie: "
                    "or dir: input with times)")
        if int(meta["feature_dim"]) != int(blob["num_features"]) or have not in (0, 1 + de):
            return (f"{meta['feature_dim']} features per node and {de} per edge (the model reads "
                    f"{blob['num_features']} and {max(have - 1, 0)} beside each edge's age)")
        return None

    def ids(self, split: str) -> torch.Tensor:
        """int64 positions of this rank's events of ``split`` (by the split's time bounds)."""
        t, (a, b) = self.events.t, self.bounds
        keep = {"train": t < a, "val": (t >= a) & (t < b), "test": t >= b}[split]
        return torch.nonzero(keep).flatten()

    def train_ids(self) -> torch.Tensor:
        return self.ids("train")

    def sampler(self, comm, fanouts, seed: int):
        """The time-respecting sampler of this part over ``comm`` (owners draw their nodes' past)."""
        part, cfg = self.part, self.cfg
        kind, extra = DistTemporalSampler, {}
        if self.edge_rows is not None:  # each drawn edge's position in its owner's part comes back with it
            kind, extra = PositionSampler, {"edge_ids": torch.arange(part.indices.numel(), dtype=torch.int64)}
        return kind(part.indptr, part.indices, part.edge_time, part.orig_ids, part.book, comm, list(fanouts),
                    seed=seed, strategy=cfg.temporal_strategy, window=cfg.time_window, cut=cfg.time_cut, **extra)

    def batch_sampler(self, node_sampler, comm):
        return TemporalBatches(self, self.sampler(comm, self.cfg.fanouts, self.cfg.seed), comm.rank)

    def labels(self) -> Callable | None:
        return None  # the pairs' labels come with the batch

    def forward(self, model, x, blocks, mb, **kw) -> torch.Tensor:
        return model(x, blocks, mb.edge_label_index, node_degree=kw.get("node_degree"),
                     pair_features=mb.pair_features)

    def loss(self, out: torch.Tensor, mb) -> torch.Tensor:
        from gnnscale.nn.link import link_loss

        return link_loss(out, mb.edge_label, mb.neg_of_pos, self.cfg.link_loss)

    def correct(self, out: torch.Tensor, mb) -> tuple[int, int]:
        from gnnscale.nn.link import pair_correct

        return pair_correct(out, mb.edge_label)

    def evaluator(self, data, comm, layerwise: bool = False, tables=None, inputs: Callable | None = None):
        return TemporalLinkEvaluator(self, data, comm)

    def embed_batch(self, sampler, nodes: torch.Tensor, times: torch.Tensor, epoch: int, step: int):
        """The temporal MiniBatch of ``nodes`` at ``times`` (one tree each), each block's edges
        carrying, where the layers read edges, ``edge_attr`` = [their age | their own features (the
        partition's, when it has some)] (collective with features: one exchange for all blocks)."""
        mb = sampler.sample(nodes, times, epoch, step)
        if self.ages:
            attrs = [b.edge_age().to(torch.float32).unsqueeze(1) for b in mb.blocks]
            if self.edge_rows is not None:
                blocks = mb.blocks
                rows = self.edge_rows.rows(torch.cat([b.dst_ids[b.edge_index[1]] for b in blocks]),
                                           torch.cat([b.edge_pos for b in blocks]))
                attrs = [torch.cat([a, r], 1) for a, r in zip(attrs, torch.split(rows, [b.num_edges for b in blocks]))]
            for b, a in zip(mb.blocks, attrs):
                b.edge_attr = a
        return mb


class PositionSampler(DistTemporalSampler):
    """:class:`~gnnscale.samplers.temporal.DistTemporalSampler` whose blocks also carry each sampled
    edge's position in its owner's part (``edge_pos`` int64 [M], ``edge_index`` order): the owners
    send back ``edge_ids`` (here the positions) beside the edges' times, in the same exchange."""

    def sample(self, seeds: torch.Tensor, times, epoch: int = 0, step: int = 0):
        self._drawn: list[torch.Tensor] = []
        mb = super().sample(seeds, times, epoch, step)
        for b, pos in zip(mb.blocks, reversed(self._drawn)):  # the hops' draws, blocks in model order
            b.edge_pos = pos
        return mb

    def _hop(self, dst, times, fanout, key):
        counts, nbrs, etime, pos = self.draw_hop(dst, times, fanout, key)
        self._drawn.append(pos)
        return counts, nbrs, etime


class TemporalBatches:
    """``sample(ids, epoch, step) -> MiniBatch`` of training events (the loader's sampler)."""

    def __init__(self, task: TemporalLinkTask, sampler, rank: int) -> None:
        self.task, self.sampler, self.rank = task, sampler, int(rank)
        self.fanouts = sampler.fanouts
        self.kernels = sampler.kernels

    def sample(self, ids: torch.Tensor, epoch: int = 0, step: int = 0):
        task, cfg = self.task, self.task.cfg
        ev = task.events
        s, d, t = ev.src[ids], ev.dst[ids], ev.t[ids]
        b, k, n = ids.numel(), int(cfg.num_negatives), task.num_nodes
        gen = torch.Generator().manual_seed(stream_key(cfg.seed, epoch, step, self.rank, 57) % (1 << 63))
        neg = torch.randint(0, n, (k * b,), generator=gen)  # negative j of event i at j * b + i
        dk = d.repeat(k)
        neg = torch.where(neg == dk, (neg + 1) % n, neg)  # never the positive itself
        sk, tk = s.repeat(k), t.repeat(k)
        mb = task.embed_batch(self.sampler, torch.cat([s, d, neg]), torch.cat([t, t, tk]), epoch, step)
        first = torch.arange(b, dtype=torch.int64)
        mb.edge_label_index = torch.cat([torch.stack([first, b + first]),
                                         torch.stack([first.repeat(k), 2 * b + torch.arange(k * b)])], 1)
        mb.edge_label = torch.cat([torch.ones(b), torch.zeros(k * b)])
        mb.neg_of_pos = first.repeat(k)
        if task.cfg.pair_features:
            mb.pair_features = task.pairs.features(torch.cat([s, sk]), torch.cat([d, neg]), torch.cat([t, tk]))[0]
        mb.stats["events"] = b
        return mb


class TemporalLinkEvaluator:
    """The model and EdgeBank over the validation and test events (collective over ``comm``)."""

    def __init__(self, task: TemporalLinkTask, data, comm) -> None:
        cfg = task.cfg
        self.task, self.comm, self.features, self.degrees = task, comm, data.features, data.degrees
        eval_fanouts = list(cfg.eval_fanouts or cfg.fanouts)
        self.sampler = task.sampler(comm, eval_fanouts, cfg.seed + 7919)
        self.last: dict = {}
        self.metric = task.metric
        self._history = None

    def history(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(src, dst) of every training pair of every rank (once; each pair lies in one part): the
        historical negatives' pool."""
        if self._history is None:
            task = self.task
            tr = task.ids("train")
            n = task.num_nodes
            mine = torch.unique(task.events.src[tr] * n + task.events.dst[tr])
            pairs = torch.cat([torch.as_tensor(p) for p in self.comm.all_gather_object(mine)])
            self._history = (torch.div(pairs, n, rounding_mode="floor"), pairs % n)
        return self._history

    def events(self, split: str) -> torch.Tensor:
        """This rank's events of ``split`` scored: all, or (``--eval-events N``) each kept with
        probability N / the split's size by a uniform of its own key (``TemporalEvents.key``): about
        N, the same events at any worker count."""
        ids = self.task.ids(split)
        want = int(self.task.cfg.eval_events)
        if want:
            total = int(self.comm.all_reduce(torch.tensor([ids.numel()], dtype=torch.int64), "sum")[0])
            if want < total:
                u = event_uniforms(self.task.events.key[ids], 1, self.task.cfg.seed + 2)[:, 0]
                ids = ids[u < want / total]
        return ids

    @torch.no_grad()
    def splits(self, net, forward, splits, step: int) -> dict:
        net.eval()
        task, cfg, comm = self.task, self.task.cfg, self.comm
        ev = task.events
        before = comm.stats.snapshot()
        figures, out = {}, {}
        for split in splits:
            ids = self.events(split)
            s, d, t = ev.src[ids], ev.dst[ids], ev.t[ids]
            keys = ev.key[ids]  # each event's draws are its own, whichever worker scores it
            one = negatives(s, d, task.num_nodes, 1, cfg.seed, split, keys=keys)[:, 0]
            many = negatives(s, d, task.num_nodes, int(cfg.eval_negatives), cfg.seed + 1, split, self.history(),
                             keys=keys)
            per = max(1, int(cfg.eval_batch_size) // (int(cfg.eval_negatives) + 2))
            steps = int(comm.all_reduce(torch.tensor([-(-ids.numel() // per)], dtype=torch.int64), "max")[0])
            calls = iter(range(SPLIT_NAMES.index(split) << 32, 1 << 40))  # each split's slices keyed apart

            def score(qs, qd, qt, net=net):
                return self._score(net, qs, qd, qt, step, next(calls))

            res = evaluate(score, s, d, t, one, many, batch=per, comm=comm, steps=steps, names=("model", "edgebank"))
            figures[split] = res
            out[split] = res["model"][self.task.metric]
        after = comm.stats.snapshot()
        self.last = {"metric": self.task.metric, "metrics": figures, "method": "sampled in time",
                     "fanouts": list(self.sampler.fanouts),
                     "bytes_sent_by_category": {k: v - before["sent"].get(k, 0) for k, v in after["sent"].items()
                                                if v - before["sent"].get(k, 0)}}
        if comm.rank == 0:
            for split, res in figures.items():
                m, e = res["model"], res["edgebank"]
                log.info("%s: model AP %.4f AUC %.4f MRR %.4f | EdgeBank AP %.4f AUC %.4f MRR %.4f (%d events, %d "
                         "negatives each for the MRR)", split, m["ap"], m["auc"], m["mrr"], e["ap"], e["auc"], e["mrr"],
                         m["positives"], m["negatives_per_positive_mrr"])
        return out

    def _score(self, net, qs, qd, qt, step: int, call: int) -> torch.Tensor:
        """float32 [n, 2]: the model's and EdgeBank's scores of the pairs ``(qs, qd)`` at ``qt``
        (collective: one draw, one feature fetch, one pair-history exchange)."""
        task = self.task
        n = qs.numel()
        nodes, times = torch.cat([qs, qd]), torch.cat([qt, qt])
        if n:
            key, inv = torch.unique(torch.stack([nodes, times]), dim=1, return_inverse=True)  # each (node, time) once
        else:  # an empty slice past this rank's events: the collectives still run
            key, inv = torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0, dtype=torch.int64)
        # the draws keyed by the slice alone (not the training step): a saved model's `gnnscale evaluate` replays them
        mb = task.embed_batch(self.sampler, key[0].contiguous(), key[1].contiguous(), 1 << 20, call)
        x = self.features.fetch(mb.input_ids)
        deg = None
        if self.degrees is not None:
            deg = self.degrees.lookup(torch.unique(torch.cat([b.src_ids for b in mb.blocks] + [mb.seeds])))
        feats, seen = task.pairs.features(qs, qd, qt)
        if not n:
            return torch.zeros(0, 2)
        h = net.encoder(x, mb.blocks, node_degree=deg)[inv]
        model = net.score(h[:n], h[n:], None, feats if task.cfg.pair_features else None)
        return torch.stack([model.float(), (seen > 0).to(torch.float32)], 1)
