"""Temporal link prediction: a chronological split, negatives at the positive's time, EdgeBank,
and the evaluation (AP/AUC with one negative per positive, MRR against many) on the one link
metrics (:class:`gnnscale.tasks.scores.LinkMetrics`); docs/temporal.md.

A positive is an event ``(src, dst, t)``; its negatives are ``(src, d', t)``: ``d'`` drawn at random
among all nodes, or, as TGB does, from the destinations ``src`` sent to in the training events
(historical negatives: harder, they defeat "predict any pair seen before"). The draws come from a
``torch.Generator`` seeded by ``(seed, split)``, so every worker and every rerun scores the same
negatives.

EdgeBank (Poursafaei et al., 2022) predicts 1 for a pair seen before ``t`` and 0 otherwise:
``unlimited`` memory remembers every earlier event, ``window`` w only those in ``[t - w, t)``. It is
evaluated streaming, as TGB does: every event before a query's time is in memory, test events
included (they are observed once they happened).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from gnnscale.errors import DatasetError
from gnnscale.samplers.rng import stream_key
from gnnscale.tasks.scores import LinkMetrics

SPLITS = ("train", "val", "test")


def chronological_split(edge_time: torch.Tensor, fractions=(0.70, 0.15, 0.15)) -> dict[str, torch.Tensor]:
    """Positions of the events of each split (int64, in time order): the first ``fractions[0]`` of
    the events by time train, the next validation, the rest test (ties ordered by position)."""
    f = [float(x) for x in fractions]
    if len(f) != 3 or min(f) < 0 or abs(sum(f) - 1.0) > 1e-6:
        raise DatasetError(f"expected three fractions train,val,test >= 0 summing to 1, found {fractions!r}; "
                           "e.g. 0.70,0.15,0.15")
    order = torch.from_numpy(np.argsort(edge_time.numpy(), kind="stable"))
    e = order.numel()
    a, b = int(round(f[0] * e)), int(round((f[0] + f[1]) * e))
    return {"train": order[:a], "val": order[a:b], "test": order[b:]}


class EdgeBank:
    """EdgeBank over the events ``(src, dst, t)`` (int64 [E] each): :meth:`score` is 1.0 for a query
    pair seen strictly before the query's time (within ``window`` when given), else 0.0. One sort of
    the events by (pair, time); a query is one binary search (no loop over events)."""

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor, num_nodes: int,
                 window: int | None = None) -> None:
        self.n = int(num_nodes)
        self.window = None if window is None else int(window)
        self.t0 = int(t.min()) if t.numel() else 0
        self.span = (int(t.max()) - self.t0 + 2) if t.numel() else 2
        if self.n * self.n * self.span >= 2**62:
            raise DatasetError(f"EdgeBank keys pairs and times in int64: {self.n} nodes x a time span of {self.span} "
                               "is too wide; rescale the times to a coarser unit")
        key = (src.to(torch.int64) * self.n + dst.to(torch.int64)) * self.span + (t.to(torch.int64) - self.t0)
        self.keys = torch.sort(key).values

    def score(self, src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """float32 [B]: 1.0 where ``(src, dst)`` happened before ``t`` (in the window), else 0.0."""
        rel = (t.to(torch.int64) - self.t0).clamp(0, self.span - 1)
        pair = src.to(torch.int64) * self.n + dst.to(torch.int64)
        q = pair * self.span + rel
        i = torch.searchsorted(self.keys, q) - 1  # the last event < (pair, t)
        ok = i >= 0
        prev = self.keys[i.clamp(min=0)]
        ok &= torch.div(prev, self.span, rounding_mode="floor") == pair
        if self.window is not None:
            ok &= (prev % self.span) + self.t0 >= t.to(torch.int64) - self.window  # the query's own time
        return ok.to(torch.float32)


class PairHistory:
    """The history of each ordered pair before a query's time, from the events ``(src, dst, t)``:
    :meth:`counts` gives, for a query ``(s, d, t)``, how many events ``s -> d`` happened strictly
    before ``t`` and the time of the latest of them. The same sorted keys as :class:`EdgeBank` (one
    sort of the events by (pair, time), a query is two binary searches): only the past is read,
    test events included once they happened (streaming, as EdgeBank)."""

    def __init__(self, src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor, num_nodes: int) -> None:
        self.bank = EdgeBank(src, dst, t, num_nodes)

    def counts(self, src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(int64 [B] events of the pair before ``t``, int64 [B] the latest one's time, ``t`` where none)."""
        b = self.bank
        t = t.to(torch.int64)
        rel = (t - b.t0).clamp(0, b.span - 1)
        pair = src.to(torch.int64) * b.n + dst.to(torch.int64)
        hi = torch.searchsorted(b.keys, pair * b.span + rel)  # events of the pair before t end here
        lo = torch.searchsorted(b.keys, pair * b.span)
        count = hi - lo
        last = torch.where(count > 0, b.keys[(hi - 1).clamp(min=0)] % b.span + b.t0, t)
        return count, last

    def features(self, src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """float32 [B, 6]: :func:`pair_features` of each query pair (both directions)."""
        return pair_features(*self.counts(src, dst, t), *self.counts(dst, src, t), t)


def pair_features(n_sd: torch.Tensor, last_sd: torch.Tensor, n_ds: torch.Tensor, last_ds: torch.Tensor,
                  t: torch.Tensor) -> torch.Tensor:
    """float32 [B, 6] of query pairs ``(s, d, t)`` from their histories (:meth:`PairHistory.counts`
    of ``s -> d`` and ``d -> s``): per direction log(1 + events before t), whether there were any,
    log(1 + time since the latest) / 20 (0 where none). Only events strictly before t count."""
    cols = []
    for n, last in ((n_sd, last_sd), (n_ds, last_ds)):
        seen = (n > 0).to(torch.float32)
        age = torch.log1p((t.to(torch.int64) - last).clamp(min=0).to(torch.float32)) / 20.0
        cols += [torch.log1p(n.to(torch.float32)), seen, age * seen]
    return torch.stack(cols, 1)

_MASK53 = (1 << 53) - 1


def _mix(x: torch.Tensor) -> torch.Tensor:
    """A 64-bit mix of int64 values (splitmix64's finalizer, logical shifts on the two's complement)."""
    x = x ^ ((x >> 30) & ((1 << 34) - 1))
    x = x * -4658895280553007687  # 0xBF58476D1CE4E5B9 as int64 (wraps)
    x = x ^ ((x >> 27) & ((1 << 37) - 1))
    x = x * -7723592293110705685  # 0x94D049BB133111EB
    return x ^ ((x >> 31) & ((1 << 33) - 1))


def event_uniforms(events: torch.Tensor, cols: int, salt: int) -> torch.Tensor:
    """float64 [B, cols] in [0, 1): uniforms that are a pure function of each event's key
    (``events`` int64 [B]), the column and ``salt``: the same for an event on any worker."""
    j = torch.arange(cols, dtype=torch.int64)
    x = _mix(_mix(events.to(torch.int64).unsqueeze(1) ^ (int(salt) % (1 << 62))) + j * 0x1E3779B97F4A7C15)
    return (x & _MASK53).to(torch.float64) / float(1 << 53)


def event_keys(src: torch.Tensor, dst: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """int64 [B]: a key of each event ``(src, dst, t)`` that no worker count changes."""
    return _mix(_mix(src.to(torch.int64) * 1_000_003 + dst.to(torch.int64)) ^ t.to(torch.int64))


def negatives(src: torch.Tensor, dst: torch.Tensor, num_nodes: int, k: int, seed: int, split: str,
              history: tuple[torch.Tensor, torch.Tensor] | None = None, historical: float = 0.5,
              keys: torch.Tensor | None = None) -> torch.Tensor:
    """int64 [B, k]: negative destinations of each positive ``(src, dst)``, never ``dst`` itself.

    A fraction ``historical`` of each row comes from the destinations ``src`` sent to in ``history``
    (``(src, dst)`` of the training events; TGB's historical negatives), the rest uniformly from all
    nodes (and a historical draw falls back to a uniform one where ``src`` has no other past
    destination). Keyed by ``(seed, split)``: the same rows on every worker; with ``keys`` (int64
    [B], :func:`event_keys`) each row is a function of its event's key, ``seed`` and ``split``
    alone (the same negatives whichever worker scores the event, at any worker count)."""
    b = src.numel()
    salt = stream_key(seed, SPLITS.index(split) if split in SPLITS else 9, 57) % (2**63)
    gen = torch.Generator().manual_seed(salt)
    kh = int(round(k * historical)) if history is not None else 0
    if keys is None:
        out = torch.randint(0, num_nodes, (b, k), generator=gen)
        u = torch.rand((b, kh), generator=gen, dtype=torch.float64) if kh else None
    else:
        draws = event_uniforms(keys, k + kh, salt)
        out = (draws[:, :k] * num_nodes).to(torch.int64).clamp(max=num_nodes - 1)
        u = draws[:, k:]
    if kh:
        hs, hd = history
        pairs = torch.unique(hs.to(torch.int64) * num_nodes + hd.to(torch.int64))  # sorted by (src, dst)
        ps, pd = torch.div(pairs, num_nodes, rounding_mode="floor"), pairs % num_nodes
        ptr = torch.searchsorted(ps, torch.arange(num_nodes + 1))
        lo, cnt = ptr[src], ptr[src + 1] - ptr[src]
        pick = lo.unsqueeze(1) + (u * cnt.unsqueeze(1)).to(torch.int64).clamp(max=(cnt - 1).clamp(min=0).unsqueeze(1))
        hist = pd[pick.clamp(max=max(pd.numel() - 1, 0))] if pd.numel() else out[:, :kh]
        has = (cnt > 0).unsqueeze(1) & (hist != dst.unsqueeze(1))
        out[:, :kh] = torch.where(has, hist, out[:, :kh])
    same = out == dst.unsqueeze(1)  # never the positive itself: the next node instead
    out[same] = (out[same] + 1) % num_nodes
    return out


def evaluate(score: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor], src: torch.Tensor,
             dst: torch.Tensor, t: torch.Tensor, neg_one: torch.Tensor, neg_many: torch.Tensor,
             batch: int = 512, comm=None, steps: int = 0, names: tuple[str, ...] | None = None) -> dict:
    """AP and ROC-AUC of the positives against one negative each (``neg_one`` int64 [B]) and MRR
    against ``neg_many`` int64 [B, K] (TGB's one-vs-many: rank = 1 + (#neg > pos + #neg >= pos) / 2),
    ``score(src, dst, t) -> float [n]`` called on slices of ``batch`` positives (memory bounded by a
    slice's B * (K + 2) pairs; the metrics keep the AUC scores and the MRR rank counts). With ``comm``
    (a Communicator) each rank scores its share and every rank gets the figures of them all.
    ``steps``: call ``score`` at least this many times (empty slices past this rank's positives:
    a collective ``score`` is called as often on every rank). ``names``: ``score`` returns float
    [n, len(names)], one column per scorer; the result is then ``{name: figures}``."""
    cols = 1 if names is None else len(names)
    accs = [(LinkMetrics("auc"), LinkMetrics("mrr")) for _ in range(cols)]
    k = neg_many.shape[1]
    count = max(int(steps), -(-src.numel() // batch))
    for i in range(count):  # slices of positives, not a loop over pairs
        lo = min(i * batch, src.numel())
        s, d, tt = src[lo:lo + batch], dst[lo:lo + batch], t[lo:lo + batch]
        nb = s.numel()
        many = neg_many[lo:lo + batch]
        q_src = torch.cat([s, s, s.repeat_interleave(k)])
        q_dst = torch.cat([d, neg_one[lo:lo + batch], many.reshape(-1)])
        q_t = torch.cat([tt, tt, tt.repeat_interleave(k)])
        out = score(q_src, q_dst, q_t).detach().float().cpu().reshape(q_src.numel(), cols)
        for c, (auc, mrr) in enumerate(accs):
            pos, one, rest = out[:nb, c], out[nb:2 * nb, c], out[2 * nb:, c].reshape(nb, k)
            auc.add_pos(pos)
            auc.add_neg(one)
            mrr.add_ranked(pos, rest)
    positives = int(src.numel())
    if comm is not None:
        positives = int(comm.all_reduce(torch.tensor([positives], dtype=torch.int64), "sum")[0])
    figures = []
    for auc, mrr in accs:
        a, m = auc.result(comm), mrr.result(comm)
        figures.append({"auc": float(a["auc"]), "ap": float(a["ap"]), "mrr": float(m["mrr"]), "positives": positives,
                        "negatives_per_positive_mrr": int(k)})
    return figures[0] if names is None else dict(zip(names, figures))
