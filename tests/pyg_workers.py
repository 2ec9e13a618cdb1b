"""Worker functions of tests/test_pyg_distributed.py (spawned by gnnscale.process.launch.launch_local)."""
from __future__ import annotations

import torch


def _node(b, k, loader) -> dict:
    return dict(k=k, repeat=loader.batch_sampler.is_repeat(k), n_id=b.n_id, edge_index=b.edge_index, e_id=b.e_id,
                x_sum=b.x.to(torch.float64).sum(1), y=b.y, batch_size=b.batch_size,
                nsn=list(b.num_sampled_nodes), nse=list(b.num_sampled_edges))


def cora_batches(parts_dir, fanouts, batch_size: int, seed: int, host_reads, link_pairs,
                 graph_store: str = "auto") -> dict:
    """Two passes of this rank's node batches of the training split and one of link batches.
    ``parts_dir``: the folder, or one per rank (per-host folders); ``graph_store``: start_run's."""
    import os

    from gnnscale.pyg import start_run

    if isinstance(parts_dir, (list, tuple)):
        parts_dir = parts_dir[int(os.environ["RANK"])]
    run = start_run(parts_dir, timeout=60, host_reads=host_reads, graph_store=graph_store)
    loader = run.node_loader(fanouts, "train", batch_size=batch_size, shuffle=True, seed=seed)
    nodes = [[_node(b, k, loader) for k, b in enumerate(loader)] for _ in range(2)]
    links = run.link_loader(fanouts, link_pairs, neg_sampling_ratio=2.0, batch_size=64, shuffle=True, seed=seed)
    link = [dict(k=k, repeat=links.batch_sampler.is_repeat(k), n_id=b.n_id, eli=b.n_id[b.edge_label_index],
                 label=b.edge_label, input_id=b.input_id, edge_index=b.edge_index, e_id=b.e_id)
            for k, b in enumerate(links)]
    whole = hasattr(run.graph_store, "coo_of")  # the own-part store has no whole edge_index
    out = dict(nodes=nodes, links=link, comm=run.comm.stats.snapshot(), rows=dict(run.feature_store.stats),
               coo=run.graph_store.coo_of() if whole else None, world=run.world_size,
               store=type(run.graph_store).__name__)
    run.close()
    return out


def mask_batches(parts_dir: str, root: str, fanouts, batch_size: int, seed: int) -> dict:
    """This rank's batches of Cora's validation nodes given as PyG gives them (a bool mask; a typed
    ``("paper", mask)`` over a one-type HeteroData of Cora) and as node ids, over the run's stores
    (a partition folder) and over the graph in memory (``data=``); and the bad masks' one lines."""
    from torch_geometric.data import HeteroData

    from gnnscale.datasets import load_dataset
    from gnnscale.errors import GnnscaleError
    from gnnscale.pyg import start_run

    cora = load_dataset("planetoid:cora", root=root)
    typed = HeteroData()
    typed["paper"].x, typed["paper"].y = cora.x, cora.y
    typed["paper", "cites", "paper"].edge_index = cora.edge_index
    mask = cora.val_mask  # nodes 140..639: their positions among the mask's nodes are not their ids
    ids = torch.nonzero(mask).view(-1)
    run = start_run(parts_dir, timeout=60)
    out: dict = {}
    for name, data, forms in (("stores", None, (mask, ids, "val")), ("memory", cora, (mask, ids)),
                              ("typed", typed, (("paper", mask), ("paper", ids)))):
        out[name] = []
        for nodes in forms:
            loader = run.node_loader(fanouts, nodes, batch_size=batch_size, shuffle=True, seed=seed, data=data)
            out[name].append([dict(n_id=(b["paper"] if name == "typed" else b).n_id,
                                   input_id=(b["paper"] if name == "typed" else b).input_id,
                                   batch_size=(b["paper"] if name == "typed" else b).batch_size,
                                   edge_index=(b["paper", "cites", "paper"] if name == "typed" else b).edge_index)
                              for b in loader])
    bad = []
    for nodes, data in ((mask[:-1], None), (mask.float(), None), (mask.view(2, -1), None), (("paper", mask[:5]), typed),
                        (mask, typed)):
        try:
            run.node_loader(fanouts, nodes, batch_size=batch_size, data=data)
            bad.append(None)
        except GnnscaleError as err:
            bad.append(str(err))
    run.close()
    return dict(batches=out, bad=bad, world=run.world_size)


def acm_batches(root: str, batch_size: int, seed: int, parts_dir=None) -> dict:
    """One pass of this rank's paper batches of ACM: held in memory (HeteroData); with ``parts_dir`` a
    folder, partitioned there by rank 0 and read through the typed folder stores, every other part's
    rows asked of its owner (no host reads); with a list of folders, rank r's typed stores over
    ``parts_dir[r]`` (a host's folder: what it lacks comes from the owners). A cache of 100 rows."""
    import os

    from gnnscale.datasets import load_dataset
    from gnnscale.datasets.hetero_data import to_hetero_data
    from gnnscale.pyg import start_run

    data = to_hetero_data(load_dataset(f"acm:{root}?split=20"))
    if parts_dir is None:
        run = start_run(data, timeout=60)
    elif isinstance(parts_dir, list):
        run = start_run(parts_dir[int(os.environ["RANK"])], timeout=60, cache_rows=100)
    else:
        run = start_run(data, parts_dir=parts_dir, timeout=60, host_reads=False, cache_rows=100)
    loader = run.node_loader({et: [4, 2] for et in data.edge_types}, "train", batch_size=batch_size, shuffle=True,
                             seed=seed)
    out = [dict(k=k, repeat=loader.batch_sampler.is_repeat(k),
                n_id={t: b[t].n_id for t in b.node_types}, e_id={et: b[et].e_id for et in b.edge_types},
                ei={et: b[et].edge_index for et in b.edge_types}, y=b["paper"].y,
                x={t: b[t].x for t in b.node_types if "x" in b[t]}) for k, b in enumerate(loader)]
    rows = dict(run.feature_store.stats) if run.feature_store is not None else None
    run.close()
    return dict(batches=out, world=run.world_size, comm=run.comm.stats.snapshot(), rows=rows)


def loop_passes(parts_dir: str, timeout: float) -> int:
    """Two passes of node batches with every row asked of its owner (collective fetches)."""
    from gnnscale.pyg import start_run

    run = start_run(parts_dir, timeout=timeout, host_reads=False)
    loader = run.node_loader([3, 3], "train", batch_size=16, shuffle=True, seed=0)
    count = sum(1 for _ in range(2) for _ in loader)
    run.close()
    return count


# -- checks shared by tests/test_pyg_distributed.py and tests/test_pyg_typed_stores.py (run in the test process) --

def check_acm_steps(results: list, data, ref: list) -> dict:
    """Every rank's typed batch holds what it claims (x per type and the papers' y are the graph's
    rows of n_id; e_id names each relation's edges between its endpoints' original ids), and step
    k's batches of the ranks together hold one process's batch ``ref[k]``'s nodes per type and edges
    per relation. Returns ``{k: [the step's batches in rank order]}``."""
    steps: dict = {}
    for res in results:
        for b in res["batches"]:
            for t, x in b["x"].items():
                assert torch.equal(x, data[t].x[b["n_id"][t]]), t
            assert torch.equal(b["y"], data["paper"].y[b["n_id"]["paper"]])
            if b["repeat"]:
                continue
            steps.setdefault(b["k"], []).append(b)
            for et in data.edge_types:
                ei = data[et].edge_index[:, b["e_id"][et]]
                assert torch.equal(ei[0], b["n_id"][et[0]][b["ei"][et][0]])
                assert torch.equal(ei[1], b["n_id"][et[2]][b["ei"][et][1]])
    assert sorted(steps) == list(range(len(ref)))
    for k, parts in steps.items():
        want = ref[k]
        for t in data.node_types:
            assert set(torch.cat([b["n_id"][t] for b in parts]).tolist()) == set(want[t].n_id.tolist())
        for et in data.edge_types:
            assert set(torch.cat([b["e_id"][et] for b in parts]).tolist()) == set(want[et].e_id.tolist())
    return steps


class OwnerSends:
    """Rank 0 of 2 in process (a communicator's two calls the graph stores make): rank 1 holds parts 0
    and 1 and sends ``packed`` (its part 1, as its store packs it) in rounds of ``chunk`` values."""

    rank, world_size = 0, 2

    def __init__(self, packed: torch.Tensor, digest: str, chunk: int) -> None:
        self.packed, self.digest, self.chunk, self.rounds = packed, digest, chunk, 0

    def all_gather_object(self, obj, category="control"):
        return [obj, ([0, 1], self.digest, self.packed.numel())]

    def exchange(self, send, category):
        assert category == "graph" and send[1].numel() == 0
        self.rounds += 1
        return [send[0], self.packed[(self.rounds - 1) * self.chunk:self.rounds * self.chunk]]

