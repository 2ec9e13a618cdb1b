"""Single-process uniform neighbor sampler over a CSC graph (the reference and the fast path)."""
from __future__ import annotations

from typing import Sequence

import torch

from gnnscale.errors import SamplerError
from gnnscale.samplers.block import Block, MiniBatch
from gnnscale.samplers.kernels import Kernels
from gnnscale.samplers.rng import stream_key


def check_fanouts(fanouts: Sequence[int], num_layers: int | None = None) -> list[int]:
    """Validate fanouts: positive ints or -1 (all neighbors), one per layer."""
    out = []
    for f in fanouts:
        if isinstance(f, bool) or int(f) != f or (int(f) < 1 and int(f) != -1):
            raise SamplerError(
                f"fanouts must be positive integers or -1 (all neighbors); found {list(fanouts)}. "
                "Example: --fanouts 10,10 for a 2-layer model."
            )
        out.append(int(f))
    if not out:
        raise SamplerError("fanouts is empty: give one fanout per layer, e.g. --fanouts 10,10")
    if num_layers is not None and len(out) != num_layers:
        raise SamplerError(
            f"expected {num_layers} fanouts (one per model layer), found {len(out)}: {out}. "
            f"Give exactly {num_layers} comma-separated values, or change the number of layers."
        )
    return out


class SamplingKeys:
    """Stream keys: one independent random stream per (seed, epoch, step, rank, hop)."""

    def __init__(self, seed: int) -> None:
        self.seed = int(seed)

    def __call__(self, epoch: int, step: int, rank: int, hop: int) -> int:
        return stream_key(self.seed, epoch, step, rank, hop)


class NeighborSampler:
    """Uniform neighbor sampler without replacement over a whole graph in one process.

    Args:
        indptr: int64 [N + 1] CSC pointers (in-edges of each node).
        indices: int64 [E] source node of each in-edge.
        fanouts: neighbors per hop, starting at the seeds (PyG's order); -1 = all.
        seed: base seed of the random streams.
        node_keys: optional int64 [N] identity of each node in the random streams (default:
            the node id). Partitioned graphs pass the original ids, so that a node draws the
            same neighbors whatever it was relabeled to.
        backend: ``"auto"``, ``"numba"`` or ``"torch"`` kernels (see :class:`Kernels`).

    ``sample(seeds, epoch, step, rank)`` draws exactly what :class:`DistNeighborSampler`
    draws for requester ``rank`` at the same (epoch, step), whatever the partitioning,
    provided each node's in-neighbors are listed in the same order (gnnscale's partition
    format lists them by original id).
    """

    def __init__(
        self,
        indptr: torch.Tensor,
        indices: torch.Tensor,
        fanouts: Sequence[int],
        seed: int = 0,
        node_keys: torch.Tensor | None = None,
        backend: str = "auto",
    ) -> None:
        self.indptr = indptr
        self.indices = indices
        self.fanouts = check_fanouts(fanouts)
        self.keys = SamplingKeys(seed)
        self.num_nodes = indptr.numel() - 1
        self.node_keys = node_keys
        self.kernels = Kernels(self.num_nodes, indptr.device, backend)

    def sample(self, seeds: torch.Tensor, epoch: int = 0, step: int = 0, rank: int = 0) -> MiniBatch:
        """Sample the computation graph of ``seeds`` (int64 [B], unique global ids)."""
        check_seeds(seeds, self.num_nodes)

        def hop_fn(dst: torch.Tensor, hop: int) -> tuple[torch.Tensor, torch.Tensor]:
            key = self.keys(epoch, step, rank, hop)
            ids = dst if self.node_keys is None else self.node_keys[dst]
            return self.kernels.sample(self.indptr, self.indices, dst, ids, self.fanouts[hop], key)

        return build_minibatch(seeds, len(self.fanouts), hop_fn, self.kernels.relabel)


def check_seeds(seeds: torch.Tensor, num_nodes: int, lo: int = 0) -> None:
    if seeds.dtype != torch.int64 or seeds.dim() != 1:
        raise SamplerError(f"seeds must be a 1-D int64 tensor; found dtype {seeds.dtype}, shape {tuple(seeds.shape)}")
    if seeds.numel() and (int(seeds.min()) < lo or int(seeds.max()) >= lo + num_nodes):
        raise SamplerError(
            f"seed ids must lie in [{lo}, {lo + num_nodes}); found range "
            f"[{int(seeds.min())}, {int(seeds.max())}]. Pass node ids of this graph (after relabeling)."
        )


def build_minibatch(seeds: torch.Tensor, num_hops: int, hop_fn, relabel) -> MiniBatch:
    """Run ``hop_fn(dst_ids, hop) -> (counts, nbrs)`` hop by hop and relabel into blocks."""
    blocks: list[Block] = []
    dst = seeds
    for hop in range(num_hops):
        counts, nbrs = hop_fn(dst, hop)
        src_ids, nbr_local = relabel(dst, nbrs)
        dst_local = torch.repeat_interleave(torch.arange(dst.numel(), device=dst.device), counts, output_size=nbrs.numel())
        blocks.append(Block(src_ids, dst, torch.stack([nbr_local, dst_local])))
        dst = src_ids
    blocks.reverse()
    return MiniBatch(seeds=seeds, blocks=blocks, stats={"sampled_edges": sum(b.num_edges for b in blocks)})
