"""Chapter 2's explorer: move a component's mean or variance, or change K, and watch the responsibilities move.

:func:`gmm_explorer` first displays a static figure (so a rendered HTML page shows a picture even without a
kernel) and then sliders that redraw that same figure in place when a live kernel is attached.
"""
from __future__ import annotations

import math

import ipywidgets as widgets
import torch

from .. import _checks
from ..plots import plot_responsibilities_1d, plot_responsibilities_2d
from ._base import Explorer

__all__ = ["GMMExplorer", "gmm_explorer"]

_MAX_COMPONENTS = 8


class GMMExplorer(Explorer):
    """A diagonal Gaussian mixture in 1-D or 2-D with sliders for one component's mean and variance and for K.

    Attributes:
        means, variances: ``(K, dim)`` float64 tensors of the mixture shown now.
        log_priors: ``(K,)`` equal weights ``-log K``.
        controls: the ipywidgets box (component, mean, variance, K).

    Use :func:`gmm_explorer` to build and display one; :meth:`figure` draws the current mixture without widgets.
    """

    def __init__(self, dim: int = 1, n_components: int = 3, *, seed: int = 0):
        if dim not in (1, 2):
            raise ValueError(f"dim must be 1 or 2, got {dim!r}")
        n_components = _checks.integer("n_components", n_components, minimum=1, maximum=_MAX_COMPONENTS)
        self.dim = dim
        generator = torch.Generator().manual_seed(seed)
        # A pool of _MAX_COMPONENTS components; the mixture shown uses the first K of them.
        angles = torch.arange(_MAX_COMPONENTS, dtype=torch.float64) * (2 * math.pi / _MAX_COMPONENTS)
        if dim == 1:
            pool = torch.linspace(-3.0, 3.0, _MAX_COMPONENTS, dtype=torch.float64)[
                torch.randperm(_MAX_COMPONENTS, generator=generator)
            ].unsqueeze(-1)
        else:
            radius = 2.0 + 0.5 * torch.rand(_MAX_COMPONENTS, generator=generator, dtype=torch.float64)
            pool = torch.stack([radius * angles.cos(), radius * angles.sin()], -1)
        self._pool_means = pool
        self._pool_variances = torch.full((_MAX_COMPONENTS, dim), 0.6, dtype=torch.float64)
        self.n_components = n_components
        self.controls = None

    @property
    def means(self) -> torch.Tensor:
        return self._pool_means[: self.n_components]

    @property
    def variances(self) -> torch.Tensor:
        return self._pool_variances[: self.n_components]

    @property
    def log_priors(self) -> torch.Tensor:
        return torch.full((self.n_components,), -math.log(self.n_components), dtype=torch.float64)

    def set_component(self, k: int, *, mean=None, variance: float | None = None) -> None:
        """Move component ``k``'s mean (a float in 1-D, a pair in 2-D) and/or set its variance (all dimensions)."""
        k = _checks.integer("k", k, minimum=0, maximum=self.n_components - 1)
        if mean is not None:
            mean = torch.as_tensor(mean, dtype=torch.float64).reshape(-1)
            if mean.numel() != self.dim:
                raise ValueError(f"mean must have {self.dim} number(s), got {mean.numel()}")
            self._pool_means[k] = mean
        if variance is not None:
            self._pool_variances[k] = _checks.positive_number("variance", variance)

    def set_n_components(self, n_components: int) -> None:
        """Show the first ``n_components`` components of the pool (1 to 8)."""
        self.n_components = _checks.integer("n_components", n_components, minimum=1, maximum=_MAX_COMPONENTS)

    def figure(self):
        """A new matplotlib ``Figure`` of the current mixture (densities and responsibilities)."""

        if self.dim == 1:
            return plot_responsibilities_1d(self.means, self.variances, self.log_priors, x_range=(-6.0, 6.0))
        return plot_responsibilities_2d(
            self.means, self.variances, self.log_priors, extent=(-5.0, 5.0, -5.0, 5.0), n_points=120
        )

    def _build_controls(self):

        style = {"description_width": "90px"}
        component = widgets.Dropdown(options=list(range(self.n_components)), value=0, description="component",
                                     style=style)
        mean_x = widgets.FloatSlider(value=0.0, min=-5.0, max=5.0, step=0.1, description="mean x1", style=style,
                                     continuous_update=False)
        mean_y = widgets.FloatSlider(value=0.0, min=-5.0, max=5.0, step=0.1, description="mean x2", style=style,
                                     continuous_update=False)
        variance = widgets.FloatLogSlider(value=0.6, base=10, min=-2, max=1, step=0.05, description="variance",
                                          style=style, continuous_update=False)
        n_components = widgets.IntSlider(value=self.n_components, min=1, max=_MAX_COMPONENTS, description="K",
                                         style=style, continuous_update=False)
        syncing = {"on": False}

        def load_component(*_):
            k = component.value
            syncing["on"] = True
            mean_x.value = float(self._pool_means[k, 0])
            if self.dim == 2:
                mean_y.value = float(self._pool_means[k, 1])
            variance.value = float(self._pool_variances[k, 0])
            syncing["on"] = False

        def on_component_change(change):
            if syncing["on"]:
                return
            mean = (mean_x.value,) if self.dim == 1 else (mean_x.value, mean_y.value)
            self.set_component(component.value, mean=mean, variance=variance.value)
            self._redraw()

        def on_k_change(change):
            self.set_n_components(n_components.value)
            component.options = list(range(self.n_components))
            component.value = min(component.value or 0, self.n_components - 1)
            load_component()
            self._redraw()

        component.observe(load_component, names="value")
        for slider in (mean_x, mean_y, variance):
            slider.observe(on_component_change, names="value")
        n_components.observe(on_k_change, names="value")
        load_component()
        sliders = [component, mean_x] + ([mean_y] if self.dim == 2 else []) + [variance, n_components]
        return widgets.VBox(sliders)


def gmm_explorer(dim: int = 1, n_components: int = 3, *, seed: int = 0) -> GMMExplorer:
    """Display an interactive diagonal-GMM explorer and return it.

    A static figure comes first (densities and stacked responsibilities in 1-D; a responsibility-blended colour
    map in 2-D), then sliders: which component to edit, its mean, its variance, and the number of components K.
    Without a live kernel (the HTML book) the figure is what you see.

    Args:
        dim: 1 or 2.
        n_components: initial K, 1 to 8.
        seed: places the initial means.

    Returns:
        The :class:`GMMExplorer` (assign it, ``explorer = gmm_explorer()``, to avoid printing its repr).
    """
    return GMMExplorer(dim, n_components, seed=seed).show()
