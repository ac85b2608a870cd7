"""Shared fixtures: deterministic seeds, float64 random mixtures of any shape."""
import math

import pytest
import torch

from gma_teach.gmm import random_mixture  # noqa: F401 (the one builder of random mixtures; tests import it here)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def one_torch_thread():
    """One torch thread for a test (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``): the models are
    tiny, on a shared machine more threads only wait for each other, and a run's sums are added in the order a
    one-thread study run adds them."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def random_responsibilities(*shape, dtype=torch.float64):
    """Rows of a softmax: valid responsibilities of shape ``shape`` (last dim K)."""
    return torch.softmax(torch.randn(*shape, dtype=dtype) * 2, dim=-1)


def random_log_priors_like(log_priors):
    return torch.log_softmax(torch.randn_like(log_priors), dim=-1)


LOG_2PI = math.log(2 * math.pi)
