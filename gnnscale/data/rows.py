"""One row reader: ``read(ids) -> rows`` of any per-node value, composed from sources that each
answer what they can and pass the rest on.

A row is whatever a node has one of: its input features (float [F]), in-degree, original id (the
dropout's node key), label. Every store that answers rows by global id is a :class:`RowReader`
over the same chain of sources, tried in this order:

1. :class:`OwnRows` - this rank's part (the ids it owns);
2. :class:`CachedRows` - a cache of other parts' rows (:class:`~gnnscale.data.feature_cache.FeatureCache`),
   on the reader's device; shareable by readers over other communicators (:meth:`RowReader.over`);
3. :class:`HostRows` - other parts read from this host's partition folder (memory-mapped files,
   :mod:`gnnscale.data.host_parts`), never asked of their owners;
4. :class:`OwnerRows` - the rest, asked of their owners through the communicator: one exchange of
   ids and one of rows (collective: every rank reads at the same points, ``ids`` may be empty),
   serving the other ranks' asks from its own part. Absent when the reader is ``complete`` (every
   row it may be asked for is answered above: a miss is then an error, not a request).

Byte accounting: ``stats`` counts rows by source (``local_rows``, ``cache_hits``, ``host_rows``,
``remote_rows``); :meth:`RowReader.bytes_by_source` gives them in bytes; what crosses the network
is counted by the communicator under the reader's ``request`` / ``reply`` categories.

Models (read, not copied): GraphBolt's ``Feature`` with its cached wrapper over a fallback feature,
and PyG's ``FeatureStore`` keyed by attribute: here one reader per attribute (``x``, ``y``, degrees,
keys), each a chain of the same four sources. The engine's feature store
(:class:`~gnnscale.data.feature_store.DistFeatureStore`), its degree and node-key stores, and the
PyG stores' ``x`` and ``y`` (:mod:`gnnscale.pyg.stores`, :mod:`gnnscale.pyg.typed_stores`) are built
from it.
"""
from __future__ import annotations

import numpy as np
import torch

from gnnscale.errors import GnnscaleError
from gnnscale.partitioning.feature_dtype import as_tensor
from gnnscale.partitioning.routing import Route
from gnnscale.samplers.cpu_kernels import parallel_enabled

try:
    import numba
except ImportError:  # pragma: no cover - numba is a dependency
    numba = None


def _copy_row_py(src, idx, out, pos, use_pos, i):  # pragma: no cover - compiled below
    """out[pos[i]] = src[idx[i]] (or out[i] with use_pos False); 1 if idx[i] is outside
    [0, len(src)) (nothing copied), else 0."""
    n, f = src.shape
    r = idx[i]
    if r < 0 or r >= n:
        return 1
    o = np.int64(i)
    if use_pos:
        o = pos[i]
    for k in range(f):
        out[o, k] = src[r, k]
    return 0


if numba is not None:
    # Inlined into the two kernels at numba's IR level: called as a function per row, the row's
    # copy loop did not vectorise and the gather ran 1.7-2.4x slower (248k rows of 128 float32,
    # one thread: 54 against 22 ms; the fetch of a 2-part epoch at R-MAT 1M +15% CPU, 2026-12-08).
    _copy_row = numba.njit(inline="always")(_copy_row_py)

    # Two functions, not one compiled twice: numba's on-disk cache is keyed by the Python function
    # (its name and line) and the argument types, not by ``parallel``, so a serial twin of the same
    # function loaded the parallel build from the cache (and started numba's pool: issue 56).
    @numba.njit(parallel=True, cache=True)
    def _gather_rows_parallel(src, idx, out, pos, use_pos):  # pragma: no cover - compiled
        """Every i of idx: _copy_row, in parallel; returns the count of idx outside src's rows."""
        bad = 0
        for i in numba.prange(idx.shape[0]):
            bad += _copy_row(src, idx, out, pos, use_pos, i)
        return bad

    @numba.njit(cache=True)
    def _gather_rows_serial(src, idx, out, pos, use_pos):  # pragma: no cover - compiled
        """The same on this thread (numba's pool never started)."""
        bad = 0
        for i in range(idx.shape[0]):
            bad += _copy_row(src, idx, out, pos, use_pos, i)
        return bad


def _gather_rows(src, idx, out, pos, use_pos) -> int:
    """The compiled gather: the parallel kernel only where this process runs its kernels on
    several threads (:func:`gnnscale.samplers.cpu_kernels.parallel_enabled`, as the samplers
    decide), else the serial one, so numba's thread pool is never started in a process that will
    not use it: its idle OpenMP threads spin and take the cores from torch's ops (issue 56: a
    one-process PyG loop over a partition folder ran its model 5-30x slower, the plain loader's
    too, for the rest of the process; ``benchmarks/pyg_run_overhead.py``)."""
    kernel = _gather_rows_parallel if parallel_enabled() else _gather_rows_serial
    return kernel(src, idx, out, pos, use_pos)


_NO_POS = np.empty(0, dtype=np.int64)


def words(a: np.ndarray | torch.Tensor) -> np.ndarray:
    """A numpy view of host rows for the compiled gather: 16-bit rows (float16, bfloat16 or its
    uint16 bits) as int16 words, which it copies like any number; float32 as it is."""
    if isinstance(a, torch.Tensor):
        return a.view(torch.int16).numpy() if a.element_size() == 2 else a.numpy()
    return a.view(np.int16) if a.dtype.itemsize == 2 else a


def gather_into(src: torch.Tensor, idx: torch.Tensor, out: torch.Tensor, pos: torch.Tensor) -> None:
    """out[pos] = src[idx] for host tensors of one dtype, in one pass when compiled (2-D rows)."""
    if numba is not None and src.dim() == 2 and src.dtype == out.dtype and src.element_size() in (2, 4) \
            and src.is_contiguous():
        _gather_rows(words(src), idx.numpy(), words(out), pos.numpy(), True)
    else:
        out[pos] = src[idx]


def gather(src, local: torch.Tensor, out: torch.Tensor, pos: torch.Tensor | None, file_dtype: np.dtype | None,
           what: str) -> None:
    """Rows ``local`` (int64 [k] indices into ``src``) into ``out[pos]`` (``out[:k]`` when pos is None).

    ``src``: a numpy array or memmap of the stored rows (read by the compiled gather when 2-D of
    ``file_dtype``), a tensor, or an object with ``features(local) -> float32 rows`` (a part that
    is not in memory). ``what`` names the rows in the error of an index outside them."""
    if local.numel() == 0:
        return
    if isinstance(src, np.ndarray):
        if numba is not None and src.ndim == 2 and src.dtype == file_dtype and out.dim() == 2:
            if src.shape[1] != out.shape[1]:
                raise GnnscaleError(f"{what} holds rows of width {src.shape[1]}, expected {out.shape[1]}")
            bad = _gather_rows(words(src), local.numpy(), words(out), _NO_POS if pos is None else pos.numpy(),
                               pos is not None)
            if bad:
                raise GnnscaleError(
                    f"{bad} row(s) asked of {what} are outside its {src.shape[0]} rows (local ids "
                    f"{int(local.min())}..{int(local.max())}); the ids are not that part's: check the partition book")
            return
        rows = _rows_tensor(np.ascontiguousarray(src[local.numpy()]), out.dtype)
    elif isinstance(src, torch.Tensor):
        rows = src.index_select(0, local)  # a third to a fifth of src[local]'s time on int64 ids, one thread
    else:
        rows = src.features(local).to(out.dtype)  # float32 of the stored values: exact back
    if rows.shape[1:] != out.shape[1:]:
        raise GnnscaleError(f"{what} returned rows of width {tuple(rows.shape[1:])}, expected {tuple(out.shape[1:])}")
    if pos is None:
        out[: rows.shape[0]] = rows
    elif rows.dtype == out.dtype and rows.device == out.device:
        out.index_copy_(0, pos, rows)
    else:
        out[pos] = rows


def _rows_tensor(rows: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
    """Stored rows (numpy: float32, float16 or bfloat16's uint16 bits; or any other dtype) as a tensor."""
    return as_tensor(rows, "bfloat16") if dtype == torch.bfloat16 else torch.from_numpy(rows)


class OwnRows:
    """This rank's rows (global ids ``offset`` .. ``offset + len - 1``): a numpy array or memmap, a
    tensor, or a part with ``features(local)``."""

    stat = "local_rows"

    def __init__(self, rows, offset: int, rank: int, file_dtype: np.dtype | None = None) -> None:
        self.rows, self.offset, self.rank, self.file_dtype = rows, int(offset), int(rank), file_dtype

    def claim(self, ids: torch.Tensor, owner: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        """bool: whether each of ``ids[pos]`` (every id when pos is None) is this part's."""
        return (owner if pos is None else owner[pos]) == self.rank

    def fill(self, ids: torch.Tensor, out: torch.Tensor, at: torch.Tensor | None) -> None:
        gather(self.rows, ids - self.offset, out, at, self.file_dtype, f"part {self.rank}")


class HostRows:
    """Other parts' rows read on this host: ``{owner: rows}`` (read-only memmaps of their files, or
    tensors), each indexed by global id - ``offsets[owner]``. ``complete``: every other part is here
    (the same on every rank): nothing is asked of the owners."""

    stat = "host_rows"

    def __init__(self, parts: dict, offsets, world: int, complete: bool, file_dtype: np.dtype | None = None) -> None:
        self.parts = dict(parts)
        self.offsets = offsets
        self.complete = bool(complete)
        self.file_dtype = file_dtype
        self.mask = torch.zeros(world, dtype=torch.bool)
        if self.parts:
            self.mask[list(self.parts)] = True

    def claim(self, ids: torch.Tensor, owner: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """bool: whether each of ``ids[pos]`` is in a part read here."""
        return self.mask[owner[pos]]

    def fill(self, ids: torch.Tensor, owner: torch.Tensor, out: torch.Tensor, at: torch.Tensor) -> None:
        """``ids`` and ``owner`` of the claimed rows: one gather per part read (<= world size)."""
        present = torch.bincount(owner, minlength=self.mask.numel())  # a count, not a sort of the batch's owners
        for k in torch.nonzero(present).flatten().tolist():
            sel = owner == k
            gather(self.parts[k], ids[sel] - int(self.offsets[k]), out, at[sel], self.file_dtype, f"part {k}")


class CachedRows:
    """Other parts' rows held in a :class:`~gnnscale.data.feature_cache.FeatureCache` (``cache``, None
    until filled) on the reader's device. One instance may serve several readers (:meth:`RowReader.over`)."""

    stat = "cache_hits"

    def __init__(self) -> None:
        self.cache = None

    def claim(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(hit bool [k], int64 [hits] the cache rows holding the hits)."""
        return self.cache.positions(ids)

    def fill(self, idx: torch.Tensor, out: torch.Tensor, at: torch.Tensor) -> None:
        if not at.numel():
            return
        if out.device.type == "cpu":
            gather_into(self.cache.rows, idx, out, at)
        else:
            out.index_copy_(0, at.to(out.device), self.cache.rows[idx.to(out.device)])


class OwnerRows:
    """The rows asked of their owners: one exchange of ids (bytes under ``category + "_request"``)
    and one of rows (under ``category``), serving the other ranks' asks from ``own`` (collective)."""

    stat = "remote_rows"

    def __init__(self, comm, own: OwnRows) -> None:
        self.comm, self.own = comm, own

    def fill(self, ids: torch.Tensor, owner: torch.Tensor, out: torch.Tensor, at: torch.Tensor, category: str) -> None:
        route = Route.build(owner, self.comm.world_size)
        order = route.order
        served, served_counts = self.comm.exchange_flat(ids[order], route.counts, category + "_request")
        rows = out.new_empty((served.numel(),) + tuple(out.shape[1:]), device="cpu")
        self.own.fill(served, rows, None)
        back, _ = self.comm.exchange_flat(rows, served_counts, category)
        if ids.numel():
            out.index_copy_(0, at[order], back)


class RowReader:
    """``read(ids) -> rows`` by global id through :class:`OwnRows`, :class:`CachedRows`,
    :class:`HostRows` and :class:`OwnerRows` (the module's docstring).

    Args:
        own: this rank's rows (see :class:`OwnRows`). book: the partition book (``owner(ids)``,
            ``offsets``). comm: the communicator the owners are asked through.
        row_shape: the shape of one row (``(F,)`` for features, ``()`` for one value per node).
        dtype: the rows' dtype as stored and moved. category: the byte category of the rows the
            owners send (their ids: ``category + "_request"``), e.g. ``feature``.
        device: where :meth:`read` puts the rows (the cache lives there too).
        file_dtype: the numpy dtype of stored rows that the compiled gather reads.
        owners: ask the owners for what the sources above do not answer (False: a miss is an
            error; e.g. one process, or every part read on this host).
        cached: a :class:`CachedRows` to read through (another reader's: shared); None: its own.
        complete: every remote row this reader may be asked for is in the cache: it never asks the
            owners, and a miss is an error (historical mode's held halo).
    """

    def __init__(self, own, book, comm, row_shape: tuple[int, ...], dtype: torch.dtype, category: str,
                 device: torch.device | str = "cpu", file_dtype: np.dtype | None = None, owners: bool = True,
                 cached: CachedRows | None = None, complete: bool = False) -> None:
        self.book, self.comm = book, comm
        self.row_shape, self.dtype, self.category = tuple(row_shape), dtype, category
        self.device = torch.device(device)
        self.file_dtype = file_dtype
        self.own = OwnRows(own, int(book.offsets[comm.rank]), comm.rank, file_dtype)
        self.cached = cached if cached is not None else CachedRows()
        self.held = bool(complete)  # the cache holds every remote row asked for
        self.host: HostRows | None = None
        self.owners = OwnerRows(comm, self.own) if owners else None
        self.stats = {"local_rows": 0, "remote_rows": 0, "cache_hits": 0, "host_rows": 0}

    @property
    def row_bytes(self) -> int:
        """Bytes of one row as stored and moved."""
        return int(np.prod(self.row_shape, dtype=np.int64)) * torch.empty((), dtype=self.dtype).element_size()

    def bytes_by_source(self) -> dict[str, int]:
        """The rows read so far, in bytes, by the source that answered them (``stats`` x row bytes)."""
        return {k: v * self.row_bytes for k, v in self.stats.items()}

    def reset_stats(self) -> None:
        for k in self.stats:
            self.stats[k] = 0

    @property
    def complete(self) -> bool:
        """Whether no row is asked of its owner: the cache holds every remote row asked for, every
        other part is read on this host, or there are no owners to ask."""
        return self.held or (self.host is not None and self.host.complete) or self.owners is None

    def read_host_parts(self, parts: dict, complete: bool) -> None:
        """Read the rows of the parts in ``parts`` ({owner rank: rows}) on this host instead of asking
        their owners; ``complete``: every other rank's part is among them on every rank."""
        self.host = HostRows(parts, self.book.offsets, self.comm.world_size, complete, self.file_dtype) \
            if parts or complete else None

    def over(self, comm, complete: bool = False) -> "RowReader":
        """A reader of the same own rows through the same cache (shared: filled once, by either) that
        asks the owners through ``comm`` (e.g. another thread's group); ``complete`` as the constructor's."""
        return RowReader(self.own.rows, self.book, comm, self.row_shape, self.dtype, self.category, self.device,
                         self.file_dtype, True, self.cached, complete)

    def read(self, ids: torch.Tensor, category: str | None = None) -> torch.Tensor:
        """Rows [n, *row_shape] of global ids ``ids`` (int64 [n], on the host), in the order given,
        on the reader's device, in the stored dtype. ``category``: the owners' bytes under it instead
        of the reader's. Collective unless :attr:`complete` (on every rank or none)."""
        n = ids.numel()
        owner = self.book.owner(ids)
        mine = self.own.claim(ids, owner)
        mine_pos = torch.nonzero(mine).flatten()
        need_pos = torch.nonzero(~mine).flatten()
        cache = self.cached.cache
        hit_pos = cache_idx = None
        if cache is not None and cache.num_rows and need_pos.numel():
            hit, cache_idx = self.cached.claim(ids[need_pos])
            hit_pos, need_pos = need_pos[hit], need_pos[~hit]
            self.stats["cache_hits"] += int(hit_pos.numel())
        self.stats["local_rows"] += int(mine_pos.numel())
        if self.held and need_pos.numel():
            raise GnnscaleError(
                f"rank {self.comm.rank}: rows of ids {ids[need_pos][:5].tolist()} are neither owned nor held, but "
                "this store was marked complete (every remote row it can be asked for is cached); "
                "only halo nodes may be read in historical mode")
        on_host = self.device.type == "cpu"
        # Where the host's rows go: straight into the output on CPU; on CUDA into a pinned
        # buffer (owned rows first, then the others) that crosses in one copy.
        m, r = mine_pos.numel(), need_pos.numel()
        if on_host:
            out = buf = torch.empty((n,) + self.row_shape, dtype=self.dtype)
            own_at, rest_at = mine_pos, need_pos
        else:
            buf = torch.empty((m + r,) + self.row_shape, dtype=self.dtype, pin_memory=True)
            own_at, rest_at = None, torch.arange(m, m + r, dtype=torch.int64)
        all_mine = m == n
        self.own.fill(ids if all_mine else ids[mine_pos], buf, None if (all_mine or own_at is None) else own_at)
        ask_pos, ask_at = need_pos, rest_at
        if self.host is not None and need_pos.numel():
            here = self.host.claim(ids, owner, need_pos)
            if bool(here.any()):
                hp = torch.nonzero(here).flatten()
                self.host.fill(ids[need_pos[hp]], owner[need_pos[hp]], buf, rest_at[hp])
                self.stats["host_rows"] += int(hp.numel())
                keep = torch.nonzero(~here).flatten()
                ask_pos, ask_at = need_pos[keep], rest_at[keep]
        if not self.complete:
            self.owners.fill(ids[ask_pos], owner[ask_pos], buf, ask_at, category or self.category)
            self.stats["remote_rows"] += int(ask_pos.numel())
        elif ask_pos.numel():
            raise GnnscaleError(
                f"rank {self.comm.rank}: rows of ids {ids[ask_pos][:5].tolist()} are neither owned nor read on this "
                "host, and no owner is asked; the ids are outside the partition book")
        if not on_host:
            out = torch.empty((n,) + self.row_shape, dtype=self.dtype, device=self.device)
            if m + r:
                dest = torch.cat([mine_pos, need_pos]).to(self.device, non_blocking=True)
                out.index_copy_(0, dest, buf.to(self.device, non_blocking=True))
        if hit_pos is not None and hit_pos.numel():
            self.cached.fill(cache_idx, out, hit_pos)
        return out

    def fill_cache(self, ids: torch.Tensor, complete: bool = False, category: str = "cache_fill") -> None:
        """Read rows ``ids`` (int64 [K] remote global ids) once, through the sources below the cache
        (bytes under ``category``), and hold them in the shared cache on the reader's device;
        ``complete``: every remote row a reader over this cache may be asked for is among them.
        Collective; resets ``stats``."""
        from gnnscale.data.feature_cache import FeatureCache

        self.hold(None)
        rows = self.read(ids, category)
        self.hold(FeatureCache(ids, rows, self.device), complete)
        self.reset_stats()

    def hold(self, cache, complete: bool = False) -> None:
        """Read through ``cache`` (a :class:`~gnnscale.data.feature_cache.FeatureCache` of this reader's
        rows, or None), shared with the readers :meth:`over` this one; ``complete`` as the constructor's."""
        self.cached.cache, self.held = cache, bool(complete)
