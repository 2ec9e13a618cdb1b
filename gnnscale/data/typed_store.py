"""Input rows of typed graphs: one :class:`~gnnscale.data.feature_store.DistFeatureStore` per node
type that has features, each over its type's per-type ids (parts own contiguous per-type ranges,
docs/typed_graphs.md section 2), behind one ``fetch(ids) -> TypedInput``.

Types without features get no rows: the model's typed encoder looks their learned embedding
up by ``TypedInput.type_index``. Every type's fetch is one exchange (collective, in type order,
on every rank, ids or not), counted under the same categories as untyped rows.
"""
from __future__ import annotations

from types import SimpleNamespace

import torch

from gnnscale.data.feature_store import DistFeatureStore
from gnnscale.samplers.block import TypedInput


class TypedFeatureStore:
    """Fetch a typed graph's input rows by global id.

    Args:
        part: this rank's typed part (``part.typed``: ``book`` a TypedPartitionBook,
            ``x_by_type`` {t: float32 [n_{p,t}, F_t]}, ``meta`` with ``feature_dims``).
        comm: this rank's communicator. device: where rows are put.
    """

    def __init__(self, part, comm, device: torch.device | str = "cpu", stores: dict | None = None) -> None:
        typed = part.typed
        self.part = part
        self.book = typed.book
        self.comm = comm
        self.device = torch.device(device)
        dims = typed.meta["feature_dims"]
        self.stores = stores if stores is not None else {
            t: DistFeatureStore(SimpleNamespace(x=typed.x_by_type[t]), self.book.type_book(t), comm, int(dims[t]),
                                device) for t in range(len(dims)) if int(dims[t]) > 0}
        self._cached: torch.Tensor | None = None  # global ids of the cached rows
        self._filled = self  # the store whose fill_cache filled the caches read through

    def over(self, comm, complete: bool = False) -> "TypedFeatureStore":
        """The same part's store asking the owners through ``comm``, each type reading through this
        store's cache of its type (:meth:`DistFeatureStore.over`)."""
        out = TypedFeatureStore(self.part, comm, self.device,
                                {t: s.over(comm, complete) for t, s in self.stores.items()})
        out._filled = self._filled
        return out

    @property
    def feature_dim(self) -> int:
        """The widest type's row (what sizes a cache by bytes: never over its budget)."""
        return max((s.feature_dim for s in self.stores.values()), default=0)

    @property
    def complete(self) -> bool:
        return all(s.complete for s in self.stores.values())

    @property
    def cache(self):
        """The cached rows' global ids (``ids``) and count (``num_rows``), or None."""
        ids = self._filled._cached
        return None if ids is None else SimpleNamespace(ids=ids, num_rows=int(ids.numel()))

    @property
    def stats(self) -> dict:
        """Rows by where they came from (``local_rows``, ``cache_hits``, ``host_rows``, ``remote_rows``)
        and the distinct ids fetched (``distinct_rows``), summed over the types."""
        out = {"local_rows": 0, "remote_rows": 0, "cache_hits": 0, "host_rows": 0, "distinct_rows": 0}
        for s in self.stores.values():
            for k in out:
                out[k] += s.stats[k]
        return out

    def reset_stats(self) -> None:
        for s in self.stores.values():
            s.reset_stats()

    def fetch(self, ids: torch.Tensor, category: str = "feature") -> TypedInput:
        """The typed input rows of global ids ``ids`` (int64 [n], on the host): types and per-type
        ids of every id, and each featured type's rows in the order its ids appear."""
        ntype, tid = self.book.map_to_per_ntype(ids)
        rows = {t: store.fetch(tid[ntype == t], category) for t, store in self.stores.items()}
        return TypedInput(ntype.to(self.device), tid.to(self.device), rows)

    def fill_cache(self, ids: torch.Tensor, complete: bool = False) -> None:
        """Cache the rows of global ids ``ids`` (remote nodes; those of types without features
        are dropped: they have no rows), each in its type's store (collective); ``complete`` as
        :meth:`DistFeatureStore.fill_cache`'s."""
        ntype, tid = self.book.map_to_per_ntype(ids)
        for t, store in self.stores.items():
            store.fill_cache(tid[ntype == t], complete)
        self._cached = ids[self.has_rows(ids)]

    def has_rows(self, ids: torch.Tensor) -> torch.Tensor:
        """bool [n]: whether each global id's node type has features (a cache candidate)."""
        ntype = self.book.ntype(ids)
        keep = torch.zeros(ids.numel(), dtype=torch.bool)
        for t in self.stores:
            keep |= ntype == t
        return keep


def open_features(part, comm, device: torch.device | str = "cpu"):
    """The feature store of a part: :class:`TypedFeatureStore` for a typed part, else the plain
    :class:`~gnnscale.data.feature_store.DistFeatureStore` over its rows."""
    if getattr(part, "typed", None) is not None:
        return TypedFeatureStore(part, comm, device)
    return DistFeatureStore(part, part.book, comm, part.meta["feature_dim"], device)
