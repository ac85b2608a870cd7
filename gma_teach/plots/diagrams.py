"""Explanatory diagrams of chapters 3, 4 and 6, drawn by code so that they restyle with the book and are tested.

* :func:`draw_write_read` -- GMA's two steps (the paper's Fig. 1): keys *write* their values into K slots in
  proportion to their responsibilities, queries *read* the slots with theirs;
* :func:`draw_bracket_move` -- the two orders of the same product, with every matrix drawn to its shape:
  ``(Gamma^Q (Gamma^K)^T) V`` builds an ``N x N`` matrix, ``Gamma^Q ((Gamma^K)^T V)`` only a ``K x d_v`` one;
* :func:`draw_chunk_blocks` -- causal GMA by chunks: the masked in-chunk ``C x C`` blocks on the diagonal, and the
  blocks below them that never exist as matrices because the carried state ``(V~, Z)`` stands in for them.

Every function returns the matplotlib ``Figure``; the arrows' widths and the slot shares come from seeded random
responsibilities, so a figure is the same at every run.
"""
from __future__ import annotations

import numpy as np
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

from .. import _checks
from ._style import COLORS, new_figure

__all__ = ["draw_bracket_move", "draw_chunk_blocks", "draw_write_read"]

_KEY = "#2166ac"      # keys and the write step
_QUERY = "#b2182b"    # queries and the read step
_SLOT = COLORS["gma"]  # the K slots of the latent memory
_BIG = "#d6604d"      # the N x N intermediate the bracket move removes


def _responsibilities(generator: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Rows on the simplex, each with one clearly preferred component (as a trained routing has)."""
    logits = 2.5 * generator.standard_normal((n, k))
    logits[np.arange(n), np.arange(n) % k] += 2.0
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    return weights / weights.sum(-1, keepdims=True)


def _box(ax, x: float, y: float, text: str, color: str, *, width: float = 0.9, height: float = 0.6) -> None:
    """A rounded box centred at ``(x, y)`` with ``text`` inside."""

    ax.add_patch(FancyBboxPatch((x - width / 2, y - height / 2), width, height, boxstyle="round,pad=0.05",
                                facecolor=color, alpha=0.18, edgecolor=color, linewidth=1.2))
    ax.text(x, y, text, ha="center", va="center", fontsize=9)


def draw_write_read(n_keys: int = 5, n_queries: int = 4, n_components: int = 3, *, seed: int = 0):
    """GMA's write/read workflow: keys write into K slots, queries read them (the paper's Fig. 1).

    Each line's width is a responsibility: ``gamma^K_jk`` from key ``j`` to slot ``k`` on the left,
    ``gamma^Q_ik`` from slot ``k`` to query ``i`` on the right. No line joins a query to a key: the ``N x N``
    affinity is never formed.

    Args:
        n_keys, n_queries: tokens drawn on each side (1 to 12).
        n_components: slots ``K`` (1 to 8).
        seed: seed of the responsibilities that set the line widths.

    Returns:
        the ``Figure``.
    """
    n_keys, n_queries = _checks.positive_int("n_keys", n_keys), _checks.positive_int("n_queries", n_queries)
    n_components = _checks.positive_int("n_components", n_components)
    if n_keys > 12 or n_queries > 12 or n_components > 8:
        raise ValueError(f"draw at most 12 keys, 12 queries and 8 slots, got {n_keys}, {n_queries}, {n_components}")
    generator = np.random.default_rng(seed)
    gamma_k = _responsibilities(generator, n_keys, n_components)
    gamma_q = _responsibilities(generator, n_queries, n_components)

    fig, axes = new_figure(1, width=8.6, height=0.55 * max(n_keys, n_queries, n_components) + 1.9)
    ax = axes[0, 0]
    ax.set_axis_off()
    rows = max(n_keys, n_queries, n_components)

    def column(count):
        return np.linspace(rows - 1, 0, count) if count > 1 else np.array([(rows - 1) / 2])

    key_y, slot_y, query_y = column(n_keys), column(n_components), column(n_queries)
    x_key, x_slot, x_query = 0.0, 3.0, 6.0
    for j, y in enumerate(key_y):
        _box(ax, x_key, y, f"$k_{{{j + 1}}},\\ v_{{{j + 1}}}$", _KEY, width=1.0)
    for k, y in enumerate(slot_y):
        _box(ax, x_slot, y, f"slot {k + 1}: $\\tilde V_{{{k + 1}}},\\ Z_{{{k + 1}}}$", _SLOT, width=1.6)
    for i, y in enumerate(query_y):
        _box(ax, x_query, y, f"$q_{{{i + 1}}} \\to o_{{{i + 1}}}$", _QUERY, width=1.1)
    for j, y0 in enumerate(key_y):
        for k, y1 in enumerate(slot_y):
            ax.plot([x_key + 0.55, x_slot - 0.85], [y0, y1], color=_KEY, lw=4.0 * gamma_k[j, k],
                    alpha=0.35 + 0.6 * gamma_k[j, k], solid_capstyle="round")
    for k, y0 in enumerate(slot_y):
        for i, y1 in enumerate(query_y):
            ax.plot([x_slot + 0.85, x_query - 0.6], [y0, y1], color=_QUERY, lw=4.0 * gamma_q[i, k],
                    alpha=0.35 + 0.6 * gamma_q[i, k], solid_capstyle="round")
    top = rows - 0.2
    ax.text((x_key + x_slot) / 2, top + 0.55, "write: $\\tilde V = (\\Gamma^K)^\\top V,\\ Z = (\\Gamma^K)^\\top"
            " \\mathbf{1}$", ha="center", color=_KEY, fontsize=10)
    ax.text((x_slot + x_query) / 2, top + 0.55, "read: $O = \\Gamma^Q \\tilde V \\,/\\, (\\Gamma^Q Z + \\epsilon)$",
            ha="center", color=_QUERY, fontsize=10)
    ax.text(x_key, -0.95, f"{n_keys} keys (N grows)", ha="center", fontsize=9)
    ax.text(x_slot, -0.95, f"K = {n_components} slots (fixed)", ha="center", fontsize=9)
    ax.text(x_query, -0.95, f"{n_queries} queries (N grows)", ha="center", fontsize=9)
    ax.set_xlim(-0.8, 6.8)
    ax.set_ylim(-1.3, rows + 0.9)
    ax.set_title("GMA in two steps: line width = responsibility", fontsize=10)
    return fig


def _matrix(ax, x: float, y: float, rows: int, cols: int, label: str, color: str, *, unit: float) -> float:
    """A rectangle of ``rows x cols`` cells (``unit`` wide each) whose top-left corner is ``(x, y)``, labelled with
    its shape below; returns the x of its right edge."""

    width, height = cols * unit, rows * unit
    ax.add_patch(Rectangle((x, y - height), width, height, facecolor=color, alpha=0.25, edgecolor=color, lw=1.2))
    ax.text(x + width / 2, y - height - 0.25, label, ha="center", va="top", fontsize=9)
    return x + width


def _operator(ax, x: float, y: float, text: str) -> float:
    ax.text(x + 0.25, y, text, ha="center", va="center", fontsize=12)
    return x + 0.5


def draw_bracket_move(n_tokens: int = 8, n_components: int = 3, d_value: int = 4):
    """The two orders of ``Gamma^Q (Gamma^K)^T V``, each matrix drawn to its shape.

    Top row, chapter 3's order: ``Gamma^Q (N x K)`` times ``(Gamma^K)^T (K x N)`` gives the ``N x N`` affinity,
    then times ``V (N x d_v)``. Bottom row, chapter 4's: ``(Gamma^K)^T V`` gives the ``K x d_v`` memory first, then
    ``Gamma^Q`` reads it. Same result, ``N^2 (K + d_v)`` against ``2 N K d_v`` multiply-adds.

    Args:
        n_tokens: ``N`` as drawn (2 to 16); ``n_components``: ``K`` (1 to 8); ``d_value``: ``d_v`` (1 to 8).

    Returns:
        the ``Figure``.
    """
    n = _checks.integer("n_tokens", n_tokens, minimum=2)
    k = _checks.positive_int("n_components", n_components)
    d_v = _checks.positive_int("d_value", d_value)
    if n > 16 or k > 8 or d_v > 8:
        raise ValueError(f"draw at most N=16, K=8, d_v=8, got {n}, {k}, {d_v}")
    unit = 0.22
    fig, axes = new_figure(1, width=9.0, height=2 * n * unit + 2.6)
    ax = axes[0, 0]
    ax.set_axis_off()
    top, bottom = 0.0, -(n * unit + 1.4)

    x = 0.0
    ax.text(x, top + 0.45, "naive order: $(\\Gamma^Q (\\Gamma^K)^\\top)\\, V$", fontsize=10, color=_BIG)
    ax.text(-0.15, top, "(", fontsize=30, va="top", ha="right")
    x = _matrix(ax, x, top, n, k, "$\\Gamma^Q$: N x K", _QUERY, unit=unit)
    x = _matrix(ax, x + 0.1, top, k, n, "$(\\Gamma^K)^\\top$: K x N", _KEY, unit=unit)
    ax.text(x + 0.05, top, ")", fontsize=30, va="top")
    x = _operator(ax, x + 0.2, top - n * unit / 2, "=")
    x = _matrix(ax, x, top, n, n, "affinity: N x N", _BIG, unit=unit)
    x = _operator(ax, x, top - n * unit / 2, "$\\cdot$")
    x = _matrix(ax, x, top, n, d_v, "$V$: N x $d_v$", _KEY, unit=unit)
    x = _operator(ax, x, top - n * unit / 2, "=")
    right_top = _matrix(ax, x, top, n, d_v, "$O$: N x $d_v$", _SLOT, unit=unit)

    x = 0.0
    ax.text(x, bottom + 0.45, "linear order: $\\Gamma^Q ((\\Gamma^K)^\\top V)$", fontsize=10, color=_SLOT)
    x = _matrix(ax, x, bottom, n, k, "$\\Gamma^Q$: N x K", _QUERY, unit=unit)
    ax.text(x + 0.05, bottom, "(", fontsize=30, va="top")
    x = _matrix(ax, x + 0.3, bottom, k, n, "$(\\Gamma^K)^\\top$: K x N", _KEY, unit=unit)
    x = _matrix(ax, x + 0.1, bottom, n, d_v, "$V$: N x $d_v$", _KEY, unit=unit)
    ax.text(x + 0.05, bottom, ")", fontsize=30, va="top")
    x = _operator(ax, x + 0.2, bottom - n * unit / 2, "=")
    x = _matrix(ax, x, bottom, n, k, "$\\Gamma^Q$: N x K", _QUERY, unit=unit)
    x = _matrix(ax, x + 0.1, bottom, k, d_v, "memory $\\tilde V$: K x $d_v$", _SLOT, unit=unit)
    x = _operator(ax, x + 0.3, bottom - n * unit / 2, "=")
    right_bottom = _matrix(ax, x, bottom, n, d_v, "$O$: N x $d_v$", _SLOT, unit=unit)
    ax.set_xlim(-0.4, max(right_top, right_bottom) + 0.4)
    ax.set_ylim(bottom - n * unit - 0.8, top + 0.9)
    ax.set_aspect("equal")
    return fig


def draw_chunk_blocks(n_tokens: int = 12, chunk_size: int = 4):
    """Causal GMA by chunks, as a block lower-triangular picture of the (never formed) causal affinity.

    Left: the ``N x N`` causal affinity cut into ``C x C`` blocks. Diagonal blocks (the tokens of one chunk against
    each other) are computed as masked ``C x C`` naive GMA; the blocks below the diagonal are never formed: the
    carried state ``(V~, Z)`` of the earlier chunks stands in for them; above the diagonal is the future (zero).
    Right: the scan along the chunks, each adding its totals to the state the next one reads.

    Args:
        n_tokens: ``N`` as drawn (2 to 32); ``chunk_size``: ``C`` (1 to ``N``); the last chunk may be shorter.

    Returns:
        the ``Figure``.
    """

    n = _checks.integer("n_tokens", n_tokens, minimum=2)
    c = _checks.positive_int("chunk_size", chunk_size)
    if n > 32 or c > n:
        raise ValueError(f"draw at most N=32 tokens with 1 <= chunk_size <= N, got N={n}, chunk_size={c}")
    starts = list(range(0, n, c))
    fig, axes = new_figure(2, width=10.0, height=4.2)
    ax, scan = axes[0, 0], axes[0, 1]
    for a in (ax, scan):
        a.set_axis_off()

    # left: the block picture, row i = query, column j = key
    for bi, row_start in enumerate(starts):
        rows = min(c, n - row_start)
        for bj, col_start in enumerate(starts):
            cols = min(c, n - col_start)
            y = n - row_start - rows
            if bj == bi:  # the masked in-chunk block: cells with j <= i
                for i in range(rows):
                    for j in range(cols):
                        if j <= i:
                            ax.add_patch(Rectangle((col_start + j, n - row_start - i - 1), 1, 1,
                                                   facecolor=_SLOT, alpha=0.55, edgecolor="white", lw=0.5))
                ax.add_patch(Rectangle((col_start, y), cols, rows, fill=False, edgecolor=_SLOT, lw=1.5))
            elif bj < bi:  # the past: replaced by the carried state
                ax.add_patch(Rectangle((col_start, y), cols, rows, facecolor=_KEY, alpha=0.15, hatch="//",
                                       edgecolor=_KEY, lw=1.0))
            else:  # the future
                ax.add_patch(Rectangle((col_start, y), cols, rows, facecolor="none", edgecolor="0.85", lw=0.5))
    ax.set_xlim(-0.5, n + 0.5)
    ax.set_ylim(-2.6, n + 1.2)
    ax.set_aspect("equal")
    ax.text(n / 2, n + 0.4, "causal affinity by $C \\times C$ blocks (query rows, key columns)", ha="center",
            fontsize=9)
    ax.add_patch(Rectangle((0, -1.3), 0.8, 0.8, facecolor=_SLOT, alpha=0.55))
    ax.text(1.1, -0.9, "in-chunk: masked $C \\times C$ naive form", va="center", fontsize=8.5)
    ax.add_patch(Rectangle((0, -2.4), 0.8, 0.8, facecolor=_KEY, alpha=0.15, hatch="//", edgecolor=_KEY))
    ax.text(1.1, -2.0, "earlier chunks: never formed, read from the carried state $(\\tilde V, Z)$", va="center",
            fontsize=8.5)

    # right: the scan over chunks
    n_chunks = len(starts)
    for index in range(n_chunks):
        x = 2.2 * index
        scan.add_patch(Rectangle((x, 1.0), 1.6, 1.0, facecolor=_SLOT, alpha=0.25, edgecolor=_SLOT, lw=1.2))
        last = min(starts[index] + c, n)
        scan.text(x + 0.8, 1.5, f"chunk {index + 1}\ntokens {starts[index] + 1}-{last}", ha="center", va="center",
                  fontsize=8)
        scan.add_patch(Rectangle((x + 0.3, -0.6), 1.0, 0.8, facecolor=_KEY, alpha=0.15, edgecolor=_KEY, lw=1.0))
        state = "0" if index == 0 else f"$(\\tilde V, Z)_{{<{index + 1}}}$"
        scan.text(x + 0.8, -0.2, state, ha="center", va="center", fontsize=8)
        scan.add_patch(FancyArrowPatch((x + 0.8, 0.2), (x + 0.8, 1.0), arrowstyle="-|>", mutation_scale=10,
                                       color=_KEY))
        if index + 1 < n_chunks:
            scan.add_patch(FancyArrowPatch((x + 1.3, -0.2), (x + 2.5, -0.2), arrowstyle="-|>", mutation_scale=10,
                                           color=_KEY))
            scan.text(x + 1.9, 0.05, "+ totals", ha="center", fontsize=7, color=_KEY)
    scan.text(1.1 * n_chunks - 0.2, 2.5, "each chunk reads the state of the chunks before it, then adds its own",
              ha="center", fontsize=9)
    scan.set_xlim(-0.4, 2.2 * n_chunks)
    scan.set_ylim(-1.2, 3.0)
    return fig
