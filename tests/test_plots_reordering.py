"""gma_teach.plots.reordering: the gradient-modulation figure draws what it is given and validates shapes."""
import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch

from gma_teach.plots import plot_gradient_modulation


def test_plot_gradient_modulation_draws_every_entry():
    gamma = torch.randn(5, 3, dtype=torch.float64).softmax(-1)
    jacobian = torch.diag_embed(gamma) - gamma.unsqueeze(-1) * gamma.unsqueeze(-2)
    fig = plot_gradient_modulation(gamma, jacobian)
    diagonal_ax, off_ax = fig.axes[:2]
    diagonal_points = diagonal_ax.collections[0].get_offsets()
    off_points = off_ax.collections[0].get_offsets()
    assert diagonal_points.shape == (15, 2) and off_points.shape == (30, 2)
    np.testing.assert_allclose(diagonal_points[:, 1], (gamma * (1 - gamma)).reshape(-1).numpy())
    np.testing.assert_allclose(off_points[:, 1], -off_points[:, 0])


def test_plot_gradient_modulation_rejects_mismatched_shapes():
    with pytest.raises(ValueError, match="jacobian must be"):
        plot_gradient_modulation(torch.rand(4, 3), torch.rand(4, 3, 2))
    with pytest.raises(ValueError, match="gamma must be"):
        plot_gradient_modulation(torch.rand(4), torch.rand(4, 1, 1))
