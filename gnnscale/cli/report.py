"""``gnnscale report``: plots and a summary table of one or more runs' ``--metrics`` files.

Several runs go on the same axes, each labelled by the options in which its configuration
differs from the others' (``exchange=historical``, ``cache_policy=presample`` ...). Written:

- ``loss.png``: training loss per epoch;
- ``accuracy.png``: train, validation and test accuracy per epoch (one panel each);
- ``stages.png``: seconds per epoch by stage (sample, fetch, compute, wait, gradient sync),
  stacked, one panel per run;
- ``bytes.png``: megabytes sent per epoch by category (all ranks; a colour per category, a line
  style per run, symmetric-log scale);
- ``summary.txt``: one row per run: epochs, final loss, final and best accuracies, mean epoch
  seconds, megabytes in all.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from gnnscale.errors import GnnscaleError
from gnnscale.training.metrics import summary_figures

STAGES = ("sample", "fetch", "compute", "wait", "grad_sync")
IGNORED = {"metrics", "progress", "timeout", "verify", "checkpoint_dir", "resume", "save_model", "tensorboard",
           "log_every"}  # options that do not change what a run computes


class ReportError(GnnscaleError):
    """A metrics file that cannot be read or plotted."""


def read_metrics(path: str | os.PathLike) -> dict[str, Any]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ReportError(f"{path}: cannot read a metrics file ({err}); write one with gnnscale train --metrics") \
            from None
    if not isinstance(data, dict) or not isinstance(data.get("epochs"), list) or not data["epochs"]:
        raise ReportError(f"{path}: expected the JSON of `gnnscale train --metrics` (a dict with a non-empty "
                          "'epochs' list), found something else")
    return data


def labels(runs: Sequence[dict], paths: Sequence[str]) -> list[str]:
    """Each run's label: the options that differ between the runs (else the file names)."""
    configs = [{k: v for k, v in (r.get("config") or {}).items() if k not in IGNORED} for r in runs]
    keys = sorted({k for c in configs for k in c})
    differ = [k for k in keys if len({json.dumps(c.get(k), sort_keys=True, default=str) for c in configs}) > 1]
    out = []
    for c, p in zip(configs, paths):
        text = ", ".join(f"{k}={c.get(k)}" for k in differ)
        out.append(text or Path(p).stem)
    if len(set(out)) < len(out):  # the same options: tell them apart by file
        out = [f"{o} ({Path(p).stem})" for o, p in zip(out, paths)]
    return out


def summary(runs: Sequence[dict], names: Sequence[str]) -> str:
    rows = [("run", "epochs", "final loss", "val", "test", "best val", "test@best", "s/epoch", "MB sent")]
    for r, name in zip(runs, names):
        ep = r["epochs"]
        fmt = lambda v: "-" if v is None or (isinstance(v, float) and v < 0) else f"{v:.4f}"  # noqa: E731
        sel = summary_figures(r)  # the selection metric's figures (accuracy, RMSE, ROC-AUC, ...)
        rows.append((name, str(len(ep)), fmt(ep[-1].get("loss")), fmt(sel["val"]), fmt(sel["test"]),
                     fmt(sel["best_val"]), fmt(sel["test_at_best_val"]),
                     f"{sum(e['epoch_seconds'] for e in ep) / len(ep):.3f}",
                     f"{sum(e.get('bytes_sent', 0) for e in ep) / 1e6:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n" for row in rows)


def write_report(paths: Sequence[str], out_dir: str | os.PathLike) -> dict[str, Any]:
    """Write the PNGs and summary.txt of the runs in ``paths`` to ``out_dir``; the files and the summary."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ReportError("gnnscale report needs matplotlib: pip install 'gnnscale[report]'") from None
    runs = [read_metrics(p) for p in paths]
    names = labels(runs, paths)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = []

    def save(fig, name: str) -> None:
        fig.tight_layout()
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        files.append(str(out / name))

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for r, name in zip(runs, names):
        ax.plot([e["epoch"] for e in r["epochs"]], [e["loss"] for e in r["epochs"]], marker="o", ms=3, label=name)
    ax.set(xlabel="epoch", ylabel="training loss", title="Loss per epoch")
    ax.legend(fontsize=8)
    save(fig, "loss.png")

    fig, axes = plt.subplots(1, 3, figsize=(13, 4), sharey=True)
    for ax, key, title in zip(axes, ("train_acc", "val_acc", "test_acc"), ("train", "validation", "test")):
        for r, name in zip(runs, names):
            pts = [(e["epoch"], e[key]) for e in r["epochs"] if e.get(key) is not None]
            if pts:
                ax.plot(*zip(*pts), marker="o", ms=3, label=name)
        ax.set(xlabel="epoch", title=f"{title} accuracy")
    axes[0].set_ylabel("accuracy")
    axes[0].legend(fontsize=8)
    save(fig, "accuracy.png")

    fig, axes = plt.subplots(1, len(runs), figsize=(5.5 * len(runs), 4), squeeze=False, sharey=True)
    for ax, r, name in zip(axes[0], runs, names):
        epochs = [e["epoch"] for e in r["epochs"]]
        stages = [[e.get("stage_seconds_max_over_ranks", {}).get(s, 0.0) for e in r["epochs"]] for s in STAGES]
        ax.stackplot(epochs, *stages, labels=STAGES)
        ax.set(xlabel="epoch", title=name)
    axes[0][0].set_ylabel("seconds (slowest rank per stage)")
    axes[0][0].legend(fontsize=8, loc="upper left")
    save(fig, "stages.png")

    # One colour per category, one line style per run (equal figures of two runs stay visible).
    fig, ax = plt.subplots(figsize=(10, 4.8))
    cats = sorted({c for r in runs for e in r["epochs"] for c in e.get("bytes_sent_by_category", {})})
    colors = {c: plt.get_cmap("tab10")(i % 10) for i, c in enumerate(cats)}
    styles = ["-", "--", ":", "-."]
    for k, (r, name) in enumerate(zip(runs, names)):
        for c in sorted({c for e in r["epochs"] for c in e.get("bytes_sent_by_category", {})}):
            ax.plot([e["epoch"] for e in r["epochs"]],
                    [e.get("bytes_sent_by_category", {}).get(c, 0) / 1e6 for e in r["epochs"]],
                    linestyle=styles[k % len(styles)], marker="o" if k == 0 else "x", ms=3, color=colors[c],
                    label=f"{name}: {c}")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set(xlabel="epoch", ylabel="MB sent (all ranks, symlog)", title="Bytes per epoch by category")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    save(fig, "bytes.png")

    text = summary(runs, names)
    (out / "summary.txt").write_text(text)
    files.append(str(out / "summary.txt"))
    return {"files": files, "summary": text, "labels": names}
