"""Distributed feature store: owned rows from the local part, the rest from their owners.

A fetch copies each row once on the receiving side: owned and cached rows are gathered
straight into the output by a parallel compiled loop, the owners' replies land in one flat
buffer (:meth:`Communicator.exchange_flat`, no per-rank lists) and are placed with one
``index_copy_``; an owner gathers the rows it serves directly into the buffer it sends.
On a CUDA device, the rows read on the host go into a pinned buffer and cross to the device
with one ``non_blocking`` copy; cached rows are already there.

Ranks on one host may read each other's rows straight from the partition folder
(``--host-features``, :meth:`DistFeatureStore.read_host_parts`): every part's ``x.npy`` is
memory-mapped read-only, so the host's page cache holds one copy, and a fetch gathers the
owners' rows like its own, without asking them. Owners on other hosts still answer through the
communicator; when every rank reads every part from its host, a fetch exchanges nothing.

Rows stored at lower precision (a part's ``feature_dtype`` float16 or bfloat16, see
:mod:`gnnscale.partitioning.feature_dtype`) stay in it through the gathers, the exchange (half
the bytes), the cache and the host reads (moved as 16-bit words), and are cast to float32 at the
end of :meth:`DistFeatureStore.fetch`, on the training device, where they enter the model.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np
import torch

from gnnscale.process.comm import Communicator
from gnnscale.errors import GnnscaleError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.feature_dtype import as_tensor, file_dtype, torch_dtype
from gnnscale.partitioning.routing import Route
from gnnscale.samplers.cpu_kernels import parallel_enabled

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency
    numba = None


class LocalRows(Protocol):
    """What the store needs of a loaded part (see ``gnnscale.partitioning.LocalPart``).

    A part that also has ``x`` (a float32 [n, F] numpy array or memmap; or float16, or
    bfloat16's bits as uint16, with ``feature_dtype`` naming it) is read by the compiled gather;
    otherwise through ``features``.
    """

    def features(self, local_idx: torch.Tensor) -> torch.Tensor: ...


def _gather_rows_py(src, idx, out, pos, use_pos):  # pragma: no cover - compiled twice below
    """out[pos[i]] = src[idx[i]] (or out[i] with use_pos False); returns the count of idx
    outside [0, len(src))."""
    n, f = src.shape
    bad = 0
    for i in numba.prange(idx.shape[0]):
        r = idx[i]
        o = np.int64(i)
        if use_pos:
            o = pos[i]
        if r < 0 or r >= n:
            bad += 1
            continue
        for k in range(f):
            out[o, k] = src[r, k]
    return bad


if numba is not None:
    _gather_rows_parallel = numba.njit(parallel=True, cache=True)(_gather_rows_py)
    _gather_rows_serial = numba.njit(cache=True)(_gather_rows_py)  # prange runs as range


def _gather_rows(src, idx, out, pos, use_pos) -> int:
    """The compiled gather: the parallel kernel only where this process runs its kernels on
    several threads (:func:`samplers.cpu_kernels.parallel_enabled`, as the samplers decide), else
    the serial one, so numba's thread pool is never started in a process that will not use it: its
    idle OpenMP threads spin and take the cores from torch's ops (issue 56: a user's one-process
    PyG loop over a partition folder ran its model 5-30x slower, the plain loader's too, for the
    rest of the process; ``benchmarks/pyg_run_overhead.py``)."""
    kernel = _gather_rows_parallel if parallel_enabled() else _gather_rows_serial
    return kernel(src, idx, out, pos, use_pos)


_NO_POS = np.empty(0, dtype=np.int64)


class DistFeatureStore:
    """Fetch input feature rows by global id.

    Args:
        part: this rank's part; ``part.features(local_idx)`` returns float32 [k, F] rows.
        book: the partition book.
        comm: this rank's communicator; remote rows move in one exchange per call.
        feature_dim: F (every rank must agree; it sizes empty replies).
        device: where fetched rows and the cache live (the training device).

    Counters (cumulative in ``self.stats``): ``local_rows``, ``remote_rows`` (fetched from
    owners), ``cache_hits`` (remote rows served by the cache, see :meth:`fill_cache`) and
    ``host_rows`` (other parts' rows read from this host's partition folder).
    Bytes are counted by ``comm`` under ``feature_request`` (ids) and ``feature`` (rows); the
    one-time cache fill under ``cache_fill``.
    """

    def __init__(self, part: LocalRows, book: PartitionBook, comm: Communicator, feature_dim: int,
                 device: torch.device | str = "cpu") -> None:
        self.part = part
        self.book = book
        self.comm = comm
        self.feature_dim = int(feature_dim)
        self.device = torch.device(device)
        self.offset = int(book.offsets[comm.rank])
        # how the rows are stored and moved (float32, float16, bfloat16); fetch returns float32
        stored = getattr(part, "feature_dtype", "float32")
        self.dtype, self._file_dtype = torch_dtype(stored), np.dtype(file_dtype(stored))
        self.cache = None
        # True when every rank's cache holds every remote row it can ask for (historical mode's
        # halo): fetch then never communicates, and a miss is an error instead of a request.
        self.complete = False
        # --host-features: {owner: float32 [n_owner, F] memmap} of the parts read on this host, a
        # bool [world] mask of them, and whether no rank exchanges features at all
        self.host_parts: dict[int, np.ndarray] = {}
        self.host_mask = torch.zeros(comm.world_size, dtype=torch.bool)
        self.host_complete = False
        self.stats = {"local_rows": 0, "remote_rows": 0, "cache_hits": 0, "host_rows": 0}

    @property
    def row_bytes(self) -> int:
        """Bytes of one row as stored and moved (``feature_dim`` times 4, or 2 at lower precision)."""
        return self.feature_dim * torch.empty((), dtype=self.dtype).element_size()

    def reset_stats(self) -> None:
        for k in self.stats:
            self.stats[k] = 0

    def read_host_parts(self, parts: dict[int, np.ndarray], complete: bool) -> None:
        """Read the rows of the parts in ``parts`` ({owner rank: float32 [n_owner, F] array or
        read-only memmap of its ``x.npy``}) directly instead of asking their owners.

        ``complete``: every rank reads every other rank's part itself (the same value on every
        rank, e.g. :attr:`gnnscale.data.host_parts.HostRanks.complete`); then :meth:`fetch` is
        no longer collective.
        """
        world, rank = self.comm.world_size, self.comm.rank
        if complete and sorted(parts) != [k for k in range(world) if k != rank]:
            raise GnnscaleError(f"rank {rank}: complete=True needs every other rank's part; found {sorted(parts)} of "
                                f"world size {world}")
        for k, x in parts.items():
            n = int(self.book.offsets[k + 1] - self.book.offsets[k])
            if k == rank or not 0 <= k < world:
                raise GnnscaleError(f"rank {rank}: host part {k} is not another rank's part (world size {world})")
            if x.dtype != self._file_dtype or x.ndim != 2 or x.shape != (n, self.feature_dim):
                raise GnnscaleError(
                    f"rank {rank}: part {k}'s features read on this host are {x.dtype} {tuple(x.shape)}, expected "
                    f"{self._file_dtype} ({n}, {self.feature_dim}) by the partition book; the partition folder is not the "
                    "one the run was started on, or it was rewritten: re-partition, or leave --host-features out")
        self.host_parts = dict(parts)
        self.host_mask = torch.zeros(world, dtype=torch.bool)
        if parts:
            self.host_mask[list(parts)] = True
        self.host_complete = bool(complete)

    def fill_cache(self, ids: torch.Tensor) -> None:
        """Fetch rows ``ids`` (int64 [K] remote global ids) once and keep them in a FeatureCache
        on this store's device.

        Collective (every rank calls it, with its own ids); bytes count as ``cache_fill``.
        """
        from gnnscale.data.feature_cache import FeatureCache

        self.cache = None
        rows = self._fetch(ids, category="cache_fill")  # kept in the stored dtype
        self.cache = FeatureCache(ids, rows, self.device)
        self.reset_stats()

    def fetch(self, ids: torch.Tensor, category: str = "feature") -> torch.Tensor:
        """float32 [n, F] rows of global ids ``ids`` (int64 [n], on the host), in the order
        given, on this store's device.

        Owned rows come from the local part, cached rows from the cache, the rest from their
        owners in one exchange. Collective: every rank must call it the same number of times
        (``ids`` may be empty); not collective when the store is ``complete`` (set on every
        rank or none) or every rank reads every part on its host (:meth:`read_host_parts`).
        Rows stored at lower precision move as stored and are cast to float32 here, last.
        """
        rows = self._fetch(ids, category)
        return rows if rows.dtype == torch.float32 else rows.to(torch.float32)

    def _fetch(self, ids: torch.Tensor, category: str) -> torch.Tensor:
        """:meth:`fetch` in the stored dtype (``self.dtype``)."""
        rank = self.comm.rank
        n = ids.numel()
        owner = self.book.owner(ids)
        mine = owner == rank
        mine_pos = torch.nonzero(mine).flatten()
        need_pos = torch.nonzero(~mine).flatten()
        hit_pos = cache_idx = None
        if self.cache is not None and self.cache.num_rows and need_pos.numel():
            hit, cache_idx = self.cache.positions(ids[need_pos])
            hit_pos, need_pos = need_pos[hit], need_pos[~hit]
            self.stats["cache_hits"] += int(hit_pos.numel())
        self.stats["local_rows"] += int(mine_pos.numel())
        if self.complete and need_pos.numel():
            raise GnnscaleError(
                f"rank {rank}: feature rows of ids {ids[need_pos][:5].tolist()} are neither owned nor held, but "
                "this store was marked complete (every remote row it can be asked for is cached); "
                "only halo nodes may be read in historical mode")
        on_host = self.device.type == "cpu"
        # Where the host's rows go: straight into the output on CPU; on CUDA into a pinned
        # buffer (owned rows first, then the fetched ones) that crosses in one copy.
        m, r = mine_pos.numel(), need_pos.numel()
        if on_host:
            out = host = torch.empty(n, self.feature_dim, dtype=self.dtype)
            local_at, remote_at = mine_pos, need_pos
        else:
            host = torch.empty(m + r, self.feature_dim, dtype=self.dtype, pin_memory=True)
            local_at, remote_at = None, torch.arange(m, m + r, dtype=torch.int64)
        all_mine = m == n
        self._local(ids[mine_pos] - self.offset if not all_mine else ids - self.offset, host,
                    None if (all_mine or local_at is None) else local_at)
        ask_pos, ask_at = need_pos, remote_at
        if self.host_parts and need_pos.numel():
            ask_pos, ask_at = self._read_host(ids, owner, need_pos, remote_at, host)
        if not self.complete and not self.host_complete:
            self._fetch_remote(ids, owner, ask_pos, ask_at, host, category)
        if not on_host:
            out = torch.empty(n, self.feature_dim, dtype=self.dtype, device=self.device)
            if m + r:
                dest = torch.cat([mine_pos, need_pos]).to(self.device, non_blocking=True)
                out.index_copy_(0, dest, host.to(self.device, non_blocking=True))
        if hit_pos is not None and hit_pos.numel():
            if on_host:
                _gather_into(self.cache.rows, cache_idx, out, hit_pos)
            else:
                out.index_copy_(0, hit_pos.to(self.device), self.cache.rows[cache_idx.to(self.device)])
        return out

    def _fetch_remote(self, ids: torch.Tensor, owner: torch.Tensor, need_pos: torch.Tensor, at: torch.Tensor,
                      out: torch.Tensor, category: str) -> None:
        """Ask the owners for the rows ``ids[need_pos]`` (one exchange of ids, one of rows)
        and put them at ``out[at]``; serve the rows the other ranks ask of this one."""
        route = Route.build(owner[need_pos], self.comm.world_size)
        order = route.order
        served, served_counts = self.comm.exchange_flat(ids[need_pos[order]], route.counts, category + "_request")
        rows = torch.empty(served.numel(), self.feature_dim, dtype=self.dtype)
        self._local(served - self.offset, rows, None)
        back, _ = self.comm.exchange_flat(rows, served_counts, category)
        if need_pos.numel():
            out.index_copy_(0, at[order], back)
        self.stats["remote_rows"] += int(need_pos.numel())

    def _read_host(self, ids: torch.Tensor, owner: torch.Tensor, need_pos: torch.Tensor, at: torch.Tensor,
                   out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Put the rows of ``ids[need_pos]`` whose owners' parts are read on this host at
        ``out[at]``; returns (need_pos, at) of the rows still to ask for."""
        own = owner[need_pos]
        here = self.host_mask[own]
        if not bool(here.any()):
            return need_pos, at
        hp = torch.nonzero(here).flatten()
        own_h, ids_h, at_h = own[hp], ids[need_pos[hp]], at[hp]
        for k in torch.unique(own_h).tolist():  # one compiled gather per part read (<= world size)
            sel = own_h == k
            x = self.host_parts[k]
            local = ids_h[sel] - int(self.book.offsets[k])
            if numba is not None:
                bad = _gather_rows(_words(x), local.numpy(), _words(out), at_h[sel].numpy(), True)
                if bad:
                    raise GnnscaleError(f"rank {self.comm.rank}: {bad} feature row(s) asked of part {k} are outside "
                                        f"its {x.shape[0]} rows; the ids are not that part's: check the partition book")
            else:
                out[at_h[sel]] = _rows_tensor(np.ascontiguousarray(x[local.numpy()]), self.dtype)
        self.stats["host_rows"] += int(hp.numel())
        keep = torch.nonzero(~here).flatten()
        return need_pos[keep], at[keep]

    def _local(self, local_idx: torch.Tensor, out: torch.Tensor, pos: torch.Tensor | None) -> None:
        """Owned rows ``local_idx`` (int64 [k]) into ``out[pos]`` (``out[:k]`` when pos is None)."""
        if local_idx.numel() == 0:
            return
        x = getattr(self.part, "x", None)
        if numba is not None and isinstance(x, np.ndarray) and x.dtype == self._file_dtype and x.ndim == 2:
            if x.shape[1] != self.feature_dim:
                raise GnnscaleError(f"part holds rows of width {x.shape[1]}, expected {self.feature_dim}")
            bad = _gather_rows(_words(x), local_idx.numpy(), _words(out), _NO_POS if pos is None else pos.numpy(),
                               pos is not None)
            if bad:
                raise GnnscaleError(
                    f"rank {self.comm.rank}: {bad} feature row(s) asked of this part are outside its {x.shape[0]} "
                    f"owned rows (local ids {int(local_idx.min())}..{int(local_idx.max())}); the ids are not "
                    "this part's: check the partition book")
            return
        rows = self.part.features(local_idx).to(self.dtype)  # float32 of the stored values: exact back
        if rows.shape[1] != self.feature_dim:
            raise GnnscaleError(f"part returned rows of width {rows.shape[1]}, expected {self.feature_dim}")
        if pos is None:
            out[: rows.shape[0]] = rows
        else:
            out[pos] = rows


def _words(a: np.ndarray | torch.Tensor) -> np.ndarray:
    """A numpy view of host rows for the compiled gather: 16-bit rows (float16, bfloat16 or its
    uint16 bits) as int16 words, which it copies like any number; float32 as it is."""
    if isinstance(a, torch.Tensor):
        return a.view(torch.int16).numpy() if a.element_size() == 2 else a.numpy()
    return a.view(np.int16) if a.dtype.itemsize == 2 else a


def _rows_tensor(rows: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """Stored rows (numpy: float32, float16 or bfloat16's uint16 bits) as a tensor of ``dtype``."""
    return as_tensor(rows, "bfloat16") if dtype == torch.bfloat16 else torch.from_numpy(rows)


def _gather_into(src: torch.Tensor, idx: torch.Tensor, out: torch.Tensor, pos: torch.Tensor) -> None:
    """out[pos] = src[idx] for host tensors of one dtype, in one pass when compiled."""
    if numba is not None and src.dtype == out.dtype and src.element_size() in (2, 4) and src.is_contiguous():
        _gather_rows(_words(src), idx.numpy(), _words(out), pos.numpy(), True)
    else:
        out[pos] = src[idx]
