"""Figures of a recorded study in which every arm stays legible, however many arms there are.

:func:`plot_quality_and_speed` draws one row per arm, in two panels that share the rows: on the left each seed's
value as a small point and the arm's mean with its 95% interval, on the right the arm's training throughput. The arm
names sit on the shared vertical axis, one per row, so no two of them can overlap; the figure grows with the number
of arms. :func:`arm_rows` builds the rows from recorded studies (``gma_teach.study.load_arm``).

:func:`plot_declared_comparisons` draws a study's declared comparisons as a forest plot: one row per comparison,
each seed's paired difference as a small point, the mean difference with its 95% interval, a filled marker where
the comparison is told apart after Holm's correction and a hollow one where it is not; its intervals are the
unadjusted 95% ones (Holm adjusts the p-value, not the interval), and the axis says so.

:func:`plot_claims` draws Part IV's claims (``gma_teach.study.gma_claims``) the same way: one panel per claim, one
row per comparison its verdict rests on, oriented so that GMA's better side is always to the right, coloured by the
claim's verdict and naming the rival.
"""
from __future__ import annotations

import math
import textwrap

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
                  "seeds, mean and unadjusted 95% interval")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10, y=1.0)
    fig.tight_layout()
    return fig


VERDICT_COLORS = {"for": "#1b7837", "not for": "#b2182b", "not shown": "0.45"}
"""The colour of each verdict of ``gma_teach.study.verdict_of`` in :func:`plot_claims`."""


def plot_claims(claims, *, title: str | None = None):
    """A forest plot of Part IV's claims: one panel per claim, one row per comparison its verdict rests on.

    Each row is the difference GMA minus the named rival, turned so that GMA's better side is to the right (for a
    lower-is-better unit the sign flips), times the claim's ``scale``, in the claim's ``unit``: a declared
    comparison as its mean with its unadjusted 95% interval, filled where Holm's correction tells it apart and
    hollow where not; a measured one without an interval as a diamond (exact counts and single runs). A comparison
    with no number (an exact property such as a state that stops growing) is written in its panel. Each panel's
    title gives the verdict, the claim and its rivals, in the verdict's colour (:data:`VERDICT_COLORS`); the legend
    sits above the panels.

    Args:
        claims: ``gma_teach.study.gma_claims()`` rows (``"side"``, ``"claim"``, ``"against"``, ``"basis"``,
            ``"unit"``, ``"scale"``).
        title: the figure's title.

    Returns:
        the matplotlib ``Figure``, one axis per claim in the claims' order.
    """
    if not isinstance(claims, (list, tuple)) or not claims:
        raise ValueError(f"claims must be a non-empty list of gma_claims rows, got {claims!r}")
    for claim in claims:
        missing = {"side", "claim", "against", "basis"} - set(claim)
        if missing:
            raise ValueError(f"every claim needs side, claim, against and basis; {claim.get('claim')!r} lacks "
                             f"{sorted(missing)}")
        if claim["side"] not in VERDICT_COLORS:
            raise ValueError(f"a claim's side must be one of {list(VERDICT_COLORS)}, got {claim['side']!r}")
    book_style()
    heights = [max(1, len(claim["basis"])) + 1.4 for claim in claims]
    fig, axes = plt.subplots(len(claims), 1, figsize=(8.0, 0.9 + ROW_INCHES * sum(heights)),
                             gridspec_kw={"height_ratios": heights})
    axes = [axes] if len(claims) == 1 else list(axes)
    for ax, claim in zip(axes, claims):
        color, scale = VERDICT_COLORS[claim["side"]], claim.get("scale", 1.0)
        basis = claim["basis"]
        positions = list(range(len(basis)))[::-1]
        labels = []
        for y, b in zip(positions, basis):
            width = f" (width {b['width']})" if b.get("width") is not None else ""
            labels.append(f"{b.get('arm', 'gma')}{width} vs {b['rival']}")
            if "difference" not in b:
                ax.text(0.0, y, f"  exact: GMA {b.get('exact', '?')} of {b['rival']}", va="center", ha="left",
                        fontsize=8, color=color)
                continue
            turn = -scale if b["lower_is_better"] else scale
            mean = turn * b["difference"]
            if "ci95" in b:
                low, high = sorted(turn * bound for bound in b["ci95"])
                ax.errorbar(mean, y, xerr=[[mean - low], [high - mean]], fmt="o", ms=6, capsize=3, color=color,
                            mfc=color if b["told_apart"] else "white", zorder=3)
            else:
                ax.plot([mean], [y], "D", ms=6, color=color, zorder=3)
        ax.axvline(0.0, color="0.3", lw=0.8, zorder=1)
        ax.set_yticks(positions, labels, fontsize=8)
        ax.set_ylim(-0.7, len(basis) - 0.3)
        if all("difference" not in b for b in basis):
            ax.set_xticks([])
            ax.set_xlabel("an exact property, no scale", fontsize=8)
        else:
            ax.set_xlabel(f"{claim.get('unit') or 'difference'}, GMA minus the rival, GMA better to the right",
                          fontsize=8)
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", alpha=0.3)
        heading = textwrap.fill(f"{claim['side']}: {claim['claim']} (against {claim['against']})", 95)
        ax.set_title(heading, loc="left", fontsize=8.5, color=color)
    handles = [plt.Line2D([], [], marker="s", ls="", color=c, label=side) for side, c in VERDICT_COLORS.items()]
    handles += [plt.Line2D([], [], marker="o", ls="", color="0.2", label="told apart (Holm)"),
                plt.Line2D([], [], marker="o", ls="", color="0.2", mfc="white", label="not told apart"),
                plt.Line2D([], [], marker="D", ls="", color="0.2", label="measured, no interval"),
                plt.Line2D([], [], marker="|", ms=8, color="0.2", label="unadjusted 95% interval")]
    top = 1.0 - 0.6 / fig.get_figheight()
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0), ncol=4, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10, y=1.0 + 0.3 / fig.get_figheight())
    fig.tight_layout(rect=(0, 0, 1, top))
    return fig
