"""A plain PyG training loop (zero_grad, forward, loss, backward, step) on gnnscale's sampler.

PyG's own GraphSAGE, PyG's batches, your loop: only the loader's import changes. PyG's
``torch_geometric.loader.NeighborLoader`` needs pyg-lib or torch-sparse to sample;
``gnnscale.pyg.NeighborLoader`` takes the same arguments and samples with gnnscale's kernels.

    python examples/pyg_loop_node.py                       # Cora from ../shared/data/planetoid
    python examples/pyg_loop_node.py --root DIR --epochs 40

Prints the test accuracy (single process, CPU, well under a minute on Cora).
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.nn.models import GraphSAGE

from gnnscale.datasets import load_dataset
from gnnscale.errors import GnnscaleError, run_main
from gnnscale.pyg import NeighborLoader

ROOT = Path(os.environ.get("GNNSCALE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(ROOT / "planetoid"), help="folder holding Cora's raw files")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.epochs < 1:
        raise GnnscaleError(f"--epochs must be an integer of at least 1, found {args.epochs}")

    torch.manual_seed(args.seed)
    data = load_dataset("planetoid:cora", root=args.root)
    loader = NeighborLoader(data, num_neighbors=[10, 10], input_nodes=data.train_mask, batch_size=32,
                            shuffle=True, seed=args.seed)
    model = GraphSAGE(data.num_features, hidden_channels=64, num_layers=2, out_channels=int(data.num_classes),
                      dropout=0.5)
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for batch in loader:
            opt.zero_grad()
            out = model(batch.x, batch.edge_index, num_sampled_nodes_per_hop=batch.num_sampled_nodes,
                        num_sampled_edges_per_hop=batch.num_sampled_edges)[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
            loss.backward()
            opt.step()
            total += float(loss.detach()) * batch.batch_size
        if (epoch + 1) % 10 == 0:
            print(f"epoch {epoch + 1}: loss {total / int(data.train_mask.sum()):.4f}")

    model.eval()
    with torch.no_grad():  # Cora fits: evaluate on the whole graph
        pred = model(data.x, data.edge_index).argmax(-1)
    acc = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
    print(f"test accuracy: {acc:.4f}")


if __name__ == "__main__":
    run_main(main, __file__)  # a user's error: its one line, exit status 2
