"""Figures for chapter 11: reading a trained model's routing (the paper's Figures 2-6).

Every function takes query responsibilities ``resp`` of shape ``(T, K)`` or ``(T, H, K)``: with ``head=h`` it reads
head ``h``'s rows and hard assignment alone (each head routes with a mixture of its own, and an average of heads
that disagree has tied rows whose argmax is decided by index); without, a ``(T, H, K)`` input is averaged over
heads as the paper does. Where needed it takes where needed, the ``T`` token strings or surface-form categories from
:func:`gma_teach.diagnostics.token_categories`. The numbers behind each picture come from
:mod:`gma_teach.diagnostics`, so a figure always agrees with the table beside it.

* :func:`plot_responsibility_heatmap` -- Fig. 2: the most active components over the positions of one sequence;
* :func:`plot_component_categories` -- Fig. 3: the category composition of the most-used components;
* :func:`plot_component_usage` -- Fig. 4: soft usage of every component and the purity of the most-used ones;
* :func:`plot_token_strip` -- Fig. 5: the tokens of a sequence coloured by their dominant component;
* :func:`plot_responsibility_pca` -- Fig. 6: responsibility vectors projected on two principal components,
  coloured by category and by component;
* :func:`plot_information_history` -- the routing information of a study's arms over training (from records).
"""
from __future__ import annotations

from collections.abc import Sequence

import matplotlib
import matplotlib.patches as mpatches
import numpy as np
import torch

from .. import _checks, diagnostics
from ._style import new_figure

__all__ = [
    "CATEGORY_COLORS",
    "dominant_component_colors",
    "information_history",
    "plot_information_history",
    "plot_component_categories",
    "plot_component_usage",
    "plot_responsibility_heatmap",
    "plot_responsibility_pca",
    "plot_token_strip",
]

CATEGORY_COLORS: dict[str, str] = {
    "lower_alpha": "#1f77b4",
    "function_word": "#ff7f0e",
    "punctuation": "#2ca02c",
    "capitalized": "#d62728",
    "subword_alpha": "#9467bd",
    "numeric": "#8c564b",
    "newline_or_space": "#e377c2",
    "eos": "#17becf",
    "all_caps": "#bcbd22",
    "other": "#7f7f7f",
}
"""One colour per surface-form category, the same in every figure."""


def _responsibilities(resp) -> np.ndarray:
    """Validated, head-averaged ``(T, K)`` responsibilities as a NumPy array."""
    return diagnostics.as_responsibilities(resp).numpy()


def _one_head(resp, head: int | None):
    """``resp`` unchanged when ``head`` is None, else head ``head``'s ``(T, K)`` rows of a ``(T, H, K)`` input."""
    if head is None:
        return resp
    rows = diagnostics.head_rows(resp)
    return rows[:, _checks.integer("head", head, minimum=0, maximum=rows.shape[1] - 1)]


def _head_label(head: int | None) -> str:
    return "" if head is None else f", head {head}"


def _short(token: str, width: int = 8) -> str:
    text = token.replace("Ġ", " ").replace("Ċ", "\\n").replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"


def dominant_component_colors(n_components: int) -> np.ndarray:
    """``(n_components, 3)`` RGB colours for components, distinct for neighbouring indices (a tab20 cycle)."""

    n_components = _checks.positive_int("n_components", n_components)
    palette = matplotlib.colormaps["tab20"]
    return np.array([palette((2 * k % 20 + (2 * k // 20) % 2) / 20)[:3] for k in range(n_components)])


def plot_responsibility_heatmap(resp, tokens: Sequence[str] | None = None, *, top: int = 16, ax=None,
                                head: int | None = None):
    """Fig. 2: responsibilities of the ``top`` most active components (rows) at each position (columns).

    Args:
        resp: ``(N, K)`` or ``(N, H, K)`` query responsibilities of one sequence.
        tokens: optional ``N`` token strings for the x axis (shown when ``N <= 80``).
        top: number of components, ranked by their total responsibility over the sequence.
        ax: an axes to draw on; a new figure otherwise.
        head: read this head of a ``(N, H, K)`` input alone (``None``: average the heads).

    Returns:
        The figure.
    """
    gamma = _responsibilities(_one_head(resp, head))
    if tokens is not None and len(tokens) != gamma.shape[0]:
        raise ValueError(f"tokens has {len(tokens)} entries but resp has {gamma.shape[0]} positions")
    top = min(int(top), gamma.shape[1])
    order = np.argsort(-gamma.sum(axis=0), kind="stable")[:top]
    if ax is None:
        _, axes = new_figure(width=max(6.0, 0.12 * gamma.shape[0] + 2), height=0.22 * top + 1.6)
        ax = axes[0, 0]
    image = ax.imshow(gamma[:, order].T, aspect="auto", cmap="magma", interpolation="nearest", vmin=0)
    ax.grid(False)
    ax.set_yticks(range(top), [str(k) for k in order], fontsize=7)
    ax.set_ylabel("component k")
    if tokens is not None and gamma.shape[0] <= 80:
        ax.set_xticks(range(len(tokens)), [_short(t) for t in tokens], rotation=90, fontsize=7)
    else:
        ax.set_xlabel("position")
    ax.figure.colorbar(image, ax=ax, label=r"$\gamma^Q_{t,k}$" if head is not None else r"$\bar\gamma^Q_{t,k}$",
                       pad=0.01)
    ax.set_title(f"query responsibilities, {top} most active of K={gamma.shape[1]} components{_head_label(head)}")
    return ax.figure


def plot_component_categories(resp, categories: Sequence[str], *, top: int = 20, ax=None, head: int | None = None):
    """Fig. 3: for each of the ``top`` most-assigned components, the share of its tokens in each category.

    Args:
        resp: ``(T, K)`` or ``(T, H, K)`` responsibilities.
        categories: ``T`` surface-form categories.
        top: number of components, ranked by hard-assignment count.
        ax: an axes to draw on; a new figure otherwise.
        head: read this head of a ``(T, H, K)`` input alone (``None``: average the heads).

    Returns:
        The figure. Each row sums to 1; the number right of a row is the component's purity.
    """
    counts, names = diagnostics.contingency_table(_one_head(resp, head), categories)
    counts = counts.numpy().astype(np.float64)
    per_component = counts.sum(axis=1)
    order = [k for k in np.argsort(-per_component, kind="stable")[: int(top)] if per_component[k] > 0]
    shares = counts[order] / per_component[order, None]
    if ax is None:
        _, axes = new_figure(width=0.55 * len(names) + 2.8, height=0.24 * len(order) + 1.8)
        ax = axes[0, 0]
    image = ax.imshow(shares, aspect="auto", cmap="Blues", vmin=0, vmax=1, interpolation="nearest")
    ax.grid(False)
    ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(order)), [f"{k} ({per_component[k] / per_component.sum():.1%})" for k in order],
                  fontsize=7)
    for row, purity in enumerate(shares.max(axis=1)):
        ax.text(len(names) - 0.4, row, f"{purity:.2f}", va="center", fontsize=7)
    ax.set_ylabel("component (share of tokens)")
    ax.set_title(f"category composition of the most-used components{_head_label(head)}")
    ax.figure.colorbar(image, ax=ax, label="share of the component's tokens", pad=0.08)
    return ax.figure


def plot_component_usage(resp, categories: Sequence[str], *, top: int = 30, head: int | None = None):
    """Fig. 4: soft usage :math:`p_k` of every component (sorted) and the purity of the ``top`` most-assigned.

    The dashed lines mark the uniform usage :math:`1/K` (top) and the majority-category share, which is the
    purity one component taking every token would have (bottom). ``head``: read this head of a ``(T, H, K)``
    input alone (``None``: average the heads).

    Returns:
        The figure (two panels).
    """
    gamma = _responsibilities(_one_head(resp, head))
    metrics = diagnostics.routing_metrics(gamma, categories)
    rows = diagnostics.component_summary(gamma, categories, top=int(top))
    usage = np.sort(gamma.mean(axis=0))[::-1]
    fig, axes = new_figure(nrows=2, width=7.0, height=5.6)
    upper, lower = axes[0, 0], axes[1, 0]
    upper.bar(range(len(usage)), usage, color="#1b7837", width=1.0)
    upper.axhline(1 / len(usage), color="k", linestyle="--", linewidth=1, label="uniform 1/K")
    upper.set_xlabel("component, sorted by usage")
    upper.set_ylabel(r"usage $p_k$")
    upper.set_title(f"usage entropy {metrics['usage_entropy']:.3f} (normalized), "
                    f"{metrics['active']}/{metrics['n_components']} active{_head_label(head)}")
    upper.legend(fontsize=8)
    colors = [CATEGORY_COLORS.get(row["dominant_category"], "#7f7f7f") for row in rows]
    lower.bar(range(len(rows)), [row["purity"] for row in rows], color=colors)
    lower.axhline(metrics["majority_fraction"], color="k", linestyle="--", linewidth=1,
                  label=f"majority category share {metrics['majority_fraction']:.3f}")
    lower.set_xticks(range(len(rows)), [str(row["component"]) for row in rows], rotation=90, fontsize=7)
    lower.set_xlabel("component, most assigned first (bar colour: dominant category)")
    lower.set_ylabel("purity")
    lower.set_ylim(0, 1)
    handles = {row["dominant_category"] for row in rows}

    legend = [mpatches.Patch(color=CATEGORY_COLORS.get(name, "#7f7f7f"), label=name) for name in
              diagnostics.CATEGORIES if name in handles]
    lower.legend(handles=legend + lower.get_legend_handles_labels()[0], fontsize=7, ncol=3)
    return fig


def plot_token_strip(tokens: Sequence[str], resp, *, line_width: int = 90, ax=None, head: int | None = None):
    """Fig. 5: the text of a sequence, each token on a patch coloured by its dominant component.

    Args:
        tokens: ``N`` token strings (byte-level ``"Ġ"`` or decoded spaces both work).
        resp: ``(N, K)`` or ``(N, H, K)`` responsibilities of the same tokens.
        line_width: characters per line before wrapping.
        ax: an axes to draw on; a new figure otherwise.
        head: read this head of a ``(N, H, K)`` input alone (``None``: average the heads).

    Returns:
        The figure. The small number under a token is its component.
    """
    gamma = _responsibilities(_one_head(resp, head))
    if len(tokens) != gamma.shape[0]:
        raise ValueError(f"tokens has {len(tokens)} entries but resp has {gamma.shape[0]} positions")
    assignments = gamma.argmax(axis=1)
    colors = dominant_component_colors(gamma.shape[1])
    texts = [t.replace("Ġ", " ").replace("Ċ", "⏎").replace("\n", "⏎") or "∅" for t in tokens]
    placed, column, line = [], 0, 0
    for text in texts:
        if column + len(text) > line_width and column > 0:
            line, column = line + 1, 0
        placed.append((column, line))
        column += len(text) + 1
    if ax is None:
        _, axes = new_figure(width=0.085 * line_width + 0.6, height=0.42 * (line + 1) + 0.6)
        ax = axes[0, 0]
    for text, (column, row), component in zip(texts, placed, assignments):
        ax.text(column, -row, text, family="monospace", fontsize=8, va="center",
                bbox={"facecolor": (*colors[component], 0.55), "edgecolor": "none", "pad": 1.2})
        ax.text(column, -row - 0.38, str(component), family="monospace", fontsize=5, va="center", color="0.3")
    ax.set_xlim(-1, line_width + 2)
    ax.set_ylim(-line - 0.8, 0.6)
    ax.axis("off")
    ax.set_title(f"tokens coloured by their dominant component{_head_label(head)}")
    return ax.figure


def plot_responsibility_pca(resp, categories: Sequence[str], *, max_points: int = 4000, top: int = 10,
                            seed: int = 0, head: int | None = None):
    """Fig. 6: responsibility vectors on their first two principal components.

    Args:
        resp: ``(T, K)`` or ``(T, H, K)`` responsibilities.
        categories: ``T`` surface-form categories.
        max_points: at most this many tokens are drawn (a seeded random subset); the PCA uses all ``T``.
        top: the ``top`` most-assigned components get their own colour in the right panel, the rest are grey.
        seed: seed of the subset.
        head: read this head of a ``(T, H, K)`` input alone (``None``: average the heads).

    Returns:
        The figure: left coloured by category, right by hard component assignment; the axis labels give the
        share of variance each principal component explains.
    """
    gamma = _responsibilities(_one_head(resp, head))
    labels = diagnostics.as_labels(categories, gamma.shape[0])
    scores, explained = diagnostics.responsibility_pca(gamma, n_components=2)
    scores = scores.numpy()
    generator = torch.Generator().manual_seed(int(seed))
    shown = torch.randperm(len(labels), generator=generator)[: int(max_points)].sort().values.numpy()
    assignments = gamma.argmax(axis=1)
    fig, axes = new_figure(ncols=2, width=9.0, height=4.0)
    by_category, by_component = axes[0, 0], axes[0, 1]
    for name in [c for c in diagnostics.CATEGORIES if c in set(labels)]:
        mask = np.array([labels[i] == name for i in shown])
        by_category.scatter(scores[shown[mask], 0], scores[shown[mask], 1], s=4, alpha=0.5,
                            color=CATEGORY_COLORS[name], label=name)
    by_category.legend(fontsize=6, markerscale=2, ncol=2)
    by_category.set_title("coloured by category")
    counts = np.bincount(assignments, minlength=gamma.shape[1])
    leaders = np.array([k for k in np.argsort(-counts, kind="stable")[: int(top)] if counts[k] > 0])
    colors = dominant_component_colors(gamma.shape[1])
    rest = shown[~np.isin(assignments[shown], leaders)]
    by_component.scatter(scores[rest, 0], scores[rest, 1], s=4, alpha=0.3, color="0.75", label="other components")
    for k in leaders:
        mask = shown[assignments[shown] == k]
        by_component.scatter(scores[mask, 0], scores[mask, 1], s=4, alpha=0.6, color=colors[k], label=f"k={k}")
    by_component.legend(fontsize=6, markerscale=2, ncol=2)
    by_component.set_title(f"coloured by component ({len(leaders)} most assigned){_head_label(head)}")
    for ax in (by_category, by_component):
        ax.set_xlabel(f"PC1 ({explained[0]:.1%} of variance)")
        ax.set_ylabel(f"PC2 ({explained[1]:.1%} of variance)")
    return fig


def information_history(run: dict, layer: int) -> tuple[list, list] | None:
    """``(steps, bits)`` of one seed's training: the routing information of GMA layer ``layer`` (mean over its
    heads) at initialization (step 0) and every evaluation, or ``None`` for a run that did not record it (records
    made before the information was measured, or no GMA layer)."""
    routing = run.get("routing")
    if not routing or not routing.get("evaluations") or "information" not in routing["evaluations"][0][layer]:
        return None
    entries = [routing["initial"], *routing["evaluations"]]
    return [0, *routing["steps"]], [float(np.mean(entry[layer]["information"])) for entry in entries]


def plot_information_history(records: dict, *, n_components: int):
    """The routing information over training, one panel per GMA layer, one line per arm: the mean over seeds of
    each seed's mean over heads, the band spanning the seeds. The dotted line is :math:`\\log_2 K`, all there is.

    Args:
        records: ``{arm name: study record}`` (records without the information are named in the legend as such).
        n_components: K, for the ceiling.

    Returns:
        the matplotlib ``Figure``; the legend sits below the panels, off the data.
    """
    if not isinstance(records, dict):
        raise TypeError(f"records must be a dict of arm name -> record, got {type(records).__name__}")
    _checks.integer("n_components", n_components, minimum=2)
    n_layers = max((len(run["routing"]["initial"]) for record in records.values() for run in record["runs"]
                    if run.get("routing")), default=1)
    fig, axes = new_figure(n_layers, 1, height=3.0)
    ceiling = float(np.log2(n_components))
    for layer, ax in enumerate(axes[0]):
        for index, (name, record) in enumerate(records.items()):
            histories = [h for h in (information_history(run, layer) for run in record["runs"]) if h]
            if not histories:
                continue
            steps = histories[0][0]
            values = np.array([h[1] for h in histories if h[0] == steps])
            label = f"{name} ({len(values)} seed{'s' if len(values) > 1 else ''})"
            ax.plot(steps, values.mean(axis=0), marker="o", ms=3, color=f"C{index}", label=label if layer == 0
                    else None)
            if len(values) > 1:
                ax.fill_between(steps, values.min(axis=0), values.max(axis=0), color=f"C{index}", alpha=0.15)
        ax.axhline(ceiling, color="grey", lw=0.8, ls=":")
        ax.set(xlabel="training step", ylabel="information (bits)" if layer == 0 else None,
               title=f"layer {layer}", ylim=(0, ceiling * 1.05))
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(handles)), fontsize=8)
    return fig
