"""Chapter 3's explorer: move one query and watch its responsibilities and its attention row, GMA's beside softmax's.

:func:`query_explorer` first displays a static figure (so a rendered HTML page shows a picture even without a
kernel) and then sliders for the query's position and the components' variance that redraw that same figure.
"""
from __future__ import annotations

import math

import ipywidgets as widgets
import torch

from .. import _checks, gmm
from ..mixing import affinity
from ..plots import COLORS, component_colors, new_figure, plot_responsibilities_2d
from ._base import Explorer

__all__ = ["QueryExplorer", "query_explorer"]

_MAX_COMPONENTS = 8
_MAX_KEYS = 64


class QueryExplorer(Explorer):
    """One query against fixed keys in a 2-D routing plane, through a K-component mixture and through softmax.

    Attributes:
        means: ``(K, 2)`` component means on a circle; ``variances``: ``(K, 2)``, all equal to ``variance``.
        keys: ``(n_keys, 2)`` keys drawn near the components, sorted by their most likely component.
        query: ``(2,)`` the query shown now.
        controls: the ipywidgets box (query x, query y, variance) once shown.

    Use :func:`query_explorer` to build and display one; :meth:`figure` draws the current state without widgets.
    """

    def __init__(self, n_components: int = 4, n_keys: int = 24, *, variance: float = 0.5, seed: int = 0):
        n_components = _checks.integer("n_components", n_components, minimum=2, maximum=_MAX_COMPONENTS)
        n_keys = _checks.integer("n_keys", n_keys, minimum=2, maximum=_MAX_KEYS)
        self.set_variance(variance)
        generator = torch.Generator().manual_seed(seed)
        angles = torch.arange(n_components, dtype=torch.float64) * (2 * math.pi / n_components)
        self.means = 2.5 * torch.stack([angles.cos(), angles.sin()], dim=-1)
        picks = torch.randint(n_components, (n_keys,), generator=generator)
        keys = self.means[picks] + 0.8 * torch.randn(n_keys, 2, generator=generator, dtype=torch.float64)
        self.keys = keys[torch.argsort(self._gamma(keys, variance).argmax(-1), stable=True)]
        self.query = self.means[0].clone()
        self.controls = None

    @property
    def n_components(self) -> int:
        return self.means.shape[0]

    @property
    def variances(self) -> torch.Tensor:
        return torch.full_like(self.means, self.variance)

    def _gamma(self, x: torch.Tensor, variance: float) -> torch.Tensor:

        k = self.means.shape[0]
        variances = torch.full_like(self.means, variance)
        log_priors = torch.full((k,), -math.log(k), dtype=torch.float64)
        return gmm.responsibilities(x, self.means, variances, log_priors)

    def set_query(self, x: float, y: float) -> None:
        """Move the query to ``(x, y)``."""
        x, y = _checks.number("x", x), _checks.number("y", y)
        self.query = torch.tensor([x, y], dtype=torch.float64)

    def set_variance(self, variance: float) -> None:
        """Give every component the variance ``variance`` (> 0) in both coordinates."""
        self.variance = _checks.positive_number("variance", variance)

    def rows(self) -> dict[str, torch.Tensor]:
        """The quantities the figure shows: ``gamma_q`` ``(K,)``, and the attention rows ``gma`` and ``softmax``
        ``(n_keys,)`` of the query over the keys (each sums to 1, GMA's up to its eps)."""

        gamma_q = self._gamma(self.query.unsqueeze(0), self.variance)
        gamma_k = self._gamma(self.keys, self.variance)
        gma_row = affinity(gamma_q, gamma_k)[0]
        softmax_row = torch.softmax(self.keys @ self.query / math.sqrt(2.0), dim=-1)
        return {"gamma_q": gamma_q[0], "gma": gma_row, "softmax": softmax_row}

    def figure(self):
        """A new matplotlib ``Figure``: the plane (components, keys, the query), ``gamma(q)``, the two rows."""

        rows = self.rows()
        fig, axes = new_figure(3, width=11.5, height=3.6)
        plane, bars, attention = axes[0]
        log_priors = torch.full((self.n_components,), -math.log(self.n_components), dtype=torch.float64)
        plot_responsibilities_2d(self.means, self.variances, log_priors, extent=(-5.0, 5.0, -5.0, 5.0),
                                 n_points=80, ax=plane)
        plane.scatter(self.keys[:, 0], self.keys[:, 1], s=14, color="black", label="keys", zorder=3)
        plane.scatter([self.query[0]], [self.query[1]], s=160, marker="*", color="white", edgecolor="black",
                      label="query", zorder=4)
        plane.legend(loc="lower left", fontsize=8)
        plane.set_title("routing plane")
        colors = component_colors(self.n_components)
        bars.bar(range(self.n_components), rows["gamma_q"].numpy(), color=colors)
        bars.set_ylim(0, 1)
        bars.set_xlabel("component k")
        bars.set_ylabel(r"$\gamma_k(q)$")
        bars.set_title("the query's responsibilities")
        index = torch.arange(1, self.keys.shape[0] + 1)
        attention.plot(index, rows["softmax"].numpy(), marker="s", ms=3, color=COLORS["softmax"],
                       label="softmax")
        attention.plot(index, rows["gma"].numpy(), marker="o", ms=3, color=COLORS["gma"], label="GMA")
        attention.set_xlabel("key (sorted by component)")
        attention.set_ylabel("attention weight")
        attention.set_title("the query's attention row")
        attention.legend(fontsize=8)
        return fig

    def _build_controls(self):

        style = {"description_width": "70px"}
        query_x = widgets.FloatSlider(value=float(self.query[0]), min=-5.0, max=5.0, step=0.1,
                                      description="query x", style=style, continuous_update=False)
        query_y = widgets.FloatSlider(value=float(self.query[1]), min=-5.0, max=5.0, step=0.1,
                                      description="query y", style=style, continuous_update=False)
        variance = widgets.FloatLogSlider(value=self.variance, base=10, min=-1.5, max=1, step=0.05,
                                          description="variance", style=style, continuous_update=False)

        def on_change(_):
            self.set_query(query_x.value, query_y.value)
            self.set_variance(variance.value)
            self._redraw()

        for slider in (query_x, query_y, variance):
            slider.observe(on_change, names="value")
        return widgets.VBox([query_x, query_y, variance])


def query_explorer(n_components: int = 4, n_keys: int = 24, *, variance: float = 0.5,
                   seed: int = 0) -> QueryExplorer:
    """Display chapter 3's query explorer and return it.

    A static figure comes first (the routing plane with the keys and the query, the query's responsibilities
    ``gamma(q)``, and its attention row over the keys for GMA and for softmax attention), then sliders that move
    the query and change the components' variance. Without a live kernel (the HTML book) the figure is what you see.

    Args:
        n_components: ``K``, 2 to 8 components on a circle.
        n_keys: keys drawn near the components, 2 to 64.
        variance: every component's variance at the start (> 0).
        seed: places the keys.

    Returns:
        The :class:`QueryExplorer` (assign it, ``explorer = query_explorer()``, to avoid printing its repr).
    """
    return QueryExplorer(n_components, n_keys, variance=variance, seed=seed).show()
