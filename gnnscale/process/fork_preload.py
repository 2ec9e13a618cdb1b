"""What the forkserver of :func:`gnnscale.process.launch.start_workers_by_fork` loads once,
so that every worker forked from it starts with it loaded: torch, numba with its CPU target's
registries (about 0.6 s of imports at a process's first compiled call) and the sampling
kernels' module. Imports only: no thread may be running when the server forks."""
from __future__ import annotations

import torch  # noqa: F401

try:
    from numba.core.registry import cpu_target

    cpu_target.target_context.refresh()  # the registries every first compiled call would load
except ImportError:  # pragma: no cover - numba is a dependency
    pass

import gnnscale.samplers.cpu_kernels  # noqa: F401,E402
import gnnscale.samplers.labor_kernels  # noqa: F401,E402
