"""Link prediction in a plain PyG loop on gnnscale's sampler: Cora, one process or several.

PyG's RandomLinkSplit, PyG's GraphSAGE as the encoder, a dot-product decoder, binary
cross-entropy on each batch's positives and its sampled negatives (``neg_sampling_ratio=1``:
one uniform negative per positive, never an edge of the training graph). Prints the test AUC,
Hits@20 and MRR over every process's test pairs (``run.link_metrics``: the engine's bounded-memory
accumulators, OGB's figures).

    python examples/pyg_loop_link.py                                # one process
    torchrun --nproc-per-node 2 examples/pyg_loop_link.py           # 2 processes (gloo), DDP
    python examples/pyg_loop_link.py --root DIR --epochs 10

Every process makes the same split and holds it in memory: ``RandomLinkSplit`` draws its edges
with torch's generator but its validation and test negatives with Python's ``random``
(``torch_geometric.utils.negative_sampling``), so both are seeded; without ``random.seed`` a rerun
with the same ``--seed`` scored other test negatives (AUC 0.8139 / 0.8068 / 0.8063 on one thread,
identical training losses), and each torchrun process held its own.
``gnnscale.pyg.start_run`` joins torchrun's group, ``run.link_loader`` is PyG's LinkLoader
over this process's share of the batches one process would make (a step's N batches draw the
subgraph and negatives of one process's batch), ``run.ddp`` wraps the model and ``run.link_auc`` /
``run.link_metrics`` score every process's test pairs.
"""
from __future__ import annotations

import argparse
import os
import random
from pathlib import Path

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn.models import GraphSAGE

from gnnscale.datasets import load_dataset
from gnnscale.errors import GnnscaleError, run_main
from gnnscale.pyg import start_run

ROOT = Path(os.environ.get("GNNSCALE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(ROOT / "planetoid"), help="folder holding Cora's raw files")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds any wait on another process may take")
    args = ap.parse_args()
    if args.epochs < 1:
        raise GnnscaleError(f"--epochs must be an integer of at least 1, found {args.epochs}")

    torch.manual_seed(args.seed)
    random.seed(args.seed)  # RandomLinkSplit's validation and test negatives (PyG's negative_sampling)
    data = load_dataset("planetoid:cora", root=args.root)
    data = data.__class__(x=data.x, edge_index=data.edge_index, num_nodes=data.num_nodes)
    train, val, test = T.RandomLinkSplit(num_val=0.05, num_test=0.1, is_undirected=True,
                                         add_negative_train_samples=False)(data)
    run = start_run(train, timeout=args.timeout)
    loader = run.link_loader([10, 10], edge_label_index=train.edge_label_index, edge_label=train.edge_label,
                             neg_sampling_ratio=1.0, batch_size=256 // run.world_size, shuffle=True, seed=args.seed)
    model = run.ddp(GraphSAGE(data.num_features, hidden_channels=64, num_layers=2, out_channels=64))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    for epoch in range(args.epochs):
        model.train()
        total = n = 0
        for k, batch in enumerate(loader):
            opt.zero_grad()
            h = model(batch.x, batch.edge_index)
            src, dst = batch.edge_label_index
            loss = F.binary_cross_entropy_with_logits((h[src] * h[dst]).sum(-1), batch.edge_label)
            (loss * loader.batch_sampler.loss_scale(k)).backward()  # the short last step as one process's
            opt.step()
            total, n = total + float(loss.detach()) * src.numel(), n + src.numel()
        if run.rank == 0:
            print(f"epoch {epoch + 1}: loss {total / n:.4f}")

    def score(batch):  # every neighbour: the endpoints' embeddings on the test split's message-passing graph
        h = model(batch.x, batch.edge_index)
        src, dst = batch.edge_label_index
        return (h[src] * h[dst]).sum(-1)

    test_loader = run.link_loader([-1, -1], edge_label_index=test.edge_label_index, edge_label=test.edge_label,
                                  batch_size=512, data=test)
    test_auc = run.link_auc(model, test_loader, score)
    hits = run.link_metrics(model, test_loader, score, "hits@20")["hits@20"]  # OGB's (ogbl-collab's) Hits@K

    def ranked(batch):  # each positive against its own 20 negatives (OGB's ogbl-citation2 MRR)
        h = model(batch.x, batch.edge_index)
        s = h[batch.src_index]
        return (s * h[batch.dst_pos_index]).sum(-1), (s[:, None] * h[batch.dst_neg_index]).sum(-1)

    positives = test.edge_label_index[:, test.edge_label == 1]
    ranked_loader = run.link_loader([-1, -1], edge_label_index=positives, batch_size=512, data=test,
                                    neg_sampling=dict(mode="triplet", amount=20), seed=args.seed)
    mrr = run.link_metrics(model, ranked_loader, ranked, "mrr")["mrr"]
    if run.rank == 0:
        print(f"test AUC: {test_auc:.4f}, hits@20 {hits:.4f}, mrr {mrr:.4f} (20 negatives per positive)")
    run.close()


if __name__ == "__main__":
    run_main(main, __file__)  # a user's error: its one line, exit status 2
