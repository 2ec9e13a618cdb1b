"""Balance constraints -> METIS vertex-weight matrix.

Each named constraint is one weight column; METIS keeps the per-part sum of every column
balanced. Known constraints:

- ``"nodes"``: weight 1 per node (equal node counts),
- ``"train"``: 1 for training nodes (equal numbers of training seeds per part),
- ``"val"`` / ``"test"``: 1 for validation / test nodes,
- ``"edges"``: the node's in-degree (equal numbers of in-edges, i.e. of aggregation work).

On a typed graph (``data.node_types``, see ``docs/typed_graphs.md``) ``"nodes"`` becomes one
column per node type (every part gets its share of every type), and ``"train"`` counts the
target type's training nodes (the only ones in ``train_mask``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from gnnscale.errors import PartitionError
from gnnscale.partitioning.typed import is_typed, type_columns

if TYPE_CHECKING:  # torch_geometric costs 2 s to import; workers never need it
    from torch_geometric.data import Data

BALANCE_CONSTRAINTS = ("nodes", "train", "val", "test", "edges")


def _mask(data: Data, name: str) -> np.ndarray:
    mask = getattr(data, name, None)
    if mask is None:
        raise PartitionError(
            f"expected data.{name} (bool [N]) for the balance constraint, found none; "
            f"add the mask or drop the constraint from balance"
        )
    mask = torch.as_tensor(mask).detach().cpu()
    if mask.shape != (data.num_nodes,):
        raise PartitionError(
            f"expected data.{name} of shape [{data.num_nodes}], found {tuple(mask.shape)}"
        )
    return mask.numpy().astype(np.int64)


def build_vertex_weights(data: Data, balance: Sequence[str]) -> np.ndarray | None:
    """One integer weight column per balance constraint.

    Args:
        data: the graph (uses ``num_nodes``, ``edge_index`` and the masks as needed).
        balance: constraint names, see :data:`BALANCE_CONSTRAINTS`; duplicates are ignored.

    Returns:
        int64 ``[N, len(balance)]`` (on a typed graph with T node types, ``"nodes"`` is T
        columns, one per type, in its place), or None when ``balance`` is empty (METIS then
        balances node counts).
    """
    if isinstance(balance, str):
        balance = (balance,)
    names = list(dict.fromkeys(balance))
    unknown = [b for b in names if b not in BALANCE_CONSTRAINTS]
    if unknown:
        raise PartitionError(
            f"expected balance constraints from {list(BALANCE_CONSTRAINTS)}, found unknown "
            f"{unknown}; fix the --balance option"
        )
    if not names:
        return None
    n = int(data.num_nodes)
    num_t = len(data.node_types) if "nodes" in names and is_typed(data) else 0
    out = np.empty((n, len(names) + max(num_t - 1, 0)), dtype=np.int64)
    j = 0
    for name in names:  # loop over constraints (a handful), not nodes
        if name == "nodes" and num_t:
            type_columns(data, out=out[:, j : j + num_t])
            j += num_t
            continue
        if name == "nodes":
            out[:, j] = 1
        elif name == "edges":
            dst = torch.as_tensor(data.edge_index[1]).detach().cpu().numpy()
            out[:, j] = np.bincount(dst, minlength=n)[:n]
        else:
            out[:, j] = _mask(data, f"{name}_mask")
        j += 1
    return out
