"""GraphSAGE on ogbn-papers100M with gnnscale, after the OGB leaderboard's GraphSAGE-based entry.

Partitions ogbn-papers100M (read by the `ogb` package from --root; cached) into one part per
worker, trains a 3-layer GraphSAGE (hidden 1024, BatchNorm, residual, jumping-knowledge concat)
on sampled neighbourhoods, evaluates on sampled neighbourhoods too (layer-wise inference would
hold 111 M x 1024 x 4 B = 455 GB per hidden layer), and prints the test accuracy from OGB's
Evaluator and the seconds per epoch.

One machine:      python examples/ogbn_papers100M.py --root data/ogb --workers 4
Several machines: partition once, give every machine meta.json and the part{r}/ folders of the
ranks it runs (machine k runs ranks 2k and 2k+1 with the static rendezvous below; the elastic
c10d rendezvous would ignore --node-rank and order machines by host name), then on each:
    gnnscale partition --dataset ogbn-papers100M --root data/ogb --parts 4 --out parts/papers4
    torchrun --nnodes 2 --nproc-per-node 2 --node-rank K --master-addr HOST0 --master-port 29500 \\
        examples/ogbn_papers100M.py --parts-dir parts/papers4

Expected (OGB leaderboard, ogb.stanford.edu/docs/leader_nodeprop, ogbn-papers100M): it has no
plain GraphSAGE entry; its GraphSAGE entry is "GraphSAGE_res_incep" (Mengyang Niu, Feb 2021):
test 0.6706 ± 0.0017, validation 0.7032 ± 0.0011, 5,755,172 parameters, one Tesla V100 (16 GB).
Its model (3 layers, hidden 1024) also has a projected residual on layer 1, the input features
in the concat and a 2-layer head, which this script does not. Its fanouts, batch size, lr,
dropout and epochs are unconfirmed; the defaults below are those of PyG's
examples/kuzu/papers_100M/train.py, whose model is based on that entry's (fanouts 12,12,12,
batch 1024, lr 0.01, weight decay 5e-4, dropout 0.2); 10 epochs is our choice. Not reproduced
here: the datasets cannot be downloaded in this environment.
Memory (an estimate from the dataset's size, not a measurement): 111,059,956 nodes x 128
features x 4 B = 57 GB, 1,615,685,872 edges stored both ways x 8 B = 26 GB of CSR: ~83 GB of
parts, split over the workers. Loading and partitioning on one machine holds all of it plus
the edge lists (26 GB raw, 52 GB symmetrized): plan for well over 150 GB of RAM there.
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
    ap.add_argument("--root", default="data/ogb", help="OGB root folder (the dataset is ROOT/ogbn_papers100M/)")
    ap.add_argument("--parts-dir", help="an existing partition (gnnscale partition); required under torchrun")
    ap.add_argument("--workers", type=int, help="local worker processes, one per part (default 2)")
    ap.add_argument("--cache-dir", help="partition cache (default $GNNSCALE_CACHE or ~/.cache/gnnscale)")
    ap.add_argument("--method", default="metis", help="partitioning method (hash or range skip METIS and its memory)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fanouts", type=ints, default=[12, 12, 12], help="one per layer, -1 = all neighbours")
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--batch-size", type=int, default=1024, help="seed nodes per step, all workers together")
    ap.add_argument("--metrics", help="write the per-epoch metrics as JSON to this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    world = int(os.environ.get("WORLD_SIZE", 0)) or args.workers or (
        load_meta(args.parts_dir)["num_parts"] if args.parts_dir else 2)
    config = dict(epochs=args.epochs, seed=args.seed, fanouts=args.fanouts, hidden=args.hidden, dropout=args.dropout,
                  lr=args.lr, weight_decay=args.weight_decay, batch_size=-(-args.batch_size // world),
                  norm="batch", residual=True, jk="cat", eval_method="sampled", metrics=args.metrics)
    if args.parts_dir:
        result = gnnscale.train(parts_dir=args.parts_dir, workers=args.workers, **config)
    else:
        result = gnnscale.train("ogbn-papers100M", root=args.root, workers=args.workers, cache_dir=args.cache_dir,
                                method=args.method, **config)
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"test accuracy (OGB Evaluator): {result['test_acc']:.4f} (last epoch); "
              f"{result['test_acc_at_best_val']:.4f} at the best validation epoch {result['best_epoch']}")
        print(f"epoch seconds: {result['epoch_seconds']:.3f}")


if __name__ == "__main__":  # required: the workers are spawned processes that import this file
    gnnscale.errors.run_main(main, __file__)
