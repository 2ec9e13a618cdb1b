"""GraphSAGE on ogbn-products with gnnscale, set up like the OGB leaderboard's GraphSAGE entry.

Partitions ogbn-products (read by the `ogb` package from --root; cached) with METIS into one
part per worker, trains a 3-layer GraphSAGE on sampled neighbourhoods (15, 10, 5), evaluates
layer-wise on full neighbourhoods, and prints the test accuracy from OGB's Evaluator and the
seconds per epoch.

One machine:      python examples/ogbn_products.py --root data/ogb --workers 4
Several machines: partition once, give every machine meta.json and the part{r}/ folders of the
ranks it runs (machine k runs ranks 2k and 2k+1 with the static rendezvous below; the elastic
c10d rendezvous would ignore --node-rank and order machines by host name), then on each:
    gnnscale partition --dataset ogbn-products --root data/ogb --parts 4 --out parts/products4
    torchrun --nnodes 2 --nproc-per-node 2 --node-rank K --master-addr HOST0 --master-port 29500 \\
        examples/ogbn_products.py --parts-dir parts/products4

Expected (OGB leaderboard, ogb.stanford.edu/docs/leader_nodeprop, ogbn-products, GraphSAGE
entry "NeighborSampling (SAGE aggr)" by the OGB team, June 2020): test 0.7870 ± 0.0036,
validation 0.9170 ± 0.0009 (10 runs), 206,895 parameters, on a GeForce RTX 2080 (11 GB GPU).
PyG's examples/ogbn_products_sage.py, which quotes that figure, uses 3 layers, fanouts 15,10,5,
hidden 256, dropout 0.5, lr 0.003, batch 1024, 20 epochs -- the defaults below. Not reproduced
here: the datasets cannot be downloaded in this environment.
Memory (an estimate from the dataset's size, not a measurement): 2,449,029 nodes x 100
features x 4 B = 0.98 GB of features, 61,859,140 edges stored both ways x 8 B = 0.99 GB of
CSR, 2.5 GB per hidden layer in layer-wise evaluation; all split over the workers. Loading and
partitioning on one machine holds the whole graph plus working copies: plan for 5-10 GB there.
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
    ap.add_argument("--root", default="data/ogb", help="OGB root folder (the dataset is ROOT/ogbn_products/)")
    ap.add_argument("--parts-dir", help="an existing partition (gnnscale partition); required under torchrun")
    ap.add_argument("--workers", type=int, help="local worker processes, one per part (default 2)")
    ap.add_argument("--cache-dir", help="partition cache (default $GNNSCALE_CACHE or ~/.cache/gnnscale)")
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fanouts", type=ints, default=[15, 10, 5], help="one per layer, -1 = all neighbours")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.003)
    ap.add_argument("--batch-size", type=int, default=1024, help="seed nodes per step, all workers together")
    ap.add_argument("--metrics", help="write the per-epoch metrics as JSON to this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    world = int(os.environ.get("WORLD_SIZE", 0)) or args.workers or (
        load_meta(args.parts_dir)["num_parts"] if args.parts_dir else 2)
    config = dict(epochs=args.epochs, seed=args.seed, fanouts=args.fanouts, eval_fanouts=[-1] * len(args.fanouts),
                  hidden=args.hidden, dropout=args.dropout, lr=args.lr, batch_size=-(-args.batch_size // world),
                  metrics=args.metrics)
    if args.parts_dir:
        result = gnnscale.train(parts_dir=args.parts_dir, workers=args.workers, **config)
    else:
        result = gnnscale.train("ogbn-products", root=args.root, workers=args.workers, cache_dir=args.cache_dir,
                                **config)
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"test accuracy (OGB Evaluator): {result['test_acc']:.4f} (last epoch); "
              f"{result['test_acc_at_best_val']:.4f} at the best validation epoch {result['best_epoch']}")
        print(f"epoch seconds: {result['epoch_seconds']:.3f}")


if __name__ == "__main__":  # required: the workers are spawned processes that import this file
    gnnscale.errors.run_main(main, __file__)
