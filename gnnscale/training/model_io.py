"""A trained model on disk: ``--save-model FILE`` writes it, :func:`load_model` reads it back as
a plain ``torch.nn.Module`` for one machine (no process group, no partition).

The file (``torch.save`` of a dict, format ``gnnscale-model/1``) holds the weights, the layer
spec and every option that builds the model (hidden size, layers, norm, residual, jumping
knowledge, dropout), the feature and class counts, the dataset's name and the run's options
(fanouts and evaluation settings, which ``gnnscale evaluate`` reuses).
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import asdict
from typing import Any

import torch

from gnnscale.errors import GnnscaleError
from gnnscale.nn.models import GNN, layer_name
from gnnscale.nn.spec import ModelSpec
from gnnscale.training.checkpoint import write_file

FORMAT = "gnnscale-model/1"


class ModelFileError(GnnscaleError):
    """A model file that cannot be read or does not fit the data it is used on."""


def config_record(cfg) -> dict[str, Any]:
    """A run's :class:`~gnnscale.config.TrainConfig` as plain data (fanouts a list, the layer a
    printable spec): what a checkpoint, a saved model and the metrics keep of the run."""
    out = asdict(cfg) | {"fanouts": list(cfg.fanouts), "layer": layer_name(cfg.layer)}
    if getattr(cfg, "model", None) is not None:  # a user's model class: its import path
        out["model"] = layer_name(cfg.model)
    return out


def save_model(path: str | os.PathLike, net: GNN, spec: ModelSpec, cfg, meta: dict) -> None:
    """Write the whole model ``net`` (built from ``spec``; ``cfg`` the run's options, ``meta`` its
    partition's) to ``path`` atomically."""
    spec = spec.record()
    config = config_record(cfg)
    blob = {"format": FORMAT, "spec": spec, "state": {k: v.detach().cpu() for k, v in net.state_dict().items()},
            "dataset": meta.get("dataset"), "num_features": spec["in_dim"], "num_classes": spec["out_dim"],
            "config": config}
    path = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        write_file(tmp, blob)
        os.replace(tmp, path)
    except BaseException:  # no half-written file left behind (a full disk, a folder removed meanwhile)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_model_file(path: str | os.PathLike) -> dict:
    """The saved dict (see the module docstring), checked."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelFileError(f"model file {path} not found; write one with `gnnscale train ... --save-model {path}`")
    try:
        blob = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001 - any unpickling failure is a bad file
        raise ModelFileError(f"{path} is not a readable model file ({type(err).__name__}: {err})") from err
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        found = blob.get("format") if isinstance(blob, dict) else type(blob).__name__
        raise ModelFileError(f"{path}: expected a {FORMAT} file written by --save-model; found {found!r}")
    return blob


def load_model(path: str | os.PathLike) -> GNN:
    """The model saved at ``path`` as a plain ``torch.nn.Module`` (a :class:`~gnnscale.nn.models.GNN`
    in eval mode, on the CPU): ``model(x, blocks)`` for sampled blocks, or
    :func:`predict_full_graph` for every node of a graph."""
    blob = read_model_file(path)
    model = ModelSpec(**blob["spec"]).build()
    model.load_state_dict(blob["state"])
    return model.eval()


@torch.no_grad()
def predict_full_graph(model: GNN, x: torch.Tensor, edge_index: torch.Tensor,
                       edge_attr: torch.Tensor | None = None) -> torch.Tensor:
    """Logits float32 [N, C] of every node, layer by layer over full neighbourhoods (one block
    holding the whole graph: every node a source and a destination).

    Args:
        x: float32 [N, F] features. edge_index: int64 [2, E] (row 0 source, row 1 target).
        edge_attr: float32 [E, De] aligned with ``edge_index``: required by a model that reads
            edge features (``model.uses_edge_attr``), unused otherwise.
    """
    from gnnscale.samplers.block import Block

    model.eval()
    n = int(x.shape[0])
    if hasattr(model, "full_graph"):  # a user's whole model (gnnscale.nn.user_model): once over the graph
        return model.full_graph(x, edge_index, edge_attr)
    want = model.encoder.in_features if model.encoder is not None else model.dims[0]
    if x.dim() != 2 or x.shape[1] != want:
        raise ModelFileError(f"the model takes {want} input features per node; the graph has {tuple(x.shape)}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= n):
        raise ModelFileError(f"edge_index holds ids outside [0, {n})")
    from gnnscale.nn.inference import graph_inference

    attr = None
    if model.uses_edge_attr:
        if edge_attr is None or tuple(edge_attr.shape) != (int(edge_index.shape[1]), model.edge_dim):
            found = "none" if edge_attr is None else f"shape {tuple(edge_attr.shape)}"
            raise ModelFileError(f"the model reads {model.edge_dim} edge features per edge, expected edge_attr "
                                 f"[{int(edge_index.shape[1])}, {model.edge_dim}], found {found}; predict on the "
                                 "dataset the model was trained on (with its edge features)")
        attr = edge_attr.to(torch.float32)
    degree = torch.bincount(edge_index[1], minlength=n)
    ids = torch.arange(n, dtype=torch.int64)
    return graph_inference(model, [Block(ids, ids, edge_index, edge_attr=attr)], x,
                           degree if model.uses_degree else None)


def describe(blob: dict) -> str:
    spec = blob["spec"]
    return (f"{spec['layer']} x {spec['num_layers']} layers, hidden {spec['hidden']}, {spec['in_dim']} features, "
            f"{spec['out_dim']} classes, trained on {blob.get('dataset')}")


@torch.no_grad()
def predict_typed_graph(model: GNN, data) -> torch.Tensor:
    """Logits float32 [N, C] of every node of a typed dataset (docs/typed_graphs.md section 1),
    layer by layer over full neighbourhoods: each type's rows from ``data.x_dict``, the learned
    tables (in the dataset's order) for the types without features, one block with every edge's
    relation."""
    from gnnscale.nn.inference import graph_inference
    from gnnscale.samplers.block import Block, TypedInput

    model.eval()
    if getattr(model, "typed_encoder", None) is None:
        raise ModelFileError("the model was trained on an untyped graph; the dataset is typed (node and edge types)")
    names = list(data.node_types)
    if list(model.node_types or names) != names:
        raise ModelFileError(f"the model's node types {model.node_types} are not the dataset's {names}; predict with "
                             "the dataset the model was trained on")
    node_type = data.node_type
    type_index = torch.arange(node_type.numel(), dtype=torch.int64) - data.type_ptr[node_type]
    rows = {t: data.x_dict[name].float() for t, name in enumerate(names) if name in data.x_dict}
    ids = torch.arange(node_type.numel(), dtype=torch.int64)
    block = Block(ids, ids, data.edge_index, edge_type=data.edge_type, node_type=node_type)
    return graph_inference(model, [block], TypedInput(node_type, type_index, rows), None)
