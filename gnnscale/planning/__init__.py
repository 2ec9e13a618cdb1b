"""The torch-free plan of a run: which axis runs it, which option applies where (plan), and a layer
pipeline's stage split and GPipe / 1F1B orders (schedules). The launcher checks a run with them
before any worker (or torch) starts."""
from __future__ import annotations

from gnnscale.lazy import lazy_exports

_EXPORTS = {"plan_run": ".plan", "ParallelPlan": ".plan", "PlanError": ".plan",
            "plan_stages": ".schedules", "schedule": ".schedules", "PipelineError": ".schedules"}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
