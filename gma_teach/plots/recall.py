"""Chapter 12's figures: recall against the number of key-value pairs, the recall frontier (recall against the
bytes of the decoding state), and the exact demo's capacity.

The first two read the recall study's table (format: :func:`gma_teach.capacity.check_recall_table`); the third
draws the exact demo of :mod:`gma_teach.capacity`. Every arm keeps one look across the figures
(:func:`arm_style`): the book's colour for each baseline mixer, shades of GMA's green by K (darker for larger K),
dashed lines for the routing remedy.
"""
from __future__ import annotations

import math

import matplotlib

from ..capacity import check_recall_table, gma_size, table_entries
from ._style import COLORS, as_float_array, new_figure

__all__ = ["arm_style", "plot_accuracy_by_pairs", "plot_exact_capacity", "plot_recall_frontier"]

_OTHER_COLORS = {"window": "#8c510a", "local_gma": "#01665e", "decay_linear": "#4393c3", "decay_gma": "#7fbc41"}
_K_RANGE = (8, 256)  # the study's K sweep; the shades of green span it


def arm_style(arm: str) -> dict:
    """Colour, line style and marker of an arm: ``{"color", "ls", "marker"}``.

    ``gma_k{K}``: GMA's green, darker for larger K (8 to 256); ``gma_k{K}_remedy``: the same shade, dashed, square
    markers; ``sdpa``, ``linear``, ``performer``, ``mamba``: the book's colours; the forgetting and hybrid arms
    (``window``, ``local_gma``, ``decay_linear``, ``decay_gma``) their own; anything else grey.
    """
    if not isinstance(arm, str):
        raise TypeError(f"arm must be an arm name (str), got {type(arm).__name__}")
    size = gma_size(arm)
    if size is not None:
        k, remedy = size
        low, high = (math.log2(v) for v in _K_RANGE)
        share = min(1.0, max(0.0, (math.log2(k) - low) / (high - low)))
        color = matplotlib.colors.to_hex(matplotlib.colormaps["Greens"](0.4 + 0.55 * share))
        return {"color": color, "ls": "--" if remedy else "-", "marker": "s" if remedy else "o"}
    if arm in COLORS:
        return {"color": COLORS[arm], "ls": "-", "marker": "o"}
    if arm in _OTHER_COLORS:
        return {"color": _OTHER_COLORS[arm], "ls": ":" if arm.startswith("decay") else "-.", "marker": "^"}
    return {"color": "#888888", "ls": "-", "marker": "x"}


def _mean(values) -> float:
    values = [float(v) for v in values]
    return sum(values) / len(values)


def plot_accuracy_by_pairs(table, *, widths=None, axes=None):
    """Test accuracy against the number of key-value pairs, one line per arm (the mean over seeds), each seed a
    faint point; one panel per width.

    Args:
        table: the recall study's table.
        widths: the widths to draw (default: every width with a recorded arm).
        axes: a sequence of matplotlib axes, one per width (default: a new figure).

    Returns:
        the matplotlib ``Figure``; its legend names every arm drawn.
    """
    check_recall_table(table)
    entries = table_entries(table)
    recorded = sorted({width for _, width in entries})
    widths = recorded if widths is None else [int(w) for w in widths]
    if axes is None:
        fig, grid = new_figure(max(1, len(widths)), width=4.2 * max(1, len(widths)) + 2.2, height=3.8)
        axes = list(grid[0])
    else:
        axes = list(axes)
        if len(axes) != len(widths):
            raise ValueError(f"axes must hold one axis per width ({len(widths)}), got {len(axes)}")
        fig = axes[0].figure
    handles = {}
    for ax, width in zip(axes, widths):
        drawn = [(arm, entry) for (arm, w), entry in entries.items() if w == width]
        for arm, entry in drawn:
            style = arm_style(arm)
            counts = list(entry["by_count"])
            for n in counts:
                ax.plot([n] * len(entry["by_count"][n]), entry["by_count"][n], ls="none", marker=style["marker"],
                        ms=3, color=style["color"], alpha=0.3)
            (line,) = ax.plot(counts, [_mean(entry["by_count"][n]) for n in counts], color=style["color"],
                              ls=style["ls"], marker=style["marker"], ms=4, lw=1.4, label=arm)
            handles.setdefault(arm, line)
        if not drawn:
            ax.text(0.5, 0.5, f"no arm recorded at width {width}", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set(xlabel="key-value pairs", ylabel="test accuracy", title=f"width {width}", ylim=(-0.03, 1.03))
        ax.set_xticks([int(n) for n in table["design"]["kv_pairs"]])
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside right center", fontsize=7)
    return fig


def plot_recall_frontier(table, *, ax=None):
    """The recall frontier: mean test accuracy (over the kv counts; one faint point per seed) against the bytes of
    the model's decoding state (the table's ``state_bytes``, log scale), every arm at every width.

    GMA's K sweep is a connected curve per width and routing (default: solid, remedy: dashed), labelled at its
    largest K; linear attention's widths are a connected curve when two or more are recorded; every other arm is a
    labelled point.

    Returns:
        the matplotlib ``Figure``.
    """
    check_recall_table(table)
    entries = table_entries(table)
    if ax is None:
        fig, grid = new_figure(1, width=7.4, height=4.6)
        ax = grid[0][0]
    else:
        fig = ax.figure
    markers = {width: marker for width, marker in zip(sorted({w for _, w in entries}), "oDv^<>")}
    curves: dict[tuple, list] = {}
    placed = []  # labelled points so far: a label near another one moves down a line
    for (arm, width), entry in entries.items():
        style = arm_style(arm)
        size, accuracy = float(entry["state_bytes"]), _mean(entry["test_mean"])
        ax.plot([size] * len(entry["test_mean"]), entry["test_mean"], ls="none", marker=markers[width], ms=3,
                color=style["color"], alpha=0.3)
        gma = gma_size(arm)
        if gma is not None:
            curves.setdefault(("gma", gma[1], width), []).append((size, accuracy, gma[0]))
            continue
        ax.plot(size, accuracy, marker=markers[width], ms=6, color=style["color"], ls="none")
        crowd = sum(1 for x, y in placed if abs(math.log10(size / x)) < 0.08 and abs(accuracy - y) < 0.04)
        placed.append((size, accuracy))
        ax.annotate(f"{arm} (d={width})", (size, accuracy), xytext=(4, 4 - 9 * crowd), textcoords="offset points",
                    fontsize=7, color=style["color"])
        if arm == "linear":
            curves.setdefault(("linear", False, 0), []).append((size, accuracy, width))
    for (kind, remedy, width), points in curves.items():
        points.sort()
        sizes, accuracies, _ = zip(*points)
        if kind == "linear":
            if len(points) >= 2:
                ax.plot(sizes, accuracies, color=COLORS["linear"], lw=1.2, ls="-")
            continue
        name = f"gma_k{points[-1][2]}" + ("_remedy" if remedy else "")
        style = arm_style(name)
        ax.plot(sizes, accuracies, color=COLORS["gma"], ls=style["ls"], lw=1.4, marker=markers[width], ms=5,
                label=f"GMA, K sweep, d={width}" + (" (remedy)" if remedy else ""))
        for size, accuracy, k in points:
            ax.annotate(f"{k}", (size, accuracy), xytext=(0, -10), textcoords="offset points", fontsize=6,
                        ha="center", color=COLORS["gma"])
    if entries:
        ax.set_xscale("log")
        if any(kind == "gma" for kind, _, _ in curves):
            ax.legend(loc="lower right", fontsize=7)
    else:
        ax.text(0.5, 0.5, "no arm recorded", ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="decoding-state bytes (the whole model, after the whole sequence)",
           ylabel="test accuracy (mean over kv counts)", ylim=(-0.03, 1.03),
           title="the recall frontier (GMA points labelled with K)")
    return fig


def plot_exact_capacity(n_pairs, measured: dict, *, n_slots: int, predicted: dict | None = None, ax=None):
    """The exact demo: recall accuracy against the number of pairs stored in ``n_slots`` slots.

    Args:
        n_pairs: the pair counts ``(P,)``.
        measured: ``{label: (P,) accuracies}`` from the demo, drawn as markers.
        n_slots: K, marked by a vertical line.
        predicted: ``{label: (P,) accuracies}`` from a formula, drawn as lines in the colour of the same label.
        ax: an axis to draw on (default: a new figure).

    Returns:
        the matplotlib ``Figure``.
    """
    pairs = as_float_array("n_pairs", n_pairs)
    if pairs.ndim != 1:
        raise ValueError(f"n_pairs must be one-dimensional, got shape {pairs.shape}")
    if not isinstance(measured, dict) or not measured:
        raise TypeError("measured must be a non-empty dict {label: accuracies}")
    predicted = predicted or {}
    if not isinstance(predicted, dict):
        raise TypeError(f"predicted must be a dict {{label: accuracies}}, got {type(predicted).__name__}")
    for name, curves in (("measured", measured), ("predicted", predicted)):
        for label, values in curves.items():
            if as_float_array(f"{name}[{label!r}]", values).shape != pairs.shape:
                raise ValueError(f"{name}[{label!r}] must have one value per pair count ({pairs.shape[0]}), got "
                                 f"shape {as_float_array(name, values).shape}")
    if ax is None:
        fig, grid = new_figure(1, width=6.4, height=3.8)
        ax = grid[0][0]
    else:
        fig = ax.figure
    labels = list(dict.fromkeys([*measured, *predicted]))
    for index, label in enumerate(labels):
        color = f"C{index}"
        if label in predicted:
            ax.plot(pairs, as_float_array(label, predicted[label]), color=color, lw=1.3,
                    label=f"{label} (formula)")
        if label in measured:
            ax.plot(pairs, as_float_array(label, measured[label]), ls="none", marker="o", ms=4, color=color,
                    mfc="none", label=f"{label} (GMA demo)")
    ax.axvline(n_slots, color="#555555", lw=0.8, ls=":")
    ax.annotate(f"K = {n_slots}", (n_slots, 0.0), xytext=(3, 2), textcoords="offset points", fontsize=8)
    ax.set_xlim(left=0)
    ax.set(xlabel="key-value pairs stored", ylabel="recall accuracy", ylim=(-0.03, 1.05))
    ax.legend(fontsize=7, loc="upper right")
    return fig
