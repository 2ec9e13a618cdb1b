"""``partition_graph``: validate, partition, relabel, write. Also the partitioner registry.

A partitioner is ``fn(data, num_parts, **options) -> int [N]`` (numpy array or LongTensor)
giving the part of every node. Methods are looked up here only:

* a registered name (built-ins: ``metis``, ``random``, ``hash``, ``range``, ``ldg``, ``fennel``,
  see :mod:`gnnscale.partitioning.strategies`; add one with :func:`register_partitioner`);
* or a plug-in ``"module.path:function"``, imported on use.

``partition_graph`` passes ``balance``, ``imbalance`` and ``seed`` to a partitioner that names
them in its signature (or takes ``**kwargs``) and the method's own ``options`` by keyword; an
option the partitioner does not take is an error. The output is checked (shape ``[N]``, an
integer dtype, ids in ``[0, P)``) with an error naming the function for each failure.
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from gnnscale.errors import PartitionError
from gnnscale.partitioning.feature_dtype import check_feature_dtype
from gnnscale.partitioning.format import write_meta, write_partitions
from gnnscale.partitioning.resources import ResourceMeter
from gnnscale.partitioning.strategies import BUILTIN_STRATEGIES

if TYPE_CHECKING:  # torch_geometric costs 2 s to import; workers never need it
    from torch_geometric.data import Data

logger = logging.getLogger(__name__)

Partitioner = Callable[..., "np.ndarray | torch.Tensor"]

_PARTITIONERS: dict[str, Partitioner] = dict(BUILTIN_STRATEGIES)
_STANDARD_KWARGS = ("balance", "imbalance", "seed")
_PLUGIN_HINT = (
    "give a registered method or a plug-in 'module.path:function' whose function is "
    "fn(data, num_parts, **options) -> LongTensor[N]"
)


def register_partitioner(name: str, fn: Partitioner, *, overwrite: bool = False) -> None:
    """Make ``fn`` available as ``partition_graph(..., method=name)`` (and ``--method name``).

    Args:
        name: method name (no ``:``, which marks a plug-in path).
        fn: ``fn(data, num_parts, **options) -> int [N]``; it may name ``balance``,
            ``imbalance`` and ``seed`` to receive them.
        overwrite: allow replacing an existing method of that name.
    """
    if not isinstance(name, str) or not name or ":" in name:
        raise PartitionError(
            f"expected a non-empty method name without ':', found {name!r}; pick a plain name"
        )
    if not callable(fn):
        raise PartitionError(f"expected a callable partitioner for {name!r}, found {fn!r}")
    if name in _PARTITIONERS and not overwrite:
        raise PartitionError(
            f"expected a new method name, found {name!r} already registered; pass "
            "overwrite=True to replace it"
        )
    _PARTITIONERS[name] = fn


def available_methods() -> list[str]:
    """Names of the registered partitioners, built-ins first (``metis`` is the default)."""
    return list(_PARTITIONERS)


def _load_plugin(spec: str) -> Partitioner:
    """Import ``"module.path:function"`` (the function may be ``Class.attr``)."""
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise PartitionError(
            f"expected a plug-in method 'module.path:function', found {spec!r}; {_PLUGIN_HINT}"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PartitionError(
            f"expected an importable module {module_name!r} for the plug-in method {spec!r}, "
            f"found an import error: {exc}; check the module path and that its folder is on "
            "PYTHONPATH"
        ) from exc
    except Exception as exc:  # noqa: BLE001 - the plug-in's own code failed at import
        raise PartitionError(
            f"expected module {module_name!r} (plug-in method {spec!r}) to import, found "
            f"{type(exc).__name__}: {exc} raised while importing it; fix that module"
        ) from exc
    obj: Any = module
    for name in attr.split("."):
        try:
            obj = getattr(obj, name)
        except AttributeError:
            public = sorted(k for k in vars(module) if not k.startswith("_"))[:20]
            raise PartitionError(
                f"expected module {module_name!r} to define {attr!r} (plug-in method {spec!r}), "
                f"found no such attribute (it has: {public}); fix the name after ':'"
            ) from None
    if not callable(obj):
        raise PartitionError(
            f"expected {spec!r} to be a function fn(data, num_parts, **options), found a "
            f"{type(obj).__name__}; point the method at a function"
        )
    return obj


def get_partitioner(method: str) -> Partitioner:
    """The partitioner of ``method``: a registered name or a plug-in ``module.path:function``.

    Raises:
        PartitionError: unknown name (the message lists the known ones), or a plug-in that
            cannot be imported, lacks the attribute, or is not callable.
    """
    if isinstance(method, str) and method in _PARTITIONERS:
        return _PARTITIONERS[method]
    if isinstance(method, str) and ":" in method:
        return _load_plugin(method)
    raise PartitionError(
        f"expected a partitioning method from {available_methods()}, found {method!r}; "
        f"pick one of those, register_partitioner a new one, or pass 'module.path:function'"
    )


def _describe(method: str, fn: Partitioner) -> str:
    """``'name' (module.qualname)`` for error messages."""
    where = f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"
    return f"{method!r} ({where})"


def _call_kwargs(
    fn: Partitioner, label: str, standard: dict[str, Any], options: Mapping[str, Any]
) -> dict[str, Any]:
    """Keyword arguments for ``fn``: the standard ones it names plus every user option."""
    clash = sorted(set(options) & set(standard))
    if clash:
        raise PartitionError(
            f"expected {clash} as partition_graph arguments, found them in options as well; "
            "pass them once, as arguments"
        )
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature: pass everything
        return {**standard, **options}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return {**standard, **options}
    kw_kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    positional = [p for p in params if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    skip = {p.name for p in positional[:2]}  # data, num_parts
    accepted = [p.name for p in params if p.kind in kw_kinds and p.name not in skip]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise PartitionError(
            f"expected options of method {label} among {accepted}, found unknown {unknown}; "
            "drop them or use a method that takes them"
        )
    kwargs = {k: v for k, v in standard.items() if k in accepted}
    kwargs.update(options)
    return kwargs


def _check_output(parts: Any, label: str, n: int, num_parts: int) -> np.ndarray:
    """The partitioner output as int64 numpy ``[N]``, or a PartitionError naming the function."""
    if isinstance(parts, torch.Tensor):
        parts = parts.detach().cpu().numpy()
    elif not isinstance(parts, np.ndarray):
        try:
            parts = np.asarray(parts)
        except Exception:  # noqa: BLE001
            parts = np.asarray(None)
    if parts.dtype == object or parts.ndim == 0:
        raise PartitionError(
            f"expected partitioner {label} to return a LongTensor or int array of shape [{n}], "
            f"found {type(parts).__name__} {parts!r:.80}; return one part id per node"
        )
    if parts.shape != (n,):
        raise PartitionError(
            f"expected partitioner {label} to return shape [{n}] (one part id per node), found "
            f"shape {list(parts.shape)}; return a 1-D tensor with an id for every node"
        )
    if parts.dtype == np.bool_ or not np.issubdtype(parts.dtype, np.integer):
        raise PartitionError(
            f"expected partitioner {label} to return an integer dtype (a LongTensor), found "
            f"dtype {parts.dtype}; return parts.long() (or .astype(np.int64))"
        )
    if n:
        lo, hi = int(parts.min()), int(parts.max())
        if lo < 0 or hi >= num_parts:
            raise PartitionError(
                f"expected partitioner {label} to return part ids in [0, {num_parts}), found "
                f"ids in [{lo}, {hi}]; return ids between 0 and num_parts - 1"
            )
    return parts.astype(np.int64, copy=False)


_CONTRACT = ("name", "num_classes", "train_mask", "val_mask", "test_mask", "y")


def as_dataset(data: Any) -> Data:
    """``data`` as the dataset contract: a gnnscale dataset (it has ``name``, ``num_classes``, ``y``
    and the three masks) as it is, any other PyG ``Data``, ``HeteroData`` or RandomLinkSplit triple
    converted by :func:`gnnscale.datasets.inmemory.from_pyg` (checked first: one line per bad input)."""
    from torch_geometric.data import Data as PygData

    from gnnscale.datasets.inmemory import check_graph, from_pyg
    from gnnscale.datasets.temporal import from_pyg as temporal_from_pyg, is_temporal

    if is_temporal(data):  # edge times (docs/temporal.md): every event kept, with its time
        return data if all(k in data.keys() for k in _CONTRACT) else temporal_from_pyg(data)
    check_graph(data)
    if isinstance(data, PygData) and all(k in data.keys() for k in _CONTRACT):
        return data
    return from_pyg(data)


def _check_request(data: Data, num_parts: Any) -> tuple[int, int]:
    if getattr(data, "edge_index", None) is None:
        raise PartitionError("expected data.edge_index [2, E], found none; fix the dataset")
    n = int(data.num_nodes) if data.num_nodes is not None else 0
    if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)):
        raise PartitionError(
            f"expected an integer num_parts, found {num_parts!r}; pass e.g. num_parts=4"
        )
    num_parts = int(num_parts)
    if num_parts < 1 or num_parts > n:
        raise PartitionError(
            f"expected 1 <= num_parts <= number of nodes ({n}), found num_parts={num_parts}; "
            f"choose between 1 and {n} parts"
        )
    return n, num_parts


def assign_parts(
    data: Data,
    num_parts: int,
    *,
    method: str = "metis",
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
) -> np.ndarray:
    """Run a partitioner and check its output, without writing anything.

    Args: as :func:`partition_graph`.

    Returns:
        int64 numpy ``[N]`` with values in ``[0, num_parts)``.
    """
    fn = get_partitioner(method)
    label = _describe(method, fn)
    n, num_parts = _check_request(data, num_parts)
    if isinstance(balance, str):
        balance = (balance,)
    standard = {"balance": tuple(balance), "imbalance": float(imbalance), "seed": int(seed)}
    kwargs = _call_kwargs(fn, label, standard, dict(options or {}))
    return _check_output(fn(data, num_parts, **kwargs), label, n, num_parts)


def partition_graph(
    data: Data,
    num_parts: int,
    out_dir: str | os.PathLike,
    *,
    method: str = "metis",
    balance: Sequence[str] = ("nodes", "train"),
    imbalance: float = 0.05,
    seed: int = 0,
    dataset: str | None = None,
    options: Mapping[str, Any] | None = None,
    extra_meta: Mapping[str, Any] | None = None,
    feature_dtype: str = "float32",
) -> dict[str, Any]:
    """Partition ``data`` into ``num_parts`` parts and write the folder ``out_dir``
    (format 1; format 2 for a typed graph).

    A typed graph (``data.node_types`` and ``data.edge_type``, ``docs/typed_graphs.md``) is
    partitioned as its homogeneous view (every relation's edges together); METIS's ``nodes``
    constraint becomes one constraint per node type (and ``train`` counts the target type's
    training nodes), the other methods run unchanged.

    Args:
        data: graph following the dataset contract (x, y, edge_index, masks, num_classes;
            optional edge_weight [E] used by metis/ldg/fennel), or a typed graph; or any PyG
            ``Data`` / ``HeteroData`` / RandomLinkSplit triple (:func:`as_dataset`).
        num_parts: P, 1 <= P <= number of nodes.
        out_dir: output folder.
        method: a name from :func:`available_methods` or a plug-in ``"module.path:function"``.
        balance: METIS balance constraints ("nodes", "train", "val", "test", "edges").
        imbalance: allowed relative overweight per constraint (0.05 = 5%); the default
            ``slack`` of the streaming methods.
        seed: partitioner seed.
        dataset: name recorded in meta.json (default: ``data.name``).
        options: the method's own keyword options (e.g. ``{"slack": 0.1}`` for fennel,
            ``{"edge_weight": False}`` for metis); recorded in meta.json.
        extra_meta: more JSON-serializable entries for meta.json (e.g. ``{"edge_to_node": "mean"}``:
            how the dataset was transformed before the cut).
        feature_dtype: ``"float32"``, ``"float16"`` or ``"bfloat16"``: the stored precision of
            the feature rows (:mod:`~gnnscale.partitioning.feature_dtype`), in meta.json.

    Returns:
        The meta dict written to ``out_dir/meta.json``: the format keys, the quality metrics
        (``edge_cut``, ``edge_cut_fraction``, ``balance``, ``halo``, ``replication_factor``)
        and the cost: ``partition_seconds`` / ``partition_peak_rss_bytes`` (the partitioner),
        ``write_seconds``, ``total_seconds`` and ``peak_rss_bytes`` / ``peak_rss_growth_bytes``
        (partitioner + writing; see :class:`~gnnscale.partitioning.resources.ResourceMeter`).
    """
    get_partitioner(method)  # fail on an unknown method before anything else
    check_feature_dtype(feature_dtype)
    data = as_dataset(data)
    n, num_parts = _check_request(data, num_parts)
    if isinstance(balance, str):
        balance = (balance,)
    balance = tuple(balance)
    options = dict(options or {})
    if dataset is None:
        dataset = str(getattr(data, "name", None) or "unknown")
    logger.info(
        "partitioning %s (%d nodes, %d edges) into %d parts with %s, balance=%s, "
        "imbalance=%.3f, seed=%d%s; folder: %s",
        dataset,
        n,
        int(data.edge_index.shape[1]),
        num_parts,
        method,
        ",".join(balance) or "none",
        imbalance,
        seed,
        f", options={options}" if options else "",
        os.fspath(out_dir),
    )
    with ResourceMeter() as total:
        with ResourceMeter() as step:
            parts = assign_parts(
                data, num_parts, method=method, balance=balance, imbalance=imbalance,
                seed=seed, options=options,
            )
        counts = np.bincount(parts, minlength=num_parts)
        logger.info(
            "%s finished in %.2f s; nodes per part min %d / max %d",
            method,
            step.seconds,
            int(counts.min()),
            int(counts.max()),
        )
        t1 = time.perf_counter()
        meta = write_partitions(
            data,
            parts,
            out_dir,
            method=method,
            dataset=dataset,
            num_parts=num_parts,
            feature_dtype=feature_dtype,
            extra_meta={
                "balance_constraints": list(balance),
                "imbalance": float(imbalance),
                "seed": int(seed),
                "options": json.loads(json.dumps(options, default=str)),
                "partition_seconds": round(step.seconds, 4),
                "partition_peak_rss_bytes": int(step.peak_rss_bytes),
                **dict(extra_meta or {}),
            },
        )
        write_seconds = time.perf_counter() - t1
    meta.update(
        {
            "write_seconds": round(write_seconds, 4),
            "total_seconds": round(total.seconds, 4),
            "peak_rss_bytes": int(total.peak_rss_bytes),
            "peak_rss_growth_bytes": int(total.peak_rss_growth_bytes),
            "peak_rss_exact": bool(total.peak_rss_exact),
        }
    )
    write_meta(out_dir, meta)
    logger.info(
        "wrote %d parts to %s in %.2f s (%d nodes, %d edges, edge cut %d = %.2f%%, peak RSS %.2f GB)",
        num_parts,
        out_dir,
        write_seconds,
        int(meta["num_nodes"]),
        int(meta["num_edges"]),
        meta["edge_cut"],
        100.0 * meta["edge_cut_fraction"],
        total.peak_rss_bytes / 1e9,
    )
    return meta
