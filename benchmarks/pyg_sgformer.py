"""SGFormer on Cora: is the model or the batches at fault? (issue 56, "What must be shown")

PyG's ``examples/ogbn_train.py`` trains SGFormer (its default model) on ``NeighborLoader(...,
disjoint=True)`` batches; on Cora it reached 0.662 where its GraphSAGE option reached 0.811 on the
same loader (examples/pyg_upstream/README.md). This trains the same model, with the example's
settings (hidden 256, 3 GNN layers, 1 head, dropout 0.5, Adam lr 0.003, no weight decay,
ReduceLROnPlateau on validation accuracy, 50 epochs, ``to_undirected(reduce='mean')``), on Cora's
shipped split in one process, in three ways:

- ``full``: the whole graph as one batch (every node, every edge; ``batch`` all zeros: one graph,
  the attention over all 2,708 nodes); loss on the training nodes, accuracy on the whole graph;
- ``disjoint``: the example's batches (gnnscale.pyg ``NeighborLoader``, fan-out 10 per hop, 3 hops,
  batch 1024, shuffled, ``disjoint=True``: each seed its own tree and its own attention graph);
  evaluated as the example does (disjoint batches of the validation and test nodes), and also
  on the whole graph (``disjoint_model_full_eval``);
- ``shared``: the same neighbour batches without ``disjoint`` (one subgraph per batch, ``batch``
  all zeros): the sampling without the per-seed trees.

Cora's 140 training nodes are one batch of 1024: every way takes one optimizer step per epoch.
Each figure is the final epoch's test accuracy (as the example prints it), over ``--seeds``
(``seed_everything(seed)`` before each run); the medians and each run go to ``--json``.

    nice python benchmarks/pyg_sgformer.py --json results/pyg_sgformer.json
    python benchmarks/pyg_sgformer.py --smoke      # full and disjoint, 2 epochs, seed 0, fan-out 3
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import SHARED, write_json  # noqa: E402


def cora():
    from torch_geometric.utils import to_undirected

    from gnnscale.datasets import load_dataset

    data = load_dataset("planetoid:cora", root=str(SHARED / "planetoid"))
    data.edge_index = to_undirected(data.edge_index, reduce="mean")  # the example's default
    return data


def model_of(data, name: str):
    from torch_geometric.nn.models import GraphSAGE, SGFormer

    if name == "sage":
        return GraphSAGE(in_channels=data.num_features, hidden_channels=256, num_layers=3,
                         out_channels=int(data.num_classes), dropout=0.5)
    return SGFormer(in_channels=data.num_features, hidden_channels=256, out_channels=int(data.num_classes),
                    trans_num_heads=1, trans_dropout=0.5, gnn_num_layers=3, gnn_dropout=0.5)


def forward(model, name: str, x, edge_index, batch):
    return model(x, edge_index) if name == "sage" else model(x, edge_index, batch)


def full_accuracy(model, name: str, data, mask) -> float:
    import torch

    model.eval()
    with torch.no_grad():
        out = forward(model, name, data.x, data.edge_index, torch.zeros(data.num_nodes, dtype=torch.long))
    return float((out[mask].argmax(-1) == data.y[mask]).float().mean())


def loader_accuracy(model, name: str, loader, disjoint: bool) -> float:
    import torch

    model.eval()
    right = total = 0
    with torch.no_grad():
        for b in loader:
            batch = b.batch if disjoint else torch.zeros(b.num_nodes, dtype=torch.long)
            out = forward(model, name, b.x, b.edge_index, batch)[:b.batch_size]
            right += int((out.argmax(-1) == b.y[:b.batch_size]).sum())
            total += b.batch_size
    return right / total


def run(data, way: str, name: str, seed: int, epochs: int, fanout: int = 10) -> dict:
    """One training run; the final test accuracy (and the whole-graph one for ``disjoint``)."""
    import torch
    import torch.nn.functional as F
    from torch_geometric import seed_everything

    from gnnscale.pyg import NeighborLoader

    seed_everything(seed)
    model = model_of(data, name)
    model.reset_parameters()
    opt = torch.optim.Adam(model.parameters(), lr=0.003, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", patience=5)
    disjoint = way == "disjoint"

    def loader(mask):
        return NeighborLoader(data, input_nodes=mask.nonzero().view(-1), num_neighbors=[fanout] * 3, batch_size=1024,
                              shuffle=True, disjoint=disjoint)

    train, val, test = (loader(data[f"{m}_mask"]) for m in ("train", "val", "test"))
    zeros = torch.zeros(data.num_nodes, dtype=torch.long)
    best_val, times = 0.0, []
    for _ in range(epochs):
        t0 = time.perf_counter()
        model.train()
        if way == "full":
            opt.zero_grad()
            out = forward(model, name, data.x, data.edge_index, zeros)
            F.cross_entropy(out[data.train_mask], data.y[data.train_mask]).backward()
            opt.step()
            val_acc = full_accuracy(model, name, data, data.val_mask)
        else:
            for b in train:
                opt.zero_grad()
                batch = b.batch if disjoint else torch.zeros(b.num_nodes, dtype=torch.long)
                out = forward(model, name, b.x, b.edge_index, batch)[:b.batch_size]
                F.cross_entropy(out, b.y[:b.batch_size]).backward()
                opt.step()
            val_acc = loader_accuracy(model, name, val, disjoint)
        times.append(time.perf_counter() - t0)
        best_val = max(best_val, val_acc)
        sched.step(val_acc)
    res = {"way": way, "model": name, "seed": seed, "best_val": round(best_val, 4),
           "s_per_epoch": round(statistics.median(times), 3)}
    if way == "full":
        res["test"] = round(full_accuracy(model, name, data, data.test_mask), 4)
    else:
        res["test"] = round(loader_accuracy(model, name, test, disjoint), 4)
        res["full_eval_test"] = round(full_accuracy(model, name, data, data.test_mask), 4)
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ways", default="full,disjoint,shared", help="full, disjoint, shared (comma-separated)")
    ap.add_argument("--models", default="sgformer", help="sgformer and/or sage (the example's GraphSAGE option)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--epochs", type=int, default=50)
    ap.add_argument("--json", default=None)
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    ap.add_argument("--fanout", type=int, default=10, help="neighbours per hop of the loaders (the example's 10)")
    ap.add_argument("--smoke", action="store_true", help="full and disjoint, 2 epochs, seed 0, fan-out 3")
    args = ap.parse_args()
    if args.smoke:  # fan-out 3: a disjoint seed's tree of 40 nodes instead of about 1,100 (the same code)
        args.epochs, args.seeds, args.ways, args.fanout = 2, "0", "full,disjoint", 3
    import torch

    torch.set_num_threads(args.threads)
    data = cora()
    runs = []
    for name in args.models.split(","):
        for way in args.ways.split(","):
            for seed in [int(s) for s in args.seeds.split(",")]:
                runs.append(run(data, way, name, seed, args.epochs, args.fanout))
                print(runs[-1], flush=True)
    summary = {}
    print(f"\n{'model':9} {'way':9} {'test (median)':>14} {'tests':>22} {'whole-graph eval':>18} {'s/epoch':>8}")
    for name in args.models.split(","):
        for way in args.ways.split(","):
            rs = [r for r in runs if r["model"] == name and r["way"] == way]
            row = {"test_median": statistics.median(r["test"] for r in rs), "tests": [r["test"] for r in rs],
                   "s_per_epoch": statistics.median(r["s_per_epoch"] for r in rs)}
            if way != "full":
                row["full_eval_test_median"] = statistics.median(r["full_eval_test"] for r in rs)
            summary[f"{name}/{way}"] = row
            print(f"{name:9} {way:9} {row['test_median']:14.4f} {str(row['tests']):>22} "
                  f"{row.get('full_eval_test_median', float('nan')):18.4f} {row['s_per_epoch']:8.3f}")
    write_json(args.json, {"epochs": args.epochs, "seeds": args.seeds, "fanout": args.fanout, "runs": runs,
                           "summary": summary})


if __name__ == "__main__":
    main()
