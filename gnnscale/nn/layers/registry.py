"""The layer registry: zoo names, how a spec is written, and :func:`build_conv`.

Each layer module registers its zoo names with :func:`register` when it is imported (the
package ``gnnscale.nn.layers`` imports them all); :func:`build_conv` looks a spec up here:
a zoo name, ``dgl:ClassName`` (:mod:`.dgl`) or an import path ``package.module:ClassName``
(:func:`~gnnscale.nn.layers.contract.load_layer_class`, probed by
:func:`~gnnscale.nn.layers.contract.check_layer`).
"""
from __future__ import annotations

import difflib
from typing import Any, Callable

from torch import nn

from gnnscale.nn.layers.contract import LayerError, check_layer, construct, load_layer_class

#: Zoo names accepted by :func:`build_conv`, with a one-line description (for ``--help``).
ZOO: dict[str, str] = {}
# name -> builder(spec, in_dim, out_dim, index, num_layers, **kwargs) -> nn.Module
_BUILDERS: dict[str, Callable[..., nn.Module]] = {}
_PREFIXES: dict[str, Callable[..., nn.Module]] = {}


def register(name: str, description: str) -> Callable:
    """Decorator: ``builder(spec, in_dim, out_dim, index=i, num_layers=L, **kwargs)`` builds the
    zoo layer ``name`` (lower case), described by ``description`` in ``--help``."""
    def wrap(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        ZOO[name] = description
        _BUILDERS[name] = builder
        return builder
    return wrap


def register_prefix(prefix: str) -> Callable:
    """Decorator: ``builder(spec, class_name, in_dim, out_dim, **kwargs)`` builds ``prefix:ClassName`` specs."""
    def wrap(builder: Callable[..., nn.Module]) -> Callable[..., nn.Module]:
        _PREFIXES[prefix] = builder
        return builder
    return wrap


def spec_help() -> str:
    """How a layer spec may be written (for ``--help`` and errors)."""
    return ("a zoo name (" + ", ".join(ZOO) + "), an import path 'package.module:ClassName' "
            "(built as ClassName(in_dim, out_dim, **kwargs)), or 'dgl:ClassName' (dgl.nn.ClassName, needs DGL)")


def build_conv(spec: str, in_dim: int, out_dim: int, *, index: int, num_layers: int, **kwargs: Any) -> nn.Module:
    """Build one message-passing layer that follows the layer contract.

    Args:
        spec: a zoo name (:data:`ZOO`), an import path ``"package.module:ClassName"``
            or ``"dgl:ClassName"``.
        in_dim: input feature size. out_dim: output feature size.
        index: 0-based position of the layer. num_layers: number of layers. GAT's
            last layer (``index == num_layers - 1``) averages its heads; GCNII's beta
            uses ``layer = index + 1``.
        **kwargs: layer options: ``heads`` (gat, gat-pyg; default 4), ``alpha``/``theta``/
            ``shared_weights`` (gcnii), ``train_eps`` (gin), any option of the
            underlying PyG conv; for an import path, passed as
            ``ClassName(in_dim, out_dim, **kwargs)``.

    Returns:
        the layer, called as ``layer((x_src, x_dst), edge_index)`` (plus ``x0=`` when
        its ``needs_x0`` is True) -> float32 [D, out_dim].

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
    name = spec.lower()
    if name in _BUILDERS:
        return _BUILDERS[name](spec, in_dim, out_dim, index=index, num_layers=num_layers, **kwargs)
    prefix, sep, cls_name = spec.partition(":")
    if sep and prefix.lower() in _PREFIXES:
        return _PREFIXES[prefix.lower()](spec, cls_name.strip(), in_dim, out_dim, **kwargs)
    if sep:
        cls = load_layer_class(spec)
        layer = construct(spec, cls.__qualname__, cls, in_dim, out_dim, **kwargs)
        check_layer(layer, in_dim, out_dim, spec)
        return layer
    close = difflib.get_close_matches(name, list(ZOO), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise LayerError(f"unknown layer {spec!r}{hint}; expected {spec_help()}")
