"""Edge features in the model (docs/targets_and_edge_features.md, section 5): which layers read
them, which of a model's layers get them, and whether a run uses them (``--edge-features``).

- :func:`layer_reads_edges`: before anything is built, whether a layer spec reads ``edge_attr``
  (a zoo name of :data:`~gnnscale.nn.layers.registry.EDGE_ZOO`: ``gat``, ``gat-pyg``, ``gine``;
  an import path or class whose ``forward`` takes ``edge_attr``: PyG's ``GATConv``, ``GATv2Conv``,
  ``TransformerConv``, ``GENConv``, a user's).
- :func:`edge_layers`: once, after a model's layers are built, which of them are called with
  ``edge_attr=`` (their forward's signature is inspected here, never per step).
- :func:`resolve_edge_dim`: De (the partition's edge features per edge) when the run uses them,
  else 0: ``off``; ``auto`` = on when the partition has them, a layer reads them and the mode
  runs them (else off, with a log line saying why); ``on`` where the plan allowed it.
"""
from __future__ import annotations

import logging
from typing import Sequence

from torch import nn

from gnnscale.errors import GnnscaleError

log = logging.getLogger("gnnscale.train")


class EdgeFeatureError(GnnscaleError):
    """Edge features asked of a model or run that cannot read them."""


def layer_reads_edges(spec) -> bool:
    """Whether layers of ``spec`` (a zoo name, ``module:Class``, ``rel:``/``dgl:`` spec or a layer
    class) read edge features: a zoo layer registered with ``edges=True``, or a class whose
    ``forward`` takes ``edge_attr``. ``rel:`` and ``dgl:`` specs never do.

    Raises:
        LayerError: an import path that cannot be loaded.
    """
    from gnnscale.nn.layers.contract import forward_takes_edge_attr, load_layer_class
    from gnnscale.nn.layers.registry import EDGE_ZOO

    if isinstance(spec, type):
        return forward_takes_edge_attr(spec)
    if not isinstance(spec, str):
        return False
    spec = spec.strip()
    prefix, sep, _ = spec.partition(":")
    if not sep:
        return spec.lower() in EDGE_ZOO
    if prefix.lower() in ("rel", "dgl"):
        return False
    return forward_takes_edge_attr(load_layer_class(spec))


def refuse_edge_dim_kwarg(kwargs: dict) -> None:
    """Raise EdgeFeatureError when the layer options name ``edge_dim`` (the model passes it)."""
    if "edge_dim" in kwargs:
        raise EdgeFeatureError("edge_dim is the partition's edge feature size, which the model passes its layers "
                               "itself (--edge-features); leave it out of layer_kwargs")


def construct_kwargs(layer: type, edge_dim: int, kwargs: dict) -> dict:
    """The keyword arguments a layer class is built with: ``kwargs`` plus ``edge_dim`` when it is
    > 0 and the constructor takes it (the model passes it; a user's ``edge_dim`` is refused)."""
    from gnnscale.nn.layers.contract import takes_edge_dim

    refuse_edge_dim_kwarg(kwargs)
    return dict(kwargs, edge_dim=edge_dim) if edge_dim and takes_edge_dim(layer) else dict(kwargs)


def edge_layers(convs: Sequence[nn.Module], edge_dim: int, spec: str) -> list[bool]:
    """Per layer, whether it is called with ``edge_attr=`` float32 [M, De]: ``edge_dim`` > 0 and its
    forward takes ``edge_attr`` (inspected once, here).

    Raises:
        EdgeFeatureError: ``edge_dim`` > 0 and no layer reads edge features.
    """
    from gnnscale.nn.layers.contract import forward_takes_edge_attr

    if isinstance(edge_dim, bool) or not isinstance(edge_dim, int) or edge_dim < 0:
        raise EdgeFeatureError(f"edge_dim must be an int >= 0 (0: no edge features), found {edge_dim!r}")
    flags = [bool(edge_dim) and forward_takes_edge_attr(c) for c in convs]
    if edge_dim and not any(flags):
        raise EdgeFeatureError(f"the model has edge_dim={edge_dim} but no layer of {spec!r} reads edge_attr (its "
                               "forward has no edge_attr parameter); use a layer that does (gat, gat-pyg, gine, "
                               "torch_geometric.nn:TransformerConv, ...) or build the model with edge_dim=0")
    return flags


def resolve_edge_dim(cfg, meta: dict, mode: str, rank: int = 0) -> int:
    """The edge features per edge the run's model and samplers use (0: none), from
    ``cfg.edge_features`` and the partition's ``meta["edge_feature_dim"]``, in plan mode ``mode``.
    Rank 0 logs the outcome when the partition has edge features.

    Raises:
        EdgeFeatureError: ``on`` with a layer that reads none. PlanError: ``on`` where the plan
            refuses it (the launcher refused it before; this is the worker's own check).
    """
    from gnnscale.planning.plan import check_edge_options, edge_features_blocker

    de = int(meta.get("edge_feature_dim") or 0)
    choice = getattr(cfg, "edge_features", "auto")
    if getattr(cfg, "task", "node") == "temporal_link":
        return temporal_edge_dim(cfg, choice, de, rank)
    check_edge_options(cfg, mode, "the partition", meta.get("typed"), de)
    if choice == "off" or de == 0:
        if de and rank == 0:
            log.info("edge features: off (--edge-features off): the %d per edge in the partition are not read", de)
        return 0
    reads = layer_reads_edges(cfg.layer if getattr(cfg, "model", None) is None else cfg.model)
    if choice == "on":
        if not reads:
            raise EdgeFeatureError(f"--edge-features on, but layer {cfg.layer!r} reads no edge features (its forward "
                                   "takes no edge_attr); use one that does (gat, gat-pyg, gine, "
                                   "torch_geometric.nn:TransformerConv, a class whose forward takes edge_attr), or "
                                   "--edge-features auto/off")
        why = None
    else:
        why = (f"layer {cfg.layer!r} reads none" if not reads else
               edge_features_blocker(cfg, mode, meta.get("typed")))
    if rank == 0:
        if why:
            log.info("edge features: off (--edge-features auto): the partition has %d per edge, but %s", de, why)
        else:
            log.info("edge features: on: %d per edge, sampled with every block and read by the %s layers", de,
                     cfg.layer if isinstance(cfg.layer, str) else getattr(cfg.layer, "__name__", "model's"))
    return 0 if why else de


def temporal_edge_dim(cfg, choice: str, de: int, rank: int = 0) -> int:
    """``--task temporal_link``: each sampled edge's features are its age (the seed's time minus the
    edge's, the first column; a ``tgat`` layer encodes it as TGAT does) and then the partition's own
    De features of that edge (JODIE's; :class:`~gnnscale.tasks.temporal_task.EdgeRows`): 1 + De
    where the layer reads edge features (``auto``, ``on``), 0 with ``off`` (the time-blind ablation).

    Raises:
        EdgeFeatureError: ``on`` with a layer that reads none."""
    reads = layer_reads_edges(cfg.layer)
    if choice == "on" and not reads:
        raise EdgeFeatureError(f"--edge-features on, but layer {cfg.layer!r} reads no edge features, so it cannot read "
                               "the edges' ages; use --layer tgat (or gat, gine, a class whose forward takes "
                               "edge_attr), or --edge-features auto/off")
    on = reads and choice != "off"
    if rank == 0:
        log.info("temporal edges: %s", (f"each edge's age and its {de} features read by the layers" if de else
                                        "each edge's age read by the layers") if on else
                 f"the layers read no ages{f' nor the {de} edge features' if de else ''} "
                 f"({'--edge-features off' if reads else f'layer {cfg.layer!r} reads none'})")
    return 1 + de if on else 0
