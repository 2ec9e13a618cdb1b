"""DGL block modules (``dgl:ClassName``) behind the layer contract; DGL is optional and imported lazily."""
from __future__ import annotations

import inspect
from typing import Any, Optional

from torch import Tensor, nn

from gnnscale.config import DGL_ADVICE
from gnnscale.nn.layers.contract import LayerError, check_layer, construct, split_input
from gnnscale.nn.layers.registry import register_prefix

_DGL_MISSING = f"DGL does not load here: {DGL_ADVICE}"


def _import_dgl() -> Any:
    """``import dgl`` or raise :class:`LayerError` with the install hint."""
    try:
        import dgl  # noqa: PLC0415  (optional dependency, imported lazily)
        import dgl.nn  # noqa: F401,PLC0415
    except ImportError as exc:
        raise LayerError(f"{_DGL_MISSING} (import dgl failed: {exc})") from exc
    except Exception as exc:  # a broken install (wrong torch ABI, missing .so) fails with other errors
        raise LayerError(f"{_DGL_MISSING}; DGL is installed but does not load: {type(exc).__name__}: {exc}") from exc
    return dgl


class DGLLayerAdapter(nn.Module):
    """Makes a DGL block module (e.g. ``dgl.nn.SAGEConv``) follow the layer contract.

    ``forward((x_src, x_dst), edge_index)`` builds ``dgl.create_block((edge_index[0],
    edge_index[1]), num_src_nodes=S, num_dst_nodes=D)`` and returns
    ``module(block, (x_src, x_dst))``. DGL is imported lazily; without it the
    constructor raises :class:`LayerError`.

    Args:
        module: a DGL nn module called as ``module(block, (feat_src, feat_dst))``.
    """

    needs_x0 = False

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        _import_dgl()  # fail early, with the install hint
        self.module = module

    def forward(
        self, x: Tensor | tuple[Tensor, Tensor], edge_index: Tensor, size: Optional[tuple[int, int]] = None
    ) -> Tensor:
        """Args:
            x: ``(x_src, x_dst)`` float32 [S, F], [D, F]. edge_index: int64 [2, M].
            size: optional ``(S, D)``.

        Returns:
            what the DGL module returns, [D, out_dim] for the usual convs.
        """
        dgl = _import_dgl()  # cached in sys.modules after the first import
        x_src, x_dst = split_input(x, size)
        block = dgl.create_block(
            (edge_index[0], edge_index[1]),
            num_src_nodes=x_src.size(0),
            num_dst_nodes=x_dst.size(0),
            device=x_src.device,
        )
        return self.module(block, (x_src, x_dst))



@register_prefix("dgl")
def _dgl(spec: str, cls_name: str, in_dim: int, out_dim: int, **kwargs: Any) -> nn.Module:
    dgl = _import_dgl()
    cls = getattr(dgl.nn, cls_name, None)
    if not (inspect.isclass(cls) and issubclass(cls, nn.Module)):
        known = [n for n in dir(dgl.nn) if n.endswith("Conv")][:12]
        raise LayerError(f"layer {spec!r}: dgl.nn has no module class {cls_name!r}; it has: {', '.join(known)}, ...")
    if cls_name == "SAGEConv":
        kwargs.setdefault("aggregator_type", "mean")
    layer = DGLLayerAdapter(construct(spec, f"dgl.nn.{cls_name}", cls, in_dim, out_dim, **kwargs))
    check_layer(layer, in_dim, out_dim, spec)
    return layer
