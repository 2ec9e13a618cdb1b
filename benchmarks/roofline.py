"""The roofline of a ``gnnscale train`` epoch (issue 30 item 1), for ``benchmarks/epoch.py``.

What an epoch of the benchmark's model must do, counted exactly from the blocks the engine
samples, set against what this machine can do, measured in the same run:

**Counts** (per epoch, per layer). The epoch's steps are sampled with the engine's own sampler:
one part: ``gnnscale.data.loader.build_samplers`` over the part (a one-rank communicator), the
seeds of ``gnnscale.samplers.seeds.SeedSchedule`` as ``DataParallel`` cuts them; several parts:
each rank's steps replayed with ``NeighborSampler`` over the union of the parts keyed by original
ids, which draws what ``DistNeighborSampler`` draws (``tests/test_distributed.py``). Per block:
S sources, D destinations, M edges. The model is GraphSAGE mean (``BlockSAGEConv``), which
computes ``lin_l(mean of neighbours) + lin_r(x_dst)``, aggregating first when the layer widens
or keeps its width (128->256, 256->256: both linears on the D rows) and applying ``lin_l`` to the
S source rows first when it narrows (256->16); so per linear of ``rows`` rows:

- forward: ``2 * rows * F_in * F_out`` FLOPs (``addmm``/``mm``);
- backward: the weight gradient, ``2 * rows * F_in * F_out``; the input gradient, as much, except
  in layer 1, whose inputs (the features, and their mean) need no gradient: autograd computes
  none there, nor the aggregation's backward (checked: the counted matrix-product FLOPs of the
  first step equal ``torch.utils.flop_counter.FlopCounterMode``'s count of a real forward and
  backward of the model on that step's blocks; ``flop_check`` in the JSON);
- aggregation (``block_matmul``, a CSR product of width C = F_in when aggregating first, F_out
  otherwise): ``2 * M * C`` FLOPs forward (a multiply and an add per edge and column) and as
  many backward where its input needs a gradient. Bytes, compulsory (each byte read or written
  once: read + write both counted): the distinct sources' rows read, the D output rows written,
  the CSR (8 B column + 4 B weight per edge, 8 B per row pointer); backward the same over the
  transposed CSR (D gradient rows read, S rows written); building the block's adjacency (edge
  list read, weights written, the transpose by a counting sort) 52 B per edge. ``gathered``
  bytes, where every edge reads its whole row from memory (M * C * 4), are reported beside;
- elementwise passes (modelled, compulsory): the fused ReLU+dropout of each hidden layer's
  output (8 B per element forward, 12 B backward), the sum of the self term (``lin_r``) and the
  bias of each output, the bias gradient, the self term's share of the source rows' gradient,
  the loss, Adam (28 B per parameter a step). Layers that aggregate first run as one autograd
  node (``BlockSAGEConv``'s ``_SageMean``): both sums happen inside the products (4 B per
  element, C read again); layers that map first add in a pass of their own (12 B) and take the
  slice's source gradient as autograd does (zero fill, the D rows, the sum of two gradients);
- fetch: the input rows gathered (S of block 1 rows of 128 floats: read + written), the labels;
  over several parts a remote row costs 4x its bytes (its owner gathers it into a message, the
  requester copies it out; the sockets' own copies not counted);
- sampling: no defensible compute bound (the draws are hashes and random reads); the bound is
  bytes: per frontier node its CSC pointers, stream key and count (32 B), per sampled edge its
  index read and the neighbour written at the owner (16 B), the relabel lookup and the block's
  edge written at the requester (24 B), per new source its id and table slot (16 B); remote
  requests and answers twice. Random reads cost a cache line (64 B) each, which this leaves
  out: it is loose.

**Rates**: ``machine_rates.py`` (``measure``, ``best_rates``; re-exported here).

**Bounds** per stage: compute = sum over the matrix products of FLOPs / their shape's rate +
(aggregation + elementwise bytes) / bandwidth (a sum: the products and the passes between them
depend on each other, so they do not overlap within a step; ``compute_overlap_s``, the max of
the two, is the classic roofline's looser figure); fetch = bytes / bandwidth; sample = bytes /
bandwidth; epoch = their sum (the benchmark runs without ``--pipeline``: the stages are
serial). Several parts (one thread per rank): each rank's bound at the one-thread rates, the
stage's bound the larger of the slowest rank's and all ranks' bytes over the whole machine's
bandwidth.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from machine_rates import best_rates, measure, shape_key  # noqa: F401  benchmarks/: this module's folder

FEATURES, HIDDEN, CLASSES = 128, 256, 16
FANOUTS = [5, 10, 15]
BATCH = 1024
F32, I64 = 4, 8


# ----------------------------------------------------------------------------- counting

def layer_dims(features: int = FEATURES, hidden: int = HIDDEN, classes: int = CLASSES,
               layers: int = len(FANOUTS)) -> list[tuple[int, int]]:
    d = [features] + [hidden] * (layers - 1) + [classes]
    return [(d[i], d[i + 1]) for i in range(layers)]


def linear_ops(i: int, f_in: int, f_out: int) -> list[tuple[str, str, str, bool]]:
    """The matrix products BlockSAGEConv ``i`` runs a step, as (linear, pass, rows of, bias):
    ``rows of`` names the block size that gives the rows ("S" or "D")."""
    agg_first = not f_out < f_in  # BlockSAGEConv: the neighbour map first only when it narrows
    l_rows = "D" if agg_first else "S"
    ops = [("lin_l", "fwd", l_rows, agg_first), ("lin_r", "fwd", "D", False),
           ("lin_l", "wgrad", l_rows, False), ("lin_r", "wgrad", "D", False)]
    if i > 0:  # layer 1's inputs are the features: no input gradient
        ops += [("lin_l", "igrad", l_rows, False), ("lin_r", "igrad", "D", False)]
    return ops


@dataclass
class LayerSums:
    """Sums over an epoch's steps of one layer's block sizes."""

    S: int = 0  # sources
    D: int = 0  # destinations
    M: int = 0  # edges
    U: int = 0  # distinct sources with an edge
    Dn: int = 0  # destinations with an edge
    rows: list = field(default_factory=list)  # per step (S, D, M)

    def add(self, s: int, d: int, m: int, u: int, dn: int) -> None:
        self.S += s
        self.D += d
        self.M += m
        self.U += u
        self.Dn += dn
        self.rows.append((s, d, m))


@dataclass
class RankSums:
    """One rank's epoch: per layer (model order) block sums, fetch and sampling work."""

    layers: list
    steps: int = 0
    input_rows: int = 0
    remote_input_rows: int = 0
    served_rows: int = 0  # rows this rank sent to others (several parts)
    seeds: int = 0
    sample_bytes: int = 0


def _block_stats(b) -> tuple[int, int, int, int, int]:
    ei = b.edge_index
    s, d, m = int(b.num_src), int(b.num_dst), int(ei.shape[1])
    u = int((torch.bincount(ei[0], minlength=s) > 0).sum()) if m else 0
    dn = int((torch.bincount(ei[1], minlength=d) > 0).sum()) if m else 0
    return s, d, m, u, dn


def _sampling_bytes(blocks, owner_of=None, rank: int = 0, per_rank: list | None = None) -> int:
    """The compulsory bytes of sampling one batch (see the module doc); with ``owner_of``
    (several parts) the owners' share goes to ``per_rank[owner]`` and this returns the
    requester's own share."""
    own = 0
    for b in blocks:
        d, m = int(b.num_dst), int(b.edge_index.shape[1])
        new = int(b.num_src) - d
        own += 24 * m + 16 * new  # relabel lookups, edges written; new sources' ids and slots
        counts = torch.bincount(b.edge_index[1], minlength=d)
        if owner_of is None:
            own += 32 * d + 16 * m
            continue
        o = owner_of(b.dst_ids)
        for r in range(len(per_rank)):  # loop over ranks (a handful)
            sel = o == r
            nd, ne = int(sel.sum()), int(counts[sel].sum())
            work = 32 * nd + 16 * ne
            if r != rank:  # a request (8 B per id) and its answer (8 B per id and per edge), both sides
                x = 2 * (8 * nd + 8 * nd + 8 * ne)
                per_rank[r] += work + x
                own += x
            else:
                own += work
    return own


class _OneRank:
    """The communicator of a one-rank world: nothing leaves the rank."""

    rank, world_size = 0, 1

    def exchange(self, send, category):
        return [s.clone() for s in send]


def one_part_sampler(part, cfg):
    """The trainer's training sampler (``build_samplers``) of a one-part folder's part, over a
    one-rank world, with ``cfg.fanouts``."""
    from gnnscale.data.loader import build_samplers

    return build_samplers(part, _OneRank(), cfg, list(cfg.fanouts), cfg.exchange)[0]


def sample_epoch(parts_dir: str, fanouts=FANOUTS, batch_size: int = BATCH, epoch: int = 1, seed: int = 0,
                 max_steps: int | None = None) -> dict:
    """Every rank's epoch ``epoch`` sampled as the trainer samples it (see the module doc).

    Returns {"ranks": [RankSums], "steps": steps per epoch, "sampled_steps": steps sampled per
    rank, "first": (rank 0's first MiniBatch, its part), "seconds", "num_parts"}."""
    from gnnscale.config import TrainConfig
    from gnnscale.partitioning import load_meta, load_part
    from gnnscale.samplers.seeds import SeedSchedule

    t0 = time.perf_counter()
    meta = load_meta(parts_dir)
    P = int(meta["num_parts"])
    parts = [load_part(parts_dir, p, verify=False) for p in range(P)]
    train = [torch.nonzero(torch.as_tensor(p.train_mask)).flatten() + p.offset for p in parts]
    counts = [t.numel() for t in train]
    cfg = TrainConfig(fanouts=list(fanouts), batch_size=batch_size, seed=seed)
    if P == 1:
        sampler = one_part_sampler(parts[0], cfg)

        def draw(seeds, step, p):
            return sampler.sample(seeds, epoch=epoch, step=step)
        owner_of = None
    else:
        from gnnscale.samplers import NeighborSampler

        indptr, off = [torch.zeros(1, dtype=torch.int64)], 0
        for part in parts:  # loop over parts: their CSCs end to end (ids are contiguous per part)
            indptr.append(torch.as_tensor(part.indptr[1:]) + off)
            off += int(part.indptr[-1])
        union = NeighborSampler(torch.cat(indptr), torch.cat([torch.as_tensor(p.indices) for p in parts]),
                                list(fanouts), seed=seed,
                                node_keys=torch.cat([torch.as_tensor(p.orig_ids) for p in parts]))

        def draw(seeds, step, p):
            return union.sample(seeds, epoch=epoch, step=step)
        owner_of = parts[0].book.owner
    ranks = [RankSums(layers=[LayerSums() for _ in fanouts]) for _ in range(P)]
    owner_sample = [0] * P
    first, steps_total, sampled = None, 0, 0
    for p in range(P):  # loop over ranks, then their steps
        batches = SeedSchedule(train[p], counts, batch_size, seed, p).epoch(epoch)
        steps_total = len(batches)
        batches = batches[:max_steps] if max_steps else batches
        sampled = len(batches)
        rs = ranks[p]
        for step, seeds in enumerate(batches):
            mb = draw(seeds, step, p)
            if first is None:
                first = (mb, parts[p])
            for i, b in enumerate(mb.blocks):
                rs.layers[i].add(*_block_stats(b))
            inp = mb.blocks[0].src_ids
            rs.input_rows += int(inp.numel())
            if owner_of is not None:
                o = owner_of(inp)
                rs.remote_input_rows += int((o != p).sum())
                for r in range(P):
                    if r != p:
                        ranks[r].served_rows += int((o == r).sum())
            rs.seeds += int(seeds.numel())
            rs.sample_bytes += _sampling_bytes(mb.blocks, owner_of, p, owner_sample)
            rs.steps += 1
    for p in range(P):
        ranks[p].sample_bytes += owner_sample[p]
    return {"ranks": ranks, "steps": steps_total, "sampled_steps": sampled, "first": first,
            "seconds": time.perf_counter() - t0, "num_parts": P}


def _params(dims) -> int:
    return sum(2 * fi * fo + fo for fi, fo in dims)  # lin_l (with bias) and lin_r per layer


def rank_counts(rs: RankSums, dims, scale: float, features: int = FEATURES) -> dict:
    """One rank's epoch counts (scaled by ``scale`` = steps / sampled steps): per layer the
    matrix products (with the median step's rows, for their rates), aggregation and elementwise
    work; fetch and sampling bytes."""
    layers, ops = [], []
    L = len(dims)
    for i, ((fi, fo), ls) in enumerate(zip(dims, rs.layers)):
        agg_first = not fo < fi
        S, D, M, U, Dn = (scale * v for v in (ls.S, ls.D, ls.M, ls.U, ls.Dn))
        med = {"S": statistics.median(r[0] for r in ls.rows), "D": statistics.median(r[1] for r in ls.rows)}
        flops = {"fwd": 0.0, "wgrad": 0.0, "igrad": 0.0}
        for lin, kind, of, bias in linear_ops(i, fi, fo):
            rows = S if of == "S" else D
            f = 2.0 * rows * fi * fo
            flops[kind] += f
            ops.append(dict(layer=i + 1, linear=lin, kind=kind, flops=f, rows=int(med[of]), f_in=fi, f_out=fo,
                            bias=bias))
        C = fi if agg_first else fo
        agg_bwd = i > 0 or not agg_first  # the aggregation's input needs a gradient
        agg_fwd_bytes = U * C * F32 + D * C * F32 + M * (I64 + F32) + (D + 1) * I64
        agg_bwd_bytes = (Dn * C * F32 + S * C * F32 + M * (I64 + F32) + (S + 1) * I64) if agg_bwd else 0.0
        adj_bytes = 52 * M + (D + 1) * I64 + (S + 1) * I64
        gathered = (M * C + D * C) * F32 + ((M * C + S * C) * F32 if agg_bwd else 0.0)
        # Aggregation first: one autograd node (BlockSAGEConv's _SageMean) adds lin_r's product
        # into lin_l's output and its input gradient into the source gradient's D rows inside the
        # products (beta 1: C read once more, 4 B per element); linear first: autograd's graph, a
        # separate add (12 B) and the source gradient of the slice x_src[:D] (zero fill, lin_r's
        # D rows copied, the sum of two [S, F] gradients).
        elem = (4 if agg_first else 12) * D * fo + 4 * D * fo  # the self term's sum; bias gradient
        if not agg_first:
            elem += 8 * D * fo  # the bias added after the aggregation
        if i > 0:
            elem += 20 * S * fi  # fused ReLU + dropout of the input: 8 B forward, 12 B backward per element
            elem += 4 * D * fi if agg_first else 16 * S * fi + 8 * D * fi  # the source gradient's D rows
        if i == L - 1:
            elem += 12 * D * fo  # cross-entropy: logits read, their gradient written
        layers.append(dict(
            layer=i + 1, f_in=fi, f_out=fo, aggregate_first=agg_first, aggregation_width=C,
            block_rows_per_epoch=dict(S=S, D=D, M=M, distinct_sources=U, dst_with_edges=Dn),
            fwd_GFLOP=flops["fwd"] / 1e9, bwd_GFLOP=(flops["wgrad"] + flops["igrad"]) / 1e9,
            bwd_weight_GFLOP=flops["wgrad"] / 1e9, bwd_input_GFLOP=flops["igrad"] / 1e9,
            agg_fwd_GFLOP=2 * M * C / 1e9, agg_bwd_GFLOP=(2 * M * C / 1e9) if agg_bwd else 0.0,
            agg_MB=(agg_fwd_bytes + agg_bwd_bytes + adj_bytes) / 1e6, agg_fwd_MB=agg_fwd_bytes / 1e6,
            agg_bwd_MB=agg_bwd_bytes / 1e6, adjacency_MB=adj_bytes / 1e6, agg_gathered_MB=gathered / 1e6,
            elementwise_MB=elem / 1e6))
    steps = scale * rs.steps
    optimizer = 28 * _params(dims) * steps  # Adam: read param, grad, 2 moments; write param, 2 moments
    remote = scale * rs.remote_input_rows
    local = scale * rs.input_rows - remote
    served = scale * rs.served_rows
    row = features * F32
    fetch = 2 * local * row + 2 * remote * row + 2 * served * row + 16 * (remote + served) \
        + 2 * I64 * scale * rs.seeds
    return dict(layers=layers, ops=ops, steps=steps, input_rows=scale * rs.input_rows, remote_input_rows=remote,
                served_rows=served, fetch_MB=fetch / 1e6, gathered_feature_MB=scale * rs.input_rows * row / 1e6,
                sample_MB=scale * rs.sample_bytes / 1e6, optimizer_MB=optimizer / 1e6,
                fwd_GFLOP=sum(x["fwd_GFLOP"] for x in layers), bwd_GFLOP=sum(x["bwd_GFLOP"] for x in layers))


# ----------------------------------------------------------------------------- the check

def _addmm_flops(self_shape, a_shape, b_shape, out_shape=None, **kwargs) -> int:
    """FLOPs of ``self.addmm_(a, b)`` (torch's own table counts addmm, not its in-place form)."""
    return 2 * a_shape[0] * a_shape[1] * b_shape[1]


def flop_check(first, dims, dropout: float = 0.5) -> dict:
    """Matrix-product FLOPs of one real step (forward, cross-entropy, backward of the model as
    the trainer builds it) counted by torch's FlopCounterMode, beside this module's count."""
    from torch.utils.flop_counter import FlopCounterMode

    from gnnscale.config import TrainConfig
    from gnnscale.nn.spec import ModelSpec

    mb, part = first
    fi, fo = dims[0][0], dims[-1][1]
    cfg = TrainConfig(fanouts=list(FANOUTS[: len(dims)]), batch_size=BATCH, hidden=dims[0][1], dropout=dropout)
    net = ModelSpec.of(cfg, fi, fo, num_layers=len(dims)).build(seed=0)
    net.train()
    x = torch.randn(mb.blocks[0].num_src, fi)  # the values do not change the count (rows may be remote)
    y = torch.as_tensor(part.y)[mb.blocks[-1].dst_ids - part.offset].clamp(min=0)
    # BlockSAGEConv's _SageMean adds the self term by an in-place product (addmm_), which torch's
    # table leaves out: counted as addmm.
    counter = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.addmm_: _addmm_flops})
    with counter:
        loss = F.cross_entropy(net(x, mb.blocks), y)
        loss.backward()
    counted = 0.0
    for i, ((a, b), blk) in enumerate(zip(dims, mb.blocks)):
        for _, _, of, _ in linear_ops(i, a, b):
            counted += 2.0 * (blk.num_src if of == "S" else blk.num_dst) * a * b
    torch_count = float(counter.get_total_flops())
    return dict(counted_GFLOP=counted / 1e9, flop_counter_GFLOP=torch_count / 1e9, equal=counted == torch_count,
                ops={str(k): v / 1e9 for k, v in counter.get_flop_counts()["Global"].items()})


# ----------------------------------------------------------------------------- the roofline

def count(parts_dir: str, threads_per_rank: int, max_steps: int | None = None, epoch: int = 1) -> dict:
    """The counts of one setting (a partition folder; the threads each rank trains with): every
    rank's epoch, the matrix-product shapes to time, the FlopCounterMode check."""
    dims = layer_dims()
    sam = sample_epoch(parts_dir, max_steps=max_steps, epoch=epoch)
    P = sam["num_parts"]
    scale = sam["steps"] / max(sam["sampled_steps"], 1)
    ranks = [rank_counts(rs, dims, scale) for rs in sam["ranks"]]
    return dict(
        method=("one part: the trainer's own sampler (build_samplers, SeedSchedule)" if P == 1 else
                "several parts: each rank's steps replayed with NeighborSampler over the parts' union (equal draws)"),
        epoch_sampled=epoch, steps_per_epoch=sam["steps"], sampled_steps_per_rank=sam["sampled_steps"],
        scale=scale, sampling_seconds=sam["seconds"], ranks=P, threads_per_rank=threads_per_rank,
        counts=ranks, flop_check=flop_check(sam["first"], dims))


def bounds(c: dict, m: dict) -> dict:
    """Seconds per stage that the counts ``c`` need at the rates ``m`` (see the module doc)."""
    # every rank's products at the rates of rank 0's shapes (the ranks' median steps differ little)
    ops0 = c["counts"][0]["ops"]
    rate = {(op["layer"], op["linear"], op["kind"]): m["matmul_GFLOP_per_s"][shape_key(op)] for op in ops0}
    measured = {(op["layer"], op["linear"], op["kind"]): m["matmul_GFLOP_per_s_measured"][shape_key(op)]
                for op in ops0}
    best = max(m["matmul_GFLOP_per_s"].values())

    def one(k: dict, bw: float) -> dict:
        mm = sum(op["flops"] / (rate[(op["layer"], op["linear"], op["kind"])] * 1e9) for op in k["ops"])
        mm_measured = sum(op["flops"] / (measured[(op["layer"], op["linear"], op["kind"])] * 1e9) for op in k["ops"])
        agg = sum(x["agg_MB"] for x in k["layers"]) * 1e6 / (bw * 1e9)
        el = (sum(x["elementwise_MB"] for x in k["layers"]) + k["optimizer_MB"]) * 1e6 / (bw * 1e9)
        gathered = sum(x["agg_gathered_MB"] for x in k["layers"]) * 1e6 / (bw * 1e9)
        sample, fetch = k["sample_MB"] * 1e6 / (bw * 1e9), k["fetch_MB"] * 1e6 / (bw * 1e9)
        compute = mm + agg + el
        return dict(sample=sample, fetch=fetch, compute=compute, epoch=sample + fetch + compute,
                    compute_parts=dict(matmul=mm, aggregation=agg, elementwise=el),
                    compute_overlap_s=max(mm, agg + el),
                    matmul_at_best_rate_s=sum(op["flops"] for op in k["ops"]) / (best * 1e9),
                    matmul_at_measured_rates_s=mm_measured,
                    compute_with_gathered_bytes_s=mm + gathered + el)

    per_rank = [one(k, m["copy_GBps_per_rank"]) for k in c["counts"]]
    stage = {s: max(b[s] for b in per_rank) for s in ("sample", "fetch", "compute", "epoch")}
    if c["ranks"] > 1:  # all ranks' bytes through the whole machine's bandwidth, where that is the larger
        bw = m["copy_GBps_machine"] * 1e9
        tot = {s: sum(k[s + "_MB"] for k in c["counts"]) * 1e6 / bw for s in ("sample", "fetch")}
        tot["compute"] = sum((sum(x["agg_MB"] + x["elementwise_MB"] for x in k["layers"]) + k["optimizer_MB"]) * 1e6
                             for k in c["counts"]) / bw
        tot["epoch"] = tot["sample"] + tot["fetch"] + tot["compute"]
        stage = {s: max(stage[s], tot[s]) for s in stage}
    return dict(stage, per_rank=per_rank)


def roofline(parts_dir: str, threads_per_rank: int, max_steps: int | None = None, buffer_mib: int = 1024,
             epoch: int = 1) -> dict:
    """Counts, rates and bounds of one setting in one call."""
    c = count(parts_dir, threads_per_rank, max_steps, epoch)
    m = measure(c, buffer_mib)
    return finish(c, m)


def finish(c: dict, m: dict) -> dict:
    """The JSON record of a setting's roofline: counts (without the op list), rates, bounds."""
    out = {k: v for k, v in c.items() if k != "counts"}
    out["counts"] = [{k: v for k, v in r.items() if k != "ops"} for r in c["counts"]]
    out["matmul_ops"] = [dict(op, GFLOP=op["flops"] / 1e9, shape=shape_key(op),
                              GFLOP_per_s=m["matmul_GFLOP_per_s"][shape_key(op)],
                              GFLOP_per_s_measured=m["matmul_GFLOP_per_s_measured"][shape_key(op)],
                              GFLOP_per_s_at_threads=m["matmul_GFLOP_per_s_at_threads"][shape_key(op)],
                              GFLOP_per_s_one_thread=m["matmul_GFLOP_per_s_one_thread"][shape_key(op)])
                         for op in c["counts"][0]["ops"]]
    for op in out["matmul_ops"]:
        op.pop("flops")
    out["machine"] = m
    b = bounds(c, m)
    out["bounds_per_rank"] = b.pop("per_rank")
    out["bounds"] = b
    return out


def paired(c: dict, measured: list[dict], ours: list[float], peer: list[float]) -> dict:
    """Compute stage over its bound with the rates measured beside each run, for a machine
    whose speed drifts within minutes. ``measured``: the run's measurements in order, the first
    before repeat 0 and one after each repeat, so that ``measured[r]`` comes just before repeat
    r's gnnscale run and ``measured[r + 1]`` just after its peer's run; ``ours``/``peer``: each
    repeat's compute seconds. The strict figure (``table``) divides by the bound at the best
    rates of all measurements; this one divides each run by the bound of its neighbour."""
    b = [bounds(c, m)["compute"] for m in measured]
    ours_r = [s / b[r] for r, s in enumerate(ours)]
    peer_r = [s / b[r + 1] for r, s in enumerate(peer)]
    return dict(compute_bound_s=b, gnnscale_ratio=ours_r, peer_ratio=peer_r,
                gnnscale_median=statistics.median(ours_r), peer_median=statistics.median(peer_r),
                bound_spread=max(b) / min(b))


def describe_paired(p: dict, peer: str = "DGL") -> str:
    """``paired``'s figures as one printable line."""
    f = lambda xs: ", ".join(f"{x:.2f}" for x in xs)  # noqa: E731
    return (f"  compute / bound paired with the rates measured beside each run: gnnscale {f(p['gnnscale_ratio'])} "
            f"(median {p['gnnscale_median']:.2f}), {peer} {f(p['peer_ratio'])} (median {p['peer_median']:.2f}); "
            f"the compute bound over the run's {len(p['compute_bound_s'])} measurements: "
            f"{f(p['compute_bound_s'])} s (max/min {p['bound_spread']:.2f})")


def best_of(r: dict, ours: float, peer: float) -> dict:
    """The best epoch's compute stage of each side (seconds) over the bound of ``r`` (the finished
    roofline, at the best rates of the run): the bound is the best the machine showed, these are
    the best each system showed in the same run."""
    b = r["bounds"]["compute"]
    return dict(gnnscale_compute_s=ours, peer_compute_s=peer, bound_s=b, gnnscale_ratio=ours / b, peer_ratio=peer / b)


def describe_best(p: dict, peer: str = "DGL") -> str:
    """``best_of``'s figures as one printable line."""
    return (f"  best epoch's compute (after the warm-up, of all repeats) / bound: gnnscale {p['gnnscale_compute_s']:.3f}"
            f" / {p['bound_s']:.3f} s = {p['gnnscale_ratio']:.2f}x, {peer} {p['peer_compute_s']:.3f} / "
            f"{p['bound_s']:.3f} s = {p['peer_ratio']:.2f}x")


def describe(r: dict) -> list[str]:
    """The roofline's counts, rates and bounds as printable lines."""
    lines = [f"roofline: {r['steps_per_epoch']} steps per epoch, {r['sampled_steps_per_rank']} sampled per rank"
             f" (x{r['scale']:.2f}); {r['ranks']} rank(s) x {r['threads_per_rank']} thread(s); {r['method']}"]
    m = r["machine"]
    lines.append(f"  copy bandwidth {m['copy_GBps_per_rank']:.1f} GB/s ({r['threads_per_rank']} thread(s))"
                 + (f", {m['copy_GBps_machine']:.1f} GB/s ({m['machine_threads']} threads)" if r["ranks"] > 1 else "")
                 + f"; {m['copy_buffer_MiB']} MiB buffer, read + write counted; best of {m['measurements']} "
                 f"measurement(s) in this run; heap: {m.get('heap', 'default')}")
    t = r["threads_per_rank"]
    rates = ", ".join(f"L{x['layer']} {x['linear']} {x['kind']} [{x['rows']}x{x['f_in']}x{x['f_out']}] "
                      + (f"{x['GFLOP_per_s_at_threads']:.0f}/{x['GFLOP_per_s_one_thread']:.0f}" if t > 1
                         else f"{x['GFLOP_per_s']:.0f}") for x in r["matmul_ops"])
    how = f"{t} threads / 1 thread; the bound uses max({t}-thread, {t} x 1-thread)" if t > 1 else "1 thread"
    lines.append(f"  matmul GFLOP/s at the layers' shapes ({how}): {rates}")
    for k, c in enumerate(r["counts"]):
        tag = f"rank {k}: " if r["ranks"] > 1 else ""
        for x in c["layers"]:
            n = x["block_rows_per_epoch"]
            lines.append(f"  {tag}layer {x['layer']} ({x['f_in']}->{x['f_out']}; per epoch S {n['S']:,.0f} D {n['D']:,.0f}"
                         f" M {n['M']:,.0f}): matmul fwd {x['fwd_GFLOP']:.2f} bwd {x['bwd_GFLOP']:.2f} GFLOP (weight "
                         f"{x['bwd_weight_GFLOP']:.2f}, input {x['bwd_input_GFLOP']:.2f}); aggregation (width "
                         f"{x['aggregation_width']}) {x['agg_fwd_GFLOP'] + x['agg_bwd_GFLOP']:.3f} GFLOP, "
                         f"{x['agg_MB']:.0f} MB compulsory ({x['agg_gathered_MB']:.0f} MB gathered); elementwise "
                         f"{x['elementwise_MB']:.0f} MB")
        lines.append(f"  {tag}epoch: matmul fwd {c['fwd_GFLOP']:.2f} + bwd {c['bwd_GFLOP']:.2f} GFLOP; features "
                     f"gathered {c['gathered_feature_MB']:.0f} MB ({c['input_rows']:,.0f} rows, "
                     f"{c['remote_input_rows']:,.0f} remote), fetch {c['fetch_MB']:.0f} MB moved; sampling "
                     f"{c['sample_MB']:.0f} MB; Adam {c['optimizer_MB']:.0f} MB")
    f = r["flop_check"]
    lines.append(f"  check on the first step: counted {f['counted_GFLOP']:.4f} GFLOP of matrix products, torch's "
                 f"FlopCounterMode {f['flop_counter_GFLOP']:.4f} ({'equal' if f['equal'] else 'DIFFERENT'})")
    b = r["bounds"]
    p = max(r["bounds_per_rank"], key=lambda x: x["compute"])
    lines.append(f"  bounds: sample {b['sample']:.3f} s, fetch {b['fetch']:.3f} s, compute {b['compute']:.3f} s "
                 f"(matmul {p['compute_parts']['matmul']:.3f} + aggregation {p['compute_parts']['aggregation']:.3f} + "
                 f"elementwise {p['compute_parts']['elementwise']:.3f}), epoch {b['epoch']:.3f} s; matmul at the "
                 f"measured rates {p['matmul_at_measured_rates_s']:.3f} s")
    return lines


def table(r: dict, gnn: dict | None, dgl: dict | None, peer: str = "DGL") -> tuple[list[str], dict]:
    """Per stage: gnnscale's and the peer's seconds (medians), the bound, the ratios; lines and rows."""
    rows = {}
    lines = [f"  {'stage':<8} {'gnnscale s':>10} {peer + ' s':>10} {'bound s':>9} {'gnnscale/bound':>15} "
             f"{peer + '/bound':>11}"]
    for k in ("sample", "fetch", "compute", "epoch"):
        bound = r["bounds"][k]
        g = gnn.get(k) if gnn else None
        d = dgl.get(k) if dgl else None
        rows[k] = dict(gnnscale_s=g, dgl_s=d, bound_s=bound, gnnscale_ratio=(g / bound) if g else None,
                       dgl_ratio=(d / bound) if d else None)
        fmt = lambda v, spec: format(v, spec) if v is not None else "-"  # noqa: E731
        lines.append(f"  {k:<8} {fmt(g, '10.3f'):>10} {fmt(d, '10.3f'):>10} {bound:9.3f} "
                     f"{fmt(rows[k]['gnnscale_ratio'], '15.1f'):>15} {fmt(rows[k]['dgl_ratio'], '11.1f'):>11}")
    return lines, rows


if __name__ == "__main__":
    import argparse
    import json

    ap = argparse.ArgumentParser(description="The roofline of one partition folder's epoch (see the module doc).")
    ap.add_argument("parts_dir", nargs="?", help="a partition folder (with --smoke: made here when left out)")
    ap.add_argument("--threads", type=int, default=2, help="threads per rank (epoch.py: 2 for 1proc, 1 for dist2)")
    ap.add_argument("--steps", type=int, default=None, help="sample only the first N steps of each rank (scaled)")
    ap.add_argument("--buffer-mib", type=int, default=1024, help="the copy-bandwidth buffer (MiB)")
    ap.add_argument("--smoke", action="store_true", help="a 2,000-node graph in 1 part, 2 steps, a 64 MiB buffer")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.smoke:
        from _common import smoke_parts

        a.parts_dir, a.steps, a.buffer_mib = a.parts_dir or smoke_parts(), 2, 64
    if not a.parts_dir:
        ap.error("parts_dir: expected a partition folder, found none (or give --smoke)")
    res = roofline(a.parts_dir, a.threads, a.steps, buffer_mib=a.buffer_mib)
    print("\n".join(describe(res)))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)
        print(f"wrote {a.json}")
