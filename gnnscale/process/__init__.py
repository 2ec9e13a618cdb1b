"""The process side: launching workers, process groups, the communicator, heartbeats, devices.

Torch-free to import (the launcher of ``gnnscale train`` checks and starts workers without
torch); each name loads its module on first use.
"""
from __future__ import annotations

from gnnscale.lazy import lazy_exports

_EXPORTS = {
    "launch_local": ".launch", "in_torchrun": ".launch", "find_free_port": ".launch",
    "init_distributed": ".groups", "new_group": ".groups", "shutdown_distributed": ".groups",
    "Communicator": ".comm", "NetworkModel": ".comm", "Health": ".health",
    "resolve_device": ".device", "DeviceCopier": ".device",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
