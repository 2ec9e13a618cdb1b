"""Bounded-staleness rows: the one stale-row table, the halo exchange of historical mode."""
from __future__ import annotations

from gnnscale.lazy import lazy_exports

_EXPORTS = {"HaloExchange": ".halo"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
