"""Every ``train`` option against every mode (issue 26): honoured, or rejected before any worker
starts with an error that names the option and the mode. No option is silently ignored.

For each option and mode there is a case: the option set (with what it needs, e.g. ``--cache-size``
needs a ``--cache-policy``) beside a baseline without it. Where the plan says the option applies
(:data:`gnnscale.planning.plan.APPLIES`), both run, for real, in the same worker processes of
that mode (data parallel: 2 workers on Cora's 2 parts; layer pipeline: 2 pipelines x 2 stages on
4 workers; chunk pipeline: 2 stages over Cora's 4 parts), and a check asserts that the run's
figures, files or weights changed as the option says. Elsewhere ``gnnscale.train`` must raise
the plan's error before launching. A new option without a case fails the test.
"""
from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch

import gnnscale
from gnnscale.config import TrainConfig
from gnnscale.errors import GnnscaleError
from gnnscale.planning.plan import APPLIES, CHUNK_PIPELINE, DATA_PARALLEL, LAYER_PIPELINE, MODE_NAMES, REQUIRES, plan_run
from gnnscale.process.launch import launch_local

MODES = {
    DATA_PARALLEL: dict(parts=2, workers=2, base=dict(epochs=1, fanouts=(5, 5), batch_size=32)),
    LAYER_PIPELINE: dict(parts=2, workers=4, base=dict(epochs=1, fanouts=(5, 5), batch_size=16, pipeline_stages=2,
                                                       micro_batches=2)),
    # The chunk pipeline's split is pinned: measured by default, a split that the timings move
    # moves the stale tables with it (another training), and the checks compare weights.
    CHUNK_PIPELINE: dict(parts=4, workers=2, base=dict(epochs=2, chunks=True, pipeline_stages=2, layer="gcnii",
                                                       num_layers=4, stage_layers=(2, 2))),
}
COMMON = dict(hidden=16, eval_every=0, verify=False, progress=False, timeout=60.0, device="cpu")


def differs(key):
    return lambda b, v, tmp: v[key] != b[key]


def last(key):
    return lambda s: s["last"][key]


def _tb_tags(folder: Path) -> set:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return set(acc.Tags()["scalars"])


def _steps_kept(folder: Path) -> int:
    return len([p for p in folder.iterdir() if p.name.startswith("step-")])


def cases(mode: str, tmp: Path) -> dict:
    """option -> (variant overrides, baseline overrides, check(baseline, variant, tmp)); the
    overrides hold what the option needs (its companions)."""
    cp = mode == CHUNK_PIPELINE
    ids = tmp / "cache_ids.npy"
    np.save(ids, np.arange(0, 2708, 3, dtype=np.int64))
    ck = tmp / f"ck-{mode}"
    return {
        "epochs": ({"epochs": 3}, {}, lambda b, v, t: v["epochs"] == 3),
        "fanouts": (({"fanouts": (-1, -1, -1), "num_layers": None, "stage_layers": (2, 1)} if cp else {"fanouts": (3, 3)}),
                    {},
                    (lambda b, v, t: v["plan"]["num_layers"] == 3) if cp else differs("digest")),
        # typed graphs only (Cora has one relation): refused here, honoured in test_typed_training
        "relation_fanouts": ({"relation_fanouts": {"cites": [3, 3]}}, {}, None),
        "eval_fanouts": ({"eval_fanouts": (3, 3), "eval_every": 1}, {"eval_every": 1},
                         lambda b, v, t: v["last"]["evaluation"]["fanouts"] == [3, 3] != b["last"]["evaluation"]["fanouts"]),
        "batch_size": ({"batch_size": 8}, {}, lambda b, v, t: v["steps"][0] > b["steps"][0]),
        "eval_batch_size": ({"eval_batch_size": 64, "eval_every": 1}, {"eval_every": 1},
                            lambda b, v, t: v["last"]["evaluation"]["batches"] > b["last"]["evaluation"]["batches"]),
        "hidden": ({"hidden": 24}, {}, differs("digest")),
        # a user's whole PyG model (tests/test_user_model.py): data parallel only
        "model": ({"model": "torch_geometric.nn.models:GraphSAGE"}, {}, differs("digest")),
        "model_kwargs": ({"model": "torch_geometric.nn.models:GraphSAGE", "model_kwargs": {"jk": "last"}},
                         {"model": "torch_geometric.nn.models:GraphSAGE"}, differs("digest")),
        "lr": ({"lr": 0.05}, {}, differs("digest")),
        "weight_decay": ({"weight_decay": 0.1}, {}, differs("digest")),
        "dropout": ({"dropout": 0.1}, {}, differs("digest")),
        # GCNII's stack ends in a linear head in every mode (a convolution-ended stack refuses it)
        "head_dropout": ({"head_dropout": 0.5, "layer": "gcnii"}, {"layer": "gcnii"}, differs("digest")),
        # lr 0: the validation figure never improves after the first evaluation, so patience 1 stops after 2 epochs
        # and restores epoch 0's weights
        "early_stop_patience": ({"early_stop_patience": 1, "epochs": 3, "eval_every": 1, "lr": 0.0},
                                {"epochs": 3, "eval_every": 1, "lr": 0.0},
                                lambda b, v, t: v["epochs"] == 2 and b["epochs"] == 3 and b["early_stop"] is None
                                and v["early_stop"]["stopped"] and v["early_stop"]["restored"]["epoch"] == 0),
        "seed": ({"seed": 5}, {}, differs("digest")),
        "eval_every": ({"eval_every": 1}, {}, lambda b, v, t: v["last"].get("val_acc") is not None
                       and b["last"].get("val_acc") is None),
        "max_steps": ({"max_steps": 1}, {}, lambda b, v, t: v["steps"] == [1] and b["steps"][0] > 1),
        "timeout": ({"timeout": 30.0}, {}, lambda b, v, t: v["process"]["timeout"] == 30.0 != b["process"]["timeout"]),
        "metrics": ({"metrics": str(tmp / f"m-{mode}.json")}, {},
                    lambda b, v, t: json.loads((t / f"m-{mode}.json").read_text())["final_weights_sha256"] == v["digest"]),
        "progress": ({"progress": True}, {}, lambda b, v, t: v["process"]["progress_bar"]
                     and not b["process"]["progress_bar"]),
        "verify": ({"verify": True}, {}, lambda b, v, t: v["process"]["verified"] and not b["process"]["verified"]),
        "sampler_backend": ({"sampler_backend": "torch"}, {},
                            lambda b, v, t: v["process"]["sampler_backend"] == "torch" != b["process"]["sampler_backend"]),
        # fewer distinct input rows per epoch: a lower byte floor
        "sampler": ({"sampler": "labor"}, {}, lambda b, v, t: v["last"]["feature_bytes_floor"]
                    < b["last"]["feature_bytes_floor"] and v["digest"] != b["digest"]),
        "cache_policy": ({"cache_policy": "degree"}, {}, lambda b, v, t: v["cache"]["rows"] > 0 == b["cache"]["rows"]),
        "cache_size": ({"cache_policy": "degree", "cache_size": "rows=5"}, {"cache_policy": "degree"},
                       lambda b, v, t: v["cache"]["rows"] == 5 < b["cache"]["rows"]),
        "cache_file": ({"cache_policy": "file", "cache_file": str(ids)}, {"cache_policy": "degree"},
                       lambda b, v, t: v["cache"]["policy"] == "file" and v["cache"]["rows"] > 0),
        "presample_epochs": ({"cache_policy": "presample", "presample_epochs": 1}, {"cache_policy": "presample"},
                             lambda b, v, t: v["cache"]["presampled_epochs"] == 1 < b["cache"]["presampled_epochs"]),
        # the same rows, read from the folder: equal weights, no feature bytes exchanged (on by
        # default where it applies: the baseline turns it off)
        "host_features": ({"host_features": True}, {"host_features": False},
                          lambda b, v, t: v["last"]["feature_rows_host"] > 0 == b["last"]["feature_rows_host"]
                          and v["last"]["feature_bytes_fetched"] == 0 < b["last"]["feature_bytes_fetched"]
                          and v["digest"] == b["digest"]),
        # the same draws, made here from the folder's CSCs: equal weights, no sampling request sent
        "host_graph": ({"host_graph": True}, {"host_graph": False},
                       lambda b, v, t: v["last"]["bytes_sent_by_category"].get("sample_request", 0) == 0
                       < b["last"]["bytes_sent_by_category"].get("sample_request", 0)
                       and v["last"]["bytes_sent_by_category"].get("sample_response", 0) == 0
                       and v["digest"] == b["digest"]),
        "pipeline": ({"pipeline": True}, {}, lambda b, v, t: v["last"]["prefetch_depth"] == 2
                     and b["last"]["prefetch_depth"] is None),
        "pipeline_depth": ({"pipeline": True, "pipeline_depth": 3}, {"pipeline": True},
                           lambda b, v, t: v["last"]["prefetch_depth"] == 3),
        "net_bandwidth_gbps": ({"net_bandwidth_gbps": 10.0}, {},
                               lambda b, v, t: v["last"]["modelled_network_seconds"] > 0
                               == b["last"]["modelled_network_seconds"]),
        "net_latency_ms": ({"net_bandwidth_gbps": 10.0, "net_latency_ms": 5.0}, {"net_bandwidth_gbps": 10.0},
                           lambda b, v, t: v["last"]["modelled_network_seconds"] > b["last"]["modelled_network_seconds"]),
        # against exact exchange asking the owners (host reads off: with them, it asks nobody either)
        "exchange": ({"exchange": "local"}, {"host_graph": False},
                     lambda b, v, t: v["last"]["bytes_sent_by_category"].get("sample_request", 0) == 0
                     < b["last"]["bytes_sent_by_category"].get("sample_request", 0)),
        "staleness": (({"staleness": 8}, {}, lambda b, v, t: v["exchange"]["staleness"] == 8) if cp else
                      ({"exchange": "historical", "staleness": 8}, {"exchange": "historical"},
                       lambda b, v, t: v["exchange"]["push_interval"] == 4 != b["exchange"]["push_interval"])),
        "embedding_dtype": ({"exchange": "historical", "embedding_dtype": "bfloat16"}, {"exchange": "historical"},
                            lambda b, v, t: 0 < v["last"]["embedding_bytes"] < b["last"]["embedding_bytes"]),
        "halo_features": ({"exchange": "historical", "halo_features": "fetch"}, {"exchange": "historical"},
                          lambda b, v, t: v["last"]["feature_bytes_fetched"] > 0 == b["last"]["feature_bytes_fetched"]),
        "eval_method": ({"eval_method": "layerwise", "eval_every": 1}, {"eval_every": 1},
                        lambda b, v, t: v["last"]["evaluation"]["method"] == "layerwise"
                        != b["last"]["evaluation"]["method"]),
        "layer": ({"layer": "gcn"}, {}, differs("digest")),
        "layer_kwargs": (({"layer_kwargs": {"alpha": 0.3}}, {}, differs("digest")) if cp else
                         ({"layer_kwargs": {"bias": False}}, {}, differs("digest"))),
        "device": ({"device": "cuda"}, {}, None),  # no CUDA here: refused before any worker (see below)
        "norm": ({"norm": "layer"}, {}, differs("digest")),
        "residual": (({"residual": True}, {}, differs("digest")) if cp else
                     ({"residual": True, "fanouts": (5, 5, 5)}, {"fanouts": (5, 5, 5)}, differs("digest"))),
        "jk": ({"jk": "cat"}, {}, differs("digest")),
        "pipeline_stages": ({"pipeline_stages": 2}, {}, lambda b, v, t: len(v["stages"]) == 2),
        "stage_layers": (({"stage_layers": (3, 1)}, {}, lambda b, v, t: v["stages"] == [[0, 3], [3, 4]]) if cp else
                         ({"stage_layers": (2, 1), "fanouts": (5, 5, 5)}, {"fanouts": (5, 5, 5)},
                          lambda b, v, t: v["stages"] == [[0, 2], [2, 3]])),
        "micro_batches": ({"micro_batches": 4 if mode == LAYER_PIPELINE else 3}, {},
                          lambda b, v, t: v["steps"][0] < b["steps"][0]),
        "schedule": ({"schedule": "gpipe"}, {},
                     lambda b, v, t: max(s["peak_micro_batches"] for s in v["last"]["pipeline"] if s["stage"] == 1)
                     > max(s["peak_micro_batches"] for s in b["last"]["pipeline"] if s["stage"] == 1)),
        "chunks": ({"chunks": True}, {}, lambda b, v, t: v["plan"]["mode"] == CHUNK_PIPELINE),
        "halo_gradients": ({"halo_gradients": False}, {}, differs("digest")),
        "num_layers": (({"num_layers": 6, "stage_layers": (3, 3)}, {}, differs("digest")) if cp else
                       ({"num_layers": 3}, {}, None)),  # must equal the fanouts: 3 for 2 fanouts is refused
        "checkpoint_dir": ({"checkpoint_dir": str(ck / "a")}, {}, lambda b, v, t: _steps_kept(ck / "a") >= 1),
        "checkpoint_every": ({"checkpoint_dir": str(ck / "b"), "checkpoint_every": 1}, {},
                             lambda b, v, t: _steps_kept(ck / "b") == min(3, sum(v["steps"]))),
        "keep_checkpoints": ({"checkpoint_dir": str(ck / "c"), "keep_checkpoints": 1, "epochs": 3}, {},
                             lambda b, v, t: _steps_kept(ck / "c") == 1),
        "resume": ({"checkpoint_dir": str(ck / "d"), "resume": True, "epochs": 3},
                   {"checkpoint_dir": str(ck / "d"), "epochs": 1},
                   lambda b, v, t: v["resumed_at"] == sum(b["steps"]) and v["epochs"] == 3),
        "save_model": ({"save_model": str(tmp / f"model-{mode}.pt")}, {},
                       lambda b, v, t: _saved_digest(t / f"model-{mode}.pt") == v["digest"]),
        "tensorboard": ({"tensorboard": str(tmp / f"tb-{mode}")}, {},
                        lambda b, v, t: "loss/train" in _tb_tags(t / f"tb-{mode}")),
        # link prediction: Cora's node partition has no link split, so every mode refuses them here;
        # data parallel honours each on a link partition (test_link_training.py)
        "task": ({"task": "link"}, {}, None),
        **{name: ({"task": "link", name: value}, {}, None) for name, value in LINK_VALUES.items()},
        # temporal link prediction: Cora has no edge times, so every mode refuses them here; data
        # parallel honours each on a temporal partition (test_temporal_training.py)
        **{name: ({"task": "temporal_link", name: value}, {}, None) for name, value in TEMPORAL_VALUES.items()},
        # node targets: Cora's classes judged by macro-F1 instead of accuracy (the same training, another
        # figure, selected on); --pos-weight weighs binary / multilabel positives, refused on classes
        # (honoured in test_node_targets.py)
        "metric": ({"metric": "macro_f1", "eval_every": 1}, {"eval_every": 1},
                   lambda b, v, t: v["last"]["metric"] == "macro_f1" and b["last"]["metric"] == "accuracy"
                   and v["last"]["val_acc"] == v["last"]["val_macro_f1"] != b["last"]["val_acc"]
                   and v["digest"] == b["digest"]),
        "pos_weight": ({"pos_weight": "auto"}, {}, None),
        # Cora has no edge features: --edge-features on is refused in every mode (data parallel: by the
        # partition; the pipelines by the mode); honoured on HumLoc in test_edge_feature_training.py
        "edge_features": ({"edge_features": "on"}, {}, None),
        "log_every": ({"tensorboard": str(tmp / f"tb-steps-{mode}"), "log_every": 1},
                      {"tensorboard": str(tmp / f"tb-nosteps-{mode}")},
                      lambda b, v, t: "step/loss" in _tb_tags(t / f"tb-steps-{mode}")
                      and "step/loss" not in _tb_tags(t / f"tb-nosteps-{mode}")),
    }


LINK_VALUES = {"decoder": "mlp", "link_loss": "margin", "neg_sampling": "per_source", "num_negatives": 3,
               "filter_negatives": True, "link_metric": "hits@20", "exclude_seed_edges": False}
LINK = {"task", *LINK_VALUES}
TEMPORAL_VALUES = {"temporal_split": "0.6,0.2,0.2", "temporal_strategy": "uniform", "time_window": 1000,
                   "time_cut": "<=", "pair_features": False, "eval_negatives": 20, "eval_events": 100}
TEMPORAL = set(TEMPORAL_VALUES)
TARGET_ONLY = {"pos_weight"}  # refused by Cora's target kind (class), in every mode


def _saved_digest(path: Path) -> str:
    from gnnscale.training.metrics import weights_digest

    return weights_digest(gnnscale.load_model(path).parameters())


def _config(mode: str, overrides: dict) -> TrainConfig:
    return TrainConfig(**(COMMON | MODES[mode]["base"] | overrides))


# What each mode refuses (the rest it honours). On a machine without CUDA --device cuda is
# refused everywhere; --num-layers must equal the number of fanouts in the sampled modes.
REFUSED = {
    DATA_PARALLEL: {"stage_layers", "micro_batches", "schedule", "halo_gradients", "num_layers", "relation_fanouts",
                    *LINK, *TEMPORAL, *TARGET_ONLY},
    LAYER_PIPELINE: {"staleness", "embedding_dtype", "halo_features", "jk", "halo_gradients", "num_layers",
                     "relation_fanouts", "model", "model_kwargs", *LINK, *TEMPORAL, *TARGET_ONLY},
    CHUNK_PIPELINE: {"eval_fanouts", "batch_size", "eval_batch_size", "max_steps", "sampler_backend", "sampler",
                     "cache_policy",
                     "cache_size", "cache_file", "presample_epochs", "host_features", "host_graph", "pipeline", "pipeline_depth", "exchange",
                     "embedding_dtype", "halo_features", "eval_method", "jk", "micro_batches", "relation_fanouts", *LINK,
                     *TEMPORAL,
                     *TARGET_ONLY, "model", "model_kwargs"},
}
EDGE_ONLY = {"edge_features"}  # refused on Cora's partition (no edge features) or by the mode, naming both
REFUSED = {mode: names | EDGE_ONLY for mode, names in REFUSED.items()}
MODE_SELECTORS = {"pipeline_stages", "chunks"}  # they choose the mode: checked through the plan


def _refused(mode: str, name: str) -> bool:
    return name in REFUSED[mode] or (name == "device" and not torch.cuda.is_available())


def test_every_option_has_a_case(tmp_path):
    names = {f.name for f in fields(TrainConfig)}
    assert set(cases(DATA_PARALLEL, tmp_path)) == names == set(APPLIES)
    assert set(REQUIRES) <= names


@pytest.mark.parametrize("mode", [DATA_PARALLEL, LAYER_PIPELINE, CHUNK_PIPELINE])
def test_every_option_is_honoured_or_refused(cora_partition, tmp_path, mode):
    from dist_workers import run_configs

    spec = MODES[mode]
    parts = cora_partition(spec["parts"])
    table = cases(mode, tmp_path)
    runs: list[dict] = []  # overrides in the order they run (baselines first)
    index: dict[str, int] = {}
    plan: dict[str, tuple] = {}
    refused = []
    for name, (variant, baseline, check) in table.items():
        if (mode == DATA_PARALLEL and name in MODE_SELECTORS) or (mode == LAYER_PIPELINE and name == "chunks"):
            continue  # switches to another mode: that mode's run, and the plan below
        if _refused(mode, name):
            refused.append((name, variant))
            continue
        keys = []
        for over in (baseline, variant):
            key = json.dumps(over, sort_keys=True, default=str)
            if key not in index:
                index[key] = len(runs)
                runs.append(over)
            keys.append(index[key])
        plan[name] = (keys[0], keys[1], check)
    # Refused: before any worker starts, naming the option (and, from the plan, the mode).
    for name, variant in refused:
        with pytest.raises(GnnscaleError) as err:
            gnnscale.train(parts_dir=parts, workers=spec["workers"], **(COMMON | spec["base"] | variant))
        msg = str(err.value)
        flag = "--" + name.replace("_", "-")
        # gnnscale.train names its keywords (fanouts=...), the plan both forms (--fanouts (fanouts=...))
        named = flag in msg or (name == "num_layers" and ("--fanouts" in msg or "fanouts=" in msg)) or \
            (name in ("pipeline_stages", "chunks") and "--workers" in msg) or \
            (name == "model_kwargs" and "does not apply to --model" in msg)  # it rides on --model, refused first
        if mode == DATA_PARALLEL and name in LINK:  # what data parallel refuses is the partition (no link split)
            named = "--task link needs a link-prediction split" in msg
        if mode == DATA_PARALLEL and name in TEMPORAL:  # ... or no edge times
            named = "--task temporal_link needs timed events" in msg
        if name in TARGET_ONLY:  # what every mode refuses is the partition's target kind
            named = f"{flag} auto does not apply to the class targets of" in msg
        assert named, (name, msg)
        if type(err.value).__name__ == "PlanError" and name not in ("micro_batches", "pipeline_stages", "chunks") \
                and not (mode == DATA_PARALLEL and name in LINK | TEMPORAL) and name not in TARGET_ONLY:
            assert MODE_NAMES[mode].split(" (")[0] in msg or "stages" in msg, (name, msg)
    # Honoured: every run for real, in the same processes; each check on its figures.
    got = launch_local(run_configs, spec["workers"], args=(parts, [_config(mode, o) for o in runs]))[0]
    errors = [(i, g["error"]) for i, g in enumerate(got) if "error" in g]
    assert not errors, errors
    for name, (b, v, check) in plan.items():
        assert check(got[b], got[v], tmp_path), (name, runs[b], runs[v])
    if mode != CHUNK_PIPELINE:  # host reads are on by default: the plain run read the other part from the folder
        assert got[index["{}"]]["process"]["host_reads"] == {"features": True, "graph": True, "parts": 1}
        plain = got[index["{}"]]["last"]
        assert plain["feature_rows_host"] > 0 and plain["feature_bytes_fetched"] == 0
        assert plain["bytes_sent_by_category"].get("sample_request", 0) == 0
    if mode == CHUNK_PIPELINE:  # sampled fanouts mean nothing to full neighbourhoods
        with pytest.raises(GnnscaleError, match=r"--fanouts \(fanouts=\(5, 5\)\) does not apply to chunk pipelining"):
            gnnscale.train(parts_dir=parts, workers=2, **(COMMON | spec["base"] | {"fanouts": (5, 5)}))
    if mode != CHUNK_PIPELINE:  # the mode selectors, through the plan the launcher resolves
        assert plan_run(_config(mode, {"pipeline_stages": 2}), 2, 4).pp == 2
        chunked = TrainConfig(**(COMMON | {"chunks": True, "pipeline_stages": 2, "fanouts": (-1, -1)}))
        assert plan_run(chunked, 2, 2).mode == CHUNK_PIPELINE
    print(f"{mode}: {len(plan)} options honoured, {len(refused)} refused: {sorted(n for n, _ in refused)}")


def test_verify_is_honoured_in_every_mode(cora_partition, tmp_path):
    """A part whose features were changed after partitioning: with --verify the run refuses it
    (its sha256), without it trains."""
    import shutil

    src = Path(cora_partition(4))
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    x = np.load(bad / "part1" / "x.npy", mmap_mode="r+")
    x[0, 0] += 1.0
    x.flush()
    del x
    for mode, over in ((DATA_PARALLEL, dict(fanouts=(5, 5), batch_size=32, epochs=1)),
                       (CHUNK_PIPELINE, dict(chunks=True, pipeline_stages=2, layer="gcnii", num_layers=2, epochs=1))):
        workers = 4 if mode == DATA_PARALLEL else 2
        cfg = COMMON | over
        with pytest.raises(GnnscaleError, match="sha256"):
            gnnscale.train(parts_dir=str(bad), workers=workers, **(cfg | {"verify": True}))
        assert gnnscale.train(parts_dir=str(bad), workers=workers, **cfg)["epochs"]


def test_host_reads_are_on_where_they_apply_and_off_is_accepted_everywhere():
    """--host-features / --host-graph unset (auto): on in the sampled modes on untyped graphs
    (the graph's reads with exact exchange), off in chunk mode, for typed graphs and when a
    network is modelled; given, as given. Off is accepted in every mode, on refused where it
    does not apply, before any worker starts."""
    from dataclasses import replace

    from gnnscale.planning.plan import PlanError, check_options, host_reads

    dp, chunk = _config(DATA_PARALLEL, {}), _config(CHUNK_PIPELINE, {})
    assert dp.host_features is None and dp.host_graph is None
    assert host_reads(dp, DATA_PARALLEL) == (True, True)
    assert host_reads(_config(LAYER_PIPELINE, {}), LAYER_PIPELINE) == (True, True)
    assert host_reads(chunk, CHUNK_PIPELINE) == (False, False)
    assert host_reads(dp, DATA_PARALLEL, typed={"node_types": ["paper", "author"]}) == (False, False)
    assert host_reads(replace(dp, exchange="historical"), DATA_PARALLEL) == (True, False)
    assert host_reads(replace(dp, net_bandwidth_gbps=10.0), DATA_PARALLEL) == (False, False)
    assert host_reads(replace(dp, host_features=False, host_graph=False), DATA_PARALLEL) == (False, False)
    assert host_reads(replace(dp, net_bandwidth_gbps=10.0, host_features=True), DATA_PARALLEL) == (True, False)
    check_options(replace(chunk, host_features=False, host_graph=False), CHUNK_PIPELINE)
    check_options(replace(dp, exchange="historical", host_graph=False), DATA_PARALLEL)
    with pytest.raises(PlanError, match=r"--host-features \(host_features=True\) does not apply to chunk pipelining"):
        check_options(replace(chunk, host_features=True), CHUNK_PIPELINE)
    with pytest.raises(PlanError, match=r"--host-graph \(host_graph=True\) applies only with --exchange exact"):
        check_options(replace(dp, exchange="historical", host_graph=True), DATA_PARALLEL)


# --- one table per option (issue 45 item 4) ------------------------------------------------------

def test_the_parser_the_checks_and_the_plan_read_each_option_from_its_row():
    """Every ``train`` flag, its group in ``--help``, its range and choices in ``TrainConfig.check``
    and its row of the plan's APPLIES / REQUIRES come from the field's ``option(...)`` metadata."""
    from gnnscale.cli.parser import build_parser
    from gnnscale.config import OPTIONS, SECTIONS, OptionError, flag

    train = build_parser().subcommands["train"]
    actions = {a.dest: a for a in train._actions}
    group = {a.dest: g.title for g in train._action_groups for a in g._group_actions}
    assert list(OPTIONS) == [f.name for f in fields(TrainConfig)]
    assert {spec.section for spec in OPTIONS.values()} == set(SECTIONS)  # no empty group
    for name, spec in OPTIONS.items():
        a = actions[name]
        assert a.option_strings[0] == flag(name) and a.help == spec.help.replace("%", "%%"), name
        assert group[name] == SECTIONS[spec.section], name
        assert a.default == (list(spec.default) if spec.kind == "ints" and spec.default is not None
                             else spec.default), name
        assert (tuple(a.choices) if a.choices else None) == spec.choices and a.metavar == spec.metavar, name
        assert APPLIES[name] == (spec.applies, spec.why), name
        assert REQUIRES.get(name) == spec.requires, name
        assert TrainConfig(**{name: spec.default}).check()  # the default is in range
        bad = []
        if spec.choices:
            bad.append("no-such-value")
        if spec.at_least is not None:
            bad.append(spec.at_least - 1)
        if spec.below is not None:
            bad.append(spec.below)
        if spec.above is not None:
            bad.append(spec.above)
        for value in bad:
            with pytest.raises(OptionError, match=f"^{flag(name)} must be .*; found {value!r}$"):
                TrainConfig(**{name: value}).check()


def _other_value(spec):
    """A value of ``spec``'s option that is not its default, as a flag and as YAML loads it back."""
    if spec.kind == "bool":
        value = not spec.default if spec.default is not None else True
        return [("--" if value else "--no-") + spec.name.replace("_", "-")], value
    value = {"int": (spec.at_least or 0) + 7, "float": 0.25, "ints": [3, 2], "mapping": {"k": 1},
             "decay": "convs=0.01,0.0005", "str": "x"}[spec.kind]
    if spec.choices:
        value = next(c for c in reversed(spec.choices) if c != spec.default)
    text = json.dumps(value) if spec.kind == "mapping" else ",".join(map(str, value)) if spec.kind == "ints" \
        else str(value)
    return [f"{'--' + spec.name.replace('_', '-')}={text}"], value


def test_print_config_round_trips_every_option_through_config(tmp_path):
    """``--print-config`` with every option set to another value than its default prints a YAML
    file that ``--config`` reads back as the same run (flat keys, the flags' names)."""
    import os
    import subprocess
    import sys

    import yaml

    from gnnscale.config import OPTIONS

    flags, want = [], {}
    for name, spec in OPTIONS.items():
        given, value = _other_value(spec)
        flags += given
        want[name.replace("_", "-")] = value
    env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"CI": "1"}
    first = subprocess.run([sys.executable, "-m", "gnnscale", "train", "--print-config", *flags],
                           capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 0, first.stderr[-2000:]
    printed = yaml.safe_load(first.stdout)
    assert {k: printed[k] for k in want} == want
    (tmp_path / "run.yaml").write_text(first.stdout)
    again = subprocess.run([sys.executable, "-m", "gnnscale", "train", "--config", str(tmp_path / "run.yaml"),
                            "--print-config"], capture_output=True, text=True, timeout=120, env=env)
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr[-2000:]
