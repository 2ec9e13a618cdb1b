"""R-GCN on ogbn-mag (a typed graph) with gnnscale, set up like OGB's and DGL's sampled R-GCN examples.

Loads ogbn-mag (read by the `ogb` package from --root) as a typed graph: node types author,
field_of_study, institution, paper; relations writes, cites, has_topic, affiliated_with and
their reverses rev_* (docs/typed_graphs.md). Partitions it with METIS into one typed part per
worker (cached), trains a 2-layer R-GCN data parallel on per-relation sampled neighbourhoods
(each relation draws its own fan-out, as DGL's heterograph samplers do), and prints the test
accuracy of the paper nodes from OGB's Evaluator and the seconds per epoch. Papers have 128-d
features; authors, institutions and fields of study have none and get a learned embedding of
--hidden floats per node (automatic: sharded by owner, trained by a sparse Adam at --lr).

One machine:      python examples/ogbn_mag.py --root data/ogb --workers 4
Several machines: partition once, give every machine meta.json and the part{r}/ folders of the
ranks it runs (machine k runs ranks 2k and 2k+1 with the static rendezvous below; the elastic
c10d rendezvous would ignore --node-rank and order machines by host name), then on each:
    gnnscale partition --dataset ogbn-mag --root data/ogb --parts 4 --out parts/mag4
    torchrun --nnodes 2 --nproc-per-node 2 --node-rank K --master-addr HOST0 --master-port 29500 \\
        examples/ogbn_mag.py --parts-dir parts/mag4

Expected (published anchors for sampled R-GCN on ogbn-mag, test accuracy of the paper nodes):
- about 0.47: PaddlePaddle PGL's R-GCN example with a GraphSAINT sampler
  (PGL ogb_examples/nodeproppred/ogbn-mag/README.md): 0.4727 ± 0.0031 over 8 runs, 40 epochs;
- 42.3%: DistDGL's R-GCN (DGL 0.5.0 release notes: "achieves 42.32% accuracy", 841 s per epoch
  on a cluster of 4 m5n.24xlarge CPU machines). The command in the current README of DGL's
  examples/pytorch/rgcn/experimental uses fan-outs 25,25, batch 1024, hidden 64, lr 0.01,
  dropout 0.5, 2 bases, layer norm, 3 epochs (sparse embedding lr 0.06).
The defaults below are those of OGB's own sampled R-GCN (examples/nodeproppred/mag/sampler.py):
2 layers, hidden 64, fan-outs 25,20, batch 1024, dropout 0.5, lr 0.01, 3 epochs, a full weight
per relation. Differences: OGB's sampler draws 25/20 among all of a node's in-edges (one
homogeneous draw) and makes cites undirected in one relation, while here each relation draws
its own fan-out and rev_cites is a relation of its own; OGB evaluates full-batch, here the
evaluation is sampled with --eval-fanouts (default: --fanouts; -1,-1 is exact but takes whole
fields of study's papers into each batch).
Measured here: only the tiny offline fixture runs; ogbn-mag itself cannot be downloaded in this
environment, so the figures above are not reproduced. tests/test_examples.py runs this script on
write_tiny_ogb_mag (tests/ogb_fixture.py: 3,000 synthetic nodes with planted classes, 5 classes,
16-d paper features, in ogbn-mag's raw layout) with --workers 2 --epochs 2 --fanouts 10,10
--relation-fanouts '{"cites": [5, 5]}' --batch-size 256 --hidden 32: loss 1.97 then 1.03, test
0.9123 on its 57 test papers (OGB's Evaluator), 0.67 s per epoch on a shared 2-core CPU machine.
That shows the path works (ogb, typed METIS parts, R-GCN, learned embeddings, the Evaluator),
not the accuracy on ogbn-mag: the fixture's classes are far easier than ogbn-mag's 349.
Memory (an estimate from the dataset's size, not a measurement): 736,389 papers x 128 features
x 4 B = 377 MB of features; 1,203,354 featureless nodes x 64 x 4 B = 308 MB of embeddings, three
times that with their Adam moments (0.92 GB); 21.1 M edges, 42.2 M with the reverses, x 8 B =
0.34 GB of CSR plus 2 B per edge of relation ids; all split over the workers.
"""
import argparse
import json
import logging
import os

import gnnscale
from gnnscale.partitioning import load_meta


def ints(text):
    return [int(v) for v in text.split(",")]


def relation_fanouts(text):
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default="data/ogb", help="OGB root folder (the dataset is ROOT/ogbn_mag/)")
    ap.add_argument("--parts-dir", help="an existing partition (gnnscale partition); required under torchrun")
    ap.add_argument("--workers", type=int, help="local worker processes, one per part (default 2)")
    ap.add_argument("--cache-dir", help="partition cache (default $GNNSCALE_CACHE or ~/.cache/gnnscale)")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fanouts", type=ints, default=[25, 20],
                    help="one per layer, drawn for every relation separately; -1 = all neighbours")
    ap.add_argument("--relation-fanouts", type=relation_fanouts, default={}, metavar="JSON",
                    help="training fan-outs of named relations, e.g. '{\"cites\": [10, 10]}'; the others take "
                         "--fanouts (relations: writes, cites, has_topic, affiliated_with and rev_<each>)")
    ap.add_argument("--eval-fanouts", type=ints, help="fan-outs of the sampled evaluation (default: --fanouts)")
    ap.add_argument("--hidden", type=int, default=64, help="hidden size, also the learned embeddings' width")
    ap.add_argument("--num-bases", type=int, help="R-GCN basis decomposition (default: a full weight per relation)")
    ap.add_argument("--dropout", type=float, default=0.5)
    ap.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (the model and the embeddings)")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--batch-size", type=int, default=1024, help="seed papers per step, all workers together")
    ap.add_argument("--eval-batch-size", type=int, default=1024, help="seed papers per evaluation step per worker")
    ap.add_argument("--metrics", help="write the per-epoch metrics as JSON to this file")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")

    world = int(os.environ.get("WORLD_SIZE", 0)) or args.workers or (
        load_meta(args.parts_dir)["num_parts"] if args.parts_dir else 2)
    config = dict(epochs=args.epochs, seed=args.seed, layer="rgcn",
                  layer_kwargs={"num_bases": args.num_bases} if args.num_bases else {},
                  fanouts=args.fanouts, relation_fanouts=args.relation_fanouts,
                  eval_fanouts=args.eval_fanouts or args.fanouts, eval_method="sampled",
                  eval_batch_size=args.eval_batch_size, hidden=args.hidden, dropout=args.dropout, lr=args.lr,
                  weight_decay=args.weight_decay, batch_size=-(-args.batch_size // world), metrics=args.metrics)
    if args.parts_dir:
        result = gnnscale.train(parts_dir=args.parts_dir, workers=args.workers, **config)
    else:  # METIS into a part per worker, cached
        result = gnnscale.train("ogbn-mag", root=args.root, workers=world, cache_dir=args.cache_dir, **config)
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"test accuracy (OGB Evaluator): {result['test_acc']:.4f} (last epoch); "
              f"{result['test_acc_at_best_val']:.4f} at the best validation epoch {result['best_epoch']}")
        print(f"epoch seconds: {result['epoch_seconds']:.3f}")


if __name__ == "__main__":  # required: the workers are spawned processes that import this file
    gnnscale.errors.run_main(main, __file__)
