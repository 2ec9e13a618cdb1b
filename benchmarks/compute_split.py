"""Where the compute stage of a 1-process epoch goes: matrix products against the rest.

The roofline (``roofline.py``) bounds compute by the matrix products at the machine's measured
rates plus the aggregation and elementwise bytes at its copy bandwidth. This module measures the
same split in real training steps, so a compute stage above its bound says which part is:

- the epoch's steps are sampled as the trainer samples them (``build_samplers``,
  ``SeedSchedule``, epoch 1), their input rows and labels gathered beforehand;
- the model, optimizer and heap settings are the trainer's (``ModelSpec``, Adam 3e-3,
  ``keep_freed_memory``); two warm-up steps, then the epoch's steps (zero_grad, forward,
  cross-entropy, backward, Adam) are timed ``repeats`` times: ``compute_s`` is the best epoch;
- then the same steps again under a ``TorchDispatchMode`` that times each ``aten.mm``,
  ``aten.addmm`` and ``aten.addmm_`` call (wall clock around the call): ``matmul_s`` is the best
  epoch's sum, and ``rest_s = compute_s - matmul_s`` (the mode's own overhead falls on the other
  ops, which are not timed there); ``matmul_GFLOP_per_s`` is the products' FLOPs (counted by
  the same mode from their shapes) over ``matmul_s``;
- in those clocked epochs every aggregation (``BlockAdjacency.mm``, forward and transposed,
  the compiled kernels that no dispatch mode sees) is timed too: ``aggregation_s`` (best epoch),
  and ``other_s = compute_s - matmul_s - aggregation_s``: the elementwise passes, the loss,
  Adam and the Python between them.

Run it in a worker's environment (``gnnscale.process.launch.thread_env``: thread counts, huge
pages for torch's allocator, on which ``keep_freed_memory`` depends), as ``epoch.py`` does.
Beside the roofline's ``compute_parts``: ``matmul_s`` against the bound's ``matmul`` (and
against ``matmul_at_measured_rates_s``: the same products timed alone at their shapes with the
training's threads), ``rest_s`` against ``aggregation + elementwise``, ``aggregation_s``
against ``aggregation`` and ``other_s`` against ``elementwise``.
"""
from __future__ import annotations

import time
import warnings

import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from roofline import one_part_sampler  # benchmarks/: this module's folder

_MM = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.addmm_.default}


class _MatmulClock(TorchDispatchMode):
    """Wall seconds and FLOPs of the matrix products run under it."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds, self.flops = 0.0, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func not in _MM:
            return func(*args, **(kwargs or {}))
        t0 = time.perf_counter()
        out = func(*args, **(kwargs or {}))
        self.seconds += time.perf_counter() - t0
        a, b = (args[0], args[1]) if func is torch.ops.aten.mm.default else (args[1], args[2])
        self.flops += 2 * a.shape[0] * a.shape[1] * b.shape[1]
        return out


class _AggregationClock:
    """Wall seconds of the aggregations (``BlockAdjacency.mm``) run inside it."""

    def __enter__(self) -> "_AggregationClock":
        from gnnscale.nn.sparse_ops import BlockAdjacency

        self.seconds, self._mm = 0.0, BlockAdjacency.mm
        inner = self._mm

        def timed(adj, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return inner(adj, *args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t0

        BlockAdjacency.mm = timed
        return self

    def __exit__(self, *exc) -> None:
        from gnnscale.nn.sparse_ops import BlockAdjacency

        BlockAdjacency.mm = self._mm


def replay(parts_dir: str, threads: int = 2, max_steps: int | None = None, fanouts=(5, 10, 15),
           batch_size: int = 1024, hidden: int = 256, dropout: float = 0.5) -> dict:
    """The 1-process setting's epoch 1, ready to replay: {"net", "opt", "data": [(blocks, x
    float32 [S, F], y int64 [B])], "steps": steps in the whole epoch, "heap"}."""
    from gnnscale.config import TrainConfig
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.partitioning import load_meta, load_part
    from gnnscale.process.memory import keep_freed_memory
    from gnnscale.samplers.seeds import SeedSchedule

    if int(load_meta(parts_dir)["num_parts"]) != 1:
        raise SystemExit(f"compute_split: {parts_dir} has several parts; the split replays the 1-process setting "
                         "(give the 1-part folder)")
    torch.set_num_threads(threads)
    heap = keep_freed_memory()
    part = load_part(parts_dir, 0, verify=False)
    cfg = TrainConfig(fanouts=list(fanouts), batch_size=batch_size, seed=0, hidden=hidden, dropout=dropout, lr=3e-3)

    sampler = one_part_sampler(part, cfg)
    train = torch.nonzero(torch.as_tensor(part.train_mask)).flatten() + part.offset
    batches = SeedSchedule(train, [train.numel()], batch_size, 0, 0).epoch(1)
    steps = len(batches)
    batches = batches[:max_steps] if max_steps else batches
    with warnings.catch_warnings():  # the part's arrays are read-only maps; nothing writes to them
        warnings.simplefilter("ignore", UserWarning)
        x_all, y_all = torch.as_tensor(part.x), torch.as_tensor(part.y)
    data = []
    for step, seeds in enumerate(batches):
        mb = sampler.sample(seeds, epoch=1, step=step)
        data.append((mb.blocks, x_all[mb.blocks[0].src_ids - part.offset], y_all[mb.blocks[-1].dst_ids - part.offset]))
    net = ModelSpec.of(cfg, x_all.shape[1], int(y_all.max()) + 1, num_layers=len(fanouts)).build(seed=0)
    net.train()
    return dict(net=net, opt=torch.optim.Adam(net.parameters(), lr=cfg.lr), data=data, steps=steps, heap=heap)


def train_step(net, opt, blocks, x, y) -> None:
    """One step as the trainer takes it: zero_grad, forward, cross-entropy, backward, Adam."""
    opt.zero_grad(set_to_none=True)
    F.cross_entropy(net(x, blocks), y).backward()
    opt.step()


def split(parts_dir: str, threads: int = 2, repeats: int = 3, max_steps: int | None = None, **model) -> dict:
    """The 1-process epoch's compute split (see the module doc) on a 1-part folder.

    Returns {"steps", "steps_timed", "compute_s", "matmul_s", "rest_s", "aggregation_s",
    "other_s", "matmul_GFLOP", "matmul_GFLOP_per_s", "compute_s_runs", "matmul_s_runs",
    "aggregation_s_runs", "threads", "heap"}: seconds per epoch (scaled to the whole epoch when
    ``max_steps`` cuts it)."""
    prev = torch.get_num_threads()
    try:
        r = replay(parts_dir, threads, max_steps, **model)
        net, opt, data = r["net"], r["opt"], r["data"]

        def epoch() -> None:
            for blocks, x, y in data:
                train_step(net, opt, blocks, x, y)

        for blocks, x, y in data[:2]:  # warm-up: compiled kernels, the kept heap
            train_step(net, opt, blocks, x, y)
        scale = r["steps"] / len(data)
        compute, matmul, agg, flops = [], [], [], 0
        for _ in range(repeats):  # plain and clocked epochs alternate (a noisy machine hits both alike)
            t0 = time.perf_counter()
            epoch()
            compute.append(scale * (time.perf_counter() - t0))
            with _MatmulClock() as clock, _AggregationClock() as aclock:
                epoch()
            matmul.append(scale * clock.seconds)
            agg.append(scale * aclock.seconds)
            flops = scale * clock.flops
        c, m, a = min(compute), min(matmul), min(agg)
        return dict(steps=r["steps"], steps_timed=len(data), threads=threads, heap=r["heap"], compute_s=c,
                    matmul_s=m, rest_s=c - m, aggregation_s=a, other_s=c - m - a, matmul_GFLOP=flops / 1e9,
                    matmul_GFLOP_per_s=flops / m / 1e9, compute_s_runs=compute, matmul_s_runs=matmul,
                    aggregation_s_runs=agg)
    finally:
        torch.set_num_threads(prev)


def describe(s: dict, roof: dict | None = None) -> list[str]:
    """Printable lines: the split, and beside it the roofline's parts when given."""
    lines = [f"compute split, replayed ({s['steps_timed']} of {s['steps']} steps, {s['threads']} threads, best of "
             f"{len(s['compute_s_runs'])}): compute {s['compute_s']:.3f} s = matrix products {s['matmul_s']:.3f} s "
             f"({s['matmul_GFLOP']:.1f} GFLOP at {s['matmul_GFLOP_per_s']:.0f} GFLOP/s) + the rest {s['rest_s']:.3f} s"
             f" (aggregations {s['aggregation_s']:.3f} s + other {s['other_s']:.3f} s)"]
    if roof is not None:
        q = max(roof["bounds_per_rank"], key=lambda x: x["compute"])
        p = q["compute_parts"]
        rest_bound = p["aggregation"] + p["elementwise"]
        lines.append(f"  against the bound: products {s['matmul_s']:.3f} / {p['matmul']:.3f} s = "
                     f"{s['matmul_s'] / p['matmul']:.2f}x (at the rates measured alone with {s['threads']} threads: "
                     f"{q['matmul_at_measured_rates_s']:.3f} s, {s['matmul_s'] / q['matmul_at_measured_rates_s']:.2f}x);"
                     f" the rest {s['rest_s']:.3f} / {rest_bound:.3f} s = {s['rest_s'] / rest_bound:.2f}x (aggregations "
                     f"{s['aggregation_s']:.3f} / {p['aggregation']:.3f} s = {s['aggregation_s'] / p['aggregation']:.2f}x,"
                     f" other {s['other_s']:.3f} / elementwise {p['elementwise']:.3f} s = "
                     f"{s['other_s'] / p['elementwise']:.2f}x); "
                     f"compute {s['compute_s']:.3f} / {roof['bounds']['compute']:.3f} s = "
                     f"{s['compute_s'] / roof['bounds']['compute']:.2f}x")
    return lines


if __name__ == "__main__":
    import argparse
    import json

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("parts_dir", nargs="?", help="a 1-part folder (gnnscale partition --parts 1; with --smoke: made "
                    "here when left out)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--steps", type=int, default=None, help="time only the first N steps (scaled to the epoch)")
    ap.add_argument("--smoke", action="store_true", help="a 2,000-node graph in 1 part, 2 steps, 1 repeat")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    if a.smoke:
        from _common import smoke_parts

        a.parts_dir, a.steps, a.repeats = a.parts_dir or smoke_parts(), 2, 1
    if not a.parts_dir:
        ap.error("parts_dir: expected a 1-part folder, found none (or give --smoke)")
    res = split(a.parts_dir, a.threads, a.repeats, a.steps)
    print("\n".join(describe(res)))
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)
        print(f"wrote {a.json}")
