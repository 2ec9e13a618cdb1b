"""How fast the dataset side produces graphs (issue 44: speed moved out of tests/test_datasets.py).

Measured in one process, each the best of ``--repeats`` runs, beside a baseline in the same run:

- ``synthetic``: ``generate_synthetic(num_nodes=N, avg_degree=20)`` (1,000,000 nodes by default:
  20M directed edges, 64 features); baseline: the floor of any generator of that many edges,
  drawing ``E`` uniform ``int64`` pairs with ``torch.randint`` and sorting them by target;
- ``synthetic-mag``: ``generate_synthetic_mag(num_nodes=N)`` (4 node types, 4 relations both
  ways), against the same kind of floor for its edge count;
- ``ogb_missing``: ``load_dataset("ogbn-arxiv", download=False)`` on an empty folder until its
  ``DatasetError`` (it must not prompt or try the network), against ``load_dataset`` of a tiny
  synthetic graph (the import and option parsing both pay).

The figures' shapes are checked (edge counts, node counts) so a wrong graph cannot look fast.

    python benchmarks/datasets.py --json results/datasets.json
    python benchmarks/datasets.py --smoke        # 5,000 nodes, 1 repeat: seconds
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_json  # noqa: E402

from gnnscale.datasets import generate_synthetic, generate_synthetic_mag, load_dataset  # noqa: E402
from gnnscale.errors import DatasetError  # noqa: E402


def _best(fn, repeats: int) -> tuple[float, object]:
    """The fastest of ``repeats`` calls of ``fn()`` (seconds) and the last call's result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _edge_floor(num_nodes: int, num_edges: int) -> None:
    """Draw ``num_edges`` uniform pairs and sort them by target: what any generator must at least do."""
    gen = torch.Generator().manual_seed(0)
    ei = torch.randint(num_nodes, (2, num_edges), generator=gen)
    ei[:, torch.argsort(ei[1])]


def run(num_nodes: int, mag_nodes: int, repeats: int) -> dict:
    out: dict = {"repeats": repeats, "threads": torch.get_num_threads()}

    s, data = _best(lambda: generate_synthetic(num_nodes=num_nodes, avg_degree=20, seed=0), repeats)
    edges = int(data.edge_index.shape[1])
    assert data.edge_index.shape == (2, 20 * num_nodes), data.edge_index.shape
    floor, _ = _best(lambda: _edge_floor(num_nodes, edges), repeats)
    out["synthetic"] = dict(num_nodes=num_nodes, edges=edges, seconds=s, floor_seconds=floor, ratio=s / floor)
    del data

    s, d = _best(lambda: generate_synthetic_mag(num_nodes=mag_nodes, seed=0), repeats)
    edges = int(d.edge_index.shape[1])
    assert d.num_nodes == mag_nodes, d.num_nodes
    floor, _ = _best(lambda: _edge_floor(mag_nodes, edges), repeats)
    out["synthetic_mag"] = dict(num_nodes=mag_nodes, edges=edges, relations=len(d.edge_types), seconds=s,
                                floor_seconds=floor, ratio=s / floor)
    del d

    with tempfile.TemporaryDirectory() as root:
        def missing() -> str:
            try:
                load_dataset("ogbn-arxiv", root=root, download=False)
            except DatasetError as exc:
                return str(exc)
            raise AssertionError("ogbn-arxiv loaded from an empty folder")

        s, msg = _best(missing, repeats)
        assert "download=false" in msg, msg
        base, _ = _best(lambda: load_dataset("synthetic?num_nodes=1000&avg_degree=2"), repeats)
    out["ogb_missing"] = dict(seconds=s, baseline_seconds=base, ratio=s / base)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--num-nodes", type=int, default=1_000_000, help="synthetic graph's nodes (default 1,000,000)")
    ap.add_argument("--mag-nodes", type=int, default=1_000_000, help="synthetic-mag's nodes (default 1,000,000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--smoke", action="store_true", help="5,000 nodes each, 1 repeat (checks that it runs)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.smoke:
        args.num_nodes, args.mag_nodes, args.repeats = 5_000, 5_000, 1
    res = run(args.num_nodes, args.mag_nodes, args.repeats)
    print(f"{'what':<14} {'nodes':>10} {'edges':>12} {'seconds':>9} {'baseline s':>10} {'ratio':>7}")
    for key in ("synthetic", "synthetic_mag"):
        r = res[key]
        print(f"{key:<14} {r['num_nodes']:>10,} {r['edges']:>12,} {r['seconds']:>9.2f} {r['floor_seconds']:>10.2f} "
              f"{r['ratio']:>7.1f}")
    r = res["ogb_missing"]
    print(f"{'ogb_missing':<14} {'':>10} {'':>12} {r['seconds']:>9.3f} {r['baseline_seconds']:>10.3f} {r['ratio']:>7.1f}")
    write_json(args.json, res)


if __name__ == "__main__":
    main()
