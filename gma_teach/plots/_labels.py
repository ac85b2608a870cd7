"""Labels placed on a figure so that none overlaps another, a marker or a drawn line (:func:`place_labels`, which
the recall frontier and the capacity figure of ``gma_teach.plots.recall`` use)."""
from __future__ import annotations

import math

import matplotlib
import numpy as np

# the candidate positions of a label, in points from its point: near ones first, then farther ones with a leader
_NEAR = [(5, 3, "left", "bottom"), (5, -3, "left", "top"), (-5, 3, "right", "bottom"), (-5, -3, "right", "top"),
         (0, 7, "center", "bottom"), (0, -7, "center", "top")]
_FAR = [(dx * step, dy * step, "left" if dx > 0 else "right" if dx < 0 else "center",
         "bottom" if dy > 0 else "top" if dy < 0 else "center")
        for step in (14, 24, 36, 50)
        for dx, dy in ((1, 1), (1, -1), (-1, 1), (-1, -1), (0, 1), (0, -1), (1, 0), (-1, 0))]


def _line_samples(ax, spacing: float) -> np.ndarray:
    """Display coordinates along every drawn line of ``ax`` (a point every ``spacing`` pixels)."""
    samples = []
    for line in ax.get_lines():
        if line.get_linestyle() in ("None", "none", "", " ") or len(line.get_xydata()) < 2:
            continue
        xy = line.get_transform().transform(line.get_xydata())
        for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
            steps = max(1, int(math.hypot(x1 - x0, y1 - y0) / spacing))
            t = np.linspace(0.0, 1.0, steps + 1)[:, None]
            samples.append((1 - t) * [x0, y0] + t * [x1, y1])
    return np.concatenate(samples) if samples else np.zeros((0, 2))


def _boxes(centres: np.ndarray, half: float) -> np.ndarray:
    return np.column_stack([centres[:, 0] - half, centres[:, 1] - half, centres[:, 0] + half,
                            centres[:, 1] + half]) if len(centres) else np.zeros((0, 4))


def _overlaps(box, boxes: np.ndarray) -> int:
    if not len(boxes):
        return 0
    return int(np.sum((boxes[:, 0] < box.x1) & (boxes[:, 2] > box.x0) & (boxes[:, 1] < box.y1)
                      & (boxes[:, 3] > box.y0)))


def place_labels(ax, labels, points):
    """Annotate each of ``labels`` (``(x, y, text, color)``) at the first candidate offset whose box lies inside the
    axes and clear of every label placed so far, of every marker at ``points`` (data coordinates) and of every
    drawn line.

    The figure is drawn first so that the layout, and with it every display coordinate, is settled; labels
    inside the axes do not move it again. A label with no free candidate takes the one that clashes least: outside
    the axes worst, then over a label or a marker, then over the fewest pixels of line."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    pixel = fig.dpi / 72
    solid = _boxes(ax.transData.transform(np.asarray(points, dtype=float).reshape(-1, 2)), 4 * pixel)
    lines = _boxes(_line_samples(ax, 3 * pixel), 1.0 * pixel)

    def clash(box):
        outside = box.x0 < frame.x0 or box.x1 > frame.x1 or box.y0 < frame.y0 or box.y1 > frame.y1
        return 1_000_000 * outside + 10_000 * _overlaps(box, solid) + _overlaps(box, lines)

    for x, y, text, color in labels:
        best = None
        for index, (dx, dy, ha, va) in enumerate(_NEAR + _FAR):
            leader = {"arrowprops": {"arrowstyle": "-", "lw": 0.5, "color": color}} if index >= len(_NEAR) else {}
            note = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=7,
                               color=color, **leader)
            note.update_positions(renderer)
            box = matplotlib.text.Text.get_window_extent(note, renderer).padded(pixel)  # the text, not its leader
            score = clash(box)
            if best is None or score < best[0]:
                if best is not None:
                    best[1].remove()
                best = (score, note, box)
            else:
                note.remove()
            if score == 0:
                break
        box = best[2]
        solid = np.vstack([solid, [[box.x0, box.y0, box.x1, box.y1]]])
