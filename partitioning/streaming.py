"""Streaming partitioners: Linear Deterministic Greedy (LDG) and Fennel, vectorized by chunks.

Both visit the nodes once, in a seeded random order, and put each node in the part where it
has the most already-placed neighbors, corrected for the part's load:

* LDG (Stanton & Kliot, KDD 2012): ``score(v, p) = c(v, p) * (1 - |P_p| / C)``;
* Fennel (Tsourakakis et al., WSDM 2014):
  ``score(v, p) = c(v, p) - alpha * gamma * |P_p|^(gamma-1)``
  with ``alpha = sqrt(P) * M / N^1.5`` (M undirected edges) and ``gamma = 1.5`` by default;

where ``c(v, p)`` counts ``v``'s neighbors already in part ``p`` (edge weights summed when
given), ``|P_p|`` is the part's size and ``C`` its capacity. Capacity is a hard limit:
``C = max(ceil(N / P), floor((1 + slack) * N / P))`` nodes, never exceeded.

Vectorization: the stream is cut into chunks of ``chunk_size`` nodes. Within a chunk the
neighbor counts of every node against the parts of the nodes placed by EARLIER chunks are one
``bincount`` over the chunk's CSR rows; the chunk's nodes are then placed together and the
state (assignments, part sizes) is updated before the next chunk. Ties and nodes with no
placed neighbor follow the sequential algorithms' rule (least-loaded part, random among equal
ones): the chunk's nodes without a placed neighbor are spread over the parts by water-filling,
which is what placing them one by one on the then-smallest part does. When several nodes of
a chunk pick a part that has fewer free places than takers, the first ones in stream order get
them and the others choose again among the parts that still have room (at most P rounds).

When the two give the same parts: both objectives pick the part with the most placed neighbors
whenever the parts' sizes are close, and only differ where the load term outweighs a difference
in neighbor counts. With Fennel's default alpha the load term at ``|P_p| = N / P`` is
``gamma * M / N`` (1.5 x half the mean degree) and between two parts it differs by
``alpha * gamma * (sqrt(a) - sqrt(b))``; the stream keeps the parts within a few nodes of each
other (nodes without placed neighbors go to the smallest part), so on a sparse graph that
difference is a few hundredths while counts differ by whole edges, and LDG's factor
``1 - |P_p| / C`` only matters near capacity. On Cora (mean degree 3.9; load term 2.9, parts
within 11-17 nodes of each other) a one-node-at-a-time stream of the two formulas makes the same
choice at all 2708 steps at 2 and 4 parts (4 steps differ at 8), and the chunked streams give
the same assignments at 2, 4 and 8 parts; so do they up to alpha = 3 (alpha = 10: 23% of the
nodes move at 4 parts). On Squirrel (mean degree 76, load term 57) they differ at 955-1321 of
the 5201 steps and in 11-47% of the assignments. This is the two algorithms' behavior, not a
shortcut: pass a larger ``alpha`` (or ``gamma``) for a Fennel that trades cut for balance on a
sparse graph.
"""

from __future__ import annotations

import logging
import math

import numpy as np

from gnnscale.errors import PartitionError

logger = logging.getLogger(__name__)

STREAMING_KINDS = ("ldg", "fennel")


def capacity(num_nodes: int, num_parts: int, slack: float) -> int:
    """Most nodes a part may hold: ``max(ceil(N / P), floor((1 + slack) * N / P))``."""
    return max(-(-num_nodes // num_parts), int(math.floor((1.0 + slack) * num_nodes / num_parts)))


def fennel_alpha(num_nodes: int, num_edges: float, num_parts: int) -> float:
    """Fennel's default load weight ``sqrt(P) * M / N^1.5`` (Tsourakakis et al., WSDM 2014), with
    ``M`` undirected edges (half the adjacency entries of the symmetric CSR) and ``N`` nodes."""
    return math.sqrt(num_parts) * float(num_edges) / float(num_nodes) ** 1.5


def placement_scores(
    kind: str,
    counts: np.ndarray,
    sizes: np.ndarray,
    cap: int,
    alpha: float,
    gamma: float,
) -> np.ndarray:
    """Each candidate node's score for each part (the part with the highest score gets it).

    Args:
        kind: ``"ldg"``: ``counts * (1 - sizes / cap)``; ``"fennel"``:
            ``counts - alpha * gamma * sizes ** (gamma - 1)``.
        counts: float or int ``[C, P]``, placed neighbors (edge weight sums) of each node per part.
        sizes: int64 ``[P]``, nodes in each part now.
        cap: a part's capacity (LDG's ``C``).
        alpha, gamma: Fennel's load weight and exponent (ignored by LDG).

    Returns:
        float64 ``[C, P]``; a full part (``sizes >= cap``) scores ``-inf``.
    """
    if kind == "ldg":
        score = counts * (1.0 - sizes / cap)
    elif kind == "fennel":
        score = counts - alpha * gamma * np.power(sizes, gamma - 1.0)
    else:
        raise PartitionError(
            f"expected a streaming kind from {list(STREAMING_KINDS)}, found {kind!r}"
        )
    score = np.array(score, dtype=np.float64)
    score[:, sizes >= cap] = -np.inf
    return score


def default_chunk_size(num_nodes: int, num_parts: int) -> int:
    """Nodes placed together: ``N / (64 P)`` clipped to [16, 8192] (a chunk is a small fraction
    of a part, so placing a chunk at once changes part sizes little)."""
    return int(min(8192, max(16, num_nodes // (64 * num_parts))))


def _water_fill(sizes: np.ndarray, free: np.ndarray, k: int) -> np.ndarray:
    """Split ``k`` nodes over parts so the resulting sizes are as even as possible.

    Args:
        sizes: int64 ``[P]`` current part sizes.
        free: int64 ``[P]`` free places per part (``sum(free) >= k``).
        k: nodes to place.

    Returns:
        int64 ``[P]`` nodes given to each part (``<= free``, summing to ``k``).
    """
    p = sizes.shape[0]
    alloc = np.zeros(p, dtype=np.int64)
    while k > 0:  # runs once unless a part fills up (then at most P times)
        open_ = np.flatnonzero(free - alloc > 0)
        cur = sizes[open_] + alloc[open_]
        room = free[open_] - alloc[open_]
        o = np.argsort(cur, kind="stable")
        s = cur[o]
        # cost of lifting the j+1 smallest up to s[j]
        prefix = np.cumsum(s)
        cost = s * np.arange(1, s.shape[0] + 1) - prefix
        j = int(np.searchsorted(cost, k, side="right"))  # parts 0..j-1 take part in the fill
        level, extra = divmod(k + int(prefix[j - 1]), j)
        give = np.zeros(s.shape[0], dtype=np.int64)
        give[:j] = level - s[:j]
        give[:extra] += 1
        give = np.minimum(give, room[o])
        alloc[open_[o]] += give
        k -= int(give.sum())
    return alloc


def stream_partition(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    *,
    kind: str = "fennel",
    slack: float = 0.05,
    seed: int = 0,
    chunk_size: int | None = None,
    gamma: float = 1.5,
    alpha: float | None = None,
    edge_weights: np.ndarray | None = None,
    passes: int = 1,
) -> np.ndarray:
    """Partition an undirected graph with streaming LDG or Fennel.

    Args:
        indptr: int ``[N+1]`` CSR row pointer of a symmetric graph without self loops
            (see :func:`gnnscale.partitioning.graph.to_undirected_csr`).
        indices: int32 or int64 ``[2M]`` neighbor ids.
        num_parts: P >= 1.
        kind: ``"ldg"`` or ``"fennel"``.
        slack: balance slack; a part holds at most ``(1 + slack) * N / P`` nodes (at least
            ``ceil(N / P)``).
        seed: seed of the stream order and of tie-breaking (same seed = same partition).
        chunk_size: nodes placed together (default :func:`default_chunk_size`); 1 gives the
            sequential algorithm (slow on large graphs).
        gamma: Fennel's exponent (> 1).
        alpha: Fennel's load weight (default ``sqrt(P) * M / N^1.5``).
        edge_weights: optional float ``[2M]``, the weight of each adjacency entry; neighbor
            counts become weight sums.
        passes: number of streams over the nodes (restreaming, Nishimura & Ugander, KDD
            2013): from the second pass on, a neighbor not yet placed in this pass counts in
            the part the previous pass gave it; part sizes restart from zero every pass.

    Returns:
        int64 numpy ``[N]`` with values in ``[0, P)``.
    """
    if kind not in STREAMING_KINDS:
        raise PartitionError(
            f"expected a streaming kind from {list(STREAMING_KINDS)}, found {kind!r}"
        )
    indptr = np.asarray(indptr)
    indices = np.asarray(indices)
    for name, arr in (("indptr", indptr), ("indices", indices)):
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise PartitionError(
                f"expected {name} to be a 1-D integer array, found shape {arr.shape} dtype "
                f"{arr.dtype}; build the CSR with to_undirected_csr"
            )
    indptr = indptr.astype(np.int64, copy=False)  # N+1 entries: cheap; indices stay as given
    n = indptr.shape[0] - 1
    num_parts = int(num_parts)
    if num_parts < 1:
        raise PartitionError(f"expected num_parts >= 1, found {num_parts}; pass a positive count")
    try:
        slack = float(slack)
    except (TypeError, ValueError):
        slack = float("nan")
    if not (math.isfinite(slack) and slack >= 0):
        raise PartitionError(
            f"expected a balance slack >= 0 (0.05 = parts up to 5% above N/P), found {slack}; "
            "pass slack=0.05 or similar"
        )
    if not gamma > 1.0:
        raise PartitionError(f"expected Fennel's gamma > 1, found {gamma}; the default is 1.5")
    if chunk_size is None:
        chunk_size = default_chunk_size(n, num_parts)
    if isinstance(chunk_size, bool) or int(chunk_size) != chunk_size or int(chunk_size) < 1:
        raise PartitionError(f"expected a positive integer chunk_size, found {chunk_size!r}")
    chunk_size = int(chunk_size)
    if edge_weights is not None:
        edge_weights = np.asarray(edge_weights, dtype=np.float64)
        if edge_weights.shape != indices.shape:
            raise PartitionError(
                f"expected edge_weights of shape {indices.shape}, found {edge_weights.shape}"
            )
    if isinstance(passes, bool) or int(passes) != passes or int(passes) < 1:
        raise PartitionError(f"expected passes >= 1 (an integer), found {passes!r}")
    if n == 0 or num_parts == 1:
        return np.zeros(n, dtype=np.int64)

    cap = capacity(n, num_parts, slack)
    if alpha is None:
        alpha = fennel_alpha(n, indices.shape[0] / 2.0, num_parts)
    rng = np.random.default_rng(seed)
    order = rng.permutation(n)
    deg = np.diff(indptr)
    logger.debug(
        "%s: N=%d P=%d capacity=%d chunk=%d alpha=%.4g gamma=%.2f passes=%d",
        kind, n, num_parts, cap, chunk_size, alpha, gamma, passes,
    )
    previous = None
    for _ in range(int(passes)):  # a handful of passes
        previous = _one_pass(
            indptr, indices, deg, order, num_parts, kind, cap, chunk_size, alpha, gamma,
            edge_weights, rng, previous,
        )
    return previous


def place_chunk(
    counts: np.ndarray,
    sizes: np.ndarray,
    cap: int,
    kind: str,
    alpha: float,
    gamma: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Place one chunk of ``C`` nodes given their placed-neighbor counts (one stream step).

    Args:
        counts: float or int ``[C, P]``, placed neighbors (edge weight sums) of each node per part.
        sizes: int64 ``[P]``, nodes in each part now; updated in place.
        cap, kind, alpha, gamma: as :func:`placement_scores`.
        rng: the stream's generator (draws the tie-breaking noise, then the orphans' parts).

    Returns:
        int64 ``[C]``: the chosen part of each node. A node with placed neighbors takes its best
        score (ties to the smaller part), first come first served when a part fills up; nodes
        without any are spread over the parts by water filling.
    """
    c, num_parts = counts.shape
    chosen = np.full(c, -1, dtype=np.int64)
    has_nbr = counts.any(axis=1)
    noise = rng.random((c, num_parts))
    pending = np.flatnonzero(has_nbr)
    while pending.size:  # at most P rounds: each rejection round fills a part
        free = cap - sizes
        score = placement_scores(kind, counts[pending], sizes, cap, alpha, gamma)
        best = score.max(axis=1, keepdims=True)
        tie = score >= best - 1e-9 * np.maximum(1.0, np.abs(best))
        choice = np.where(tie, sizes + noise[pending], np.inf).argmin(axis=1)
        # first come, first served when a part has fewer free places than takers
        o = np.argsort(choice, kind="stable")
        cs = choice[o]
        rank = np.arange(cs.shape[0]) - np.searchsorted(cs, cs, side="left")
        accept = np.empty(cs.shape[0], dtype=np.bool_)
        accept[o] = rank < free[cs]
        chosen[pending[accept]] = choice[accept]
        sizes += np.bincount(choice[accept], minlength=num_parts)
        pending = pending[~accept]
    orphans = np.flatnonzero(~has_nbr)
    if orphans.size:
        alloc = _water_fill(sizes, cap - sizes, int(orphans.size))
        targets = np.repeat(np.arange(num_parts, dtype=np.int64), alloc)
        chosen[orphans] = rng.permutation(targets)
        sizes += alloc
    return chosen


def neighbor_counts(
    indptr: np.ndarray,
    indices: np.ndarray,
    deg: np.ndarray,
    v: np.ndarray,
    known: np.ndarray,
    num_parts: int,
    edge_weights: np.ndarray | None = None,
) -> np.ndarray:
    """Placed neighbors of the chunk ``v`` per part, from a CSR (vectorized over the chunk's edges).

    Args:
        indptr: int64 ``[n+1]`` and ``indices`` int ``[m]``: a CSR whose rows ``v`` are read
            (the whole graph's, or a block's rows with their neighbors in global ids).
        deg: int64 ``[n]``, ``diff(indptr)``.
        v: int64 ``[C]`` rows of the CSR to count for.
        known: int ``[N]``: the part of every node (global ids), negative = not placed.
        num_parts: P.
        edge_weights: optional float ``[m]`` aligned with ``indices``.

    Returns:
        float64 ``[C, P]`` (int64 without weights): neighbors (weight sums) per part.
    """
    c = v.shape[0]
    d = deg[v]
    total = int(d.sum())
    row = np.repeat(np.arange(c, dtype=np.int64), d)
    pos = np.arange(total, dtype=np.int64)
    pos += np.repeat(indptr[v] - (np.cumsum(d) - d), d)
    nb_part = known[indices[pos]]
    placed = nb_part >= 0
    keys = row[placed] * num_parts + nb_part[placed]
    w = None if edge_weights is None else edge_weights[pos[placed]]
    counts = np.bincount(keys, weights=w, minlength=c * num_parts).reshape(c, num_parts)
    del row, pos, nb_part, placed, keys, w
    return counts


def _one_pass(
    indptr: np.ndarray,
    indices: np.ndarray,
    deg: np.ndarray,
    order: np.ndarray,
    num_parts: int,
    kind: str,
    cap: int,
    chunk_size: int,
    alpha: float,
    gamma: float,
    edge_weights: np.ndarray | None,
    rng: np.random.Generator,
    previous: np.ndarray | None,
) -> np.ndarray:
    """One stream over ``order``; returns int64 ``[N]`` part ids (see :func:`stream_partition`).

    ``previous`` (int64 ``[N]`` or None) is the last pass's assignment, used for neighbors not
    yet placed in this pass.
    """
    n = order.shape[0]
    assign = np.full(n, -1, dtype=np.int64)
    known = assign if previous is None else previous.copy()  # latest part of every node
    sizes = np.zeros(num_parts, dtype=np.int64)
    for lo in range(0, n, chunk_size):  # loop over chunks of nodes, not over nodes
        v = order[lo : lo + chunk_size]
        counts = neighbor_counts(indptr, indices, deg, v, known, num_parts, edge_weights)
        chosen = place_chunk(counts, sizes, cap, kind, alpha, gamma, rng)
        assign[v] = chosen
        if previous is not None:
            known[v] = chosen
    return assign
