"""GCNII: initial residual and identity mapping, propagation as a CSR product."""
from __future__ import annotations

import math
from typing import Optional

import torch
from torch import Tensor, nn

from gnnscale.nn.layers.contract import LayerError, construct, split_input
from gnnscale.nn.layers.gcn import gcn_adjacency
from gnnscale.nn.layers.registry import register
from gnnscale.nn.sparse_ops import block_matmul


class BlockGCN2Conv(nn.Module):
    """GCNII layer (Chen et al., 2020) normalized on a bipartite sampled block.

    Same math as ``torch_geometric.nn.GCN2Conv(channels, alpha, theta, layer,
    shared_weights)`` with ``normalize=True``, but the propagation ``P x`` is the block's
    :func:`gcn_adjacency` (a CSR product; :func:`graph_gcn_norm` with ``deg``, else
    :func:`block_gcn_norm`, self loops included)::

        h   = (1 - alpha) * P x_src + alpha * x0
        out = (1 - beta) * h + beta * h @ W1                   (shared_weights=True)
        out = (1 - beta) * ((1 - alpha) P x_src) + beta * ((1 - alpha) P x_src) @ W1
              + (1 - beta) * alpha x0 + beta * (alpha x0) @ W2  (shared_weights=False)

    with ``beta = log(theta / layer + 1)``. Called as ``layer((x_src, x_dst),
    edge_index, x0=x0_dst)`` (``needs_x0 = True``).

    Args:
        channels: feature size (input == output). alpha: initial-residual weight.
        theta: identity-mapping strength. layer: 1-based layer position (for beta).
        shared_weights: one weight for both terms (True) or a separate ``weight2``.
    """

    needs_x0 = True
    needs_degree = True

    def __init__(
        self, channels: int, alpha: float = 0.1, theta: float = 0.5, layer: int = 1, shared_weights: bool = True
    ) -> None:
        super().__init__()
        if layer < 1:
            raise LayerError(f"BlockGCN2Conv: layer is 1-based, found layer={layer}")
        self.channels = channels
        self.alpha = float(alpha)
        self.theta = float(theta)
        self.layer = int(layer)
        self.beta = math.log(theta / layer + 1.0)
        self.weight1 = nn.Parameter(torch.empty(channels, channels))
        self.weight2 = None if shared_weights else nn.Parameter(torch.empty(channels, channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Glorot weights (as ``GCN2Conv``)."""
        nn.init.xavier_uniform_(self.weight1)
        if self.weight2 is not None:
            nn.init.xavier_uniform_(self.weight2)

    def forward(
        self,
        x: Tensor | tuple[Tensor, Tensor],
        edge_index: Tensor,
        x0: Optional[Tensor] = None,
        size: Optional[tuple[int, int]] = None,
        deg: Optional[Tensor] = None,
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)``: float32 [S, channels], [D, channels], or one tensor.
            edge_index: int64 [2, M].
            x0: float32 [D, channels], the initial representation of the destinations
                (a longer tensor is cut to its first D rows, as ``GCN2Conv`` does).
            size: optional ``(S, D)``.
            deg: optional [S] in-degrees of the sources in the whole graph.

        Returns:
            float32 [D, channels].
        """
        if x0 is None:
            raise LayerError(
                "BlockGCN2Conv needs the initial representation: call layer((x_src, x_dst), edge_index, x0=x0_dst)"
            )
        x_src, x_dst = split_input(x, size)
        num_dst = x_dst.size(0)
        if x0.dim() != 2 or x0.size(0) < num_dst or x0.size(1) != self.channels:
            raise LayerError(
                f"BlockGCN2Conv: expected x0 of shape [D={num_dst}, {self.channels}], found {tuple(x0.shape)}"
            )
        h = block_matmul(gcn_adjacency(edge_index, x_src.size(0), num_dst, deg), x_src) * (1.0 - self.alpha)
        h0 = x0[:num_dst] * self.alpha
        if self.weight2 is None:
            h = h + h0
            return torch.addmm(h, h, self.weight1, beta=1.0 - self.beta, alpha=self.beta)
        out = torch.addmm(h, h, self.weight1, beta=1.0 - self.beta, alpha=self.beta)
        return out + torch.addmm(h0, h0, self.weight2, beta=1.0 - self.beta, alpha=self.beta)

    def extra_repr(self) -> str:
        return f"{self.channels}, alpha={self.alpha}, theta={self.theta}, layer={self.layer}, shared_weights={self.weight2 is None}"



@register("gcnii", "GCNII: initial residual + identity mapping (BlockGCN2Conv); needs in_dim == out_dim; alpha=0.1, theta=0.5")
def _gcnii(spec, in_dim, out_dim, *, index, num_layers, **kwargs):
    if in_dim != out_dim:
        raise LayerError(
            f"layer 'gcnii' (layer {index}): in_dim ({in_dim}) must equal out_dim ({out_dim}); a GCNII layer keeps "
            "the feature size, so the GCNII model maps inputs to the hidden size with a linear layer first "
            "(and to the classes with one after)"
        )
    return construct(spec, "BlockGCN2Conv", BlockGCN2Conv, in_dim, layer=index + 1, **kwargs)
