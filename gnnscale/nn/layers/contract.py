"""The layer contract: a layer is any module called as ``layer((x_src, x_dst), edge_index)``.

:func:`check_layer` probes a layer once on a tiny block; :func:`load_layer_class` imports a
class from ``package.module:ClassName``; every bad spec raises :class:`LayerError` saying what
was expected, what was found and how to fix it. See :mod:`gnnscale.nn.layers` for the contract.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import os
import sys
from typing import Any, Optional

import torch
from torch import Tensor, nn

from gnnscale.errors import GnnscaleError


class LayerError(GnnscaleError):
    """A layer spec is unknown, cannot be imported or built, or breaks the layer contract."""


_SIGNATURE = "forward(self, x: tuple[Tensor, Tensor], edge_index: Tensor) -> Tensor"


def import_from_here(mod_name: str):
    """``importlib.import_module(mod_name)``, the working folder searched too, as ``python -m`` does: a
    layer file ``mylayers.py`` beside the user is found by ``--layer mylayers:MyConv`` from the
    ``gnnscale`` command (whose own folder, not the working one, heads ``sys.path``) and in every
    worker (each started in the same folder). The working folder comes after the installed packages,
    so it shadows none of them, and is added only for a module found nowhere else.

    Raises:
        ImportError: the module is found neither on ``sys.path`` nor in the working folder.
    """
    try:
        return importlib.import_module(mod_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        top = mod_name.split(".")[0]
        if exc.name != top or "" in sys.path or any(os.path.abspath(p) == here for p in sys.path if p):
            raise
        if not (os.path.isfile(os.path.join(here, top + ".py")) or os.path.isdir(os.path.join(here, top))):
            raise
        sys.path.append(here)
        importlib.invalidate_caches()
        return importlib.import_module(mod_name)

def split_input(x: Tensor | tuple[Tensor, Tensor], size: Optional[tuple[int, int]]) -> tuple[Tensor, Tensor]:
    """``(x_src, x_dst)`` from a tuple or a single tensor (then S == D, or D = size[1])."""
    if isinstance(x, Tensor):
        x_src = x
        num_dst = x.size(0) if size is None else int(size[1])
        x_dst = x[:num_dst]
    else:
        x_src, x_dst = x
        if x_dst is None:
            if size is None:
                raise LayerError("x_dst is None and no size=(S, D) was given: cannot tell the number of destinations")
            x_dst = x_src[: int(size[1])]
    if x_src.dim() != 2 or x_dst.dim() != 2:
        raise LayerError(
            f"expected x_src [S, F] and x_dst [D, F] (2-D), found shapes {tuple(x_src.shape)} and {tuple(x_dst.shape)}"
        )
    if x_dst.size(0) > x_src.size(0):
        raise LayerError(
            f"a block's destinations are its first D sources, so D <= S; found S={x_src.size(0)}, D={x_dst.size(0)}"
        )
    if size is not None and (int(size[0]), int(size[1])) != (x_src.size(0), x_dst.size(0)):
        raise LayerError(f"size={tuple(size)} does not match x_src/x_dst with S={x_src.size(0)}, D={x_dst.size(0)}")
    return x_src, x_dst


def _describe(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}".removeprefix("builtins.")


def load_layer_class(path: str) -> type:
    """Import a layer class from ``"package.module:ClassName"``.

    ``ClassName`` may be dotted (``"pkg.mod:Outer.Inner"``).

    Args:
        path: the import path.

    Returns:
        the class, an ``nn.Module`` subclass.

    Raises:
        LayerError: no colon, module not importable, attribute missing, attribute not
            a class, or not an ``nn.Module`` subclass.
    """
    if not isinstance(path, str) or ":" not in path:
        raise LayerError(
            f"expected a layer import path 'package.module:ClassName', found {path!r} (no ':'); "
            "write e.g. 'mypkg.layers:MyConv', or use a zoo name (`gnnscale train --help` lists them under --layer)"
        )
    mod_name, _, attr_path = path.partition(":")
    mod_name, attr_path = mod_name.strip(), attr_path.strip()
    if not mod_name or not attr_path:
        raise LayerError(
            f"expected a layer import path 'package.module:ClassName', found {path!r} "
            f"(empty {'module' if not mod_name else 'class'} part); write e.g. 'mypkg.layers:MyConv'"
        )
    try:
        module = import_from_here(mod_name)
    except ImportError as exc:
        raise LayerError(
            f"layer {path!r}: cannot import module {mod_name!r} (searched the working folder {os.getcwd()} too): "
            f"{type(exc).__name__}: {exc}; check the spelling, install the package, or put its folder on PYTHONPATH"
        ) from exc
    except Exception as exc:  # the module exists but fails while importing
        raise LayerError(
            f"layer {path!r}: importing module {mod_name!r} failed: {type(exc).__name__}: {exc}; fix the module"
        ) from exc

    obj: Any = module
    walked = mod_name
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            names = [n for n in dir(obj) if not n.startswith("_")]
            modules = [n for n in names if inspect.isclass(getattr(obj, n, None)) and issubclass(getattr(obj, n), nn.Module)]
            close = difflib.get_close_matches(part, names, n=3)
            pool = modules or names
            shown = list(dict.fromkeys(difflib.get_close_matches(part, pool, n=5, cutoff=0.4) + pool))[:10]
            more = f" (of {len(pool)})" if len(pool) > len(shown) else ""
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise LayerError(
                f"layer {path!r}: {walked!r} has no attribute {part!r}{hint}; it has "
                f"{'nn.Module classes' if modules else 'names'}{more}: {', '.join(shown) or '(none)'}; "
                "fix the class name after the ':'"
            )
        obj = getattr(obj, part)
        walked = f"{walked}:{part}" if walked == mod_name else f"{walked}.{part}"

    if not inspect.isclass(obj):
        raise LayerError(
            f"layer {path!r}: expected a class (an nn.Module subclass), found a {_describe(obj)} ({obj!r:.60}); "
            "point the path at the layer class"
        )
    if not issubclass(obj, nn.Module):
        bases = ", ".join(b.__qualname__ for b in obj.__mro__[1:])
        raise LayerError(
            f"layer {path!r}: expected an nn.Module subclass, found class {obj.__qualname__} (bases: {bases}); "
            "a layer must derive from torch.nn.Module (e.g. torch_geometric.nn.MessagePassing)"
        )
    return obj


def takes_edge_dim(cls: type) -> bool:
    """Whether the layer class's constructor takes ``edge_dim`` (PyG's GATConv, GATv2Conv,
    TransformerConv, GENConv, GINEConv, a user's): it is then built with the edge feature size."""
    try:
        return "edge_dim" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def forward_takes_edge_attr(layer: nn.Module | type) -> bool:
    """Whether the layer's (or layer class's) ``forward`` has an ``edge_attr`` parameter: it is
    then called with ``edge_attr=`` float32 [M, De] when the model has edge features."""
    try:
        return "edge_attr" in inspect.signature(layer.forward).parameters
    except (TypeError, ValueError):
        return False


def check_layer(layer: nn.Module, in_dim: int, out_dim: int, spec: str, edge_dim: int = 0) -> None:
    """Run ``layer`` once on a tiny probe block and check it follows the layer contract.

    The probe has S=4 sources, D=2 destinations and 3 edges, float32 features on the
    layer's device. The layer runs in eval mode under ``torch.no_grad``; the training
    mode of each submodule is restored afterwards. ``needs_x0`` layers also get
    ``x0`` float32 [D, out_dim]; with ``edge_dim`` > 0, layers whose forward takes
    ``edge_attr`` get ``edge_attr`` float32 [3, edge_dim].

    Args:
        layer: the layer. in_dim / out_dim: the sizes it was built for.
        spec: how the user named it (for messages).

    Raises:
        LayerError: the call raised (TypeError: wrong signature; anything else: the
            exception text), or the output is not a Tensor [D, out_dim].
    """
    param = next(iter(layer.parameters()), None)
    device = param.device if param is not None else torch.device("cpu")
    gen = torch.Generator().manual_seed(0)
    num_src, num_dst = 4, 2
    x_src = torch.randn(num_src, in_dim, generator=gen).to(device)
    x_dst = x_src[:num_dst]
    edge_index = torch.tensor([[2, 3, 1], [0, 1, 0]], dtype=torch.long, device=device)
    needs_x0 = bool(getattr(layer, "needs_x0", False))
    kwargs: dict[str, Tensor] = {}
    if needs_x0:
        kwargs["x0"] = torch.randn(num_dst, out_dim, generator=gen).to(device)
    if edge_dim and forward_takes_edge_attr(layer):
        kwargs["edge_attr"] = torch.rand(3, edge_dim, generator=gen).to(device)
    call = "layer((x_src, x_dst), edge_index" + (", x0=x0_dst" if needs_x0 else "") + \
        (", edge_attr=edge_attr)" if "edge_attr" in kwargs else ")")
    expected = _SIGNATURE if not needs_x0 else _SIGNATURE.replace("edge_index: Tensor)", "edge_index: Tensor, x0: Tensor)")
    probe = f"probe block S={num_src}, D={num_dst}, 3 edges, in_dim={in_dim}"

    modes = [(m, m.training) for m in layer.modules()]
    layer.eval()
    try:
        with torch.no_grad():
            out = layer((x_src, x_dst), edge_index, **kwargs)
    except LayerError:
        raise
    except TypeError as exc:
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) cannot be called as {call}: TypeError: {exc}; "
            f"a layer must have {expected} returning [D, out_dim]"
        ) from exc
    except Exception as exc:
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) failed on a {probe}: {type(exc).__name__}: {exc}; "
            f"a layer must have {expected} and accept bipartite input (x_src [S, in_dim], x_dst [D, in_dim])"
        ) from exc
    finally:
        for module, training in modes:
            module.training = training

    if not isinstance(out, Tensor):
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) returned a {_describe(out)}, expected a Tensor "
            f"[D, out_dim]; {expected}"
        )
    heads = getattr(layer, "heads", 1)
    if tuple(out.shape) != (num_dst, out_dim) and getattr(layer, "concat", False) is True and isinstance(heads, int) \
            and heads > 1 and tuple(out.shape) == (num_dst, heads * out_dim):  # PyG's GATConv, TransformerConv, ...
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) returned shape {tuple(out.shape)} on a {probe}: its {heads} "
            f"heads of {out_dim} concatenated, where the model needs [D, out_dim] = [{num_dst}, {out_dim}]; pass "
            f"concat=False with the layer options (--layer-kwargs '{{\"heads\": {heads}, \"concat\": false}}') to "
            "average the heads, or use --layer gat-pyg (PyG's GATConv, each hidden layer's heads of out_dim // heads "
            "concatenated)"
        )
    if tuple(out.shape) != (num_dst, out_dim):
        raise LayerError(
            f"layer {spec!r} ({type(layer).__qualname__}) returned shape {tuple(out.shape)} on a {probe}, "
            f"expected [D, out_dim] = [{num_dst}, {out_dim}]; it must return one row per destination"
        )



def construct(spec: str, what: str, factory: Any, *args: Any, **kwargs: Any) -> nn.Module:
    """Call ``factory(*args, **kwargs)``, turning a bad-argument TypeError into a LayerError."""
    try:
        return factory(*args, **kwargs)
    except LayerError:
        raise
    except TypeError as exc:
        raise LayerError(
            f"layer {spec!r}: could not build {what}({', '.join(map(repr, args))}"
            f"{', ' if args and kwargs else ''}{', '.join(f'{k}={v!r}' for k, v in kwargs.items())}): "
            f"TypeError: {exc}; check the layer options (an import-path class must take (in_dim, out_dim, **kwargs))"
        ) from exc

