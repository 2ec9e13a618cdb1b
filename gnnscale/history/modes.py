"""The exchange modes of data-parallel training as hooks the trainer calls at fixed points.

``exact`` (sampling crosses partitions) and ``local`` (cross-partition edges dropped) change
only the sampler, so their hooks are empty. ``historical`` keeps halo tables
(:class:`~gnnscale.history.halo.HaloExchange`) and fills them in :meth:`HistoricalMode.start`
(one layer-wise inference pass), hands the step's historical rows to the model
(:meth:`HistoricalMode.reads`), pushes and refreshes boundary rows after each step
(:meth:`HistoricalMode.after_step`), lands the last push at the end of the epoch
(:meth:`HistoricalMode.end_epoch`) and reports its figures (:meth:`HistoricalMode.info`).
"""
from __future__ import annotations

import logging
import time

import torch

from gnnscale.config import check_mode, check_staleness
from gnnscale.data.degrees import DegreeStore
from gnnscale.data.typed_store import TypedFeatureStore
from gnnscale.errors import RuntimeSetupError
from gnnscale.history.halo import HaloExchange
from gnnscale.samplers.kernels import Kernels
from gnnscale.tasks.inference import halo_inference, refresh_embeddings

log = logging.getLogger("gnnscale.train")

EMBEDDING_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def embedding_dtype(name: str) -> torch.dtype:
    if name not in EMBEDDING_DTYPES:
        raise RuntimeSetupError(f"embedding_dtype must be one of {', '.join(EMBEDDING_DTYPES)}; found {name!r}")
    return EMBEDDING_DTYPES[name]


class ExchangeMode:
    """``exact`` and ``local``: nothing between the steps."""

    halo = None

    def __init__(self, name: str) -> None:
        self.name = check_mode(name)

    def start(self) -> float:
        """Start-up work before the first step; its seconds (0 here)."""
        return 0.0

    def reads(self, mb, gstep: int) -> tuple[list | None, list | None]:
        """(historical rows per block, a list for the emitted hidden rows): none here."""
        return None, None

    def after_step(self, epoch: int, gstep: int, mb, emit) -> None:
        """After the optimizer step of global step ``gstep``."""

    def end_epoch(self) -> None:
        """After the epoch's last step (before its figures are gathered)."""

    def full_logits(self, step: int):
        """Owned nodes' logits by layer-wise inference over this mode's tables (None: there are none;
        the evaluation streams instead)."""
        return None

    def age_counts(self) -> dict:
        return {}

    def reset_stats(self) -> None:
        pass

    def info(self) -> dict:
        return {"mode": self.name, "staleness": None}


class HistoricalMode(ExchangeMode):
    """Halo tables of hidden embeddings, kept within ``staleness`` steps (see :mod:`gnnscale.history.halo`).

    Args:
        net: the bare model (not DDP's wrapper). part: this rank's part. sampler: the training
            sampler (its key streams and owned-node sampling serve the refresh).
        features, degrees: the training feature store and degree store (the fill's rows).
        emb_comm: the embedding group's communicator (pushes, refresh fetches, in their own thread).
        comm: the world's (figures). cfg: the run's options. device: the training device.
        inputs: ``x -> x`` applied to the fill's and the refresh's input rows before the encoder
            (the step hooks' ``eval_inputs``: a typed graph's featureless types' learned rows).

    A typed part (``part.typed``) keeps the same tables (one row per halo node, whatever its
    type, of the layer's width): the sampler draws owned nodes by relation, the fill and the
    refresh fetch per node type and hand the layers relations and node types.
    """

    def __init__(self, net, part, sampler, features, degrees, emb_comm, comm, cfg, device, inputs=None) -> None:
        super().__init__("historical")
        self.net, self.part, self.sampler, self.features, self.degrees = net, part, sampler, features, degrees
        self.comm, self.emb_comm, self.cfg, self.inputs = comm, emb_comm, cfg, inputs
        self.staleness = check_staleness(cfg.staleness)
        book = part.book
        self.halo = HaloExchange(part.indptr, part.indices, book, emb_comm, net.dims[1:net.num_layers],
                                 self.staleness, dtype=embedding_dtype(cfg.embedding_dtype))
        # the refresh's rows: the training store's part and cache (filled once, by the training store),
        # the owners asked through the embedding group; with the halo's rows held, nothing is asked
        self.refresh_features = features.over(emb_comm, complete=cfg.halo_features == "hold")
        self.typed = isinstance(self.refresh_features, TypedFeatureStore)
        self.refresh_degrees = DegreeStore(part.indptr, book, emb_comm) if net.uses_degree else None
        # Its own kernels: the compiled relabeler keeps a table that the prefetch thread also uses.
        self.refresh_kernels = Kernels(book.num_nodes, part.indptr.device, cfg.sampler_backend,
                                       held=(part.offset, part.offset + part.num_owned))
        self._info = {"mode": self.name, "staleness": self.staleness, "halo_rows": self.halo.num_halo,
                      "halo_table_bytes": self.halo.table_bytes, "boundary_rows": int(self.halo.boundary.numel())}
        extra = self.halo.refresh_seeds(0).numel()
        if extra > cfg.batch_size:
            log.warning(
                "rank %d: to keep every halo embedding at most %d steps old, each step refreshes %d boundary "
                "nodes (1/%d of %d; one hop per layer) beside its %d seeds; raise --staleness to make steps "
                "cheaper (and push fewer bytes)", comm.rank, self.staleness, extra, self.halo.refresh_period,
                self.halo.boundary.numel(), cfg.batch_size)
        if comm.rank == 0:
            log.info("exchange mode %s: %d halo rows on rank 0, halo tables %.1f MB (%d rows x %s x 4 B), staleness "
                     "bound %d steps", self.name, self.halo.num_halo, self.halo.table_bytes / 1e6, self.halo.num_halo,
                     "+".join(map(str, self.halo.dims)) or "0", self.staleness)

    def start(self, step: int = -1) -> float:
        """Fill the tables by one layer-wise inference pass with the current weights (collective);
        the fill's bytes and the push schedule go into :meth:`info`. Returns its seconds."""
        t0 = time.perf_counter()
        self.net.eval()
        self.full_logits(step)
        self.net.train()
        secs = time.perf_counter() - t0
        got = torch.tensor([self.emb_comm.stats.received.get("embedding", 0),
                            self.features.comm.stats.received.get("feature", 0)], dtype=torch.float64)
        got = self.comm.all_reduce(got)
        self._info.update(fill_seconds=secs, fill_embedding_bytes=int(got[0]), fill_feature_bytes=int(got[1]),
                          push_interval=self.halo.push_interval, refresh_period=self.halo.refresh_period)
        if self.comm.rank == 0:
            log.info("halo tables filled by layer-wise inference in %.2f s (%.1f MB received, all ranks)", secs,
                     float(got.sum()) / 1e6)
        return secs

    def reads(self, mb, gstep: int) -> tuple[list, list]:
        hist = [self.halo.lookup(i, b.hist_ids, gstep) if b.num_hist else None for i, b in enumerate(mb.blocks)]
        return hist, []

    def after_step(self, epoch: int, gstep: int, mb, emit) -> None:
        """Recompute this step's refresh slice, push what is due (the push overlaps the next step)."""
        halo, sampler, kernels = self.halo, self.sampler, self.refresh_kernels
        halo.drain()  # the previous push (overlapped with this step) lands; its group is free
        nodes = halo.refresh_seeds(gstep)
        key = sampler.keys(epoch, gstep, 1000)  # a stream of its own
        fanout = self.cfg.fanouts[0]

        with_attr = self.net.uses_edge_attr  # edge features: the drawn edges' positions, then their rows

        def sample_fn(ids: torch.Tensor):
            if self.typed:  # by relation, with the first hop's fan-outs: (counts, nbrs, edge_type)
                return sampler.sample_owned_typed(ids, 0, key, kernels=kernels)
            return sampler.sample_owned(ids, fanout, key, kernels=kernels, return_edges=with_attr)

        self.net.eval()
        fresh = refresh_embeddings(self.net, nodes, sample_fn, kernels.relabel, self.refresh_features, halo,
                                   node_degree=self.refresh_degrees,
                                   edge_rows=sampler.edge_rows if with_attr else None, inputs=self.inputs)
        self.net.train()
        ids, rows = [], []
        for l in range(self.net.num_layers - 1):  # loop over hidden layers
            computed = mb.blocks[l].dst_ids
            extra = ~torch.isin(nodes, computed)
            ids.append(torch.cat([computed, nodes[extra]]))
            rows.append(torch.cat([emit[l].cpu(), fresh[l][extra]]))
        halo.push(gstep, ids, rows)

    def end_epoch(self) -> None:
        self.halo.drain()

    def full_logits(self, step: int):
        typed = self.part.typed if self.typed else None  # a typed part's rows come through its store
        return halo_inference(self.net, self.part.indptr, None if typed else self.part.feature_rows(), self.features,
                              self.halo, step=step, node_degree=self.degrees, backend=self.cfg.sampler_backend,
                              edge_attr=self.part.edge_attr if self.net.uses_edge_attr else None,
                              edge_type=typed.etype if typed is not None else None, inputs=self.inputs)

    def age_counts(self) -> dict:
        return self.halo.age_counts()

    def reset_stats(self) -> None:
        self.halo.reset_stats()

    def info(self) -> dict:
        return dict(self._info)


def exchange_mode(net, part, sampler, features, degrees, emb_comm, comm, cfg, device, inputs=None) -> ExchangeMode:
    """The mode object of ``cfg.exchange`` (``inputs``: the step hooks' ``eval_inputs``)."""
    if check_mode(cfg.exchange) == "historical":
        return HistoricalMode(net, part, sampler, features, degrees, emb_comm, comm, cfg, device, inputs)
    return ExchangeMode(cfg.exchange)
