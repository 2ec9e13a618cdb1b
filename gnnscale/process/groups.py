"""Process groups: joining one, sub-groups with the run's timeout, leaving.

Two ways to start workers, one code path after that:

- ``torchrun`` (one machine or several): the environment carries RANK, WORLD_SIZE,
  MASTER_ADDR and MASTER_PORT; :func:`init_distributed` joins that group.
- ``gnnscale train --workers N``: :func:`gnnscale.process.launch.launch_local` spawns N processes on
  this machine, rendezvous on 127.0.0.1 at a free port (or one the user names, checked first).

Every collective has a timeout (the process group's).
"""
from __future__ import annotations

import datetime
import logging
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from gnnscale.errors import RuntimeSetupError

log = logging.getLogger(__name__)


@dataclass
class WorldInfo:
    rank: int
    world_size: int
    local_rank: int
    backend: str


def default_backend() -> str:
    """gloo: the engine's collectives carry CPU tensors. A CUDA run asks for
    ``"cpu:gloo,cuda:nccl"`` (see :func:`gnnscale.process.device.process_group_backend`); a visible GPU
    alone never switches the backend (the model may well stay on the CPU)."""
    return "gloo"


def init_distributed(timeout: float = 300.0, backend: str | None = None) -> WorldInfo:
    """Join the process group described by the environment (torchrun or launch_local).

    With WORLD_SIZE=1 (or no launcher at all) no group is created.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", str(rank)))
    backend = backend or default_backend()
    if world > 1 and not dist.is_initialized():
        try:
            td = datetime.timedelta(seconds=timeout)
            if "TORCHELASTIC_RESTART_COUNT" in os.environ and "MASTER_ADDR" in os.environ:
                # Under torchrun, the keys of each attempt under a prefix of their own: a group
                # restarted by the elastic agent (--max-restarts) would otherwise read the dead
                # attempt's addresses from the agent's store (gloo's connectFullMesh then times out).
                attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
                host_store = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true" and rank == 0
                store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, host_store,
                                      timeout=td)
                dist.init_process_group(backend=backend, store=dist.PrefixStore(f"gnnscale/attempt_{attempt}", store),
                                        rank=rank, world_size=world, timeout=td)
            elif os.environ.get("GNNSCALE_STORE_FD"):  # launch.STORE_FD_ENV (launch imports this module)
                # launch_local bound the port and handed rank 0 the listening socket (launch.listen_socket):
                # its store serves on it, so no other process can have taken the port since; the others
                # ("client") connect to it
                held = os.environ.pop("GNNSCALE_STORE_FD")
                fd = None if held == "client" else int(held)
                store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world, fd is not None,
                                      timeout=td, multi_tenant=True, master_listen_fd=fd)
                dist.init_process_group(backend=backend, store=store, rank=rank, world_size=world, timeout=td)
            else:
                dist.init_process_group(backend=backend, init_method="env://", rank=rank, world_size=world,
                                        timeout=td)
        except Exception as err:  # rendezvous failure: port taken, peer never came, ...
            addr = f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')}"
            raise RuntimeSetupError(
                f"rank {rank}/{world}: could not join the process group at {addr} within {timeout:.0f} s: {err}. "
                "Check that every worker was started with the same MASTER_ADDR/MASTER_PORT and that the port is free."
            ) from err
    if "nccl" in backend and torch.cuda.is_available():
        torch.cuda.set_device(local_rank % torch.cuda.device_count())
    return WorldInfo(rank, world, local_rank, backend)


def local_world_size() -> int:
    """Workers on this machine (torchrun's LOCAL_WORLD_SIZE; launch_local sets it too)."""
    return int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))


def new_group(timeout: float, backend: str = "gloo", ranks: list[int] | None = None):
    """A new process group of ``ranks`` (default: every rank), with the run's timeout on each of
    its collectives. Every rank must call it, in the same order, even those not in ``ranks``.

    (``dist.new_group`` without ``timeout`` gets torch's default of 30 minutes.)
    """
    return dist.new_group(ranks=ranks, backend=backend, timeout=datetime.timedelta(seconds=timeout))


def shutdown_distributed(timeout: float | None = None) -> bool:
    """Leave the process group (nothing when none is joined). With ``timeout``, wait at most that
    many seconds for torch to tear it down: True when it did; False when it had not returned by
    then (logged, naming the wait), the teardown left running in a daemon thread that ends with
    the process, so that a peer already gone cannot hold this one at exit. An error it raises in
    time is raised here."""
    if not dist.is_initialized():
        return True
    if timeout is None:
        dist.destroy_process_group()
        return True
    import threading

    done, errors = threading.Event(), []

    def leave() -> None:
        try:
            dist.destroy_process_group()
        except BaseException as err:  # noqa: BLE001 - handed to the caller below
            errors.append(err)
        finally:
            done.set()

    threading.Thread(target=leave, name="gnnscale-leave-process-group", daemon=True).start()
    if not done.wait(timeout):
        log.warning("leaving the process group (torch.distributed.destroy_process_group) did not return within "
                    "%g s; going on without it (the peers had passed the final barrier)", timeout)
        return False
    if errors:
        raise errors[0]
    return True
