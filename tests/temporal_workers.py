"""Worker bodies of the temporal sampling tests (importable by spawned processes)."""
from __future__ import annotations

import torch

from gnnscale.partitioning import load_part
from gnnscale.process.comm import Communicator
from gnnscale.process.groups import init_distributed
from gnnscale.samplers.temporal import DistTemporalSampler


def temporal_sample(parts_dir: str, seeds_orig: torch.Tensor, times: torch.Tensor, fanouts, seed: int,
                    configs: list[dict], epoch: int = 1, step: int = 2):
    """Rank r samples seeds r, r + P, ... (original ids) at their times under each config (strategy,
    window, cut); returns, per config, every block's edges in original ids with the global tree."""
    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    old_of_new = torch.from_numpy(__import__("numpy").concatenate(
        [load_part(parts_dir, p).orig_ids.numpy() for p in range(part.book.num_parts)]))
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(old_of_new.numel())
    mine = torch.arange(info.rank, seeds_orig.numel(), info.world_size)
    out = []
    for cfg in configs:
        s = DistTemporalSampler(part.indptr, part.indices, part.edge_time, part.orig_ids, part.book, comm, fanouts,
                                seed=seed, **cfg)
        mb = s.sample(new_of_old[seeds_orig[mine]], times[mine], epoch, step)
        out.append(blocks_orig(mb, old_of_new, mine))
    return out


def blocks_orig(mb, old_of_new: torch.Tensor | None, tree_ids: torch.Tensor) -> list[dict]:
    """Each block's edges as (global tree, src, dst, edge time, seed time), ids original."""
    res = []
    for b in mb.blocks:
        src, dst = b.edge_index
        ids_s, ids_d = b.src_ids[src], b.dst_ids[dst]
        if old_of_new is not None:
            ids_s, ids_d = old_of_new[ids_s], old_of_new[ids_d]
        tree = b.src_tree[dst]
        res.append({"tree": tree_ids[tree], "src": ids_s, "dst": ids_d, "edge_time": b.edge_time,
                    "seed_time": b.src_time[dst]})
    return res
