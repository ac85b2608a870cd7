"""Chapter 12's figures: recall against the number of key-value pairs, the recall frontier (recall against the
bytes of the decoding state), the exact demo's capacity, and the MQAR pilot's validation curves
(:func:`plot_pilot_curves`, read by :func:`gma_teach.capacity.pilot_curves`).

The first two read the recall study's table (format: :func:`gma_teach.capacity.check_recall_table`); the third
draws the exact demo of :mod:`gma_teach.capacity`. Both study figures draw the guessing floor
(:func:`gma_teach.capacity.guessing_floor`: a model that stores nothing but knows the answer is one of the ``n``
values in its context scores ``1/n``). Every arm keeps one look (:func:`arm_style`): the registered colour, line
style and marker of each mixer (:class:`gma_teach.mixers.MixerEntry`), one grey for every GMA arm with the default
routing (their routing collapses and their curves lie on one another), and for GMA with a changed routing a shade
of green per K (:func:`gma_k_color`, lighter for smaller K), read off a colour bar.
"""
from __future__ import annotations

import math

import matplotlib
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from .. import mixers
from ..capacity import (
    LEARNED_ABOVE,
    check_recall_table,
    gma_routing,
    gma_size,
    guessing_floor,
    mean_guessing_floor,
    pilot_curves,
    slot_predictions,
    state_at,
    table_entries,
)
from ..designs import CAPACITY_STUDY
from ..runs.arm_records import record_spec
from ._labels import place_labels
from ._style import as_float_array, mixer_color, new_figure

__all__ = ["DEFAULT_ROUTING_COLOR", "arm_style", "gma_k_color", "plot_accuracy_by_pairs", "plot_exact_capacity",
           "plot_capacity_curves", "plot_pilot_curves", "plot_recall_frontier"]

DEFAULT_ROUTING_COLOR = "#a3a3a3"
"""The one colour of every GMA arm with the default routing."""
FLOOR_COLOR = "#000000"
_K_RANGE = (8, 256)  # the study's K sweep; the greens of gma_k_color span it
_K_SHADES = (0.35, 1.0)  # the part of matplotlib's YlGn colormap they use
_WIDTH_MARKERS = "oDv^<>"  # the frontier's marker of each width, in increasing order


def gma_k_color(k: int) -> str:
    """The green of GMA with K components and a changed routing (:func:`gma_teach.capacity.gma_size`): matplotlib's
    YlGn from light at K = 8 to dark at K = 256, evenly in log2 K (K outside the range takes the nearest end)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive int, got {k!r}")
    low, high = (math.log2(v) for v in _K_RANGE)
    share = min(1.0, max(0.0, (math.log2(k) - low) / (high - low)))
    start, stop = _K_SHADES
    return matplotlib.colors.to_hex(matplotlib.colormaps["YlGn"](start + (stop - start) * share))


def arm_style(arm: str, spec=None) -> dict:
    """Colour, line style and marker of an arm: ``{"color", "ls", "marker"}``.

    What the arm is comes from ``spec``, its declared arm, whenever the caller has it (a :class:`gma_teach.designs.Arm`,
    a record's ``"spec"`` or ``"design"["arm"]``, a run of the recall table): its mixer, and for GMA its K and
    routing (:func:`gma_teach.capacity.gma_size`); without one, a registered mixer's name gives that mixer's look
    (never a K: GMA's K is read from a spec only). GMA with a changed routing: :func:`gma_k_color` of its K, solid,
    square markers; GMA with the default routing: :data:`DEFAULT_ROUTING_COLOR`, dotted, round markers; a registered
    mixer with a colour (``sdpa``, ``linear``, ``performer``, ``mamba``, ``window``, ...) the colour, line style and
    marker of its entry (:class:`gma_teach.mixers.MixerEntry`: solid with round markers, but dashed for the decayed
    mixers and dash-dotted for the local ones, with triangles); anything else black crosses.
    """
    if not isinstance(arm, str):
        raise TypeError(f"arm must be an arm name (str), got {type(arm).__name__}")
    size = gma_size(arm, spec) if spec is not None else None
    if size is not None:
        k, changed = size
        if changed:
            return {"color": gma_k_color(k), "ls": "-", "marker": "s"}
        return {"color": DEFAULT_ROUTING_COLOR, "ls": ":", "marker": "o"}
    registered = mixers.REGISTRY.get(arm if spec is None else spec["mixer"])
    if registered is not None and registered.color is not None:
        return {"color": registered.color, "ls": registered.linestyle, "marker": registered.marker}
    return {"color": "#000000", "ls": "-", "marker": "x"}


def _mean(values) -> float:
    values = [float(v) for v in values]
    return sum(values) / len(values)


def _k_colorbar(fig, axes, ks):
    """A colour bar of the K of GMA with a changed routing, one band per K drawn."""
    ks = sorted(ks)
    cmap = matplotlib.colors.ListedColormap([gma_k_color(k) for k in ks])
    norm = matplotlib.colors.BoundaryNorm([i - 0.5 for i in range(len(ks) + 1)], len(ks))
    bar = fig.colorbar(matplotlib.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, ticks=range(len(ks)),
                       shrink=0.8, aspect=25, pad=0.02)
    bar.ax.set_yticklabels([str(k) for k in ks])
    bar.set_label("K of GMA, changed routing", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    return bar


def plot_accuracy_by_pairs(table, *, widths=None, axes=None):
    """Test accuracy against the number of key-value pairs, one line per arm (the mean over seeds), each seed a
    faint point; one panel per width, with the guessing floor ``1/n`` at each count.

    The legend groups GMA: one entry for every arm with the default routing (one grey), one for the arms with a
    changed routing (named by :func:`gma_teach.capacity.gma_routing`), whose K a colour bar gives; every other arm
    has its own entry, the registered mixers' in the registry's order, then the others in the table's.

    Args:
        table: the recall study's table.
        widths: the widths to draw (default: every width with a recorded arm).
        axes: a sequence of matplotlib axes, one per width (default: a new figure).

    Returns:
        the matplotlib ``Figure``; each line's label is its arm (the floor's ``"1/n"``).
    """
    check_recall_table(table)
    entries = table_entries(table)
    recorded = sorted({width for _, width in entries})
    widths = recorded if widths is None else [int(w) for w in widths]
    if axes is None:
        fig, grid = new_figure(max(1, len(widths)), width=4.0 * max(1, len(widths)) + 3.2, height=3.8)
        axes = list(grid[0])
    else:
        axes = list(axes)
        if len(axes) != len(widths):
            raise ValueError(f"axes must hold one axis per width ({len(widths)}), got {len(axes)}")
        fig = axes[0].figure
    floor = guessing_floor(table["design"]["kv_pairs"])
    others, default, changed_ks, routing = {}, None, set(), None
    for ax, width in zip(axes, widths):
        drawn = [(arm, entry) for (arm, w), entry in entries.items() if w == width]
        for arm, entry in drawn:
            style = arm_style(arm, entry)
            counts = list(entry["by_count"])
            for n in counts:
                ax.plot([n] * len(entry["by_count"][n]), entry["by_count"][n], ls="none", marker=style["marker"],
                        ms=3, color=style["color"], alpha=0.3)
            size = gma_size(arm, entry)
            changed = size is not None and size[1]
            (line,) = ax.plot(counts, [_mean(entry["by_count"][n]) for n in counts], color=style["color"],
                              ls=style["ls"], marker=style["marker"], ms=4 if changed or size is None else 3,
                              lw=1.6 if changed else 1.2, label=arm, zorder=3 if changed else 2)
            if size is None:
                others.setdefault(arm, line)
            elif changed:
                changed_ks.add(size[0])
                routing = gma_routing(arm, entry)
            else:
                default = line
        if drawn:
            ax.plot(list(floor), list(floor.values()), color=FLOOR_COLOR, ls=(0, (1, 2)), lw=1.2, label="1/n",
                    zorder=1.5)  # under the arms: a line at the floor stays in view
        else:
            ax.text(0.5, 0.5, f"no arm recorded at width {width}", ha="center", va="center",
                    transform=ax.transAxes)
        ax.set(xlabel="key-value pairs", ylabel="test accuracy", title=f"width {width}", ylim=(-0.03, 1.03))
        ax.set_xticks([int(n) for n in table["design"]["kv_pairs"]])
    names = mixers.registered_names()
    order = [arm for arm in names if arm in others] + [arm for arm in others if arm not in names]
    handles, labels = [others[arm] for arm in order], order
    if default is not None:
        handles.append(Line2D([], [], color=DEFAULT_ROUTING_COLOR, ls=":", marker="o", ms=3))
        labels.append("GMA, default routing (every K)")
    if changed_ks:
        middle = sorted(changed_ks)[len(changed_ks) // 2]
        handles.append(Line2D([], [], color=gma_k_color(middle), ls="-", marker="s", ms=4, lw=1.6))
        labels.append(f"GMA, {routing} (K: colour bar)")
        _k_colorbar(fig, axes, changed_ks)
    if handles:
        handles.append(Line2D([], [], color=FLOOR_COLOR, ls=(0, (1, 2)), lw=1.2))
        labels.append("guessing one of the n values: 1/n")
        fig.legend(handles, labels, loc="outside right center", fontsize=7)
    return fig


def plot_recall_frontier(table, *, ax=None):
    """The recall frontier: mean test accuracy (over the kv counts; one faint point per seed) against the bytes of
    the model's decoding state (the table's ``state_bytes``: the mixer's own state plus the short convolution's;
    log scale), every arm at every width, with the guessing floor (the mean of ``1/n`` over the counts).

    GMA's K sweep is a connected curve per width and routing, each in its own colour (a changed routing's in greens,
    the default routing's in greys) and in the legend; the curves of a changed routing are labelled with K at both
    ends. Linear attention's widths are a connected curve when two or more are recorded; every other arm is a
    labelled point. The marker gives the width. Labels are placed so that none overlaps another or a marker.

    Returns:
        the matplotlib ``Figure``.
    """
    check_recall_table(table)
    entries = table_entries(table)
    if ax is None:
        fig, grid = new_figure(1, width=8.6, height=4.8)
        ax = grid[0][0]
    else:
        fig = ax.figure
    widths = sorted({w for _, w in entries})
    markers = {width: marker for width, marker in zip(widths, _WIDTH_MARKERS)}
    curve_colors = {(True, 0): mixer_color("gma"), (True, 1): "#78c679", (False, 0): "#7a7a7a", (False, 1): "#b8b8b8"}
    curves: dict[tuple, list] = {}
    labels, points, routing_of = [], [], {}
    for (arm, width), entry in entries.items():
        style = arm_style(arm, entry)
        size, accuracy = float(entry["state_bytes"]), _mean(entry["test_mean"])
        gma = gma_size(arm, entry)
        color = style["color"] if gma is None else curve_colors.get((gma[1], widths.index(width) % 2))
        ax.plot([size] * len(entry["test_mean"]), entry["test_mean"], ls="none", marker=markers[width], ms=3,
                color=color, alpha=0.3)
        points.append((size, accuracy))
        if gma is not None:
            curves.setdefault(("gma", gma[1], width), []).append((size, accuracy, gma[0]))
            routing_of[gma[1]] = gma_routing(arm, entry)
            continue
        ax.plot(size, accuracy, marker=markers[width], ms=6, color=style["color"], ls="none")
        labels.append((size, accuracy, f"{arm} (d={width})", style["color"]))
        if arm == "linear":
            curves.setdefault(("linear", False, 0), []).append((size, accuracy, width))
    for (kind, changed, width), points_of_curve in sorted(curves.items(), key=lambda item: (item[0][0], -item[0][1],
                                                                                            item[0][2])):
        points_of_curve.sort()
        sizes, accuracies, _ = zip(*points_of_curve)
        if kind == "linear":
            if len(points_of_curve) >= 2:
                ax.plot(sizes, accuracies, color=mixer_color("linear"), lw=1.2, ls="-")
            continue
        color = curve_colors[changed, widths.index(width) % 2]
        routing = routing_of[changed]
        ks = f"K = {points_of_curve[0][2]} to {points_of_curve[-1][2]}"
        ax.plot(sizes, accuracies, color=color, ls="-" if changed else ":", lw=1.6 if changed else 1.3,
                marker=markers[width], ms=5, label=f"GMA, {routing}, d={width} ({ks})")
        if changed:
            for size, accuracy, k in (points_of_curve[0], points_of_curve[-1]):
                labels.append((size, accuracy, f"K={k}", color))
    if entries:
        ax.set_xscale("log")
        floor = mean_guessing_floor(table["design"]["kv_pairs"])
        ax.axhline(floor, color=FLOOR_COLOR, ls=(0, (1, 2)), lw=1.0, label="guessing one of the n values "
                                                                          f"(mean 1/n, {floor:.3f})")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    else:
        ax.text(0.5, 0.5, "no arm recorded", ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="decoding-state bytes of the model (the mixer and the short convolution)",
           ylabel="test accuracy (mean over kv counts)", ylim=(-0.05, 1.07),
           title="the recall frontier (a changed routing's curves labelled with K at their ends)")
    ax.title.set_fontsize(9)
    if entries:
        place_labels(ax, labels, points)
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


def plot_pilot_curves(records, *, seed: int = 0, threshold: float = LEARNED_ABOVE, axes=None):
    """The MQAR pilot's validation accuracy against the training step, one line per arm: one panel per kv-pair
    count ``n`` with the guessing floor ``1/n``, and a last panel with the mean over the counts, its floor (the
    mean of ``1/n``) and the criterion of "learned" (:func:`gma_teach.capacity.pilot_learned`).

    Args:
        records: ``{arm: run record}`` (:func:`gma_teach.capacity.pilot_curves`); each arm keeps its look
            (:func:`arm_style`, from the record's spec when it has one, :func:`gma_teach.study.record_spec`).
        seed: the seed whose run is drawn.
        threshold: the accuracy the criterion line marks (the pilot's :data:`gma_teach.capacity.LEARNED_ABOVE`).
        axes: a sequence of ``C + 1`` matplotlib axes, ``C`` the kv-pair counts (default: a new figure).

    Returns:
        the matplotlib ``Figure``; each arm's line is labelled with its arm name.
    """
    curves = pilot_curves(records, seed=seed)
    counts = next(iter(curves.values()))["kv_pairs"]
    if any(curve["kv_pairs"] != counts for curve in curves.values()):
        raise ValueError("records must all hold the same kv-pair counts")
    if axes is None:
        fig, grid = new_figure(len(counts) + 1, width=3.0 * (len(counts) + 1) + 1.4, height=3.2)
        axes = list(grid[0])
    else:
        axes = list(axes)
        if len(axes) != len(counts) + 1:
            raise ValueError(f"axes must hold one axis per kv-pair count and one for the mean ({len(counts) + 1}), "
                             f"got {len(axes)}")
        fig = axes[0].figure
    floor = guessing_floor(counts)
    panels = [(f"{n} pairs", lambda curve, n=n: curve["by_count"][n], floor[n]) for n in counts]
    panels.append(("mean over the counts", lambda curve: curve["mean"], mean_guessing_floor(counts)))
    for ax, (title, values, bottom) in zip(axes, panels):
        for arm, curve in curves.items():
            style = arm_style(arm, record_spec(records[arm]))
            ax.plot(curve["steps"], values(curve), color=style["color"], ls=style["ls"], marker=style["marker"],
                    ms=3, lw=1.4, label=arm)
        ax.axhline(bottom, color=FLOOR_COLOR, ls=(0, (1, 2)), lw=1.2,
                   label="guessing one of the n values: 1/n (last panel: its mean)")
        ax.set(xlabel="training step", title=title, ylim=(-0.03, 1.03))
    axes[0].set_ylabel("validation accuracy")
    axes[-1].axhline(threshold, color="#777777", ls="--", lw=1.0, label=f"learned: mean above {threshold:g}")
    fig.legend(*axes[-1].get_legend_handles_labels(), loc="outside right center", fontsize=7)
    return fig


def _capacity_style(arm: str, spec) -> dict:
    """:func:`arm_style` of ``arm`` with its ``spec`` (or ``None``), with Performer's feature counts (the spec's
    ``n_features``) told apart by line style."""
    style = arm_style(arm, spec)
    if spec is not None and spec["mixer"] == "performer" and "n_features" in (spec.get("options") or {}):
        style["ls"] = {64: ":", 128: "--"}.get(int(spec["options"]["n_features"]), "-")
    return style


def plot_capacity_curves(curves: dict, *, n_slots: int = 64, predictions: dict | None = None,
                         published: dict | None = None, at_pairs: int = 120, axes=None, specs=None):
    """The capacity study's figure: retrieval accuracy and loss against the stored pairs ``S``, and accuracy
    against the state each arm keeps.

    Args:
        curves: :func:`gma_teach.capacity.capacity_curves`; each arm keeps its look (:func:`arm_style` of its spec;
            Performer's feature counts by line style), with a bar of one standard deviation over its seeds.
        n_slots: the ``K`` (and linear attention's feature count) whose predictions are drawn, with a vertical
            line at ``S = K``.
        predictions: :func:`gma_teach.capacity.slot_predictions` for ``n_slots`` (default: computed over the
            curves' sizes): the perfect router's ``min(1, K/S)`` and the random router's curve, drawn under the
            arms on the accuracy panel.
        published: ``{arm: {S: loss}}``, the published final losses to mark (hollow markers, the arm's colour) on
            the loss panel.
        at_pairs: the ``S`` of the third panel (accuracy against state bytes, log axis).
        axes: three matplotlib axes (default: a new figure).
        specs: ``{arm: spec}``, what each arm is (a :class:`gma_teach.designs.Arm` or a record's ``"spec"``), over
            the arms :data:`gma_teach.designs.CAPACITY_STUDY` declares; an arm in neither is read by its name.

    Returns:
        the matplotlib ``Figure``.
    """
    specs = {**CAPACITY_STUDY.arms, **(specs or {})}
    if not isinstance(curves, dict) or not curves:
        raise ValueError(f"curves must be a non-empty dict from capacity_curves, got {type(curves).__name__}")
    sizes = sorted({n for curve in curves.values() for n in curve["n_pairs"]})
    predictions = predictions or slot_predictions(sizes, n_slots)
    if axes is None:
        fig, grid = new_figure(3, width=11.5, height=3.4)
        axes = list(grid[0])
    else:
        axes = list(axes)
        if len(axes) != 3:
            raise ValueError(f"axes must hold three axes, got {len(axes)}")
        fig = axes[0].figure
    accuracy_ax, loss_ax, state_ax = axes
    accuracy_ax.plot(predictions["n_pairs"], predictions["perfect"], color="#777777", ls="--", lw=1.0, zorder=1,
                     label=f"perfect router, K = {n_slots}: min(1, K/S)")
    accuracy_ax.plot(predictions["n_pairs"], predictions["random"], color="#777777", ls=":", lw=1.2, zorder=1,
                     label=f"random router, K = {n_slots}")
    for ax in (accuracy_ax, loss_ax):
        ax.axvline(n_slots, color="#bbbbbb", lw=0.8, zorder=0)
    for arm, curve in curves.items():
        style = _capacity_style(arm, specs.get(arm))
        line = {"color": style["color"], "ls": style["ls"], "marker": style["marker"], "ms": 3.5, "lw": 1.4}
        accuracy_ax.errorbar(curve["n_pairs"], curve["accuracy"], yerr=curve["accuracy_sd"], capsize=2,
                             label=f"{arm} ({len(curve['seeds'])} seed{'s' * (len(curve['seeds']) > 1)})",
                             zorder=3, **line)
        loss_ax.plot(curve["n_pairs"], curve["loss"], zorder=3, **line)
    for arm, losses in (published or {}).items():
        style = _capacity_style(arm, specs.get(arm))
        points = sorted((int(n), float(loss)) for n, loss in losses.items())
        loss_ax.plot([n for n, _ in points], [loss for _, loss in points], ls="none", marker=style["marker"],
                     ms=7, mfc="none", mec=style["color"], mew=1.2, zorder=4, label=f"published: {arm}")
    points = state_at(curves, at_pairs)
    for arm, point in points.items():
        style = _capacity_style(arm, specs.get(arm))
        state_ax.errorbar(point["state_bytes"], point["accuracy"], yerr=point["accuracy_sd"], color=style["color"],
                          marker=style["marker"], ms=5, capsize=2, ls="none")
    place_labels(state_ax, [(p["state_bytes"], p["accuracy"], arm, _capacity_style(arm, specs.get(arm))["color"])
                             for arm, p in points.items()],
                  [(p["state_bytes"], p["accuracy"]) for p in points.values()])
    accuracy_ax.set(xlabel="stored pairs S", ylabel="retrieval accuracy (test)", ylim=(-0.03, 1.05),
                    title="accuracy against S")
    loss_ax.set(xlabel="stored pairs S", ylabel="loss 0.5 |y - v|^2 (test)", yscale="log",
                title="loss against S")
    state_ax.set(xscale="log", xlabel="decoding state (bytes, log scale)", ylabel="retrieval accuracy (test)",
                 ylim=(-0.03, 1.05), title=f"at S = {at_pairs}")
    state_ax.xaxis.set_minor_formatter(NullFormatter())  # powers of ten only: the minor labels collide
    handles, labels = accuracy_ax.get_legend_handles_labels()
    more, more_labels = loss_ax.get_legend_handles_labels()
    fig.legend(handles + more, labels + more_labels, loc="outside right center", fontsize=7)
    return fig
