"""A plain PyG loop started as several processes trains one model, or none.

``torchrun --nproc-per-node N my_loop.py`` starts N copies of a script. Without the distributed
set-up each copy builds its own loader over every seed and trains its own model: N unrelated
models, each printing its own figures, and no error. The entry points a plain loop touches
(``NeighborLoader``, ``LinkNeighborLoader``, the samplers, ``sampler_for``, ``memory_stores``,
``keyed_dropout``) call :func:`refuse_unjoined_world` first: in a world of more than one process
(torchrun's ``WORLD_SIZE`` > 1, or a ``torch.distributed`` group of more than one process) that
this process has not joined through :func:`gnnscale.pyg.start_run`, they refuse in one line
naming that call. After ``start_run`` (:func:`mark_joined`) they build as before: the run's
loaders are made of them.

An uncaught refusal prints that one line (``<script>: error: ...``) instead of a traceback, and
the process exits with status 1, as Python's own uncaught errors do; caught, it is the
:class:`~gnnscale.errors.RuntimeSetupError` it is.

The engine's workers (``gnnscale train``) never reach these entry points: the engine's packages
never import :mod:`gnnscale.pyg` (``tests/test_layout.py``'s floors).
"""
from __future__ import annotations

import os
import sys

from gnnscale.errors import RuntimeSetupError

_JOINED = {"world": 0}  # the number of processes start_run joined in this process (0: none)


def mark_joined(world_size: int) -> None:
    """Record that this process joined a run of ``world_size`` processes through start_run."""
    _JOINED["world"] = int(world_size)


def _world() -> tuple[int, int, str]:
    """(world size, rank, where it was read) of the processes this one was started among (1: alone)."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return dist.get_world_size(), dist.get_rank(), "torch.distributed's group"
    except (ImportError, RuntimeError, ValueError):  # a group being torn down: read the environment
        pass
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
    except ValueError:
        return 1, 0, ""
    return world, rank, "WORLD_SIZE"


class UnjoinedWorldError(RuntimeSetupError):
    """Several processes, not joined through start_run: each would train its own model."""


def _one_line_hook(previous):
    def hook(kind, value, tb):
        if isinstance(value, UnjoinedWorldError):
            print(f"{os.path.basename(sys.argv[0] or 'python')}: error: {value}", file=sys.stderr, flush=True)
            return
        previous(kind, value, tb)

    hook.gnnscale_one_line = True  # type: ignore[attr-defined]
    return hook


def refuse_unjoined_world(what: str) -> None:
    """One line, when this process is one of several that did not join through start_run.

    ``what``: the entry point refusing (e.g. ``"NeighborLoader"``), named in the message."""
    world, rank, source = _world()
    if world <= 1 or _JOINED["world"] == world:
        return
    if not getattr(sys.excepthook, "gnnscale_one_line", False):
        sys.excepthook = _one_line_hook(sys.excepthook)
    raise UnjoinedWorldError(
        f"gnnscale.pyg.{what}: this is process {rank} of {world} ({source}), not joined through "
        f"gnnscale.pyg.start_run, so each process would train its own model on every seed; call run = "
        f"gnnscale.pyg.start_run(data, parts_dir=..., timeout=...) first, then train with "
        f"run.node_loader(...) / run.link_loader(...) and run.ddp(model) (docs/pyg.md), or start one process.")
