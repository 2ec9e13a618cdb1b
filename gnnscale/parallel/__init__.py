"""The parallelism axes: the plan, data parallelism, pipeline schedules and stages, both pipelines."""
from __future__ import annotations

from gnnscale.lazy import lazy_exports

_EXPORTS = {"plan_stages": ".schedules", "schedule": ".schedules", "PipelineError": ".schedules"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
