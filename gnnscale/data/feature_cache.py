"""Feature cache: hot remote feature rows kept on the training device.

A policy chooses which remote rows to keep (by global id); the cache is filled once with one
feature exchange, then :meth:`DistFeatureStore.fetch` serves hits from it and sends only the
misses to their owners. Lookup is vectorized (a sorted id array and ``searchsorted``).

Policies (pluggable by name, like partitioners; see :func:`register_cache_policy`):

- ``none``: no cache;
- ``degree``: the remote nodes that most of this part's in-edges come from (PaGraph's
  in-degree heuristic seen from this part's halo);
- ``presample``: access counts of remote rows over K pre-sampling epochs with the real
  sampler (GNNLab);
- ``file``: ids listed by the user in a ``.npy`` file (int64 global ids of the partition's
  numbering, i.e. new ids).

Sizes: ``rows=N``, ``bytes=B`` or ``fraction=f`` of the remote rows (the nodes this rank does
not own; a fraction above 1 is refused before any worker starts). A size in rows or bytes beyond the
candidates is clamped, and said once in the log.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from gnnscale.errors import GnnscaleError
from gnnscale.options import OptionError, parse_cache_size

log = logging.getLogger(__name__)


class CacheError(GnnscaleError):
    """A cache policy, size or id file is invalid."""


@dataclass
class CacheSize:
    """How big a cache: exactly one of rows, bytes or fraction (of the remote rows)."""

    rows: int | None = None
    bytes: int | None = None
    fraction: float | None = None

    @staticmethod
    def parse(text: str | None) -> "CacheSize":
        """'rows=1000', 'bytes=64MB', 'fraction=0.1', or a bare '10%' / '0.1' / '5000'
        (:func:`gnnscale.options.parse_cache_size`, which ``--cache-size`` is checked by before any worker)."""
        try:
            return CacheSize(**parse_cache_size(text))
        except OptionError as err:
            raise CacheError(str(err)) from None

    def to_rows(self, remote_rows: int, row_bytes: int) -> int:
        if self.rows is not None:
            n = self.rows
        elif self.bytes is not None:
            n = self.bytes // max(row_bytes, 1)
        else:
            n = math.floor((self.fraction or 0.0) * remote_rows)
        if n < 0:
            raise CacheError(f"cache size must be >= 0, found {n} rows")
        return int(n)


class FeatureCache:
    """Rows of some remote nodes, looked up by global id.

    Args:
        ids: int64 [K] global ids (any order; stored sorted).
        rows: float32 [K, F] their feature rows, in the order of ``ids``.
        device: where the rows live (the training device).
    """

    def __init__(self, ids: torch.Tensor, rows: torch.Tensor, device: torch.device | str = "cpu") -> None:
        if ids.numel() > 1 and not bool((ids[1:] > ids[:-1]).all()):  # sorted input: no copy
            order = torch.argsort(ids)
            ids, rows = ids[order], rows[order]
        self.ids = ids.cpu()  # looked up with the (host) ids a sampler produces
        self.rows = rows.to(device)  # served where the model runs
        self.stats = {"lookups": 0, "hits": 0}

    @property
    def num_rows(self) -> int:
        return int(self.ids.numel())

    @property
    def nbytes(self) -> int:
        return int(self.rows.numel() * self.rows.element_size())

    def positions(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(hit bool [n], int64 [hits] the rows of ``self.rows`` that hold the hits, in order)."""
        if self.num_rows == 0 or ids.numel() == 0:
            return torch.zeros(ids.numel(), dtype=torch.bool), torch.empty(0, dtype=torch.int64)
        pos = torch.searchsorted(self.ids, ids).clamp_(max=self.num_rows - 1)
        hit = self.ids[pos] == ids
        self.stats["lookups"] += int(ids.numel())
        self.stats["hits"] += int(hit.sum())
        return hit, pos[hit]

    def lookup(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(hit bool [n], rows float32 [hits, F] for the hits in order, on the cache's device)."""
        hit, pos = self.positions(ids)
        return hit, self.rows[pos.to(self.rows.device)]


# -- policies ----------------------------------------------------------------------------------
# A policy returns candidate remote global ids, most valuable first: f(ctx, max_rows) -> LongTensor.
CachePolicy = Callable[["CacheContext", int], torch.Tensor]
_POLICIES: dict[str, CachePolicy] = {}


@dataclass
class CacheContext:
    """What a policy may look at: this rank's part and, for presampling, a batch iterator."""

    part: object  # LocalPart
    num_nodes: int
    # epochs -> (remote ids int64 [K], how often each was an input row int64 [K])
    presample: Callable[[int], tuple[torch.Tensor, torch.Tensor]] | None = None
    epochs: int = 2
    file: str | None = None
    # ids -> bool mask of the ids that have feature rows (a typed graph's featureless node types
    # have none, so they are never cache candidates); None: every id has a row
    has_rows: Callable[[torch.Tensor], torch.Tensor] | None = None
    # bool [P]: the other parts whose rows are read without asking their owners (the host's, read from
    # its folder), never cache candidates; None: every other part's rows are asked of their owners
    read_here: torch.Tensor | None = None

    @property
    def remote_rows(self) -> int:
        return self.num_nodes - int(self.part.num_owned)

    def is_remote(self, ids: torch.Tensor) -> torch.Tensor:
        """Whether each id is a cache candidate: another part's, with a feature row."""
        lo = self.part.offset
        remote = (ids < lo) | (ids >= lo + self.part.num_owned)
        if self.read_here is not None:
            remote &= ~self.read_here[self.part.book.owner(ids)]
        return remote if self.has_rows is None else remote & self.has_rows(ids)


def register_cache_policy(name: str, fn: CachePolicy) -> None:
    """Make ``fn(ctx, max_rows) -> LongTensor`` available as ``--cache-policy name``."""
    _POLICIES[name] = fn


def available_cache_policies() -> list[str]:
    return list(_POLICIES)


def _top(ids: torch.Tensor, score: torch.Tensor, k: int) -> torch.Tensor:
    keep = score > 0
    ids, score = ids[keep], score[keep]
    order = torch.argsort(score, descending=True, stable=True)
    return ids[order[:k]]


def _none(ctx: CacheContext, k: int) -> torch.Tensor:
    return torch.empty(0, dtype=torch.int64)


def _degree(ctx: CacheContext, k: int) -> torch.Tensor:
    src = ctx.part.indices
    remote = src[ctx.is_remote(src)]
    uniq, counts = torch.unique(remote, return_counts=True)
    return _top(uniq, counts, k)


def _presample(ctx: CacheContext, k: int) -> torch.Tensor:
    if ctx.presample is None:
        raise CacheError("the presample policy needs the sampler (it runs inside a training worker)")
    ids, counts = ctx.presample(ctx.epochs)
    remote = ctx.is_remote(ids)
    return _top(ids[remote], counts[remote], k)


def _file(ctx: CacheContext, k: int) -> torch.Tensor:
    if not ctx.file:
        raise CacheError("the file policy needs --cache-file PATH (a .npy of int64 global ids)")
    try:
        arr = np.load(ctx.file, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise CacheError(f"could not read cache id file {ctx.file}: {err}") from None
    if arr.dtype.kind not in "iu":
        raise CacheError(
            f"cache id file {ctx.file} must hold integer node ids (int64), found dtype {arr.dtype}; "
            "save it with np.save(path, ids.astype(np.int64))"
        )
    ids = torch.from_numpy(arr.astype(np.int64).reshape(-1))
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= ctx.num_nodes):
        raise CacheError(
            f"cache id file {ctx.file} has ids in [{int(ids.min())}, {int(ids.max())}], expected [0, {ctx.num_nodes}) "
            "(global ids in the partition's numbering; map original ids through the parts' orig_ids.npy)"
        )
    ids = ids[ctx.is_remote(ids)]
    # keep the user's order (first = most valuable), without repeats
    uniq, inv = torch.unique(ids, return_inverse=True)
    first = torch.full((uniq.numel(),), ids.numel(), dtype=torch.int64).scatter_reduce_(0, inv, torch.arange(ids.numel()), "amin")
    return uniq[torch.argsort(first)][:k]


for _name, _fn in (("none", _none), ("degree", _degree), ("presample", _presample), ("file", _file)):
    register_cache_policy(_name, _fn)


def choose_cache_ids(policy: str, ctx: CacheContext, size: CacheSize, row_bytes: int) -> torch.Tensor:
    """Global ids to cache (int64 [K]) under ``policy`` and ``size``; clamps and says so once."""
    if policy not in _POLICIES:
        raise CacheError(f"unknown cache policy {policy!r}; known: {', '.join(_POLICIES)}")
    want = size.to_rows(ctx.remote_rows, row_bytes)
    if want > ctx.remote_rows:
        log.warning(
            "cache size of %d rows is larger than the %d remote rows of part %d: clamped to %d",
            want, ctx.remote_rows, ctx.part.part_id, ctx.remote_rows,
        )
        want = ctx.remote_rows
    ids = _POLICIES[policy](ctx, want) if want > 0 else torch.empty(0, dtype=torch.int64)
    if policy != "none" and ids.numel() < want:
        log.info("cache policy %s found %d candidate rows for a size of %d: caching %d", policy, ids.numel(), want, ids.numel())
    return ids[:want]


def presample_counts(sample_epoch: Callable, lo: int, hi: int, epochs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """How often each remote node was an input row over ``epochs`` pre-sampling epochs:
    (ids int64 [K] sorted, counts int64 [K]) over the K nodes outside ``[lo, hi)`` drawn at least once.

    ``sample_epoch(epoch)`` yields the epoch's mini-batches as training samples them (epochs
    1_000_000 + e: streams disjoint from the training epochs'). Sparse, so its memory follows
    what the sampler touched, not the graph's node count.
    """
    ids, counts = torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64)
    pending: list[torch.Tensor] = []
    held = 0

    def merge() -> None:
        nonlocal ids, counts, pending, held
        allv = torch.cat([ids] + pending)
        weight = torch.cat([counts, torch.ones(allv.numel() - ids.numel(), dtype=torch.int64)])
        ids, inv = torch.unique(allv, return_inverse=True)
        counts = torch.zeros(ids.numel(), dtype=torch.int64).index_add_(0, inv, weight)
        pending, held = [], 0

    for e in range(epochs):
        for mb in sample_epoch(1_000_000 + e):
            got = mb.input_ids[(mb.input_ids < lo) | (mb.input_ids >= hi)]
            pending.append(got)
            held += got.numel()
            if held > max(1 << 22, 2 * ids.numel()):  # merge in rounds: bounded buffer, few sorts
                merge()
    merge()
    return ids, counts


def setup_cache(features, part, cfg, comm, sample_epoch: Callable | None, held: torch.Tensor | None = None,
                resumed: torch.Tensor | None = None, complete: bool = False) -> dict:
    """Fill ``features``' cache as the run's options say; the cache's figures (collective).

    Args:
        features: the training feature store (its ``comm`` carries the fill).
        part: this rank's part. cfg: the run's options (``cache_policy``, ``cache_size``,
            ``cache_file``, ``presample_epochs``). comm: the world's (figures).
        sample_epoch: the training sampler's epochs (the ``presample`` policy).
        held: historical mode's halo ids, held whole (policy ``halo``) instead of a policy.
        resumed: a checkpoint's cache ids (no re-counting).
        complete: every remote row the store can be asked for is held (no exchange when fetching).
    """
    if cfg.cache_policy == "none" and held is None:
        return {"policy": "none", "rows": 0, "bytes": 0}
    t0 = time.perf_counter()
    row_bytes = getattr(features, "row_bytes", 4 * int(features.feature_dim))  # of the stored dtype
    lo, hi = part.offset, part.offset + part.num_owned
    sampled: list[int] = []  # epochs the presample policy sampled (reported)

    def presample(epochs: int):
        sampled.append(epochs)
        return presample_counts(sample_epoch, lo, hi, epochs)

    ctx = CacheContext(part, part.book.num_nodes, presample=presample if sample_epoch else None,
                       epochs=cfg.presample_epochs, file=cfg.cache_file, has_rows=getattr(features, "has_rows", None))
    if held is not None:
        # Every remote row historical mode reads (last-hop leaves, refresh inputs, the fill)
        # is a halo node: holding the halo's rows leaves no feature to fetch while training.
        policy, ids = "halo", held
    elif resumed is not None:
        policy, ids = cfg.cache_policy, resumed  # the checkpoint's rows: no re-counting
    else:
        policy = cfg.cache_policy
        ids = choose_cache_ids(policy, ctx, CacheSize.parse(cfg.cache_size), row_bytes)
    features.fill_cache(ids, complete)
    moved = features.comm.stats.bytes_received
    moved_all = int(comm.all_reduce(torch.tensor([moved], dtype=torch.int64))[0])
    features.comm.stats.reset()
    # rows held: a typed graph's store keeps none of node types without features
    rows = int(features.cache.num_rows) if features.cache is not None else int(ids.numel())
    info = {"policy": policy, "size": "all halo rows" if held is not None else cfg.cache_size, "rows": rows,
            "presampled_epochs": sum(sampled),
            "bytes": rows * row_bytes, "remote_rows": ctx.remote_rows,
            "fill_bytes_received": int(moved), "fill_bytes_received_all_ranks": moved_all,
            "seconds": time.perf_counter() - t0}
    if comm.rank == 0:
        log.info("feature cache %s on rank 0: %d rows (%.1f MB) of %d remote rows, built in %.2f s",
                 policy, info["rows"], info["bytes"] / 1e6, ctx.remote_rows, info["seconds"])
    return info
