"""Worker bodies for the multi-process link-sampler tests (importable by spawned processes:
tests/conftest.py puts this folder on sys.path, which spawned workers inherit)."""
from __future__ import annotations

import torch

from gnnscale.partitioning import load_part
from gnnscale.process.comm import Communicator
from gnnscale.process.groups import init_distributed
from gnnscale.samplers import DistNeighborSampler, EdgeFilter, LinkSampler, NegativeSampler


def batch_record(mb, old_of_new: torch.Tensor) -> dict:
    """What a link batch holds, with node ids in ORIGINAL ids (comparable across numberings)."""
    return {
        "seeds": old_of_new[mb.seeds],
        "edge_label_index": mb.edge_label_index,
        "edge_label": mb.edge_label,
        "neg_of_pos": mb.neg_of_pos,
        "excluded_edges": mb.stats["excluded_edges"],
        "filtered_negatives": mb.stats["filtered_negatives"],
        "blocks": [{"src": old_of_new[b.src_ids], "dst": old_of_new[b.dst_ids], "edge_index": b.edge_index}
                   for b in mb.blocks],
    }


def link_batches(parts_dir: str, old_of_new: torch.Tensor, pos_by_rank: list, batches_by_rank: list, configs: list,
                 fanouts, seed: int, neg_seed: int, queries_by_rank: list):
    """Run a distributed LinkSampler over this rank's batches for every config
    ``(mode, k, use_filter, exclude)``; also answer ``queries_by_rank[rank]`` (new-id pairs)
    with the distributed EdgeFilter. Returns the batches in original ids and the counters."""
    info = init_distributed(timeout=60)
    rank = info.rank
    part = load_part(parts_dir, rank)
    comm = Communicator(rank, info.world_size, timeout=60)
    sampler = DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, seed=seed,
                                  owned_keys=part.orig_ids)
    edge_filter = EdgeFilter(part.indptr, part.indices, part.book, comm)
    pos = torch.as_tensor(pos_by_rank[rank], dtype=torch.int64)
    out = []
    for mode, k, use_filter, exclude in configs:
        link = LinkSampler(sampler, pos, NegativeSampler(part.book.num_nodes, mode, k, seed=neg_seed), rank,
                           edge_filter if use_filter else None, exclude)
        comm.stats.reset()
        batches = [batch_record(link.sample(torch.as_tensor(e, dtype=torch.int64), epoch=2, step=s), old_of_new)
                   for s, e in enumerate(batches_by_rank[rank])]
        out.append({"batches": batches, "rounds": dict(comm.stats.rounds)})
    q = torch.as_tensor(queries_by_rank[rank], dtype=torch.int64)
    comm.stats.reset()
    answers = edge_filter.has_edge(q[0], q[1])
    return {"rank": rank, "configs": out, "answers": answers, "filter_stats": comm.stats.snapshot()}
