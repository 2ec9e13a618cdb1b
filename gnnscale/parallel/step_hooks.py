"""What a data-parallel step does beside the model DDP replicates, as one hook object (beside
:class:`~gnnscale.history.modes.ExchangeMode`): before the forward, after the backward, its state.

:class:`NoStepHooks` does nothing: the model's parameters are the whole model. A typed graph
whose node types have no features learns their embeddings (:class:`LearnedEmbeddings`):
tables sharded by owner, outside DDP, whose rows a step pulls before its forward and whose
gradients it pushes to their owners after its backward (a sparse Adam there). The axis calls
the hooks at those points and never asks which kind it holds.
"""
from __future__ import annotations

from typing import Callable

import torch


class NoStepHooks:
    """A step with nothing beside the replicated model."""

    #: the model keeps no tables of its own (they live in the hooks): ``ModelSpec.build(external_embeddings=...)``
    external_embeddings = False
    #: ``inputs(x)`` for evaluation's layer-0 rows (None: the rows as fetched)
    eval_inputs: Callable | None = None

    def before_forward(self, x, health=None, epoch: int = 0, step: int = 0):
        """The step's input rows as the model reads them (here: ``x`` itself)."""
        return x

    def after_backward(self, world: int, health=None, epoch: int = 0, step: int = 0) -> None:
        """After the backward (the model's gradients all-reduced), before the next step."""

    def digest_params(self, model):
        """The parameters whose digest is the whole model's (None: gather the whole model first)."""
        return model.parameters()

    def whole_model(self, net, spec, rank: int, parts_dir=None, typed: dict | None = None):
        """The whole model on rank 0 (None elsewhere). Collective where the hooks hold rows."""
        return net if rank == 0 else None

    def state_dict(self) -> dict | None:
        """What this rank alone holds (its checkpoint file); None: nothing."""
        return None

    def load_state_dict(self, state: dict | None) -> None:
        pass


class LearnedEmbeddings(NoStepHooks):
    """The learned embeddings of a typed graph's featureless node types
    (:class:`~gnnscale.data.embeddings.TypedEmbeddings`): this step's rows pulled before the forward
    (collective), their gradients pushed to their owners after the backward, averaged over the
    ``world`` ranks as DDP averages (collective); the tables gathered into the whole model on
    rank 0, in the dataset's per-type order (a model file's)."""

    external_embeddings = True

    def __init__(self, embeddings) -> None:
        self.embeddings = embeddings
        self.eval_inputs = lambda x: embeddings.attach(x, record=False)

    def before_forward(self, x, health=None, epoch: int = 0, step: int = 0):
        if health is not None:
            health.enter("embedding rows", epoch, step)
        return self.embeddings.attach(x)

    def after_backward(self, world: int, health=None, epoch: int = 0, step: int = 0) -> None:
        if health is not None:
            health.enter("embedding gradients", epoch, step)
        self.embeddings.push(scale=1.0 / world)

    def digest_params(self, model):
        return None

    def whole_model(self, net, spec, rank: int, parts_dir=None, typed: dict | None = None):
        tables = self.embeddings.gather_all()
        if rank != 0:
            return None
        from gnnscale.nn.link import gnn_of
        from gnnscale.data.embeddings import embedding_order
        from gnnscale.nn.typed_encoder import tables_to_dataset_order

        whole = spec.build()
        missing = whole.load_state_dict(net.state_dict(), strict=False).missing_keys
        encoder = gnn_of(whole)  # a link model's tables are its encoder's
        for t, rows in tables.items():
            encoder.typed_encoder.embeddings[t].weight.data.copy_(rows)
        assert len(missing) == len(tables), missing  # exactly the tables, filled above
        # the whole model indexes its tables by the dataset's per-type ids (a model file's order)
        tables_to_dataset_order(whole, embedding_order(parts_dir, typed))
        return whole

    def state_dict(self) -> dict | None:
        return self.embeddings.state_dict()

    def load_state_dict(self, state: dict | None) -> None:
        self.embeddings.load_state_dict(state)


def step_hooks(part, cfg, comm, device: torch.device | str = "cpu") -> NoStepHooks:
    """The hooks of a data-parallel step on ``part``: :class:`LearnedEmbeddings` for a typed part
    with node types without features (rows of this rank's nodes, Adam's lr, keyed by the
    nodes' original per-type ids: the same tables on any number of parts), else :class:`NoStepHooks`."""
    typed = getattr(part, "typed", None)
    if typed is None or all(int(f) > 0 for f in typed.meta["feature_dims"]):
        return NoStepHooks()
    from gnnscale.data.embeddings import TypedEmbeddings

    meta = typed.meta
    type_ptr = [0]
    for n in meta["num_nodes_per_type"]:
        type_ptr.append(type_ptr[-1] + int(n))
    row = meta["type_starts"][comm.rank]
    keys = {t: part.orig_ids[int(row[t]):int(row[t + 1])] - type_ptr[t]
            for t, f in enumerate(meta["feature_dims"]) if int(f) == 0}
    return LearnedEmbeddings(TypedEmbeddings(typed.book, meta["feature_dims"], cfg.hidden, comm, seed=cfg.seed,
                                             lr=cfg.lr, node_types=list(meta["node_types"]), device=device, keys=keys))
