"""The command line as a user meets it: help texts, bad input -> one clear message and exit 2."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest


def run_cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    """Run ``python -m gnnscale ARGS`` with a hard timeout (a hang fails the test)."""
    env = dict(os.environ, CI="1")
    return subprocess.run(
        [sys.executable, "-m", "gnnscale", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """``gnnscale ARGS`` through ``gnnscale.cli.main`` in this process: the command's own parser and
    code path, for what is decided before any worker starts (errors, partitioning); no interpreter
    start and torch import per call (tens of seconds each on a loaded 2-core machine)."""
    from gnnscale.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:  # argparse's usage errors
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    return subprocess.CompletedProcess(["gnnscale", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def cora_root(shared_data):
    return str(shared_data / "planetoid" / "raw")


@pytest.fixture(scope="module")
def cora2(cora_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "cora2"
    r = cli_in_process("partition", "--dataset", "planetoid:cora", "--root", cora_root, "--parts", "2", "--out", str(out))
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.parametrize("cmd", ["partition", "train", "info"])
def test_help_lists_options_with_defaults(cmd):
    r = run_cli(cmd, "--help", timeout=60)
    assert r.returncode == 0
    if cmd == "train":
        for opt in ["--parts-dir", "--dataset", "--workers", "--epochs", "--fanouts", "--batch-size", "--hidden",
                    "--lr", "--seed", "--metrics", "--port", "--timeout"]:
            assert opt in r.stdout, opt
        assert "(default: 10)" in r.stdout  # epochs
    if cmd == "partition":
        assert "--method" in r.stdout and "(default: metis)" in r.stdout


def _partition_help_schemes() -> list[str]:
    r = run_cli("partition", "--help", timeout=60)
    assert r.returncode == 0, r.stderr
    found = re.search(r"metis:\s+scheme=([A-Za-z_|]+)", r.stdout)
    assert found, f"no 'metis: scheme=A|B|...' in `gnnscale partition --help`:\n{r.stdout}"
    return found.group(1).split("|")


def test_every_metis_scheme_in_the_help_is_accepted(tmp_path):
    """The schemes `partition --help` names are exactly the ones METIS accepts, and each partitions."""
    from gnnscale.cli.commands import cmd_partition
    from gnnscale.cli.parser import build_parser
    from gnnscale.partitioning.strategies import METIS_SCHEMES

    schemes = _partition_help_schemes()
    assert sorted(schemes) == sorted(METIS_SCHEMES), (schemes, METIS_SCHEMES)
    data = "synthetic?num_nodes=200&avg_degree=4&num_classes=3&num_features=4&seed=0"
    for scheme in schemes:  # the command's own parser and code path, in this process
        out = tmp_path / scheme
        args = build_parser().parse_args(["partition", "--dataset", data, "--parts", "2", "--out", str(out),
                                          "--method-opt", f"scheme={scheme}"])
        assert cmd_partition(args) == 0
        meta = json.loads((out / "meta.json").read_text())
        assert meta["num_parts"] == 2 and meta["options"] == {"scheme": scheme}, meta.get("options")


def test_unknown_metis_scheme(tmp_path):
    r = cli_in_process("partition", "--dataset", "synthetic?num_nodes=200&seed=0", "--parts", "2",
                "--out", str(tmp_path / "o"), "--method-opt", "scheme=multilevel")
    assert_clean_error(r, "expected a METIS scheme from ['auto', 'kway', 'recursive'], found 'multilevel'")


def assert_clean_error(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    for n in needles:
        assert n in r.stderr, (n, r.stderr[-2000:])


def test_unknown_dataset(tmp_path):
    r = cli_in_process("partition", "--dataset", "nosuchset", "--parts", "2", "--out", str(tmp_path / "o"))
    assert_clean_error(r, "nosuchset", "planetoid:")


def test_missing_files_pubmed(cora_root, tmp_path):
    r = cli_in_process("partition", "--dataset", "planetoid:pubmed", "--root", cora_root, "--parts", "2", "--out", str(tmp_path / "o"))
    assert_clean_error(r, "ind.pubmed.allx")


def test_missing_partition_folder(tmp_path):
    r = cli_in_process("train", "--parts-dir", str(tmp_path / "absent"))
    assert_clean_error(r, str(tmp_path / "absent"))


def test_worker_count_must_match_parts(cora2):
    r = cli_in_process("train", "--parts-dir", str(cora2), "--workers", "3", "--epochs", "1")
    assert_clean_error(r, "--workers 3 does not match the 2 parts")


def test_checksum_mismatch(cora2, tmp_path):
    bad = tmp_path / "bad"
    shutil.copytree(cora2, bad)
    y = bad / "part1" / "y.npy"
    raw = bytearray(y.read_bytes())
    raw[-1] ^= 0xFF
    y.write_bytes(bytes(raw))
    r = cli_in_process("train", "--parts-dir", str(bad), "--epochs", "1")
    assert_clean_error(r, "part1/y.npy", "sha256")


def test_fanouts_wrong_length(cora2):
    r = cli_in_process("train", "--parts-dir", str(cora2), "--num-layers", "3", "--fanouts", "10,10")
    assert_clean_error(r, "expected 3 fanouts")
    r = cli_in_process("train", "--parts-dir", str(cora2), "--fanouts", "10,0")
    assert_clean_error(r, "fanouts must be positive integers or -1")


def test_port_in_use(cora2):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = cli_in_process("train", "--parts-dir", str(cora2), "--port", str(port), "--epochs", "1")
    assert_clean_error(r, f"port {port}", "already in use")


@pytest.mark.parametrize("port", [0, 70000])
def test_port_out_of_range_is_refused_in_one_line(cora2, port):
    """An explicit --port must be 1..65535 (0 is not 'any free one': that is --port left out): the
    launcher's listen_socket and ``gnnscale train`` refuse it in one line, before any worker."""
    from gnnscale.errors import RuntimeSetupError
    from gnnscale.process.launch import listen_socket

    line = f"--port must be in 1..65535, found {port}; give a free port, or leave --port out and the system picks one"
    with pytest.raises(RuntimeSetupError) as err:
        listen_socket(port).close()
    assert str(err.value) == line
    r = cli_in_process("train", "--parts-dir", str(cora2), "--port", str(port), "--epochs", "1", "--max-steps", "1",
                       "--eval-every", "0")
    assert_clean_error(r, line)
    assert [s for s in r.stderr.splitlines() if "--port" in s] == [f"gnnscale train: error: {line}"], r.stderr[-2000:]
    assert "starting" not in r.stderr  # refused before the launcher says the workers start


def test_info_prints_sizes_and_json(cora2):
    r = run_cli("info", str(cora2), timeout=60)
    assert r.returncode == 0, r.stderr
    assert "num_parts" in r.stdout and "2708" in r.stdout
    r = cli_in_process("info", str(cora2), "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    # The one schema `summarize` writes: the meta keys at the top level, "parts" one row per part.
    assert "meta" not in info
    assert info["num_parts"] == 2 and info["num_nodes"] == 2708 and info["dataset"] == "planetoid:cora"
    assert [p["part"] for p in info["parts"]] == [0, 1]
    assert sum(p["nodes"] for p in info["parts"]) == 2708
    assert info["path"] == str(cora2)


def test_train_two_workers_writes_metrics(cora2, tmp_path):
    metrics = tmp_path / "m.json"
    r = run_cli("train", "--parts-dir", str(cora2), "--epochs", "4", "--batch-size", "32", "--hidden", "32", "--lr", "0.01",
                "--metrics", str(metrics))
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads(metrics.read_text())
    for key in ("val_acc", "test_acc", "epoch_seconds", "bytes_sent", "bytes_received"):
        assert key in m
    assert len(m["epochs"]) == 4
    assert m["bytes_sent"] > 0 and m["bytes_sent"] == m["bytes_received"]
    assert m["test_acc"] > 0.5  # 7 classes: chance is about 0.3
    assert "epoch   3 | loss" in r.stderr


LAUNCHER_PROBE = """
import sys
import gnnscale.process.launch as launch

def probe(fn, nprocs, args=(), **kw):
    heavy = sorted(m for m in ("torch", "numba", "torch_geometric", "pymetis") if m in sys.modules)
    print("PROBE", fn, nprocs, ",".join(heavy) or "none", launch.launch_device("auto", nprocs))
    raise SystemExit(0)

launch.launch_local = probe
from gnnscale.cli import main
sys.argv = ["gnnscale", "train", "--parts-dir", sys.argv[1], "--epochs", "1", "--fanouts", "5,5"]
main()
"""


def test_launcher_checks_everything_without_importing_torch(cora2):
    """Up to the workers' start, ``gnnscale train`` reads meta.json, hashes both parts, checks the
    options and resolves ``--device auto`` (a CPU build of torch here) without importing torch,
    numba or METIS: each worker imports them itself, the launcher's import (3 s) is off the path."""
    r = subprocess.run([sys.executable, "-c", LAUNCHER_PROBE, str(cora2)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("PROBE")][0]
    assert line.split() == ["PROBE", "gnnscale.training.trainer:train_worker", "2", "none", "cpu"]


def test_launch_device_checks():
    from gnnscale.errors import RuntimeSetupError
    from gnnscale.process.launch import launch_device

    assert launch_device("cpu", 8) == "cpu"
    with pytest.raises(RuntimeSetupError, match="--device must be one of cpu, cuda, auto; found 'gpu'"):
        launch_device("gpu", 1)
    import torch

    if not torch.cuda.is_available():
        assert launch_device("auto", 2) == "cpu"
        with pytest.raises(RuntimeSetupError, match="--device cuda: "):
            launch_device("cuda", 1)


def test_checksum_mismatch_names_the_lowest_bad_part(cora2, tmp_path):
    from gnnscale.errors import PartitionError
    from gnnscale.partitioning import verify_parts

    bad = tmp_path / "bad"
    shutil.copytree(cora2, bad)
    verify_parts(bad)  # intact: both parts hash to meta.json's sums
    for p in (1, 0):
        x = bad / f"part{p}" / "x.npy"
        raw = bytearray(x.read_bytes())
        raw[-1] ^= 0xFF
        x.write_bytes(bytes(raw))
    with pytest.raises(PartitionError, match=r"part0/x\.npy to have sha256"):
        verify_parts(bad)
    verify_parts(bad, parts=[])  # nothing to check
