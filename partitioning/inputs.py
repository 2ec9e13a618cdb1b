"""What :func:`~gnnscale.partitioning.format.write_partitions` reads from a dataset's ``Data``,
checked and converted: node tensors, the targets with their kind, and the edge features
(``docs/targets_and_edge_features.md``). Each bad input ends in one :class:`PartitionError` line.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnscale.errors import DatasetError, PartitionError

if TYPE_CHECKING:  # torch_geometric costs 2 s to import; workers never need it
    from torch_geometric.data import Data


def node_tensor(data: Data, name: str, n: int, ndim: int) -> torch.Tensor:
    value = getattr(data, name, None)
    if value is None:
        raise PartitionError(
            f"expected data.{name} with {n} rows, found none; the dataset loader must provide "
            "x, y, train_mask, val_mask and test_mask"
        )
    t = torch.as_tensor(value).detach().cpu()
    if t.dim() != ndim or t.shape[0] != n:
        want = f"[{n}, F]" if ndim == 2 else f"[{n}]"
        raise PartitionError(
            f"expected data.{name} of shape {want}, found {tuple(t.shape)}; fix the dataset"
        )
    return t


def targets(data: Data, n: int) -> tuple[torch.Tensor, dict[str, Any]]:
    """``data.y`` as the parts store it (int64 [n] for class/binary, float32 [n] / [n, C] for
    multilabel/regression) and meta.json's ``target`` entry ``{kind, num_classes, num_outputs}``
    (``docs/targets_and_edge_features.md`` section 1: num_classes is C for class and multilabel,
    2 for binary, D for regression).

    The kind is :func:`gnnscale.datasets.targets.target_kind` (``data.target_kind``, else
    inferred from ``y``); imported here, not at module level: the datasets package imports
    torch_geometric, which workers that only load parts never need.
    """
    value = getattr(data, "y", None)
    if value is None:
        node_tensor(data, "y", n, 1)  # raises its one-line error
    from gnnscale.datasets.targets import num_outputs, target_kind

    try:
        kind, outputs = target_kind(data), num_outputs(data)
    except DatasetError as exc:
        raise PartitionError(f"{exc}") from None
    t = torch.as_tensor(value).detach().cpu()
    if kind in ("class", "binary"):
        y = node_tensor(data, "y", n, 1).to(torch.int64)
        classes = 2 if kind == "binary" else getattr(data, "num_classes", None)
        if classes is None:
            classes = int(y.max()) + 1 if y.numel() else 0
        return y, {"kind": kind, "num_classes": int(classes), "num_outputs": int(outputs)}
    ndims = (2,) if kind == "multilabel" else (1, 2)
    if t.dim() not in ndims or t.shape[0] != n:
        want = f"[{n}, C]" if kind == "multilabel" else f"[{n}] or [{n}, D]"
        raise PartitionError(f"expected {kind} targets data.y of shape {want}, found {tuple(t.shape)}; fix the dataset")
    return t.to(torch.float32), {"kind": kind, "num_classes": int(outputs), "num_outputs": int(outputs)}


def edge_features(data: Data, num_edges: int) -> np.ndarray | None:
    """``data.edge_attr`` as float32 numpy ``[E, De]`` (aligned with ``data.edge_index``), or None
    without edge features (none, or De = 0)."""
    value = getattr(data, "edge_attr", None)
    if value is None:
        return None
    a = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if a.ndim != 2 or a.shape[0] != num_edges or a.dtype.kind != "f":
        raise PartitionError(
            f"expected data.edge_attr as floats of shape [{num_edges}, De] (one row per column of "
            f"edge_index), found dtype {a.dtype} and shape {tuple(a.shape)}; fix the dataset or drop edge_attr"
        )
    return a.astype(np.float32, copy=False) if a.shape[1] else None


def edge_times(data: Data, num_edges: int) -> np.ndarray | None:
    """``data.edge_time`` as int64 numpy ``[E]`` (a temporal graph, docs/temporal.md), or None.
    One line for another length, NaN or fractional times."""
    value = getattr(data, "edge_time", None)
    if value is None:
        return None
    from gnnscale.samplers.temporal import check_edge_time

    return check_edge_time(value, num_edges, "data.edge_time").numpy()
