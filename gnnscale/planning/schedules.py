"""The plan of a layer pipeline: which layers each stage runs, and the order in which a stage
runs its micro-batches' forwards and backwards.

Stages (:func:`plan_stages`): K runs of consecutive layers, given (``--stage-layers 8,8``) or
balanced by per-layer cost (the most expensive stage as cheap as possible).

Schedules (:func:`schedule`): a schedule is a list of ``(op, m)``: ``op`` is ``"F"`` (forward of micro-batch ``m``) or
``"B"`` (its backward). Every schedule here flushes: all M backwards end before the optimizer
step, so a step's gradients are exactly those of the M micro-batches (PipeDream-flush); no
weight versions are kept.

- ``gpipe`` (GPipe): M forwards, then M backwards. Stage ``s`` holds up to M micro-batches'
  activations.
- ``1f1b`` (PipeDream-flush, one-forward-one-backward): stage ``s`` of K runs
  ``min(K - s - 1, M)`` warm-up forwards, then alternates one forward and one backward, then
  drains the remaining backwards. It holds at most ``min(K - s, M)`` micro-batches'
  activations, so at most K whatever M is.

Both have the same bubble: with equal stage times, a fraction ``(K - 1) / (M + K - 1)`` of each
stage's step is idle (:func:`bubble_fraction`).

Why not ``torch.distributed.pipelining``: its stages infer the shapes of the tensors passed
between them from the first micro-batch and its ``PipelineSchedule`` splits one input batch
into equal chunks along dimension 0. A GNN micro-batch is a stack of sampled blocks whose
sizes change with every micro-batch (the activations a stage passes on have as many rows as
the next block has sources), and the blocks themselves are not a tensor to chunk. The engine
keeps its own small schedule and point-to-point exchange, with the run's timeout on every wait.
"""
from __future__ import annotations

from gnnscale.errors import GnnscaleError

SCHEDULES = ("gpipe", "1f1b")


class PipelineError(GnnscaleError):
    """A bad pipeline configuration (stages, micro-batches, schedule)."""


def plan_stages(num_layers: int, num_stages: int, stage_layers=None, layer_costs=None) -> list[tuple[int, int]]:
    """Layers ``[start, end)`` of each stage.

    Args:
        num_layers: L. num_stages: K (1 <= K <= L).
        stage_layers: layers per stage (K positive ints summing to L), or None to balance.
        layer_costs: L non-negative per-layer costs (e.g. measured seconds of forward and
            backward); None counts every layer as 1. Balancing picks the contiguous split whose
            most expensive stage is cheapest.

    Raises:
        PipelineError: K outside [1, L], or stage sizes that are not K positive ints summing to L.
    """
    if not 1 <= num_stages <= num_layers:
        raise PipelineError(
            f"--pipeline-stages must be between 1 and the model's {num_layers} layers (a stage runs at least one "
            f"layer); found {num_stages}. Use fewer stages or a deeper model (one --fanouts value per layer)."
        )
    if stage_layers is not None:
        sizes = [int(n) for n in stage_layers]
        if len(sizes) != num_stages or any(n < 1 for n in sizes) or sum(sizes) != num_layers:
            raise PipelineError(
                f"--stage-layers must give {num_stages} positive layer counts (one per stage) summing to the "
                f"model's {num_layers} layers; found {list(stage_layers)} (sum {sum(sizes)})"
            )
    else:
        costs = [1.0] * num_layers if layer_costs is None else [float(c) for c in layer_costs]
        if len(costs) != num_layers or any(not c >= 0 for c in costs):
            raise PipelineError(f"expected {num_layers} non-negative layer costs; found {layer_costs}")
        sizes = _balanced_sizes(costs, num_stages)
    bounds, start = [], 0
    for n in sizes:
        bounds.append((start, start + n))
        start += n
    return bounds


def _balanced_sizes(costs: list[float], k: int) -> list[int]:
    """Contiguous split of ``costs`` into k non-empty runs minimizing the largest run's sum
    (dynamic programming over L <= a few hundred layers; ties go to the earlier, smaller cut)."""
    n = len(costs)
    prefix = [0.0]
    for c in costs:
        prefix.append(prefix[-1] + c)
    inf = float("inf")
    # best[j][i]: the smallest possible largest-run sum splitting costs[:i] into j runs.
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    cut = [[0] * (n + 1) for _ in range(k + 1)]
    best[0][0] = 0.0
    for j in range(1, k + 1):
        for i in range(j, n - (k - j) + 1):
            for c in range(j - 1, i):
                v = max(best[j - 1][c], prefix[i] - prefix[c])
                if v < best[j][i] - 1e-12:
                    best[j][i], cut[j][i] = v, c
    sizes, i = [], n
    for j in range(k, 0, -1):
        c = cut[j][i]
        sizes.append(i - c)
        i = c
    return sizes[::-1]


def check_schedule(name: str) -> str:
    if name not in SCHEDULES:
        raise PipelineError(f"--schedule must be one of {', '.join(SCHEDULES)}; found {name!r}")
    return name


def schedule(name: str, stage: int, num_stages: int, micro_batches: int) -> list[tuple[str, int]]:
    """The ``(op, micro_batch)`` sequence stage ``stage`` of ``num_stages`` runs in one step.

    Forwards run in micro-batch order on every stage, and so do backwards.
    """
    check_schedule(name)
    if num_stages < 1 or not 0 <= stage < num_stages:
        raise PipelineError(f"stage must be in [0, {num_stages}); found {stage}")
    if micro_batches < 1:
        raise PipelineError(f"--micro-batches must be at least 1; found {micro_batches}")
    m = micro_batches
    if name == "gpipe":
        return [("F", i) for i in range(m)] + [("B", i) for i in range(m)]
    warmup = min(num_stages - stage - 1, m)
    ops = [("F", i) for i in range(warmup)]
    f, b = warmup, 0
    while f < m:
        ops += [("F", f), ("B", b)]
        f, b = f + 1, b + 1
    ops += [("B", i) for i in range(b, m)]
    return ops


def check_pipeline(stages: int, stage_layers, micro_batches: int, schedule_name: str, num_layers: int,
                   workers: int) -> list[tuple[int, int]]:
    """Check a pipeline configuration against the model and the worker count; the stage bounds.

    Raises:
        PipelineError: K above the layer count, W not a multiple of K, stage sizes that do not
            sum to the layers, M < 1, an unknown schedule.
    """
    check_schedule(schedule_name)
    if micro_batches < 1:
        raise PipelineError(f"--micro-batches must be at least 1; found {micro_batches}")
    bounds = plan_stages(num_layers, stages, stage_layers)
    if workers % stages:
        raise PipelineError(
            f"--workers {workers} is not a multiple of --pipeline-stages {stages}: the workers form D pipelines "
            f"of K stages (W = D x K). Use --workers {stages * max(1, workers // stages)}, or a number of stages "
            f"that divides {workers}."
        )
    return bounds


def max_in_flight(ops: list[tuple[str, int]]) -> int:
    """The most micro-batches whose forward has run and backward not yet: how many micro-batches'
    activations the stage holds at its peak under ``ops``."""
    held = peak = 0
    for op, _ in ops:
        held += 1 if op == "F" else -1
        peak = max(peak, held)
    return peak


def bubble_fraction(num_stages: int, micro_batches: int) -> float:
    """Idle fraction of a flushed pipeline step with equal stage times: (K - 1) / (M + K - 1)."""
    return (num_stages - 1) / (micro_batches + num_stages - 1)
