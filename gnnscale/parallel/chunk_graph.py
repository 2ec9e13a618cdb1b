"""The whole graph of a partition folder, its parts as chunks (chunk pipelining's micro-batches).

Chunk c owns the contiguous new ids ``offsets[c] .. offsets[c+1]-1``; its block holds its
nodes' *full* in-neighbourhoods: its own nodes first, then its halo (in-neighbours in other
chunks, sorted).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from gnnscale.samplers.block import Block

_MASKS = ("train", "val", "test")


@dataclass
class ChunkGraph:
    """The whole graph of a partition folder, its parts as chunks.

    Attributes:
        offsets: int64 [C + 1]: chunk c owns new ids ``offsets[c] .. offsets[c+1]-1``.
        blocks: per chunk, its full-neighborhood block: ``src_ids`` = its nodes then its halo
            (sorted), ``num_hist`` = the halo's size (the layers >= 1 read the halo from tables).
        degree: int64 [N] in-degree of every node (GCN normalization).
        x: float32 [N, F] features (None where the stage needs none). y: int64 [N].
        masks: ``train``/``val``/``test`` -> bool [N].
    """

    offsets: torch.Tensor
    blocks: list[Block]
    degree: torch.Tensor
    x: torch.Tensor | None
    y: torch.Tensor
    masks: dict
    feature_dim: int
    num_classes: int
    meta: dict = field(default_factory=dict)
    _full: Block | None = field(default=None, repr=False)

    @property
    def num_nodes(self) -> int:
        return int(self.offsets[-1])

    @property
    def num_chunks(self) -> int:
        return len(self.blocks)

    #: the graph is one "part" starting at id 0 (what a task reads of a part: meta, y, train_mask, offset)
    offset = 0

    @property
    def train_mask(self) -> torch.Tensor:
        """bool [N]: the training nodes (``masks["train"]``)."""
        return self.masks["train"]

    def bounds(self, c: int) -> tuple[int, int]:
        return int(self.offsets[c]), int(self.offsets[c + 1])

    def full_block(self) -> Block:
        """One block of the whole graph (every node a source and a destination)."""
        if self._full is None:
            ids = torch.arange(self.num_nodes, dtype=torch.int64)
            self._full = Block(ids, ids, self._global_edges())
        return self._full

    def _global_edges(self) -> torch.Tensor:
        parts = []
        for b in self.blocks:  # one tensor op per chunk: local numbering -> new global ids
            parts.append(torch.stack([b.src_ids[b.edge_index[0]], b.dst_ids[b.edge_index[1]]]))
        return torch.cat(parts, 1)

    @property
    def halo_sizes(self) -> list[int]:
        return [b.num_hist for b in self.blocks]


def chunk_block(indptr: torch.Tensor, indices: torch.Tensor, lo: int, hi: int) -> Block:
    """The full-neighborhood block of chunk ``[lo, hi)`` from its CSC (``indptr`` int64 [n+1] over
    its nodes, ``indices`` int64 [E] sources in new global ids): its nodes, then its halo."""
    n = hi - lo
    dst = torch.repeat_interleave(torch.arange(n, dtype=torch.int64), indptr[1:] - indptr[:-1])
    inside = (indices >= lo) & (indices < hi)
    halo = torch.unique(indices[~inside])
    src = torch.where(inside, indices - lo, n + torch.searchsorted(halo, indices))
    own = torch.arange(lo, hi, dtype=torch.int64)
    return Block(torch.cat([own, halo]), own, torch.stack([src, dst]), num_hist=int(halo.numel()))


def load_chunk_graph(parts_dir: str, verify: bool = True, features: bool = True) -> ChunkGraph:
    """Every part of ``parts_dir`` as a chunk of one graph (see :class:`ChunkGraph`)."""
    from gnnscale.partitioning import load_meta, load_part

    meta = load_meta(parts_dir)
    blocks, degree, xs, ys = [], [], [], []
    masks = {k: [] for k in _MASKS}
    offsets = None
    for p in range(meta["num_parts"]):  # one load per part
        part = load_part(parts_dir, p, verify=verify)
        offsets = part.book.offsets.to(torch.int64)
        lo, hi = int(offsets[p]), int(offsets[p + 1])
        blocks.append(chunk_block(part.indptr, part.indices, lo, hi))
        degree.append(part.indptr[1:] - part.indptr[:-1])
        if features:
            xs.append(part.features(torch.arange(hi - lo)))
        ys.append(part.y)
        for k in _MASKS:
            masks[k].append(getattr(part, f"{k}_mask"))
    y = torch.cat(ys)
    return ChunkGraph(offsets=offsets, blocks=blocks, degree=torch.cat(degree), x=torch.cat(xs) if features else None,
                      y=y, masks={k: torch.cat(v) for k, v in masks.items()}, feature_dim=int(meta["feature_dim"]),
                      num_classes=int(meta.get("num_classes") or int(y.max()) + 1), meta=meta)
