"""Figures of a recorded study in which every arm stays legible, however many arms there are.

:func:`plot_quality_and_speed` draws one row per arm, in two panels that share the rows: on the left each seed's
value as a small point and the arm's mean with its 95% interval, on the right the arm's training throughput. The arm
names sit on the shared vertical axis, one per row, so no two of them can overlap; the figure grows with the number
of arms. :func:`arm_rows` builds the rows from recorded studies (``gma_teach.study.load_arm``).

:func:`plot_declared_comparisons` draws a study's declared comparisons as a forest plot: one row per comparison,
each seed's paired difference as a small point, the mean difference with its 95% interval, a filled marker where
the comparison is told apart after Holm's correction and a hollow one where it is not.
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ..stats import mean_half_width
from ._style import COLORS, book_style
from .results import METRICS, record_values

ROW_INCHES = 0.34
"""The height of one arm's row in inches. At the default font size two tick labels one row apart never touch."""


def arm_rows(named_records: dict, metric: str = "bits_per_byte", speeds: dict | None = None) -> list[dict]:
    """One row per arm: ``{"label", "values", "mean", "half_width", "speed"}``.

    Args:
        named_records: ``{label: record}`` (a record of :func:`gma_teach.experiments.load_results` or
            ``gma_teach.study.load_arm``); records without ``metric`` are left out.
        metric: a key of ``gma_teach.plots.results.METRICS``.
        speeds: ``{label: training tokens per second}`` (for example the study's speed record, every arm timed
            in one process); an arm missing from it gets ``speed`` ``None``.

    ``half_width`` is that of the mean's 95% Student-t interval over the seeds (``None`` for one seed).
    """
    if not isinstance(named_records, dict):
        raise TypeError(f"named_records must be a dict {{label: record}}, got {type(named_records).__name__}")
    speeds = speeds or {}
    rows = []
    for label, record in named_records.items():
        values = record_values(record, metric)
        if not values:
            continue
        mean, half_width = mean_half_width(values)
        rows.append({"label": str(label), "values": values, "mean": mean, "half_width": half_width,
                     "speed": speeds.get(label)})
    return rows


def _check_rows(rows) -> list[dict]:
    if not isinstance(rows, (list, tuple)) or not rows:
        raise ValueError(f"rows must be a non-empty list of arm rows (see arm_rows), got {rows!r}")
    for row in rows:
        missing = {"label", "values", "mean", "half_width", "speed"} - set(row)
        if missing:
            raise ValueError(f"every row needs label, values, mean, half_width and speed; {row!r} lacks {missing}")
    labels = [row["label"] for row in rows]
    if len(set(labels)) != len(labels):
        raise ValueError(f"arm labels must be distinct, got {labels}")
    return list(rows)


def plot_quality_and_speed(rows, *, metric: str = "bits_per_byte", lower_is_better: bool = True,
                           speed_label: str = "training tokens per second", title: str | None = None):
    """A dot plot of a study: each arm's seeds and mean with 95% interval (left), its throughput (right).

    Args:
        rows: from :func:`arm_rows`. They are drawn best first (lowest mean when ``lower_is_better``).
        metric: names the left axis (a key of ``gma_teach.plots.results.METRICS``).
        speed_label: names the right axis; arms whose ``speed`` is ``None`` get no point there.
        title: the figure's title.

    Returns:
        the matplotlib ``Figure`` (``fig.axes[0]``: quality, with the arm labels; ``fig.axes[1]``: speed).
    """
    rows = _check_rows(rows)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
    rows = sorted(rows, key=lambda row: row["mean"], reverse=not lower_is_better)
    book_style()
    height = 1.3 + ROW_INCHES * len(rows)
    fig, (quality_ax, speed_ax) = plt.subplots(1, 2, figsize=(8.0, height), sharey=True,
                                               gridspec_kw={"width_ratios": [2.2, 1.0]})
    positions = list(range(len(rows)))[::-1]  # the best arm at the top
    for y, row in zip(positions, rows):
        quality_ax.scatter(row["values"], [y] * len(row["values"]), s=12, color="0.55", zorder=2,
                           label="one seed" if y == positions[0] else None)
        error = 0.0 if row["half_width"] is None else row["half_width"]
        quality_ax.errorbar(row["mean"], y, xerr=error, fmt="o", ms=6, capsize=3, color=COLORS["gma"], zorder=3,
                            label="mean, 95% interval" if y == positions[0] else None)
        if row["speed"] is not None and math.isfinite(row["speed"]):
            speed_ax.plot([0, row["speed"]], [y, y], color="0.8", lw=2, zorder=1)
            speed_ax.plot(row["speed"], y, "o", ms=6, color=COLORS["softmax"], zorder=2)
    quality_ax.set_yticks(positions, [row["label"] for row in rows])
    quality_ax.set_ylim(-0.7, len(rows) - 0.3)
    direction = "lower is better" if lower_is_better else "higher is better"
    quality_ax.set_xlabel(f"{METRICS[metric][0]} ({direction})")
    quality_ax.grid(axis="x", alpha=0.3)
    quality_ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2, fontsize=8, frameon=False)
    if all(row["speed"] is None for row in rows):
        speed_ax.text(0.5, 0.5, "not measured", ha="center", va="center", transform=speed_ax.transAxes)
    speed_ax.set_xlabel(speed_label)
    speed_ax.set_xlim(left=0)
    speed_ax.grid(axis="x", alpha=0.3)
    speed_ax.tick_params(axis="y", left=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def plot_declared_comparisons(declared: dict, *, metric: str | None = None, scale: float = 1.0,
                              unit: str = "", title: str | None = None):
    """A forest plot of a study's declared comparisons (``gma_teach.study.declared_comparisons``, or the
    ``"declared"`` of a saved ``*_tables.json``).

    Args:
        declared: ``{"comparisons": [{"arm", "against", "metric", "differences", "mean", "ci95", "p_holm",
            "told_apart"}], ...}``.
        metric: draw only the comparisons of this metric (needed when the family spans several).
        scale: multiplies every difference (100 for accuracies in points).
        unit: names the horizontal axis after ``"arm - against"``.
        title: the figure's title.

    Returns:
        the matplotlib ``Figure``; ``fig.axes[0]`` has one row per comparison, labelled ``"arm - against"``, in the
        family's order from the top.
    """
    if not isinstance(declared, dict) or "comparisons" not in declared:
        raise TypeError(f"declared must be a dict with 'comparisons', got {type(declared).__name__}")
    comparisons = [c for c in declared["comparisons"] if metric is None or c["metric"] == metric]
    if not comparisons:
        raise ValueError(f"no declared comparison to draw (metric {metric!r})")
    metrics = sorted({c["metric"] for c in comparisons})
    if len(metrics) > 1:
        raise ValueError(f"the comparisons span several metrics {metrics}: pass metric=")
    book_style()
    fig, ax = plt.subplots(figsize=(7.5, 1.2 + ROW_INCHES * len(comparisons)))
    positions = list(range(len(comparisons)))[::-1]
    for y, c in zip(positions, comparisons):
        ax.scatter([scale * d for d in c["differences"]], [y] * len(c["differences"]), s=12, color="0.55",
                   zorder=2, label="one seed" if y == positions[0] else None)
        low, high = (scale * bound for bound in c["ci95"])
        mean = scale * c["mean"]
        ax.errorbar(mean, y, xerr=[[mean - low], [high - mean]], fmt="o", ms=7, capsize=3, color=COLORS["gma"],
                    mfc=COLORS["gma"] if c["told_apart"] else "white", zorder=3)
    ax.plot([], [], "o", color=COLORS["gma"], label="told apart (Holm)")
    ax.plot([], [], "o", color=COLORS["gma"], mfc="white", label="not told apart")
    ax.axvline(0.0, color="0.3", lw=0.8, zorder=1)
    ax.set_yticks(positions, [f"{c['arm']} - {c['against']}" for c in comparisons])
    ax.set_ylim(-0.7, len(comparisons) - 0.3)
    ax.set_xlabel(f"paired difference, {metrics[0].replace('_', ' ')}{' (' + unit + ')' if unit else ''}: "
                  "seeds, mean and 95% interval")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10, y=1.0)
    fig.tight_layout()
    return fig
