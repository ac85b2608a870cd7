"""Shared fixtures: deterministic seeds, float64 random mixtures of any shape."""
import math

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def random_mixture(n_components, dim, n_heads=None, *, dtype=torch.float64, spread=1.0):
    """Random means, positive variances and normalized log priors: ``(K, d)`` or ``(H, K, d)``."""
    shape = (n_components, dim) if n_heads is None else (n_heads, n_components, dim)
    means = torch.randn(shape, dtype=dtype) * spread
    variances = torch.rand(shape, dtype=dtype) * 1.5 + 0.2
    log_priors = torch.log_softmax(torch.randn(shape[:-1], dtype=dtype), dim=-1)
    return means, variances, log_priors


def random_responsibilities(*shape, dtype=torch.float64):
    """Rows of a softmax: valid responsibilities of shape ``shape`` (last dim K)."""
    return torch.softmax(torch.randn(*shape, dtype=dtype) * 2, dim=-1)


def random_log_priors_like(log_priors):
    return torch.log_softmax(torch.randn_like(log_priors), dim=-1)


LOG_2PI = math.log(2 * math.pi)
