"""The one model builder: a :class:`ModelSpec` (what the model is) builds the :class:`~gnnscale.nn.models.GNN`.

Every mode builds its model here (data-parallel workers, pipeline stages, chunk stages,
evaluation, ``--save-model`` files and :func:`gnnscale.load_model`), so that the same spec and
seed give the same initial weights on every rank and in every process.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from gnnscale.nn.models import GNN, layer_name


@dataclass(frozen=True)
class ModelSpec:
    """Everything that builds a model.

    Attributes:
        in_dim: input features F. hidden: H. out_dim: classes C. num_layers: L.
        layer: a zoo name, ``module:Class`` or a layer class. layer_kwargs: the layers' options.
        dropout, norm, residual, jk: as :class:`~gnnscale.nn.models.GNN`.
    """

    in_dim: int
    hidden: int
    out_dim: int
    num_layers: int
    layer: object = "sage"
    layer_kwargs: dict = field(default_factory=dict)
    dropout: float = 0.5
    norm: str = "none"
    residual: bool = False
    jk: str = "none"

    @staticmethod
    def of(cfg, feature_dim: int, num_classes: int, num_layers: int | None = None) -> "ModelSpec":
        """The spec of a run's :class:`~gnnscale.config.TrainConfig` on data of ``feature_dim``
        features and ``num_classes`` classes (``num_layers``: default ``cfg.model_layers()``)."""
        return ModelSpec(int(feature_dim), int(cfg.hidden), int(num_classes),
                         int(num_layers if num_layers is not None else cfg.model_layers()), cfg.layer,
                         dict(cfg.layer_kwargs), float(cfg.dropout), cfg.norm, bool(cfg.residual), cfg.jk)

    def build(self, seed: int | None = None) -> GNN:
        """The model; with ``seed``, torch's generator is seeded first (identical weights everywhere)."""
        if seed is not None:
            torch.manual_seed(seed)
        return GNN(self.in_dim, self.hidden, self.out_dim, num_layers=self.num_layers, layer=self.layer,
                   layer_kwargs=dict(self.layer_kwargs), dropout=self.dropout, norm=self.norm,
                   residual=self.residual, jk=self.jk)

    def record(self) -> dict:
        """Plain data (the layer as a printable spec): what a model file keeps."""
        return asdict(self) | {"layer": layer_name(self.layer), "layer_kwargs": dict(self.layer_kwargs)}
