"""Temporal link prediction with a time-aware model beside EdgeBank (docs/temporal.md).

Events ``(src, dst, t)`` split by time (70/15/15); each training batch of events is sampled in
time (gnnscale.samplers.temporal: every seed sees only edges before its event's time, one tree per
seed), a TGAT model (gnnscale.nn.temporal) embeds both endpoints and a random negative at that
time, and a small MLP scores the pairs. The test events are scored against one negative (AP, AUC)
and against ``--neg`` negatives each (MRR, TGB's one-vs-many), beside EdgeBank on the same events
and negatives.

    python examples/temporal_link.py                                  # CollegeMsg, one process
    python examples/temporal_link.py --dataset temporal-synthetic --leak   # the leak detector
    torchrun --nproc-per-node 2 examples/temporal_link.py             # data parallel (gloo)

Under torchrun every rank holds the events, takes batches r, r + N, ... of each epoch (their
gradients all-reduced through a Communicator) and scores its share of the test events; the metrics
are reduced over the ranks. ``--leak`` samples with the cut ``<=`` instead of ``<``: the edges at the
seed's own time, the scored event itself included, are in view (pyg#7794's kind of leak); the
inflated score is what such a pipeline would report. Set OMP_NUM_THREADS=1 on a shared machine
(torchrun does): spinning OpenMP threads made one run 8x slower here.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from gnnscale.datasets.temporal import generate_temporal_synthetic, read_events
from gnnscale.nn.temporal import TGAT
from gnnscale.partitioning.graph import to_csc
from gnnscale.samplers.temporal import TemporalNeighborSampler, time_sorted_csc
from gnnscale.tasks.temporal_link import EdgeBank, chronological_split, evaluate, negatives

COLLEGEMSG = Path(os.environ.get("GNNSCALE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")) \
    / "collegemsg" / "CollegeMsg.txt"


class Model(torch.nn.Module):
    def __init__(self, num_nodes: int, hidden: int, layers: int, time_blind: bool) -> None:
        super().__init__()
        self.gnn = TGAT(0, hidden, layers, time_dim=32, heads=2, num_nodes=num_nodes, embed_dim=hidden,
                        time_blind=time_blind)
        self.score = torch.nn.Sequential(torch.nn.Linear(2 * hidden, hidden), torch.nn.ReLU(),
                                         torch.nn.Linear(hidden, 1))

    def embed(self, sampler, nodes, times, epoch, step):
        mb = sampler.sample(nodes, times, epoch, step)
        return self.gnn(None, mb.blocks, mb.blocks[0].src_ids)

    def pair(self, zs, zd):
        return self.score(torch.cat([zs, zd], 1)).squeeze(-1)


def load(name: str, events: int):
    if name == "collegemsg":
        return read_events(COLLEGEMSG, "collegemsg", sorted=True)
    if name == "temporal-synthetic":
        return generate_temporal_synthetic(num_nodes=max(50, events // 50), num_events=events)
    if name.startswith("events:"):
        return read_events(name[7:])
    raise SystemExit(f"expected --dataset collegemsg, temporal-synthetic or events:PATH, found {name!r}")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="collegemsg")
    ap.add_argument("--events", type=int, default=20000, help="temporal-synthetic: its number of events")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=200)
    ap.add_argument("--fanouts", default="10,10")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--neg", type=int, default=100, help="negatives per positive for MRR")
    ap.add_argument("--eval-events", type=int, default=2000, help="test events scored (evenly spaced; 0: all)")
    ap.add_argument("--strategy", default="last", choices=["uniform", "last"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--leak", action="store_true", help="the cut '<=': edges at the seed's time, the scored event "
                    "itself, in view (the leak detector)")
    ap.add_argument("--time-blind-model", action="store_true", help="every edge's age 0 in the model")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.epochs < 1:
        ap.error(f"--epochs must be an integer of at least 1, found {a.epochs}")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    comm = None
    if world > 1:
        from gnnscale.process.comm import Communicator
        from gnnscale.process.groups import init_distributed

        info = init_distributed(timeout=300)
        rank, world = info.rank, info.world_size
        comm = Communicator(rank, world, timeout=300)
    torch.manual_seed(a.seed)
    d = load(a.dataset, a.events)
    n = int(d.num_nodes)
    src, dst, t = d.edge_index[0], d.edge_index[1], d.edge_time
    split = chronological_split(t)
    indptr, indices, eids = map(torch.from_numpy, to_csc(d.edge_index, n, return_edge_ids=True))
    et = t[eids]
    indices, perm = time_sorted_csc(indptr, indices, et, eids)
    fanouts = [int(f) for f in a.fanouts.split(",")]
    # --leak: the cut '<=' lets every edge at the seed's own time in, the scored event itself included
    sampler = TemporalNeighborSampler(indptr, indices, et[perm], fanouts, seed=a.seed, strategy=a.strategy,
                                      cut="<=" if a.leak else "<")
    at = lambda tt: tt  # noqa: E731 - each seed at its event's time
    model = Model(n, a.hidden, len(fanouts), a.time_blind_model)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    params = list(model.parameters())
    train = split["train"]
    started = time.time()
    for epoch in range(a.epochs):
        model.train()
        steps = list(range(0, train.numel(), a.batch))
        total, count = 0.0, 0
        for first in range(0, len(steps), world):  # a global step: batches first .. first + N - 1, one per rank
            opt.zero_grad()
            mine = first + rank
            if mine < len(steps):  # rank r: batches r, r + N, ... (time order within each)
                step = steps[mine]
                ev = train[step: step + a.batch]
                s, dd, tt = src[ev], dst[ev], t[ev]
                gen = torch.Generator().manual_seed(a.seed * 1_000_003 + epoch * 10_007 + step)  # keyed negatives
                neg = torch.randint(0, n, (ev.numel(),), generator=gen)
                z = model.embed(sampler, torch.cat([s, dd, neg]), at(torch.cat([tt, tt, tt])), epoch, step)
                zs, zd, zn = z.split(ev.numel())
                pos, ngt = model.pair(zs, zd), model.pair(zs, zn)
                loss = F.binary_cross_entropy_with_logits(pos, torch.ones_like(pos)) + \
                    F.binary_cross_entropy_with_logits(ngt, torch.zeros_like(ngt))
                loss.backward()
                total += float(loss.detach()) * ev.numel()
                count += ev.numel()
            if world > 1:  # every rank takes part, with zero gradients when it had no batch left
                flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
                flat = comm.all_reduce(flat, op="sum") / min(world, len(steps) - first)
                for p, g in zip(params, torch.split(flat, [p.numel() for p in params])):
                    p.grad = g.view_as(p).clone()
            opt.step()
        if rank == 0:
            print(f"epoch {epoch}: loss {total / max(count, 1):.4f} ({time.time() - started:.0f} s)", flush=True)
    test = split["test"]
    if a.eval_events and test.numel() > a.eval_events:
        test = test[torch.linspace(0, test.numel() - 1, a.eval_events).long()]
    history = (src[split["train"]], dst[split["train"]])
    one = negatives(src[test], dst[test], n, 1, a.seed, "test")[:, 0]
    many = negatives(src[test], dst[test], n, a.neg, a.seed, "test", history)
    mine = torch.arange(rank, test.numel(), world)  # each rank scores its share

    @torch.no_grad()
    def score(qs, qd, qt):
        model.eval()
        nodes = torch.cat([qs, qd])
        times = torch.cat([qt, qt])
        key, inv = torch.unique(torch.stack([nodes, times]), dim=1, return_inverse=True)  # each (node, time) once
        out = torch.cat([model.embed(sampler, key[0][i:i + 4096], at(key[1][i:i + 4096]), 10**6, i)
                         for i in range(0, key.shape[1], 4096)])
        z = out[inv]
        return model.pair(z[: qs.numel()], z[qs.numel():])

    res = evaluate(score, src[test][mine], dst[test][mine], t[test][mine], one[mine], many[mine], batch=64,
                   comm=comm)
    bank = EdgeBank(src, dst, t, n)
    base = evaluate(bank.score, src[test][mine], dst[test][mine], t[test][mine], one[mine], many[mine], comm=comm)
    out = {"dataset": a.dataset, "workers": world, "seed": a.seed, "epochs": a.epochs, "leak": a.leak,
           "time_blind_model": a.time_blind_model, "strategy": a.strategy, "test_events": int(test.numel()),
           "model": res, "edgebank": base, "seconds": round(time.time() - started, 1)}
    if rank == 0:
        for who in ("model", "edgebank"):
            r = out[who]
            print(f"{who:9s} test AP {r['ap']:.4f}  AUC {r['auc']:.4f}  MRR {r['mrr']:.4f} ({a.neg} negatives, "
                  f"half historical)")
        if a.json:
            Path(a.json).write_text(json.dumps(out, indent=2))
    return out


if __name__ == "__main__":
    main()
