"""Explanatory diagrams for chapter 7: how the fused GMA kernels divide the work, and where they sit on a roofline.

These are drawings, not measurements. Each function draws what its arguments describe, so the picture follows
the sizes a chapter uses:

* :func:`plot_program_grid` -- the launch grid ``(B * H, ceil(N / BLOCK_N))``: one program per (batch x head,
  block of tokens), each recomputing the responsibilities of its own block;
* :func:`plot_split_sum` -- the bidirectional write pass: every program sums its contiguous run of key blocks
  into a partial memory ``(K, d_v)`` and normalizer ``(K,)``; the partials are then added in a fixed order, so
  the result does not depend on which program finished first;
* :func:`plot_chunk_scan` -- the causal kernels: per-chunk contributions in parallel, an exclusive prefix over
  chunks in a fixed order (the carried state), then each chunk's output from its masked in-chunk block plus the
  state of the chunks before it;
* :func:`plot_roofline` -- attainable throughput ``min(peak, intensity x bandwidth)`` of a device profile, with
  kernels placed by their arithmetic intensity (FLOPs per byte of memory traffic). It is a model.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
from matplotlib.patches import Rectangle

from .. import _checks
from ._style import COLORS, new_figure

__all__ = ["plot_chunk_scan", "plot_program_grid", "plot_roofline", "plot_split_sum"]

_PROGRAM = "#fdb863"   # one program's block
_IDLE = "#f0f0f0"      # the rest of the grid
_PARTIAL = "#b2abd2"   # a per-program partial sum
_STATE = "#80cdc1"     # the carried state
_MASKED = "#dddddd"    # the zeros of a causal mask


def _box(ax, x, y, width, height, color, text="", *, fontsize=8, edge="black"):

    ax.add_patch(Rectangle((x, y), width, height, facecolor=color, edgecolor=edge, lw=0.8))
    if text:
        ax.text(x + width / 2, y + height / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, color="black"):
    ax.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "->", "color": color, "lw": 0.9})


def _blank(ax, width, height):
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-0.2, height + 0.2)
    ax.set_aspect("equal")
    ax.axis("off")


def plot_program_grid(batch_heads: int, n_blocks: int, *, highlight: tuple[int, int] = (1, 2), ax=None):
    """The launch grid of a fused GMA kernel: rows are ``program_id(0)`` (batch x head), columns ``program_id(1)``
    (blocks of ``BLOCK_N`` tokens).

    Every cell is one program; the highlighted one is followed to what it loads (its block of ``x``, the head's
    mixture tables) and what it never stores (its ``(BLOCK_N, K)`` responsibilities).

    Args:
        batch_heads: ``B * H``, the number of rows (at most 12 in a drawing).
        n_blocks: ``ceil(N / BLOCK_N)``, the number of columns (at most 16).
        highlight: ``(row, column)`` of the program to follow.
        ax: draw on this axes instead of a new figure.

    Returns:
        The matplotlib ``Figure``; one rectangle per program (``batch_heads * n_blocks``) comes first in
        ``ax.patches``.
    """
    rows = _checks.integer("batch_heads", batch_heads, minimum=1, maximum=12)
    cols = _checks.integer("n_blocks", n_blocks, minimum=1, maximum=16)
    if (not isinstance(highlight, tuple) or len(highlight) != 2
            or not all(isinstance(i, int) and not isinstance(i, bool) for i in highlight)):
        raise TypeError(f"highlight must be a (row, column) tuple of ints, got {highlight!r}")
    row, col = highlight
    if not (0 <= row < rows and 0 <= col < cols):
        raise ValueError(f"highlight {highlight} lies outside the grid of {rows} x {cols} programs")
    if ax is None:
        _, axes = new_figure(1, width=7.6, height=0.45 * rows + 2.0)
        ax = axes[0, 0]
    for r in range(rows):
        for c in range(cols):
            chosen = (r, c) == (row, col)
            _box(ax, c, rows - 1 - r, 1, 1, _PROGRAM if chosen else _IDLE, f"{r},{c}" if chosen else "")
    ax.text(cols / 2, rows + 0.35, "program_id(1): block of BLOCK_N tokens  \u2192", ha="center", fontsize=9)
    ax.text(-0.35, rows / 2, "program_id(0) = b \u00b7 H + h  \u2192", ha="right", va="center", rotation=90,
            fontsize=9)
    ax.text(cols + 0.6, rows - 0.5 - row,
            f"program ({row}, {col}):\n"
            f" loads x[b, h, block {col}] (BLOCK_N, d)\n"
            " loads head h's tables W_sq, W_lin, c\n"
            " computes its (BLOCK_N, K) responsibilities\n"
            " in registers; never stores them",
            va="center", fontsize=8, family="monospace")
    _blank(ax, cols + 6.5, rows + 0.6)
    ax.set_xlim(-1.2, cols + 6.5)
    ax.set_title(f"launch grid: {rows} x {cols} = {rows * cols} programs, all running the same code")
    return ax.figure


def plot_split_sum(n_blocks: int, n_splits: int, *, ax=None):
    """The bidirectional write pass: ``n_splits`` programs per (batch, head) each sum a contiguous run of key
    blocks into a partial memory and normalizer; the partials are added left to right, always in the same order.

    Args:
        n_blocks: key blocks of one (batch, head), at most 24 in a drawing.
        n_splits: programs sharing them (at most ``n_blocks``); the runs differ in length by at most one block.
        ax: draw on this axes instead of a new figure.

    Returns:
        The matplotlib ``Figure``.
    """
    blocks = _checks.integer("n_blocks", n_blocks, minimum=1, maximum=24)
    splits = _checks.integer("n_splits", n_splits, minimum=1, maximum=blocks)
    bounds = np.linspace(0, blocks, splits + 1).round().astype(int)
    if ax is None:
        _, axes = new_figure(1, width=8.0, height=3.6)
        ax = axes[0, 0]
    width = max(blocks, 2 * splits + 1)
    scale = width / blocks
    palette = ["#fdb863", "#b2abd2", "#a6dba0", "#92c5de", "#f4a582", "#c2a5cf"]
    for s in range(splits):
        for b in range(bounds[s], bounds[s + 1]):
            _box(ax, b * scale, 3.2, scale, 0.6, palette[s % len(palette)], str(b) if blocks <= 16 else "")
    ax.text(-0.2, 3.5, "key blocks", ha="right", va="center", fontsize=9)
    step = width / splits
    for s in range(splits):
        x = s * step + step / 2 - 0.6
        _box(ax, x - 0.3, 1.7, 1.8, 0.7, palette[s % len(palette)], f"$P_{{{s}}}$: $\\tilde V_{{{s}}}, Z_{{{s}}}$",
             fontsize=9)
        middle = (bounds[s] + bounds[s + 1]) / 2 * scale
        _arrow(ax, (middle, 3.15), (x + 0.6, 2.45))
    ax.text(-0.2, 2.05, "partials\n(one per program)", ha="right", va="center", fontsize=9)
    total = "(" * max(splits - 2, 0) + " + ".join(
        (f"$P_{{{s}}}$" + (")" if 1 <= s < splits - 1 else "")) for s in range(splits))
    _box(ax, width / 2 - 2.2, 0.2, 4.4, 0.7, _STATE, f"$\\tilde V, Z$ = {total}", fontsize=9)
    for s in range(splits):
        _arrow(ax, (s * step + step / 2, 1.65), (width / 2, 0.95))
    ax.text(-0.2, 0.55, "fixed-order sum", ha="right", va="center", fontsize=9)
    _blank(ax, width, 4.0)
    ax.set_xlim(-3.2, width + 0.2)
    ax.set_title(f"write pass: {blocks} key blocks, {splits} programs, partials added in a fixed order")
    return ax.figure


def plot_chunk_scan(n_chunks: int, *, chunk: int = 3, ax=None):
    """The causal kernels on ``n_chunks`` chunks of ``C`` tokens, in three passes.

    1. in parallel, each chunk's contribution ``(Gamma^K_c)^T V_c`` and ``(Gamma^K_c)^T 1``;
    2. an exclusive prefix over chunks, in chunk order (the carried state ``tilde V_c, Z_c`` before chunk ``c``);
    3. in parallel, each chunk's output: its masked ``C x C`` block (lower triangle, diagonal included) plus what
       its queries read from the carried state.

    Args:
        n_chunks: chunks drawn (at most 8).
        chunk: tokens per chunk in the drawing (at most 6), for the size of each masked block.
        ax: draw on this axes instead of a new figure.

    Returns:
        The matplotlib ``Figure``.
    """
    chunks = _checks.integer("n_chunks", n_chunks, minimum=1, maximum=8)
    size = _checks.integer("chunk", chunk, minimum=1, maximum=6)
    if ax is None:
        _, axes = new_figure(1, width=8.4, height=4.6)
        ax = axes[0, 0]
    cell = 1.6 / size
    pitch = 2.4
    for c in range(chunks):
        x0 = c * pitch
        _box(ax, x0, 5.0, 1.6, 0.6, "#a6dba0", f"chunk {c}", fontsize=8)
        _arrow(ax, (x0 + 0.8, 4.95), (x0 + 0.8, 4.45))
        _box(ax, x0, 3.8, 1.6, 0.6, _PARTIAL, f"$(\\Gamma^K_{{{c}}})^\\top V_{{{c}}}$", fontsize=8)
        state_label = "0" if c == 0 else f"$\\tilde V_{{{c}}}, Z_{{{c}}}$"
        _box(ax, x0, 2.6, 1.6, 0.6, _STATE, state_label, fontsize=8)
        if c + 1 < chunks:
            _arrow(ax, (x0 + 1.6, 2.9), (x0 + pitch, 2.9))
            _arrow(ax, (x0 + 0.8, 3.75), (x0 + pitch + 0.3, 3.25))
        for i in range(size):
            for j in range(size):
                color = "#fdb863" if j <= i else _MASKED
                _box(ax, x0 + j * cell, 0.4 + (size - 1 - i) * cell, cell, cell, color, edge="white")
        _arrow(ax, (x0 + 0.8, 2.55), (x0 + 0.8, 2.05))
    ax.text(-0.3, 5.3, "1. in parallel", ha="right", va="center", fontsize=9)
    ax.text(-0.3, 4.1, "contributions", ha="right", va="center", fontsize=9)
    ax.text(-0.3, 2.9, "2. carried state\n(fixed order)", ha="right", va="center", fontsize=9)
    ax.text(-0.3, 1.2, "3. in parallel:\nmasked block\n+ state read", ha="right", va="center", fontsize=9)
    width = (chunks - 1) * pitch + 1.6
    _blank(ax, width, 5.8)
    ax.set_xlim(-3.0, width + 0.2)
    ax.set_title(f"causal GMA: {chunks} chunks of C = {size} tokens")
    return ax.figure


def plot_roofline(kernels: Mapping[str, tuple[float, float]], *, peak_flops: float, bandwidth: float,
                  device: str, ax=None):
    """A roofline model with kernels placed on it.

    Attainable FLOP/s at arithmetic intensity ``I`` (FLOPs per byte moved to or from memory) is
    ``min(peak_flops, I * bandwidth)``; the ridge point ``peak_flops / bandwidth`` separates memory-bound kernels
    (left) from compute-bound ones (right). Each kernel is drawn at its intensity, on the roof.

    Args:
        kernels: ``{label: (flops, bytes)}`` of each kernel, both positive.
        peak_flops: the device's peak FLOP/s at the precision the kernels use.
        bandwidth: the device's memory bandwidth in bytes/s.
        device: the profile's name, for the title.
        ax: draw on this axes instead of a new figure.

    Returns:
        The matplotlib ``Figure``.
    """
    if not isinstance(kernels, Mapping) or not kernels:
        raise TypeError(f"kernels must be a non-empty mapping label -> (flops, bytes), got {type(kernels).__name__}")
    peak_flops = _checks.positive_number("peak_flops", peak_flops)
    bandwidth = _checks.positive_number("bandwidth", bandwidth)
    points = {}
    for label, pair in kernels.items():
        try:
            flops, moved = (float(v) for v in pair)
        except (TypeError, ValueError):
            raise TypeError(f"kernels[{label!r}] must be a (flops, bytes) pair of numbers, got {pair!r}") from None
        if not (flops > 0 and moved > 0 and math.isfinite(flops) and math.isfinite(moved)):
            raise ValueError(f"kernels[{label!r}] needs positive finite flops and bytes, got {pair!r}")
        points[label] = flops / moved
    ridge = peak_flops / bandwidth
    if ax is None:
        _, axes = new_figure(1, width=6.4, height=3.8)
        ax = axes[0, 0]
    low = min(min(points.values()), ridge) / 8
    high = max(max(points.values()), ridge) * 8
    grid = np.geomspace(low, high, 200)
    ax.loglog(grid, np.minimum(peak_flops, grid * bandwidth) / 1e12, color="black", lw=1.2, label="roof")
    ax.axvline(ridge, color="grey", ls=":", lw=1)
    ax.text(ridge, peak_flops / 1e12 * 1.15, f" ridge {ridge:.0f} FLOP/B", fontsize=8, va="bottom")
    for index, (label, intensity) in enumerate(points.items()):
        attained = min(peak_flops, intensity * bandwidth) / 1e12
        color = COLORS.get(label.split()[0].lower(), f"C{index}")
        ax.plot([intensity], [attained], "o", color=color, label=f"{label} ({intensity:.1f} FLOP/B)")
    ax.set_xlabel("arithmetic intensity (FLOP per byte of memory traffic)")
    ax.set_ylabel("attainable TFLOP/s (model)")
    ax.set_ylim(top=peak_flops / 1e12 * 3)
    ax.set_title(f"roofline model of {device} (a model, not a measurement)")
    ax.legend(fontsize=8, loc="lower right")
    return ax.figure
