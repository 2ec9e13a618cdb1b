"""Link prediction in a plain PyG loop on gnnscale's sampler: LinkNeighborLoader on Cora.

PyG's RandomLinkSplit, PyG's GraphSAGE as the encoder, a dot-product decoder, binary
cross-entropy on each batch's positives and its sampled negatives (``neg_sampling_ratio=1``:
one uniform negative per positive, never an edge of the training graph). Prints the test AUC.

    python examples/pyg_loop_link.py
    python examples/pyg_loop_link.py --root DIR --epochs 10
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn.models import GraphSAGE

from gnnscale.datasets import load_dataset
from gnnscale.errors import GnnscaleError, run_main
from gnnscale.pyg import LinkNeighborLoader

ROOT = Path(os.environ.get("GNNSCALE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def auc(score: torch.Tensor, label: torch.Tensor) -> float:
    """ROC AUC of float [n] scores against 0/1 labels (the rank statistic; ties counted half)."""
    order = torch.argsort(score)
    ranks = torch.empty_like(score)
    ranks[order] = torch.arange(1, score.numel() + 1, dtype=score.dtype)
    _, inv, counts = torch.unique(score, return_inverse=True, return_counts=True)
    mean_rank = torch.zeros(counts.numel(), dtype=score.dtype).index_add_(0, inv, ranks) / counts
    ranks = mean_rank[inv]
    pos = label == 1
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(ROOT / "planetoid"), help="folder holding Cora's raw files")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.epochs < 1:
        raise GnnscaleError(f"--epochs must be an integer of at least 1, found {args.epochs}")

    torch.manual_seed(args.seed)
    data = load_dataset("planetoid:cora", root=args.root)
    data = data.__class__(x=data.x, edge_index=data.edge_index, num_nodes=data.num_nodes)
    train, val, test = T.RandomLinkSplit(num_val=0.05, num_test=0.1, is_undirected=True,
                                         add_negative_train_samples=False)(data)
    loader = LinkNeighborLoader(train, num_neighbors=[10, 10], edge_label_index=train.edge_label_index,
                                edge_label=train.edge_label, neg_sampling_ratio=1.0, batch_size=256, shuffle=True,
                                seed=args.seed)
    model = GraphSAGE(data.num_features, hidden_channels=64, num_layers=2, out_channels=64)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    for epoch in range(args.epochs):
        model.train()
        total = n = 0
        for batch in loader:
            opt.zero_grad()
            h = model(batch.x, batch.edge_index)
            src, dst = batch.edge_label_index
            loss = F.binary_cross_entropy_with_logits((h[src] * h[dst]).sum(-1), batch.edge_label)
            loss.backward()
            opt.step()
            total, n = total + float(loss.detach()) * src.numel(), n + src.numel()
        print(f"epoch {epoch + 1}: loss {total / n:.4f}")

    model.eval()
    with torch.no_grad():  # Cora fits: embed with the message-passing edges the test split allows
        h = model(test.x, test.edge_index)
        src, dst = test.edge_label_index
        score = (h[src] * h[dst]).sum(-1)
    print(f"test AUC: {auc(score, test.edge_label):.4f}")


if __name__ == "__main__":
    run_main(main, __file__)  # a user's error: its one line, exit status 2
