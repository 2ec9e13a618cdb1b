"""A plain PyG training loop (zero_grad, forward, loss, backward, step) on gnnscale's sampler and stores.

PyG's own GraphSAGE, PyG's batches, your loop; one process or several, the same script:

    python examples/pyg_loop_node.py                                # one process
    torchrun --nproc-per-node 2 examples/pyg_loop_node.py           # 2 processes (gloo), DDP
    python examples/pyg_loop_node.py --root DIR --epochs 40 --parts /tmp/cora-parts

``gnnscale.pyg.start_run`` joins torchrun's group (with the run's timeout and heartbeat),
has rank 0 cut Cora into one part per process (``--parts``; other ranks wait), and opens this
rank's part as PyG's FeatureStore / GraphStore. ``run.node_loader`` is PyG's NodeLoader over this
rank's share of the batches one process would make (a step's N batches draw what one process's
batch of 32 draws: keyed by the pass, the step and each node's id, never by the rank), and
``run.ddp`` wraps the model. Prints the test accuracy over every rank's test nodes.
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_geometric.nn.models import GraphSAGE

from gnnscale.datasets import load_dataset
from gnnscale.errors import GnnscaleError, run_main
from gnnscale.pyg import start_run, keyed_dropout

ROOT = Path(os.environ.get("GNNSCALE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=str(ROOT / "planetoid"), help="folder holding Cora's raw files")
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--parts", default=None, help="partition folder (default: a folder in the temp dir per "
                    "process count)")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds any wait on another process may take")
    args = ap.parse_args()
    if args.epochs < 1:
        raise GnnscaleError(f"--epochs must be an integer of at least 1, found {args.epochs}")

    torch.manual_seed(args.seed)
    data = load_dataset("planetoid:cora", root=args.root)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    parts = args.parts or str(Path(tempfile.gettempdir()) / f"gnnscale_pyg_cora_{world}")
    run = start_run(data, parts_dir=parts, timeout=args.timeout)
    # a step trains one batch per process: 32 // N each keeps a step's seeds those of one process's batch of 32
    loader = run.node_loader([10, 10], input_nodes="train", batch_size=32 // run.world_size, shuffle=True,
                             seed=args.seed)
    # keyed_dropout: GraphSAGE's dropout masks drawn per node and step, the same on 1 or N processes
    model = run.ddp(keyed_dropout(GraphSAGE(data.num_features, hidden_channels=64, num_layers=2,
                                            out_channels=int(data.num_classes), dropout=0.5)))
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)

    for epoch in range(args.epochs):
        model.train()
        total = 0.0
        for k, batch in enumerate(loader):
            opt.zero_grad()
            out = model(batch.x, batch.edge_index)[:batch.batch_size]
            loss = F.cross_entropy(out, batch.y[:batch.batch_size])
            # 1.0 on full steps; on the pass's short last step each process's share of it (0 on a padding
            # repeat), so N processes take the step one process takes (docs/pyg.md)
            (loss * loader.batch_sampler.loss_scale(k)).backward()
            opt.step()
            total += float(loss.detach()) * batch.batch_size
        if (epoch + 1) % 10 == 0 and run.rank == 0:
            print(f"epoch {epoch + 1}: loss {total / int(data.train_mask.sum()) * run.world_size:.4f}")

    # every neighbour (-1): a 2-layer GraphSAGE's outputs on the whole graph, over every rank's test nodes
    acc = run.accuracy(model, run.node_loader([-1, -1], input_nodes="test", batch_size=256))
    if run.rank == 0:
        print(f"test accuracy: {acc:.4f}")
    run.close()


if __name__ == "__main__":
    run_main(main, __file__)  # a user's error: its one line, exit status 2
