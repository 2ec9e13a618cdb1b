"""A worker's data side in one call: :func:`open_data` opens, for one part, the samplers (training
and evaluation draws), the feature store (per node type for a typed part; the other parts on the
host read from their files, ``--host-features``) and the degree store, and the samplers read the
host's other graphs (``--host-graph``). Every axis, the offline evaluation and ``gnnscale embed``
open their data through it, so the options mean the same wherever a part is read. The PyG stores
for users' own loops (:mod:`gnnscale.pyg.stores`) do not open a worker's data side (no engine
sampler, no run options), but read their rows through the same pieces: the row reader
(:class:`~gnnscale.data.rows.RowReader`, through :class:`~gnnscale.data.feature_store.DistFeatureStore`
for ``x``), the host plan (:func:`~gnnscale.data.host_parts.plan_host_reads`) and the cache
chooser (:func:`~gnnscale.data.feature_cache.choose_cache_ids`).

A sketch (one worker of a launch; ``comm`` its communicator)::

    part = load_part(parts_dir, comm.rank)
    data = open_data(part, cfg, comm, parts_dir=parts_dir, degrees=True)
    mb = data.sampler.sample(seeds, epoch=0, step=0)
    x = data.features.fetch(mb.input_ids)          # float32 [len(input_ids), F]
    deg = data.degrees.lookup(mb.input_ids)        # in-degrees (GCN-style layers)
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from gnnscale.data.degrees import DegreeStore
from gnnscale.data.feature_cache import setup_cache
from gnnscale.data.host_parts import HostReads, host_setup, open_host_features, open_host_graphs
from gnnscale.data.loader import build_samplers
from gnnscale.data.typed_store import open_features
from gnnscale.planning.plan import DATA_PARALLEL
from gnnscale.samplers import DistNeighborSampler, check_fanouts

log = logging.getLogger("gnnscale.data")


@dataclass
class WorkerData:
    """One worker's opened data side (:func:`open_data`).

    Attributes:
        part: the worker's :class:`~gnnscale.partitioning.part.LocalPart`.
        cfg: the run's options (sampling seed and backend, exchange mode, cache options).
        comm: the communicator of the worker's data group (every sampler, store and cache fill
            is collective over it).
        fanouts: the training fan-outs, one per hop (int; -1: every neighbour).
        eval_fanouts: the evaluation's (``--eval-fanouts``, else the training ones).
        sampler: the training :class:`~gnnscale.samplers.DistNeighborSampler` (None: not asked for).
        eval_sampler: the evaluation's, with a stream of its own (None: not asked for).
        features: a :class:`~gnnscale.data.feature_store.DistFeatureStore` (a typed part: a
            :class:`~gnnscale.data.typed_store.TypedFeatureStore`), rows on ``device``.
        degrees: a :class:`~gnnscale.data.degrees.DegreeStore` (None: not asked for).
        host_reads: what is read from the partition folder instead of asked of the owners.
        edge_attr: whether the samplers give every block its edges' features.
    """

    part: object
    cfg: object
    comm: object
    fanouts: list[int]
    eval_fanouts: list[int]
    sampler: DistNeighborSampler | None
    eval_sampler: DistNeighborSampler | None
    features: object
    degrees: DegreeStore | None
    host_reads: HostReads
    edge_attr: bool = False
    _graphs: dict = field(default_factory=dict, repr=False)

    def hop_sampler(self, fanouts: Sequence[int]) -> DistNeighborSampler:
        """A training sampler of the part with ``fanouts`` (e.g. the first hops of a pipeline
        stage's), the same seed, backend and exchange mode as :attr:`sampler`, reading the
        host's graphs as it does: its draws equal :attr:`sampler`'s for those hops."""
        part, cfg = self.part, self.cfg
        labor = self.sampler is not None and self.sampler.labor
        sampler = DistNeighborSampler(part.indptr, part.indices, part.book, self.comm, list(fanouts), seed=cfg.seed,
                                      owned_keys=part.orig_ids, backend=cfg.sampler_backend, mode=cfg.exchange,
                                      labor=labor)
        if self.host_reads.graph:
            sampler.read_host_parts(self._graphs, self.host_reads.hosts.complete)
        if labor:  # the training sampler's source keys (of this part and of the host's parts read here)
            sampler.set_source_keys(self.sampler.source_keys, {k: g.source_keys for k, g in self.sampler.host.items()},
                                    local_mode_kept=False)
        return sampler

    def fill_cache(self, sample_epoch: Callable | None, comm=None, held: torch.Tensor | None = None,
                   resumed: torch.Tensor | None = None, complete: bool = False) -> dict:
        """Fill the feature store's cache as ``cfg`` says (:func:`~gnnscale.data.feature_cache.setup_cache`:
        ``sample_epoch`` the training batches of an epoch for ``presample``, ``held`` historical
        mode's halo ids, ``resumed`` a checkpoint's cache ids); its figures, gathered over
        ``comm`` (default: the data group). Collective."""
        return setup_cache(self.features, self.part, self.cfg, comm if comm is not None else self.comm, sample_epoch,
                           held=held, resumed=resumed, complete=complete)


def set_source_keys(sampler, part, comm, graphs: dict, complete: bool) -> None:
    """Layer-neighbour sampling (``--sampler labor``): give ``sampler`` the original id of the
    source of every in-edge it draws from, this part's and the host's parts read here
    (``graphs``), so that every owner keys a shared neighbour's uniform alike. One exchange of
    the sources' ids with their owners at start-up (none when every part is read on this host),
    collective over ``comm``."""
    from gnnscale.data.node_keys import NodeKeyStore

    pieces = [part.indices] + [g.indices for g in graphs.values()]
    flat = torch.cat([torch.as_tensor(p, dtype=torch.int64) for p in pieces])
    uniq, inv = torch.unique(flat, return_inverse=True)
    host = {k: g.owned_keys for k, g in graphs.items()}
    keys = NodeKeyStore(torch.as_tensor(part.orig_ids, dtype=torch.int64), part.book, comm, host=host,
                        host_complete=complete).fetch(uniq)[inv]
    split = list(torch.split(keys, [int(p.shape[0]) for p in pieces]))
    sampler.set_source_keys(split[0], dict(zip(graphs, split[1:])))


def open_data(part, cfg, comm, device: torch.device | str = "cpu", mode: str = DATA_PARALLEL, *,
              parts_dir=None, fanouts: Sequence[int] | None = None, edge_attr: bool = False, degrees: bool = False,
              samplers: bool = True) -> WorkerData:
    """Open ``part``'s data side for a run of ``cfg`` on ``comm`` (collective: every rank of
    ``comm`` calls it at the same point).

    Args:
        part: this rank's :class:`~gnnscale.partitioning.part.LocalPart` (``load_part``).
        cfg: the run's :class:`~gnnscale.config.TrainConfig`.
        comm: the communicator of the part's data group (rank r holds part r).
        device: where fetched feature rows are put.
        mode: the plan's parallel mode (``gnnscale.planning.plan``), which decides the default
            host reads.
        parts_dir: the partition folder (None: nothing read from the other parts' files).
        fanouts: the training fan-outs (default ``cfg.fanouts``).
        edge_attr: give every sampled block its edges' features (float32 [E_b, De]); the part
            must have them (:func:`~gnnscale.nn.edge_features.resolve_edge_dim` decides).
        degrees: open a degree store (GCN-style layers on sampled blocks).
        samplers: build the training and evaluation samplers (False: a worker that reads the
            whole part layer by layer, such as ``gnnscale embed``).

    Raises:
        SamplerError: ``edge_attr`` on a part without edge features.
    """
    fanouts = check_fanouts(cfg.fanouts if fanouts is None else list(fanouts))
    sampler = eval_sampler = None
    eval_fanouts = list(fanouts)
    if samplers:
        sampler, eval_sampler, eval_fanouts = build_samplers(part, comm, cfg, fanouts, cfg.exchange,
                                                             edge_attr=edge_attr)
    features = open_features(part, comm, device)  # per node type for a typed part
    reads = HostReads(False, False, None)
    if parts_dir is not None:
        reads = host_setup(comm, parts_dir, cfg, mode, part.meta.get("typed"))
    hosts = reads.hosts
    if hosts is not None and hosts.peers and comm.rank == 0:  # an engine detail, at debug (issue 54)
        log.debug("on this host: %d other part(s) read from the partition folder (%s); --no-host-features / "
                  "--no-host-graph send them through the communicator", len(hosts.peers),
                  ", ".join(w for w, on in (("feature rows", reads.features), ("sampling", reads.graph)) if on))
    if reads.features:
        features.read_host_parts(open_host_features(parts_dir, part.book, hosts, part.meta["feature_dim"]),
                                 hosts.complete)
    graphs = {}
    if reads.graph:
        graphs = open_host_graphs(parts_dir, part.book, hosts, part.meta, edge_attr=edge_attr)
        for s in (sampler, eval_sampler):
            if s is not None:
                s.read_host_parts(graphs, hosts.complete)
    if sampler is not None and sampler.labor:
        set_source_keys(sampler, part, comm, graphs, hosts.complete if reads.graph else False)
    store = DegreeStore(part.indptr, part.book, comm) if degrees else None
    return WorkerData(part, cfg, comm, list(fanouts), list(eval_fanouts), sampler, eval_sampler, features, store,
                      reads, edge_attr, graphs)
