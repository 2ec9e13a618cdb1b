"""A plain PyG loop with ``to_hetero(GraphSAGE)`` on ACM (papers, authors, subjects), on gnnscale's sampler.

PyG's own ``to_hetero`` model, PyG's ``HeteroData`` batches, your loop; one process or several:

    python examples/pyg_loop_typed.py                               # one process
    torchrun --nproc-per-node 2 examples/pyg_loop_typed.py          # 2 processes (gloo), DDP
    python examples/pyg_loop_typed.py --root DIR --epochs 20
    torchrun --nproc-per-node 2 examples/pyg_loop_typed.py --parts /tmp/acm-parts   # over a typed folder

ACM (the HAN/GTN benchmark's paper classification, 3 classes; ``?split=20``: 20 training papers
per class) is a ``HeteroData``. Without ``--parts`` every process holds it in memory; with
``--parts DIR`` rank 0 cuts it into one typed part per process there (once: the folder is reused
while it holds this graph in that many parts) and every process reads the batches' rows through
the typed folder stores (``gnnscale.pyg.TypedPartitionFeatureStore``: its own part, the other
parts' files on this host, else their owners). ``gnnscale.pyg.start_run`` joins
torchrun's group, ``run.node_loader`` gives this process its share of the batches one process
would make (a step's N batches draw what one process's batch draws; the same batches in memory
or over the folder) and ``run.ddp`` wraps the model.
The model is the one ``gnnscale train --layer rel:sage`` builds (so the two give the same
accuracy): each node type's input mapped to the hidden size first (a ``Linear`` of its features;
subjects have none, so a learned row per subject, drawn uniform in +-1/sqrt(hidden) as the
engine's tables), dropout, then ``to_hetero(GraphSAGE)``: one ``SAGEConv`` per relation, summed per
destination type. On ACM's 60 training papers each part counts: ``to_hetero`` on the raw 1,902
features (every relation its own 1,902-wide weights, no dropout on the input) with N(0, 1) subject
rows was 4 points under the engine (seeds 0-6); N(0, 1) rows alone (``nn.Embedding``'s default, std 1
against the engine's 0.07) cost 5 points over 30 seeds (benchmarks/pyg_accuracy.py, docs/benchmarks.md).
Prints the test accuracy over every process's test papers.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.nn import to_hetero
from torch_geometric.nn.models import GraphSAGE

from gnnscale.datasets import load_dataset
from gnnscale.datasets.hetero_data import to_hetero_data
from gnnscale.errors import GnnscaleError, run_main
from gnnscale.pyg import start_run

ROOT = Path(os.environ.get("GNNSCALE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


class Net(torch.nn.Module):
    """Per node type a Linear of its features (or, without features, a learned row per node) to
    ``hidden``, dropout, then to_hetero(GraphSAGE) (relations summed per destination type)."""

    def __init__(self, data, hidden: int = 64, classes: int = 3, dropout: float = 0.5) -> None:
        super().__init__()
        self.encode = torch.nn.ModuleDict({
            t: torch.nn.Linear(data[t].num_features, hidden) if "x" in data[t]
            else torch.nn.Embedding(data[t].num_nodes, hidden) for t in data.node_types})
        self.dropout = dropout
        gnn = GraphSAGE(hidden, hidden_channels=hidden, num_layers=2, out_channels=classes, dropout=dropout)
        self.gnn = to_hetero(gnn, data.metadata(), aggr="sum")
        for m in self.encode.values():  # learned rows start small, as the Linear outputs (not nn.Embedding's N(0, 1))
            if isinstance(m, torch.nn.Embedding):
                torch.nn.init.uniform_(m.weight, -hidden ** -0.5, hidden ** -0.5)

    def forward(self, batch) -> dict:
        x = {t: self.encode[t](batch[t].x if "x" in batch[t] else batch[t].n_id) for t in batch.node_types}
        x = {t: F.dropout(h, self.dropout, self.training) for t, h in x.items()}
        return self.gnn(x, batch.edge_index_dict)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(ROOT / "acm"), help="ACM's folder")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--parts", default=None, help="typed partition folder (rank 0 partitions ACM there; default: "
                    "every process holds the HeteroData in memory)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds any wait on another process may take")
    args = ap.parse_args()
    if args.epochs < 1:
        raise GnnscaleError(f"--epochs must be an integer of at least 1, found {args.epochs}")

    torch.manual_seed(args.seed)
    data = to_hetero_data(load_dataset(f"acm:{args.root}?split=20"))
    run = start_run(data, parts_dir=args.parts, timeout=args.timeout)
    fanouts = {et: [10, 10] for et in data.edge_types}
    # a step trains one batch per process: 16 // N each keeps a step's seeds those of one process's batch of 16
    loader = run.node_loader(fanouts, input_nodes="train", batch_size=16 // run.world_size, shuffle=True,
                             seed=args.seed)
    model = run.ddp(Net(data, classes=int(data.num_classes)))
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)

    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for k, batch in enumerate(loader):
            opt.zero_grad()
            b = batch["paper"].batch_size
            out = model(batch)["paper"][:b]
            loss = F.cross_entropy(out, batch["paper"].y[:b])
            (loss * loader.batch_sampler.loss_scale(k)).backward()  # the short last step as one process's
            opt.step()
            total += float(loss.detach()) * b
        if (epoch + 1) % 5 == 0 and run.rank == 0:
            print(f"epoch {epoch + 1}: loss {total / int(data['paper'].train_mask.sum()) * run.world_size:.4f}")

    acc = run.accuracy(model, run.node_loader({et: [-1, -1] for et in data.edge_types}, input_nodes="test",
                                              batch_size=256), node_type="paper",
                       forward=lambda batch: model(batch)["paper"])
    if run.rank == 0:
        print(f"test accuracy: {acc:.4f}")
    run.close()


if __name__ == "__main__":
    run_main(main, __file__)  # a user's error: its one line, exit status 2
