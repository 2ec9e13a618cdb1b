"""Train/val/test splits as boolean node masks.

Every function returns three disjoint bool arrays [N] (numpy) and never puts an
unlabelled node (label < 0) in a mask. Randomness comes from
``np.random.default_rng(seed)`` so a seed always gives the same split.
"""

from __future__ import annotations

import logging

import numpy as np

from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)

Masks = tuple[np.ndarray, np.ndarray, np.ndarray]


def random_split(y: np.ndarray, train_frac: float, val_frac: float, seed: int) -> Masks:
    """Random split of the labelled nodes (``y >= 0``) by fractions; the rest is test.

    Args:
        y: int array [N], -1 for unlabelled nodes.
        train_frac, val_frac: fractions of the labelled nodes, ``train_frac + val_frac <= 1``.
        seed: seed of the permutation.

    Returns:
        ``(train, val, test)`` bool arrays [N]; sizes ``round(L*train_frac)``,
        ``round(L*val_frac)`` and the remainder, L = number of labelled nodes.
    """
    if not (0.0 <= train_frac <= 1.0 and 0.0 <= val_frac <= 1.0 and train_frac + val_frac <= 1.0 + 1e-9):
        raise DatasetError(
            "expected train_frac and val_frac in [0, 1] with train_frac + val_frac <= 1, found "
            f"train_frac={train_frac}, val_frac={val_frac}; lower them"
        )
    labelled = np.flatnonzero(y >= 0)
    perm = np.random.default_rng(seed).permutation(labelled)
    n_train = int(round(labelled.size * train_frac))
    n_val = min(int(round(labelled.size * val_frac)), labelled.size - n_train)
    return _masks(y.shape[0], perm[:n_train], perm[n_train : n_train + n_val], perm[n_train + n_val :])


def per_class_split(y: np.ndarray, train_per_class: int, val_per_class: int, seed: int) -> Masks:
    """Shchur et al. (2018) split: per class, ``train_per_class`` random train nodes,
    ``val_per_class`` random val nodes, every other labelled node test.

    Args:
        y: int array [N], -1 for unlabelled nodes.
        train_per_class, val_per_class: counts per class (a class with fewer nodes
            gives all of them to train first, then val; a warning is logged).
        seed: seed of the random order within each class.

    Returns:
        ``(train, val, test)`` bool arrays [N].
    """
    if train_per_class < 0 or val_per_class < 0:
        raise DatasetError(
            f"expected non-negative train_per_class and val_per_class, found {train_per_class} "
            f"and {val_per_class}; pass counts >= 0"
        )
    n = y.shape[0]
    labelled = np.flatnonzero(y >= 0)
    noise = np.random.default_rng(seed).random(labelled.size)
    # Sort the labelled nodes by (class, random key): each class becomes one run in random order.
    order = labelled[np.lexsort((noise, y[labelled]))]
    classes, starts, counts = np.unique(y[order], return_index=True, return_counts=True)
    rank = np.arange(order.size) - np.repeat(starts, counts)
    small = classes[counts < train_per_class + val_per_class]
    if small.size:
        logger.warning(
            "classes %s have fewer than %d labelled nodes; their test sets are empty",
            small.tolist(),
            train_per_class + val_per_class,
        )
    train = order[rank < train_per_class]
    val = order[(rank >= train_per_class) & (rank < train_per_class + val_per_class)]
    test = order[rank >= train_per_class + val_per_class]
    return _masks(n, train, val, test)


def _masks(n: int, train: np.ndarray, val: np.ndarray, test: np.ndarray) -> Masks:
    out = []
    for idx in (train, val, test):
        m = np.zeros(n, dtype=bool)
        m[idx] = True
        out.append(m)
    return out[0], out[1], out[2]


def masks_from_indices(n: int, train: np.ndarray, val: np.ndarray, test: np.ndarray, where: str) -> Masks:
    """Bool masks [N] from index arrays, checking that every index is in ``[0, n)``."""
    for label, idx in (("train", train), ("val", val), ("test", test)):
        idx = np.asarray(idx)
        if idx.size and (not np.issubdtype(idx.dtype, np.integer)):
            raise DatasetError(
                f"expected integer {label} indices in {where}, found dtype {idx.dtype}; "
                "store node ids as integers"
            )
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= n):
            raise DatasetError(
                f"expected {label} indices in [0, {n}) in {where}, found ids from {int(idx.min())} "
                f"to {int(idx.max())}; fix the split file so it indexes the {n} nodes"
            )
    return _masks(n, np.asarray(train, dtype=np.int64), np.asarray(val, dtype=np.int64), np.asarray(test, dtype=np.int64))
