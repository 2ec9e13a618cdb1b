"""The training device of a worker: ``--device cpu|cuda|auto``, and moving batches onto it.

One worker per GPU: worker ``local_rank`` trains on ``cuda:local_rank``. The model, the
mini-batch's blocks and input rows and the feature cache live on the device; gradients
all-reduce over NCCL (the default process group is ``cpu:gloo,cuda:nccl``, so its CPU
control figures still travel over gloo); sampling and remote feature fetches stay on gloo
over the host, their rows cross to the device through pinned buffers.
"""
from __future__ import annotations

import contextlib

import torch

from gnnscale.config import DEVICES
from gnnscale.errors import RuntimeSetupError


def resolve_device(name: str, local_rank: int = 0, local_workers: int = 1) -> torch.device:
    """The torch device a worker trains on.

    Args:
        name: ``"cpu"``, ``"cuda"`` or ``"auto"`` (cuda when a GPU is visible, else cpu).
        local_rank: this worker's index on its machine. local_workers: workers on this machine.

    Raises:
        RuntimeSetupError: an unknown name; ``cuda`` without a usable GPU; more workers on
            this machine than GPUs (one worker per GPU).
    """
    if name not in DEVICES:
        raise RuntimeSetupError(f"--device must be one of {', '.join(DEVICES)}; found {name!r}")
    has_cuda = torch.cuda.is_available()
    if name == "cpu" or (name == "auto" and not has_cuda):
        return torch.device("cpu")
    if not has_cuda:
        why = ("this torch build has no CUDA support (torch.version.cuda is None; a CPU wheel)"
               if torch.version.cuda is None else "no CUDA GPU is visible (check CUDA_VISIBLE_DEVICES and the driver)")
        raise RuntimeSetupError(f"--device cuda: {why}. Train on the CPU with --device cpu (or --device auto), "
                                "or install a CUDA build of torch on a machine with a GPU")
    gpus = torch.cuda.device_count()
    if local_workers > gpus:
        raise RuntimeSetupError(
            f"--device {name}: {local_workers} workers on this machine but {gpus} GPU(s) visible; one worker trains "
            f"on one GPU. Start at most {gpus} worker(s) per machine (partition into fewer parts, or spread the "
            "workers over more machines with torchrun), or train on the CPU with --device cpu")
    return torch.device("cuda", local_rank)


def process_group_backend(device: torch.device) -> str:
    """The default group's backend: gloo on CPU; on CUDA, NCCL for CUDA tensors (gradients)
    and gloo for the CPU ones (control figures)."""
    return "cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo"


class DeviceCopier:
    """Moves a step's tensors to the device on a side stream, so that the copies of step i+1
    (issued by the prefetch thread) overlap the compute of step i.

    Producer: ``with copier.side_stream(): x = copier.move(t); ...; event = copier.record()``.
    Consumer: ``copier.ready(event, x, ...)`` before using them. On CPU every method is a
    no-op (``move`` returns its input).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.stream = torch.cuda.Stream(device) if self.cuda else None

    def side_stream(self):
        """A context in which CUDA work goes to the copy stream."""
        return torch.cuda.stream(self.stream) if self.cuda else contextlib.nullcontext()

    def move(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` on the device (asynchronous from pinned host memory)."""
        return t.to(self.device, non_blocking=True) if self.cuda else t

    def record(self):
        """An event marking the work issued so far on the copy stream (None on CPU)."""
        if not self.cuda:
            return None
        event = torch.cuda.Event()
        event.record(self.stream)
        return event

    def ready(self, event, *tensors: torch.Tensor) -> None:
        """Make the current stream wait for ``event`` and own ``tensors`` (so the caching
        allocator does not reuse their memory while the current stream still reads them)."""
        if event is None:
            return
        current = torch.cuda.current_stream(self.device)
        current.wait_event(event)
        for t in tensors:
            t.record_stream(current)
