"""KaMinPar and KaHIP: the pip-installable multilevel partitioners, on CSR arrays.

Both are optional (``pip install 'gnnscale[kaminpar]'``, ``'gnnscale[kahip]'``) and imported on
first use; a missing one is a one-line :class:`~gnnscale.errors.PartitionError` naming the
command that installs it. Both take ONE node weight (no multi-constraint balance, unlike METIS)
and keep every part's weight within ``(1 + imbalance) * ceil(total / P)``; :func:`single_node_weight`
turns the balance constraints into that weight.

Entry points (no ``Data`` needed, so an out-of-core pipeline can call them on arrays it built):

* :func:`kaminpar_assign` ``(indptr, indices, P, ...)``: writes the graph as a ParHIP binary file
  (KaMinPar 3.7's Python binding reads graphs from files only) and partitions it;
* :func:`kaminpar_assign_file` ``(path, P, ...)``: the same from a ParHIP file already on disk
  (:func:`write_parhip` writes one, e.g. from streamed adjacency);
* :func:`kahip_assign` ``(indptr, indices, P, ...)``: KaFFPa on int32 CSR arrays (KaHIP's ids are
  32-bit: at most 2^31 - 1 adjacency entries).

Measured here (2 threads; a 200k-node graph with 3.6M adjacency entries, 8 parts): KaMinPar
default 1.97 s / cut 1494, fast 0.71 s / 1549, terapart 2.18 s / 1490; KaHIP fast 2.3 s / 1517,
eco 1.6 s / 1436.
"""

from __future__ import annotations

import importlib
import logging
import os
import tempfile
from pathlib import Path
from types import ModuleType

import numpy as np

from gnnscale.errors import PartitionError

logger = logging.getLogger(__name__)

KAMINPAR_CONTEXTS = ("default", "fast", "eco", "strong", "terapart", "terapart-eco", "largek", "largek-fast")
"""KaMinPar presets offered by name (``kaminpar.context_names()`` has more; any of those works too).
``terapart*`` read the graph compressed (about 3-4x less memory for the graph, a little slower).
Seeds: the same seed gives the same parts, except that the compressed (terapart) presets of
KaMinPar 3.7.3 do not repeat their result in one process after a few calls (Cora, 4 parts: cuts
282 and 292 for one seed): use ``default`` or ``fast`` where the parts must be reproducible."""

KAHIP_MODES = {"fast": 0, "eco": 1, "strong": 2, "fastsocial": 3, "ecosocial": 4, "strongsocial": 5}
"""KaFFPa's preconfigurations (``kahip.kaffpa``'s mode argument); ``auto`` (the default) picks one
by :func:`choose_kahip_mode`."""

KAHIP_STRONG_MAX_ADJACENCY = 500_000
"""Largest symmetric graph (adjacency entries) on which ``mode=auto`` runs a ``strong`` preset: on
Squirrel (396,706 entries) strong took 9-78 s for 2-8 parts against METIS's 0.1-0.3 s; above this,
``auto`` runs the ``eco`` presets."""

KAHIP_SOCIAL_DEGREE_CV = 2.0
"""Degree spread (standard deviation / mean of the symmetric degrees) from which ``mode=auto``
runs the ``*social`` presets. Shipped graphs: Cora 1.34, CiteSeer 1.24, HumLoc 1.81, Squirrel 2.12.
Edge cuts, 2/4/8 parts (METIS | strong | strongsocial): Squirrel 7,664/29,942/57,094 |
5,651/31,227/54,497 | 6,151/24,518/54,485; Cora 177/308/534 | 165/265/434 | 162/266/434."""

_INSTALL = {"kaminpar": "pip install 'gnnscale[kaminpar]' (or pip install kaminpar)",
            "kahip": "pip install 'gnnscale[kahip]' (or pip install kahip)"}


def import_partitioner(name: str) -> ModuleType:
    """``kaminpar`` or ``kahip``, imported now; a PartitionError (one line) when absent."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise PartitionError(
            f"expected the {name} package for --method {name}, found it not installed ({exc}); "
            f"install it with {_INSTALL[name]}"
        ) from None


def single_node_weight(columns: np.ndarray | None, num_nodes: int) -> np.ndarray | None:
    """Balance constraints (METIS's weight columns) -> the one node weight KaMinPar/KaHIP balance.

    One column is used as it is (``nodes``: None, i.e. unit weights; ``train``: 1 per training node,
    0 elsewhere). Several are each scaled to a total of about N (``max(1, round(N / total))``) and
    summed, so each constraint counts alike; the partitioner then keeps that sum within the
    imbalance, not each constraint alone (``bench-partition`` reports each).

    Args:
        columns: int64 ``[N, C]`` from :func:`~gnnscale.partitioning.weights.build_vertex_weights`,
            or None (balance node counts).
        num_nodes: N.

    Returns:
        int64 ``[N]``, or None for unit weights.
    """
    if columns is None or columns.shape[1] == 0:
        return None
    totals = columns.sum(axis=0)
    used = np.flatnonzero(totals > 0)
    if used.size == 0:
        raise PartitionError(
            "expected a balance constraint with some weight, found every column zero (no training nodes?); "
            "pass --balance nodes"
        )
    if used.size == 1:
        w = np.ascontiguousarray(columns[:, used[0]])
        return None if bool((w == 1).all()) else w
    scale = np.maximum(1, np.rint(num_nodes / totals[used])).astype(np.int64)
    return columns[:, used] @ scale


def _check_csr(indptr: np.ndarray, indices: np.ndarray, num_parts: int) -> int:
    n = int(indptr.shape[0]) - 1
    if n < 0 or int(indptr[-1]) != indices.shape[0]:
        raise PartitionError(
            f"expected a CSR graph (indptr [N+1] ending at len(indices)), found indptr of {indptr.shape[0]} "
            f"entries ending at {int(indptr[-1]) if n >= 0 else None} and {indices.shape[0]} indices; "
            "pass the symmetric adjacency"
        )
    if not 1 <= num_parts <= max(n, 1):
        raise PartitionError(f"expected 1 <= num_parts <= {n}, found {num_parts}; choose fewer parts")
    return n


def write_parhip(
    path: str | os.PathLike,
    indptr: np.ndarray,
    indices: np.ndarray,
    *,
    node_weights: np.ndarray | None = None,
    edge_weights: np.ndarray | None = None,
) -> int:
    """Write a symmetric graph as a ParHIP binary file (KaMinPar's extended version).

    Layout: a header of three uint64 (version bits, N, adjacency entries), uint64 byte offsets
    ``[N+1]`` (from the start of the file), the neighbours (uint32 when N < 2^32, else uint64),
    then int32 node weights ``[N]`` and int32 edge weights ``[2M]`` when given. Node weights that
    total exactly N without all being 1 are written doubled: KaMinPar 3.7 takes a total of N for
    an unweighted graph and would drop them (``[1, 0, 2]`` read back as ``[1, 1, 1]``).

    Args:
        path: output file.
        indptr: int ``[N+1]``; indices: int ``[2M]`` (both directions of every edge, no self loops).
        node_weights: int ``[N]`` >= 0, or None.
        edge_weights: int ``[2M]`` >= 1 (the same weight in both directions), or None.

    Returns:
        The bytes written.
    """
    n = int(indptr.shape[0]) - 1
    m = int(indices.shape[0])
    vid32 = n < 2**32
    # version bits, LSB first: !edge weights, !node weights, 32-bit edge ids, 32-bit node ids,
    # 32-bit node weights, 32-bit edge weights
    version = (edge_weights is None) | (node_weights is None) << 1 | vid32 << 3 | 1 << 4 | 1 << 5
    vbytes = 4 if vid32 else 8
    for name, w, size in (("node", node_weights, n), ("edge", edge_weights, m)):
        if w is not None and (w.shape != (size,) or (size and (int(w.min()) < 0 or int(w.max()) >= 2**31))):
            raise PartitionError(
                f"expected {name} weights int [{size}] in [0, 2^31), found shape {list(w.shape)}; "
                "scale the weights down"
            )
    with open(path, "wb") as fh:
        np.array([version, n, m], dtype=np.uint64).tofile(fh)
        base = 24 + 8 * (n + 1)
        (np.asarray(indptr, dtype=np.uint64) * np.uint64(vbytes) + np.uint64(base)).tofile(fh)
        vdtype = np.uint32 if vid32 else np.uint64
        step = 1 << 24  # 64 MB of uint32 at a time: no full copy of a wide indices array
        for lo in range(0, m, step):  # chunks of the adjacency, not a loop over edges
            np.asarray(indices[lo : lo + step]).astype(vdtype, copy=False).tofile(fh)
        if node_weights is not None:
            w = np.asarray(node_weights).astype(np.int32, copy=False)
            if int(w.sum(dtype=np.int64)) == n and not bool((w == 1).all()):
                w = w * 2  # KaMinPar reads weights totalling N as unit weights; doubled, balance is the same
            w.tofile(fh)
        if edge_weights is not None:
            for lo in range(0, m, step):
                np.asarray(edge_weights[lo : lo + step]).astype(np.int32, copy=False).tofile(fh)
        return fh.tell()


def kaminpar_assign_file(
    path: str | os.PathLike,
    num_parts: int,
    *,
    imbalance: float = 0.03,
    seed: int = 0,
    context: str = "default",
    threads: int = 1,
    compress: bool | None = None,
) -> np.ndarray:
    """KaMinPar on a ParHIP file (:func:`write_parhip`).

    Args:
        path: the graph file.
        num_parts: P.
        imbalance: every part's weight at most ``(1 + imbalance) * ceil(total / P)``.
        seed: KaMinPar's global seed (``kaminpar.reseed``).
        context: a preset from :data:`KAMINPAR_CONTEXTS` (or ``kaminpar.context_names()``).
        threads: worker threads (KaMinPar's default is 1 too).
        compress: read the graph compressed (default: for the ``terapart`` presets).

    Returns:
        int64 numpy ``[N]``.
    """
    kaminpar = import_partitioner("kaminpar")
    names = kaminpar.context_names()
    if context not in names:
        raise PartitionError(
            f"expected a KaMinPar context from {sorted(names)}, found {context!r}; "
            "pass e.g. --method-opt context=fast"
        )
    threads = int(threads)
    if threads < 1:
        raise PartitionError(f"expected threads >= 1 for kaminpar, found {threads}; pass --method-opt threads=1")
    if compress is None:
        compress = context.startswith("terapart")
    graph = kaminpar.load_graph(str(path), kaminpar.GraphFileFormat.PARHIP, bool(compress))
    if num_parts == 1 or graph.n() == 0:
        return np.zeros(graph.n(), dtype=np.int64)
    kaminpar.reseed(int(seed))
    solver = kaminpar.KaMinPar(threads, kaminpar.context_by_name(context))
    out = solver.compute_partition(graph, int(num_parts), float(imbalance))
    return np.asarray(out, dtype=np.int64)  # the binding returns a list of Python ints


def kaminpar_assign(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    *,
    node_weights: np.ndarray | None = None,
    edge_weights: np.ndarray | None = None,
    imbalance: float = 0.03,
    seed: int = 0,
    context: str = "default",
    threads: int = 1,
    compress: bool | None = None,
    tmp_dir: str | os.PathLike | None = None,
) -> np.ndarray:
    """KaMinPar on a symmetric CSR graph: written to a ParHIP file in ``tmp_dir`` (deleted after).

    Args:
        indptr: int ``[N+1]``; indices: int ``[2M]`` (both directions, no self loops).
        node_weights: int ``[N]`` >= 0 (None: unit weights).
        edge_weights: int ``[2M]`` >= 1 (None: unit weights).
        tmp_dir: where the file goes (default: the system's temporary folder); it takes
            ``24 + 8 (N+1) + 4 * 2M`` bytes, plus the weights.
        others: as :func:`kaminpar_assign_file`.

    Returns:
        int64 numpy ``[N]``.
    """
    n = _check_csr(indptr, indices, num_parts)
    import_partitioner("kaminpar")  # before writing anything
    if num_parts == 1:
        return np.zeros(n, dtype=np.int64)
    with tempfile.TemporaryDirectory(prefix="gnnscale-kaminpar-", dir=tmp_dir) as tmp:
        path = Path(tmp) / "graph.parhip"
        size = write_parhip(path, indptr, indices, node_weights=node_weights, edge_weights=edge_weights)
        logger.debug("kaminpar: %d nodes, %d adjacency entries, %.1f MB graph file", n, indices.shape[0], size / 1e6)
        return kaminpar_assign_file(
            path, num_parts, imbalance=imbalance, seed=seed, context=context, threads=threads, compress=compress
        )


def kahip_assign(
    indptr: np.ndarray,
    indices: np.ndarray,
    num_parts: int,
    *,
    node_weights: np.ndarray | None = None,
    edge_weights: np.ndarray | None = None,
    imbalance: float = 0.03,
    seed: int = 0,
    mode: str = "auto",
) -> np.ndarray:
    """KaHIP's KaFFPa on a symmetric CSR graph (32-bit ids).

    Args:
        indptr, indices, node_weights, edge_weights, imbalance, seed: as :func:`kaminpar_assign`.
        mode: a preconfiguration from :data:`KAHIP_MODES` (``fast``, ``eco``, ``strong`` and their
            ``*social`` variants for skewed degrees), or ``auto``: :func:`choose_kahip_mode`.

    Returns:
        int64 numpy ``[N]``.
    """
    n = _check_csr(indptr, indices, num_parts)
    kahip = import_partitioner("kahip")
    if mode != "auto" and mode not in KAHIP_MODES:
        raise PartitionError(
            f"expected a KaHIP mode from {['auto', *KAHIP_MODES]}, found {mode!r}; pass e.g. --method-opt mode=fast"
        )
    if indices.shape[0] >= 2**31 or n >= 2**31:
        raise PartitionError(
            f"expected at most 2^31 - 1 adjacency entries for KaHIP (32-bit ids), found {indices.shape[0]}; "
            "use --method kaminpar"
        )
    if num_parts == 1 or n == 0:
        return np.zeros(n, dtype=np.int64)
    if mode == "auto":
        mode, why = choose_kahip_mode(indptr)
        logger.info("KaHIP mode %s (%s; --method-opt mode=NAME picks another)", mode, why)
    vw = np.ones(n, dtype=np.int32) if node_weights is None else np.asarray(node_weights).astype(np.int32)
    ew = np.ones(indices.shape[0], dtype=np.int32) if edge_weights is None else np.asarray(edge_weights).astype(np.int32)
    _, parts = kahip.kaffpa(vw, np.asarray(indptr).astype(np.int32, copy=False),
                            ew, np.asarray(indices).astype(np.int32, copy=False),
                            int(num_parts), float(imbalance), True, int(seed), KAHIP_MODES[mode])
    return np.asarray(parts, dtype=np.int64)


def choose_kahip_mode(indptr: np.ndarray) -> tuple[str, str]:
    """``mode=auto``'s preset for a symmetric CSR graph, and why, in words.

    ``strong`` up to :data:`KAHIP_STRONG_MAX_ADJACENCY` adjacency entries, else ``eco``; the
    ``*social`` variant where the degrees' coefficient of variation is at least
    :data:`KAHIP_SOCIAL_DEGREE_CV` (hubs: KaHIP's social presets coarsen by size-constrained label
    propagation, which handles them). KaHIP's ``fast``/``eco`` cut 2.3x METIS's on Squirrel (4 parts:
    70,616 / 68,604 against 29,942); ``strong``/``strongsocial`` are at or below METIS on Cora and
    CiteSeer (2-8 parts) and Squirrel.

    Args:
        indptr: int ``[N + 1]`` of the symmetric graph.

    Returns:
        ``(mode, reason)``.
    """
    indptr = np.asarray(indptr)
    deg = np.diff(indptr).astype(np.float64)
    mean = float(deg.mean()) if deg.size else 0.0
    cv = float(deg.std()) / mean if mean > 0 else 0.0
    entries = int(indptr[-1]) if indptr.size else 0
    social = cv >= KAHIP_SOCIAL_DEGREE_CV
    strong = entries <= KAHIP_STRONG_MAX_ADJACENCY
    mode = ("strong" if strong else "eco") + ("social" if social else "")
    why = (f"{entries:,} adjacency entries {'<=' if strong else '>'} {KAHIP_STRONG_MAX_ADJACENCY:,}, "
           f"degree spread {cv:.2f} {'>=' if social else '<'} {KAHIP_SOCIAL_DEGREE_CV}")
    return mode, why


def kaminpar_csr_bytes(num_nodes: int, adjacency: int, weighted: bool = False) -> int:
    """Bytes of the ParHIP file :func:`kaminpar_assign` writes (an estimate's input)."""
    return 24 + 8 * (num_nodes + 1) + 4 * adjacency + (4 * (num_nodes + adjacency) if weighted else 0)

