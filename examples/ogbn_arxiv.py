"""GraphSAGE on ogbn-arxiv with gnnscale, set up like the OGB leaderboard's GraphSAGE entry.

Partitions ogbn-arxiv (read by the `ogb` package from --root; cached) with METIS into one part
per worker, trains a 3-layer GraphSAGE (BatchNorm, full neighbourhoods, one full batch per
epoch) and prints the test accuracy from OGB's Evaluator and the seconds per epoch.

One machine:      python examples/ogbn_arxiv.py --root data/ogb --workers 4
Several machines: partition once, give every machine meta.json and the part{r}/ folders of the
ranks it runs (machine k runs ranks 2k and 2k+1 with the static rendezvous below; the elastic
c10d rendezvous would ignore --node-rank and order machines by host name), then on each:
    gnnscale partition --dataset ogbn-arxiv --root data/ogb --parts 4 --out parts/arxiv4
    torchrun --nnodes 2 --nproc-per-node 2 --node-rank K --master-addr HOST0 --master-port 29500 \\
        examples/ogbn_arxiv.py --parts-dir parts/arxiv4

Expected (OGB leaderboard, ogb.stanford.edu/docs/leader_nodeprop, ogbn-arxiv, GraphSAGE entry
by the OGB team, May 2020): test 0.7149 ± 0.0027, validation 0.7277 ± 0.0016 (10 runs), 218,664
parameters, on a GeForce RTX 2080 (11 GB GPU). Its code (OGB's examples/nodeproppred/arxiv,
--use_sage) trains full-batch: 3 layers, hidden 256, BatchNorm, dropout 0.5, lr 0.01, 500
epochs -- the defaults below. Not reproduced here: the datasets cannot be downloaded in this
environment.
Memory (an estimate from the dataset's size, not a measurement): 169,343 nodes x 128 features
x 4 B = 87 MB of features, ~2.3 M directed edges x 8 B = 19 MB of CSR, 173 MB per hidden
layer in layer-wise evaluation, all split over the workers: about 1 GB per process, most of
it Python and torch themselves.
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
    ap.add_argument("--root", default="data/ogb", help="OGB root folder (the dataset is ROOT/ogbn_arxiv/)")
    ap.add_argument("--parts-dir", help="an existing partition (gnnscale partition); required under torchrun")
    ap.add_argument("--workers", type=int, help="local worker processes, one per part (default 2)")
    ap.add_argument("--cache-dir", help="partition cache (default $GNNSCALE_CACHE or ~/.cache/gnnscale)")
    ap.add_argument("--epochs", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fanouts", type=ints, default=[-1, -1, -1], help="one per layer, -1 = all neighbours")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--batch-size", type=int, default=0, help="seed nodes per step, all workers together (0 = full batch)")
    ap.add_argument("--metrics", help="write the per-epoch metrics as JSON to this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    world = int(os.environ.get("WORLD_SIZE", 0)) or args.workers or (
        load_meta(args.parts_dir)["num_parts"] if args.parts_dir else 2)
    per_worker = -(-args.batch_size // world) if args.batch_size else 2**31  # 2**31 > any worker's train nodes
    config = dict(epochs=args.epochs, seed=args.seed, fanouts=args.fanouts, eval_fanouts=[-1] * len(args.fanouts),
                  hidden=args.hidden, dropout=args.dropout, lr=args.lr, batch_size=per_worker, norm="batch",
                  metrics=args.metrics)
    if args.parts_dir:
        result = gnnscale.train(parts_dir=args.parts_dir, workers=args.workers, **config)
    else:
        result = gnnscale.train("ogbn-arxiv", root=args.root, workers=args.workers, cache_dir=args.cache_dir, **config)
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"test accuracy (OGB Evaluator): {result['test_acc']:.4f} (last epoch); "
              f"{result['test_acc_at_best_val']:.4f} at the best validation epoch {result['best_epoch']}")
        print(f"epoch seconds: {result['epoch_seconds']:.3f}")


if __name__ == "__main__":  # required: the workers are spawned processes that import this file
    gnnscale.errors.run_main(main, __file__)
