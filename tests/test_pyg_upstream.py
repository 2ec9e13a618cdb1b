"""PyG's own loader tests on gnnscale.pyg's loaders (issue 56 item 3): tests/pyg_upstream/run.py runs
PyG's test_neighbor_loader.py and test_link_neighbor_loader.py (pinned, unmodified) with our
NeighborLoader / LinkNeighborLoader in place of PyG's. The pass count may not drop, and what fails
is only what docs/pyg.md lists as refused: temporal sampling on HeteroData (time_attr on a typed graph)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "pyg_upstream"))

import run as upstream  # noqa: E402  (tests/pyg_upstream/run.py)

PASSED = 71  # 2026-12-07; 18 before issue 56, 67 before time_attr on Data (of 89: 8 pass without a loader, 3 skip)
REFUSED = "gnnscale.pyg loaders do not support time_attr on HeteroData yet"


def test_pygs_loader_tests_pass_on_our_loaders():
    results = upstream.run()
    counts = upstream.counts(results)
    assert counts["total"] == 89 and counts["passed"] >= PASSED, counts
    failed = [r for r in results if r["outcome"] == "failed"]
    for r in failed:  # each one a typed temporal test refused in one line, nothing else
        assert REFUSED in r["reason"], r
    assert len(failed) == 7
    skipped = sorted(r["test"].split("::")[1] for r in results if r["outcome"] == "skipped")
    assert skipped == ["test_neighbor_loader_with_tensor_frame[cpu]", "test_pyg_lib_and_torch_sparse_hetero_equality",
                       "test_pyg_lib_and_torch_sparse_homo_equality"]
