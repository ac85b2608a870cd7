"""Shared fixtures: deterministic seeds, float64 random mixtures of any shape."""
import math

import pytest
import torch

from gma_teach.gmm import random_mixture  # noqa: F401 (the one builder of random mixtures; tests import it here)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def random_responsibilities(*shape, dtype=torch.float64):
    """Rows of a softmax: valid responsibilities of shape ``shape`` (last dim K)."""
    return torch.softmax(torch.randn(*shape, dtype=dtype) * 2, dim=-1)


def random_log_priors_like(log_priors):
    return torch.log_softmax(torch.randn_like(log_priors), dim=-1)


LOG_2PI = math.log(2 * math.pi)
