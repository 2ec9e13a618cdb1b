"""Part-sized id maps of the own-part graph store: no rank holds a table over every node.

A partition numbers each part's nodes as one contiguous range of new ids
(:class:`gnnscale.partitioning.book.PartitionBook`), so a new id's owner and row follow from the
ranges. PyG speaks original ids; the way back, an original id's new id, is held by its *home*: the
ranks split the original ids into P contiguous ranges of ``ceil(N / P)`` (:class:`HomeRanges`), and
home h keeps the new ids of its range (int64 [N / P]). :class:`IdDirectory` asks the homes (one
exchange there and one back, ``id_request`` / ``id_response``: a collective on several ranks).

Within a batch no home is asked beyond its seeds: each drawn neighbour carries its new id beside
its original id, packed in one int64 (:func:`pack`: ``new << 32 | original``, the own-part store's
``indices``), and :class:`BatchIds` keeps the batch's pairs (sorted, batch-sized) for its next hops and
for the feature and label rows of its nodes.
"""
from __future__ import annotations

import numpy as np
import torch

from gnnscale.errors import PartitionError, SamplerError
from gnnscale.partitioning.routing import Route
from gnnscale.samplers.cpu_kernels import _G, _U, HAVE_NUMBA, nb

PACK_BITS = 32
LOW = (1 << PACK_BITS) - 1
MAX_PACKED_NODES = 1 << 31
"""Graphs the packing takes: ``new << 32 | original`` fits an int64 while both ids are below 2^31."""


def pack(new: torch.Tensor, orig: torch.Tensor) -> torch.Tensor:
    """int64: ``new << 32 | orig`` (both int64 ids below :data:`MAX_PACKED_NODES`)."""
    return (new << PACK_BITS) | orig


def unpack(packed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(original ids, new ids) of packed ids (:func:`pack`)."""
    return packed & LOW, packed >> PACK_BITS


if HAVE_NUMBA:

    @nb.njit(cache=True, nogil=True)
    def _put(table, keys, vals):
        """Insert (key, value) pairs into ``table`` int64 [size, 2] (key -1: empty; size a power of two,
        Fibonacci hashing, linear probing; a key present keeps its value). Returns the keys added."""
        mask = table.shape[0] - 1
        shift = _U(64 - np.int64(np.log2(mask + 1)))
        added = 0
        for i in range(keys.shape[0]):
            k = keys[i]
            h = np.int64((_U(k) * _G) >> shift)
            while True:
                t = table[h, 0]
                if t == k:
                    break
                if t == -1:
                    table[h, 0] = k
                    table[h, 1] = vals[i]
                    added += 1
                    break
                h = (h + 1) & mask
        return added

    @nb.njit(cache=True, nogil=True)
    def _find(table, keys, out):
        """out[i] = the value of keys[i] in ``table`` (:func:`_put`), -1 where absent; returns the absent count."""
        mask = table.shape[0] - 1
        shift = _U(64 - np.int64(np.log2(mask + 1)))
        missing = 0
        for i in range(keys.shape[0]):
            k = keys[i]
            h = np.int64((_U(k) * _G) >> shift)
            out[i] = -1
            while True:
                t = table[h, 0]
                if t == k:
                    out[i] = table[h, 1]
                    break
                if t == -1:
                    missing += 1
                    break
                h = (h + 1) & mask
        return missing

    @nb.njit(cache=True, nogil=True)
    def _pack_range(src, out, lo, orig):
        """out[e] = src[e] << 32 | orig[src[e] - lo] where src[e] in [lo, lo + len(orig)): one pass."""
        hi = lo + orig.shape[0]
        for e in range(src.shape[0]):
            v = src[e]
            if v >= lo and v < hi:
                out[e] = (v << 32) | orig[v - lo]


def pack_range(src: np.ndarray, out: np.ndarray, lo: int, orig: np.ndarray) -> None:
    """Write ``pack(new, orig)`` into ``out`` int64 [E] where ``src`` int64 [E] (new ids) falls in the
    range of new ids ``[lo, lo + len(orig))`` whose original ids are ``orig`` (one slice of a part)."""
    if HAVE_NUMBA:
        _pack_range(src, out, np.int64(lo), orig)
        return
    at = np.flatnonzero((src >= lo) & (src < lo + orig.shape[0]))
    v = src[at]
    out[at] = (v << PACK_BITS) | orig[v - lo]


class HomeRanges:
    """The home of each original id: rank ``h`` holds ``[h c, (h + 1) c)``, ``c = ceil(N / P)``."""

    def __init__(self, num_nodes: int, world: int) -> None:
        self.num_nodes, self.world = int(num_nodes), int(world)
        self.chunk = max(-(-self.num_nodes // self.world), 1)

    def home(self, orig: torch.Tensor) -> torch.Tensor:
        return torch.div(orig, self.chunk, rounding_mode="floor")

    def span(self, rank: int) -> tuple[int, int]:
        lo = min(rank * self.chunk, self.num_nodes)
        return lo, min(lo + self.chunk, self.num_nodes)


class IdDirectory:
    """Original ids -> new ids, each answered by its home (module docstring).

    Args:
        homes: the :class:`HomeRanges`; comm: this rank's communicator (rank r is home r).
        new_of_home: int64 [hi - lo] the new id of each original id of this rank's home range.
    """

    def __init__(self, homes: HomeRanges, comm, new_of_home: torch.Tensor) -> None:
        self.homes, self.comm = homes, comm
        self.lo = homes.span(comm.rank)[0]
        self.new_of_home = new_of_home

    def lookup(self, orig: torch.Tensor) -> torch.Tensor:
        """int64 new ids of original ids ``orig`` int64 [k] (a collective on several ranks: every rank
        calls it the same number of times, ``orig`` may be empty)."""
        orig = orig.to(torch.int64).reshape(-1)
        if self.comm.world_size == 1:
            return self.new_of_home[orig - self.lo]
        route = Route.build(self.homes.home(orig), self.comm.world_size)
        got = self.comm.exchange(route.split(orig), "id_request")
        back = self.comm.exchange([self.new_of_home[t - self.lo] for t in got], "id_response")
        return route.merge_rows(back)


class BatchIds:
    """The (original id, new id) pairs a batch has met (batch-sized): a hash table (numba: int64 (id, new
    id) pairs, a power of two kept at least twice the ids) or, without numba, sorted arrays.
    :meth:`clear` empties it for the next batch (its table kept)."""

    def __init__(self, capacity: int = 1 << 12) -> None:
        self.table = np.full((1 << max(4, int(2 * capacity - 1).bit_length()), 2), -1, dtype=np.int64)
        self.size = 0
        self.orig = self.new = torch.empty(0, dtype=torch.int64)  # without numba

    def clear(self) -> None:
        if self.size:
            self.table.fill(-1)
        self.size = 0
        self.orig = self.new = torch.empty(0, dtype=torch.int64)

    def __len__(self) -> int:
        return self.size if HAVE_NUMBA else int(self.orig.numel())

    def add(self, orig: torch.Tensor, new: torch.Tensor) -> None:
        if not HAVE_NUMBA:
            keys, vals = torch.cat([self.orig, orig]), torch.cat([self.new, new])
            self.orig, inv = torch.unique(keys, return_inverse=True)
            self.new = torch.empty_like(self.orig)
            self.new[inv] = vals  # an id's copies carry the same new id
            return
        if 2 * (self.size + orig.numel()) > self.table.shape[0]:  # grow: keep the load factor <= 0.5
            old = self.table[self.table[:, 0] >= 0]
            self.table = np.full((1 << int(4 * (self.size + orig.numel()) - 1).bit_length(), 2), -1, dtype=np.int64)
            self.size = _put(self.table, old[:, 0].copy(), old[:, 1].copy())
        self.size += _put(self.table, orig.contiguous().numpy(), new.contiguous().numpy())

    def find(self, orig: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(bool [k] known, int64 [k] their new ids (garbage where unknown)) of original ids ``orig``."""
        if HAVE_NUMBA:
            out = np.empty(orig.numel(), dtype=np.int64)
            _find(self.table, orig.contiguous().numpy(), out)
            new = torch.from_numpy(out)
            return new >= 0, new
        if not self.orig.numel():
            return torch.zeros(orig.numel(), dtype=torch.bool), torch.zeros(orig.numel(), dtype=torch.int64)
        pos = torch.searchsorted(self.orig, orig).clamp_(max=self.orig.numel() - 1)
        return self.orig[pos] == orig, self.new[pos]

    def get(self, orig: torch.Tensor) -> torch.Tensor:
        """int64 new ids of original ids the batch has met."""
        known, new = self.find(orig)
        if not bool(known.all()):
            raise SamplerError(f"the own-part sampler met {int((~known).sum())} node(s) whose new id it was not told "
                               "(neither a seed nor a drawn neighbour); this is a bug, please report it.")
        return new


def check_packable(num_nodes: int, where: str) -> None:
    if num_nodes >= MAX_PACKED_NODES:
        raise PartitionError(f"the own-part graph store packs a node's new and original ids in one int64, which "
                             f"needs fewer than 2^31 nodes; {where} holds {num_nodes}. Open it with "
                             "graph_store='whole'.")
