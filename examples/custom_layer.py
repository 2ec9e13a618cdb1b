"""A user-written message-passing layer, trained distributed (2 workers) on Cora.

    python examples/custom_layer.py --root ../shared/data/planetoid/raw

Any layer callable as ``layer((x_src, x_dst), edge_index)`` works; the engine samples,
partitions, fetches features and syncs gradients around it.
"""
import argparse

import torch
from torch_geometric.nn import MessagePassing

import gnnscale


class MaxSAGE(MessagePassing):
    """out[v] = W_self x_v + max over in-neighbors u of W_nbr x_u (a bipartite block layer)."""

    def __init__(self, in_dim: int, out_dim: int) -> None:
        super().__init__(aggr="max")
        self.lin_self = torch.nn.Linear(in_dim, out_dim)
        self.lin_nbr = torch.nn.Linear(in_dim, out_dim, bias=False)

    def forward(self, x: tuple[torch.Tensor, torch.Tensor], edge_index: torch.Tensor) -> torch.Tensor:
        x_src, x_dst = x
        h = self.lin_nbr(x_src)
        return self.lin_self(x_dst) + self.propagate(edge_index, x=(h, h[: x_dst.size(0)]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=None, help="folder with the raw Planetoid files (ind.cora.*)")
    ap.add_argument("--epochs", type=int, default=20)
    args = ap.parse_args()
    result = gnnscale.train("planetoid:cora", root=args.root, workers=2, layer=MaxSAGE, epochs=args.epochs,
                            fanouts=[10, 10], eval_fanouts=[-1, -1], batch_size=32, hidden=64, lr=0.01)
    print(f"test accuracy {result['test_acc']:.3f} (best validation at epoch {result['best_epoch']})")


if __name__ == "__main__":  # needed: workers are spawned processes that import this file
    gnnscale.errors.run_main(main, __file__)
