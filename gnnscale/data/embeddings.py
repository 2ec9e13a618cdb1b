"""Learned node embeddings sharded by owner, trained with a sparse Adam (DistDGL's DistEmbedding + SparseAdam).

A typed graph's node types without features get a learned table of ``N_t`` rows (per-type ids)
x ``hidden``. Kept in the model, every data-parallel rank would hold (and all-reduce) all of it;
here each rank holds only the rows it owns (``book.offsets[rank] .. offsets[rank+1]-1``, the
same per-type ranges as its part's nodes, ``docs/typed_graphs.md`` section 2), with their Adam
moments, and a step moves only the rows a mini-batch touches:

1. :meth:`DistEmbedding.pull` (before the forward): the rows of the batch's ids, owned rows
   read locally, the others from their owners in one exchange of ids and one of rows, as a
   leaf tensor that requires grad;
2. the model uses the rows (``TypedInput.emb_rows``, read by
   :class:`~gnnscale.nn.typed_encoder.TypedEncoder`), the loss is backpropagated;
3. :meth:`DistEmbedding.push` (after the backward): each pulled row's gradient (duplicates summed
   on the sender) goes to its owner in one exchange of ids and one of gradients; the owner sums
   what arrives per row and applies one step of :class:`torch.optim.SparseAdam`'s math to exactly
   those rows.

The table starts from a pure function of (seed, table name, row id) (:func:`initial_rows`), so
every partitioning, and one process holding every row, starts from the same table; a step then
equals SparseAdam on one ``nn.Embedding(sparse=True)`` whose batch is the union of the ranks'
pulls and whose loss is the sum of the ranks' losses.

Every exchange goes through the :class:`~gnnscale.process.comm.Communicator` (bounded by its
timeout) and is counted under ``embedding_pull_request`` (ids asked for), ``embedding_pull``
(rows served), ``embedding_grad_ids`` and ``embedding_grad`` (gradients pushed, ids and rows),
``embedding_gather`` (:meth:`DistEmbedding.gather`).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from typing import Sequence

import numpy as np
import torch

from gnnscale.errors import GnnscaleError
from gnnscale.partitioning.book import PartitionBook
from gnnscale.partitioning.manifest import part_dir_name
from gnnscale.process.comm import Communicator
from gnnscale.samplers.block import TypedInput
from gnnscale.samplers.rng import node_hash, stream_key, uniform

_INIT_TAG = 0x454D4244  # "EMBD": keeps the initial values' streams apart from the samplers'
_INIT_CHUNK = 1 << 16  # rows drawn at once by initial_rows (bounds its int64 temporaries)


class EmbeddingError(GnnscaleError):
    """Bad arguments to a distributed embedding, or a state that does not fit this rank's rows."""


def _table_code(table: int | str) -> tuple[int, int]:
    """(kind, 64-bit code) of a table name (str) or id (int), stable across processes and runs."""
    if isinstance(table, str):
        return 1, int.from_bytes(hashlib.blake2b(table.encode("utf-8"), digest_size=8).digest(), "little")
    if isinstance(table, bool) or not isinstance(table, int):
        raise EmbeddingError(f"expected a table name (str) or id (int), found {table!r}; pass the node type's "
                             "name (or its index)")
    return 0, int(table)


def initial_rows(ids: torch.Tensor, dim: int, seed: int, table: int | str) -> torch.Tensor:
    """The initial values of rows ``ids`` of table ``table``: float32 [n, dim].

    Row ``i`` is uniform in ``[-1/sqrt(dim), 1/sqrt(dim))``, each entry a counter-based draw
    (:mod:`gnnscale.samplers.rng`) keyed by (seed, table) and the row id: a pure function, so
    every rank (and a single process holding the whole table) builds the same rows.

    Args:
        ids: int64 [n] row ids (any order, repeats allowed). dim: the row width.
        seed: the run's seed. table: the table's name (a node type's name) or id.
    """
    ids = torch.as_tensor(ids)
    if ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise EmbeddingError(f"initial_rows: expected integer row ids of shape [n], found dtype {ids.dtype} and "
                             f"shape {tuple(ids.shape)}")
    dim = int(dim)
    if dim < 1:
        raise EmbeddingError(f"initial_rows: expected a row width dim >= 1, found {dim}")
    ids = ids.to(torch.int64).cpu()
    key = stream_key(int(seed), *_table_code(table), _INIT_TAG)
    draws = torch.arange(dim, dtype=torch.int64).unsqueeze(0)  # [1, dim]
    bound = 1.0 / math.sqrt(dim)
    out = torch.empty(ids.numel(), dim, dtype=torch.float32)
    for start in range(0, ids.numel(), _INIT_CHUNK):  # chunks of rows, not rows
        part = ids[start:start + _INIT_CHUNK]
        u = uniform(node_hash(key, part).unsqueeze(1), draws)  # float64 [k, dim] in [0, 1)
        out[start:start + part.numel()] = ((2.0 * u - 1.0) * bound).to(torch.float32)
    return out


def _check_ids(ids: torch.Tensor, num_rows: int, what: str) -> torch.Tensor:
    """int64 [n] ids on the host, checked to lie in [0, num_rows)."""
    ids = torch.as_tensor(ids)
    if ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise EmbeddingError(f"{what}: expected integer row ids of shape [n], found dtype {ids.dtype} and shape "
                             f"{tuple(ids.shape)}")
    ids = ids.to(torch.int64).cpu()
    if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= num_rows):
        raise EmbeddingError(f"{what}: expected row ids in [0, {num_rows}), found ids in [{int(ids.min())}, "
                             f"{int(ids.max())}]; rows are per-type ids (TypedInput.type_index), not global node ids")
    return ids


class DistEmbedding:
    """One embedding table of ``num_rows`` x ``dim`` float32 rows, sharded by owner, with a sparse Adam.

    This rank holds rows ``book.offsets[rank] .. book.offsets[rank+1]-1`` (``weight``) and their
    Adam moments (``exp_avg``, ``exp_avg_sq``, float32 [n_own, dim]); ``step`` counts the pushes
    (the same on every rank).

    Args:
        num_rows: rows of the whole table (``book.num_nodes``). dim: the row width.
        book: which rank owns which rows (contiguous ranges, one per rank of ``comm``).
        comm: this rank's communicator; every exchange goes through it.
        seed, table: key of the initial values (:func:`initial_rows`); ``table`` names the table
            (the node type's name), so that two tables of one run start apart.
        keys: int64 [n_own] the row ids the initial values of this rank's rows are drawn for
            (default: the rows' own ids): a partition's per-type ids differ with the number of
            parts, their original per-type ids do not, so keyed by those every partitioning
            starts from the same table (in the dataset's order).
        lr, betas, eps: as :class:`torch.optim.SparseAdam`.
        device: where :meth:`pull` puts the rows (the table itself lives on the host).

    Counters (cumulative, ``stats``): ``pulled_rows`` (ids pulled, repeats included),
    ``remote_rows`` (distinct rows fetched from other ranks), ``pushed_rows`` (distinct rows whose
    gradient was sent to another rank), ``updated_rows`` (rows this rank updated).
    """

    def __init__(self, num_rows: int, dim: int, book: PartitionBook, comm: Communicator, *, seed: int = 0,
                 table: int | str = 0, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, device: torch.device | str = "cpu", keys: torch.Tensor | None = None) -> None:
        num_rows, dim = int(num_rows), int(dim)
        if dim < 1 or num_rows < 0:
            raise EmbeddingError(f"DistEmbedding: expected num_rows >= 0 and dim >= 1, found {num_rows} and {dim}")
        if not isinstance(book, PartitionBook):
            raise EmbeddingError(f"DistEmbedding: expected a PartitionBook over the table's rows, found "
                                 f"{type(book).__qualname__}; for a typed partitioning pass book.type_book(t)")
        if book.num_nodes != num_rows or book.num_parts != comm.world_size:
            raise EmbeddingError(
                f"DistEmbedding: expected a book of {num_rows} rows over {comm.world_size} ranks (one part per rank), "
                f"found {book.num_nodes} rows over {book.num_parts} parts; build it from the per-type offsets of "
                "this run's partitioning (TypedPartitionBook.type_book(t))")
        self._check_hyper(lr, betas, eps)
        self.num_rows, self.dim, self.book, self.comm = num_rows, dim, book, comm
        self.seed, self.table = int(seed), table
        _table_code(table)
        self.lr, self.betas, self.eps = float(lr), (float(betas[0]), float(betas[1])), float(eps)
        self.device = torch.device(device)
        self.lo, self.hi = book.part_range(comm.rank)
        if keys is not None and tuple(keys.shape) != (self.hi - self.lo,):
            raise EmbeddingError(f"DistEmbedding: expected one key per row of this rank ({self.hi - self.lo}), found "
                                 f"keys of shape {tuple(keys.shape)}")
        own = torch.arange(self.lo, self.hi, dtype=torch.int64) if keys is None else keys
        self.weight = initial_rows(own, dim, seed, table)
        self.exp_avg = torch.zeros_like(self.weight)
        self.exp_avg_sq = torch.zeros_like(self.weight)
        self.step = 0
        self._pulled: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.stats = {"pulled_rows": 0, "remote_rows": 0, "pushed_rows": 0, "updated_rows": 0}

    @staticmethod
    def _check_hyper(lr, betas, eps) -> None:
        if not (float(lr) >= 0.0 and float(eps) >= 0.0 and len(betas) == 2
                and all(0.0 <= float(b) < 1.0 for b in betas)):
            raise EmbeddingError(f"DistEmbedding: expected lr >= 0, eps >= 0 and two betas in [0, 1), found lr={lr}, "
                                 f"betas={tuple(betas)}, eps={eps}")

    @property
    def num_owned(self) -> int:
        """Rows held by this rank."""
        return self.hi - self.lo

    @property
    def nbytes(self) -> int:
        """Bytes this rank holds: its rows and their two Adam moments."""
        return 3 * self.num_owned * self.dim * 4

    def reset_stats(self) -> None:
        for k in self.stats:
            self.stats[k] = 0

    def __repr__(self) -> str:
        return (f"DistEmbedding(table={self.table!r}, num_rows={self.num_rows}, dim={self.dim}, "
                f"rows={self.lo}..{self.hi - 1} on rank {self.comm.rank}, step={self.step})")

    # -- rows ------------------------------------------------------------------------------
    def _own_local(self, ids: torch.Tensor, what: str) -> torch.Tensor:
        """Local indices (int64 [k]) of ``ids`` that this rank must own (asked of it by peers)."""
        local = ids - self.lo
        if local.numel() and (int(local.min()) < 0 or int(local.max()) >= self.num_owned):
            raise EmbeddingError(
                f"rank {self.comm.rank}: {what} for rows {int(ids.min())}..{int(ids.max())}, but this rank owns rows "
                f"{self.lo}..{self.hi - 1} of table {self.table!r}; every rank must build the table from the same "
                "partition book")
        return local

    def pull(self, ids: torch.Tensor, record: bool | None = None) -> torch.Tensor:
        """The rows of ``ids`` (int64 [n], any order, repeats allowed): float32 [n, dim] on ``device``.

        Owned rows are read locally; the others (each distinct row once) come from their owners in
        one exchange of ids (``embedding_pull_request``) and one of rows (``embedding_pull``).
        Collective: every rank calls it the same number of times (``ids`` may be empty).

        With ``record`` (default: ``torch.is_grad_enabled()``) the rows are a leaf that requires
        grad and is remembered, with its ids, for :meth:`push`; otherwise a plain tensor
        (evaluation).
        """
        ids = _check_ids(ids, self.num_rows, f"DistEmbedding({self.table!r}).pull")
        record = torch.is_grad_enabled() if record is None else bool(record)
        n = ids.numel()
        mine = (ids >= self.lo) & (ids < self.hi)
        mine_pos = torch.nonzero(mine).flatten()
        need_pos = torch.nonzero(~mine).flatten()
        out = torch.empty(n, self.dim, dtype=torch.float32)
        if mine_pos.numel():
            out.index_copy_(0, mine_pos, self.weight.index_select(0, ids.index_select(0, mine_pos) - self.lo))
        # Distinct remote rows, sorted: grouped by owner already (owners hold contiguous ranges in rank order).
        need, inverse = torch.unique(ids.index_select(0, need_pos), sorted=True, return_inverse=True)
        counts = torch.bincount(self.book.owner(need), minlength=self.comm.world_size)
        served, served_counts = self.comm.exchange_flat(need, counts, "embedding_pull_request")
        rows = self.weight.index_select(0, self._own_local(served, "peers asked"))
        back, _ = self.comm.exchange_flat(rows, served_counts, "embedding_pull")
        if need_pos.numel():
            out.index_copy_(0, need_pos, back.index_select(0, inverse))
        self.stats["pulled_rows"] += n
        self.stats["remote_rows"] += int(need.numel())
        if self.device.type != "cpu":
            out = out.to(self.device)
        if not record:
            return out
        out.requires_grad_(True)
        self._pulled.append((ids, out))
        return out

    def discard(self) -> None:
        """Forget the pulls recorded since the last :meth:`push` (not collective)."""
        self._pulled = []

    def push(self, scale: float = 1.0) -> None:
        """Send the recorded pulls' gradients to their owners and take one sparse Adam step there.

        On this rank, the gradients of every recorded pull (``leaf.grad``; a leaf without one adds
        nothing) are summed per distinct row; the rows owned elsewhere go to their owners in one
        exchange of ids (``embedding_grad_ids``) and one of gradients (``embedding_grad``). Each owner
        sums what arrives per row and updates exactly those rows as :class:`torch.optim.SparseAdam`
        does: with ``step`` (incremented once per push, on every rank)

            m  += (1 - b1) (g - m);   v += (1 - b2) (g^2 - v)
            w  -= lr sqrt(1 - b2^step) / (1 - b1^step) * m / (sqrt(v) + eps)

        on touched rows only (m and v of the others unchanged). Collective: every rank calls it
        once per step, with or without pulls or gradients (it then sends nothing but joins).

        ``scale`` multiplies this rank's gradients before they are sent (e.g. ``1 / world_size``
        when the model's gradients are averaged as DDP does; default 1: the ranks' losses add up).
        """
        ids_list, grad_list = [], []
        for ids, leaf in self._pulled:
            g = leaf.grad
            if g is None or not ids.numel():
                continue
            if g.is_sparse:
                g = g.to_dense()
            ids_list.append(ids)
            g = g.detach().to("cpu", torch.float32).reshape(ids.numel(), self.dim)
            grad_list.append(g if scale == 1.0 else g * float(scale))
        self._pulled = []
        ids = torch.cat(ids_list) if ids_list else torch.empty(0, dtype=torch.int64)
        grads = torch.cat(grad_list) if grad_list else torch.empty(0, self.dim, dtype=torch.float32)
        rows, inverse = torch.unique(ids, sorted=True, return_inverse=True)
        summed = torch.zeros(rows.numel(), self.dim, dtype=torch.float32).index_add_(0, inverse, grads)
        mine = (rows >= self.lo) & (rows < self.hi)
        away = ~mine
        away_rows = rows[away]  # sorted: grouped by owner
        counts = torch.bincount(self.book.owner(away_rows), minlength=self.comm.world_size)
        got_ids, got_counts = self.comm.exchange_flat(away_rows, counts, "embedding_grad_ids")
        got_grads, _ = self.comm.exchange_flat(summed[away], counts, "embedding_grad")
        if tuple(got_grads.shape) != (got_ids.numel(), self.dim):
            raise EmbeddingError(f"rank {self.comm.rank}: expected {got_ids.numel()} gradient rows of width {self.dim} "
                                 f"for table {self.table!r}, found {tuple(got_grads.shape)}; every rank must build the "
                                 "table with the same dim")
        self.stats["pushed_rows"] += int(away_rows.numel())
        self.step += 1
        local = torch.cat([rows[mine] - self.lo, self._own_local(got_ids, "gradients arrived")])
        self._adam(local, torch.cat([summed[mine], got_grads]))

    def _adam(self, local: torch.Tensor, grads: torch.Tensor) -> None:
        """One SparseAdam step (``self.step``) on local rows ``local`` (int64 [k], repeats summed)
        with gradients ``grads`` (float32 [k, dim]); the same operations as ``torch.optim.SparseAdam``."""
        idx, inverse = torch.unique(local, sorted=True, return_inverse=True)
        if not idx.numel():
            return
        g = torch.zeros(idx.numel(), self.dim, dtype=torch.float32).index_add_(0, inverse, grads)
        beta1, beta2 = self.betas
        old_m = self.exp_avg.index_select(0, idx)
        upd_m = g.sub(old_m).mul_(1 - beta1)
        self.exp_avg.index_add_(0, idx, upd_m)
        old_v = self.exp_avg_sq.index_select(0, idx)
        upd_v = g.pow(2).sub_(old_v).mul_(1 - beta2)
        self.exp_avg_sq.index_add_(0, idx, upd_v)
        numer = upd_m.add_(old_m)
        denom = upd_v.add_(old_v).sqrt_().add_(self.eps)
        step_size = self.lr * math.sqrt(1 - beta2 ** self.step) / (1 - beta1 ** self.step)
        self.weight.index_add_(0, idx, -step_size * numer.div_(denom))
        self.stats["updated_rows"] += int(idx.numel())

    # -- checkpoints and saving ------------------------------------------------------------
    def state_dict(self) -> dict:
        """This rank's part: ``weight``, ``exp_avg``, ``exp_avg_sq`` (float32 [n_own, dim] copies),
        ``step``, the rows held (``rows``: (start, stop)), ``num_rows``, ``dim`` and the
        hyper-parameters (``lr``, ``betas``, ``eps``); :meth:`load_state_dict` resumes bit-equal."""
        return {"weight": self.weight.clone(), "exp_avg": self.exp_avg.clone(), "exp_avg_sq": self.exp_avg_sq.clone(),
                "step": int(self.step), "rows": (self.lo, self.hi), "num_rows": self.num_rows, "dim": self.dim,
                "table": self.table, "lr": self.lr, "betas": self.betas, "eps": self.eps}

    def load_state_dict(self, state: dict) -> None:
        """Restore a :meth:`state_dict` taken by the rank that held the same rows (same partitioning)."""
        want = {"weight", "exp_avg", "exp_avg_sq", "step", "rows", "num_rows", "dim"}
        missing = sorted(want - set(state))
        if missing:
            raise EmbeddingError(f"DistEmbedding({self.table!r}).load_state_dict: expected the entries {sorted(want)}, "
                                 f"found none for {missing}; pass what state_dict() returned")
        rows, shape = tuple(int(r) for r in state["rows"]), (self.num_owned, self.dim)
        if (int(state["num_rows"]), int(state["dim"])) != (self.num_rows, self.dim) or rows != (self.lo, self.hi):
            raise EmbeddingError(
                f"rank {self.comm.rank}: table {self.table!r} holds rows {self.lo}..{self.hi - 1} of {self.num_rows} x "
                f"{self.dim}, but the state holds rows {rows[0]}..{rows[1] - 1} of {state['num_rows']} x "
                f"{state['dim']}; resume with the partitioning (and worker count) the checkpoint was taken with")
        for k in ("weight", "exp_avg", "exp_avg_sq"):
            t = state[k]
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
                found = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__qualname__
                raise EmbeddingError(f"rank {self.comm.rank}: expected {k} of shape {shape}, found {found}; the "
                                     "checkpoint is corrupt")
        if "lr" in state:
            self._check_hyper(state["lr"], state["betas"], state["eps"])
            self.lr, self.eps = float(state["lr"]), float(state["eps"])
            self.betas = (float(state["betas"][0]), float(state["betas"][1]))
        self.weight = state["weight"].detach().to("cpu", torch.float32).clone()
        self.exp_avg = state["exp_avg"].detach().to("cpu", torch.float32).clone()
        self.exp_avg_sq = state["exp_avg_sq"].detach().to("cpu", torch.float32).clone()
        self.step = int(state["step"])
        self._pulled = []

    def gather(self, dst: int = 0) -> torch.Tensor | None:
        """The whole table, float32 [num_rows, dim], on rank ``dst`` (None on the others): for saving
        a model. Collective; one exchange (``embedding_gather``)."""
        world = self.comm.world_size
        if not 0 <= int(dst) < world:
            raise EmbeddingError(f"gather: expected a destination rank in [0, {world}), found {dst}")
        sizes = torch.zeros(world, dtype=torch.int64)
        sizes[int(dst)] = self.num_owned
        out, _ = self.comm.exchange_flat(self.weight, sizes, "embedding_gather")
        if self.comm.rank != int(dst):
            return None
        return out.clone() if out is self.weight else out


class TypedEmbeddings:
    """One :class:`DistEmbedding` per node type without features of a typed partitioning.

    Args:
        book: the run's :class:`~gnnscale.partitioning.book.TypedPartitionBook`; table t is sharded
            by ``book.type_book(t)`` (per-type ids, the ranges of each part's nodes of type t).
        feature_dims: T ints, F_t; the tables are those of the types with ``F_t == 0``.
        hidden: the rows' width (the encoder's hidden size). comm: this rank's communicator.
        seed, lr, betas, eps, device: as :class:`DistEmbedding`.
        node_types: T names; table t is keyed by ``node_types[t]`` (else by t) for its initial values.
        keys: ``{t: int64 [n_own_t]}`` the original per-type ids of this rank's rows of table t
            (:class:`DistEmbedding`'s ``keys``; default: the partition's per-type ids).

    Attributes:
        types: the featureless types, in order (every collective goes through them in this order).
        tables: ``{t: DistEmbedding}``.
    """

    def __init__(self, book, feature_dims: Sequence[int], hidden: int, comm: Communicator, *, seed: int = 0,
                 lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 node_types: Sequence[str] | None = None, device: torch.device | str = "cpu",
                 keys: dict | None = None) -> None:
        dims = [int(f) for f in feature_dims]
        if len(dims) != book.num_types:
            raise EmbeddingError(f"TypedEmbeddings: expected feature_dims with one entry per node type "
                                 f"({book.num_types}), found {len(dims)}")
        if node_types is not None and len(node_types) != len(dims):
            raise EmbeddingError(f"TypedEmbeddings: expected {len(dims)} node type names, found {len(node_types)}")
        self.types = [t for t, f in enumerate(dims) if f == 0]
        self.comm = comm
        self.tables = {}
        for t in self.types:
            tb = book.type_book(t)
            self.tables[t] = DistEmbedding(tb.num_nodes, hidden, tb, comm, seed=seed,
                                           table=node_types[t] if node_types is not None else t,
                                           lr=lr, betas=betas, eps=eps, device=device,
                                           keys=None if keys is None else keys.get(t))

    @property
    def nbytes(self) -> int:
        return sum(e.nbytes for e in self.tables.values())

    @property
    def stats(self) -> dict:
        out = {"pulled_rows": 0, "remote_rows": 0, "pushed_rows": 0, "updated_rows": 0}
        for e in self.tables.values():
            for k in out:
                out[k] += e.stats[k]
        return out

    def pull(self, x: TypedInput, record: bool | None = None) -> dict:
        """``{t: float32 [n_t, hidden]}``: for each featureless type t, the rows of the inputs of type
        t (ids ``x.type_index`` at ``torch.nonzero(x.node_type == t)``, in that order), as
        :meth:`DistEmbedding.pull` (leaves that require grad when recorded). Collective."""
        if not isinstance(x, TypedInput):
            raise EmbeddingError(f"TypedEmbeddings.pull: expected a TypedInput, found {type(x).__qualname__}")
        node_type, type_index = x.node_type.cpu(), x.type_index.cpu()
        out = {}
        for t in self.types:
            pos = torch.nonzero(node_type == t).flatten()
            out[t] = self.tables[t].pull(type_index.index_select(0, pos), record)
        return out

    def attach(self, x: TypedInput, record: bool | None = None) -> TypedInput:
        """``x`` with ``emb_rows`` set to :meth:`pull`'s rows (the encoder then reads them). Collective."""
        return dataclasses.replace(x, emb_rows=self.pull(x, record))

    def push(self, scale: float = 1.0) -> None:
        """:meth:`DistEmbedding.push` of every table, in type order. Collective."""
        for t in self.types:
            self.tables[t].push(scale)

    def discard(self) -> None:
        for e in self.tables.values():
            e.discard()

    def state_dict(self) -> dict:
        """``{t: DistEmbedding.state_dict()}`` (this rank's rows of every table)."""
        return {t: e.state_dict() for t, e in self.tables.items()}

    def load_state_dict(self, state: dict) -> None:
        keys = sorted(int(k) for k in state)
        if keys != self.types:
            raise EmbeddingError(f"TypedEmbeddings.load_state_dict: expected tables of the types {self.types}, found "
                                 f"{keys}; resume with the dataset and partitioning of the checkpoint")
        for k, s in state.items():
            self.tables[int(k)].load_state_dict(s)

    def gather_all(self, dst: int = 0) -> dict:
        """``{t: float32 [N_t, hidden]}`` on rank ``dst``, ``{t: None}`` on the others. Collective."""
        return {t: self.tables[t].gather(dst) for t in self.types}


def embedding_order(parts_dir: str | os.PathLike, typed: dict) -> dict[int, torch.Tensor]:
    """For each node type without features: the original per-type id (the dataset's order) of
    each per-type id of the partition (its rows' order in a sharded table), int64 [N_t].

    A model file keeps learned tables in the dataset's order, so that :func:`~gnnscale.training.model_io.load_model` indexes
    them by the ids a user has; a run on a partition gathers and permutes them (``table[order]``
    in the partition's order, ``out[order] = table`` back)."""
    counts = [int(n) for n in typed["num_nodes_per_type"]]
    type_ptr = np.concatenate([[0], np.cumsum(counts)])  # original ids are grouped by type
    starts = typed["type_starts"]
    out = {}
    for t, f in enumerate(typed["feature_dims"]):
        if int(f) > 0:
            continue
        pieces = []
        for p, row in enumerate(starts):  # loop over parts
            orig = np.load(os.path.join(os.fspath(parts_dir), part_dir_name(p), "orig_ids.npy"), mmap_mode="r")
            pieces.append(np.asarray(orig[int(row[t]):int(row[t + 1])]) - type_ptr[t])
        out[t] = torch.from_numpy(np.concatenate(pieces).astype(np.int64))
    return out
