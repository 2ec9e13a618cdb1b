"""Partitioning across hosts (issue 47 item 3): ``torchrun -m gnnscale.dist_partition`` on two hosts
simulated by two network namespaces joined by a veth pair (tests/test_multihost.py's fixture: root
and ``ip netns``; skipped with the reason elsewhere), one process per host, every edge routed to
its part's rank over the link: the folder equals the single-process pipeline's for the same
assignment, byte for byte."""
from __future__ import annotations

import re

from gnnscale.partitioning.out_of_core import partition_on_disk

from test_multihost import _start, finish, two_hosts  # noqa: F401 - the fixture
from test_out_of_core import assert_same_folder, assignment_of, planted, write_graph


def test_two_hosts_partition_like_one_process(two_hosts, tmp_path):  # noqa: F811 - the fixture
    n = 3000
    root = write_graph(tmp_path / "g", planted(n, 24000, 6, 0.8), n, chunks=4)
    out = tmp_path / "hosts"
    logs = [tmp_path / "h0.log", tmp_path / "h1.log"]
    args = ["-m", "gnnscale.dist_partition", str(root), "--parts", "4", "--out", str(out), "--method", "ldg",
            "--memory-budget", "2", "--timeout", "60", "--feature-dtype", "float16"]
    procs = [_start(two_hosts[h], h, out, two_hosts[0][2], 29741, [], logs[h], script=args, nproc=1) for h in (0, 1)]
    finish(procs, 300)
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log.read_text()[-4000:]
    text = logs[0].read_text()
    assert "plan: 3,000 nodes, 24,000 edges, 4 parts on 2 process(es)" in text, text[-3000:]
    sent = re.search(r"edges sent ([\d,]+) B", text)  # rank 0's edge rows to the other ranks, counted
    assert sent and int(sent.group(1).replace(",", "")) > 0, text[-3000:]
    # the assignment was streamed on rank 0 and broadcast; every rank wrote its part from the edges it received
    parts = assignment_of(out)
    partition_on_disk(root, 4, tmp_path / "one", parts=parts, method="ldg", show_progress=False,
                      feature_dtype="float16")
    assert_same_folder(out, tmp_path / "one")
    ldg = partition_on_disk(root, 4, tmp_path / "ldg", method="ldg", chunk_edges=None, show_progress=False)
    assert assignment_of(tmp_path / "ldg").tolist() == parts.tolist() and ldg["num_parts"] == 4
