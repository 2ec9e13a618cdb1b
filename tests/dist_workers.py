"""Worker bodies for multi-process tests (importable by spawned processes).

Each runs inside a process started by ``gnnscale.process.groups.launch_local`` (gloo on 127.0.0.1,
a free port, a timeout on every collective) and returns plain tensors to the test.
"""
from __future__ import annotations

import os

import torch

from gnnscale.process.comm import Communicator
from gnnscale.data.feature_store import DistFeatureStore
from gnnscale.nn.models import GraphSAGE
from gnnscale.partitioning import load_part
from gnnscale.process.groups import init_distributed
from gnnscale.samplers import DistNeighborSampler


def sample_fetch_forward(parts_dir: str, seeds_orig: torch.Tensor, new_of_old: torch.Tensor, fanouts, seed: int, hidden: int):
    """Sample ``seeds_orig`` (original ids) on this rank, fetch features, run a fixed model.

    Returns blocks in ORIGINAL ids, the fetched input features, the outputs and the
    communication counters, so the test can compare with a single process.
    """
    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    sampler = DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, seed=seed, owned_keys=part.orig_ids)
    store = DistFeatureStore(part, part.book, comm, part.meta["feature_dim"])
    old_of_new = torch.empty_like(new_of_old)
    old_of_new[new_of_old] = torch.arange(new_of_old.numel())
    seeds = new_of_old[seeds_orig]
    mb = sampler.sample(seeds, epoch=1, step=4)
    sample_stats = comm.stats.snapshot()
    comm.stats.reset()
    x = store.fetch(mb.input_ids)
    feature_stats = comm.stats.snapshot()
    torch.manual_seed(123)
    model = GraphSAGE(part.meta["feature_dim"], hidden, part.meta["num_classes"], len(fanouts), dropout=0.0)
    model.eval()
    with torch.no_grad():
        out = model(x, mb.blocks)
    blocks = [
        {"src": old_of_new[b.src_ids], "dst": old_of_new[b.dst_ids], "edge_index": b.edge_index}
        for b in mb.blocks
    ]
    owned = (mb.input_ids >= part.offset) & (mb.input_ids < part.offset + part.num_owned)
    return {
        "rank": info.rank,
        "blocks": blocks,
        "x": x,
        "out": out,
        "sample_stats": sample_stats,
        "feature_stats": feature_stats,
        "remote_frontier_ids": mb.stats["remote_frontier_ids"],
        "input_remote_rows": int((~owned).sum()),
        "pid": os.getpid(),
    }


def die_on_rank(rank_to_die: int, timeout: float):
    """Rank ``rank_to_die`` exits abruptly; the others block in a collective and must error out."""
    info = init_distributed(timeout=timeout)
    comm = Communicator(info.rank, info.world_size, timeout=timeout)
    if info.rank == rank_to_die:
        os._exit(17)
    comm.all_reduce(torch.ones(1))
    return "unreachable"


def kill_self_on_rank(rank_to_die: int):
    """Rank ``rank_to_die`` SIGKILLs itself before joining (as the OOM killer would); the other
    returns at once."""
    import signal

    if int(os.environ["RANK"]) == rank_to_die:
        os.kill(os.getpid(), signal.SIGKILL)
    return "ok"


def sample_stats(parts_dir: str, seeds_by_rank: list, fanouts):
    """Sample ``seeds_by_rank[rank]`` (new ids) once and return the sampling traffic counters."""
    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    sampler = DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, owned_keys=part.orig_ids)
    mb = sampler.sample(torch.tensor(seeds_by_rank[info.rank], dtype=torch.int64))
    return {"stats": comm.stats.snapshot(), "src": [b.src_ids for b in mb.blocks]}


def fetch_with_cache(parts_dir: str, ids_by_rank: list, cache_ids_by_rank: list, bandwidth_gbps=None):
    """Fill a cache with ``cache_ids_by_rank[rank]``, then fetch ``ids_by_rank[rank]`` (new ids)."""
    from gnnscale.process.comm import NetworkModel

    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    net = NetworkModel(bandwidth_gbps, 1.0) if bandwidth_gbps else None
    comm = Communicator(info.rank, info.world_size, timeout=60, network=net)
    store = DistFeatureStore(part, part.book, comm, part.meta["feature_dim"])
    store.fill_cache(torch.tensor(cache_ids_by_rank[info.rank], dtype=torch.int64))
    fill = comm.stats.snapshot()
    comm.stats.reset()
    x = store.fetch(torch.tensor(ids_by_rank[info.rank], dtype=torch.int64))
    return {"x": x, "fill": fill, "fetch": comm.stats.snapshot(), "store": dict(store.stats),
            "cache_rows": store.cache.num_rows}


def bind_the_store_port_first() -> dict:
    """Every rank tries to bind MASTER_PORT before joining (a stranger racing rank 0's store for the
    port), then joins and sums its rank: the port must already be held, from the launcher's choice on."""
    import socket

    import torch.distributed as dist

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", int(os.environ["MASTER_PORT"])))
            taken = False
        except OSError:
            taken = True
    info = init_distributed(timeout=60)
    t = torch.tensor([float(info.rank)])
    dist.all_reduce(t)
    return {"port_was_held": taken, "sum": t.item()}


def sleep_forever():
    """A worker that never returns (for the launcher-death test)."""
    import time

    while True:
        time.sleep(1)


def historical_vs_exact(parts_dir: str, fanouts, layer: str, hidden: int, staleness: int):
    """Fill the halo tables by layer-wise inference, then compare historical with exact outputs.

    Returns this rank's outputs in both modes for its seeds (every 7th owned node), the
    layer-wise logits of the same seeds, the halo ids in original ids, how many historical
    leaves the blocks had, the ages read, and whether a too-old read was refused.
    """
    from gnnscale.data.degrees import DegreeStore
    from gnnscale.history.halo import ExchangeError, HaloExchange
    from gnnscale.tasks.inference import halo_inference, streamed_inference
    from gnnscale.nn.models import GNN

    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    book = part.book
    store = DistFeatureStore(part, book, comm, part.meta["feature_dim"])
    L = len(fanouts)
    torch.manual_seed(123)
    model = GNN(part.meta["feature_dim"], hidden, part.meta["num_classes"], L, layer=layer, dropout=0.5)
    model.eval()
    halo = HaloExchange(part.indptr, part.indices, book, comm, model.dims[1:L], staleness)
    own_x = part.features(torch.arange(part.num_owned))
    degree = DegreeStore(part.indptr, book, comm)  # own degrees; the others asked of their owners
    full = halo_inference(model, part.indptr, own_x, store, halo, step=-1, node_degree=degree)
    # Without halo tables, slice by slice (small slices: ranks have different counts of rounds).
    comm.stats.reset()
    streamed = streamed_inference(model, part.indptr, part.indices, store, slice_bytes=4 * 97 * store.feature_dim,
                                  node_degree=degree)
    streamed_rounds = dict(comm.stats.rounds)
    # The same with every layer's table memory-mapped on a deleted file (as when it does not fit).
    mapped = streamed_inference(model, part.indptr, part.indices, store, slice_bytes=4 * 97 * store.feature_dim,
                                node_degree=degree, table_budget=0)
    seeds = torch.arange(part.offset, part.offset + part.num_owned, 7)
    out = {}
    leaves = 0
    with torch.no_grad():
        for mode in ("exact", "historical"):
            sampler = DistNeighborSampler(part.indptr, part.indices, book, comm, fanouts, seed=3,
                                          owned_keys=part.orig_ids, mode=mode)
            mb = sampler.sample(seeds, epoch=0, step=0)
            comm.stats.reset()
            x = store.fetch(mb.input_ids)
            hist = None
            if mode == "historical":
                hist = [halo.lookup(i, b.hist_ids, 0) if b.num_hist else None for i, b in enumerate(mb.blocks)]
                leaves = sum(b.num_hist for b in mb.blocks)
            lookup = degree.lookup(torch.unique(torch.cat([b.src_ids for b in mb.blocks])))
            out[mode] = model(x, mb.blocks, hist=hist, node_degree=lookup)
    # The refresh rule (one hop over histories) with full neighborhoods reproduces the fill's rows.
    from gnnscale.tasks.inference import refresh_embeddings
    from gnnscale.samplers.kernels import Kernels

    kernels = Kernels(book.num_nodes, "cpu", "torch")
    nodes = halo.boundary[::5]

    def sample_fn(ids):
        rows = ids - part.offset
        return kernels.sample(part.indptr, part.indices, rows, part.orig_ids[rows], -1, 0)

    fresh = refresh_embeddings(model, nodes, sample_fn, kernels.relabel, store, halo, node_degree=degree)
    refresh_err = max((float((f - halo.own_tables[l][nodes - part.offset]).abs().max()) if nodes.numel() else 0.0)
                      for l, f in enumerate(fresh))
    # The bound: rows stamped -1 may be read up to step staleness - 1, not at step staleness.
    some = halo.halo_ids[:5]
    ok_age = int(halo.ages(1, some, staleness - 1).max()) if some.numel() else 0
    refused = None
    if some.numel():
        try:
            halo.lookup(1, some, staleness)
            refused = False
        except ExchangeError as err:
            refused = str(err)
    return {
        "rank": info.rank,
        "exact": out["exact"],
        "historical": out["historical"],
        "layerwise": full[seeds - part.offset],
        "streamed_all": streamed, "layerwise_all": full, "streamed_rounds": streamed_rounds,
        "mapped_all": mapped.clone(),
        "slices": int(part.indptr[-1]) // 97,
        "leaves": leaves,
        "halo_orig": torch.sort(torch.cat([load_part(parts_dir, p, verify=False).orig_ids for p in range(book.num_parts)])[halo.halo_ids]).values,
        "table_rows": [t.rows.shape[0] for t in halo.tables],
        "ok_age": ok_age,
        "refresh_err": refresh_err,
        "refreshed": int(nodes.numel()),
        "refused": refused,
    }


def gather_objects(sizes: list):
    """all_gather_object of a list of ``sizes[rank]`` ints; returns what arrived and the byte counts."""
    import pickle

    info = init_distributed(timeout=60)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    obj = {"rank": info.rank, "values": list(range(sizes[info.rank]))}
    got = comm.all_gather_object(obj)
    return {"got": got, "stats": comm.stats.snapshot(),
            "pickled": len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))}


def pipeline_stage_dies(parts_dir, cfg, die_rank: int, after_steps: int):
    """train_worker, except that rank ``die_rank`` exits without a word (as if killed) after
    ``after_steps`` pipeline steps."""
    import os

    from gnnscale.parallel import stage as stage_module
    from gnnscale.training.trainer import train_worker

    if int(os.environ["RANK"]) == die_rank:
        real, calls = stage_module.PipelineStage.run, [0]

        def run(self, *a, **k):
            if calls[0] == after_steps:
                os._exit(9)
            calls[0] += 1
            return real(self, *a, **k)

        stage_module.PipelineStage.run = run
    return train_worker(parts_dir, cfg)


def dropout_keys_by_step(parts_dir: str, cfg):
    """train_worker of a data-parallel run, recording each keyed dropout the model draws in
    training: ``{"seen": [{"at": (epoch, step), "layer": i, "keys": row keys, "seed": its seed}],
    "steps": steps per epoch}`` (``GNN._keyed``'s answers, under the step ``DataParallel._step`` runs)."""
    from gnnscale.nn.models import GNN
    from gnnscale.parallel.data_parallel import DataParallel
    from gnnscale.training.trainer import train_worker

    now, seen = {}, []
    real_step, real_keyed = DataParallel._step, GNN._keyed

    def step(self, epoch, step, gstep, mb):
        now["at"] = (epoch, step)
        return real_step(self, epoch, step, gstep, mb)

    def keyed(self, rng_key, row_keys, i, block_index):
        keys, seed = real_keyed(self, rng_key, row_keys, i, block_index)
        if keys is not None:
            seen.append({"at": now.get("at"), "layer": i, "keys": keys.clone(), "seed": seed})
        return keys, seed

    DataParallel._step, GNN._keyed = step, keyed
    res = train_worker(parts_dir, cfg)
    return {"seen": seen, "steps": [e["steps"] for e in res["epochs"]]}


def degree_answers(parts_dir: str, ids_by_rank: list):
    """Each rank asks its DegreeStore for ``ids_by_rank[rank]`` (new global ids: any owner, any
    order, repeats) and returns the answers."""
    from gnnscale.data.degrees import DegreeStore

    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank, verify=False)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    store = DegreeStore(part.indptr, part.book, comm)
    return store.fetch(torch.tensor(ids_by_rank[info.rank], dtype=torch.int64))


def chunk_step_gradients(parts_dir: str, cfg, bounds, steps: int, halo_gradients: bool):
    """One stage of a chunk pipeline with ``bounds``: fills the tables, runs ``steps`` 1F1B steps
    with every chunk's dropout key 0 and returns, per step, the last stage's loss and this stage's
    parameter gradients (after the encoder copies' sum across the stages)."""
    from gnnscale.nn.spec import ModelSpec
    from gnnscale.parallel.chunk_graph import load_chunk_graph
    from gnnscale.parallel.chunk_pipeline import ChunkStage

    info = init_distributed(timeout=cfg.timeout)
    comm = Communicator(info.rank, info.world_size, timeout=cfg.timeout)
    graph = load_chunk_graph(parts_dir, verify=False)
    model = ModelSpec.of(cfg, graph.feature_dim, graph.num_classes).build(cfg.seed)
    stage = ChunkStage(model, bounds, info.rank, list(range(info.world_size)), comm, graph, lr=cfg.lr,
                       halo_gradients=halo_gradients)
    out = []
    for step in range(steps):
        stats = stage.step(step, [0] * graph.num_chunks, "1f1b")
        out.append({"loss": stats.loss,
                    "grads": {n: p.grad.clone() for n, p in stage.model.named_parameters() if p.grad is not None}})
    return out


def run_configs(parts_dir: str, cfgs: list):
    """Train each of ``cfgs`` in turn in these processes (one process group for all of them) and
    return rank 0's summary of each: the weights' digest, steps, the last epoch's figures and the
    run's own (plan, cache, exchange, stages, process figures, where it resumed); or its error."""
    from gnnscale.errors import GnnscaleError
    from gnnscale.training.trainer import Trainer

    out = []
    for cfg in cfgs:
        trainer = None
        try:
            trainer = Trainer(parts_dir, cfg)
            res = trainer.fit()
        except GnnscaleError as err:
            out.append({"error": f"{type(err).__name__}: {err}"})
            break  # a failed run may leave its peers mid-collective: stop here
        finally:
            if trainer is not None:
                trainer.close()
        out.append({"digest": res["final_weights_sha256"], "epochs": len(res["epochs"]),
                    "steps": [e["steps"] for e in res["epochs"]], "last": res["epochs"][-1], "plan": res["plan"],
                    "cache": res["cache"], "exchange": res["exchange"], "stages": res["stages"],
                    "process": res["process"], "resumed_at": res["resumed_at"], "early_stop": res.get("early_stop"),
                    "best": {"val": res["best_val_acc"], "test": res["test_acc_at_best_val"], "epoch": res["best_epoch"]}})
    return out


def typed_sample(edge_index, edge_type, counts, relations, dst_type, fanouts, new_of_old, seeds_orig):
    """Relation-wise sampling of a typed graph over hand-cut parts (contiguous new ids, in-edges
    sorted by (relation, original source)); blocks returned in ORIGINAL ids."""
    from gnnscale.partitioning import PartitionBook
    from gnnscale.samplers.typed import TypedGraph, relation_indptr, typed_fanouts
    from test_typed_sampling import csc_by_relation

    info = init_distributed(timeout=60)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    n = new_of_old.numel()
    bounds = torch.linspace(0, n, info.world_size + 1).round().long()
    book = PartitionBook(bounds)
    lo, hi = int(bounds[info.rank]), int(bounds[info.rank + 1])
    indptr, indices, etype = csc_by_relation(edge_index, edge_type, n, relabel=new_of_old)
    e_lo, e_hi = int(indptr[lo]), int(indptr[hi])
    indptr_p, indices_p, etype_p = indptr[lo:hi + 1] - e_lo, indices[e_lo:e_hi], etype[e_lo:e_hi]
    old_of_new = torch.empty_like(new_of_old)
    old_of_new[new_of_old] = torch.arange(n)
    type_of_orig = torch.repeat_interleave(torch.arange(len(counts)), torch.tensor(counts))
    typed = TypedGraph(relation_indptr(indptr_p, etype_p, len(relations)), torch.tensor(dst_type),
                       typed_fanouts([1, 1], relations, 2, fanouts), lambda ids: type_of_orig[old_of_new[ids]])
    sampler = DistNeighborSampler(indptr_p, indices_p, book, comm, [1, 1], seed=9, owned_keys=old_of_new[lo:hi],
                                  typed=typed, backend="torch")
    mb = sampler.sample(new_of_old[seeds_orig], epoch=2, step=3)
    rounds = comm.stats.snapshot()["rounds"]
    return {"rank": info.rank, "rounds": rounds,
            "blocks": [{"src": old_of_new[b.src_ids], "edge_index": b.edge_index, "edge_type": b.edge_type,
                        "node_type": b.node_type} for b in mb.blocks]}


def typed_part_sample(parts_dir: str, seeds_orig, fanouts, per_relation):
    """Relation-wise sampling over a typed partition's parts (the engine's samplers); blocks in ORIGINAL ids."""
    from types import SimpleNamespace

    from gnnscale.data.loader import build_samplers

    info = init_distributed(timeout=60)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    part = load_part(parts_dir, info.rank)
    orig = comm.all_gather_object(part.orig_ids)
    old_of_new = torch.cat(orig)
    new_of_old = torch.empty_like(old_of_new)
    new_of_old[old_of_new] = torch.arange(old_of_new.numel())
    cfg = SimpleNamespace(fanouts=fanouts, eval_fanouts=None, seed=3, sampler_backend="auto",
                          relation_fanouts=per_relation)
    sampler, _, _ = build_samplers(part, comm, cfg, fanouts)
    mb = sampler.sample(new_of_old[seeds_orig], epoch=1, step=2)
    return {"rank": info.rank, "blocks": [{"src": old_of_new[b.src_ids], "edge_index": b.edge_index,
                                           "edge_type": b.edge_type, "node_type": b.node_type} for b in mb.blocks]}


def dist_embedding_steps(num_rows: int, dim: int, offsets, ids_by_step, w1, w2, seed: int, lr: float,
                         resume_at: int, typed: dict):
    """Sharded learned embeddings (``gnnscale.data.embeddings``) trained a few steps on this rank.

    Phase 1: a ``DistEmbedding`` of ``num_rows`` x ``dim`` over ``PartitionBook(offsets)``; each
    step pulls ``ids_by_step[step][rank]``, backpropagates ``((rows * w1) ** 2).sum() + (rows * w2).sum()``
    and pushes. Its state is saved (through torch.save) before step ``resume_at``; a second table
    (another seed) loads it and replays the remaining steps. Phase 2: ``TypedEmbeddings`` over a
    hand-made ``TypedPartitionBook`` (``typed``: per-part type counts, feature_dims, names, this
    rank's TypedInput and the encoder's linear weights) feeding a ``TypedEncoder(external=True)``:
    one step of the same loss on the encoder's output. Returns the gathered tables (rank 0) and
    each step's counters.
    """
    import io

    from gnnscale.data.embeddings import DistEmbedding, TypedEmbeddings
    from gnnscale.nn.typed_encoder import TypedEncoder
    from gnnscale.partitioning.book import PartitionBook, TypedPartitionBook
    from gnnscale.samplers.block import TypedInput

    info = init_distributed(timeout=60)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    book = PartitionBook(offsets)

    def run(emb, steps):
        out = []
        for step in steps:
            comm.stats.reset()
            emb.reset_stats()
            rows = emb.pull(torch.tensor(ids_by_step[step][info.rank], dtype=torch.int64))
            (((rows * w1) ** 2).sum() + (rows * w2).sum()).backward()
            emb.push()
            out.append({"comm": comm.stats.snapshot(), "emb": dict(emb.stats)})
        return out

    emb = DistEmbedding(num_rows, dim, book, comm, seed=seed, table="author", lr=lr)
    start = emb.gather()
    stats = run(emb, range(resume_at))
    buf = io.BytesIO()
    torch.save(emb.state_dict(), buf)
    stats += run(emb, range(resume_at, len(ids_by_step)))
    comm.stats.reset()
    final = emb.gather()
    gather_stats = comm.stats.snapshot()
    again = DistEmbedding(num_rows, dim, book, comm, seed=seed + 1, table="author", lr=lr)
    buf.seek(0)
    again.load_state_dict(torch.load(buf))
    run(again, range(resume_at, len(ids_by_step)))
    resumed = again.gather()

    counts = torch.tensor(typed["counts"], dtype=torch.int64)  # [P, T]
    zero = torch.zeros(counts.shape[0], 1, dtype=torch.int64)
    type_starts = torch.cat([zero, counts.cumsum(1)], 1)
    type_offsets = torch.cat([torch.zeros(1, counts.shape[1], dtype=torch.int64), counts.cumsum(0)], 0).T
    tbook = TypedPartitionBook(torch.cat([zero[:1, 0], counts.sum(1).cumsum(0)]), type_starts, type_offsets)
    temb = TypedEmbeddings(tbook, typed["feature_dims"], dim, comm, seed=seed, lr=lr, node_types=typed["names"])
    enc = TypedEncoder(typed["feature_dims"], tbook.num_nodes_per_type().tolist(), dim, external=True)
    enc.linears.load_state_dict(typed["linears"])
    nt, ti, feats = typed["inputs"][info.rank]
    x = temb.attach(TypedInput(nt, ti, feats))
    h = enc(x)
    (((h * w1) ** 2).sum() + (h * w2).sum()).backward()
    temb.push()
    return {"rank": info.rank, "start": start, "final": final, "resumed": resumed, "stats": stats,
            "gather_stats": gather_stats, "nbytes": emb.nbytes, "typed": temb.gather_all(),
            "typed_state": {t: s["step"] for t, s in temb.state_dict().items()},
            "encoder_params": [n for n, _ in enc.named_parameters()]}


def sample_asked_and_here(parts_dir: str, seeds: torch.Tensor, fanouts, seed: int, peers_of: list):
    """Sample the global ids ``seeds`` twice on this rank: owners asked (the default), then with
    the parts ``peers_of[rank]`` read from the folder (``read_host_parts``; complete when every
    rank reads every other part). Edge features when the partition has them. Returns each
    sampler's blocks (ids, edges, edge rows), its exchange counters and frontier counts."""
    from gnnscale.data.host_parts import HostRanks, open_host_graphs

    info = init_distributed(timeout=60)
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    attr = part.edge_attr
    make = lambda: DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, seed=seed,  # noqa: E731
                                       owned_keys=part.orig_ids, edge_attr=attr)
    asked, here = make(), make()
    complete = all(len(p) == info.world_size - 1 for p in peers_of)
    hosts = HostRanks(tuple(peers_of[info.rank]), complete)
    here.read_host_parts(open_host_graphs(parts_dir, part.book, hosts, part.meta, edge_attr=attr is not None), complete)
    out = {}
    for name, sampler in (("asked", asked), ("here", here)):
        comm.stats.reset()
        mb = sampler.sample(seeds, epoch=1, step=4)
        out[name] = {"blocks": [(b.src_ids, b.dst_ids, b.edge_index, b.edge_attr) for b in mb.blocks],
                     "stats": comm.stats.snapshot(), "remote": mb.stats["remote_frontier_ids"],
                     "host": mb.stats["host_frontier_ids"]}
    return out


def huge_page_probe(mb: int):
    """A ``mb`` MB tensor written once: the worker's THP setting and the huge pages it got (kB)."""
    import os

    x = torch.ones(mb << 18)  # float32: mb MB
    with open("/proc/self/smaps_rollup") as f:
        anon_huge_kb = next(int(line.split()[1]) for line in f if line.startswith("AnonHugePages:"))
    return {"env": os.environ.get("THP_MEM_ALLOC_ENABLE"), "anon_huge_kb": anon_huge_kb, "sum": float(x.sum())}


def launch_probe():
    """Where a launched worker came from (its parent's pid) and the launch settings it sees."""
    import os

    keys = ("OMP_WAIT_POLICY", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "THP_MEM_ALLOC_ENABLE", "GNNSCALE_PROBE",
            "TORCHINDUCTOR_CACHE_DIR", "PYTEST_CURRENT_TEST")
    return {"ppid": os.getppid(), "threads": torch.get_num_threads(), "env": {k: os.environ.get(k) for k in keys}}


def host_reads_from_views(views: list, seeds: torch.Tensor, fanouts, seed: int):
    """Rank r sees the partition folder ``views[r]`` (its own part whole, a peer's files perhaps
    missing, as on hosts holding different copies): the auto host reads (``host_setup``, options
    unset), then what a data-parallel step's data path does with them: open the reads decided,
    sample ``seeds`` (global new ids) and fetch the first block's rows. Returns the reads, the
    blocks (and those of a sampler asking the owners), the rows and the step's exchange rounds."""
    from gnnscale.config import TrainConfig
    from gnnscale.data.host_parts import host_setup, open_host_features, open_host_graphs
    from gnnscale.planning.plan import DATA_PARALLEL

    info = init_distributed(timeout=60)
    parts_dir = views[info.rank]
    part = load_part(parts_dir, info.rank)
    comm = Communicator(info.rank, info.world_size, timeout=60)
    reads = host_setup(comm, parts_dir, TrainConfig(), DATA_PARALLEL)
    make = lambda: DistNeighborSampler(part.indptr, part.indices, part.book, comm, fanouts, seed=seed,  # noqa: E731
                                       owned_keys=part.orig_ids)
    sampler, asked = make(), make()
    store = DistFeatureStore(part, part.book, comm, part.meta["feature_dim"])
    if reads.features:
        store.read_host_parts(open_host_features(parts_dir, part.book, reads.hosts, part.meta["feature_dim"]),
                              reads.hosts.complete)
    if reads.graph:
        sampler.read_host_parts(open_host_graphs(parts_dir, part.book, reads.hosts, part.meta), reads.hosts.complete)
    comm.stats.reset()
    mb = sampler.sample(seeds, epoch=1, step=0)
    x = store.fetch(mb.blocks[0].src_ids)
    rounds = dict(comm.stats.snapshot()["rounds"])
    ref = asked.sample(seeds, epoch=1, step=0)
    return {"reads": reads.info(), "blocks": [(b.src_ids, b.dst_ids, b.edge_index) for b in mb.blocks],
            "asked": [(b.src_ids, b.dst_ids, b.edge_index) for b in ref.blocks], "x": x, "rounds": rounds}


def evaluation_logits(parts_dir: str, cfg, model_path: str) -> dict:
    """``gnnscale evaluate``'s worker (evaluate_worker) with the logits it judged kept: int64 orig_ids
    [n_owned] and float32 [n_owned, C] (layer-wise: every owned node; sampled: the evaluated nodes'
    rows, NaN elsewhere), beside its result."""
    from gnnscale.tasks import evaluation
    from gnnscale.training.evaluate import evaluate_worker

    got: dict = {"rows": []}
    full, sampled = evaluation.Evaluator.full_logits, evaluation.sampled_outputs

    def keep_full(self, net, step):
        got["full"] = out = full(self, net, step)
        return out

    def keep_sampled(*args, **kwargs):
        for seeds, out in sampled(*args, **kwargs):
            got["rows"].append((seeds.clone(), out.clone()))
            yield seeds, out

    evaluation.Evaluator.full_logits, evaluation.sampled_outputs = keep_full, keep_sampled
    try:
        res = evaluate_worker(parts_dir, cfg, model_path)
    finally:
        evaluation.Evaluator.full_logits, evaluation.sampled_outputs = full, sampled
    part = load_part(parts_dir, int(os.environ["RANK"]))
    logits = got.get("full")
    if logits is None:
        logits = torch.full((part.num_owned, got["rows"][0][1].shape[1]), float("nan"))
        for seeds, out in got["rows"]:
            logits[seeds - part.offset] = out
    return {"result": res, "orig_ids": part.orig_ids, "logits": logits, "layerwise": "full" in got}
