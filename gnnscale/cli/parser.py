"""The command line's parser: every command and option of ``gnnscale``, with its help and default.

The command line is a contract that scripts and benchmarks rely on; every option is listed
with its default by ``gnnscale <command> --help``. A ``train`` option's flag is its
:class:`~gnnscale.config.TrainConfig` field with dashes (a test checks that every field has one).
"""
from __future__ import annotations

import argparse
import json
import re

from gnnscale import __version__

DEFAULT_DATASET = "synthetic"


class Parser(argparse.ArgumentParser):
    """``gnnscale``'s parser (and its commands'): a bad flag or value is one line that says where the
    help is, not the usage block; exit status 2."""

    def error(self, message: str):  # noqa: D102  (argparse's hook)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``(default: X)`` after an option's help once: not for a required option, not for an unset
    (None) default, not where the help already says its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.required or action.default is None or re.search(r"\bdefault\s*[:)]", text, re.IGNORECASE):
            return text
        return super()._get_help_string(action)


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 10,10; found {text!r}") from None


def _str_list(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


DATASET_NAMES = (
    "planetoid:cora|citeseer|pubmed (raw Planetoid files in --root), npz:PATH[?split=K], dir:PATH, "
    "humloc:PATH (multilabel targets, edge features), "
    "ogbn-arxiv|ogbn-products|ogbn-papers100M|ogbn-proteins|ogbn-* (via the ogb package, --root), "
    "ogbl-collab|ogbl-ppa|ogbl-ddi|ogbl-citation2 (link prediction, via ogb), "
    "synthetic[?num_nodes=N&avg_degree=D&num_classes=C&num_features=F&homophily=H&seed=S]; "
    "typed graphs: acm:PATH, hetero-dir:PATH, synthetic-mag, ogbn-mag; "
    "`gnnscale datasets` describes every name and option"
)


def _add_dataset_args(p: argparse.ArgumentParser, required: bool) -> None:
    p.add_argument(
        "--dataset", required=required, default=None, metavar="NAME",
        help="dataset to load: " + DATASET_NAMES,
    )
    p.add_argument(
        "--root", default=None, metavar="DIR",
        help="folder holding the dataset's files (Planetoid raw files, OGB root, ...); "
        "default: $GNNSCALE_DATA or ./data",
    )


def _key_value(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE such as slack=0.1; found {text!r}")
    key, value = text.split("=", 1)
    for conv in (int, float):
        try:
            return key.strip(), conv(value)
        except ValueError:
            pass
    if value.lower() in ("true", "false"):
        return key.strip(), value.lower() == "true"
    return key.strip(), value


def _add_partition_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--method", default="metis",
        help="partitioning method: metis, random, hash, range, ldg, fennel, a registered name, or a plug-in "
        "'module.path:function' returning LongTensor[N] of part ids",
    )
    p.add_argument(
        "--method-opt", type=_key_value, action="append", default=[], metavar="KEY=VALUE",
        help="an option of the method, repeatable (metis: scheme=auto|kway|recursive, edge_weight=true; "
        "ldg/fennel: slack=0.1, passes=2, chunk_size=N; fennel: gamma=1.5)",
    )
    p.add_argument(
        "--balance", type=_str_list, default=["nodes", "train"],
        help="METIS balance constraints, comma-separated among nodes, train, val, test, edges (in-degree)",
    )
    p.add_argument("--imbalance", type=float, default=0.05, help="allowed imbalance per constraint (0.05 = 5%%); "
                   "the default slack of the streaming methods")
    p.add_argument("--edge-split", default=None, metavar="TRAIN,VAL,TEST",
                   help="link prediction: split the graph's edges (pairs, for an undirected graph) at random into "
                   "training, validation and test edges, e.g. 0.85,0.05,0.10 (seeded by --seed); validation and test "
                   "edges and their reverses leave message passing. ogbl-* datasets bring their own split. "
                   "Default with --task link: 0.85,0.05,0.10")
    p.add_argument("--link-relation", default=None, metavar="NAME",
                   help="link prediction on a typed graph: the relation whose edges are split and predicted "
                   "(a relation name, or src,rel,dst); negatives take their ends from its node types")
    p.add_argument("--disjoint-train-ratio", type=float, default=0.0, metavar="R",
                   help="link prediction: hold this fraction of the training edges out of message passing too "
                   "(supervision only, as PyG's RandomLinkSplit), so a model never reads the edge it scores")
    p.add_argument("--edge-to-node", choices=["mean", "sum"], default=None,
                   help="append each node's in-edge features aggregated (mean or sum over the edges into it; zeros "
                   "for a node without any) to its features before partitioning (ogbn-proteins' baselines); the "
                   "partition records it")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gnnscale",
        description="Distributed GNN training: partition a graph, train a GNN across workers, inspect partitions.",
        formatter_class=DefaultsFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gnnscale {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "partition", help="split a dataset into parts on disk",
        description="Load a dataset, partition it (METIS by default) and write one folder per part plus meta.json.",
        formatter_class=DefaultsFormatter,
    )
    _add_dataset_args(p, required=True)
    p.add_argument("--parts", type=int, required=True, help="number of parts (one per worker)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created; must be empty or a previous partition)")
    _add_partition_args(p)
    p.add_argument("--seed", type=int, default=0, help="partitioner seed")

    t = sub.add_parser(
        "train", help="train a GNN on a partitioned graph, one worker per part",
        description=(
            "Train a GNN (GraphSAGE by default; --layer picks another): data parallel with distributed neighbour "
            "sampling and DDP, a layer pipeline (--pipeline-stages) or chunk pipelining (--chunks). Give --parts-dir (a folder written by "
            "`gnnscale partition`), or --dataset (partitioned first into --workers parts, cached), or neither "
            f"(the embedded default: a generated graph, `{DEFAULT_DATASET}`). Under torchrun, each process runs "
            "one worker and --workers is ignored."
        ),
        formatter_class=DefaultsFormatter,
    )
    t.add_argument("--parts-dir", default=None, metavar="DIR", help="partition folder to train on")
    _add_dataset_args(t, required=False)
    t.add_argument("--config", default=None, metavar="FILE",
                   help="a YAML file of options (keys: these options' names, e.g. `fanouts: [15, 10, 5]`); flags "
                   "given here override it; the resolved configuration is written beside --metrics")
    t.add_argument("--print-config", action="store_true",
                   help="print the resolved configuration (the file, then the flags) as YAML and exit")
    t.add_argument("--tensorboard", default=None, metavar="DIR",
                   help="write TensorBoard scalars here (rank 0): per epoch loss, accuracies, stage seconds, bytes "
                   "by category, cache hit rate, embedding ages; per --log-every steps loss and step time "
                   "(needs the tensorboard package: pip install 'gnnscale[tensorboard]')")
    t.add_argument("--log-every", type=int, default=None, metavar="N",
                   help="with --tensorboard: rank 0's loss and step time every N steps")
    t.add_argument("--workers", type=int, default=None, help="local worker processes (default: the number of parts, or 2)")
    t.add_argument(
        "--cache-dir", default=None, metavar="DIR",
        help="where --dataset partitions are cached (default: $GNNSCALE_CACHE or ~/.cache/gnnscale/partitions)",
    )
    _add_partition_args(t)
    t.add_argument("--epochs", type=int, default=10, help="training epochs")
    t.add_argument("--fanouts", type=_int_list, default=[10, 10], help="neighbors per hop from the seeds outwards; -1 = all; one per layer")
    t.add_argument("--num-layers", type=int, default=None, help="model layers (default: the number of fanouts; must match it)")
    t.add_argument("--eval-fanouts", type=_int_list, default=None, help="fanouts for evaluation (default: --fanouts)")
    t.add_argument("--relation-fanouts", type=_json_dict, default={}, metavar="JSON",
                   help="typed graphs: training fanouts of named relations, e.g. '{\"cites\": [5, 5]}' (a mapping "
                   "in a --config file); the other relations take --fanouts, each list as many hops as --fanouts")
    t.add_argument("--batch-size", type=int, default=512, help="seed nodes per step per worker")
    t.add_argument("--eval-batch-size", type=int, default=2048, help="seed nodes per evaluation step per worker")
    t.add_argument("--hidden", type=int, default=128, help="hidden size")
    t.add_argument("--lr", type=float, default=0.003, help="Adam learning rate")
    t.add_argument("--weight-decay", type=_weight_decay, default=0.0, metavar="DECAY",
                   help="Adam's weight decay: one number for every parameter, or by parameter-name prefix, e.g. "
                   "convs=0.01,5e-4 (GCNII's: 0.01 on the convolutions, 5e-4 on the rest: encoder and head; "
                   "without a plain number the parameters no prefix names get 0); a prefix that names no "
                   "parameter of the model is refused, listing the model's")
    t.add_argument("--dropout", type=float, default=0.5, help="dropout between layers")
    t.add_argument("--seed", type=int, default=0, help="seed of sampling, shuffling, initial weights and partitioning")
    t.add_argument("--eval-every", type=int, default=1, help="evaluate on val/test every N epochs (and after the last); 0: never")
    t.add_argument("--max-steps", type=int, default=None, help="cap on steps per epoch (for benchmarks); default: whole epochs")
    t.add_argument("--metrics", default=None, metavar="FILE", help="write per-epoch figures and final val_acc/test_acc/epoch_seconds/bytes as JSON")
    t.add_argument("--port", type=int, default=None, help="rendezvous port on 127.0.0.1 for local workers (default: a free one)")
    t.add_argument("--timeout", type=float, default=300.0, help="seconds before a collective with a silent peer fails")
    t.add_argument("--threads", type=int, default=None, help="torch threads per worker (default: cores / workers)")
    t.add_argument("--device", choices=["cpu", "cuda", "auto"], default="auto",
                   help="where the model, the batches' blocks and rows and the feature cache live: cpu, cuda (one "
                        "worker per GPU, gradients over NCCL; sampling and remote fetches stay on the host over "
                        "gloo) or auto (cuda when a GPU is visible, else cpu; default)")
    t.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None, help="progress bar (default: only on a terminal, never under CI)")
    t.add_argument("--sampler-backend", choices=["auto", "numba", "torch"], default="auto",
                   help="sampling kernels: compiled numba on CPU (auto) or plain torch; identical draws")
    g = t.add_argument_group("feature cache, pipeline and network model")
    g.add_argument("--cache-policy", default="none",
                   help="remote feature rows to cache: none, degree (most-referenced halo nodes), presample "
                   "(access counts over --presample-epochs sampled epochs), file (--cache-file ids)")
    g.add_argument("--cache-size", default="10%",
                   help="cache size: rows=N, bytes=64MB, fraction=0.1 or 10%% of the remote rows")
    g.add_argument("--cache-file", default=None, metavar="FILE", help="for --cache-policy file: .npy of int64 global ids")
    g.add_argument("--presample-epochs", type=int, default=2, help="epochs sampled to count accesses (presample policy)")
    g.add_argument("--host-features", action=argparse.BooleanOptionalAction, default=None,
                   help="workers on one host read each other's feature rows straight from the partition folder "
                   "(memory-mapped: the host's page cache holds one copy) instead of asking their owners; owners on "
                   "other hosts still answer through the communicator. Rows read so count as feature_rows_host. "
                   "Default: on where it applies (sampled modes, untyped graphs, no --net-bandwidth-gbps); "
                   "--no-host-features sends every remote row through the communicator")
    g.add_argument("--host-graph", action=argparse.BooleanOptionalAction, default=None,
                   help="workers on one host sample each other's nodes themselves from the partition folder's CSCs "
                   "(memory-mapped), with the same draws as the owners', instead of asking them; with every worker on "
                   "one host sampling exchanges nothing. Exact exchange, untyped graphs. Default: on where it "
                   "applies (as --host-features, and --exchange exact); --no-host-graph asks the owners")
    g.add_argument("--pipeline", action=argparse.BooleanOptionalAction, default=False,
                   help="sample and fetch the next batches in a background thread while the current one trains")
    g.add_argument("--pipeline-depth", type=int, default=2, help="batches prepared ahead (queue depth)")
    g.add_argument("--net-bandwidth-gbps", type=float, default=None,
                   help="model a network link of this bandwidth on one machine (reported as modelled)")
    g.add_argument("--net-latency-ms", type=float, default=0.05, help="latency per exchange of the modelled link")
    t.add_argument("--verify", action=argparse.BooleanOptionalAction, default=True, help="check each part's sha256 before training")
    x = t.add_argument_group("cross-partition embedding exchange")
    x.add_argument("--exchange", choices=["exact", "historical", "local"], default="exact",
                   help="exact: sampling crosses partitions; historical: remote nodes before the last hop use "
                   "their owner's recent embeddings (halo tables, no remote sampling); local: drop "
                   "cross-partition edges (the cheap baseline)")
    x.add_argument("--staleness", type=int, default=4,
                   help="historical: no halo embedding older than this many steps is used (>= 2)")
    x.add_argument("--embedding-dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                   help="historical: dtype of the halo tables and of the pushed embeddings (16-bit halves both)")
    x.add_argument("--halo-features", choices=["hold", "fetch"], default="hold",
                   help="historical: hold the input features of the halo (fetched once at start-up; "
                   "halo rows x features x 4 B per worker), so training fetches none; or fetch them per step")
    x.add_argument("--eval-method", choices=["auto", "layerwise", "sampled"], default="auto",
                   help="layerwise: full-graph inference layer by layer; sampled: with --eval-fanouts; "
                   "auto: layerwise in historical mode or when every eval fanout is -1")
    lp = t.add_argument_group("layer pipeline (the model's layers split over workers)")
    lp.add_argument("--pipeline-stages", type=int, default=1, metavar="K",
                    help="split the layers into K consecutive stages, one worker each; micro-batches flow through "
                    "them (1: every worker holds the whole model)")
    lp.add_argument("--stage-layers", type=_int_list, default=None, metavar="N,N,...",
                    help="layers per stage, e.g. 8,8 (default: balanced)")
    lp.add_argument("--micro-batches", type=int, default=4, metavar="M",
                    help="micro-batches of --batch-size seeds per optimizer step (gradients over all M are exact)")
    lp.add_argument("--schedule", choices=["gpipe", "1f1b"], default="1f1b",
                    help="gpipe: M forwards then M backwards (holds M micro-batches); 1f1b: one forward one "
                    "backward (holds at most K); both flush before the optimizer step")
    lp.add_argument("--chunks", action=argparse.BooleanOptionalAction, default=False,
                    help="chunk pipelining (GNNPipe): full-graph training of a deep model (e.g. --layer gcnii "
                    "--num-layers 16), one step per epoch; the parts of --parts-dir are the chunks that flow "
                    "through the K stages (--workers K; with --dataset the graph is cut into --micro-batches chunks); "
                    "a neighbour in a chunk that has not yet passed a layer is read from the previous pass (within "
                    "--staleness); --fanouts and --batch-size do not apply")
    lp.add_argument("--halo-gradients", action=argparse.BooleanOptionalAction, default=True,
                    help="--chunks: the gradient of each neighbour row a chunk reads from a table is added to that "
                    "row's own gradient when its chunk runs backward (in this pass, or in the next one for a chunk "
                    "that ran before; as PipeGCN does), so no edge's gradient is dropped; each stage holds every chunk's "
                    "halo gradient per layer until its owners took it. --no-halo-gradients drops them "
                    "(GNNAutoScale's historical embeddings)")
    ck = t.add_argument_group("checkpoints and the saved model")
    ck.add_argument("--checkpoint-dir", default=None, metavar="DIR",
                    help="write checkpoints here (model, optimizer, epoch and step, RNG states, cache ids; atomic, "
                    "with a sha256 per file); under torchrun a restarted group resumes from the newest by itself")
    ck.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                    help="a checkpoint every N steps (default: after every epoch)")
    ck.add_argument("--keep-checkpoints", type=int, default=3, metavar="K", help="keep the newest K checkpoints")
    ck.add_argument("--resume", action="store_true",
                    help="continue from the newest valid checkpoint in --checkpoint-dir (a damaged newest one is "
                    "reported and the one before it used); the run's options must match the checkpoint's")
    ck.add_argument("--save-model", default=None, metavar="FILE",
                    help="write the trained model at the end (weights, layer spec, feature and class counts); "
                    "read it with gnnscale.load_model(FILE), `gnnscale evaluate` or `gnnscale predict`")
    m = t.add_argument_group("model")
    m.add_argument("--layer", default="sage",
                   help="message-passing layer: sage, gcn, gat, gin, gine (edge features), gcnii, an import path "
                   "module:Class (called as layer((x_src, x_dst), edge_index); e.g. a PyG layer, "
                   "torch_geometric.nn:SAGEConv; see README), or dgl:Class (needs DGL, which needs torch <= 2.2.1); "
                   "typed graphs: rgcn, hgt, rel:<layer>")
    m.add_argument("--layer-kwargs", type=_json_dict, default={}, metavar="JSON",
                   help='extra keyword arguments of every layer, e.g. \'{"heads": 4}\'')
    m.add_argument("--model", default=None, metavar="MODULE:CLASS",
                   help="a whole PyG model instead of the layer stack, e.g. torch_geometric.nn.models:GraphSAGE: any "
                   "nn.Module called as model(x, edge_index) on each sampled subgraph, built as Class(in_channels=F, "
                   "hidden_channels=--hidden, out_channels=C, num_layers=L[, dropout=--dropout], **--model-kwargs) "
                   "(docs/training.md)")
    m.add_argument("--model-kwargs", type=_json_dict, default={}, metavar="JSON",
                   help='extra keyword arguments of --model\'s class, e.g. \'{"jk": "cat"}\'')
    m.add_argument("--norm", choices=["none", "batch", "layer"], default="none", help="normalization after each hidden layer")
    m.add_argument("--residual", action=argparse.BooleanOptionalAction, default=False,
                   help="add each layer's input to its output where shapes agree")
    m.add_argument("--jk", choices=["none", "cat", "max"], default="none", help="jumping-knowledge readout")
    m.add_argument("--edge-features", choices=["auto", "on", "off"], default="auto",
                   help="give the layers each edge's features (the partition's edge_attr, sampled with every block, "
                   "remote rows sent by their owners): auto = on when the partition has them and the layer reads "
                   "edge_attr (gat, gat-pyg, gine, torch_geometric.nn:TransformerConv, ...) in data-parallel "
                   "training of node targets, else off (logged); on (refused where it cannot be); off")
    lk = t.add_argument_group("link prediction (--task link; docs/link_prediction.md)")
    lk.add_argument("--task", choices=["node", "link", "edge"], default="node",
                    help="node: classify nodes; link: score node pairs, trained on the partition's training edges "
                    "(a split made by --edge-split or an ogbl-* dataset's own); edge: classify the split's labelled "
                    "edges or regress their targets (a split with edge labels: random_link_split(edge_label=...))")
    lk.add_argument("--decoder", choices=["dot", "mlp", "distmult"], default="dot",
                    help="how a pair (u, v) is scored from its embeddings: dot product, an MLP over their Hadamard "
                    "product, or DistMult (a learned diagonal per relation)")
    lk.add_argument("--link-loss", choices=["bce", "margin"], default="bce",
                    help="binary cross-entropy with logits, or a margin loss relu(1 - s_pos + s_neg)")
    lk.add_argument("--neg-sampling", choices=["uniform", "per_source", "in_batch"], default="uniform",
                    help="negatives: node pairs uniform over all nodes, each positive's source with a uniform "
                    "destination (ogbl-citation2), or the batch's other destinations; drawn without communication")
    lk.add_argument("--num-negatives", type=int, default=1, metavar="K", help="negatives per positive edge")
    lk.add_argument("--filter-negatives", action=argparse.BooleanOptionalAction, default=False,
                    help="drop negatives that are edges of the graph (the destination's owner checks)")
    lk.add_argument("--exclude-seed-edges", action=argparse.BooleanOptionalAction, default=True,
                    help="remove each batch's own edges (and their reverses) from its sampled neighbourhoods, so a "
                    "model cannot read the edge it scores (DGL's exclude='reverse_id'); --no-exclude-seed-edges "
                    "keeps them, as the full-batch graph auto-encoder does")
    lk.add_argument("--link-metric", default=None, metavar="auc|hits@K|mrr",
                    help="what evaluation reports and selects on (default: the split's: auc and average precision "
                    "for --edge-split, OGB's Hits@K or MRR for ogbl-*)")
    nt = t.add_argument_group("node targets (class, binary, multilabel, regression; docs/targets_and_edge_features.md)")
    nt.add_argument("--metric", default=None,
                    choices=["accuracy", "macro_f1", "micro_f1", "roc_auc", "ap", "mae", "rmse"],
                    help="what evaluation reports and selects on (default: the partition's target kind's: accuracy "
                    "for classes, ROC-AUC for binary and multilabel targets (mean over labels with both classes), "
                    "RMSE for regression); one that does not fit the kind is refused")
    nt.add_argument("--pos-weight", default=None, metavar="auto|FLOAT",
                    help="binary and multilabel targets: weight of the positives in the binary cross-entropy, auto "
                    "(negatives / positives of the training labels, per label) or a number")

    b = sub.add_parser(
        "bench-partition", help="compare partitioning methods: cut, balance, halo, remote bytes, time, memory",
        description=(
            "Partition one dataset with several methods and part counts; measure edge cut, balance, halo, "
            "replication, the remote feature bytes one training epoch fetches (the real sampler replayed over "
            "the trainer's batches), seconds and peak memory. Prints a table; --out writes results.json and plots."
        ),
        formatter_class=DefaultsFormatter,
    )
    _add_dataset_args(b, required=True)
    b.add_argument("--parts", type=_int_list, default=[2, 4, 8], help="part counts, comma-separated")
    b.add_argument("--methods", type=_str_list, default=["metis", "random", "ldg", "fennel"], help="methods, comma-separated")
    b.add_argument("--balance", type=_str_list, default=["nodes", "train"], help="METIS balance constraints")
    b.add_argument("--imbalance", type=float, default=0.05, help="allowed imbalance per constraint")
    b.add_argument("--fanouts", type=_int_list, default=[10, 10], help="sampler fanouts for the communication figure")
    b.add_argument("--batch-size", type=int, default=512, help="training batch size per part for the communication figure")
    b.add_argument("--seed", type=int, default=0, help="partitioner and sampling seed")
    b.add_argument("--out", default=None, metavar="DIR", help="write results.json and PNG plots here")

    e = sub.add_parser(
        "evaluate", help="accuracy of a saved model on a partition folder",
        description="Evaluate a model written by `gnnscale train --save-model` on the parts of --parts-dir, with "
                    "the training run's evaluation method (one worker per part): train/val/test accuracy.",
        formatter_class=DefaultsFormatter,
    )
    e.add_argument("--model", required=True, metavar="FILE", help="a --save-model file")
    e.add_argument("--parts-dir", required=True, metavar="DIR", help="a partition folder (`gnnscale partition`)")
    e.add_argument("--timeout", type=float, default=300.0, help="seconds before a collective with a silent peer fails")
    e.add_argument("--port", type=int, default=None, help="rendezvous port on 127.0.0.1 (default: a free one)")
    e.add_argument("--json", action="store_true", help="print one JSON object")

    em = sub.add_parser(
        "embed", help="every node's embedding from a saved model, written per part",
        description="Compute every node's final embedding (a link model's encoder output; a node classifier's "
                    "output) with exact layer-wise inference, one worker per part of --parts-dir, and write "
                    "OUT/part{p}.npy (float32 [n_p, H]) with OUT/ids{p}.npy (the nodes' original ids) and "
                    "OUT/meta.json; gnnscale.training.embed.load_embeddings(OUT) reads them back as one array "
                    "in the dataset's node order.",
        formatter_class=DefaultsFormatter,
    )
    em.add_argument("--model", required=True, metavar="FILE", help="a --save-model file")
    em.add_argument("--parts-dir", required=True, metavar="DIR", help="a partition folder (`gnnscale partition`)")
    em.add_argument("--out", required=True, metavar="DIR", help="the embeddings folder (created)")
    em.add_argument("--timeout", type=float, default=300.0, help="seconds before a collective with a silent peer fails")
    em.add_argument("--port", type=int, default=None, help="rendezvous port on 127.0.0.1 (default: a free one)")

    pr = sub.add_parser(
        "predict", help="every node's predicted class from a saved model",
        description="Load a dataset and a model written by `gnnscale train --save-model`; write every node's "
                    "predicted class (int64, in the dataset's node order) with exact layer-wise inference over the "
                    "full graph, in one process.",
        formatter_class=DefaultsFormatter,
    )
    pr.add_argument("--model", required=True, metavar="FILE", help="a --save-model file")
    _add_dataset_args(pr, required=True)
    pr.add_argument("--out", required=True, metavar="FILE.npy", help="where to write the predictions")

    sub.add_parser(
        "datasets", help="describe every dataset name and its options",
        description="Describe every dataset name that --dataset accepts, with its options.",
    )

    i = sub.add_parser(
        "info", help="print a partition folder's metadata and per-part sizes",
        description="Print a partition folder's metadata and per-part sizes.",
        formatter_class=DefaultsFormatter,
    )
    i.add_argument("dir", metavar="DIR", help="partition folder")
    i.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    rp = sub.add_parser(
        "report", help="plots and a summary table of one or more runs' metrics",
        description="Read --metrics files of `gnnscale train` and write PNG plots (loss and accuracy per epoch, "
                    "stage seconds per epoch stacked, bytes per epoch by category; several runs on the same axes, "
                    "labelled by the options in which they differ) and summary.txt.",
        formatter_class=DefaultsFormatter,
    )
    rp.add_argument("metrics", nargs="+", metavar="METRICS.json", help="metrics files written by --metrics")
    rp.add_argument("--out", required=True, metavar="DIR", help="folder for the PNGs and summary.txt")
    parser.subcommands = {"train": t, "report": rp}
    return parser




def _weight_decay(text: str) -> float | str:
    """--weight-decay: a number, or PREFIX=DECAY items (checked by gnnscale.config.parse_weight_decay)."""
    from gnnscale.config import OptionError, parse_weight_decay

    try:
        rest, groups = parse_weight_decay(text)
    except OptionError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text if groups else rest


def _json_dict(text: str) -> dict:
    try:
        val = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"heads\": 4}}'; found {text!r} ({err})")
    if not isinstance(val, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"heads\": 4}}'; found {text!r}")
    return val

