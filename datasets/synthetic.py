"""Synthetic node-classification graphs: planted communities with power-law degrees.

Name: ``synthetic`` (options as URL query, e.g. ``synthetic?num_nodes=1000000&avg_degree=20``).

Model (vectorized numpy, torch for the big sorts; one ``np.random.default_rng(seed)`` stream):

* **Classes.** ``num_classes`` communities, one per class, of mildly unequal sizes
  (proportions ``exp(U(-0.3, 0.3))``, normalized), randomly placed over the node ids.
* **Degrees.** Every node gets a Chung-Lu weight ``w`` drawn from a Pareto law with tail
  exponent ``power_law_exponent`` (``P(w > t) = t^-(exponent-1)``, ``w >= 1``), capped at the
  structural cutoff ``sqrt(N * avg_degree)`` in expected degree; expected degree is
  proportional to ``w``.
* **Edges.** ``N * avg_degree / 2`` undirected edges. Each edge draws its source with
  probability proportional to ``w``; with probability ``homophily`` its target is drawn
  (again proportional to ``w``) inside the source's community, else inside the other
  communities, so the edge homophily (fraction of edges whose endpoints share a class)
  is close to ``homophily`` at any number of classes. Self loops and duplicates are
  removed and edges redrawn until exactly ``round(N * avg_degree / 2)`` unique undirected
  edges remain; both directions are stored, so the average degree is ``avg_degree``.
* **Features.** ``x = mu[y] + feature_noise * eps`` (float32), class centroids
  ``mu_c ~ N(0, I/F)`` (norm about 1), ``eps ~ N(0, I)``. Features alone give a weak classifier;
  averaging over same-class neighbours removes most of the noise, so a 2-layer
  GraphSAGE clearly beats an MLP: on the defaults (full batch, hidden 64, 100 epochs)
  GraphSAGE reaches about 0.95 test accuracy and an MLP about 0.48 (chance 0.125).
* **Split.** Random ``train_frac`` / ``val_frac`` / rest (test) over all nodes.

Cost (measured on two cores): 1,000,000 nodes at average degree 20 in about 8 s; the
ogbn-products scale (2,449,029 nodes, degree 25.3 = 62M directed edges, 100 features, 47
classes) in about 27 s with about 3 GB peak memory (roughly ``30 * N * avg_degree`` bytes for
the edges plus ``4 * N * F`` for the features).
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.datasets._data import make_data
from gnnscale.datasets._graph import unique_int64
from gnnscale.datasets._options import Option
from gnnscale.datasets._splits import random_split
from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

DEFAULT_FEATURE_NOISE = 0.75
DEFAULT_POWER_LAW_EXPONENT = 2.5
_CHUNK = 1 << 22  # edges drawn per vectorized batch (bounds temporary memory)
_MAX_ROUNDS = 12

OPTIONS: dict[str, Option] = {
    "num_nodes": Option(int, 20000, "number of nodes N"),
    "avg_degree": Option(float, 10.0, "average (directed) degree, edges = N * avg_degree"),
    "num_classes": Option(int, 8, "number of classes = planted communities"),
    "num_features": Option(int, 64, "feature dimension F"),
    "homophily": Option(float, 0.8, "expected fraction of edges inside a community"),
    "train_frac": Option(float, 0.3, "fraction of nodes in the train mask"),
    "val_frac": Option(float, 0.2, "fraction of nodes in the val mask (test = the rest)"),
    "feature_noise": Option(float, DEFAULT_FEATURE_NOISE, "std of the feature noise (centroid norm ~1)"),
    "power_law_exponent": Option(float, DEFAULT_POWER_LAW_EXPONENT, "degree power-law exponent (> 2)"),
    "seed": Option(int, 0, "random seed; equal seeds give equal graphs"),
}
HELP = (
    "synthetic\n"
    "    Planted-community graph with power-law degrees, class-correlated Gaussian features and a\n"
    "    random split; fully vectorized (1M nodes x degree 20 in seconds). Options:"
)


def _check(num_nodes: int, avg_degree: float, num_classes: int, num_features: int, homophily: float,
           feature_noise: float, power_law_exponent: float) -> None:
    problems = []
    if num_nodes < 2:
        problems.append(f"num_nodes >= 2 (found {num_nodes})")
    if num_classes < 2 or num_classes > num_nodes:
        problems.append(f"2 <= num_classes <= num_nodes (found {num_classes})")
    if num_features < 1:
        problems.append(f"num_features >= 1 (found {num_features})")
    if not 0.0 <= homophily <= 1.0:
        problems.append(f"0 <= homophily <= 1 (found {homophily})")
    if not (avg_degree >= 0 and avg_degree <= 0.5 * (num_nodes - 1)):
        problems.append(f"0 <= avg_degree <= (num_nodes - 1) / 2 (found {avg_degree})")
    if feature_noise < 0:
        problems.append(f"feature_noise >= 0 (found {feature_noise})")
    if not power_law_exponent > 2.0:
        problems.append(f"power_law_exponent > 2 (found {power_law_exponent})")
    if problems:
        raise DatasetError(
            "expected synthetic options with " + "; ".join(problems) + "; change those options"
        )


def _class_labels(rng: np.random.Generator, n: int, c: int) -> np.ndarray:
    """int64 [n] labels: community sizes proportional to exp(U(-0.3, 0.3)), each >= 1."""
    p = np.exp(rng.uniform(-0.3, 0.3, size=c))
    sizes = np.maximum(np.floor(p / p.sum() * n).astype(np.int64), 1)
    sizes[np.argmax(sizes)] += n - sizes.sum()
    return rng.permutation(np.repeat(np.arange(c, dtype=np.int64), sizes))


def _degree_weights(rng: np.random.Generator, n: int, avg_degree: float, exponent: float) -> np.ndarray:
    """float64 [n] Chung-Lu weights: Pareto(exponent - 1) tail, capped at the structural cutoff."""
    w = (1.0 - rng.random(n)) ** (-1.0 / (exponent - 1.0))
    max_degree = max(math.sqrt(n * max(avg_degree, 1.0)), 1.0)
    for _ in range(3):  # capping lowers the mean, which raises the cap in degree units: iterate
        cap = max_degree * w.mean() / max(avg_degree, 1e-12)
        np.minimum(w, cap, out=w)
    return w


class _EdgeSampler:
    """Draws undirected candidate edges as int64 keys ``min(u,v) * N + max(u,v)``."""

    def __init__(self, rng: np.random.Generator, y: np.ndarray, w: np.ndarray, homophily: float):
        self.rng, self.h, self.n = rng, homophily, y.shape[0]
        self.order = np.argsort(y, kind="stable")  # node ids grouped by community
        self.y_sorted = y[self.order]
        self.cum = np.cumsum(w[self.order])  # inclusive prefix sums of the weights, float64 [N]
        bounds = np.searchsorted(self.y_sorted, np.arange(int(y.max()) + 2))
        self.first = bounds[:-1]  # first position of each community in the grouped order
        self.last = bounds[1:] - 1
        cum0 = np.concatenate([[0.0], self.cum])
        self.c_lo = cum0[self.first]  # weight before the community
        self.c_w = cum0[bounds[1:]] - self.c_lo  # weight of the community
        self.total = float(self.cum[-1])
        # Guide table for inverse-CDF lookup: guide[j] = first position whose prefix sum exceeds
        # j * total / K. Every weight is >= 1 >= total / (K * mean weight), so a bucket holds only a
        # few positions and a lookup is one gather plus a few vectorized forward steps
        # (about 3x faster than np.searchsorted over the whole prefix array).
        self.k = 2 * self.n
        self.scale = self.k / self.total
        self.guide = np.searchsorted(self.cum, np.arange(self.k) / self.scale, side="right")
        self.cum_ext = np.append(self.cum, np.inf)

    def _positions(self, u: np.ndarray) -> np.ndarray:
        """Grouped-order positions p with ``cum[p-1] <= u < cum[p]`` (int64, same shape as ``u``)."""
        b = (u * self.scale).astype(np.int64)
        np.clip(b, 0, self.k - 1, out=b)
        pos = self.guide[b]
        active = np.flatnonzero(self.cum_ext[pos] <= u)
        while active.size:
            pos[active] += 1
            active = active[self.cum_ext[pos[active]] <= u[active]]
        np.minimum(pos, self.n - 1, out=pos)
        return pos

    def draw(self, k: int) -> np.ndarray:
        """int64 [<= k] keys of k candidate edges, self loops removed (duplicates kept)."""
        rng = self.rng
        src = self._positions(rng.random(k) * self.total)
        c = self.y_sorted[src]
        intra = rng.random(k) < self.h
        t = rng.random(k)
        lo, cw = self.c_lo[c], self.c_w[c]
        # Intra: uniform in the community's weight interval. Cross: uniform in the weight of all
        # other communities (skip over the own interval).
        t_cross = t * (self.total - cw)
        t_cross += (t_cross >= lo) * cw
        t = np.where(intra, lo + t * cw, t_cross)
        dst = self._positions(t)
        # Guard against rounding at interval ends: intra targets stay in the community.
        dst = np.where(intra, np.clip(dst, self.first[c], self.last[c]), dst)
        a, b = self.order[src], self.order[dst]
        keep = a != b
        a, b = a[keep], b[keep]
        lo_id = np.minimum(a, b)
        hi_id = np.maximum(a, b)
        lo_id *= self.n
        lo_id += hi_id
        return lo_id


def _unique_edges(sampler: _EdgeSampler, rng: np.random.Generator, target: int) -> np.ndarray:
    """Exactly ``target`` distinct undirected edge keys (sorted int64), drawn from ``sampler``."""
    keys = np.empty(0, dtype=np.int64)
    want = int(math.ceil(target * 1.02)) + 16
    for _ in range(_MAX_ROUNDS):
        parts = [keys]
        remaining = want
        while remaining > 0:
            k = min(_CHUNK, remaining)
            parts.append(sampler.draw(k))
            remaining -= k
        drawn = sum(p.size for p in parts) - keys.size
        merged = unique_int64(np.concatenate(parts))
        del parts
        new = merged.size - keys.size
        keys = merged
        if keys.size >= target:
            break
        # Next round: the missing edges, scaled by the observed yield of fresh edges.
        yield_rate = max(new / max(drawn, 1), 0.02)
        want = int(math.ceil((target - keys.size) / yield_rate * 1.05)) + 16
    else:
        raise DatasetError(
            f"expected to place {target} distinct edges, found only {keys.size} after {_MAX_ROUNDS} "
            "rounds (the graph is too dense for its size); lower avg_degree or raise num_nodes"
        )
    return _drop_excess(rng, keys, target)


def _drop_excess(rng: np.random.Generator, keys: np.ndarray, target: int) -> np.ndarray:
    """``keys`` (sorted, at least ``target``) less a uniform random choice of the excess, order kept."""
    excess = keys.size - target
    if excess:
        drop = rng.choice(keys.size, size=excess, replace=False)
        keep = np.ones(keys.size, dtype=bool)
        keep[drop] = False
        keys = keys[keep]
    return keys


def _decode_keys(keys: np.ndarray, n: int) -> np.ndarray:
    """Edge keys ``a * n + b`` [M] -> int64 [2, M] rows (a, b), without a temporary per row."""
    out = np.empty((2, keys.size), dtype=np.int64)
    np.floor_divide(keys, n, out=out[0])
    np.multiply(out[0], n, out=out[1])
    np.subtract(keys, out[1], out=out[1])
    return out


def _symmetric_edge_index(keys: np.ndarray, n: int) -> torch.Tensor:
    """Undirected keys [M] -> int64 [2, 2M] with both directions, sorted by (source, target)."""
    m = keys.size
    lo = keys // n
    directed = np.empty(2 * m, dtype=np.int64)
    hi = keys - lo * n
    np.multiply(lo, n, out=directed[:m])
    directed[:m] += hi
    np.multiply(hi, n, out=directed[m:])
    directed[m:] += lo
    del lo, hi
    directed = torch.sort(torch.from_numpy(directed)).values.numpy()
    return torch.from_numpy(_decode_keys(directed, n))


def _features(rng: np.random.Generator, y: np.ndarray, c: int, f: int, noise: float) -> np.ndarray:
    """float32 [N, F] = mu[y] + noise * N(0, 1), mu ~ N(0, 1/F)."""
    mu = rng.standard_normal((c, f), dtype=np.float32) / np.float32(math.sqrt(f))
    x = rng.standard_normal((y.shape[0], f), dtype=np.float32)
    x *= np.float32(noise)
    step = max(1, (1 << 24) // f)  # add centroids in row blocks to bound the temporary
    for start in range(0, y.shape[0], step):
        x[start : start + step] += mu[y[start : start + step]]
    return x


def generate_synthetic(
    num_nodes: int = 20000,
    avg_degree: float = 10.0,
    num_classes: int = 8,
    num_features: int = 64,
    homophily: float = 0.8,
    train_frac: float = 0.3,
    val_frac: float = 0.2,
    feature_noise: float = DEFAULT_FEATURE_NOISE,
    power_law_exponent: float = DEFAULT_POWER_LAW_EXPONENT,
    seed: int = 0,
    name: str = "synthetic",
) -> Data:
    """Generate a planted-community graph (see the module docstring for the model).

    Returns:
        ``Data`` with ``x`` float32 [N, F], ``y`` int64 [N] in ``0..num_classes-1``,
        ``edge_index`` int64 [2, E] (symmetric, sorted, no duplicates or self loops,
        ``E = 2 * round(N * avg_degree / 2)``), disjoint bool masks [N], ``num_classes``, ``name``.
        Equal arguments give equal tensors.
    """
    _check(num_nodes, avg_degree, num_classes, num_features, homophily, feature_noise, power_law_exponent)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    y = _class_labels(rng, num_nodes, num_classes)
    w = _degree_weights(rng, num_nodes, avg_degree, power_law_exponent)
    target = int(round(num_nodes * avg_degree / 2))
    sampler = _EdgeSampler(rng, y, w, homophily)
    del w
    keys = _unique_edges(sampler, rng, target) if target else np.empty(0, dtype=np.int64)
    del sampler
    edge_index = _symmetric_edge_index(keys, num_nodes)
    del keys
    x = _features(rng, y, num_classes, num_features, feature_noise)
    train, val, test = random_split(y, train_frac, val_frac, int(rng.integers(2**62)))
    data = make_data(
        x=x, y=y, edge_index=edge_index, train_mask=train, val_mask=val, test_mask=test,
        name=name, num_classes=num_classes, where="synthetic",
    )
    logger.info(
        "generated %s: %d nodes, %d edges, %d features, %d classes in %.2f s",
        name, num_nodes, edge_index.shape[1], num_features, num_classes, time.perf_counter() - t0,
    )
    return data


def load(arg: str, root: str | None, options: dict, name: str) -> Data:
    """Load ``synthetic`` (``arg`` is unused; ``root`` is ignored)."""
    return generate_synthetic(**options, name=name)
