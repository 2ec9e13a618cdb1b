"""Worker body of the JODIE edge-feature tests (importable by spawned processes)."""
from __future__ import annotations

import numpy as np
import torch

from gnnscale.partitioning import load_part
from gnnscale.process.comm import Communicator
from gnnscale.process.groups import init_distributed
from temporal_workers import blocks_orig


def task_blocks(parts_dir: str, cfg, seeds_orig: torch.Tensor, times: torch.Tensor, epoch: int = 1, step: int = 2):
    """Rank r embeds seeds r, r + P, ... (original ids) at their times as ``--task temporal_link``'s
    batches do (:meth:`TemporalLinkTask.embed_batch`); returns every block's edges in original ids
    with the global tree and each edge's ``edge_attr`` row."""
    from gnnscale.tasks.temporal_task import TemporalLinkTask

    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    old_of_new = torch.from_numpy(np.concatenate([load_part(parts_dir, p).orig_ids.numpy()
                                                  for p in range(part.book.num_parts)]))
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(old_of_new.numel())
    task = TemporalLinkTask(part, cfg, comm)
    mine = torch.arange(info.rank, seeds_orig.numel(), info.world_size)
    mb = task.embed_batch(task.sampler(comm, cfg.fanouts, cfg.seed), new_of_old[seeds_orig[mine]], times[mine],
                          epoch, step)
    out = blocks_orig(mb, old_of_new, mine)
    for rec, b in zip(out, mb.blocks):
        rec["edge_attr"] = b.edge_attr
    return out
