"""Figures for chapters 4-6 that the shared plots lack (scaling curves come from :func:`plot_scaling`, training
curves from :func:`plot_training`).

* :func:`plot_gradient_modulation` -- the responsibility Jacobian's entries against the responsibilities, on top of
  the curves ``gamma (1 - gamma)`` and ``-gamma_k gamma_j`` that Section 4.1 of the paper predicts.
"""
from __future__ import annotations

import numpy as np

from ._style import COLORS, as_float_array, new_figure

__all__ = ["plot_gradient_modulation"]


def plot_gradient_modulation(gamma, jacobian, *, ax=None):
    """Scatter the measured ``d gamma_k / d s_j`` against the responsibilities, over the predicted curves.

    Left: the diagonal ``d gamma_k / d s_k`` against ``gamma_k`` with the parabola ``gamma (1 - gamma)`` (largest,
    1/4, when the assignment is most uncertain). Right: the off-diagonal ``d gamma_k / d s_j`` against
    ``gamma_k gamma_j`` with the line ``-gamma_k gamma_j``.

    Args:
        gamma: ``(M, K)`` responsibilities of ``M`` tokens.
        jacobian: ``(M, K, K)`` with ``jacobian[m, k, j] = d gamma[m, k] / d s[m, j]`` (from autograd, say).
        ax: two matplotlib axes to draw on (default: a new one-row, two-column figure).

    Returns:
        The matplotlib ``Figure``.
    """
    gamma, jacobian = as_float_array("gamma", gamma), as_float_array("jacobian", jacobian)
    if gamma.ndim != 2:
        raise ValueError(f"gamma must be (M, K), got shape {gamma.shape}")
    m, k = gamma.shape
    if jacobian.shape != (m, k, k):
        raise ValueError(f"jacobian must be (M, K, K) = {(m, k, k)} for gamma of shape {gamma.shape}, "
                         f"got {jacobian.shape}")
    if ax is None:
        fig, axes = new_figure(2, width=8.4, height=3.4)
        ax = axes[0]
    fig = ax[0].figure
    diagonal_ax, off_ax = ax
    grid = np.linspace(0, 1, 201)
    diagonal_ax.plot(grid, grid * (1 - grid), color="black", lw=1, label=r"$\gamma(1-\gamma)$")
    diagonal_ax.scatter(gamma.ravel(), np.diagonal(jacobian, axis1=1, axis2=2).ravel(), s=6, alpha=0.5,
                        color=COLORS["gma"], label="autograd")
    diagonal_ax.set_xlabel(r"$\gamma_k$")
    diagonal_ax.set_ylabel(r"$\partial\gamma_k / \partial s_k$")
    diagonal_ax.set_title("self-sensitivity")
    diagonal_ax.legend()
    off = ~np.eye(k, dtype=bool)
    products = (gamma[:, :, None] * gamma[:, None, :])[:, off].ravel()
    off_ax.plot([0, products.max()], [0, -products.max()], color="black", lw=1, label=r"$-\gamma_k\gamma_j$")
    off_ax.scatter(products, jacobian[:, off].ravel(), s=6, alpha=0.5, color=COLORS["gma"], label="autograd")
    off_ax.set_xlabel(r"$\gamma_k\gamma_j$")
    off_ax.set_ylabel(r"$\partial\gamma_k / \partial s_j$, $j \neq k$")
    off_ax.set_title("cross-sensitivity")
    off_ax.legend()
    return fig
