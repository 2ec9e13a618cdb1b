"""GraphSAGE on ogbn-proteins with gnnscale, set up like the OGB leaderboard's GraphSAGE entry.

ogbn-proteins (read by the `ogb` package from --root) has no node features: 8 association
scores per edge and 112 binary labels per protein (multi-label), split by species. As OGB's
baselines do, each protein's features are the mean of its in-edges' 8 scores
(`--edge-to-node mean`, done once before the cut and recorded in the cached partition); the
graph is then cut with METIS into one part per worker, a 3-layer GraphSAGE trains with binary
cross-entropy per label (full neighbourhoods, one full batch per epoch, evaluated every 5
epochs), and the script prints the test ROC-AUC (the mean over the 112 labels, from OGB's
Evaluator: `--metric roc_auc`) at the last epoch and at the epoch of best validation ROC-AUC,
and the seconds per epoch.

One machine:      python examples/ogbn_proteins.py --root data/ogb --workers 4
Several machines: partition once, give every machine meta.json and the part{r}/ folders of the
ranks it runs (machine k runs ranks 2k and 2k+1 with the static rendezvous below; the elastic
c10d rendezvous would ignore --node-rank and order machines by host name), then on each:
    gnnscale partition --dataset ogbn-proteins --root data/ogb --parts 4 --edge-to-node mean --out parts/proteins4
    torchrun --nnodes 2 --nproc-per-node 2 --node-rank K --master-addr HOST0 --master-port 29500 \\
        examples/ogbn_proteins.py --parts-dir parts/proteins4

Expected (OGB leaderboard, ogb.stanford.edu/docs/leader_nodeprop, ogbn-proteins, GraphSAGE entry
by Matthias Fey -- OGB team, May 2020): test ROC-AUC 0.7768 ± 0.0020, validation
0.8334 ± 0.0013 (10 runs), 193,136 parameters, on a GeForce RTX 2080 (11 GB GPU). Its code (OGB's
examples/nodeproppred/proteins/gnn.py, --use_sage) moves the edge features to the nodes by their
mean (`data.x = data.adj_t.mean(dim=1)`) and trains full-batch: 3 layers, hidden 256, no dropout,
lr 0.01, 1000 epochs, evaluation every 5 epochs, the test figure at the best validation one --
the defaults below. Not reproduced here: the datasets cannot be downloaded in this environment
(tests/test_examples.py runs this script on a tiny copy in OGB's layout).
Memory (an estimate from the dataset's size, not a measurement): 132,534 nodes, 39,561,252
directed edges: 317 MB of CSR and 1.27 GB of edge features (8 x float32, kept in the partition),
132,534 x 112 labels; a full batch over full neighbourhoods holds the 3-hop blocks, which cover
most of the graph (~40 M edges per layer, ~1-2 GB of block indices per worker before the split),
all split over the workers; loading and partitioning on one machine holds the whole graph: plan
for 8-10 GB there. Fan-outs (`--fanouts 10,10,10 --batch-size 4096`) train on far less memory.
"""
import argparse
import logging
import os

import gnnscale
from gnnscale.partitioning import load_meta


def ints(text):
    return [int(v) for v in text.split(",")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="data/ogb", help="OGB root folder (the dataset is ROOT/ogbn_proteins/)")
    ap.add_argument("--parts-dir", help="an existing partition (gnnscale partition --edge-to-node mean); required "
                    "under torchrun")
    ap.add_argument("--workers", type=int, help="local worker processes, one per part (default 2)")
    ap.add_argument("--cache-dir", help="partition cache (default $GNNSCALE_CACHE or ~/.cache/gnnscale)")
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument("--eval-every", type=int, default=5, help="evaluate every N epochs (and after the last)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fanouts", type=ints, default=[-1, -1, -1], help="one per layer, -1 = all neighbours")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=0, help="seed nodes per step, all workers together (0 = full batch)")
    ap.add_argument("--metrics", help="write the per-epoch metrics as JSON to this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    world = int(os.environ.get("WORLD_SIZE", 0)) or args.workers or (
        load_meta(args.parts_dir)["num_parts"] if args.parts_dir else 2)
    per_worker = -(-args.batch_size // world) if args.batch_size else 2**31  # 2**31 > any worker's train nodes
    config = dict(epochs=args.epochs, eval_every=args.eval_every, seed=args.seed, fanouts=args.fanouts,
                  eval_fanouts=[-1] * len(args.fanouts), layer="sage", hidden=args.hidden, dropout=args.dropout,
                  lr=args.lr, batch_size=per_worker, metric="roc_auc", metrics=args.metrics)
    if args.parts_dir:
        if load_meta(args.parts_dir).get("edge_to_node") != "mean":
            print(f"note: {args.parts_dir} was not written with --edge-to-node mean (OGB's baselines' node features)")
        result = gnnscale.train(parts_dir=args.parts_dir, workers=args.workers, **config)
    else:
        result = gnnscale.train("ogbn-proteins", root=args.root, workers=args.workers, cache_dir=args.cache_dir,
                                edge_to_node="mean", **config)
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"test ROC-AUC (OGB Evaluator): {result['test_roc_auc']:.4f} (last epoch); "
              f"{result['test_roc_auc_at_best_val']:.4f} at the best validation epoch {result['best_epoch']} "
              f"(validation {result['best_val_roc_auc']:.4f})")
        print(f"epoch seconds: {result['epoch_seconds']:.3f}")


if __name__ == "__main__":  # required: the workers are spawned processes that import this file
    gnnscale.errors.run_main(main, __file__)
