"""What every figure of the book shares: one look (sizes, colours, fonts) and one way to read its inputs.

A private module of :mod:`gma_teach.plots`: the figure modules import its names, the package re-exports
``COLORS``, ``book_style`` and ``new_figure``.
"""
from __future__ import annotations

import re
from collections.abc import MutableMapping

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import torch

from .. import mixers


class _Colors(MutableMapping):
    """``name -> colour``, read from the registry at every look-up (so a mixer registered later is in it), plus the
    colours set here (Triton's, or one a reader sets), which take precedence."""

    def __init__(self, extra: dict[str, str]):
        self._extra = dict(extra)

    def _current(self) -> dict[str, str]:
        registered = {name: found.color for name, found in mixers.REGISTRY.items() if found.color is not None}
        return {**registered, **self._extra}

    def __getitem__(self, name: str) -> str:
        return self._current()[name]

    def __setitem__(self, name: str, color: str) -> None:
        self._extra[name] = color

    def __delitem__(self, name: str) -> None:
        del self._extra[name]

    def __iter__(self):
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    def __repr__(self) -> str:
        return repr(self._current())


COLORS = _Colors({"triton": "#e08214"})
"""One colour per method, the same in every chapter: each mixer's registered colour
(:class:`gma_teach.mixers.MixerEntry`, read at every look-up, so a mixer registered later has its colour here too),
and Triton's for the kernels' figures."""


def mixer_color(label, index: int = 0) -> str:
    """The colour of the mixer whose name starts ``label`` (``"gma K=64"`` and ``"GMA"`` get GMA's), as registered
    in :data:`gma_teach.mixers.REGISTRY` (or set in :data:`COLORS`), else matplotlib's ``C{index}``."""
    key = str(label).split()[0].lower() if label else ""
    return COLORS.get(key, f"C{index}")


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

    book_style()
    size = (width or 3.4 * ncols + 0.6, height or 3.0 * nrows + 0.4)
    return plt.subplots(nrows, ncols, figsize=size, squeeze=False, constrained_layout=True)


def as_float_array(name: str, value) -> np.ndarray:
    """``value`` (a tensor, an array or nested sequences of numbers) as a float64 NumPy array; a ``TypeError``
    naming the caller's argument ``name`` otherwise."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).numpy()
    try:
        return np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a tensor or an array of numbers, got {type(value).__name__}") from error


def tick_label(name: str, note: str, width: int = 14) -> str:
    """A bar group's tick label: the name in lines of about ``width`` characters (broken at spaces and after ``=``,
    so an option's name and value may part), with a note (seeds) on its own line."""
    pieces = re.findall(r"[^\s=]+=?|=", name)
    lines = [""]
    for piece in pieces:
        joined = lines[-1] + (" " if lines[-1] and not lines[-1].endswith("=") else "") + piece
        if lines[-1] and len(joined) > width:
            lines.append(piece)
        else:
            lines[-1] = joined
    return "\n".join([*lines, note])
