"""Paper-style figures of simulation results, written as PNG files.

- :func:`plot_jct_vs_load`: Gavel's figure shape (e.g. its Figure 8): x = input job rate
  (jobs/hour), y = average JCT in hours, one line per policy, error bars = standard deviation
  over seeds.
- :func:`plot_jct_cdf`: the empirical CDF of JCT (hours), one line per policy, all seeds and
  loads of a policy pooled.

matplotlib is imported lazily (with the non-interactive Agg backend), so the rest of
schedlab works without it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from schedlab.analysis.metrics import job_completion_times
from schedlab.atomic import atomic_path
from schedlab.errors import InputError

log = logging.getLogger(__name__)

HOUR_S = 3600.0


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise InputError("plots need matplotlib (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colour(index: int) -> str:
    """The index-th colour of matplotlib's default cycle (tab10)."""
    return f"C{index % 10}"


def _save(fig: Any, path: str | Path, dpi: int) -> Path:
    """Save a figure to a temporary file in the target folder, then rename (atomic)."""
    target = Path(path)
    if target.suffix.lower() != ".png":
        raise InputError("plots are written as PNG; name the file *.png", file=str(target))
    with atomic_path(target, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight")
    log.info("wrote %s", target)
    return target


def plot_jct_vs_load(
    aggregated: pd.DataFrame,
    path: str | Path,
    *,
    policies: Sequence[str] | None = None,
    title: str | None = None,
    dpi: int = 150,
) -> Path:
    """Average JCT (hours) against the job arrival rate (jobs/hour), one line per policy.

    ``aggregated`` is :func:`schedlab.analysis.sweep.aggregate`'s table: columns ``policy``,
    ``jobs_per_hour``, ``avg_jct_s_mean`` and (optional) ``avg_jct_s_std``.  Runs without an
    arrival rate (every job at 0 s) cannot be placed on the x axis and are left out.  The i-th
    name of ``policies`` always gets the i-th colour, so figures of one study match.
    """
    needed = ("policy", "jobs_per_hour", "avg_jct_s_mean")
    missing = [c for c in needed if c not in aggregated.columns]
    if missing:
        raise InputError(f"the table lacks column(s) {', '.join(missing)} "
                         "(pass schedlab.analysis.sweep.aggregate(...))")
    data = aggregated[aggregated["jobs_per_hour"].notna()]
    if data.empty:
        raise InputError("no run has an arrival rate (jobs/hour) to plot against")
    names = list(policies) if policies is not None else list(dict.fromkeys(data["policy"]))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    try:
        for i, name in enumerate(names):
            rows = data[data["policy"] == name].sort_values("jobs_per_hour")
            if rows.empty:
                continue
            x = rows["jobs_per_hour"].to_numpy(dtype=float)
            y = rows["avg_jct_s_mean"].to_numpy(dtype=float) / HOUR_S
            err = (rows["avg_jct_s_std"].to_numpy(dtype=float) / HOUR_S
                   if "avg_jct_s_std" in rows.columns else None)
            ax.errorbar(x, y, yerr=err, marker="o", markersize=4, capsize=3, label=name,
                        color=_colour(i))
        ax.set_xlabel("Input job rate (jobs/hour)")
        ax.set_ylabel("Average JCT (hours)")
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(frameon=False)
        if title:
            ax.set_title(title)
        return _save(fig, path, dpi)
    finally:
        plt.close(fig)


def plot_jct_cdf(
    results: pd.DataFrame,
    path: str | Path,
    *,
    policies: Sequence[str] | None = None,
    log_x: bool = True,
    title: str | None = None,
    dpi: int = 150,
) -> Path:
    """Empirical CDF of JCT in hours: F(x) = #{j : JCT_j <= x} / J, one line per policy.

    ``results`` is a per-job table (:func:`schedlab.analysis.sweep.load_results`) with
    ``arrival``, ``finish`` and ``policy`` (a table without ``policy`` is drawn as one line).
    The x axis is logarithmic by default (``log_x``): Gavel-style durations span 30 minutes to
    a week.  Each policy keeps its colour across figures when the same ``policies`` are given.
    """
    frame = results if "policy" in results.columns else results.assign(policy="jobs")
    names = list(policies) if policies is not None else list(dict.fromkeys(frame["policy"]))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    try:
        drawn = 0
        for i, name in enumerate(names):
            jct = np.sort(job_completion_times(frame[frame["policy"] == name]).to_numpy())
            if not len(jct):
                continue
            hours = jct / HOUR_S
            fraction = np.arange(1, len(hours) + 1) / len(hours)
            ax.step(hours, fraction, where="post", label=name, color=_colour(i))
            drawn += 1
        if not drawn:
            raise InputError("no finished job to plot")
        ax.set_xlabel("JCT (hours)")
        ax.set_ylabel("Fraction of jobs")
        ax.set_ylim(0, 1.0)
        if log_x:
            ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
        ax.legend(frameon=False, loc="lower right")
        if title:
            ax.set_title(title)
        return _save(fig, path, dpi)
    finally:
        plt.close(fig)
