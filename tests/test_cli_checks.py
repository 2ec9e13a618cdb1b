"""Issue 44 (items 4, 4b, 5, 8, 9): `gnnscale train` and `gnnscale.train` check the same things,
before anything runs, with one line that names what to fix; a printed or saved configuration runs
again; the help says what is true."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import gnnscale
from gnnscale.errors import GnnscaleError
from test_cli import cli_in_process

REPO = Path(__file__).resolve().parents[1]


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"CI": "1"}
    return subprocess.run([sys.executable, "-m", "gnnscale", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture
def main_cli(monkeypatch):
    """``main_cli(*args)``: ``gnnscale ARGS`` in this process (``gnnscale.cli.main.main``, what ``python -m
    gnnscale`` calls), as a CompletedProcess: its exit status (returned, or argparse's SystemExit) and
    what it printed (:func:`test_cli.cli_in_process`). The same environment as :func:`cli` (no GNNSCALE_FAULT,
    CI=1); an exception other than SystemExit (a traceback) propagates and fails the test. ``cli`` (a subprocess) stays for the
    launches that check a fresh interpreter."""
    monkeypatch.delenv("GNNSCALE_FAULT", raising=False)
    monkeypatch.setenv("CI", "1")
    return cli_in_process


def one_line(r: subprocess.CompletedProcess, *needles: str) -> str:
    """The one line of a refused command (exit 2, no traceback), which holds every needle."""
    assert r.returncode == 2, (r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr[-3000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


class Launched(Exception):
    """Raised by the stand-in launcher: the run got past every check."""

    def __init__(self, args):
        super().__init__("launched")
        self.args_ = args


@pytest.fixture
def no_launch(monkeypatch):
    """gnnscale.train up to the launch: the stand-in raises Launched with the workers' arguments."""
    import gnnscale.process.launch as launch

    def fake(target, nprocs, args=(), **kw):
        raise Launched(args)

    monkeypatch.setattr(launch, "launch_local", fake)


# --- item 4: options that would be ignored are refused, the same by the CLI and the API -------------

def test_partition_options_with_parts_dir_are_refused(cora_partition):
    r = cli("train", "--parts-dir", cora_partition(2), "--method", "random", "--imbalance", "0.5", "--balance", "edges",
            "--root", "/nonexistent", "--cache-dir", "/x", "--method-opt", "slack=3")
    one_line(r, "--method", "--imbalance", "--balance", "--root", "--cache-dir", "--method-opt", "gnnscale partition")


@pytest.mark.parametrize("kw, name", [
    (dict(method="random"), "--method"), (dict(root="/nonexistent"), "--root"), (dict(cache_dir="/x"), "--cache-dir"),
    (dict(imbalance=0.5), "--imbalance"), (dict(balance=["edges"]), "--balance"),
    (dict(method_opt={"slack": 3}), "--method-opt"), (dict(partition_seed=3), "partition_seed"),
])
def test_api_refuses_partition_options_with_parts_dir(cora_partition, no_launch, kw, name):
    with pytest.raises(GnnscaleError, match=re.escape(name)) as err:
        gnnscale.train(parts_dir=cora_partition(2), **kw)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("args, kw", [
    (["--staleness", "3"], dict(staleness=3)),
    (["--fanouts", "10,10", "--eval-fanouts", "5"], dict(fanouts=[10, 10], eval_fanouts=[5])),
    (["--method", "random"], dict(method="random")),
    (["--workers", "3"], dict(workers=3)),
])
def test_cli_and_api_refuse_with_the_same_line(cora_partition, no_launch, main_cli, args, kw):
    parts = cora_partition(2)
    line = one_line(main_cli("train", "--parts-dir", parts, *args))
    with pytest.raises(GnnscaleError) as err:
        gnnscale.train(parts_dir=parts, **kw)
    # the same check and line, where Python names the keyword (fanouts) and the command line its flag (--fanouts)
    as_flags, texts = str(err.value), dict(zip(args[::2], args[1::2]))
    for name, value in kw.items():
        cli = "--" + name.replace("_", "-")
        if as_flags.startswith(f"{name}={value!r}"):
            as_flags = as_flags.replace(f"{name}={value!r}", f"{cli} {texts.get(cli)}", 1)
        as_flags = re.sub(rf"(^|leave ){name}\b(?!=)", rf"\g<1>{cli}", as_flags)
    assert line == f"gnnscale train: error: {as_flags}"


def test_api_errors_name_keywords_and_the_cli_flags(cora_partition, no_launch, main_cli):
    """Issue 54 item 10: gnnscale.train names its keywords (and suggests the near one), the CLI its flags."""
    parts = cora_partition(2)
    with pytest.raises(GnnscaleError) as err:
        gnnscale.train(parts_dir=parts, epoch=3)
    assert str(err.value) == ("unknown training option(s) 'epoch' (did you mean 'epochs'?); valid ones: "
                              "gnnscale.config.TrainConfig's fields and train()'s own keywords")
    with pytest.raises(GnnscaleError) as err:
        gnnscale.train(parts_dir=parts, partition_sed=1)
    assert "(did you mean 'partition_seed'?)" in str(err.value)
    with pytest.raises(GnnscaleError) as err:
        gnnscale.train(parts_dir=parts, fanouts="10,x")
    assert str(err.value) == "fanouts expects integers, e.g. [10, 10] or '10,10'; found '10,x'"
    with pytest.raises(GnnscaleError) as err:
        gnnscale.train(parts_dir=parts, pos_weight=-1)
    assert str(err.value) == ("pos_weight must be auto or a positive number; found -1. Pass pos_weight='auto' "
                              "(negatives / positives of the training labels) or e.g. pos_weight=3.")
    with pytest.raises(GnnscaleError) as err:
        gnnscale.train(parts_dir=parts, hidden=0)
    assert str(err.value) == "hidden must be an integer of at least 1; found 0"
    assert one_line(main_cli("train", "--parts-dir", parts, "--hidden", "0")) == \
        "gnnscale train: error: --hidden must be an integer of at least 1; found 0"


@pytest.mark.parametrize("size", ["250%", "fraction=1.5", "2.5", "fraction=-0.1", "rows=-1"])
def test_cache_size_out_of_range_is_refused_before_any_worker(cora_partition, no_launch, main_cli, size):
    """Issue 54 item 10: --cache-size 250% was accepted, then clamped by two log lines per rank."""
    parts = cora_partition(2)
    line = one_line(main_cli("train", "--parts-dir", parts, "--cache-policy", "degree", "--cache-size", size))
    assert line == (f"gnnscale train: error: --cache-size must be between 0 and 100% of the remote rows (a fraction 0 "
                    f"to 1), or rows/bytes of at least 0; found {size!r}. Pass e.g. --cache-size 100% (every remote "
                    "row) or --cache-size rows=5000")
    with pytest.raises(GnnscaleError, match=r"^cache_size must be between 0 and 100%.*cache_size='100%'"):
        gnnscale.train(parts_dir=parts, cache_policy="degree", cache_size=size)
    for fine in ("100%", "1.0", "0", "rows=100000", "bytes=1GB"):
        with pytest.raises(Launched):
            gnnscale.train(parts_dir=parts, cache_policy="degree", cache_size=fine)


def test_api_takes_fanouts_as_the_cli_does(cora_partition, no_launch):
    with pytest.raises(Launched) as run:
        gnnscale.train(parts_dir=cora_partition(2), fanouts="10,10", eval_fanouts="-1,-1", stage_layers=None)
    cfg = run.value.args_[1]
    assert list(cfg.fanouts) == [10, 10] and list(cfg.eval_fanouts) == [-1, -1]
    with pytest.raises(GnnscaleError, match=r"^fanouts expects integers, e.g. \[10, 10\] or '10,10'; found '10,x'"):
        gnnscale.train(parts_dir=cora_partition(2), fanouts="10,x")
    with pytest.raises(GnnscaleError, match=r"^fanouts expects integers.*found \['1', '0'\]"):
        gnnscale.train(parts_dir=cora_partition(2), fanouts=["1", "0"])


def test_dgl_layer_is_checked_before_any_worker(cora_partition, no_launch, main_cli):
    import importlib.util

    if importlib.util.find_spec("dgl") is not None:
        pytest.skip("DGL is installed here")
    line = one_line(main_cli("train", "--parts-dir", cora_partition(2), "--layer", "dgl:SAGEConv"),
                    "--layer dgl:SAGEConv", "torch <= 2.2.1", "torch_geometric.nn:SAGEConv")
    assert "gnnscale[dgl]" not in line
    with pytest.raises(GnnscaleError) as err:
        gnnscale.train(parts_dir=cora_partition(2), layer="dgl:SAGEConv")
    assert line == f"gnnscale train: error: {err.value}"


# --- item 4b: a printed or saved configuration runs again -----------------------------------------

RUNS = {
    "default": [],
    "layer pipeline": ["--pipeline-stages", "2", "--micro-batches", "2", "--schedule", "gpipe"],
    "chunks": ["--chunks", "--pipeline-stages", "2", "--layer", "gcnii", "--num-layers", "4"],
    "typed": ["--dataset", "acm:/data/acm", "--layer", "rgcn", "--relation-fanouts", '{"pa": [5, 5]}'],
    "link": ["--task", "link", "--edge-split", "0.8,0.1,0.1", "--decoder", "mlp", "--link-metric", "hits@10"],
    "historical": ["--exchange", "historical", "--staleness", "3", "--embedding-dtype", "bfloat16"],
    "partition options": ["--method", "ldg", "--method-opt", "slack=3", "--method-opt", "passes=2", "--balance", "edges"],
    "host reads": ["--host-features", "--no-host-graph", "--eval-fanouts", "-1,-1", "--stage-layers", "1,1"],
}


def _print_config(capsys, *args: str) -> str:
    from gnnscale.cli.main import main

    assert main(["train", *args, "--print-config"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("run", list(RUNS))
def test_printed_config_runs_again(capsys, tmp_path, run):
    first = _print_config(capsys, *RUNS[run])
    path = tmp_path / "run.yaml"
    path.write_text(first)
    assert _print_config(capsys, "--config", str(path)) == first


def test_saved_config_runs_again(cora_partition, tmp_path, capsys):
    """A run's saved configuration (beside --metrics) prints back unchanged. The run is ``gnnscale
    train`` in this process (its workers forked from the suite's server, as other in-process runs'),
    which writes the file as a launched one does."""
    from gnnscale.cli.main import main

    metrics = tmp_path / "m.json"
    assert main(["train", "--parts-dir", cora_partition(2), "--epochs", "1", "--fanouts", "5,5", "--batch-size", "64",
                 "--hidden", "16", "--no-verify", "--metrics", str(metrics)]) == 0
    saved = tmp_path / "m.config.yaml"
    assert _print_config(capsys, "--config", str(saved)) == saved.read_text()
    assert yaml.safe_load(saved.read_text())["host-features"] is None


# --- item 5: an in-memory graph -------------------------------------------------------------------

def test_api_says_what_a_dataset_may_be(no_launch, tmp_path):
    from torch_geometric.data import Data
    import torch

    with pytest.raises(GnnscaleError, match="expected a dataset name string") as err:
        gnnscale.train({"x": torch.zeros(3, 2)})
    assert "torch_geometric Data" in str(err.value) and "dict" in str(err.value) and "\n" not in str(err.value)
    # an in-memory Data is a dataset (issue 46 item 1, tests/test_inmemory_data.py): a bad one is its one line
    with pytest.raises(GnnscaleError, match="^expected data.edge_index, an integer tensor") as err:
        gnnscale.train(Data(x=torch.zeros(3, 2)), cache_dir=str(tmp_path))
    assert "\n" not in str(err.value)


# --- item 8: errors that name what to fix ---------------------------------------------------------

def test_eval_fanouts_error_names_the_option(cora_partition, main_cli):
    one_line(main_cli("train", "--parts-dir", cora_partition(2), "--fanouts", "10,10", "--eval-fanouts", "5"),
             "--eval-fanouts")


def test_a_bad_flag_value_is_one_line(main_cli):
    line = one_line(main_cli("train", "--fanouts", "10,x"), "--fanouts", "'10,x'", "gnnscale train --help")
    assert "usage:" not in line


def test_unknown_dataset_points_to_gnnscale_datasets(tmp_path, main_cli):
    one_line(main_cli("partition", "--dataset", "nosuchset", "--parts", "2", "--out", str(tmp_path / "o")),
             "`gnnscale datasets`")


def test_dataset_errors_name_the_cli_flag_too(tmp_path, main_cli):
    line = one_line(main_cli("partition", "--dataset", "ogbn-arxiv?download=false", "--root", str(tmp_path),
                             "--parts", "2", "--out", str(tmp_path / "o")), "--root")
    assert "root=<" not in line


def test_missing_ogb_says_what_installs_it(monkeypatch, tmp_path):
    from gnnscale.datasets import load_dataset

    monkeypatch.setitem(sys.modules, "ogb", None)  # `import ogb` fails
    for name in ("ogbn-arxiv", "ogbl-collab"):
        with pytest.raises(GnnscaleError, match=re.escape("pip install ogb")) as err:
            load_dataset(name, root=str(tmp_path))
        assert "gnnscale[ogb]" not in str(err.value)


EXAMPLES = sorted(p.name for p in (REPO / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES)
def test_examples_end_with_the_message(tmp_path, monkeypatch, run_example, script):
    """Every example refuses a bad option with the one line and exit 2 (no traceback around it).
    The script runs in this process as ``python examples/SCRIPT --epochs 0`` runs it (conftest's
    ``run_example``: runpy, as ``__main__``, its own path in argv[0]): each refuses before any worker
    starts, so a subprocess would only add its interpreter's imports; an exception other than
    SystemExit (a traceback) propagates and fails the test. The PyG loops of tests/test_examples.py
    start the scripts as users do."""
    monkeypatch.setenv("CI", "1")
    r = run_example(tmp_path, script, "--epochs", "0")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-3000:]
    assert r.stderr.strip().splitlines()[-1].startswith(f"{script}: error: --epochs must be an integer of at least 1")


# --- item 9: help and small gaps ------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["train", "partition", "evaluate", "bench-partition"])
def test_help_prints_each_default_once(cmd):
    r = cli(cmd, "--help")
    assert r.returncode == 0, r.stderr
    assert "(default: None)" not in r.stdout
    assert not re.search(r"\(default: [^)]*\)\s+\(default:", r.stdout), r.stdout
    flat = " ".join(r.stdout.split())
    assert not re.search(r"\(default: [\[(]", flat), flat  # a list as the command line takes it (issue 54)
    if cmd == "bench-partition":
        for shown in ("(default: 2,4,8)", "(default: metis,random,ldg,fennel)", "(default: nodes,train)",
                      "(default: 10,10)"):
            assert shown in flat, (shown, flat)
    if cmd == "train":
        flat = " ".join(r.stdout.split())
        assert "(default: the number of parts, or 2)" in flat and "(default: 10)" in flat
    if cmd == "partition":  # required options have no default
        block = r.stdout.split("--parts PARTS", 1)[1].split("--out", 1)[0]
        assert "default" not in block, block


def test_help_names_every_dataset_source_and_the_task():
    from gnnscale.cli.parser import build_parser

    train = build_parser().subcommands["train"]
    dataset = next(a for a in train._actions if a.dest == "dataset")
    for name in ("planetoid:", "npz:", "dir:", "humloc:", "acm:", "hetero-dir:", "synthetic-mag", "ogbn-", "ogbl-"):
        assert name in dataset.help, name
    r = cli("--help")
    assert "GraphSAGE" not in r.stdout.split("COMMAND")[0] and "train GraphSAGE" not in r.stdout


def test_version():
    r = cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"gnnscale {gnnscale.__version__}"


DATASETS_PROBE = """
import sys
from gnnscale.cli.main import main
assert main(["datasets"]) == 0
print("HEAVY", sorted(m for m in ("torch", "torch_geometric", "numba") if m in sys.modules))
"""


def test_datasets_prints_without_importing_torch():
    from gnnscale.datasets import DATASET_HELP

    r = subprocess.run([sys.executable, "-c", DATASETS_PROBE], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text, heavy = r.stdout.rsplit("HEAVY", 1)
    assert heavy.strip() == "[]"
    assert text == DATASET_HELP


TRAIN_HELP_PROBE = """
import sys
from gnnscale.cli.main import main
try:
    main(["train", "--help"])
except SystemExit as exit:
    assert exit.code == 0, exit.code
print("HEAVY", sorted(m for m in ("torch", "torch_geometric", "numba") if m in sys.modules))
"""


def test_train_help_prints_without_importing_torch_one_group_per_section():
    """``gnnscale train --help`` is made from the options' table (gnnscale.config, torch-free): one
    group per section, every TrainConfig field's flag in it."""
    from dataclasses import fields

    from gnnscale.config import SECTIONS, TrainConfig

    r = subprocess.run([sys.executable, "-c", TRAIN_HELP_PROBE], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    text, heavy = r.stdout.rsplit("HEAVY", 1)
    assert heavy.strip() == "[]"
    for title in SECTIONS.values():
        assert f"\n{title}:\n" in text, title
    for f in fields(TrainConfig):
        assert f"--{f.name.replace('_', '-')}" in text, f.name


def test_load_embeddings_is_exported():
    from gnnscale import load_embeddings
    from gnnscale.training.embed import load_embeddings as original

    assert load_embeddings is original


API_RUN = """
import gnnscale
gnnscale.train("synthetic?num_nodes=400&num_features=8&num_classes=3&seed=0", cache_dir={cache!r}, workers=1,
               epochs=1, fanouts=[5, 5], batch_size=64, hidden=8)
"""


def test_api_logs_what_the_cli_logs(tmp_path):
    """A plain script calling gnnscale.train (a fresh interpreter: no logging set up by anyone else) logs
    the partitioning, the launch and the summary to stderr as the CLI does; one worker (one process to
    spawn: the logging is the launcher's, the same for any worker count)."""
    env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"CI": "1"}
    r = subprocess.run([sys.executable, "-c", API_RUN.format(cache=str(tmp_path))], capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    for needle in ("partitioning synthetic", "starting 1 local worker(s)", "done: 1 epoch, data parallel over 1"):
        assert needle in r.stderr, (needle, r.stderr[-3000:])
    assert r.stderr.count("partitioning ") == 1, r.stderr[-3000:]  # one line per cut (issue 54 item 10)


def test_a_dataset_error_comes_before_any_partitioning_line(tmp_path, main_cli):
    """Issue 54 item 10: a dataset whose files are missing printed 'partitioning X into 2 parts' first."""
    r = main_cli("train", "--dataset", "planetoid:cora", "--root", str(tmp_path / "empty"), "--cache-dir",
                 str(tmp_path / "cache"), "--epochs", "1")
    assert r.returncode == 2 and "partitioning" not in r.stderr, r.stderr[-3000:]
    assert "error: " in r.stderr.strip().splitlines()[-1]


def test_pyg_gat_with_heads_says_concat_false():
    from gnnscale.nn.layers import build_conv

    with pytest.raises(GnnscaleError, match=r"concat=False") as err:
        build_conv("torch_geometric.nn:GATConv", 8, 4, index=0, num_layers=2, heads=2)
    assert "2 heads" in str(err.value)
    assert build_conv("torch_geometric.nn:GATConv", 8, 4, index=0, num_layers=2, heads=2, concat=False)
