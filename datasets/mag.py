"""A generated typed graph shaped like ogbn-mag: papers, authors, institutions, fields of study.

Name: ``synthetic-mag`` (options as URL query, e.g. ``synthetic-mag?num_nodes=2000000&seed=1``).

Model (vectorized numpy, torch for the features and the big sorts; one ``np.random.default_rng(seed)``):

* **Node types** (in id order) ``paper``, ``author``, ``institution``, ``field_of_study`` in
  ogbn-mag's proportions (736,389 / 1,134,649 / 8,740 / 59,965 of 1,939,743): ``num_nodes``
  nodes in all, each type at least 1 (paper takes the rounding remainder).
* **Relations** ``('author', 'writes', 'paper')``, ``('paper', 'cites', 'paper')``,
  ``('paper', 'has_topic', 'field_of_study')``, ``('author', 'affiliated_with', 'institution')``
  with ogbn-mag's edges per node (7,145,660 / 5,416,271 / 7,505,078 / 1,043,998 at full size,
  scaled by ``num_nodes / 1,939,743``; a relation is capped at a quarter of its possible pairs).
  With ``undirected=true`` (default) ``rev_writes``, ``rev_cites``, ``rev_has_topic`` and
  ``rev_affiliated_with`` are added (what :func:`gnnscale.datasets.typed.add_reverse` adds).
* **Classes.** ``num_classes`` planted communities: every paper has a class (its label), every
  author, institution and field of study a community drawn at random.
* **Edges.** Every node has a Chung-Lu weight (Pareto tail ``power_law_exponent``, capped like
  :mod:`.synthetic`). A relation's sources are a multinomial draw proportional to the source
  weights (power-law out-degrees); each edge's target is, with probability ``homophily``,
  drawn in the source's community, else anywhere, proportionally to the target weights
  (power-law in-degrees). Duplicates (and citation self loops) are removed and edges redrawn
  until the relation has its count.
* **Features.** Only papers: ``x = mu[y] + feature_noise * N(0, I)`` float32 [N_paper, F],
  centroids ``mu_c ~ N(0, I/F)``. Labels are learnable from the features, the citations, the
  topics and the authors (all correlate with the class).
* **Split** of the papers: ogbn-mag's time-split proportions (85.5% train, 8.8% val, 5.7% test,
  a fake year per paper: < 2018, 2018, 2019).

Cost (measured on two shared cores): the full ogbn-mag size (1.94M nodes, 21.1M edges, 42.2M
with reverses, 128 paper features) in about 6 s of CPU time (13 s wall while other jobs kept
the machine loaded), 2.2 GB peak; 1M nodes in about 4 s of CPU. The compiled edge kernel
(numba, cached) costs about 2 s once, on the first call ever.
"""

from __future__ import annotations

import logging
import math
import time

import numba
import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.datasets._options import Option
from gnnscale.datasets.synthetic import _class_labels, _decode_keys, _degree_weights, _drop_excess
from gnnscale.datasets.typed import make_typed_data
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

MAG_NODES = {"paper": 736_389, "author": 1_134_649, "institution": 8_740, "field_of_study": 59_965}
MAG_TOTAL = sum(MAG_NODES.values())  # 1,939,743
MAG_EDGES = {
    ("author", "writes", "paper"): 7_145_660,
    ("paper", "cites", "paper"): 5_416_271,
    ("paper", "has_topic", "field_of_study"): 7_505_078,
    ("author", "affiliated_with", "institution"): 1_043_998,
}
YEAR_FRACTIONS = (0.855, 0.088)  # ogbn-mag: 629,571 train (< 2018), 64,879 val (2018), 41,939 test (2019)
MIN_NODES = 1000
_MAX_ROUNDS = 8

OPTIONS: dict[str, Option] = {
    "num_nodes": Option(int, 100_000, f"total nodes of the four types (ogbn-mag: {MAG_TOTAL})"),
    "num_features": Option(int, 128, "paper feature dimension F (only papers have features)"),
    "num_classes": Option(int, 16, "paper classes = planted communities"),
    "homophily": Option(float, 0.8, "probability that an edge's target is in its source's community"),
    "feature_noise": Option(float, 1.0, "std of the paper feature noise (centroid norm ~1)"),
    "power_law_exponent": Option(float, 2.5, "degree power-law exponent (> 2)"),
    "undirected": Option(bool, True, "add the reverse relations rev_writes, rev_cites, rev_has_topic, rev_affiliated_with"),
    "seed": Option(int, 0, "random seed; equal seeds give equal graphs"),
}
HELP = (
    "synthetic-mag\n"
    "    Generated typed graph shaped like ogbn-mag: paper/author/institution/field_of_study in\n"
    "    ogbn-mag's proportions, relations writes/cites/has_topic/affiliated_with with its degrees\n"
    "    (power-law), planted communities, features on papers only, time-split proportions; the\n"
    "    full size (num_nodes=1939743) in seconds. Options:"
)


def type_counts(num_nodes: int) -> dict[str, int]:
    """Nodes per type for ``num_nodes`` in all: ogbn-mag's proportions, each >= 1, paper takes the remainder."""
    counts = {t: max(1, int(round(c * num_nodes / MAG_TOTAL))) for t, c in MAG_NODES.items()}
    counts["paper"] += num_nodes - sum(counts.values())
    return counts


def edge_counts(counts: dict[str, int]) -> dict[tuple[str, str, str], int]:
    """Edges per relation: ogbn-mag's, scaled by the node count, at most a quarter of the possible pairs."""
    scale = sum(counts.values()) / MAG_TOTAL
    out = {}
    for (s, r, d), e in MAG_EDGES.items():
        pairs = counts[s] * counts[d] - (counts[s] if s == d else 0)
        out[s, r, d] = min(int(round(e * scale)), pairs // 4)
    return out


def _check(num_nodes: int, num_features: int, num_classes: int, homophily: float, feature_noise: float,
           power_law_exponent: float) -> None:
    problems = []
    if num_nodes < MIN_NODES:
        problems.append(f"num_nodes >= {MIN_NODES} (found {num_nodes})")
    if num_features < 1:
        problems.append(f"num_features >= 1 (found {num_features})")
    if num_classes < 2 or num_classes > max(2, num_nodes * MAG_NODES["paper"] // MAG_TOTAL // 10):
        problems.append(f"2 <= num_classes <= papers / 10 (found {num_classes})")
    if not 0.0 <= homophily <= 1.0:
        problems.append(f"0 <= homophily <= 1 (found {homophily})")
    if feature_noise < 0:
        problems.append(f"feature_noise >= 0 (found {feature_noise})")
    if not power_law_exponent > 2.0:
        problems.append(f"power_law_exponent > 2 (found {power_law_exponent})")
    if problems:
        raise DatasetError("expected synthetic-mag options with " + "; ".join(problems) + "; change those options")


@numba.njit(cache=True)
def _draw_keys(counts, c_src, u, start, length, pool, h, n_dst, same):  # pragma: no cover (compiled)
    """Sorted distinct keys ``src * n_dst + dst`` of ``counts[src]`` candidate edges per source.

    Edge j of source i (in order) takes the uniform ``u[j]``: ``u < h`` picks the stub at
    ``u / h`` of the source's community's stubs (the whole pool when the community has none),
    else the stub at ``(u - h) / (1 - h)`` of the whole pool. Self loops are skipped when
    ``same``. Sources are visited in order and each source's keys sorted and deduplicated in
    place, so the output is sorted without a global sort.
    """
    out = np.empty(u.shape[0], dtype=np.int64)
    inv_h = 1.0 / h if h > 0.0 else 0.0
    inv_rest = 1.0 / (1.0 - h) if h < 1.0 else 0.0
    size = pool.shape[0]
    m = 0
    j = 0
    for i in range(counts.shape[0]):
        k = counts[i]
        if k == 0:
            continue
        c = c_src[i]
        lo = start[c]
        ln = length[c]
        first = m
        for _ in range(k):
            x = u[j]
            j += 1
            if x < h and ln > 0:
                p = lo + np.int64(x * inv_h * ln)
                if p >= lo + ln:
                    p = lo + ln - 1
            else:
                f = x * inv_h if x < h else (x - h) * inv_rest
                p = np.int64(f * size)
                if p >= size:
                    p = size - 1
            d = pool[p]
            if same and d == i:
                continue
            out[m] = i * n_dst + d
            m += 1
        if m - first > 1:
            seg = out[first:m]
            seg.sort()
            w = first + 1
            for t in range(first + 1, m):
                if out[t] != out[w - 1]:
                    out[w] = out[t]
                    w += 1
            m = w
    return out[:m]


@numba.njit(cache=True)
def _merge_unique(a, b):  # pragma: no cover (compiled)
    """Sorted distinct values of two sorted distinct int64 arrays (one linear merge)."""
    out = np.empty(a.shape[0] + b.shape[0], dtype=np.int64)
    i = j = m = 0
    while i < a.shape[0] or j < b.shape[0]:
        if j >= b.shape[0] or (i < a.shape[0] and a[i] < b[j]):
            v = a[i]
            i += 1
        elif i >= a.shape[0] or b[j] < a[i]:
            v = b[j]
            j += 1
        else:
            v = a[i]
            i += 1
            j += 1
        out[m] = v
        m += 1
    return out[:m]


class _RelationSampler:
    """Draws distinct edges ``src -> dst`` of one relation as sorted int64 keys ``src * N_dst + dst``.

    Sources: a multinomial draw proportional to ``w_src`` (power-law out-degrees). Targets: a
    pool of ``pool_size`` target stubs (a multinomial draw proportional to ``w_dst``) grouped by
    community; an edge picks, with probability ``homophily``, a uniform stub of its source's
    community, else a uniform stub of the whole pool (:func:`_draw_keys`, one compiled pass).
    """

    def __init__(self, rng: np.random.Generator, c_src: np.ndarray, w_src: np.ndarray, c_dst: np.ndarray,
                 w_dst: np.ndarray, num_classes: int, homophily: float, pool_size: int, same_type: bool):
        self.rng, self.h, self.same = rng, float(homophily), bool(same_type)
        self.c_src = np.ascontiguousarray(c_src, dtype=np.int64)
        self.p_src = w_src / w_src.sum()
        self.n_dst = c_dst.shape[0]
        stubs = rng.multinomial(pool_size, w_dst / w_dst.sum())
        order = np.argsort(c_dst, kind="stable")
        self.pool = np.repeat(order.astype(np.int64, copy=False), stubs[order])  # target ids grouped by community
        self.length = np.bincount(c_dst, weights=stubs, minlength=num_classes).astype(np.int64)
        self.start = np.zeros(num_classes, dtype=np.int64)
        np.cumsum(self.length[:-1], out=self.start[1:])

    def draw(self, k: int) -> np.ndarray:
        """Sorted distinct int64 keys of k candidate edges (duplicates and self loops removed: <= k)."""
        counts = self.rng.multinomial(k, self.p_src)
        u = self.rng.random(k)
        return _draw_keys(counts, self.c_src, u, self.start, self.length, self.pool, self.h, self.n_dst, self.same)


def _unique_keys(sampler: _RelationSampler, rng: np.random.Generator, target: int, what: str) -> np.ndarray:
    """``target`` distinct sorted keys (fewer, with a warning, if the relation is too dense to fill)."""
    keys = np.empty(0, dtype=np.int64)
    want = int(math.ceil(target * 1.03)) + 16
    for _ in range(_MAX_ROUNDS):
        fresh_draw = sampler.draw(want)
        merged = _merge_unique(keys, fresh_draw)
        fresh = merged.size - keys.size
        keys = merged
        if keys.size >= target:
            break
        rate = max(fresh / max(want, 1), 0.05)
        want = int(math.ceil((target - keys.size) / rate * 1.1)) + 16
    else:
        logger.warning("synthetic-mag: %s has %d distinct edges of the %d wanted (too dense at this size)",
                       what, keys.size, target)
        return keys
    return _drop_excess(rng, keys, target)


def generate_synthetic_mag(
    num_nodes: int = 100_000,
    num_features: int = 128,
    num_classes: int = 16,
    homophily: float = 0.8,
    feature_noise: float = 1.0,
    power_law_exponent: float = 2.5,
    undirected: bool = True,
    seed: int = 0,
    name: str = "synthetic-mag",
) -> Data:
    """Generate an ogbn-mag-shaped typed graph (see the module docstring for the model).

    Returns:
        The typed ``Data`` of docs/typed_graphs.md section 1: ``node_types`` ``['paper', 'author',
        'institution', 'field_of_study']`` (:func:`type_counts`), ``edge_types`` writes, cites,
        has_topic, affiliated_with (:func:`edge_counts` edges each), then their ``rev_*`` with
        ``undirected``; ``x_dict = {'paper': float32 [N_paper, num_features]}``; ``y`` int64 in
        ``0..num_classes-1`` on papers, -1 elsewhere; target type ``paper``. Equal arguments give
        equal tensors.
    """
    _check(num_nodes, num_features, num_classes, homophily, feature_noise, power_law_exponent)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    counts = type_counts(num_nodes)
    n_edges = edge_counts(counts)
    degree = {t: 0.0 for t in counts}  # average total degree per type, for the weight cap
    for (s, _, d), e in n_edges.items():
        degree[s] += e / counts[s]
        degree[d] += e / counts[d]
    community = {"paper": _class_labels(rng, counts["paper"], num_classes)}
    for t in ("author", "institution", "field_of_study"):
        community[t] = rng.integers(0, num_classes, size=counts[t])
    weight = {t: _degree_weights(rng, counts[t], degree[t], power_law_exponent) for t in counts}
    edges = []
    for (s, r, d), e in n_edges.items():  # loop over the four relations
        sampler = _RelationSampler(rng, community[s], weight[s], community[d], weight[d], num_classes, homophily,
                                   pool_size=max(e, 4 * counts[d]), same_type=s == d)
        keys = _unique_keys(sampler, rng, e, r) if e else np.empty(0, dtype=np.int64)
        del sampler
        ei = _decode_keys(keys, counts[d])
        edges.append(((s, r, d), ei))
        del keys, ei
    if undirected:  # the reverses (what add_reverse would add), written once by make_typed_data
        edges += [((d, "rev_" + r, s), ei[::-1]) for (s, r, d), ei in list(edges)]
    y = community["paper"]
    gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
    mu = torch.randn((num_classes, num_features), generator=gen) / math.sqrt(num_features)
    x = torch.randn((counts["paper"], num_features), generator=gen)
    x.mul_(feature_noise)
    y_t = torch.from_numpy(y)
    step = max(1, (1 << 24) // num_features)
    for a in range(0, counts["paper"], step):  # add the centroids in row blocks (bounded temporary)
        x[a:a + step] += mu[y_t[a:a + step]]
    u = rng.random(counts["paper"])  # the fake year's quantile: < 2018 train, 2018 val, 2019 test
    train = u < YEAR_FRACTIONS[0]
    val = (u >= YEAR_FRACTIONS[0]) & (u < YEAR_FRACTIONS[0] + YEAR_FRACTIONS[1])
    data = make_typed_data(
        num_nodes=counts, edges=edges, target_type="paper", y=y, x_dict={"paper": x}, train=train, val=val,
        test=~(train | val), name=name, num_classes=num_classes, deduplicate=False, where="synthetic-mag",
    )
    del edges, x
    logger.info(
        "generated %s: %s nodes, %s edges (%d relations), %d features, %d classes in %.2f s",
        name, counts, data.edge_index.shape[1], len(data.edge_types), num_features, num_classes,
        time.perf_counter() - t0,
    )
    return data


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``synthetic-mag`` (``arg`` is unused; ``root`` is ignored)."""
    return generate_synthetic_mag(**options, name=name)
