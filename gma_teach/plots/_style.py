"""One look for every figure: sizes, colours and fonts."""
from __future__ import annotations

import matplotlib

# One colour per method, the same in every chapter.
COLORS = {
    "gma": "#1b7837",
    "softmax": "#762a83",
    "sdpa": "#9970ab",
    "linear": "#2166ac",
    "performer": "#d6604d",
    "linformer": "#b2182b",
    "mamba": "#4d4d4d",
    "triton": "#e08214",
}

_RC = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 100,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "font.size": 10,
    "legend.frameon": False,
}


def book_style() -> None:
    """Apply the book's matplotlib settings (idempotent)."""
    matplotlib.rcParams.update(_RC)


def new_figure(ncols: int = 1, nrows: int = 1, *, width: float | None = None, height: float | None = None):
    """A figure and its axes in the book's style; size defaults scale with the grid."""
    import matplotlib.pyplot as plt

    book_style()
    size = (width or 3.4 * ncols + 0.6, height or 3.0 * nrows + 0.4)
    return plt.subplots(nrows, ncols, figsize=size, squeeze=False, constrained_layout=True)
