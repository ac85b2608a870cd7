"""Figures for chapters 1-3: attention matrices, scaling curves and mixture responsibilities.

* :func:`plot_matrices` -- heatmaps of several ``(N_q, N_k)`` matrices side by side (softmax attention next to the
  GMA affinity, for example);
* :func:`plot_scaling` -- time or memory against ``N`` on log-log axes, each curve labelled with its fitted slope
  (:func:`gma_teach.measure.loglog_slope`; 1 means linear growth, 2 quadratic);
* :func:`plot_responsibilities_1d` and :func:`plot_responsibilities_2d` -- what a diagonal Gaussian mixture does to
  a line or a plane: the weighted densities and the posterior responsibilities they induce.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np
import torch
from matplotlib.patches import Ellipse

from .. import _checks, gmm
from ..measure import loglog_slope
from ._style import COLORS, as_float_array, new_figure

__all__ = [
    "component_colors",
    "plot_matrices",
    "plot_responsibilities_1d",
    "plot_responsibilities_2d",
    "plot_scaling",
]


def component_colors(n_components: int) -> np.ndarray:
    """``(n_components, 3)`` RGB colours, one per mixture component, the same in every chapter."""

    n_components = _checks.positive_int("n_components", n_components)
    palette = matplotlib.colormaps["tab10" if n_components <= 10 else "turbo"]
    if n_components <= 10:
        return np.array([palette(i)[:3] for i in range(n_components)])
    return np.array([palette(i / (n_components - 1))[:3] for i in range(n_components)])


def plot_matrices(
    matrices: Mapping[str, object],
    *,
    cmap: str = "viridis",
    shared_scale: bool = False,
    xlabel: str = "key position j",
    ylabel: str = "query position i",
    width_per_panel: float = 3.2,
):
    """Heatmaps of 2-D matrices side by side, one panel per entry of ``matrices``.

    Args:
        matrices: ``{title: matrix}``, each matrix a ``(N_q, N_k)`` tensor or array.
        cmap: matplotlib colour map.
        shared_scale: one colour scale for all panels (compare magnitudes) instead of one per panel (compare shapes).
        xlabel, ylabel: axis labels of every panel.
        width_per_panel: inches per panel.

    Returns:
        The matplotlib ``Figure``.
    """
    if not isinstance(matrices, Mapping) or not matrices:
        raise TypeError(f"matrices must be a non-empty mapping title -> matrix, got {type(matrices).__name__}")
    arrays = {}
    for title, matrix in matrices.items():
        array = as_float_array(f"matrices[{title!r}]", matrix)
        if array.ndim != 2:
            raise ValueError(f"matrices[{title!r}] must be 2-D (N_q, N_k), got shape {array.shape}")
        arrays[title] = array
    vmin = min(a.min() for a in arrays.values()) if shared_scale else None
    vmax = max(a.max() for a in arrays.values()) if shared_scale else None
    fig, axes = new_figure(len(arrays), width=width_per_panel * len(arrays) + 0.4, height=3.2)
    for ax, (title, array) in zip(axes[0], arrays.items()):
        image = ax.imshow(array, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest", aspect="auto")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(False)
        fig.colorbar(image, ax=ax, shrink=0.85)
    return fig


def plot_scaling(
    sizes: Sequence[float],
    series: Mapping[str, Sequence[float]],
    *,
    ylabel: str,
    xlabel: str = "sequence length N",
    fit_last: int | None = None,
    title: str | None = None,
    ax=None,
):
    """Curves of a cost against size on log-log axes; each legend entry carries its fitted slope.

    Args:
        sizes: the x values (for example sequence lengths), shared by every series.
        series: ``{label: values}``; the colour is ``COLORS[label.lower()]`` when the label names a method there.
            ``NaN`` values (a size that did not fit in memory, say) are drawn as gaps and left out of the fit.
        ylabel, xlabel, title: axis labels and optional title.
        fit_last: fit the slope on the last ``fit_last`` points only (small sizes are dominated by fixed
            overheads); ``None`` uses all points.
        ax: draw on this axes instead of a new figure.

    Returns:
        The matplotlib ``Figure``.
    """
    x = as_float_array("sizes", sizes).ravel()
    if not isinstance(series, Mapping) or not series:
        raise TypeError(f"series must be a non-empty mapping label -> values, got {type(series).__name__}")
    if fit_last is not None:
        fit_last = _checks.integer("fit_last", fit_last, minimum=2)
    if ax is None:
        fig, axes = new_figure(1)
        ax = axes[0, 0]
    else:
        fig = ax.figure
    for index, (label, values) in enumerate(series.items()):
        y = as_float_array(f"series[{label!r}]", values).ravel()
        if y.shape != x.shape:
            raise ValueError(f"series[{label!r}] must have one value per size ({x.size}), got {y.size}")
        keep = np.isfinite(y) & (y > 0)
        fit_x, fit_y = x[keep], y[keep]
        if fit_last is not None:
            fit_x, fit_y = fit_x[-fit_last:], fit_y[-fit_last:]
        legend = label
        if fit_x.size >= 2:
            legend = f"{label} (slope {loglog_slope(fit_x, fit_y):.2f})"
        color = COLORS.get(str(label).lower(), f"C{index}")
        ax.plot(x, np.where(keep, y, np.nan), marker="o", color=color, label=legend)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.legend()
    return fig


def _mixture_arguments(means, variances, log_priors):
    means = torch.as_tensor(means, dtype=torch.float64)
    variances = torch.as_tensor(variances, dtype=torch.float64)
    if means.ndim != 2:
        raise ValueError(f"means must have shape (K, d), got {tuple(means.shape)}")
    if variances.shape != means.shape:
        raise ValueError(f"variances must have the shape of means {tuple(means.shape)}, got {tuple(variances.shape)}")
    if log_priors is None:
        log_priors = torch.full((means.shape[0],), -math.log(means.shape[0]), dtype=torch.float64)
    log_priors = torch.as_tensor(log_priors, dtype=torch.float64)
    if log_priors.shape != (means.shape[0],):
        raise ValueError(f"log_priors must have shape ({means.shape[0]},), got {tuple(log_priors.shape)}")
    return means, variances, log_priors


def plot_responsibilities_1d(
    means,
    variances,
    log_priors=None,
    *,
    x_range: tuple[float, float] | None = None,
    n_points: int = 400,
    data=None,
    axes=None,
):
    """A 1-D mixture: weighted densities ``pi_k N(x | mu_k, sigma_k^2)`` above, responsibilities ``gamma_k(x)`` below.

    Args:
        means, variances: ``(K, 1)`` component means and variances.
        log_priors: ``(K,)`` normalized log mixing weights; ``None`` means equal weights.
        x_range: the interval drawn; default: the means +- 4 standard deviations.
        n_points: grid points.
        data: optional ``(N,)`` or ``(N, 1)`` samples drawn as a rug on the density panel.
        axes: two matplotlib axes (densities, responsibilities) to draw on instead of a new figure.

    Returns:
        The matplotlib ``Figure``.
    """

    means, variances, log_priors = _mixture_arguments(means, variances, log_priors)
    if means.shape[1] != 1:
        raise ValueError(f"means must have shape (K, 1) for a 1-D plot, got {tuple(means.shape)}")
    std = variances.sqrt()
    if x_range is None:
        x_range = (float((means - 4 * std).min()), float((means + 4 * std).max()))
    grid = torch.linspace(x_range[0], x_range[1], n_points, dtype=torch.float64).unsqueeze(-1)
    joint = gmm.log_joint(grid, means, variances, log_priors)  # (n_points, K)
    gamma = gmm.responsibilities_direct(grid, means, variances, log_priors)
    colors = component_colors(means.shape[0])
    if axes is None:
        fig, grid_axes = new_figure(1, 2, height=4.6)
        density_ax, gamma_ax = grid_axes[0, 0], grid_axes[1, 0]
    else:
        density_ax, gamma_ax = axes
        fig = density_ax.figure
    x = grid[:, 0].numpy()
    for k in range(means.shape[0]):
        density_ax.plot(x, joint[:, k].exp().numpy(), color=colors[k], label=f"k={k}")
    density_ax.plot(x, torch.logsumexp(joint, -1).exp().numpy(), color="black", lw=1, ls="--", label="p(x)")
    if data is not None:
        points = as_float_array("data", data).ravel()
        density_ax.plot(points, np.zeros_like(points), "|", color="gray", alpha=0.5)
    density_ax.set_ylabel(r"$\pi_k\,\mathcal{N}(x\mid\mu_k,\sigma_k^2)$")
    density_ax.legend(fontsize=8, ncol=2)
    gamma_ax.stackplot(x, gamma.T.numpy(), colors=colors, alpha=0.85)
    gamma_ax.set_ylim(0, 1)
    gamma_ax.set_xlim(x_range)
    density_ax.set_xlim(x_range)
    gamma_ax.set_xlabel("x")
    gamma_ax.set_ylabel(r"responsibilities $\gamma_k(x)$ (stacked)")
    return fig


def plot_responsibilities_2d(
    means,
    variances,
    log_priors=None,
    *,
    extent: tuple[float, float, float, float] | None = None,
    n_points: int = 160,
    data=None,
    ax=None,
):
    """A 2-D mixture: each pixel coloured by its responsibility-weighted blend of component colours.

    Pure colours mean one component owns the point; blends mark the soft boundaries. Means are drawn as crosses
    with their one-standard-deviation ellipses.

    Args:
        means, variances: ``(K, 2)`` component means and variances.
        log_priors: ``(K,)`` normalized log mixing weights; ``None`` means equal weights.
        extent: ``(x_min, x_max, y_min, y_max)``; default: the means +- 3.5 standard deviations.
        n_points: grid points per axis.
        data: optional ``(N, 2)`` samples drawn as small dots.
        ax: matplotlib axes to draw on instead of a new figure.

    Returns:
        The matplotlib ``Figure``.
    """


    means, variances, log_priors = _mixture_arguments(means, variances, log_priors)
    if means.shape[1] != 2:
        raise ValueError(f"means must have shape (K, 2) for a 2-D plot, got {tuple(means.shape)}")
    std = variances.sqrt()
    if extent is None:
        low, high = (means - 3.5 * std).min(0).values, (means + 3.5 * std).max(0).values
        extent = (float(low[0]), float(high[0]), float(low[1]), float(high[1]))
    xs = torch.linspace(extent[0], extent[1], n_points, dtype=torch.float64)
    ys = torch.linspace(extent[2], extent[3], n_points, dtype=torch.float64)
    grid_y, grid_x = torch.meshgrid(ys, xs, indexing="ij")
    points = torch.stack([grid_x.reshape(-1), grid_y.reshape(-1)], -1)
    gamma = gmm.responsibilities_direct(points, means, variances, log_priors)  # (n_points**2, K)
    colors = component_colors(means.shape[0])
    image = (gamma.numpy() @ colors).reshape(n_points, n_points, 3)
    if ax is None:
        fig, axes = new_figure(1, width=4.2, height=3.8)
        ax = axes[0, 0]
    else:
        fig = ax.figure
    ax.imshow(np.clip(image, 0, 1), origin="lower", extent=extent, aspect="auto", interpolation="bilinear")
    if data is not None:
        samples = as_float_array("data", data)
        ax.scatter(samples[:, 0], samples[:, 1], s=4, color="white", edgecolors="black", linewidths=0.2, alpha=0.7)
    for k in range(means.shape[0]):
        mu, sd = means[k].numpy(), std[k].numpy()
        ax.add_patch(Ellipse(mu, 2 * sd[0], 2 * sd[1], fill=False, color="black", lw=1))
        ax.plot(*mu, marker="x", color="black")
        ax.annotate(f"{k}", mu, textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlim(extent[0], extent[1])
    ax.set_ylim(extent[2], extent[3])
    ax.grid(False)
    ax.set_xlabel("$x_1$")
    ax.set_ylabel("$x_2$")
    ax.set_title("colour = responsibility-weighted blend")
    return fig
