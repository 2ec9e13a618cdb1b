"""The per-type inputs of a typed graph, read and checked for
:func:`~gnnscale.datasets.typed.make_typed_data`: features, labels, the split of the target
type and the edges of one relation (each check raises a one-line DatasetError).

Also the names the typed modules share: :data:`EdgeType`, :data:`ArrayLike`, ``_fmt_type``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from gnnscale.datasets._graph import unique_int64
from gnnscale.errors import DatasetError

EdgeType = tuple[str, str, str]
ArrayLike = Any  # np.ndarray | torch.Tensor

_FINITE_BLOCK = 64 << 20  # bytes of the boolean mask of one block of feature rows


def _np(a: ArrayLike) -> np.ndarray:
    if isinstance(a, torch.Tensor):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def _fmt_type(et: Sequence[str]) -> str:
    return "(" + ", ".join(repr(s) for s in et) + ")"


def _edge_items(edges: Mapping[EdgeType, ArrayLike] | Iterable[tuple[EdgeType, ArrayLike]]) -> list[tuple[Any, Any]]:
    items = list(edges.items()) if isinstance(edges, Mapping) else list(edges)
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise DatasetError(
                f"expected relations as a mapping or a list of ((src, rel, dst), edge_index) pairs, found "
                f"an item {type(item).__name__}; pass e.g. {{('paper', 'cites', 'paper'): edge_index}}"
            )
    return items


def _check_finite(x: torch.Tensor, what: str, where: str) -> None:
    if x.numel() == 0 or bool(torch.isfinite(x.sum())):
        return  # a NaN or an infinity makes the sum NaN or infinite (a finite sum may overflow: then scan)
    step = max(1, _FINITE_BLOCK // max(1, x.shape[1]))
    for a in range(0, x.shape[0], step):  # loop over blocks of rows (bounded temporary)
        finite = torch.isfinite(x[a:a + step])
        if not bool(finite.all()):
            bad = int((~finite).sum())
            row = a + int(torch.nonzero(~finite)[0, 0])
            raise DatasetError(f"expected finite features in {what} of {where}, found {bad} NaN or infinite values "
                               f"(the first in row {row}); clean or impute the features")


def _features(t: str, x: ArrayLike, count: int, where: str) -> torch.Tensor:
    if isinstance(x, np.ndarray) and not (np.issubdtype(x.dtype, np.number) or x.dtype == np.bool_):
        raise DatasetError(f"expected numeric features for node type {t!r} in {where}, found dtype {x.dtype}; "
                           "store numbers, not text or objects")
    xt = x if isinstance(x, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(x))
    if xt.dim() != 2:
        raise DatasetError(f"expected features [N_t, F] for node type {t!r} in {where}, found shape "
                           f"{tuple(xt.shape)}; store a 2-D array (reshape(-1, 1) for one feature)")
    if xt.shape[0] != count:
        raise DatasetError(
            f"expected {count} feature rows (one per node of type {t!r}) in {where}, found {xt.shape[0]}; "
            f"the features of {t!r} must describe the {count} nodes of that type, in per-type id order"
        )
    xt = xt.to(torch.float32).contiguous()
    _check_finite(xt, f"x_dict[{t!r}]", where)
    return xt


def _labels(y: ArrayLike, count: int, target: str, where: str) -> np.ndarray:
    y = _np(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.shape != (count,):
        raise DatasetError(f"expected labels [{count}] (one per node of the target type {target!r}) in {where}, "
                           f"found shape {y.shape}; store one class id per {target} node, -1 = unlabelled")
    if y.dtype.kind == "f":
        y = np.nan_to_num(y, nan=-1.0)
    elif y.dtype.kind not in "biu":
        raise DatasetError(f"expected integer class ids as labels in {where}, found dtype {y.dtype}; "
                           "store class ids 0..C-1 (negative = unlabelled)")
    y = y.astype(np.int64)
    y[y < 0] = -1
    return y


def _split_mask(m: ArrayLike | None, count: int, label: str, target: str, where: str) -> np.ndarray:
    if m is None:
        return np.zeros(count, dtype=bool)
    m = _np(m)
    if m.dtype == np.bool_:
        if m.shape != (count,):
            raise DatasetError(f"expected a {label} mask of shape [{count}] (one per {target!r} node) in {where}, "
                               f"found {m.shape}; index the masks by per-type id")
        return m.copy()
    if m.dtype.kind not in "iu":
        raise DatasetError(f"expected a bool {label} mask or integer {label} ids in {where}, found dtype {m.dtype}; "
                           "store per-type node ids as integers")
    if m.size and (int(m.min()) < 0 or int(m.max()) >= count):
        raise DatasetError(f"expected {label} ids in [0, {count}) (per-type ids of {target!r}) in {where}, found ids "
                           f"from {int(m.min())} to {int(m.max())}; the split does not belong to this graph")
    out = np.zeros(count, dtype=bool)
    out[m.astype(np.int64)] = True
    return out


def _relation_edges_np(t_src: int, t_dst: int, ei: ArrayLike, counts: np.ndarray, et: EdgeType, where: str,
                       deduplicate: bool, drop_self_loops: bool) -> tuple[np.ndarray, np.ndarray]:
    """Checked, deduplicated per-type ``(src, dst)`` int64 arrays of one relation."""
    arr = _np(ei)
    if arr.ndim != 2 or arr.shape[0] != 2 or not (np.issubdtype(arr.dtype, np.integer)):
        raise DatasetError(f"expected an integer edge_index [2, E] for relation {_fmt_type(et)} in {where}, found "
                           f"{arr.dtype} {arr.shape}; store per-type source ids in row 0, target ids in row 1")
    src = arr[0].astype(np.int64, copy=False)
    dst = arr[1].astype(np.int64, copy=False)
    ns, nd = int(counts[t_src]), int(counts[t_dst])
    if src.size and (int(src.min()) < 0 or int(src.max()) >= ns or int(dst.min()) < 0 or int(dst.max()) >= nd):
        bad = (src < 0) | (src >= ns) | (dst < 0) | (dst >= nd)
        if bad.any():
            k = int(np.flatnonzero(bad)[0])
            raise DatasetError(
                f"expected the edges of relation {_fmt_type(et)} in {where} within the type ranges (sources in "
                f"[0, {ns}) of {et[0]!r}, targets in [0, {nd}) of {et[2]!r}), found {int(bad.sum())} edges out of "
                f"range (the first ({int(src[k])}, {int(dst[k])})); use per-type ids 0..N_t-1"
            )
    if drop_self_loops and t_src == t_dst and src.size:
        keep = src != dst
        if not keep.all():
            src, dst = src[keep], dst[keep]
    if deduplicate and src.size:
        keys = unique_int64(src * np.int64(nd) + dst)
        src = keys // np.int64(max(nd, 1))
        dst = keys - src * np.int64(nd)
    return src, dst
