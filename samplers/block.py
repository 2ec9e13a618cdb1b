"""Bipartite blocks and the mini-batch that carries them through the pipeline stages."""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace

import torch


@dataclass
class Block:
    """One message-passing layer of a sampled computation graph.

    Attributes:
        src_ids: int64 [S] global ids of the source nodes; ``src_ids[:D]`` equals ``dst_ids``.
        dst_ids: int64 [D] global ids of the destination nodes.
        edge_index: int64 [2, M] in block-local numbering: row 0 indexes ``src_ids``,
            row 1 indexes ``dst_ids`` (messages flow row 0 -> row 1, PyG's convention).

        num_hist: the last ``num_hist`` sources are *historical* leaves (``historical``
            exchange mode): remote nodes that were not expanded; their input embedding comes
            from the halo table of this layer instead of the previous layer's output, so the
            previous block's destinations are ``src_ids[:S - num_hist]``. 0 otherwise.
        edge_type: typed graphs only: int64 [M] relation of each edge (None otherwise).
        node_type: typed graphs only: int64 [S] node type of each source; the first D are
            the destinations' (None otherwise).
        edge_attr: float32 [M, De] the attributes of exactly this block's edges, row ``i``
            for column ``i`` of ``edge_index`` (samplers given ``edge_attr``; None otherwise).
            Sampled with replacement, an edge drawn twice has its row twice.

    A PyG layer consumes it as ``conv((x_src, x_src[:D]), edge_index, size=(S, D))``.
    """

    src_ids: torch.Tensor
    dst_ids: torch.Tensor
    edge_index: torch.Tensor
    num_hist: int = 0
    edge_type: torch.Tensor | None = None
    node_type: torch.Tensor | None = None
    edge_attr: torch.Tensor | None = None
    _degree: tuple | None = field(default=None, repr=False, compare=False)

    def source_degrees(self, node_degree: torch.Tensor) -> torch.Tensor:
        """``node_degree[src_ids]`` (int64 [S]), kept on the block for the same ``node_degree``: a
        block used again (every layer of full-graph training, every step of chunk pipelining)
        gathers it once, and layers that cache their normalization by tensor see the same one."""
        cached = self._degree
        if cached is None or cached[0]() is not node_degree:
            deg = node_degree[self.src_ids.to(node_degree.device)]
            self._degree = (weakref.ref(node_degree), deg)
            return deg
        return cached[1]

    @property
    def num_src(self) -> int:
        return int(self.src_ids.numel())

    @property
    def num_dst(self) -> int:
        return int(self.dst_ids.numel())

    @property
    def num_edges(self) -> int:
        return int(self.edge_index.size(1))

    @property
    def size(self) -> tuple[int, int]:
        return (self.num_src, self.num_dst)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "Block":
        def mv(t: torch.Tensor) -> torch.Tensor:
            return t.to(device, non_blocking=non_blocking)

        return Block(mv(self.src_ids), mv(self.dst_ids), mv(self.edge_index), self.num_hist,
                     None if self.edge_type is None else mv(self.edge_type),
                     None if self.node_type is None else mv(self.node_type),
                     None if self.edge_attr is None else mv(self.edge_attr))

    @property
    def hist_ids(self) -> torch.Tensor:
        """int64 [num_hist] global ids of the historical leaves (the tail of ``src_ids``)."""
        return self.src_ids[self.num_src - self.num_hist:]


@dataclass
class TypedInput:
    """The input rows of a typed graph's mini-batch (``MiniBatch.x`` when the graph is typed).

    Attributes:
        node_type: int64 [S] type of each input node (``blocks[0].src_ids``).
        type_index: int64 [S] per-type (new) id of each input node: the row of its type's
            learned embedding, for types without features.
        rows: ``{t: float32 [n_t, F_t]}`` feature rows of the inputs of type ``t``, in the order
            of ``torch.nonzero(node_type == t)``; only types that have features.
        emb_rows: optional ``{t: float32 [n_t, hidden]}`` learned embedding rows of the inputs of
            a type ``t`` without features (same order), pulled from a sharded table
            (:class:`gnnscale.data.embeddings.TypedEmbeddings`); the typed encoder then uses them
            instead of its own table. None (default): the encoder looks rows up itself.
    """

    node_type: torch.Tensor
    type_index: torch.Tensor
    rows: dict
    emb_rows: dict | None = None

    @property
    def num_rows(self) -> int:
        return int(self.node_type.numel())

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "TypedInput":
        return TypedInput(self.node_type.to(device, non_blocking=non_blocking),
                          self.type_index.to(device, non_blocking=non_blocking),
                          {t: r.to(device, non_blocking=non_blocking) for t, r in self.rows.items()},
                          None if self.emb_rows is None else
                          {t: r.to(device, non_blocking=non_blocking) for t, r in self.emb_rows.items()})


@dataclass
class MiniBatch:
    """What flows from the sampler through feature fetch to the model.

    Attributes:
        seeds: int64 [B] global ids of the nodes whose outputs are trained or evaluated.
        blocks: the layers' blocks in model order: ``blocks[0]`` is consumed by the first
            layer (the outermost hop), ``blocks[-1].dst_ids`` equals ``seeds``.
        x: float32 [blocks[0].num_src, F] input features, filled by the feature stage.
        y: int64 [B] labels of the seeds, filled by the feature stage.
        stats: counters gathered along the way (sampled edges, remote ids, ...).
        degrees: in-degrees of the blocks' source ids (a ``gnnscale.data.degrees.DegreeLookup``),
            filled by the feature stage when the model normalizes by degree.
        edge_label_index: link prediction (:class:`gnnscale.samplers.link.LinkSampler`) only:
            int64 [2, B + Q] the scored pairs as positions into ``seeds``, the B positives
            first, then the Q negatives. None for node batches.
        edge_label: link prediction only: float32 [B + Q], 1 for the positives, 0 for the
            negatives (aligned with ``edge_label_index``). None otherwise.
        neg_of_pos: link prediction only: int64 [Q], the positive (0 .. B-1) each negative
            belongs to (margin loss). None otherwise.
        pair_features: temporal link prediction only: float32 [B + Q, 6] each scored pair's own
            history before its time (gnnscale.tasks.temporal_task).
        node_keys: per block, int64 [num_src] the original ids of its sources (the keyed
            dropout's row keys), filled by the feature stage when the model drops out. None otherwise.
    """

    seeds: torch.Tensor
    blocks: list[Block]
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None
    stats: dict = field(default_factory=dict)
    degrees: object | None = None
    device_blocks: list | None = None
    ready: object | None = None
    edge_label_index: torch.Tensor | None = None
    edge_label: torch.Tensor | None = None
    neg_of_pos: torch.Tensor | None = None
    node_keys: list | None = None
    pair_features: torch.Tensor | None = None

    @property
    def input_ids(self) -> torch.Tensor:
        """int64 [S0]: global ids whose features the first layer needs."""
        return self.blocks[0].src_ids if self.blocks else self.seeds

    @property
    def num_sampled_edges(self) -> int:
        return sum(b.num_edges for b in self.blocks)

    def to(self, device: torch.device | str, non_blocking: bool = False) -> "MiniBatch":
        """The batch with every field the model, the loss and the counts read on ``device``:
        ``x`` (a tensor or a :class:`TypedInput`), ``y``, ``degrees``, the blocks' copies
        (``device_blocks``; the same list on the CPU), ``edge_label_index``, ``edge_label`` and
        ``neg_of_pos``. ``seeds``, ``blocks`` and ``node_keys`` stay where they are (the
        sampler's host-side ids; the keyed dropout hashes its keys on the host). A new batch:
        the tensors already on ``device`` are the same objects."""
        device = torch.device(device)

        def mv(t):
            if t is None:
                return None
            if isinstance(t, (torch.Tensor, TypedInput)):
                return t.to(device, non_blocking=non_blocking)
            return t.to(device)  # a DegreeLookup

        blocks = self.blocks if device.type == "cpu" else \
            [b.to(device, non_blocking=non_blocking) if b is not None else None for b in self.blocks]
        return replace(self, x=mv(self.x), y=mv(self.y), degrees=mv(self.degrees), device_blocks=blocks,
                       edge_label_index=mv(self.edge_label_index), edge_label=mv(self.edge_label),
                       neg_of_pos=mv(self.neg_of_pos), pair_features=mv(self.pair_features))

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor of the fields :meth:`to` moves (what a compute stream must own before it
        reads them: :func:`~gnnscale.data.loader.wait_ready`)."""
        x = self.x
        out = [x.node_type, x.type_index, *x.rows.values(), *(x.emb_rows or {}).values()] \
            if isinstance(x, TypedInput) else [x]
        out += [self.y, self.edge_label_index, self.edge_label, self.neg_of_pos, self.pair_features]
        if self.degrees is not None and hasattr(self.degrees, "ids"):
            out += [self.degrees.ids, self.degrees.degrees]
        for b in self.device_blocks or []:
            if b is not None:
                out += [b.src_ids, b.dst_ids, b.edge_index, b.edge_type, b.node_type, b.edge_attr]
        return [t for t in out if isinstance(t, torch.Tensor)]
