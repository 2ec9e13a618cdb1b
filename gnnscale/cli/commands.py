"""The commands of ``gnnscale``: partition, train, evaluate, predict, report, info, bench-partition, datasets.

Errors caused by the input print one message (what was expected, what was found, how to fix
it) and exit with status 2 (:func:`gnnscale.cli.main.main`).
"""
from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import fields
from pathlib import Path

from gnnscale.cli.parser import DEFAULT_DATASET

log = logging.getLogger("gnnscale")


def cmd_partition(args) -> int:
    from gnnscale.outputs import check_output

    check_output(args.out, "--out", folder=True)  # before torch and the dataset load (minutes for a large one)
    from gnnscale.data.partition_cache import check_edge_to_node, edge_to_node_meta, input_meta
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    if args.memory_budget is not None:
        return _partition_out_of_core(args)
    data = load_dataset(args.dataset, root=args.root)
    link = args.edge_split is not None or args.disjoint_train_ratio or args.link_relation or \
        getattr(data, "link_split", None) is not None
    if args.edge_to_node is not None:  # aggregated in-edge features appended to x, before the cut
        from gnnscale.datasets.edge_to_node import edge_to_node

        check_edge_to_node(args.edge_to_node, bool(link))
        data = edge_to_node(data, args.edge_to_node)
    if link:
        from gnnscale.data.partition_cache import link_data

        data = link_data(data, args.edge_split, args.disjoint_train_ratio, args.link_relation, seed=args.seed)
    partition_graph(
        data, args.parts, args.out, method=args.method, balance=args.balance,
        imbalance=args.imbalance, seed=args.seed, dataset=args.dataset, options=dict(args.method_opt),
        extra_meta={**edge_to_node_meta(args.edge_to_node), **input_meta(args.dataset, args.root)},
        feature_dtype=args.feature_dtype,
    )
    return 0  # partition_graph logged the one line of the write


def _partition_out_of_core(args) -> int:
    """``gnnscale partition --memory-budget GB``: a dir: folder partitioned by partition_on_disk."""
    from gnnscale.data.partition_cache import input_meta
    from gnnscale.datasets._options import data_folder, split_spec
    from gnnscale.errors import PartitionError
    from gnnscale.partitioning.disk_graph import DiskGraph
    from gnnscale.partitioning.out_of_core import partition_on_disk

    given = [flag for flag, on in (("--edge-split", args.edge_split is not None),
                                   ("--disjoint-train-ratio", bool(args.disjoint_train_ratio)),
                                   ("--link-relation", args.link_relation is not None),
                                   ("--edge-to-node", args.edge_to_node is not None)) if on]
    base, opts = split_spec(args.dataset)
    if not base.startswith("dir:") or set(opts) - {"undirected"} or given:
        raise PartitionError(
            f"expected a dir:PATH dataset (option undirected only) and none of --edge-split, --disjoint-train-ratio, "
            f"--link-relation, --edge-to-node with --memory-budget (the out-of-core pipeline), found "
            f"--dataset {args.dataset!r}{' and ' + ', '.join(given) if given else ''}; drop them or --memory-budget")
    folder = data_folder(base[4:], args.root, "a folder with edge_index.npy or edges/*.npy, x.npy, y.npy", "dir")
    graph = DiskGraph.open(folder, undirected=bool(opts.get("undirected", False)), name=args.dataset)
    meta = partition_on_disk(graph, args.parts, args.out, method=args.method, memory_budget_gb=args.memory_budget,
                             balance=args.balance, imbalance=args.imbalance, seed=args.seed,
                             options=dict(args.method_opt), feature_dtype=args.feature_dtype,
                             extra_meta=input_meta(args.dataset, args.root))
    plan, ooc = meta["out_of_core"]["plan"], meta["out_of_core"]
    print(f"plan: O(N) arrays {plan['node_bytes'] / 1e9:.2f} GB, chunks of {plan['chunk_edges']:,} edges, estimate "
          f"{plan['estimate_bytes'] / 1e9:.2f} GB (in-memory pipeline ~{plan['in_memory_bytes'] / 1e9:.2f} GB); "
          f"peak {ooc['peak_rss_bytes'] / 1e9:.2f} GB in {ooc['seconds']:.1f} s, edge cut {meta['edge_cut_fraction']:.4f}")
    return 0



def cmd_train(args) -> int:
    # The launcher stays torch-free up to the workers' start (each worker imports torch itself):
    # the checks (gnnscale.api.prepare_run, the same as gnnscale.train's) come from torch-free
    # modules, the target travels as a "module:function".
    from gnnscale.api import TARGET, Source, finished, launch, prepare_run
    from gnnscale.cli.run_config import beside, dump, resolved
    from gnnscale.config import TrainConfig

    config = resolved(args, args.parser)
    if args.print_config:
        print(dump(config), end="")
        return 0
    cfg = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    dataset = args.dataset or (None if args.parts_dir else DEFAULT_DATASET)
    source = Source(dataset, args.parts_dir, args.root, args.cache_dir, args.method, args.method_opt, args.balance,
                    args.imbalance, None, args.edge_split, args.disjoint_train_ratio, args.link_relation,
                    args.edge_to_node, args.feature_dtype)
    run = prepare_run(cfg, source, args.workers)
    if args.metrics:
        os.makedirs(os.path.dirname(os.path.abspath(args.metrics)), exist_ok=True)
        with open(beside(args.metrics), "w") as f:
            f.write(dump(config))
    if run.torchrun:
        from gnnscale.process.launch import die_with_parent, resolve_target, thread_env

        die_with_parent()  # a lost agent (a host gone) takes its workers with it; the peers then name them
        # The same thread counts as launch_local's workers (cores / local workers, or --threads),
        # set before torch and numba are imported: torchrun leaves numba one thread per core, and
        # some compiled kernels sum in an order that follows the thread count (runs would differ).
        local = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
        os.environ.update(thread_env(args.threads or max(1, (os.cpu_count() or 1) // local), local, run.typed))
        finished(resolve_target(TARGET)(run.parts_dir, run.cfg))
        return 0
    launch(run, port=args.port, threads=args.threads)
    return 0


def cmd_evaluate(args) -> int:
    from gnnscale.config import TrainConfig
    from gnnscale.process.launch import launch_local
    from gnnscale.training.evaluate import evaluate_config
    from gnnscale.training.model_io import ModelFileError, describe, read_model_file
    from gnnscale.partitioning import load_meta, verify_parts
    from gnnscale.tasks.task import TASKS

    blob = read_model_file(args.model)
    meta = load_meta(args.parts_dir)
    task = TASKS[(blob.get("config") or {}).get("task", TrainConfig.task)]  # the model's task, from its run's options
    misfit = task.model_misfit(meta, blob)
    if misfit:
        raise ModelFileError(f"{args.model} ({describe(blob)}) does not fit {args.parts_dir}: it holds {misfit}")
    # Evaluated as data-parallel training evaluates (one worker per part), or layer-wise over every
    # neighbour (--eval-method layerwise: gnnscale predict's logits)
    cfg = evaluate_config(blob, args.timeout, args.eval_method)
    verify_parts(args.parts_dir)
    from gnnscale.partitioning.validate import check_folder

    check_folder(args.parts_dir)
    res = launch_local("gnnscale.training.evaluate:evaluate_worker", meta["num_parts"],
                       args=(args.parts_dir, cfg, args.model), port=args.port)[0]
    if args.json:
        print(json.dumps(res))
    else:
        m = res["metric"]
        name = "acc" if m == "accuracy" else m
        print(f"{args.model} ({describe(blob)}) on {args.parts_dir}: "
              + " ".join(f"{s}_{name} " + ("n/a" if res[f"{s}_{m}"] is None else f"{res[f'{s}_{m}']:.4f}")
                         for s in task.splits))
    return 0


def cmd_embed(args) -> int:
    from gnnscale.outputs import check_output

    check_output(args.out, "--out", folder=True)  # before torch and the model load
    from gnnscale.config import TrainConfig
    from gnnscale.partitioning import load_meta, verify_parts
    from gnnscale.process.launch import launch_local
    from gnnscale.training.model_io import ModelFileError, describe, read_model_file

    blob = read_model_file(args.model)
    meta = load_meta(args.parts_dir)
    if not meta.get("typed") and int(meta["feature_dim"]) != int(blob["num_features"]):
        raise ModelFileError(f"{args.model} ({describe(blob)}) does not fit {args.parts_dir}: it reads "
                             f"{blob['num_features']} features, the partition has {meta['feature_dim']}")
    verify_parts(args.parts_dir)
    os.makedirs(args.out, exist_ok=True)
    saved = blob.get("config") or {}
    cfg = TrainConfig(timeout=args.timeout, verify=False, progress=False, device="cpu",
                      task="link" if meta.get("link") else "node",
                      sampler_backend=saved.get("sampler_backend", "auto"))
    res = launch_local("gnnscale.training.embed:embed_worker", meta["num_parts"],
                       args=(args.parts_dir, cfg, args.model, args.out), port=args.port)
    log.info("wrote the embeddings of %d nodes (%d per row) to %s: read them with "
             "gnnscale.training.embed.load_embeddings(%r)", sum(r["rows"] for r in res), res[0]["dim"], args.out,
             args.out)
    return 0


def cmd_predict(args) -> int:
    from gnnscale.outputs import check_output

    check_output(args.out, "--out")  # before torch, the model and the dataset load
    import numpy as np

    from gnnscale.datasets import load_dataset
    from gnnscale.training.model_io import load_model, predict_full_graph, predict_typed_graph

    model = load_model(args.model)
    data = load_dataset(args.dataset, root=args.root)
    if getattr(data, "node_types", None) is not None:  # a typed graph
        out = predict_typed_graph(model, data)
    else:
        out = predict_full_graph(model, data.x.float(), data.edge_index, getattr(data, "edge_attr", None))
    from gnnscale.datasets.targets import target_kind

    kind = target_kind(data) if data.y is not None else "class"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if kind != "class":  # the outputs: a binary logit [N], multilabel logits [N, C], regression values
        np.save(args.out, (out.reshape(-1) if kind == "binary" else out).numpy().astype(np.float32))
        log.info("wrote %s: %s outputs of %d nodes (%s targets)", args.out, tuple(out.shape), out.shape[0], kind)
        return 0
    pred = out.argmax(1)
    np.save(args.out, pred.numpy().astype(np.int64))
    mask = getattr(data, "test_mask", None)
    extra = ""
    if mask is not None and data.y is not None and mask.dim() == 1:
        extra = f"; test accuracy {float((pred[mask] == data.y[mask]).float().mean()):.4f}"
    log.info("wrote %s: %d predictions%s", args.out, pred.numel(), extra)
    from gnnscale.training.evaluate import sampled_evaluation
    from gnnscale.training.model_io import read_model_file

    fanouts = sampled_evaluation(read_model_file(args.model))
    if fanouts is not None:  # the run's evaluation (and gnnscale evaluate's) drew neighbours: other logits
        log.info("predictions use every neighbour; the run evaluated with fan-outs %s, so its accuracy (and gnnscale "
                 "evaluate's) may differ: gnnscale evaluate --eval-method layerwise computes these logits",
                 ",".join(map(str, fanouts)))
    return 0


def cmd_report(args) -> int:
    from gnnscale.cli.report import write_report
    from gnnscale.outputs import check_output

    check_output(args.out, "--out", folder=True)
    out = write_report(args.metrics, args.out)
    for path in out["files"]:
        log.info("wrote %s", path)
    print(out["summary"], end="")
    return 0


def cmd_info(args) -> int:
    from gnnscale.partitioning import load_meta, summarize
    from gnnscale.partitioning.manifest import check_parts

    summary = summarize(args.dir)
    bad = check_parts(args.dir)  # every part's files against meta.json's sha256
    summary["check"] = {"ok": not bad, "problems": {str(p): probs for p, probs in bad.items()}}
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
        return _check_failed(args.dir, bad)
    print(f"partition folder: {args.dir}")
    for key in ("format_version", "dataset", "method", "num_parts", "num_nodes", "num_edges", "feature_dim",
                "feature_dtype", "num_classes", "target_kind", "edge_feature_dim", "partition_seconds"):
        if key == "feature_dim" and "feature_dims" in summary:  # typed: each node type's own
            print(f"  {'feature_dim':18s} per node type: " + ", ".join(
                f"{t} {d}" + (" (learned embedding)" if not d else "") for t, d in summary["feature_dims"].items()))
        elif key in summary:
            print(f"  {key:18s} {summary[key]}")
    cut = summary.get("edge_cut")
    if cut is not None:
        print(f"  {'edge_cut':18s} {cut}")
    temporal = summary.get("temporal")
    if temporal:  # edge times, each node's in-edges ordered by time
        print(f"  {'temporal':18s} {temporal['events']} timed events, times {temporal['time_min']} .. "
              f"{temporal['time_max']}, in-edges ordered by time (T-CSR), from {temporal.get('source', 'edge_time')}")
    link = load_meta(args.dir).get("link")
    if link:  # a link-prediction split: its metric and counts
        print(f"  {'link_split':18s} metric {link['metric']}, " + ", ".join(f"{k} {v}" for k, v in link["counts"].items()))
    if summary.get("input"):  # the identity of the files it was cut from (the partition cache's check)
        from gnnscale.datasets.inputs import describe_identity

        first, *files = describe_identity(summary["input"])
        print(f"  {'input':18s} {first}")
        for line in files:
            print(f"    {line}")
    typed = summary.get("typed")
    if typed:
        print(f"  {'target_type':18s} {typed.get('target_type')}")
        print(f"  node types ({len(typed['types'])}):")
        print("  " + " ".join(f"{c:>12s}" for c in ("type", "nodes", "feature_dim", "balance", "per part")))
        for row in typed["types"]:
            print("  " + " ".join(f"{str(v):>12s}" for v in (row["type"], row["nodes"], row["feature_dim"],
                                                             f"{row['balance']:.3f}")) + "  " + str(row["per_part"]))
        print(f"  relations ({len(typed['relations'])}):")
        print("  " + " ".join(f"{c:>12s}" for c in ("relation", "src", "dst", "edges", "cut", "cut_%")))
        for row in typed["relations"]:
            print("  " + " ".join(f"{str(v):>12s}" for v in (row["relation"], row["src"], row["dst"], row["edges"],
                                                             row["cut"], f"{100 * row['cut_fraction']:.2f}")))
    parts = summary.get("parts", [])
    if parts:
        cols = list(parts[0].keys())
        print("  " + " ".join(f"{c:>12s}" for c in cols))
        for row in parts:
            print("  " + " ".join(f"{str(row[c]):>12s}" for c in cols))
    print(f"  {'files':18s} " + ("every part's files match meta.json's sha256" if not bad else
                                 f"{sum(map(len, bad.values()))} problem(s) in part(s) {sorted(bad)}:"))
    for p, probs in bad.items():
        for problem in probs:
            print(f"    part {p}: {problem}")
    return _check_failed(args.dir, bad)


def _check_failed(folder, bad: dict) -> int:
    """``gnnscale info``'s exit status: 0 when every part's files pass their check, else 2 (and
    one line on stderr)."""
    if not bad:
        return 0
    print(f"gnnscale info: error: expected every file of the partition folder {folder} to match meta.json's "
          f"sha256, found {sum(map(len, bad.values()))} that do not (part(s) {sorted(bad)}, listed above); re-run "
          "`gnnscale partition` to rewrite the partition folder", file=sys.stderr)
    return 2



def cmd_bench_partition(args) -> int:
    from gnnscale.outputs import check_output

    check_output(args.out, "--out", folder=True)  # before torch and the dataset load
    from gnnscale.partitioning.bench import PEAK_NOTE, format_same, format_table, format_typed, run_bench, save
    from gnnscale.datasets import load_dataset

    data = load_dataset(args.dataset, root=args.root)
    rows = run_bench(  # progress on stderr (the log), one line per method; the table once, below
        data, args.parts, args.methods, fanouts=args.fanouts, batch_size=args.batch_size,
        balance=args.balance, imbalance=args.imbalance, seed=args.seed,
    )
    print(f"dataset {args.dataset}: {data.num_nodes} nodes, {data.edge_index.size(1)} edges; "
          f"remote bytes for fanouts {args.fanouts}, batch {args.batch_size}; {PEAK_NOTE}")
    print(format_table(rows))
    for extra in (format_typed(rows), format_same(rows)):  # typed: cut per relation, balance per type
        if extra:
            print(extra)
    if args.out:
        info = {"dataset": args.dataset, "num_nodes": int(data.num_nodes), "num_edges": int(data.edge_index.size(1)),
                "fanouts": args.fanouts, "batch_size": args.batch_size, "seed": args.seed}
        for path in save(rows, Path(args.out), info):
            log.info("wrote %s", path)
    return 0


def cmd_datasets(args) -> int:
    from gnnscale.cli.dataset_help import TEXT  # gnnscale.datasets.DATASET_HELP, without importing torch

    print(TEXT, end="")
    return 0

