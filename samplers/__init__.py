"""Neighbor samplers: local (one process) and distributed (owners sample their nodes)."""
from __future__ import annotations

from gnnscale.lazy import lazy_exports

# Public name -> defining submodule; loaded on first use (PEP 562), so that checking fanouts
# (the launcher does, before any worker starts) imports neither torch nor numba.
_EXPORTS = {
    "Block": ".block",
    "DistNeighborSampler": ".distributed",
    "EdgeFilter": ".link",
    "LinkSampler": ".link",
    "MiniBatch": ".block",
    "NegativeSampler": ".link",
    "NeighborSampler": ".local",
    "SamplingKeys": ".local",
    "check_fanouts": ".fanouts",
}
__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
