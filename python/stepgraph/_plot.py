"""Loss-curve plots from a run's metrics.jsonl (matplotlib is optional: ``stepgraph[plot]``)."""

from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]


def read_metrics(run_dir: PathLike) -> Dict[str, List[dict]]:
    """The events of a run's metrics.jsonl grouped by kind: progress, eval, summary.

    run_dir is the run's folder or the metrics file itself. Lines that are not JSON objects
    (a run killed mid-write) are skipped.
    """
    path = os.fspath(run_dir)
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"no metrics file at '{path}': give the folder a run wrote with "
            "`stepgraph train --out DIR` (or stepgraph.train(out_dir=DIR))"
        )
    events: Dict[str, List[dict]] = {"progress": [], "eval": [], "summary": []}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(e, dict) and e.get("event") in events:
                events[e["event"]].append(e)
    return events


def _finite(v: object) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v)


def plot(run_dir: PathLike, out: Optional[PathLike] = None, *, log_scale: Optional[bool] = None) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "stepgraph.plot needs matplotlib: pip install 'stepgraph[plot]' (or pip install matplotlib)"
        ) from e

    events = read_metrics(run_dir)
    progress = [e for e in events["progress"] if _finite(e.get("loss")) and "step" in e]
    evals = [e for e in events["eval"] if _finite(e.get("val_loss")) and "step" in e]
    if not progress and not evals:
        raise ValueError(
            f"'{os.fspath(run_dir)}' has no loss values to plot (was the run made with train.log_every 0?)"
        )
    base = os.fspath(run_dir)
    folder = base if os.path.isdir(base) else os.path.dirname(base) or "."
    out_path = os.fspath(out) if out is not None else os.path.join(folder, "loss.png")

    accuracy = [e for e in evals if _finite(e.get("val_accuracy"))]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    losses = [e["loss"] for e in progress] + [e["val_loss"] for e in evals]
    if progress:
        # Few points (a short run, a large log_every): markers, so a single point still shows.
        style = "o-" if len(progress) < 20 else "-"
        ax.plot([e["step"] for e in progress], [e["loss"] for e in progress], style, label="train loss",
                color="C0", markersize=3)
    if evals:
        ax.plot([e["step"] for e in evals], [e["val_loss"] for e in evals], "o-", label="validation loss",
                color="C1", markersize=3)
    positive = [v for v in losses if v > 0]
    if log_scale is None:
        log_scale = len(positive) == len(losses) and len(positive) > 1 and max(positive) / min(positive) > 20
    if log_scale and positive:
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(True, alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    # Physics-informed runs: the relative L2 error against the known solution.
    l2 = [e for e in progress if _finite(e.get("rel_l2_error"))]
    if l2:
        ax2 = ax.twinx()
        ax2.plot([e["step"] for e in l2], [e["rel_l2_error"] for e in l2], "s--", color="C3", markersize=3,
                 label="relative L2 error")
        ax2.set_yscale("log")
        ax2.set_ylabel("relative L2 error")
        h2, l2labels = ax2.get_legend_handles_labels()
        handles += h2
        labels += l2labels
    if accuracy:
        ax2 = ax.twinx()
        ax2.plot([e["step"] for e in accuracy], [100 * e["val_accuracy"] for e in accuracy], "s--",
                 color="C2", markersize=3, label="validation accuracy (%)")
        ax2.set_ylabel("accuracy (%)")
        h2, l2 = ax2.get_legend_handles_labels()
        handles += h2
        labels += l2
    ax.legend(handles, labels, loc="upper right")
    title = os.path.basename(os.path.abspath(folder))
    if events["summary"]:
        s = events["summary"][-1]
        extra = f"{s.get('steps', '?')} steps on {s.get('device', '?')}"
        if _finite(s.get("us_per_step")):
            extra += f", {s['us_per_step']:.1f} us/step"
        title = f"{title}: {extra}"
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out_path)
    plt.close(fig)
    coords = events["summary"][-1].get("coordinates") if events["summary"] else None
    _plot_solution(plt, folder, coords if isinstance(coords, list) and len(coords) == 2 else None)
    return out_path


def _plot_solution(plt: Any, folder: str, coords: Optional[List[str]] = None) -> Optional[str]:
    """A physics-informed run in two coordinates: prediction, solution and error on the
    evaluation grid (the run's eval_points.npy, prediction.npy, exact.npy) as solution.png."""
    import numpy as np

    paths = [os.path.join(folder, n) for n in ("eval_points.npy", "prediction.npy", "exact.npy")]
    if not all(os.path.exists(p) for p in paths):
        return None
    pts, pred, exact = (np.load(p) for p in paths)
    if pts.ndim != 2 or pts.shape[1] != 2:
        return None
    u, ref = pred[:, 0], exact[:, 0]
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), dpi=110)
    for ax, values, name in ((axes[0], u, "prediction"), (axes[1], ref, "solution"),
                             (axes[2], np.abs(u - ref), "|error|")):
        art = ax.tricontourf(pts[:, 0], pts[:, 1], values, levels=40)
        fig.colorbar(art, ax=ax)
        ax.set_title(name)
        ax.set_xlabel(coords[0] if coords else "coordinate 0")
        ax.set_ylabel(coords[1] if coords else "coordinate 1")
    rel = float(np.linalg.norm(u - ref) / max(np.linalg.norm(ref), 1e-300))
    fig.suptitle(f"relative L2 error {rel:.2e}")
    fig.tight_layout()
    out = os.path.join(folder, "solution.png")
    fig.savefig(out)
    plt.close(fig)
    return out
