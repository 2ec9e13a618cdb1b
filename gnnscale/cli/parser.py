"""The command line's parser: every command and option of ``gnnscale``, with its help and default.

The command line is a contract that scripts and benchmarks rely on; every option is listed
with its default by ``gnnscale <command> --help``. A ``train`` option's flag is its
:class:`~gnnscale.config.TrainConfig` field with dashes, made with its type, default, choices and
help from the field's row of :data:`gnnscale.config.OPTIONS` (:func:`add_train_options`); the
``train`` options written here are the launcher's and the partitioner's.
"""
from __future__ import annotations

import argparse
import json
import re

from gnnscale import __version__
from gnnscale.config import OPTIONS, SECTIONS, OptionError, cli_flag, weight_decay_value
from gnnscale.options import key_value

DEFAULT_DATASET = "synthetic"


class Parser(argparse.ArgumentParser):
    """``gnnscale``'s parser (and its commands'): a bad flag or value is one line that says where the
    help is, not the usage block; exit status 2."""

    def error(self, message: str):  # noqa: D102  (argparse's hook)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``(default: X)`` after an option's help once: not for a required option, not for an unset
    (None) or empty default, not where the help already says its default; a list as the command line
    takes it (``metis,random``)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.required or action.default is None or re.search(r"\bdefault\s*[:)]", text, re.IGNORECASE):
            return text
        if isinstance(action.default, (list, tuple)):
            if not action.default or action.option_strings == [] or action.default is argparse.SUPPRESS:
                return text
            shown = ",".join(map(str, action.default)).replace("%", "%%")
            return f"{text} (default: {shown})"
        return super()._get_help_string(action)


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 10,10; found {text!r}") from None


def _str_list(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _weight_decay(text: str) -> float | str:
    """--weight-decay: a number, or PREFIX=DECAY items (checked by gnnscale.config.parse_weight_decay)."""
    try:
        return weight_decay_value(text)
    except OptionError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _json_dict(text: str) -> dict:
    try:
        val = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"heads\": 4}}'; found {text!r} ({err})")
    if not isinstance(val, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"heads\": 4}}'; found {text!r}")
    return val


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


def _add_partition_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--method", default="metis",
        help="partitioning method: metis, random, hash, range, ldg, fennel, kaminpar, kahip (optional packages: "
        "pip install 'gnnscale[kaminpar]', '[kahip]'), a registered name, or a plug-in "
        "'module.path:function' returning LongTensor[N] of part ids",
    )
    p.add_argument(
        "--method-opt", type=key_value, action="append", default=[], metavar="KEY=VALUE",
        help="an option of the method, repeatable (metis: scheme=auto|kway|recursive, edge_weight=true; "
        "ldg/fennel: slack=0.1, passes=2, chunk_size=N; fennel: gamma=1.5; kaminpar: context=default|fast|terapart, "
        "threads=1; kahip: mode=auto|fast|eco|strong|fastsocial|ecosocial|strongsocial, default auto: strong on "
        "graphs up to 500,000 adjacency entries, else eco, *social where degrees are skewed)",
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
    p.add_argument("--feature-dtype", choices=["float32", "float16", "bfloat16"], default="float32",
                   help="precision of the feature rows stored in the parts (float16/bfloat16: half the bytes on disk "
                   "and fetched between workers; cast to float32 where rows enter the model); recorded in meta.json")
    p.add_argument("--edge-to-node", choices=["mean", "sum"], default=None,
                   help="append each node's in-edge features aggregated (mean or sum over the edges into it; zeros "
                   "for a node without any) to its features before partitioning (ogbn-proteins' baselines); the "
                   "partition records it")


# How each kind of TrainConfig field is read from the command line (gnnscale.config.KINDS; str: as given).
_TYPES = {"int": int, "float": float, "ints": _int_list, "mapping": _json_dict, "decay": _weight_decay}


def add_train_options(p: argparse.ArgumentParser) -> None:
    """One flag per :class:`~gnnscale.config.TrainConfig` field, from its row of
    :data:`gnnscale.config.OPTIONS` (type, default, choices, metavar and help), in one argument
    group per section (:data:`gnnscale.config.SECTIONS`)."""
    groups = {section: p.add_argument_group(title) for section, title in SECTIONS.items()}
    for spec in OPTIONS.values():
        kwargs: dict = dict(default=spec.default, help=spec.help.replace("%", "%%"))
        if spec.kind == "bool":
            kwargs["action"] = argparse.BooleanOptionalAction if spec.negatable else "store_true"
        elif spec.kind in _TYPES:
            kwargs["type"] = _TYPES[spec.kind]
        if spec.kind == "ints" and spec.default is not None:
            kwargs["default"] = list(spec.default)  # as the command line gives it (and YAML writes it)
        if spec.choices is not None:
            kwargs["choices"] = list(spec.choices)
        if spec.metavar is not None:
            kwargs["metavar"] = spec.metavar
        groups[spec.section].add_argument(cli_flag(spec.name), **kwargs)


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
    p.add_argument("--memory-budget", type=float, default=None, metavar="GB",
                   help="partition out of core within this memory (a dir: dataset only: its edge files read in "
                   "chunks, x.npy mapped, parts written by external bucketing; ldg/fennel streamed from disk, other "
                   "methods only when the estimate fits); sets the chunk sizes, prints the estimate, and refuses "
                   "before starting when it cannot hold the O(N) arrays")

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
    t.add_argument("--workers", type=int, default=None, help="local worker processes (default: the number of parts, or 2)")
    t.add_argument("--port", type=int, default=None, help="rendezvous port on 127.0.0.1 for local workers (default: a free one)")
    t.add_argument("--threads", type=int, default=None, help="torch threads per worker (default: cores / workers)")
    t.add_argument(
        "--cache-dir", default=None, metavar="DIR",
        help="where --dataset partitions are cached (default: $GNNSCALE_CACHE or ~/.cache/gnnscale/partitions)",
    )
    _add_partition_args(t)
    add_train_options(t)  # every TrainConfig field: gnnscale.config.OPTIONS

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
    b.add_argument("--methods", type=_str_list, default=["metis", "random", "ldg", "fennel"],
                   help="methods, comma-separated; a method's own options as NAME?KEY=VALUE&KEY=VALUE, e.g. "
                   "kaminpar?context=fast&threads=2, kahip?mode=eco; kahip?mode=all (kaminpar?context=all) "
                   "gives one row per preset")
    b.add_argument("--balance", type=_str_list, default=["nodes", "train"],
                   help="METIS balance constraints (kaminpar and kahip balance one weight made from them)")
    b.add_argument("--imbalance", type=float, default=0.05, help="allowed imbalance per constraint")
    b.add_argument("--fanouts", type=_int_list, default=[10, 10], help="sampler fanouts for the communication figure")
    b.add_argument("--batch-size", type=int, default=512, help="training batch size per part for the communication figure")
    b.add_argument("--seed", type=int, default=0, help="partitioner and sampling seed")
    b.add_argument("--out", default=None, metavar="DIR", help="write results.json and PNG plots here")

    e = sub.add_parser(
        "evaluate", help="accuracy of a saved model on a partition folder",
        description="Evaluate a model written by `gnnscale train --save-model` on the parts of --parts-dir, with "
                    "the training run's evaluation method (one worker per part): train/val/test accuracy. A run "
                    "that evaluated with sampled fan-outs (--eval-fanouts, by default --fanouts) is evaluated so "
                    "again; --eval-method layerwise evaluates over every neighbour, as `gnnscale predict` does.",
        formatter_class=DefaultsFormatter,
    )
    e.add_argument("--model", required=True, metavar="FILE", help="a --save-model file")
    e.add_argument("--parts-dir", required=True, metavar="DIR", help="a partition folder (`gnnscale partition`)")
    e.add_argument("--timeout", type=float, default=300.0, help="seconds before a collective with a silent peer fails")
    e.add_argument("--port", type=int, default=None, help="rendezvous port on 127.0.0.1 (default: a free one)")
    e.add_argument("--eval-method", default=None, choices=("layerwise", "sampled"),
                   help="layerwise: every neighbour, layer by layer (the logits of `gnnscale predict`); sampled: with "
                   "the run's evaluation fan-outs (default: the run's method)")
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
