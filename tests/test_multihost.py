"""Runs across hosts (issue 15): two hosts simulated by two network namespaces joined by a veth
pair, each holding only meta.json and its own parts (copied, no shared folder), launched by
``torchrun --nnodes 2 --node-rank i --master-addr <host 0>`` with 2 workers per host.

Needs root and ``ip netns`` (CI runs as root); skipped with the reason elsewhere. The
namespaces, their link and addresses are created here and removed at the end.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ARGS = ["--epochs", "3", "--fanouts", "5,5", "--batch-size", "32", "--hidden", "16", "--eval-every", "0"]


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_hosts():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and the `ip` tool to create network namespaces")
    tag = f"{os.getpid() % 100000}"
    ns = [f"gns{tag}a", f"gns{tag}b"]
    ifs = [f"gv{tag}a", f"gv{tag}b"]
    addrs = ["10.231.7.1", "10.231.7.2"]
    made = []
    try:
        for n in ns:
            r = _ip("netns", "add", n)
            if r.returncode != 0:
                pytest.skip(f"`ip netns add` is not allowed here: {r.stderr.strip()}")
            made.append(n)
        steps = [("link", "add", ifs[0], "type", "veth", "peer", "name", ifs[1])]
        for n, i, a in zip(ns, ifs, addrs):
            steps += [("link", "set", i, "netns", n), ("-n", n, "addr", "add", f"{a}/24", "dev", i),
                      ("-n", n, "link", "set", i, "up"), ("-n", n, "link", "set", "lo", "up")]
        for s in steps:
            r = _ip(*s)
            if r.returncode != 0:
                pytest.skip(f"`ip {' '.join(s)}` failed: {r.stderr.strip()}")
        yield list(zip(ns, ifs, addrs))
    finally:
        for n in made:
            _ip("netns", "del", n)  # removes the veth pair with it


def _host_folders(parts4: str, root: Path) -> list[Path]:
    """Host h gets meta.json and parts 2h, 2h+1 only."""
    out = []
    for h in (0, 1):
        d = root / f"host{h}"
        d.mkdir()
        shutil.copy(Path(parts4) / "meta.json", d / "meta.json")
        for p in (2 * h, 2 * h + 1):
            shutil.copytree(Path(parts4) / f"part{p}", d / f"part{p}")
        out.append(d)
    return out


def _torchrun() -> str:
    found = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if found is None:
        pytest.skip("torchrun not found beside this python")
    return found


def _start(host, h: int, folder: Path, master: str, port: int, extra: list[str], log: Path,
           script: list[str] | None = None, nproc: int = 2) -> subprocess.Popen:
    """torchrun on ``host`` (node rank ``h``, ``nproc`` workers) of ``gnnscale train --parts-dir folder extra``,
    or of ``script`` (a script and its arguments; its stdout to ``log`` too)."""
    ns, ifname, _ = host
    env = {k: v for k, v in os.environ.items() if k != "GNNSCALE_FAULT"} | {"CI": "1", "GLOO_SOCKET_IFNAME": ifname}
    what = script or ["-m", "gnnscale", "train", "--parts-dir", str(folder), *extra]
    cmd = ["ip", "netns", "exec", ns, _torchrun(), "--nnodes", "2", "--node-rank", str(h), "--nproc-per-node", str(nproc),
           "--master-addr", master, "--master-port", str(port), *what]
    err = open(log, "w")
    return subprocess.Popen(cmd, stdout=err if script else subprocess.DEVNULL, stderr=err, env=env,
                            start_new_session=True)


def finish(procs: list[subprocess.Popen], timeout: float) -> None:
    """Wait for every host's torchrun (bounded); whatever still runs then is killed with its group."""
    try:
        for p in procs:
            p.wait(timeout=timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def test_two_hosts_train_like_one_and_a_lost_host_is_named(two_hosts, cora_partition, tmp_path):
    parts4 = cora_partition(4)
    folders = _host_folders(parts4, tmp_path)
    master = two_hosts[0][2]
    # The same run on one machine, 4 local workers, the same parts.
    local = tmp_path / "local.json"
    r = subprocess.run([sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts4, "--workers", "4", *ARGS,
                        "--metrics", str(local)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, CI="1"))
    assert r.returncode == 0, r.stderr[-3000:]
    metrics, logs = tmp_path / "hosts.json", [tmp_path / "h0.log", tmp_path / "h1.log"]
    procs = [_start(two_hosts[h], h, folders[h], master, 29731, ARGS + ["--metrics", str(metrics), "--timeout", "60"],
                    logs[h]) for h in (0, 1)]
    for p in procs:
        p.wait(timeout=400)
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log.read_text()[-4000:]
    assert not (folders[1] / "part0").exists()  # host 1 never saw host 0's parts
    got, want = json.loads(metrics.read_text()), json.loads(local.read_text())
    assert got["num_parts"] == 4
    assert got["final_weights_sha256"] == want["final_weights_sha256"]

    # Host 1 lost (its agent and workers killed) in the middle of training: host 0's workers end
    # within --timeout + 30 s, with an error that names the lost ranks.
    timeout = 20
    logs = [tmp_path / "k0.log", tmp_path / "k1.log"]
    procs = [_start(two_hosts[h], h, folders[h], master, 29732, ["--epochs", "500", "--fanouts", "5,5",
                    "--batch-size", "8", "--hidden", "16", "--eval-every", "0", "--timeout", str(timeout)], logs[h])
             for h in (0, 1)]
    try:
        for _ in range(480):  # up to 240 s for epoch 1
            if "epoch   1 |" in logs[0].read_text() or procs[0].poll() is not None:
                break
            time.sleep(0.5)
        if "epoch   1 |" not in logs[0].read_text():
            pytest.fail("host 0 did not reach epoch 1 within 240 s:\n" + logs[0].read_text()[-3000:])
        os.killpg(procs[1].pid, signal.SIGKILL)
        lost_at = time.monotonic()
        try:  # a bounded wait: host 0 must end by --timeout + 30 s after host 1 was lost
            procs[0].wait(timeout=timeout + 30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"host 0 still ran {timeout + 30} s after host 1 was lost:\n" + logs[0].read_text()[-3000:])
        # reported, not asserted (benchmarks/faults.py collects it)
        print(f"host 0 ended {time.monotonic() - lost_at:.1f} s after host 1 was lost (--timeout {timeout})")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    text = logs[0].read_text()
    assert procs[0].returncode != 0
    assert "rank 2" in text or "rank 3" in text, text[-3000:]


def test_a_pyg_loop_on_two_hosts_reads_its_hosts_parts(two_hosts, cora_partition, shared_data, tmp_path):
    """examples/pyg_loop_node.py (PyG's GraphSAGE, a plain loop) on two hosts, 2 workers each, each host's
    folder holding meta.json and its ranks' parts only: each rank reads its host's other part from the
    folder and gets the other host's parts' graphs (once) and rows (per batch) from their owners; the
    run ends and prints its test accuracy."""
    folders = _host_folders(cora_partition(4), tmp_path)
    example = Path(__file__).resolve().parents[1] / "examples" / "pyg_loop_node.py"
    logs = [tmp_path / "p0.log", tmp_path / "p1.log"]
    procs = [_start(two_hosts[h], h, folders[h], two_hosts[0][2], 29733, [], logs[h],
                    script=[str(example), "--root", str(shared_data / "planetoid"), "--parts", str(folders[h]),
                            "--epochs", "2", "--timeout", "60"]) for h in (0, 1)]
    finish(procs, 300)
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log.read_text()[-4000:]
    assert not (folders[1] / "part0").exists() and not (folders[0] / "part2").exists()
    found = [line for line in logs[0].read_text().splitlines() if line.startswith("test accuracy: ")]
    assert found, logs[0].read_text()[-3000:]
    print(found[0])
    assert 0.6 < float(found[0].split()[-1]) <= 1.0  # 0.7950 when written (2 epochs; chance is about 0.3)
