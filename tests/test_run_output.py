"""What a run prints (issue 44, items 6 and 7): no debug lines at the default verbosity, an
unknown dataset refused before anything is announced, a peer's failure without gloo's banner,
and a `done:` line whose seconds per epoch are the steady epoch's, the first apart."""
from __future__ import annotations

import json
import re
import types

from test_cli import run_cli


def test_an_unknown_dataset_is_refused_before_partitioning_is_announced(tmp_path):
    r = run_cli("train", "--dataset", "cora2", "--epochs", "1", "--cache-dir", str(tmp_path))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gnnscale train: error: expected a dataset name among"), r.stderr
    assert "found 'cora2'" in lines[0]
    assert not any(tmp_path.iterdir())  # no cache folder made either


def test_a_peers_failure_drops_gloos_source_position_and_banner():
    from gnnscale.process.comm import Communicator, transport_reason

    raw = RuntimeError("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by "
                       "peer [127.0.0.1]:9089. This is typically caused by a remote worker crashing. Check the logs of "
                       "the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f")
    assert transport_reason(raw) == "Connection closed by peer [127.0.0.1]:9089."
    assert transport_reason(RuntimeError("Timed out waiting 5000ms for recv\nmore")) == "Timed out waiting 5000ms for recv"
    me = types.SimpleNamespace(health=None, rank=0, timeout=30.0)
    msg = str(Communicator._fail(me, "all_reduce", "gradient", raw))
    assert "(Connection closed by peer [127.0.0.1]:9089.)" in msg and "GLHF" not in msg and "pair.cc" not in msg
    msg = str(Communicator._fail_p2p(me, None, "no activations of step 3", "rank 1", raw))
    assert "GLHF" not in msg and "typically caused" not in msg


def test_the_done_line_gives_the_steady_epoch_and_the_first_apart(tmp_path):
    # full neighbourhoods at evaluation: layer-wise inference, whose per-layer lines are debug output
    m = tmp_path / "m.json"
    r = run_cli("train", "--epochs", "3", "--workers", "2", "--no-progress", "--eval-fanouts", "-1,-1",
                "--dataset", "synthetic?num_nodes=3000", "--cache-dir", str(tmp_path / "cache"), "--metrics", str(m),
                timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    met = json.loads(m.read_text())
    times = [e["epoch_seconds"] for e in met["epochs"]]
    assert met["first_epoch_seconds"] == times[0]
    assert met["steady_epoch_seconds"] == (times[1] + times[2]) / 2  # the median of the epochs after the first
    assert met["epoch_seconds"] == sum(times) / 3  # the key existing tools read: the mean, as before
    done = [line for line in r.stderr.splitlines() if " done: " in line]
    assert len(done) == 1, r.stderr[-3000:]
    got = re.search(r"final loss [0-9.]+, (\d+\.\d\d) s/epoch \(first (\d+\.\d) s\), ", done[0])
    assert got, done[0]
    assert got.groups() == (f"{met['steady_epoch_seconds']:.2f}", f"{times[0]:.1f}")
    assert "layer-wise inference: layer" not in r.stderr
    assert "read from the partition folder" not in r.stderr  # the host reads: an engine detail (issue 54)
    assert "find_unused_parameters" not in r.stderr
