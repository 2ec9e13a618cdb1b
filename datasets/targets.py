"""What a dataset's targets are, and checks of targets and edge features (docs/targets_and_edge_features.md 1-2).

Public API (torch only: no engine imports, safe to import from any package):

* :func:`target_kind` ``(data) -> str``: ``class``, ``binary``, ``multilabel`` or ``regression``:
  ``data.target_kind`` when the source set it, else inferred from ``data.y``.
* :func:`check_targets` ``(data, where) -> str``: raise a one-line
  :class:`~gnnscale.errors.DatasetError` for targets or edge features that break the contract;
  returns the kind.
* :func:`check_edge_attr` ``(edge_attr, num_edges, where)``: the edge-feature part of the checks.
* :func:`num_outputs` ``(data) -> int``: the width of the model's last layer (class: C,
  binary: 1 logit, multilabel: C, regression: D).

For loaders:

* :func:`attach_targets` ``(data, y, kind=..., ...)``: put non-class targets (and ``edge_attr``)
  on a ``Data`` built by ``make_data`` (which knows class ids only) and check them.
* :func:`dedupe_edges` ``(src, dst, num_nodes, edge_attr, ...)``: drop duplicate edges keeping the
  first occurrence *and its attributes* (``clean_edges`` sorts keys and cannot carry them).

The kinds (section 1 of the contract):

========== ============================== ===================================== ===============
kind       ``y``                          unlabelled rows                       ``num_classes``
========== ============================== ===================================== ===============
class      int64 [N], class ids           -1 (in no mask)                       C
binary     int64 [N] in {0, 1}            -1 (in no mask)                       2
multilabel float32 [N, C] of 0/1          rows in no mask (any values there)    C
regression float32 [N] or [N, D]          NaN rows, in no mask                  D (1 for [N])
========== ============================== ===================================== ===============

Inference without ``data.target_kind``: float ``y`` of 2 dims whose labelled rows are all 0/1 ->
multilabel; other float ``y`` -> regression; integer ``y`` -> class (binary only when a source
says so); bool ``y`` [N, C] -> multilabel, bool [N] -> binary. *Labelled rows* are the rows in
any of ``train_mask``/``val_mask``/``test_mask`` (every row when the data has none of them).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from gnnscale.errors import DatasetError

KINDS = ("class", "binary", "multilabel", "regression")

_ROWS_PER_CHECK = 1 << 20  # rows per slice when scanning large [N, C] / [E, De] tensors


def _as_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    return torch.from_numpy(np.ascontiguousarray(value))


def labelled_rows(data: Any) -> torch.Tensor:
    """bool [N]: the rows in any of ``train_mask``/``val_mask``/``test_mask`` (all rows without masks)."""
    n = _num_rows(data)
    masks = [getattr(data, k, None) for k in ("train_mask", "val_mask", "test_mask")]
    masks = [m for m in masks if m is not None]
    if not masks:
        return torch.ones(n, dtype=torch.bool)
    out = torch.zeros(n, dtype=torch.bool)
    for m in masks:
        m = _as_tensor(m).to(torch.bool).reshape(-1)
        if m.numel() == n:
            out |= m
    return out


def _num_rows(data: Any) -> int:
    n = getattr(data, "num_nodes", None)
    if n is None:
        y = getattr(data, "y", None)
        n = 0 if y is None else int(y.shape[0])
    return int(n)


def _is_zero_one(y: torch.Tensor) -> bool:
    """Every value of ``y`` (float, any shape) is 0 or 1 (scanned in row slices)."""
    for a in range(0, y.shape[0], _ROWS_PER_CHECK):
        part = y[a:a + _ROWS_PER_CHECK]
        if not bool(((part == 0) | (part == 1)).all()):
            return False
    return True


def target_kind(data: Any) -> str:
    """The kind of ``data``'s targets: ``data.target_kind`` if set, else inferred from ``data.y``.

    Raises:
        DatasetError: ``data.target_kind`` is not one of :data:`KINDS`, or ``data.y`` is missing.
    """
    kind = getattr(data, "target_kind", None)
    if kind is not None:
        if kind not in KINDS:
            raise DatasetError(f"expected target_kind among {', '.join(KINDS)}, found {kind!r}; "
                               "fix the dataset source")
        return str(kind)
    y = getattr(data, "y", None)
    if y is None:
        raise DatasetError("expected targets y on the dataset, found none; every dataset needs y")
    y = _as_tensor(y)
    if y.dtype == torch.bool:
        return "multilabel" if y.dim() == 2 else "binary"
    if y.is_floating_point():
        if y.dim() == 2:
            rows = labelled_rows(data)
            if rows.numel() != y.shape[0] or bool(rows.all()):
                rows = None  # no masks, or masks of another size: judge every row
            if _is_zero_one(y if rows is None else y[rows]):
                return "multilabel"
        return "regression"
    return "class"


def num_outputs(data: Any) -> int:
    """Outputs of the model's last layer: C for class and multilabel, 1 for binary (one logit),
    D for regression (1 for ``y`` [N])."""
    kind = target_kind(data)
    y = _as_tensor(data.y)
    if kind == "binary":
        return 1
    if kind == "class":
        c = getattr(data, "num_classes", None)
        return int(c) if c is not None else (int(y.max()) + 1 if y.numel() else 0)
    return 1 if y.dim() == 1 else int(y.shape[1])


def _first_bad_row(bad_rows: torch.Tensor) -> int:
    return int(torch.nonzero(bad_rows)[0, 0])


def check_edge_attr(attr: Any, num_edges: int, where: str) -> None:
    """One-line DatasetError unless ``attr`` is a float32 tensor [num_edges, De] of finite values
    (numpy arrays are accepted for the shape check: any float dtype)."""
    if isinstance(attr, np.ndarray):
        ok = attr.ndim == 2 and attr.dtype.kind == "f"
    else:
        ok = isinstance(attr, torch.Tensor) and attr.dim() == 2 and attr.dtype == torch.float32
    if not ok:
        what = f"{attr.dtype} {tuple(attr.shape)}" if hasattr(attr, "shape") else type(attr).__name__
        raise DatasetError(f"expected edge_attr float32 [E, De] in {where}, found {what}; "
                           "store one row of float edge features per edge (reshape(-1, 1) for one feature)")
    if attr.shape[0] != num_edges:
        raise DatasetError(f"expected edge_attr with {num_edges} rows (one per edge of edge_index) in {where}, "
                           f"found {attr.shape[0]} rows; the edge features must list the same edges, in the same order")
    attr = _as_tensor(attr)
    for a in range(0, num_edges, _ROWS_PER_CHECK):
        finite = torch.isfinite(attr[a:a + _ROWS_PER_CHECK])
        if not bool(finite.all()):
            row = a + _first_bad_row(~finite.all(dim=1))
            raise DatasetError(f"expected finite edge features in {where}, found NaN or infinite values (the first "
                               f"in edge row {row}); clean or impute the edge features")


def check_targets(data: Any, where: str) -> str:
    """Check ``data.y`` against its kind and ``data.edge_attr`` against ``data.edge_index``.

    One-line DatasetError for: ``y`` rows != N; ``edge_attr`` not float32 2-D, rows != E, or not
    finite; a class/binary ``y`` that is not integer [N] or (binary) not in {0, 1} on labelled
    rows; a multilabel ``y`` that is not float [N, C], with NaN or values other than 0/1 on
    labelled rows; a regression ``y`` with NaN on labelled rows. Labelled = in any mask.

    Returns:
        The kind (:func:`target_kind`).
    """
    y = getattr(data, "y", None)
    if y is None:
        raise DatasetError(f"expected targets y in {where}, found none; every dataset needs y")
    y = _as_tensor(y)
    n = _num_rows(data)
    if y.dim() not in (1, 2) or y.shape[0] != n:
        raise DatasetError(f"expected targets y with {n} rows (one per node) in {where}, found shape "
                           f"{tuple(y.shape)}; the targets must describe the same nodes as the features")
    attr = getattr(data, "edge_attr", None)
    if attr is not None:
        ei = getattr(data, "edge_index", None)
        attr = _as_tensor(attr) if isinstance(attr, np.ndarray) else attr  # on Data: a float32 tensor
        check_edge_attr(attr, 0 if ei is None else int(ei.shape[1]), where)
    kind = target_kind(data)
    rows = labelled_rows(data)
    if kind in ("class", "binary"):
        if y.dim() != 1 or y.is_floating_point() or y.dtype == torch.bool:
            raise DatasetError(f"expected {kind} targets as int64 [{n}] in {where}, found {y.dtype} "
                               f"{tuple(y.shape)}; store class ids as integers (-1 = unlabelled)")
        lab = y[rows]
        if kind == "binary" and lab.numel() and bool(((lab != 0) & (lab != 1)).any()):
            bad = (y != 0) & (y != 1) & rows
            raise DatasetError(f"expected binary targets 0/1 on labelled rows in {where}, found "
                               f"{int(bad.sum())} other values (the first {int(y[_first_bad_row(bad)])} in row "
                               f"{_first_bad_row(bad)}); store 0/1 (-1 = unlabelled, in no mask)")
        if kind == "class" and lab.numel() and int(lab.min()) < 0:
            bad = (y < 0) & rows
            raise DatasetError(f"expected class ids >= 0 on labelled rows in {where}, found {int(bad.sum())} "
                               f"negative ids (the first in row {_first_bad_row(bad)}); unlabelled nodes belong "
                               "in no mask")
        return kind
    if not y.is_floating_point():
        raise DatasetError(f"expected {kind} targets as float32 [{n}{', C' if kind == 'multilabel' else ', D'}] in "
                           f"{where}, found {y.dtype} {tuple(y.shape)}; store the targets as floats")
    if kind == "multilabel" and y.dim() != 2:
        raise DatasetError(f"expected multilabel targets as float32 [{n}, C] in {where}, found {tuple(y.shape)}; "
                           "store one 0/1 column per label")
    nan_rows = torch.zeros(n, dtype=torch.bool)
    other_rows = torch.zeros(n, dtype=torch.bool)
    nan_count = other_count = 0
    for a in range(0, n, _ROWS_PER_CHECK):  # row slices: no [N, C] temporaries on large graphs
        part = y[a:a + _ROWS_PER_CHECK]
        part = part.reshape(part.shape[0], -1)
        sel = rows[a:a + part.shape[0]]
        nan = torch.isnan(part) & sel[:, None]
        nan_count += int(nan.sum())
        nan_rows[a:a + part.shape[0]] = nan.any(dim=1)
        if kind == "multilabel":
            other = ~((part == 0) | (part == 1) | torch.isnan(part)) & sel[:, None]
            other_count += int(other.sum())
            other_rows[a:a + part.shape[0]] = other.any(dim=1)
    if nan_count:
        raise DatasetError(f"expected no NaN targets on labelled rows (rows in a mask) in {where}, found {nan_count} "
                           f"NaN values in {int(nan_rows.sum())} labelled rows (the first in row "
                           f"{_first_bad_row(nan_rows)}); fill them or take those nodes out of the masks")
    if other_count:
        row = _first_bad_row(other_rows)
        values = y[row].reshape(-1)
        value = float(values[(values != 0) & (values != 1)][0])
        raise DatasetError(f"expected multi-hot targets of 0/1 on labelled rows in {where}, found {other_count} "
                           f"other values (the first {value:g} in row {row}); store 0/1 per label")
    return kind


def attach_targets(
    data: Any,
    y: np.ndarray | torch.Tensor,
    *,
    kind: str,
    where: str,
    num_classes: int | None = None,
    edge_attr: np.ndarray | torch.Tensor | None = None,
) -> Any:
    """Put targets of ``kind`` (and optional ``edge_attr``) on ``data`` and check them.

    ``data`` comes from ``make_data`` (built with placeholder class ids that keep the masks as
    given). ``y`` becomes float32 for multilabel/regression, int64 for class/binary;
    ``num_classes`` defaults to C (multilabel), D (regression), 2 (binary). ``edge_attr`` must
    already be aligned with ``data.edge_index``; it is stored as float32.

    Returns:
        ``data`` with ``y``, ``target_kind``, ``num_classes`` (and ``edge_attr``) set.

    Raises:
        DatasetError: :func:`check_targets` fails.
    """
    if kind not in KINDS:
        raise DatasetError(f"internal: expected a target kind among {', '.join(KINDS)}, found {kind!r}; "
                           "please report this")
    y_t = _as_tensor(y)
    y_t = y_t.to(torch.int64 if kind in ("class", "binary") else torch.float32).contiguous()
    if num_classes is None:
        if kind == "binary":
            num_classes = 2
        elif kind == "class":
            num_classes = int(y_t.max()) + 1 if y_t.numel() else 0
        else:
            num_classes = 1 if y_t.dim() == 1 else int(y_t.shape[1])
    data.y = y_t
    data.target_kind = kind
    data.num_classes = int(num_classes)
    if edge_attr is not None:
        data.edge_attr = _as_tensor(edge_attr).to(torch.float32).contiguous()
    check_targets(data, where)
    return data


def dedupe_edges(
    src: np.ndarray,
    dst: np.ndarray,
    num_nodes: int,
    edge_attr: np.ndarray | torch.Tensor | None = None,
    *,
    undirected: bool = False,
    drop_self_loops: bool = False,
    sort: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None, dict[str, int]]:
    """Remove duplicate ``(src, dst)`` edges keeping each one's first occurrence and its attributes.

    Args:
        src, dst: integer arrays [E] of checked ids in ``[0, num_nodes)``.
        num_nodes: N.
        edge_attr: [E, De] rows aligned with ``src``/``dst``, or None.
        undirected: also store every edge reversed (with the same attributes), after the
            stored edges: a stored ``(v, u)`` wins over the reverse of ``(u, v)``.
        drop_self_loops: remove ``(u, u)`` edges first.
        sort: order the result by (source, target) (like ``clean_edges``); otherwise the kept
            edges stay in their stored order.

    Returns:
        ``(edge_index int64 [2, E'], edge_attr float32 [E', De] or None, counts)`` with counts
        ``{"stored": E, "self_loops_dropped": ..., "duplicates_dropped": ..., "kept": E'}``.
    """
    n = np.int64(max(int(num_nodes), 1))
    src = np.asarray(src, dtype=np.int64).reshape(-1)
    dst = np.asarray(dst, dtype=np.int64).reshape(-1)
    stored = int(src.size)
    rows = None  # attribute row of each candidate edge (None: candidate i = stored edge i)
    loops = 0
    if drop_self_loops:
        keep = src != dst
        loops = int(stored - keep.sum())
        if loops:
            rows = np.flatnonzero(keep)
            src, dst = src[rows], dst[rows]
        del keep
    if undirected:
        rows = np.arange(stored, dtype=np.int64) if rows is None else rows
        src, dst, rows = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([rows, rows])
    keys = torch.from_numpy(src * n + dst)
    ordered, perm = torch.sort(keys, stable=True)  # stable: equal keys keep their stored order
    del keys
    first = torch.ones(ordered.numel(), dtype=torch.bool)
    if ordered.numel() > 1:
        torch.ne(ordered[1:], ordered[:-1], out=first[1:])
    del ordered
    keep_pos = perm[first]  # sorted by key
    del perm, first
    if not sort:
        keep_pos = torch.sort(keep_pos).values
    keep_np = keep_pos.numpy()
    unchanged = keep_np.size == src.size and rows is None and not sort
    edge_index = torch.from_numpy(np.stack([src, dst]) if unchanged else np.stack([src[keep_np], dst[keep_np]]))
    attr = None
    if edge_attr is not None:
        attr = _as_tensor(edge_attr).to(torch.float32)
        if not unchanged:
            attr = attr[torch.from_numpy(keep_np if rows is None else rows[keep_np])]
        attr = attr.contiguous()
    counts = {"stored": stored, "self_loops_dropped": loops,
              "duplicates_dropped": int(src.size - keep_np.size), "kept": int(keep_np.size)}
    return edge_index, attr, counts
