"""Real multi-process runs (gloo on 127.0.0.1): distributed == single process; bytes counted."""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from gnnscale.errors import PeerError
from gnnscale.nn.models import GraphSAGE
from gnnscale.partitioning import load_meta, load_part, partition_graph, to_csc
from gnnscale.process.launch import launch_local
from gnnscale.samplers import NeighborSampler

from dist_workers import (bind_the_store_port_first, die_on_rank, gather_objects, kill_self_on_rank,
                          sample_fetch_forward, sample_stats)


def _partition(data, parts, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"cora{parts}")
    partition_graph(data, parts, out, method="metis", dataset="planetoid:cora")
    orig = [load_part(out, p).orig_ids for p in range(parts)]
    old_of_new = torch.cat(orig)
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(old_of_new.numel())
    return str(out), new_of_old


def _reference(data, seeds_orig, fanouts, seed, hidden):
    n = data.num_nodes
    indptr, indices = to_csc(data.edge_index, n, dedupe=True)
    sampler = NeighborSampler(torch.from_numpy(indptr), torch.from_numpy(indices), fanouts, seed=seed, backend="torch")
    mb = sampler.sample(seeds_orig, epoch=1, step=4)
    x = data.x[mb.input_ids]
    torch.manual_seed(123)
    model = GraphSAGE(data.x.size(1), hidden, int(data.num_classes), len(fanouts), dropout=0.0)
    model.eval()
    with torch.no_grad():
        out = model(x, mb.blocks)
    return mb, x, out


SEEDS = torch.arange(0, 2708, 23)  # original ids, spread over every part


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("fanouts", [[-1, -1], [5, 3]])
def test_distributed_equals_single_process(cora, parts, fanouts, tmp_path_factory):
    parts_dir, new_of_old = _partition(cora, parts, tmp_path_factory)
    results = launch_local(sample_fetch_forward, parts, args=(parts_dir, SEEDS, new_of_old, fanouts, 5, 16))
    # Every rank samples the same seeds: with draws keyed by (seed, epoch, step, hop) and the
    # nodes' original ids, never by the requesting rank, every rank gets the one-process blocks.
    mb, x, out = _reference(cora, SEEDS, fanouts, seed=5, hidden=16)
    for res in results:
        assert len(res["blocks"]) == len(mb.blocks)
        for got, ref in zip(res["blocks"], mb.blocks):
            assert torch.equal(got["src"], ref.src_ids)
            assert torch.equal(got["dst"], ref.dst_ids)
            assert torch.equal(got["edge_index"], ref.edge_index)
        assert torch.equal(res["x"], x)
        assert torch.allclose(res["out"], out, atol=1e-5, rtol=0)
        # One request and one response exchange per hop, and nothing else.
        rounds = res["sample_stats"]["rounds"]
        assert rounds == {"sample_request": len(fanouts), "sample_response": len(fanouts)}


def test_feature_bytes_equal_remote_rows_times_row_size(cora, tmp_path_factory):
    parts_dir, new_of_old = _partition(cora, 2, tmp_path_factory)
    meta = load_meta(parts_dir)
    offsets = torch.tensor(meta["offsets"])
    row_bytes = 4 * meta["feature_dim"]
    results = launch_local(sample_fetch_forward, 2, args=(parts_dir, SEEDS, new_of_old, [5, 3], 5, 16))
    for res in results:
        r = res["rank"]
        # Independently: the reference sampler's input nodes, owner by the partition's offsets.
        mb, _, _ = _reference(cora, SEEDS, [5, 3], seed=5, hidden=16)
        new = new_of_old[mb.input_ids]
        remote = int(((new < offsets[r]) | (new >= offsets[r + 1])).sum())
        assert remote > 0
        assert res["feature_stats"]["received"]["feature"] == remote * row_bytes
        assert res["feature_stats"]["sent"]["feature_request"] == remote * 8
    # What one rank receives the other sent.
    assert results[0]["feature_stats"]["received"]["feature"] == results[1]["feature_stats"]["sent"]["feature"]
    assert results[1]["feature_stats"]["received"]["feature"] == results[0]["feature_stats"]["sent"]["feature"]


def test_one_part_moves_no_bytes(cora, tmp_path_factory):
    parts_dir, new_of_old = _partition(cora, 1, tmp_path_factory)
    (res,) = launch_local(sample_fetch_forward, 1, args=(parts_dir, SEEDS, new_of_old, [5, 3], 5, 16))
    assert res["feature_stats"]["bytes_received"] == 0 and res["feature_stats"]["bytes_sent"] == 0
    assert res["sample_stats"]["bytes_received"] == 0 and res["sample_stats"]["bytes_sent"] == 0
    assert res["input_remote_rows"] == 0


def test_all_gather_object_counts_its_bytes():
    """The OGB evaluator's gather: every rank gets every object, and the pickles' bytes are counted."""
    sizes = [10, 1000, 100]
    res = launch_local(gather_objects, 3, args=(sizes,))
    expect = [{"rank": r, "values": list(range(n))} for r, n in enumerate(sizes)]
    pickled = [r["pickled"] for r in res]
    for r, out in enumerate(res):
        assert out["got"] == expect
        st = out["stats"]
        # One exchange: split sizes (2 peers x 8 B) and the pickle, sent to both peers.
        assert st["sent"]["control"] == 2 * 8 + 2 * pickled[r]
        assert st["received"]["control"] == 2 * 8 + sum(p for q, p in enumerate(pickled) if q != r)
        assert st["rounds"] == {"control": 1}


def test_the_rendezvous_port_is_held_from_the_launchers_choice_to_rank_0s_store():
    """A port found free, closed and bound again later by rank 0 could be taken in between on a busy
    host (EADDRINUSE in a suite run): launch_local keeps it bound and rank 0's store serves on that
    socket, so a stranger binding it before the group forms is refused, on every rank."""
    out = launch_local(bind_the_store_port_first, 3)
    assert [o["port_was_held"] for o in out] == [True, True, True]
    assert [o["sum"] for o in out] == [3.0, 3.0, 3.0]


def test_a_worker_killed_by_the_oom_killer_is_named_so(monkeypatch):
    """A SIGKILLed worker is named with its signal; when the host's OOM-kill count (/proc/vmstat)
    rose during the run, with the out-of-memory killer and what to do (the count is stood in for:
    a real out-of-memory kill would take this machine's memory)."""
    import gnnscale.process.launch as launch

    with pytest.raises(PeerError, match=r"worker 1 of 2 failed: was killed by SIGKILL \(exit code -9\) without"):
        launch_local(kill_self_on_rank, 2, args=(1,))
    counts = iter([7, 8])
    monkeypatch.setattr(launch, "oom_kills", lambda: next(counts))
    with pytest.raises(PeerError) as info:
        launch_local(kill_self_on_rank, 2, args=(1,))
    first = str(info.value).splitlines()[0]
    assert first.startswith("worker 1 of 2 failed: was killed by the kernel's out-of-memory killer (SIGKILL; the "
                            "host's OOM kills rose from 7 to 8 during the run): the workers needed more memory than "
                            "this host has; run fewer workers on it, or a smaller model, batch or evaluation"), first
    assert launch.death_message(-15, None, None) == "was killed by SIGTERM (exit code -15) without reporting a result"
    assert launch.death_message(3, 1, 2) == "exited with code 3 without reporting a result"


def test_dead_peer_ends_every_rank_with_an_error_naming_it():
    """Rank 1 exits; rank 0, blocked in a collective, ends with its own PeerError (the launcher
    did not have to stop it after the grace period), and the error names rank 1 first."""
    with pytest.raises(PeerError, match="worker 1 of 2 failed: exited with code 17") as info:
        launch_local(die_on_rank, 2, args=(1, 20.0), grace=30)
    assert "(also: worker 0: PeerError: rank 0: collective all_reduce (control) failed" in str(info.value)
    assert "stopped by the launcher" not in str(info.value)


def test_one_round_per_hop_and_only_remote_frontier_ids(tmp_path):
    """Path 0-1-2-3-4-5 split 0,1,2 | 3,4,5; full neighborhoods, 2 hops, counted by hand.

    Rank 0 samples seed 2: hop 1 frontier {2} is local; hop 2 frontier {2, 1, 3} holds one
    remote id (3): 8 request bytes to rank 1, whose reply is [count 2, neighbors 2, 4] = 24 bytes.
    Rank 1 samples seed 5: frontiers {5} and {5, 4} are local: it asks for nothing.
    """
    from torch_geometric.data import Data

    from gnnscale.partitioning import write_partitions

    src = torch.tensor([0, 1, 1, 2, 2, 3, 3, 4, 4, 5])
    dst = torch.tensor([1, 0, 2, 1, 3, 2, 4, 3, 5, 4])
    data = Data(x=torch.arange(12, dtype=torch.float32).view(6, 2), y=torch.zeros(6, dtype=torch.int64),
                edge_index=torch.stack([src, dst]), train_mask=torch.ones(6, dtype=torch.bool),
                val_mask=torch.zeros(6, dtype=torch.bool), test_mask=torch.zeros(6, dtype=torch.bool))
    data.num_classes = 1
    write_partitions(data, np.array([0, 0, 0, 1, 1, 1]), tmp_path / "p", method="manual", dataset="path6")
    r0, r1 = launch_local(sample_stats, 2, args=(str(tmp_path / "p"), [[2], [5]], [-1, -1]))
    s0, s1 = r0["stats"], r1["stats"]
    assert s0["rounds"] == {"sample_request": 2, "sample_response": 2}
    assert s1["rounds"] == {"sample_request": 2, "sample_response": 2}
    assert s0["sent"]["sample_request"] == 8 and s1["received"]["sample_request"] == 8
    assert s1["sent"]["sample_request"] == 0 and s0["received"]["sample_request"] == 0
    assert s1["sent"]["sample_response"] == 24 and s0["received"]["sample_response"] == 24
    assert s0["sent"]["sample_response"] == 0
    # Two all_to_all calls per exchange: split sizes (control) and payload.
    assert s0["calls"] == {"control": 4, "sample_request": 2, "sample_response": 2}
    assert [t.tolist() for t in r0["src"]] == [[2, 1, 3, 0, 4], [2, 1, 3]]
    assert [t.tolist() for t in r1["src"]] == [[5, 4, 3], [5, 4]]


def test_forked_workers_see_what_spawned_ones_would(monkeypatch, tmp_path):
    """conftest forks 2-worker launches from a server that imported torch once
    (``start_workers_by_fork``): those workers are the server's children and see a 2-worker
    launch's settings, and the launch-time values of the variables read late (inductor's
    cache folder, pytest's test name). A 1-worker launch forks from a server of its own, started at
    its first launch in a 1-worker launch's environment, and sees that. A 2-worker launch after
    another variable changed is spawned (children of this process) and sees it."""
    import os

    from dist_workers import launch_probe
    from gnnscale.process.launch import thread_env

    def want(nprocs, **more):
        env = thread_env(max(1, (os.cpu_count() or 1) // nprocs), nprocs)
        return {**{k: env.get(k) for k in ("OMP_WAIT_POLICY", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS",
                                           "THP_MEM_ALLOC_ENABLE")},
                "GNNSCALE_PROBE": None, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path),
                "PYTEST_CURRENT_TEST": os.environ["PYTEST_CURRENT_TEST"], **more}

    monkeypatch.delenv("GNNSCALE_PROBE", raising=False)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # read late: still forked
    from gnnscale.process.launch import fork_counts

    spawned_before = fork_counts()["spawned"]
    two = launch_local(launch_probe, 2)
    why = {k: n for k, n in fork_counts()["spawned"].items() if n != spawned_before.get(k)}
    assert two[0]["ppid"] == two[1]["ppid"] != os.getpid(), f"spawned: these variables differ from the server's: {why}"
    for w in two:
        assert w["env"] == want(2) and w["threads"] == int(want(2)["OMP_NUM_THREADS"])
    (one,) = launch_local(launch_probe, 1)
    assert one["ppid"] not in (os.getpid(), two[0]["ppid"]) and one["env"] == want(1)
    (again_one,) = launch_local(launch_probe, 1)
    assert again_one["ppid"] == one["ppid"] and again_one["env"] == want(1)  # the same server
    assert one["threads"] == int(want(1)["OMP_NUM_THREADS"])
    monkeypatch.setenv("GNNSCALE_PROBE", "set since")
    again = launch_local(launch_probe, 2)
    assert [w["ppid"] for w in again] == [os.getpid()] * 2
    assert all(w["env"] == want(2, GNNSCALE_PROBE="set since") for w in again)
    from gnnscale.errors import RuntimeSetupError
    from gnnscale.process.launch import start_workers_by_fork

    with pytest.raises(RuntimeSetupError, match=r"nprocs \(the launches' worker count\) must be at least 1; found 0"):
        start_workers_by_fork(0)


def test_workers_die_with_a_killed_launcher(tmp_path):
    """SIGKILL the launching process: its workers must not live on (no leaked processes)."""
    import os
    import signal
    import subprocess
    import sys

    import psutil

    script = tmp_path / "launch.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(tmp_path.parent)!r})\n"
        "from gnnscale.process.launch import launch_local\n"
        "from dist_workers import sleep_forever\n"
        "if __name__ == '__main__':\n"
        "    launch_local(sleep_forever, 2)\n"
    )
    env = dict(os.environ, PYTHONPATH=os.path.dirname(__file__))
    proc = subprocess.Popen([sys.executable, str(script)], env=env)
    try:
        deadline = time.monotonic() + 60
        kids = []
        while time.monotonic() < deadline and len(kids) < 2:
            time.sleep(0.5)
            kids = [c for c in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(c.cmdline())]
        assert len(kids) == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        gone, alive = psutil.wait_procs(kids, timeout=20)
        assert not alive, [p.pid for p in alive]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_degree_store_answers_equal_the_true_in_degrees_on_three_parts(cora_partition):
    """Three parts, so that a rank's remote ids go to two owners and the answers come back in
    routed order: each rank asks for ids of every owner, shuffled, with repeats; every answer
    is that node's in-degree in the whole graph."""
    from dist_workers import degree_answers

    parts = cora_partition(3)
    loaded = [load_part(parts, p, verify=False) for p in range(3)]
    truth = torch.cat([torch.diff(p.indptr) for p in loaded])  # new ids: part by part, in order
    n = truth.numel()
    gen = torch.Generator().manual_seed(0)
    asks = [torch.randint(0, n, (500,), generator=gen) for _ in range(3)]
    owners = [loaded[0].book.owner(a) for a in asks]
    assert all(set(o.tolist()) == {0, 1, 2} for o in owners)  # every rank asks every owner
    got = launch_local(degree_answers, 3, args=(parts, [a.tolist() for a in asks]), threads_per_worker=1)
    for ask, answer in zip(asks, got):
        assert torch.equal(answer, truth[ask])


@pytest.mark.parametrize("peers", ["all", "next"])
def test_host_parts_sample_what_their_owners_would(cora_partition, peers):
    """--host-graph: a rank that reads other parts' CSCs from the folder draws what their owners
    would have sent (the same blocks); reading every part, sampling exchanges nothing; reading
    one other part of three, the hop's exchanges still run for the third."""
    from dist_workers import sample_asked_and_here

    parts_dir = cora_partition(3)
    peers_of = [[k for k in range(3) if k != r] if peers == "all" else [(r + 1) % 3] for r in range(3)]
    fanouts = [5, 3]
    res = launch_local(sample_asked_and_here, 3, args=(parts_dir, SEEDS, fanouts, 5, peers_of))
    for r, got in enumerate(res):
        asked, here = got["asked"], got["here"]
        for a, h in zip(asked["blocks"], here["blocks"]):
            for x, y in zip(a[:3], h[:3]):
                assert torch.equal(x, y), r
        assert asked["remote"] > 0 and asked["host"] == 0
        assert here["host"] > 0 and here["remote"] + here["host"] == asked["remote"]
        assert asked["stats"]["rounds"] == {"sample_request": 2, "sample_response": 2}
        if peers == "all":
            assert here["remote"] == 0 and here["stats"]["rounds"] == {} and here["stats"]["bytes_sent"] == 0
        else:
            assert here["stats"]["rounds"] == asked["stats"]["rounds"]
            assert 0 < here["stats"]["sent"]["sample_request"] < asked["stats"]["sent"]["sample_request"]


def test_host_parts_that_do_not_fit_are_refused(cora_partition):
    from gnnscale.data.host_parts import HostRanks, open_host_graphs
    from gnnscale.errors import SamplerError
    from gnnscale.samplers import DistNeighborSampler

    class Solo:  # what the sampler needs of a communicator, for a rank that never exchanges here
        rank, world_size = 0, 3

    three, two = cora_partition(3), cora_partition(2)
    part = load_part(three, 0)
    sampler = DistNeighborSampler(part.indptr, part.indices, part.book, Solo(), [5], owned_keys=part.orig_ids)
    other = load_part(two, 0)
    wrong = open_host_graphs(two, other.book, HostRanks((1,), False), other.meta)  # part 1 of 2, not of 3
    with pytest.raises(SamplerError, match="host part 1 does not fit the partition book"):
        sampler.read_host_parts(wrong, False)
    mine = open_host_graphs(three, part.book, HostRanks((1,), False), part.meta)
    with pytest.raises(SamplerError, match=r"complete=True needs every other rank's part; found \[1\]"):
        sampler.read_host_parts(mine, True)
