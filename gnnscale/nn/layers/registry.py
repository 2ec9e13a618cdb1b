"""The layer registry: zoo names, how a spec is written, and :func:`build_conv`.

Each layer module registers its zoo names with :func:`register` when it is imported (the
package ``gnnscale.nn.layers`` imports them all); :func:`build_conv` looks a spec up here:
a zoo name, ``dgl:ClassName`` (:mod:`.dgl`) or an import path ``package.module:ClassName``
(:func:`~gnnscale.nn.layers.contract.load_layer_class`, probed by
:func:`~gnnscale.nn.layers.contract.check_layer`).

Relation-aware layers (typed graphs, see :mod:`.typed`) register with ``typed=True``: their zoo
names are listed in :data:`TYPED_ZOO` (not :data:`ZOO`, the homogeneous zoo), and
:func:`is_typed_spec` tells whether a spec builds one (``rgcn``, ``hgt``, ``rel:<spec>``, an import
path whose class sets ``needs_edge_type``).

Edge features (docs/targets_and_edge_features.md, section 5): zoo layers registered with
``edges=True`` (:data:`EDGE_ZOO`) take ``edge_dim`` and read ``edge_attr``; an import path's class
is built with ``edge_dim`` when its constructor takes one. :func:`build_conv`'s ``edge_dim`` (De,
0: none) is passed so, and the probe of an import-path layer then gets an ``edge_attr``.
"""
from __future__ import annotations

import difflib
from typing import Any, Callable

from torch import nn

from gnnscale.nn.layers.contract import LayerError, check_layer, construct, load_layer_class, takes_edge_dim
from gnnscale.nn.layers.typed import check_typed_layer

#: Zoo names accepted by :func:`build_conv`, with a one-line description (for ``--help``).
ZOO: dict[str, str] = {}
#: Zoo names of relation-aware layers (typed graphs only), with a one-line description.
TYPED_ZOO: dict[str, str] = {}
#: Zoo names whose builder takes ``edge_dim`` (De) and whose layer then reads ``edge_attr``.
EDGE_ZOO: set[str] = set()
# name -> builder(spec, in_dim, out_dim, index, num_layers, **kwargs) -> nn.Module
_BUILDERS: dict[str, Callable[..., nn.Module]] = {}
# prefix -> (builder, passes index/num_layers, builds relation-aware layers)
_PREFIXES: dict[str, tuple[Callable[..., nn.Module], bool, bool]] = {}


def register(name: str, description: str, typed: bool = False, edges: bool = False) -> Callable:
    """Decorator: ``builder(spec, in_dim, out_dim, index=i, num_layers=L, **kwargs)`` builds the
    zoo layer ``name`` (lower case), described by ``description`` in ``--help``. ``typed``: a
    relation-aware layer (listed in :data:`TYPED_ZOO`). ``edges``: the builder takes
    ``edge_dim=De`` (De > 0) and the layer it then builds reads ``edge_attr`` (:data:`EDGE_ZOO`)."""
    def wrap(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        (TYPED_ZOO if typed else ZOO)[name] = description
        if edges:
            EDGE_ZOO.add(name)
        _BUILDERS[name] = builder
        return builder
    return wrap


def register_prefix(prefix: str, positional: bool = False, typed: bool = False) -> Callable:
    """Decorator: ``builder(spec, class_name, in_dim, out_dim, **kwargs)`` builds ``prefix:ClassName`` specs
    (``positional``: also ``index=i, num_layers=L``; ``typed``: the layers are relation-aware)."""
    def wrap(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        _PREFIXES[prefix] = (builder, positional, typed)
        return builder
    return wrap


def spec_help() -> str:
    """How a layer spec may be written (for ``--help`` and errors)."""
    return ("a zoo name (" + ", ".join(ZOO) + "), an import path 'package.module:ClassName' "
            "(built as ClassName(in_dim, out_dim, **kwargs)), or 'dgl:ClassName' (dgl.nn.ClassName, needs DGL); "
            "on typed graphs a relation-aware layer (" + ", ".join(TYPED_ZOO) + ") or 'rel:<spec>' (one layer "
            "<spec> per relation, summed per destination type)")


def is_typed_spec(spec: str) -> bool:
    """Whether ``spec`` builds a relation-aware layer (one that sets ``needs_edge_type``).

    Raises:
        LayerError: an import path that cannot be loaded.
    """
    if not isinstance(spec, str):
        return False
    spec = spec.strip()
    if spec.lower() in _BUILDERS:
        return spec.lower() in TYPED_ZOO
    prefix, sep, _ = spec.partition(":")
    if sep and prefix.lower() in _PREFIXES:
        return _PREFIXES[prefix.lower()][2]
    if sep:
        return bool(getattr(load_layer_class(spec), "needs_edge_type", False))
    return False


def build_conv(spec: str, in_dim: int, out_dim: int, *, index: int, num_layers: int, edge_dim: int = 0,
               **kwargs: Any) -> nn.Module:
    """Build one message-passing layer that follows the layer contract.

    Args:
        spec: a zoo name (:data:`ZOO`, :data:`TYPED_ZOO`), an import path
            ``"package.module:ClassName"``, ``"dgl:ClassName"`` or ``"rel:<spec>"``.
        in_dim: input feature size. out_dim: output feature size.
        index: 0-based position of the layer. num_layers: number of layers. GAT's
            last layer (``index == num_layers - 1``) averages its heads; GCNII's beta
            uses ``layer = index + 1``.
        **kwargs: layer options: ``heads`` (gat, gat-pyg; default 4), ``alpha``/``theta``/
            ``shared_weights`` (gcnii), ``train_eps`` (gin), any option of the
            underlying PyG conv; for an import path, passed as
            ``ClassName(in_dim, out_dim, **kwargs)``.

        Relation-aware layers (:data:`TYPED_ZOO`, ``rel:<spec>``) also take the graph's types:
            ``num_relations``, ``num_node_types``, ``relations`` (see :mod:`.typed`).
        edge_dim: De, the edge features per edge (0: none). A zoo layer of :data:`EDGE_ZOO` and an
            import-path class whose constructor takes ``edge_dim`` are built with it; the others
            ignore it (the model passes ``edge_attr`` only to layers whose forward takes it).

    Returns:
        the layer, called as ``layer((x_src, x_dst), edge_index)`` (plus ``x0=`` when
        its ``needs_x0`` is True; plus ``edge_type=, node_type=`` when its
        ``needs_edge_type`` is True) -> float32 [D, out_dim].

    Raises:
        LayerError: unknown spec, bad sizes or options, or a layer that breaks the contract.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise LayerError(f"expected a layer spec: {spec_help()}; found {spec!r}")
    spec = spec.strip()
    for name, value in (("in_dim", in_dim), ("out_dim", out_dim), ("num_layers", num_layers)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise LayerError(f"layer {spec!r}: {name} must be a positive int, found {value!r}")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < num_layers:
        raise LayerError(f"layer {spec!r}: index must be in 0..{num_layers - 1} (num_layers={num_layers}), found {index!r}")
    if "edge_dim" in kwargs:
        raise LayerError(f"layer {spec!r}: edge_dim is the partition's edge feature size, which the model passes its "
                         "layers itself (--edge-features); leave it out of the layer options")
    if isinstance(edge_dim, bool) or not isinstance(edge_dim, int) or edge_dim < 0:
        raise LayerError(f"layer {spec!r}: edge_dim must be an int >= 0 (0: no edge features), found {edge_dim!r}")
    name = spec.lower()
    if name in _BUILDERS:
        if edge_dim and name in EDGE_ZOO:
            kwargs["edge_dim"] = edge_dim
        return _BUILDERS[name](spec, in_dim, out_dim, index=index, num_layers=num_layers, **kwargs)
    prefix, sep, cls_name = spec.partition(":")
    if sep and prefix.lower() in _PREFIXES:
        builder, positional, _ = _PREFIXES[prefix.lower()]
        if positional:
            return builder(spec, cls_name.strip(), in_dim, out_dim, index=index, num_layers=num_layers, **kwargs)
        return builder(spec, cls_name.strip(), in_dim, out_dim, **kwargs)
    if sep:
        cls = load_layer_class(spec)
        if edge_dim and takes_edge_dim(cls):
            kwargs["edge_dim"] = edge_dim
        layer = construct(spec, cls.__qualname__, cls, in_dim, out_dim, **kwargs)
        if getattr(layer, "needs_edge_type", False):
            check_typed_layer(layer, in_dim, out_dim, spec, kwargs.get("num_node_types", 1), kwargs.get("relations"))
        else:
            check_layer(layer, in_dim, out_dim, spec, edge_dim=edge_dim)
        return layer
    close = difflib.get_close_matches(name, list(ZOO) + list(TYPED_ZOO), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise LayerError(f"unknown layer {spec!r}{hint}; expected {spec_help()}")
