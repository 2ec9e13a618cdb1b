"""Assembling the ``Data`` object every loader returns, and checking the dataset contract.

Contract (ARCHITECTURE.md): ``x`` float32 [N, F], ``y`` int64 [N] (-1 = unlabelled,
never in a mask), ``edge_index`` int64 [2, E] without duplicates, bool
``train_mask``/``val_mask``/``test_mask`` [N], python ``num_classes`` and ``name``.
"""

from __future__ import annotations

import logging

import numpy as np
import torch
from torch_geometric.data import Data

from gnnscale.errors import DatasetError

logger = logging.getLogger(__name__)


def _tensor(a: np.ndarray | torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    t = a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))
    return t.to(dtype).contiguous()


def make_data(
    *,
    x: np.ndarray | torch.Tensor,
    y: np.ndarray | torch.Tensor,
    edge_index: torch.Tensor,
    train_mask: np.ndarray | torch.Tensor,
    val_mask: np.ndarray | torch.Tensor,
    test_mask: np.ndarray | torch.Tensor,
    name: str,
    num_classes: int | None = None,
    where: str = "",
) -> Data:
    """Build the contract ``Data``: cast dtypes, drop unlabelled nodes from the masks, check shapes.

    Args:
        x: [N, F] features (cast to float32).
        y: [N] labels, negative = unlabelled (cast to int64, negatives become -1).
        edge_index: int64 [2, E] (already deduplicated by the caller).
        train_mask, val_mask, test_mask: bool [N].
        name: recorded as ``data.name``.
        num_classes: defaults to ``max(y) + 1``.
        where: the source, for error messages.
    """
    for what, arr, kinds in (("features", x, "biuf"), ("labels", y, "biu")):
        if isinstance(arr, np.ndarray) and arr.dtype.kind not in kinds:
            raise DatasetError(f"expected numeric {what} in {where}, found dtype {arr.dtype}; store "
                               f"{'numbers' if what == 'features' else 'integer class ids'}, not text or objects")
    x_t = _tensor(x, torch.float32)
    y_t = _tensor(y, torch.int64)
    y_t[y_t < 0] = -1
    n = x_t.shape[0]
    if x_t.dim() != 2:
        raise DatasetError(f"expected features [N, F] in {where}, found shape {tuple(x_t.shape)}; store a 2-D array")
    if y_t.shape != (n,):
        raise DatasetError(
            f"expected labels of shape [{n}] (one per feature row) in {where}, found "
            f"{tuple(y_t.shape)}; features and labels must describe the same nodes"
        )
    if edge_index.dim() != 2 or edge_index.shape[0] != 2 or edge_index.dtype != torch.int64:
        raise DatasetError(
            f"internal: expected int64 edge_index [2, E] for {where}, found "
            f"{edge_index.dtype} {tuple(edge_index.shape)}; please report this"
        )
    if n == 0:
        raise DatasetError(f"expected at least one node in {where}, found an empty graph (0 feature rows)")
    step = max(1, (64 << 20) // max(1, 4 * x_t.shape[1]))  # row slices: a 64 MB mask at most, not [N, F]
    for a in range(0, n, step):  # loop over slices of rows
        finite = torch.isfinite(x_t[a:a + step])
        if not bool(finite.all()):
            bad = int((~finite).sum())
            row = a + int(torch.nonzero(~finite)[0, 0])
            raise DatasetError(f"expected finite features in {where}, found {bad} NaN or infinite values in rows "
                               f"{a}..{a + finite.shape[0] - 1} (the first in row {row}); clean or impute the features")
    labelled = y_t >= 0
    if num_classes is not None and bool(labelled.any()) and int(y_t.max()) >= int(num_classes):
        raise DatasetError(f"expected labels in [0, {num_classes}) in {where}, found {int(y_t.max())}")
    masks = []
    for label, m in (("train", train_mask), ("val", val_mask), ("test", test_mask)):
        m_t = _tensor(m, torch.bool)
        if m_t.shape != (n,):
            raise DatasetError(
                f"expected a {label} mask of shape [{n}] in {where}, found {tuple(m_t.shape)}; "
                "the split must cover the same nodes as the features"
            )
        dropped = int((m_t & ~labelled).sum())
        if dropped:
            logger.warning("%s: %d unlabelled nodes removed from the %s mask", where, dropped, label)
            m_t = m_t & labelled
        masks.append(m_t)
    if num_classes is None:
        num_classes = int(y_t.max()) + 1 if bool(labelled.any()) else 0
        if num_classes > n:
            raise DatasetError(f"expected class ids below the node count ({n}) in {where}, found {num_classes - 1}; "
                               "labels must be class ids 0..C-1 (negative = unlabelled)")
    data = Data(x=x_t, y=y_t, edge_index=edge_index.contiguous(), num_nodes=n)
    data.train_mask, data.val_mask, data.test_mask = masks
    data.num_classes = int(num_classes)
    data.name = str(name)
    return data
