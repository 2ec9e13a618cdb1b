"""The ``gnnscale`` command line: partition, train, info.

The command line is a contract that scripts and benchmarks rely on; every option is listed
with its default by ``gnnscale <command> --help``. Errors caused by the input print one
message (what was expected, what was found, how to fix it) and exit with status 2.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import re
import sys
from pathlib import Path

from gnnscale.errors import GnnscaleError, RuntimeSetupError

log = logging.getLogger("gnnscale")

DEFAULT_DATASET = "synthetic"


def _int_list(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers such as 10,10; found {text!r}") from None


def _str_list(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


DATASET_NAMES = (
    "planetoid:cora|citeseer|pubmed (raw Planetoid files in --root), npz:PATH[?split=K], dir:PATH, "
    "ogbn-arxiv|ogbn-products|ogbn-papers100M|ogbn-* (via the ogb package, --root), "
    "synthetic[?num_nodes=N&avg_degree=D&num_classes=C&num_features=F&homophily=H&seed=S]; "
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gnnscale",
        description="Distributed GNN training: partition a graph, train GraphSAGE across workers, inspect partitions.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "partition", help="split a dataset into parts on disk",
        description="Load a dataset, partition it (METIS by default) and write one folder per part plus meta.json.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    _add_dataset_args(p, required=True)
    p.add_argument("--parts", type=int, required=True, help="number of parts (one per worker)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created; must be empty or a previous partition)")
    _add_partition_args(p)
    p.add_argument("--seed", type=int, default=0, help="partitioner seed")

    t = sub.add_parser(
        "train", help="train GraphSAGE with one worker per part",
        description=(
            "Train GraphSAGE with distributed neighbor sampling and DDP. Give --parts-dir (a folder written by "
            "`gnnscale partition`), or --dataset (partitioned first into --workers parts, cached), or neither "
            f"(the embedded default: a generated graph, `{DEFAULT_DATASET}`). Under torchrun, each process runs "
            "one worker and --workers is ignored."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
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
    t.add_argument("--batch-size", type=int, default=512, help="seed nodes per step per worker")
    t.add_argument("--eval-batch-size", type=int, default=2048, help="seed nodes per evaluation step per worker")
    t.add_argument("--hidden", type=int, default=128, help="hidden size")
    t.add_argument("--lr", type=float, default=0.003, help="Adam learning rate")
    t.add_argument("--weight-decay", type=float, default=0.0, help="Adam weight decay")
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
                   help="message-passing layer: sage, gcn, gat, gin, gcnii, or an import path module:Class "
                   "(called as layer((x_src, x_dst), edge_index); see README)")
    m.add_argument("--layer-kwargs", type=_json_dict, default={}, metavar="JSON",
                   help='extra keyword arguments of every layer, e.g. \'{"heads": 4}\'')
    m.add_argument("--norm", choices=["none", "batch", "layer"], default="none", help="normalization after each hidden layer")
    m.add_argument("--residual", action=argparse.BooleanOptionalAction, default=False,
                   help="add each layer's input to its output where shapes agree")
    m.add_argument("--jk", choices=["none", "cat", "max"], default="none", help="jumping-knowledge readout")

    b = sub.add_parser(
        "bench-partition", help="compare partitioning methods: cut, balance, halo, remote bytes, time, memory",
        description=(
            "Partition one dataset with several methods and part counts; measure edge cut, balance, halo, "
            "replication, the remote feature bytes one training epoch fetches (the real sampler replayed over "
            "the trainer's batches), seconds and peak memory. Prints a table; --out writes results.json and plots."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
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
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    e.add_argument("--model", required=True, metavar="FILE", help="a --save-model file")
    e.add_argument("--parts-dir", required=True, metavar="DIR", help="a partition folder (`gnnscale partition`)")
    e.add_argument("--timeout", type=float, default=300.0, help="seconds before a collective with a silent peer fails")
    e.add_argument("--port", type=int, default=None, help="rendezvous port on 127.0.0.1 (default: a free one)")
    e.add_argument("--json", action="store_true", help="print one JSON object")

    pr = sub.add_parser(
        "predict", help="every node's predicted class from a saved model",
        description="Load a dataset and a model written by `gnnscale train --save-model`; write every node's "
                    "predicted class (int64, in the dataset's node order) with exact layer-wise inference over the "
                    "full graph, in one process.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
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
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    i.add_argument("dir", metavar="DIR", help="partition folder")
    i.add_argument("--json", action="store_true", help="print one JSON object instead of a table")

    rp = sub.add_parser(
        "report", help="plots and a summary table of one or more runs' metrics",
        description="Read --metrics files of `gnnscale train` and write PNG plots (loss and accuracy per epoch, "
                    "stage seconds per epoch stacked, bytes per epoch by category; several runs on the same axes, "
                    "labelled by the options in which they differ) and summary.txt.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    rp.add_argument("metrics", nargs="+", metavar="METRICS.json", help="metrics files written by --metrics")
    rp.add_argument("--out", required=True, metavar="DIR", help="folder for the PNGs and summary.txt")
    parser.subcommands = {"train": t, "report": rp}
    return parser


# -- commands ------------------------------------------------------------------------------
def cmd_partition(args) -> int:
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    data = load_dataset(args.dataset, root=args.root)
    meta = partition_graph(
        data, args.parts, args.out, method=args.method, balance=args.balance,
        imbalance=args.imbalance, seed=args.seed, dataset=args.dataset, options=dict(args.method_opt),
    )
    log.info("wrote %d parts to %s", meta["num_parts"], args.out)
    return 0


def _cache_dir(args) -> Path:
    base = args.cache_dir or os.environ.get("GNNSCALE_CACHE") or os.path.join(Path.home(), ".cache", "gnnscale", "partitions")
    key = json.dumps([args.dataset, os.path.abspath(args.root) if args.root else None, args.method,
                      sorted(args.balance), args.imbalance, args.seed, sorted(map(str, args.method_opt))])
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", args.dataset)[:60]
    return Path(base) / f"{slug}-{args.method}-{args.workers}parts-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def _prepare_parts(args) -> str:
    """Partition --dataset into --workers parts in the cache folder (reused when complete)."""
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import load_meta, partition_graph

    out = _cache_dir(args)
    if (out / "meta.json").exists():
        try:
            meta = load_meta(out)
            if meta["num_parts"] == args.workers:
                log.info("using cached partition %s", out)
                return str(out)
        except GnnscaleError:
            pass
    log.info("partitioning %s into %d parts (cache folder: %s)", args.dataset, args.workers, out)
    data = load_dataset(args.dataset, root=args.root)
    partition_graph(
        data, args.workers, out, method=args.method, balance=args.balance,
        imbalance=args.imbalance, seed=args.seed, dataset=args.dataset, options=dict(args.method_opt),
    )
    return str(out)


def prepare_parts(dataset: str, workers: int, root: str | None = None, cache_dir: str | None = None,
                  method: str = "metis", seed: int = 0, balance=("nodes", "train"), imbalance: float = 0.05,
                  method_opt=()) -> str:
    """The cached partition of ``dataset`` into ``workers`` parts (made on first use); its folder."""
    ns = argparse.Namespace(dataset=dataset, workers=workers, root=root, cache_dir=cache_dir, method=method, seed=seed,
                            balance=list(balance), imbalance=imbalance, method_opt=list(method_opt))
    return _prepare_parts(ns)



def _json_dict(text: str) -> dict:
    import json

    try:
        val = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"heads\": 4}}'; found {text!r} ({err})")
    if not isinstance(val, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object like '{{\"heads\": 4}}'; found {text!r}")
    return val


def cmd_train(args) -> int:
    # The launcher stays torch-free up to the workers' start (each worker imports torch itself):
    # the checks below come from torch-free modules, the target travels as a "module:function".
    from gnnscale.config import TrainConfig, check_staleness
    from gnnscale.process.launch import in_torchrun, launch_device, launch_local
    from gnnscale.cli.run_config import beside, dump, resolved

    config = resolved(args, args.parser)
    if args.print_config:
        print(dump(config), end="")
        return 0
    if args.parts_dir and args.dataset:
        raise RuntimeSetupError("give either --parts-dir or --dataset, not both")
    if args.tensorboard:
        import importlib.util

        if importlib.util.find_spec("tensorboard") is None:
            raise RuntimeSetupError("--tensorboard needs the tensorboard package: pip install 'gnnscale[tensorboard]'")
    if args.log_every is not None and args.log_every < 1:
        raise RuntimeSetupError(f"--log-every must be at least 1 step; found {args.log_every}")
    if args.metrics:
        os.makedirs(os.path.dirname(os.path.abspath(args.metrics)), exist_ok=True)
        with open(beside(args.metrics), "w") as f:
            f.write(dump(config))
    cfg = TrainConfig(
        epochs=args.epochs, fanouts=args.fanouts, eval_fanouts=args.eval_fanouts, batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size, hidden=args.hidden, lr=args.lr, weight_decay=args.weight_decay,
        dropout=args.dropout, seed=args.seed, eval_every=args.eval_every, timeout=args.timeout,
        metrics=args.metrics, progress=args.progress, verify=args.verify,
        sampler_backend=args.sampler_backend, cache_policy=args.cache_policy, cache_size=args.cache_size,
        cache_file=args.cache_file, presample_epochs=args.presample_epochs, pipeline=args.pipeline,
        pipeline_depth=args.pipeline_depth, net_bandwidth_gbps=args.net_bandwidth_gbps,
        net_latency_ms=args.net_latency_ms, max_steps=args.max_steps, exchange=args.exchange,
        staleness=args.staleness, embedding_dtype=args.embedding_dtype, halo_features=args.halo_features,
        eval_method=args.eval_method,
        layer=args.layer, layer_kwargs=args.layer_kwargs, norm=args.norm, residual=args.residual, jk=args.jk,
        device=args.device, pipeline_stages=args.pipeline_stages, stage_layers=args.stage_layers,
        micro_batches=args.micro_batches, schedule=args.schedule, chunks=args.chunks, num_layers=args.num_layers,
        halo_gradients=args.halo_gradients,
        checkpoint_dir=args.checkpoint_dir, checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints, resume=args.resume, save_model=args.save_model,
        tensorboard=args.tensorboard, log_every=args.log_every,
    )
    if (cfg.resume or cfg.checkpoint_every) and not cfg.checkpoint_dir:
        raise RuntimeSetupError("--resume and --checkpoint-every need --checkpoint-dir DIR")
    if cfg.checkpoint_every is not None and cfg.checkpoint_every < 1:
        raise RuntimeSetupError(f"--checkpoint-every must be at least 1 step; found {cfg.checkpoint_every}")
    if cfg.keep_checkpoints < 1:
        raise RuntimeSetupError(f"--keep-checkpoints must be at least 1; found {cfg.keep_checkpoints}")
    if (cfg.checkpoint_dir or cfg.save_model) and (cfg.pipeline_stages > 1 or cfg.chunks):
        raise RuntimeSetupError("--checkpoint-dir and --save-model work with data-parallel training; the layer "
                                "pipeline (--pipeline-stages, --chunks) does not write them yet")
    stages = cfg.pipeline_stages
    launch_device(cfg.device, 1)  # --device cuda without CUDA: an error before partitioning or launching
    check_staleness(cfg.staleness)
    if ":" in cfg.layer and not cfg.layer.startswith("dgl:"):  # a bad layer fails here, before any worker starts
        from gnnscale.nn.layers import build_conv

        build_conv(cfg.layer, 8, 8, index=0, num_layers=2, **cfg.layer_kwargs)
    from gnnscale.samplers import check_fanouts

    num_layers = cfg.model_layers()
    if not cfg.chunks:  # chunk pipelining trains on full neighborhoods: no fanouts
        check_fanouts(cfg.fanouts, num_layers=args.num_layers)
        if cfg.eval_fanouts is not None:
            check_fanouts(cfg.eval_fanouts, num_layers=len(cfg.fanouts))
    if stages != 1 or cfg.chunks:
        from gnnscale.parallel.schedules import check_pipeline

        check_pipeline(stages, cfg.stage_layers, cfg.micro_batches, cfg.schedule, num_layers, stages)
    if cfg.chunks:
        target = "gnnscale.parallel.chunk_pipeline:chunk_worker"
    else:
        target = "gnnscale.parallel.layer_pipeline:pipeline_worker" if stages > 1 else "gnnscale.training.trainer:train_worker"

    def check_chunk_workers(workers: int, chunks: str) -> None:
        if cfg.chunks and workers != stages:
            raise RuntimeSetupError(f"--chunks runs one pipeline of {stages} stages over the whole graph{chunks}: use "
                                    f"--workers {stages}, found {workers}")

    if in_torchrun():
        if not args.parts_dir:
            raise RuntimeSetupError("under torchrun, give --parts-dir (partition first with `gnnscale partition`)")
        from gnnscale.process.launch import die_with_parent, resolve_target, thread_env

        die_with_parent()  # a lost agent (a host gone) takes its workers with it; the peers then name them

        # The same thread counts as launch_local's workers (cores / local workers, or --threads),
        # set before torch and numba are imported: torchrun leaves numba one thread per core, and
        # some compiled kernels sum in an order that follows the thread count (runs would differ).
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        os.environ.update(thread_env(args.threads or max(1, (os.cpu_count() or 1) // local), local))
        resolve_target(target)(args.parts_dir, cfg)
        return 0
    if args.parts_dir:
        from gnnscale.partitioning.validate import check_folder, check_meta

        meta = check_meta(args.parts_dir)  # every field a worker relies on, typed and consistent
        workers = args.workers if args.workers is not None else (stages if cfg.chunks else meta["num_parts"] * stages)
        check_chunk_workers(workers, f" (the {meta['num_parts']} parts of {args.parts_dir} are its chunks)")
        if not cfg.chunks and workers != meta["num_parts"] * stages:
            per = "one worker trains one part" if stages == 1 else f"the {stages} stages of one pipeline train one part"
            raise RuntimeSetupError(
                f"--workers {workers} does not match the {meta['num_parts']} parts in {args.parts_dir}: {per}. Use "
                f"--workers {meta['num_parts'] * stages}, or re-partition with "
                f"`gnnscale partition --parts {max(1, workers // stages)} ...`"
            )
        parts_dir = args.parts_dir
        if cfg.verify:  # fail fast, before any worker starts, on a corrupt part (parts hash in parallel)
            from gnnscale.partitioning import verify_parts

            verify_parts(parts_dir)
            check_folder(parts_dir)  # and what the files hold: dtypes, shapes, ids, finite features, labels
            cfg.verify = False
    else:
        args.dataset = args.dataset or DEFAULT_DATASET
        workers = args.workers if args.workers is not None else (2 if stages == 1 and not cfg.chunks else stages)
        if workers < 1:
            raise RuntimeSetupError(f"--workers must be at least 1, found {workers}")
        if stages > 1 and not cfg.chunks:
            check_pipeline(stages, cfg.stage_layers, cfg.micro_batches, cfg.schedule, len(cfg.fanouts), workers)
        check_chunk_workers(workers, "")
        # parts: one per pipeline; in chunk mode the chunks, one per micro-batch
        args.workers = cfg.micro_batches if cfg.chunks else workers // stages
        parts_dir = _prepare_parts(args)
    device = launch_device(cfg.device, workers)  # no CUDA, or too few GPUs: an error before any worker starts
    log.info("starting %d local worker(s) on %s (device %s)", workers, parts_dir, device)
    results = launch_local(target, workers, args=(parts_dir, cfg), port=args.port, threads_per_worker=args.threads)
    if cfg.chunks:
        last = results[-1]
        acc = last["accuracy"][-1] if last["accuracy"] else None
        log.info("done: %d epochs over %d stages (layers %s), final loss %.4f%s", len(last["losses"]), stages,
                 " ".join(f"{a}-{b - 1}" for a, b in (r["layers"] for r in results)),
                 last["losses"][-1] if last["losses"] else float("nan"),
                 "" if acc is None else f", val_acc {acc['val']:.4f} test_acc {acc['test']:.4f}")
        return 0
    if stages > 1:
        last = results[stages - 1]
        acc = results[0]["accuracy"][-1] if results[0]["accuracy"] else None
        log.info("done: %d steps of %d micro-batches over %d stages (layers %s), final step loss %.4f%s",
                 len(last["losses"]), cfg.micro_batches, stages, " ".join(f"{a}-{b - 1}" for a, b in
                                                                          (r["layers"] for r in results[:stages])),
                 last["losses"][-1] if last["losses"] else float("nan"),
                 "" if acc is None else f", val_acc {acc['val']:.4f} test_acc {acc['test']:.4f}")
        return 0
    r0 = results[0]
    if r0["val_acc"] is None:
        log.info("done: %.2f s/epoch, %.1f MB sent, %.1f MB received in all (no evaluation)",
                 r0["epoch_seconds"], r0["bytes_sent"] / 1e6, r0["bytes_received"] / 1e6)
        return 0
    log.info(
        "done: val_acc %.4f test_acc %.4f (best val %.4f at epoch %d, test there %.4f), %.2f s/epoch, "
        "%.1f MB sent, %.1f MB received in all",
        r0["val_acc"], r0["test_acc"], r0["best_val_acc"], r0["best_epoch"], r0["test_acc_at_best_val"],
        r0["epoch_seconds"], r0["bytes_sent"] / 1e6, r0["bytes_received"] / 1e6,
    )
    return 0


def cmd_evaluate(args) -> int:
    from gnnscale.config import TrainConfig
    from gnnscale.process.launch import launch_local
    from gnnscale.training.model_io import ModelFileError, describe, read_model_file
    from gnnscale.partitioning import load_meta, verify_parts

    blob = read_model_file(args.model)
    meta = load_meta(args.parts_dir)
    if int(meta["feature_dim"]) != blob["num_features"] or int(meta["num_classes"]) != blob["num_classes"]:
        raise ModelFileError(f"{args.model} ({describe(blob)}) does not fit {args.parts_dir}: "
                             f"{meta['feature_dim']} features, {meta['num_classes']} classes")
    known = set(TrainConfig.__dataclass_fields__)
    saved = {k: v for k, v in (blob.get("config") or {}).items() if k in known}
    cfg = TrainConfig(**(saved | dict(timeout=args.timeout, metrics=None, checkpoint_dir=None, resume=False,
                                      save_model=None, verify=False, epochs=0, progress=False, device="cpu")))
    verify_parts(args.parts_dir)
    from gnnscale.partitioning.validate import check_folder

    check_folder(args.parts_dir)
    res = launch_local("gnnscale.training.trainer:evaluate_worker", meta["num_parts"], args=(args.parts_dir, cfg, args.model),
                       port=args.port)[0]
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{args.model} ({describe(blob)}) on {args.parts_dir}: train_acc {res['train_acc']:.4f} "
              f"val_acc {res['val_acc']:.4f} test_acc {res['test_acc']:.4f}")
    return 0


def cmd_predict(args) -> int:
    import numpy as np

    from gnnscale.datasets import load_dataset
    from gnnscale.training.model_io import load_model, predict_full_graph

    model = load_model(args.model)
    data = load_dataset(args.dataset, root=args.root)
    pred = predict_full_graph(model, data.x.float(), data.edge_index).argmax(1)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    np.save(args.out, pred.numpy().astype(np.int64))
    mask = getattr(data, "test_mask", None)
    extra = ""
    if mask is not None and data.y is not None and mask.dim() == 1:
        extra = f"; test accuracy {float((pred[mask] == data.y[mask]).float().mean()):.4f}"
    log.info("wrote %s: %d predictions%s", args.out, pred.numel(), extra)
    return 0


def cmd_report(args) -> int:
    from gnnscale.cli.report import write_report

    out = write_report(args.metrics, args.out)
    for path in out["files"]:
        log.info("wrote %s", path)
    print(out["summary"], end="")
    return 0


def cmd_info(args) -> int:
    from gnnscale.partitioning import summarize

    summary = summarize(args.dir)
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
        return 0
    print(f"partition folder: {args.dir}")
    for key in ("format_version", "dataset", "method", "num_parts", "num_nodes", "num_edges", "feature_dim", "num_classes", "partition_seconds"):
        if key in summary:
            print(f"  {key:18s} {summary[key]}")
    cut = summary.get("edge_cut")
    if cut is not None:
        print(f"  {'edge_cut':18s} {cut}")
    parts = summary.get("parts", [])
    if parts:
        cols = list(parts[0].keys())
        print("  " + " ".join(f"{c:>12s}" for c in cols))
        for row in parts:
            print("  " + " ".join(f"{str(row[c]):>12s}" for c in cols))
    return 0


_NUMBER_LIST = re.compile(r"^-?\d+(,-?\d+)*$")


def _join_negative_lists(argv: list[str]) -> list[str]:
    """Let ``--fanouts -1,-1`` work: argparse would read ``-1,-1`` as an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok in ("--fanouts", "--eval-fanouts", "--parts") and i + 1 < len(argv) and _NUMBER_LIST.match(argv[i + 1]):
            out.append(f"{tok}={argv[i + 1]}")
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


def cmd_bench_partition(args) -> int:
    from gnnscale.partitioning.bench import format_table, run_bench, save
    from gnnscale.datasets import load_dataset

    data = load_dataset(args.dataset, root=args.root)
    rows = run_bench(
        data, args.parts, args.methods, fanouts=args.fanouts, batch_size=args.batch_size,
        balance=args.balance, imbalance=args.imbalance, seed=args.seed,
    )
    print(f"dataset {args.dataset}: {data.num_nodes} nodes, {data.edge_index.size(1)} edges; "
          f"remote bytes for fanouts {args.fanouts}, batch {args.batch_size}")
    print(format_table(rows))
    if args.out:
        info = {"dataset": args.dataset, "num_nodes": int(data.num_nodes), "num_edges": int(data.edge_index.size(1)),
                "fanouts": args.fanouts, "batch_size": args.batch_size, "seed": args.seed}
        for path in save(rows, Path(args.out), info):
            log.info("wrote %s", path)
    return 0


def cmd_datasets(args) -> int:
    from gnnscale.datasets import DATASET_HELP

    print(DATASET_HELP)
    return 0


def main(argv: list[str] | None = None) -> int:
    from gnnscale.logs import setup_logging

    setup_logging()
    argv = _join_negative_lists(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "train" and args.config:  # the file's values become defaults: flags override them
        from gnnscale.cli.run_config import load

        try:
            parser.subcommands["train"].set_defaults(**load(args.config, parser.subcommands["train"]))
        except GnnscaleError as err:
            print(f"gnnscale train: error: {err}", file=sys.stderr)
            return 2
        args = parser.parse_args(argv)
    args.parser = parser.subcommands.get(args.command)
    commands = {"partition": cmd_partition, "train": cmd_train, "info": cmd_info, "datasets": cmd_datasets,
                "bench-partition": cmd_bench_partition, "evaluate": cmd_evaluate, "predict": cmd_predict,
                "report": cmd_report}
    try:
        return commands[args.command](args)
    except GnnscaleError as err:
        print(f"gnnscale {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
