"""Every process group of a run, made once from its plan (torchtitan's ``ParallelDims``).

:meth:`ParallelDims.build` joins the run's process group (torchrun's or the local
launcher's), starts this rank's heartbeat and makes every sub-group the plan needs, in the
same order on every rank (torch.distributed's rule), each with the run's timeout and each
behind a :class:`~gnnscale.process.comm.Communicator` that counts its bytes, models the link
(``--net-bandwidth-gbps``) and names a silent peer:

- ``comm``: the world (the default group): control figures, data parallelism's DDP
  gradients, and the point-to-point activations between pipeline stages;
- ``data``: the stage's replicas (every rank when K = 1): sampling across the parts,
  feature rows, in-degrees; its own group so that a prefetching thread never interleaves
  with the main thread's collectives;
- ``grad``: the stage's replicas again, for the gradient all-reduce of the stage's layers
  (K = 1: the world, where DDP reduces);
- ``embedding``: historical exchange's pushes and refreshes (a thread of their own);
- ``first_stage``: stage 0 of every pipeline (the pipelines' evaluation), on those ranks.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from gnnscale.planning.plan import ParallelPlan
from gnnscale.process.comm import Communicator, NetworkModel
from gnnscale.process.groups import init_distributed
from gnnscale.process.groups import new_group as _new_group
from gnnscale.process.health import Health


@dataclass
class ParallelDims:
    """This rank's place in the plan and its communicators (see the module docstring)."""

    plan: ParallelPlan
    rank: int
    world: int
    health: Health
    network: NetworkModel | None
    comm: Communicator
    data: Communicator
    grad: Communicator
    embedding: Communicator | None = None
    first_stage: Communicator | None = None
    extra: list = field(default_factory=list)

    @property
    def d(self) -> int:
        """This rank's pipeline (its part in sampled modes)."""
        return self.plan.coords(self.rank)[0]

    @property
    def s(self) -> int:
        """This rank's stage."""
        return self.plan.coords(self.rank)[1]

    @property
    def part(self) -> int:
        """The part this rank reads: its pipeline's."""
        return self.d

    @staticmethod
    def build(plan: ParallelPlan, timeout: float, backend: str = "gloo", network: NetworkModel | None = None,
              embedding: bool = False) -> "ParallelDims":
        """Join the group, start the heartbeat, make the plan's groups.

        Raises:
            RuntimeSetupError: the world has another size than the plan's W = D x K.
        """
        from gnnscale.errors import RuntimeSetupError

        info = init_distributed(timeout=timeout, backend=backend)
        rank, world = info.rank, info.world_size
        if world != plan.world:
            raise RuntimeSetupError(
                f"rank {rank}: {world} workers were started but the plan ({plan.describe()}) needs {plan.world}; "
                f"start exactly {plan.world} (--workers {plan.world}, or torchrun --nproc-per-node ...)")
        health = Health(rank, world, timeout).start()

        def make(r: int, w: int, group) -> Communicator:
            return Communicator(r, w, group=group, timeout=timeout, network=network, health=health)

        def group(**kw):  # with the run's timeout; a peer lost during start-up is named, not a crash of this rank
            try:
                return _new_group(timeout, **kw)
            except RuntimeError as err:
                raise comm.collective_failed("new_group", "control", err) from err

        comm = make(rank, world, None)
        d, s = plan.coords(rank)
        first = None
        if plan.pp == 1:
            data = make(rank, world, group() if world > 1 else None)
            grad = comm
            first = data
        else:
            k, dp = plan.pp, plan.dp
            # Every rank makes every stage's groups, in the same order.
            data_groups = [group(ranks=plan.replica_ranks(t)) for t in range(k)] if dp > 1 else [None] * k
            grad_groups = [group(ranks=plan.replica_ranks(t)) for t in range(k)] if dp > 1 else [None] * k
            data = make(d, dp, data_groups[s])
            grad = make(d, dp, grad_groups[s])
            if s == 0:
                first = data
        emb = make(rank, world, group() if world > 1 else None) if embedding else None
        return ParallelDims(plan, rank, world, health, network, comm, data, grad, emb, first)

    def communicators(self) -> list[Communicator]:
        """Every distinct communicator of this rank (for traffic figures)."""
        out: list[Communicator] = []
        for c in (self.comm, self.data, self.grad, self.embedding, *self.extra):
            if c is not None and all(c is not o for o in out):
                out.append(c)
        return out

    def reset_stats(self) -> None:
        for c in self.communicators():
            c.stats.reset()

    def stop(self) -> None:
        """Stop the heartbeat (no thread outlives training: gnnscale.train under torchrun)."""
        self.health.stop()


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", os.environ.get("RANK", "0")))
