"""The cost of drawing a global step's share (gnnscale.pyg.steps) beside a batch's own draws, in one run.

Under ``torchrun --nproc-per-node N`` a rank's batch of ``B // N`` seeds is its share of a global
step of B: it is keyed by the step and first draws the step's first L - 1 hops for every rank's
seeds (to learn which hop reaches each node first, as one process's batch of B does), so that the
N batches together are one process's batch (``GnnscaleSampler.sample(..., others=...)``). The
baseline is the same rank's batch drawn alone (``sample(mine)``: its own key and hops, what the
loaders did before). Both timed alternately (baseline, step, baseline, ...) on one thread; the
report gives the medians and their ratio per N, and checks on the last step drawn that the union
of the N ranks' edges is the one-process batch's.

The graph: N nodes, E edges with uniform sources and skewed targets (in-degree falls with the id),
seeded; fan-outs 15,10,5; steps of 1024 seeds.

    nice -n 10 python benchmarks/pyg_step_draws.py --json results/pyg_step_draws.json
    python benchmarks/pyg_step_draws.py --smoke
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import write_json  # noqa: E402

from gnnscale.pyg import GnnscaleSampler  # noqa: E402


def skewed_graph(num_nodes: int, num_edges: int, seed: int) -> torch.Tensor:
    """int64 [2, E]: uniform sources, targets ``floor(u^2 N)`` (low ids get most in-edges)."""
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, num_nodes, (num_edges,), generator=g)
    dst = (torch.rand(num_edges, generator=g, dtype=torch.float64) ** 2 * num_nodes).long()
    return torch.stack([src, dst])


def edge_set(out) -> set:
    """{(dst, src, e_id)} of a SamplerOutput, in original ids."""
    return set(zip(out.node[out.col].tolist(), out.node[out.row].tolist(), out.edge.tolist()))


def measure(sampler: GnnscaleSampler, num_nodes: int, world: int, step_size: int, runs: int) -> dict:
    """Seconds of rank 0's batch per step: drawn alone and as its share of the step (alternately)."""
    alone, shared = [], []
    b = step_size // world
    for step in range(runs):
        g = torch.Generator().manual_seed(1000 + step)
        seeds = torch.randperm(num_nodes, generator=g)[:step_size]
        mine, others = seeds[:b], seeds[b:]
        t = time.perf_counter()
        sampler.sample(mine, 0, step)
        alone.append(time.perf_counter() - t)
        t = time.perf_counter()
        sampler.sample(mine, 0, step, others=others)
        shared.append(time.perf_counter() - t)
    # the last step: the ranks' shares together are one process's batch of the step's seeds
    one = edge_set(sampler.sample(seeds, 0, step))
    union = set()
    for r in range(world):
        part = seeds[r * b:(r + 1) * b]
        union |= edge_set(sampler.sample(part, 0, step, others=torch.cat([seeds[:r * b], seeds[(r + 1) * b:]])))
    med_a, med_s = statistics.median(alone), statistics.median(shared)
    return {"world": world, "seeds_per_rank": b, "alone_ms": [round(x * 1e3, 2) for x in alone],
            "step_ms": [round(x * 1e3, 2) for x in shared], "median_alone_ms": round(med_a * 1e3, 2),
            "median_step_ms": round(med_s * 1e3, 2), "ratio_step_over_alone": round(med_s / med_a, 3),
            "union_equals_one_process": union == one, "one_process_edges": len(one)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--edges", type=int, default=1_500_000)
    ap.add_argument("--step", type=int, default=1024, help="seeds per global step")
    ap.add_argument("--fanouts", default="15,10,5")
    ap.add_argument("--worlds", default="2,4", help="process counts N")
    ap.add_argument("--runs", type=int, default=7, help="steps timed per side and N")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="5,000 nodes, steps of 128, 3 runs")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    if args.smoke:
        args.nodes, args.edges, args.step, args.runs = 5_000, 50_000, 128, 3
    torch.set_num_threads(args.threads)
    fanouts = [int(f) for f in args.fanouts.split(",")]
    sampler = GnnscaleSampler(skewed_graph(args.nodes, args.edges, 0), args.nodes, fanouts, seed=0)
    sampler.sample(torch.arange(16), 0, 0)  # compile / load the kernels outside the timings
    report = {"graph": {"nodes": args.nodes, "edges": args.edges}, "fanouts": fanouts, "step_seeds": args.step,
              "threads": args.threads, "runs": args.runs, "by_world": []}
    for world in (int(w) for w in args.worlds.split(",")):
        res = measure(sampler, args.nodes, world, args.step, args.runs)
        report["by_world"].append(res)
        print(f"N={world}: rank batch of {res['seeds_per_rank']} seeds: alone {res['median_alone_ms']} ms, "
              f"as its step's share {res['median_step_ms']} ms (x{res['ratio_step_over_alone']}); union of the "
              f"{world} shares = one process's batch: {res['union_equals_one_process']}")
        if not res["union_equals_one_process"]:
            raise SystemExit("the ranks' shares of a step are not one process's batch")
    write_json(args.json, report)


if __name__ == "__main__":
    main()
