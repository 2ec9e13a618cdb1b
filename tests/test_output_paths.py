"""Issue 54, items 4 and 5: every output path is checked before any work starts (one line, exit 2,
the command line and gnnscale.train alike); a write that fails at the end keeps what was trained
and says where in one line; --layer, --layer-kwargs and --model are resolved by the launcher,
before any worker, in one line, once."""
from __future__ import annotations

import os
import re
import shutil

import pytest

import gnnscale
from gnnscale.errors import GnnscaleError
from test_cli_checks import Launched, main_cli, no_launch, one_line  # noqa: F401  (main_cli, no_launch: fixtures)


@pytest.fixture
def blocker(tmp_path):
    """A file where a folder would have to be."""
    path = tmp_path / "a_file"
    path.write_text("not a folder")
    return path


# --- item 4: every output option refused in one line before any work -----------------------------

TRAIN_OUTPUTS = [("--save-model", "save_model", "m.pt"), ("--metrics", "metrics", "m.json"),
                 ("--checkpoint-dir", "checkpoint_dir", "ck"), ("--tensorboard", "tensorboard", "tb")]


@pytest.mark.parametrize("flag, name, leaf", TRAIN_OUTPUTS)
@pytest.mark.parametrize("where", ["under a file", "/proc"])
def test_train_output_refused_before_any_work(cora_partition, no_launch, main_cli, blocker, flag, name, leaf, where):
    path = str(blocker / leaf) if where == "under a file" else f"/proc/{leaf}"
    found = f"{blocker} is a file" if where == "under a file" else "no file can be created in /proc"
    line = one_line(main_cli("train", "--parts-dir", cora_partition(2), flag, path), f"{flag} {path}", found)
    with pytest.raises(GnnscaleError) as err:  # the API refuses with the same line
        gnnscale.train(parts_dir=cora_partition(2), **{name: path})
    assert line == f"gnnscale train: error: {err.value}"


def test_train_output_refused_before_the_dataset_is_cut(tmp_path, no_launch, main_cli, blocker, shared_data):
    cache = tmp_path / "cache"
    one_line(main_cli("train", "--dataset", "planetoid:cora", "--root", str(shared_data / "planetoid" / "raw"),
                      "--cache-dir", str(cache), "--save-model", str(blocker / "m.pt")), "--save-model")
    assert not cache.exists()  # nothing was partitioned


@pytest.mark.parametrize("where", ["under a file", "/proc"])
def test_a_new_cache_folder_is_checked(no_launch, main_cli, blocker, shared_data, where):
    cache = str(blocker / "cache") if where == "under a file" else "/proc/cache"
    one_line(main_cli("train", "--dataset", "planetoid:cora", "--root", str(shared_data / "planetoid" / "raw"),
                      "--cache-dir", cache), f"--cache-dir {cache}: expected a folder")


def test_an_output_file_path_that_is_a_folder_is_refused(cora_partition, no_launch, main_cli, tmp_path):
    one_line(main_cli("train", "--parts-dir", cora_partition(2), "--save-model", str(tmp_path)),
             f"{tmp_path} is a folder")


def test_writable_outputs_pass(cora_partition, no_launch, tmp_path):
    with pytest.raises(Launched):
        gnnscale.train(parts_dir=cora_partition(2), save_model=str(tmp_path / "new" / "deeper" / "m.pt"),
                       metrics=str(tmp_path / "m.json"), checkpoint_dir=str(tmp_path / "ck"))
    assert sorted(os.listdir(tmp_path)) == []  # checked, nothing made (the probe file removed)


@pytest.mark.parametrize("command", [
    # each would first load a dataset, a model or metrics that do not exist: the output is checked before
    ["partition", "--dataset", "planetoid:cora", "--root", "/nonexistent", "--parts", "2", "--out", "{out}"],
    ["partition", "--dataset", "dir:/nonexistent", "--memory-budget", "1", "--parts", "2", "--out", "{out}"],
    ["bench-partition", "--dataset", "planetoid:cora", "--root", "/nonexistent", "--out", "{out}"],
    ["embed", "--model", "/nonexistent/m.pt", "--parts-dir", "/nonexistent", "--out", "{out}"],
    ["predict", "--model", "/nonexistent/m.pt", "--dataset", "planetoid:cora", "--out", "{out}/p.npy"],
    ["report", "/nonexistent/m.json", "--out", "{out}"],
], ids=["partition", "partition-out-of-core", "bench-partition", "embed", "predict", "report"])
@pytest.mark.parametrize("where", ["under a file", "/proc"])
def test_command_outputs_refused_first(main_cli, blocker, command, where):
    out = str(blocker / "out") if where == "under a file" else "/proc/out"
    args = [a.replace("{out}", out) for a in command]
    found = f"{blocker} is a file" if where == "under a file" else "no file can be created in /proc"
    line = one_line(main_cli(*args), f"gnnscale {command[0]}: error: --out {out}", found)
    assert "Traceback" not in line


# --- item 4: a write that fails at the end keeps the trained model ----------------------------------

def test_a_late_failed_save_keeps_the_model_and_says_where(cora_partition, main_cli, monkeypatch, tmp_path, capfd):
    """The folder of --save-model and --metrics passes the check, then becomes a file before the
    workers write (as a folder removed during training): the model and the metrics are written
    into --checkpoint-dir instead, and the run ends with one line naming them, exit 2, with no
    traceback and no other rank's error."""
    import gnnscale.process.launch as launch

    out, ck = tmp_path / "out", tmp_path / "ck"
    real = launch.launch_local

    def after_the_check(*args, **kw):
        shutil.rmtree(out, ignore_errors=True)  # (cmd_train wrote the configuration beside --metrics there)
        out.write_text("the folder is gone")
        return real(*args, **kw)

    monkeypatch.setattr(launch, "launch_local", after_the_check)
    r = main_cli("train", "--parts-dir", cora_partition(2), "--epochs", "1", "--max-steps", "2", "--eval-every", "0",
                 "--save-model", str(out / "m.pt"), "--metrics", str(out / "m.json"), "--checkpoint-dir", str(ck))
    both = capfd.readouterr().err + r.stderr
    assert r.returncode == 2, both[-3000:]
    errors = [line for line in r.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1, both[-3000:]
    assert "Traceback" not in both and "PeerError" not in both, both[-3000:]
    pid = re.search(r"gnnscale-kept-(\d+)-m\.pt", errors[0]).group(1)
    model, metrics = ck / f"gnnscale-kept-{pid}-m.pt", ck / f"gnnscale-kept-{pid}-m.json"
    assert errors[0] == (f"gnnscale train: error: --save-model {out / 'm.pt'} could not be written (File exists: "
                         f"{out}): the trained model is kept in {model} instead; move it where it belongs; --metrics "
                         f"{out / 'm.json'} could not be written (File exists: {out}): the metrics file is kept in "
                         f"{metrics} instead; move it where it belongs")
    net = gnnscale.load_model(model)  # what was trained, whole
    assert sum(p.numel() for p in net.parameters()) > 0
    import json

    assert json.loads(metrics.read_text())["unwritten"][0].startswith(f"--save-model {out / 'm.pt'}")


def test_a_failed_checkpoint_stops_every_rank_alike_and_keeps_the_model(cora_partition, main_cli, monkeypatch,
                                                                         tmp_path, capfd):
    """--checkpoint-dir passes the check, then becomes a file before the first checkpoint: every rank
    stops with the same one line, which says that no checkpoint holds the run and where the model
    trained so far is kept (the working folder here)."""
    import gnnscale.process.launch as launch

    ck = tmp_path / "ck"
    real = launch.launch_local

    def after_the_check(*args, **kw):
        ck.write_text("the folder is gone")
        return real(*args, **kw)

    monkeypatch.setattr(launch, "launch_local", after_the_check)
    monkeypatch.chdir(tmp_path)
    r = main_cli("train", "--parts-dir", cora_partition(2), "--epochs", "2", "--eval-every", "0",
                 "--checkpoint-dir", str(ck))  # Cora's 140 training nodes: one step an epoch
    both = capfd.readouterr().err + r.stderr
    assert r.returncode == 2, both[-3000:]
    errors = [line for line in r.stderr.splitlines() if "error" in line.lower()]
    assert len(errors) == 1 and "Traceback" not in both and "PeerError" not in both, both[-3000:]
    assert re.fullmatch(
        rf"gnnscale train: error: worker 0 of 2 failed: CheckpointWriteError: --checkpoint-dir {re.escape(str(ck))}: the "
        r"checkpoint of step 1 could not be written \(rank 0: .*\), so training stopped; no checkpoint was written "
        rf"before it; the model trained so far \(global step 1\) is kept in {re.escape(str(tmp_path))}/"
        r"gnnscale-kept-\d+-model\.pt", errors[0]), errors[0]
    kept = re.search(r"kept in (\S+\.pt)", errors[0]).group(1)
    assert sum(p.numel() for p in gnnscale.load_model(kept).parameters()) > 0


def test_write_or_keep_when_no_folder_takes_it(tmp_path, monkeypatch):
    from gnnscale.outputs import write_or_keep

    def fails(where):
        raise OSError(28, "No space left on device")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path / "tmp"))
    line = write_or_keep(fails, "/x/m.pt", "--save-model", "the trained model", [str(tmp_path / "ck")])
    assert line == (f"--save-model /x/m.pt could not be written (No space left on device), nor in {tmp_path / 'ck'}, "
                    f"{tmp_path}, {tmp_path / 'tmp'}: the trained model could not be kept")
    assert write_or_keep(lambda where: None, "/x/m.pt", "--save-model", "the trained model") is None


# --- item 5: the layer resolved before any worker, once ---------------------------------------------

def test_an_unknown_layer_is_refused_once_before_any_worker(cora_partition, no_launch, main_cli):
    line = one_line(main_cli("train", "--parts-dir", cora_partition(2), "--layer", "sagee"),
                    "--layer sagee: unknown layer 'sagee' (did you mean 'sage'?)", "gat", "rel:<layer>")
    assert len(line) < 400
    with pytest.raises(GnnscaleError) as err:
        gnnscale.train(parts_dir=cora_partition(2), layer="sagee")
    assert line == f"gnnscale train: error: {err.value}"
    one_line(main_cli("train", "--parts-dir", cora_partition(2), "--layer", "rel:gcm"), "(did you mean 'gcn'?)")


@pytest.mark.parametrize("layer", ["sage", "gin"])
def test_a_bad_layer_option_is_refused_before_any_worker(cora_partition, no_launch, main_cli, layer):
    one_line(main_cli("train", "--parts-dir", cora_partition(2), "--layer", layer, "--layer-kwargs", '{"bogus": 1}'),
             '--layer-kwargs {"bogus": 1} with', f"layer '{layer}'", "unexpected keyword argument 'bogus'")


def test_a_bad_model_is_refused_before_any_worker(cora_partition, no_launch, main_cli):
    one_line(main_cli("train", "--parts-dir", cora_partition(2), "--model", "nosuch_module_here:Net"),
             "--model", "nosuch_module_here")


@pytest.mark.parametrize("layer, kwargs", [("gat", '{"heads": 2}'), ("torch_geometric.nn:SAGEConv", "{}"),
                                           ("gine", '{"train_eps": false}'),
                                           ("torch_geometric.nn:GraphConv", '{"aggr": "mean"}')])
def test_good_layers_pass_the_check(cora_partition, no_launch, main_cli, layer, kwargs):
    with pytest.raises(Launched):
        main_cli("train", "--parts-dir", cora_partition(2), "--layer", layer, "--layer-kwargs", kwargs)


def test_a_registered_layer_passes_the_check(cora_partition, no_launch):
    from gnnscale.nn.layers import registry

    registry.register("mine-sage", "a user's layer")(lambda spec, i, o, **kw: registry._BUILDERS["sage"](spec, i, o, **kw))
    try:
        with pytest.raises(Launched):
            gnnscale.train(parts_dir=cora_partition(2), layer="mine-sage")
    finally:
        registry.ZOO.pop("mine-sage")
        registry._BUILDERS.pop("mine-sage")


def test_the_launchers_layer_names_are_the_registrys():
    from gnnscale.nn.layers import TYPED_ZOO, ZOO
    from gnnscale.nn.layers.registry import _PREFIXES
    from gnnscale.planning.layer_names import PREFIXES, TYPED_NAMES, ZOO_NAMES, check_layer_name

    assert (ZOO_NAMES, TYPED_NAMES, PREFIXES) == (tuple(ZOO), tuple(TYPED_ZOO), tuple(_PREFIXES))
    for spec in ("sage", "SAGE", "rel:gat", "rgcn", "dgl:SAGEConv", "pkg.mod:Conv", "rel:pkg.mod:Conv"):
        check_layer_name(spec)
    for spec in ("sagee", "rel:sagee", "rel:", "relgat"):
        with pytest.raises(GnnscaleError, match="unknown layer"):
            check_layer_name(spec)


def test_the_refusals_come_before_torch_is_imported(cora_partition, blocker):
    """The launcher stays light: an unknown layer name and an output path are refused without importing
    torch (a fresh interpreter: well under a second, where torch takes seconds)."""
    import subprocess
    import sys

    code = ("import sys; from gnnscale.cli.main import main; "
            f"codes = [main(['train', '--parts-dir', {cora_partition(2)!r}, *a]) for a in "
            f"(['--layer', 'sagee'], ['--save-model', {str(blocker / 'm.pt')!r}], ['--tensorboard', '/proc/tb'])]; "
            "print(codes, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.split("\n")[0] == "[2, 2, 2] False", (r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 3, r.stderr
