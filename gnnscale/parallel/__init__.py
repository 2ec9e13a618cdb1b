"""The parallelism axes: data parallelism, a layer pipeline's stages, both pipelines (the plan and
the schedules they follow are in :mod:`gnnscale.planning`)."""
