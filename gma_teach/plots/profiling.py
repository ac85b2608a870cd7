"""Chapter 8's figures: memory against N on log-log axes with fitted slopes, tokens/s against N and against K."""
from __future__ import annotations

import math

from ..measure import loglog_slope
from ..runs.profile_tables import fit_slopes, n_sweep
from ._style import COLORS, mixer_color, new_figure


def _series(rows, x_key, y_key):
    """``{label: (xs, ys)}`` sorted by x, rows with a missing y left out."""
    series: dict = {}
    for row in rows:
        if row.get(y_key) is not None:
            series.setdefault(row["label"], []).append((row[x_key], row[y_key]))
    return {label: tuple(zip(*sorted(points))) for label, points in series.items()}


def plot_profile(results, *, min_x=None, title=None):
    """Three panels from :func:`gma_teach.profiling.sweep` rows: memory vs N (log-log, slope in each legend
    entry), tokens/s vs N, and GMA's tokens/s and memory vs K.

    Args:
        results: result dicts (the N sweep and, optionally, the K sweep).
        min_x: fit slopes on ``N >= min_x`` only.
        title: a figure title (e.g. the hardware).

    Returns:
        the matplotlib ``Figure``.
    """
    if not results:
        raise ValueError("results is empty")
    by_n = n_sweep(results)
    slopes = fit_slopes(by_n, min_x=min_x)
    fig, axes = new_figure(3, width=13.5, height=3.8)
    memory_ax, speed_ax, k_ax = axes[0]
    for index, (label, (xs, ys)) in enumerate(_series(by_n, "seq_len", "peak_memory_bytes").items()):
        legend = f"{label} (slope {slopes[label]:.2f})" if label in slopes else label
        memory_ax.plot(xs, [y / 2**20 for y in ys], marker="o", ms=3, color=mixer_color(label, index),
                       label=legend)
    for index, (label, (xs, ys)) in enumerate(_series(by_n, "seq_len", "tokens_per_second").items()):
        speed_ax.plot(xs, ys, marker="o", ms=3, color=mixer_color(label, index), label=label)
    memory_ax.set(xscale="log", yscale="log", xlabel="sequence length N", ylabel="peak memory (MiB)",
                  title="memory, forward + backward")
    memory_ax.set_xscale("log", base=2)
    speed_ax.set(xscale="log", yscale="log", xlabel="sequence length N", ylabel="tokens / s",
                 title="throughput, forward + backward")
    speed_ax.set_xscale("log", base=2)
    memory_ax.legend(fontsize=7)
    speed_ax.legend(fontsize=7)
    gma_rows = [r for r in results if r["mixer"] == "gma"]
    lengths = {}
    for r in gma_rows:
        lengths.setdefault(r["seq_len"], []).append(r)
    if lengths:
        seq_len, rows = max(lengths.items(), key=lambda item: len(item[1]))
        rows = sorted(rows, key=lambda r: r["n_components"])
        ks = [r["n_components"] for r in rows]
        k_ax.plot(ks, [r["tokens_per_second"] for r in rows], marker="o", color=COLORS["gma"], label="tokens / s")
        k_ax.set(xscale="log", xlabel="components K", ylabel="tokens / s", title=f"GMA at N = {seq_len}")
        k_ax.set_xscale("log", base=2)
        if all(r["peak_memory_bytes"] is not None for r in rows):
            twin = k_ax.twinx()
            twin.plot(ks, [r["peak_memory_bytes"] / 2**20 for r in rows], marker="s", ls="--", color="0.4",
                      label="memory (MiB)")
            twin.set_ylabel("peak memory (MiB), dashed")
            twin.grid(False)
        k_ax.legend(fontsize=7, loc="lower left")
    else:
        k_ax.set_axis_off()
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def plot_paper_table(table, *, ax=None):
    """The paper's Table 1 as memory-vs-N lines (GB) with fitted slopes: ``table`` maps a label to
    ``{N: (memory_gb, tokens_per_second)}``."""
    if ax is None:
        fig, axes = new_figure(1, width=5.5, height=3.6)
        ax = axes[0, 0]
    else:
        fig = ax.figure
    styles = {}
    for index, (label, points) in enumerate(table.items()):
        xs = sorted(points)
        ys = [points[n][0] for n in xs]
        slope = loglog_slope(xs, ys) if len(xs) >= 2 and all(y > 0 and math.isfinite(y) for y in ys) else None
        legend = f"{label} (slope {slope:.2f})" if slope is not None else label
        color = mixer_color(label, index)
        repeat = styles[color] = styles.get(color, -1) + 1  # several K of GMA: same colour, other line styles
        ax.plot(xs, ys, marker="o", ms=3, color=color, ls=("-", "--", "-.", ":")[repeat % 4], label=legend)
    ax.set(xscale="log", yscale="log", xlabel="sequence length N", ylabel="memory (GB)",
           title="the paper's Table 1 (GPU)")
    ax.legend(fontsize=7)
    return fig
