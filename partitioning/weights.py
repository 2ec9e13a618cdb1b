"""Balance constraints -> METIS vertex-weight matrix.

Each named constraint is one weight column; METIS keeps the per-part sum of every column
balanced. Known constraints:

- ``"nodes"``: weight 1 per node (equal node counts),
- ``"train"``: 1 for training nodes (equal numbers of training seeds per part),
- ``"val"`` / ``"test"``: 1 for validation / test nodes,
- ``"edges"``: the node's in-degree (equal numbers of in-edges, i.e. of aggregation work).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from gnnscale.errors import PartitionError

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
        int64 ``[N, len(balance)]``, or None when ``balance`` is empty (METIS then balances
        node counts).
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
    out = np.empty((n, len(names)), dtype=np.int64)
    for j, name in enumerate(names):  # loop over constraints (a handful), not nodes
        if name == "nodes":
            out[:, j] = 1
        elif name == "edges":
            dst = torch.as_tensor(data.edge_index[1]).detach().cpu().numpy()
            out[:, j] = np.bincount(dst, minlength=n)[:n]
        else:
            out[:, j] = _mask(data, f"{name}_mask")
    return out
