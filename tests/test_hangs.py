"""A peer that stays alive but goes silent (SIGSTOP) must end every rank with an error naming it.

Real runs of ``gnnscale train --workers 2 --timeout 10 --pipeline`` on Cora. Rank 1 stops itself
(``GNNSCALE_FAULT``, see gnnscale/health.py) when it enters a given phase in the middle of
epoch 1; the launcher must exit non-zero by a deadline 60 s after the stop, with rank 0's error naming
rank 1 and that phase, and no worker may outlive it.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from gnnscale.process.health import Health, _parse_fault


@pytest.fixture(scope="module")
def cora2(shared_data, tmp_path_factory):
    from gnnscale.datasets import load_dataset
    from gnnscale.partitioning import partition_graph

    data = load_dataset("planetoid:cora", root=str(shared_data / "planetoid" / "raw"))
    out = tmp_path_factory.mktemp("cora_hang")
    partition_graph(data, 2, out, dataset="planetoid:cora")
    return str(out)


def _run_with_fault(parts_dir: str, fault: str, extra: list[str]) -> dict:
    """Run the CLI with rank 1's fault (see :func:`_run_cmd_with_fault`)."""
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", parts_dir, "--workers", "2",
           "--timeout", "10", "--pipeline", "--epochs", "3", "--batch-size", "16", "--fanouts", "5,5",
           "--hidden", "16", "--eval-every", "0", "--no-progress", *extra]
    return _run_cmd_with_fault(cmd, fault)


def _run_cmd_with_fault(cmd: list[str], fault: str, deadline_after_stop: float = 60.0) -> dict:
    """Run ``cmd`` with ``GNNSCALE_FAULT=fault``. Once the fault is injected, the launcher has
    ``deadline_after_stop`` seconds to exit (a bounded wait: past it, it is killed and
    ``ended_by_deadline`` is False); 240 s for the run to reach the fault at all."""
    env = dict(os.environ, GNNSCALE_FAULT=fault)
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []
    injected = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if "fault injection" in line:
                injected.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    stopped_pid = None
    ended_by_deadline = False
    try:
        # Up to 240 s for the fault (or an early exit), then the launcher's deadline.
        for _ in range(480):
            if injected.wait(0.5) or not reader.is_alive():
                break
        try:
            proc.wait(timeout=deadline_after_stop if injected.is_set() else 10)
            ended_by_deadline = injected.is_set()
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finally:
        reader.join(10)
        text = "".join(lines)
        m = re.search(r"fault injection \(GNNSCALE_FAULT\): stop pid (\d+)", text)
        if m:
            stopped_pid = int(m.group(1))
            leaked = psutil.pid_exists(stopped_pid) and psutil.Process(stopped_pid).status() != psutil.STATUS_ZOMBIE
            if leaked:  # never leave a stopped process behind, whatever the test finds
                os.kill(stopped_pid, signal.SIGCONT)
                os.kill(stopped_pid, signal.SIGKILL)
        else:
            leaked = False
    return {"code": proc.returncode, "text": text, "injected": injected.is_set(), "pid": stopped_pid,
            "leaked": leaked, "ended_by_deadline": ended_by_deadline}


@pytest.mark.parametrize(
    "mode,phase",
    [("exact", "sampling"), ("historical", "embedding refresh and push")],
)
def test_a_stopped_peer_ends_every_rank_naming_it(cora2, mode, phase):
    res = _run_with_fault(cora2, f"rank=1,epoch=1,step=2,phase={phase},action=stop", ["--exchange", mode])
    text = res["text"]
    assert res["injected"], text[-3000:]
    assert res["ended_by_deadline"], f"the launcher was still running 60 s after rank 1 stopped:\n{text[-3000:]}"
    assert res["code"] == 2, text[-3000:]
    err = next(line for line in text.splitlines() if "gnnscale train: error:" in line)
    # Rank 0's error names the silent rank, its pid and the phase it stopped in.
    assert "worker 0 of 2 failed: PeerError: rank 0: collective" in err, text[-4000:]
    assert f"rank 1 (pid {res['pid']} on " in err and "is silent" in err
    assert f"epoch 1 step 2 {phase}" in err
    assert "Traceback" not in text
    assert not res["leaked"], f"rank 1 (pid {res['pid']}) outlived the launcher"


def test_fault_spec_is_checked():
    assert _parse_fault("rank=1,phase=sampling") == {"rank": "1", "phase": "sampling"}
    assert _parse_fault(None) is None
    with pytest.raises(ValueError, match="key=value"):
        _parse_fault("rank1")
    with pytest.raises(ValueError, match="stop, exit or kill"):
        _parse_fault("rank=1,action=pause")


def test_silent_rank_diagnosis_from_heartbeats():
    """Two monitors on one in-process store: the one that stops beating is named, with its phase."""
    import datetime

    import torch.distributed as dist

    from gnnscale.process.launch import find_free_port

    port = find_free_port()
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=True, timeout=datetime.timedelta(seconds=5),
                          wait_for_workers=False)
    h0 = Health(0, 2, timeout=4.0, store=store, interval=0.2).start()
    h1 = Health(1, 2, timeout=4.0, store=store, interval=0.2).start()
    h1.enter("fetching features", epoch=3, step=7)
    time.sleep(0.5)
    assert h0.silent_ranks() == []  # both beat
    h1.stop()  # rank 1 goes silent
    silent = h0.silent_ranks()
    assert [s["rank"] for s in silent] == [1]
    assert silent[0]["phase"] == "main: epoch 3 step 7 fetching features"
    assert silent[0]["pid"] == str(os.getpid())
    msg = h0.diagnose()
    assert msg.startswith("rank 1 (pid ") and "its last phase: main: epoch 3 step 7 fetching features" in msg
    h0.stop()


def test_prefetch_wait_is_bounded():
    """A prefetch thread stuck outside any collective: the consumer gives up after the bound, naming the phase."""
    from gnnscale.errors import PeerError
    from gnnscale.data.prefetch import Prefetcher

    release, came_back = threading.Event(), threading.Event()

    def produce(step: int):
        if step == 1:
            release.wait(30)  # stuck
            came_back.set()
        return step

    feed = Prefetcher(produce, 3, timeout=1.0, describe=lambda: "prefetch: epoch 0 step 1 sampling")
    got = []
    with pytest.raises(PeerError, match=r"produced no batch for 1 s \(now in: prefetch: epoch 0 step 1 sampling\)"):
        for item in feed:
            got.append(item)
    # The consumer gave up while the producer was still stuck (not once it came back).
    stuck = not came_back.is_set()
    release.set()
    assert got == [0] and stuck


def test_a_collective_failing_inside_ddp_backward_is_named_not_a_crash():
    """A collective that DDP runs outside our comm hook (its unused-parameter map's, when it
    searched for them) or that fails inside backward raises gloo's bare RuntimeError
    (a CI run once ended "worker 0 of 2 failed: crashed:" with it in the hang test above): the
    data-parallel step turns it into the PeerError that names the silent rank (gloo's reason
    without its source position)."""
    from types import SimpleNamespace

    import torch

    from gnnscale.errors import PeerError
    from gnnscale.parallel.data_parallel import collective_step
    from gnnscale.process.comm import Communicator

    gloo = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting "
            "10000ms for recv operation to complete")

    def step(message: str, world: int = 2):
        class RaiseInBackward(torch.autograd.Function):
            @staticmethod
            def forward(ctx, h):
                return h.clone()

            @staticmethod
            def backward(ctx, grad):
                raise RuntimeError(message)

        weight = torch.nn.Parameter(torch.ones(3, 2))
        health = SimpleNamespace(diagnose=lambda: "rank 1 (pid 4242 on host) is silent since epoch 1 step 2 sampling")
        comm = Communicator(rank=0, world_size=world, timeout=10.0, health=health)

        def compute():
            out = RaiseInBackward.apply(torch.ones(4, 3) @ weight)
            return out, out.sum()

        return comm, (lambda: collective_step(comm, torch.optim.SGD([weight], lr=0.1), compute))

    comm, run = step(gloo)
    with pytest.raises(PeerError, match=r"^rank 0: collective all_reduce \(gradient\) failed after at most 10 s: "
                                        r"rank 1 \(pid 4242 on host\) is silent since epoch 1 step 2 sampling\. "
                                        r"\(Timed out waiting 10000ms for recv operation to complete\) "):
        run()
    assert isinstance(comm.failure, PeerError)
    # A layer's own error in backward stays itself, and so does any error of a single rank.
    with pytest.raises(RuntimeError, match="^shape mismatch in my layer$") as err:
        step("shape mismatch in my layer")[1]()
    assert err.type is RuntimeError
    with pytest.raises(RuntimeError, match="Timed out waiting") as err:
        step(gloo, world=1)[1]()
    assert err.type is RuntimeError


def test_a_stopped_pipeline_stage_is_named_with_its_pid_and_phase(cora_partition):
    """A 2-stage layer pipeline (issue 26): stage 1 (rank 1) stops itself (SIGSTOP) as it starts
    a step of epoch 1. Stage 0, waiting for its gradients, ends within the timeout plus 30 s
    with an error naming stage 1's rank, pid and the phase it stopped in (its heartbeat)."""
    phase = "pipeline stage 1: forwards and backwards"
    cmd = [sys.executable, "-m", "gnnscale", "train", "--parts-dir", cora_partition(1), "--workers", "2",
           "--pipeline-stages", "2",
           "--micro-batches", "2", "--timeout", "10", "--epochs", "3", "--batch-size", "16", "--fanouts", "5,5",
           "--hidden", "16", "--eval-every", "0", "--no-progress", "--no-verify"]
    res = _run_cmd_with_fault(cmd, f"rank=1,epoch=1,step=0,phase={phase},action=stop", deadline_after_stop=10 + 30)
    text = res["text"]
    assert res["injected"], text[-3000:]
    assert res["ended_by_deadline"], f"the launcher was still running 40 s after stage 1 stopped:\n{text[-3000:]}"
    assert res["code"] == 2, text[-3000:]
    err = next(line for line in text.splitlines() if "gnnscale train: error:" in line)
    assert "PeerError: rank 0 (pipeline stage 0): no gradients of micro-batch 0 from stage 1 (rank 1) within 10 s" \
        in err, text[-4000:]
    assert f"rank 1 (pid {res['pid']} on " in err and "is silent" in err and f"epoch 1 step 0 {phase}" in err, err
    assert "Traceback" not in text
    assert not res["leaked"], f"rank 1 (pid {res['pid']}) outlived the launcher"


def test_leaving_the_process_group_is_bounded(monkeypatch, caplog):
    """A teardown that does not return (seen once under torchrun: a rank whose peer had left) is
    given up after the timeout, logged, instead of holding the process at exit."""
    import threading

    import torch.distributed as dist

    from gnnscale.process import groups

    never = threading.Event()
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "destroy_process_group", lambda: never.wait(60))
    with caplog.at_level("WARNING", logger="gnnscale.process.groups"):
        assert groups.shutdown_distributed(timeout=0.2) is False
    assert "did not return within 0.2 s; going on without it" in caplog.text
    never.set()
    monkeypatch.setattr(dist, "destroy_process_group", lambda: None)
    assert groups.shutdown_distributed(timeout=5) is True

    def fails():
        raise RuntimeError("teardown failed")

    monkeypatch.setattr(dist, "destroy_process_group", fails)
    import pytest

    with pytest.raises(RuntimeError, match="teardown failed"):
        groups.shutdown_distributed(timeout=5)
