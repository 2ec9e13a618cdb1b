"""Time-respecting draws over a T-CSR (numba): each query is (node, time), each node's in-edges
are sorted by time, so the candidates "before t" are one binary search away.

A query ``i`` asks for up to ``fanout`` in-edges of row ``rows[i]`` whose time is before
``times[i]``: ``edge_time < t`` (``strict``) or ``<= t``; with a ``window`` w > 0 also
``edge_time >= t - w``. The candidates are one run ``[lo, cut)`` of the row's in-edges (two binary
searches). Strategies:

- ``uniform`` (0): a uniform ``fanout``-subset of the run (Floyd's algorithm, ascending), keyed
  like :mod:`gnnscale.samplers.cpu_kernels`' draws by the stream key and the node's key, mixed
  with the query's time (the same node asked at two times draws independently);
- ``last`` (1): the ``fanout`` most recent edges of the run (the run's tail);

``fanout < 0`` takes the whole run. Everything is a pure function of (key, node key, time) and
the row's edge order (gnnscale's partitions order each node's in-edges by (time, original edge
column), whatever the partitioning), so an owner answering for another rank draws what one
process draws. Two passes like the untimed kernels: the counts (one binary search per query,
in parallel), then the draws.
"""
from __future__ import annotations

import numpy as np
import torch

from gnnscale.samplers.cpu_kernels import _G, _M1, _M2, _U, HAVE_NUMBA, nb

STRATEGIES = {"uniform": 0, "last": 1}
_INV53 = 1.0 / float(1 << 53)

if HAVE_NUMBA:
    from gnnscale.samplers.cpu_kernels import _floyd, _mix64, _offsets, _sort

    @nb.njit(inline="always", cache=True)
    def _first_at_least(etime, lo, hi, t):
        """First position p in [lo, hi) with etime[p] >= t (hi when none)."""
        while lo < hi:
            mid = (lo + hi) >> 1
            if etime[mid] < t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @nb.njit(inline="always", cache=True)
    def _first_above(etime, lo, hi, t):
        """First position p in [lo, hi) with etime[p] > t (hi when none)."""
        while lo < hi:
            mid = (lo + hi) >> 1
            if etime[mid] <= t:
                lo = mid + 1
            else:
                hi = mid
        return lo

    @nb.njit(inline="always", cache=True)
    def _run(indptr, etime, rows, times, strict, window, i):
        """(lo, cut): query i's candidate run of in-edges. The node's latest edge is looked at
        first: a query after all of them (the common case of recent seeds) needs no search."""
        start = indptr[rows[i]]
        end = indptr[rows[i] + 1]
        t = times[i]
        if end == start:
            return start, end
        last = etime[end - 1]
        if (strict and last < t) or (not strict and last <= t):
            cut = end
        else:
            cut = _first_at_least(etime, start, end, t) if strict else _first_above(etime, start, end, t)
        lo = start
        if window > 0:
            lo = _first_at_least(etime, start, cut, t - window)
        return lo, cut

    @nb.njit(inline="always", cache=True)
    def _count_t(indptr, etime, rows, times, strict, window, fanout, los, cuts, i):
        lo, cut = _run(indptr, etime, rows, times, strict, window, i)
        los[i] = lo
        cuts[i] = cut
        d = cut - lo
        return d if (fanout < 0 or d < fanout) else fanout

    @nb.njit(inline="always", cache=True)
    def _draw_t(node_keys, times, keys, strategy, los, cuts, offsets, out, i):
        o = offsets[i]
        c = offsets[i + 1] - o
        if c == 0:
            return
        lo = los[i]
        cut = cuts[i]
        d = cut - lo
        if c == d:  # the whole run
            for j in range(d):
                out[o + j] = lo + j
            return
        if strategy == 1:  # the c most recent
            for j in range(c):
                out[o + j] = cut - c + j
            return
        key = keys[0] if keys.shape[0] == 1 else keys[i]
        h = _mix64(_U(node_keys[i]) * _G + _U(key))
        h = _mix64(h ^ (_U(times[i]) * _M1 + _M2))
        _floyd(out, o, d, c, h)
        _sort(out, o, c)
        for j in range(c):
            out[o + j] += lo

    @nb.njit(inline="always", cache=True)
    def _take(indices, etime, out, eout, tout, want_e, j):
        e = out[j]
        if want_e:
            eout[j] = e
        tout[j] = etime[e]
        out[j] = indices[e]

    @nb.njit(cache=True, nogil=True)
    def _alloc(counts, n, want_e, tdtype_like):
        offsets = _offsets(counts)
        m = offsets[n]
        out = np.empty(m, dtype=np.int64)
        eout = np.empty(m, dtype=np.int64) if want_e else out
        tout = np.empty(m, dtype=tdtype_like.dtype)
        return offsets, out, eout, tout

    @nb.njit(parallel=True, cache=True, nogil=True)
    def _sample_t_parallel(indptr, indices, etime, rows, node_keys, times, keys, fanout, strategy, strict, window,
                           counts, want_e):
        n = rows.shape[0]
        los = np.empty(n, dtype=np.int64)
        cuts = np.empty(n, dtype=np.int64)
        for i in nb.prange(n):
            counts[i] = _count_t(indptr, etime, rows, times, strict, window, fanout, los, cuts, i)
        offsets, out, eout, tout = _alloc(counts, n, want_e, etime)
        for i in nb.prange(n):
            _draw_t(node_keys, times, keys, strategy, los, cuts, offsets, out, i)
        for j in nb.prange(offsets[n]):
            _take(indices, etime, out, eout, tout, want_e, j)
        return out, eout, tout

    @nb.njit(cache=True, nogil=True)
    def _sample_t_serial(indptr, indices, etime, rows, node_keys, times, keys, fanout, strategy, strict, window,
                         counts, want_e):
        n = rows.shape[0]
        los = np.empty(n, dtype=np.int64)
        cuts = np.empty(n, dtype=np.int64)
        for i in range(n):
            counts[i] = _count_t(indptr, etime, rows, times, strict, window, fanout, los, cuts, i)
        offsets, out, eout, tout = _alloc(counts, n, want_e, etime)
        for i in range(n):
            _draw_t(node_keys, times, keys, strategy, los, cuts, offsets, out, i)
        for j in range(offsets[n]):
            _take(indices, etime, out, eout, tout, want_e, j)
        return out, eout, tout


    @nb.njit(cache=True, nogil=True)
    def _relabel_trees(dst, dst_tree, counts, nbrs, times, num_trees, stamp, first_at):
        """Disjoint relabeling: every (tree, node) pair once, the destinations first (slots
        0..D-1), then new pairs in order of first appearance, as a hash of ``tree * N + node``
        would number them. The entries are counting-sorted by tree (stably), so within one tree
        a node is seen through ``stamp`` (int64 [N], -1 where unseen; left so) and ``first_at``
        (int64 [N], the entry of its first appearance in the tree): no hash, no division."""
        nd = dst.shape[0]
        m = nbrs.shape[0]
        n_all = nd + m
        tree = np.empty(n_all, dtype=np.int64)
        node = np.empty(n_all, dtype=np.int64)
        for i in range(nd):
            tree[i] = dst_tree[i]
            node[i] = dst[i]
        e = nd
        for i in range(nd):
            for _ in range(counts[i]):
                tree[e] = dst_tree[i]
                node[e] = nbrs[e - nd]
                e += 1
        start = np.zeros(num_trees + 1, dtype=np.int64)
        for e in range(n_all):
            start[tree[e] + 1] += 1
        for k in range(num_trees):
            start[k + 1] += start[k]
        order = np.empty(n_all, dtype=np.int64)
        for e in range(n_all):
            k = tree[e]
            order[start[k]] = e
            start[k] += 1
        rep = np.empty(n_all, dtype=np.int64)  # each entry's first appearance in its tree
        for j in range(n_all):
            e = order[j]
            v = node[e]
            if stamp[v] != tree[e]:
                stamp[v] = tree[e]
                first_at[v] = e
                rep[e] = e
            else:
                rep[e] = first_at[v]
        for j in range(n_all):
            stamp[node[order[j]]] = -1
        slot = np.empty(n_all, dtype=np.int64)
        uniq = np.empty(n_all, dtype=np.int64)
        utree = np.empty(n_all, dtype=np.int64)
        n = 0
        for e in range(n_all):  # in entry order: rep[e] <= e is numbered already
            if rep[e] == e:
                slot[e] = n
                uniq[n] = node[e]
                utree[n] = tree[e]
                n += 1
            else:
                slot[e] = slot[rep[e]]
        local = slot[nd:].copy()
        utime = np.empty(n, dtype=np.int64)
        for i in range(n):
            utime[i] = times[utree[i]]
        return uniq[:n].copy(), utree[:n].copy(), utime, local


    # -- one hop over owners (DistTemporalSampler.draw_hop): requests packed by owner, answers
    # packed per requester, merged back into the frontier's order, each in one pass

    @nb.njit(cache=True, nogil=True)
    def _pack_requests(owner, ids, times, keys, w, num_ranks):
        """(req int64 [n, w], counts int64 [P], order int64 [n]): the queries (id, time[, key])
        grouped by owner, stably (a counting sort); ``order[j]`` is the frontier position of row
        j; w = 3 with a key per query (``keys``), else 2."""
        n = ids.shape[0]
        counts = np.zeros(num_ranks, dtype=np.int64)
        for i in range(n):
            counts[owner[i]] += 1
        start = np.zeros(num_ranks, dtype=np.int64)
        for r in range(1, num_ranks):
            start[r] = start[r - 1] + counts[r - 1]
        req = np.empty((n, w), dtype=np.int64)
        order = np.empty(n, dtype=np.int64)
        for i in range(n):
            j = start[owner[i]]
            start[owner[i]] = j + 1
            order[j] = i
            req[j, 0] = ids[i]
            req[j, 1] = times[i]
            if w == 3:
                req[j, 2] = keys[i]
        return req, counts, order

    @nb.njit(cache=True, nogil=True)
    def _pack_replies(counts, sizes, v0, v1, v2, width):
        """(buf int64, lens int64 [P]): per requester r (its ``sizes[r]`` queries, in the order
        received), the queries' counts, then its edges' ``width`` values (v0, v1[, v2])
        interleaved row by row."""
        P = sizes.shape[0]
        lens = np.empty(P, dtype=np.int64)
        q = 0
        total = 0
        for r in range(P):
            e = 0
            for i in range(q, q + sizes[r]):
                e += counts[i]
            lens[r] = sizes[r] + width * e
            total += lens[r]
            q += sizes[r]
        buf = np.empty(total, dtype=np.int64)
        pos = 0
        q = 0
        j = 0
        for r in range(P):
            n_r = sizes[r]
            for i in range(n_r):
                buf[pos + i] = counts[q + i]
            pos += n_r
            q += n_r
            for _ in range((lens[r] - n_r) // width):
                buf[pos] = v0[j]
                buf[pos + 1] = v1[j]
                if width == 3:
                    buf[pos + 2] = v2[j]
                pos += width
                j += 1
        return buf, lens

    @nb.njit(cache=True, nogil=True)
    def _merge_replies(back, lens, asked, order, width):
        """(counts int64 [n], v0, v1, v2 [M]): the owners' answers (``back``: owner r's block of
        ``lens[r]`` values, the counts of the ``asked[r]`` queries sent to it, then their edges'
        ``width`` values row by row) in the frontier's order (``order`` from :func:`_pack_requests`);
        v2 is empty unless ``width`` is 3."""
        n = order.shape[0]
        P = asked.shape[0]
        counts = np.empty(n, dtype=np.int64)
        pos = 0
        g = 0
        for r in range(P):
            for i in range(asked[r]):
                counts[order[g + i]] = back[pos + i]
            pos += lens[r]
            g += asked[r]
        starts = np.empty(n + 1, dtype=np.int64)
        starts[0] = 0
        for i in range(n):
            starts[i + 1] = starts[i] + counts[i]
        m = starts[n]
        v0 = np.empty(m, dtype=np.int64)
        v1 = np.empty(m, dtype=np.int64)
        v2 = np.empty(m if width == 3 else 0, dtype=np.int64)
        pos = 0
        g = 0
        for r in range(P):
            e = pos + asked[r]
            for i in range(asked[r]):
                f = order[g + i]
                s = starts[f]
                for j in range(counts[f]):
                    v0[s + j] = back[e]
                    v1[s + j] = back[e + 1]
                    if width == 3:
                        v2[s + j] = back[e + 2]
                    e += width
            pos += lens[r]
            g += asked[r]
        return counts, v0, v1, v2


class TreeRelabeler:
    """Disjoint trees' relabeling (:func:`_relabel_trees`) with its two node tables kept between
    calls (int64 [N] each, left unseen by every call): ``(dst, dst_tree, counts, nbrs, times) ->
    (src_ids, src_tree, src_time, nbr_local)``, numbered exactly as the relabeling of the
    combined ids ``tree * N + node``."""

    def __init__(self, num_nodes: int) -> None:
        self.stamp = np.full(int(num_nodes), -1, dtype=np.int64)
        self.first_at = np.empty(int(num_nodes), dtype=np.int64)

    def __call__(self, dst: torch.Tensor, dst_tree: torch.Tensor, counts: torch.Tensor, nbrs: torch.Tensor,
                 times: torch.Tensor):
        uniq, utree, utime, local = _relabel_trees(dst.numpy(), dst_tree.numpy(), counts.numpy(), nbrs.numpy(),
                                                   times.numpy(), int(times.numel()), self.stamp, self.first_at)
        return torch.from_numpy(uniq), torch.from_numpy(utree), torch.from_numpy(utime), torch.from_numpy(local)


def sample_temporal(indptr: torch.Tensor, indices: torch.Tensor, edge_time: torch.Tensor, rows: torch.Tensor,
                    node_keys: torch.Tensor, times: torch.Tensor, fanout: int, key: "int | torch.Tensor",
                    strategy: str = "uniform", strict: bool = True, window: int = 0,
                    parallel: bool = False, return_edges: bool = True
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Time-respecting draws of ``rows`` (int64 [n] CSC rows) at ``times`` (int64 [n]).

    ``edge_time`` int64 [E] aligned with ``indices``, ascending within each row. Returns
    ``(counts int64 [n], nbrs int64 [sum counts], edges int64 [sum counts] CSC positions,
    times int64 [sum counts] of the drawn edges)``, grouped by query, each query's edges in
    ascending time; ``edges`` is None unless ``return_edges``.
    """
    if not HAVE_NUMBA:  # pragma: no cover - numba is a dependency
        raise RuntimeError("temporal sampling needs numba")
    keys = np.asarray([key], dtype=np.int64) if isinstance(key, int) else key.numpy()
    counts = np.empty(rows.numel(), dtype=np.int64)
    kernel = _sample_t_parallel if parallel and rows.numel() >= 4096 else _sample_t_serial
    out, eout, tout = kernel(indptr.numpy(), indices.numpy(), edge_time.numpy(), rows.numpy(), node_keys.numpy(),
                             times.numpy(), keys, int(fanout), STRATEGIES[strategy], bool(strict), int(window),
                             counts, bool(return_edges))
    return (torch.from_numpy(counts), torch.from_numpy(out), torch.from_numpy(eout) if return_edges else None,
            torch.from_numpy(tout))


_NONE = np.empty(0, dtype=np.int64)


def pack_requests(owner: torch.Tensor, ids: torch.Tensor, times: torch.Tensor, keys: torch.Tensor | None,
                  num_ranks: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """A hop's queries by owner, one pass: ``(req int64 [n, w], counts int64 [P], order)``; rows
    (id, time[, key]), owner 0's first, each owner's in frontier order; ``order`` (numpy [n])
    maps rows to frontier positions (for :func:`merge_replies`)."""
    req, counts, order = _pack_requests(owner.numpy(), ids.numpy(), times.numpy(),
                                        _NONE if keys is None else keys.numpy(), 2 if keys is None else 3,
                                        int(num_ranks))
    return torch.from_numpy(req), torch.from_numpy(counts), order


def pack_replies(counts: torch.Tensor, sizes: torch.Tensor, values: list[torch.Tensor]
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """The answers to each requester in one int64 buffer: ``(buf, lens [P])``; requester r's
    block is its queries' counts then their edges' values (2 or 3: neighbour, time[, edge id])
    row by row."""
    v = [x.numpy() for x in values]
    buf, lens = _pack_replies(counts.numpy(), sizes.numpy(), v[0], v[1], v[2] if len(v) == 3 else _NONE, len(v))
    return torch.from_numpy(buf), torch.from_numpy(lens)


def merge_replies(back: torch.Tensor, lens: torch.Tensor, asked: torch.Tensor, order: np.ndarray, width: int
                  ) -> tuple[torch.Tensor, ...]:
    """The owners' blocks (:func:`pack_replies`, received in rank order) back in the frontier's
    order: ``(counts [n], v0, v1[, v2])`` for ``width`` values per edge."""
    counts, v0, v1, v2 = _merge_replies(back.numpy(), lens.numpy(), asked.numpy(), order, int(width))
    out = (torch.from_numpy(counts), torch.from_numpy(v0), torch.from_numpy(v1))
    return out + (torch.from_numpy(v2),) if width == 3 else out
