"""Models that run on sampled blocks (layer i consumes ``blocks[i]``)."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import SAGEConv

from gnnscale.samplers.block import Block


class GraphSAGE(nn.Module):
    """GraphSAGE (mean aggregation) from ``torch_geometric.nn.SAGEConv``.

    Args:
        in_dim: input feature size F. hidden: hidden size. out_dim: number of classes.
        num_layers: number of SAGEConv layers (= number of blocks per batch).
        dropout: dropout on hidden activations.

    ``forward(x, blocks)``: x float32 [blocks[0].num_src, F] -> logits [blocks[-1].num_dst, C].
    """

    def __init__(self, in_dim: int, hidden: int, out_dim: int, num_layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [out_dim]
        self.convs = nn.ModuleList(SAGEConv(dims[i], dims[i + 1]) for i in range(num_layers))
        self.dropout = dropout

    def forward(self, x: torch.Tensor, blocks: Sequence[Block]) -> torch.Tensor:
        if len(blocks) != len(self.convs):
            raise ValueError(f"model has {len(self.convs)} layers but the batch has {len(blocks)} blocks")
        last = len(self.convs) - 1
        for i, (conv, block) in enumerate(zip(self.convs, blocks)):
            x = conv((x, x[: block.num_dst]), block.edge_index, size=block.size)
            if i < last:
                x = F.relu(x)
                if self.dropout > 0:
                    x = F.dropout(x, p=self.dropout, training=self.training)
        return x
