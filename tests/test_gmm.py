"""The GMM posterior: GEMM form vs the direct spec, vs scikit-learn, gradients, EM, the module, bad input."""
import numpy as np
import pytest
import torch
from conftest import random_mixture
from sklearn.mixture import GaussianMixture as SkGaussianMixture

import gma_teach
from gma_teach import gmm


@pytest.mark.parametrize("n_components", [1, 3, 64])
@pytest.mark.parametrize("dim", [1, 5, 16])
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_gemm_form_equals_direct_spec(n_components, dim, lead):
    x = torch.randn(*lead, 33, dim, dtype=torch.float64) * 2
    params = random_mixture(n_components, dim)
    fast = gma_teach.responsibilities(x, *params)
    slow = gmm.responsibilities_direct(x, *params)
    assert fast.shape == (*lead, 33, n_components)
    assert torch.allclose(fast, slow, atol=1e-12, rtol=0)
    assert torch.allclose(gma_teach.log_responsibilities(x, *params).exp(), slow, atol=1e-12, rtol=0)
    assert torch.allclose(gmm.log_joint(x, *params), gmm.direct_log_joint(x, *params), atol=1e-9, rtol=1e-12)


def test_per_head_mixtures_match_each_head_alone():
    x = torch.randn(2, 3, 7, 5, dtype=torch.float64)
    means, variances, log_priors = random_mixture(4, 5, n_heads=3)
    together = gma_teach.responsibilities(x, means, variances, log_priors)
    for head in range(3):
        alone = gma_teach.responsibilities(x[:, head], means[head], variances[head], log_priors[head])
        assert torch.allclose(together[:, head], alone, atol=1e-14, rtol=0)


@pytest.mark.parametrize("dim", [1, 5, 16])
def test_responsibilities_match_scikit_learn(dim):
    rng = np.random.default_rng(dim)
    data = np.concatenate([rng.normal(loc, 1.0 + loc / 4, size=(60, dim)) for loc in (-3.0, 0.0, 4.0)])
    reference = SkGaussianMixture(n_components=3, covariance_type="diag", random_state=0).fit(data)
    x = torch.from_numpy(data)
    ours = gma_teach.responsibilities(
        x, torch.from_numpy(reference.means_), torch.from_numpy(reference.covariances_),
        torch.from_numpy(np.log(reference.weights_)),
    )
    assert np.abs(ours.numpy() - reference.predict_proba(data)).max() <= 1e-8
    log_density = gmm.log_likelihood(x, torch.from_numpy(reference.means_),
                                     torch.from_numpy(reference.covariances_),
                                     torch.from_numpy(np.log(reference.weights_)))
    assert np.abs(log_density.numpy() - reference.score_samples(data)).max() <= 1e-8


@pytest.mark.parametrize("n_heads", [None, 2])
def test_responsibilities_gradcheck(n_heads):
    x = torch.randn(*(() if n_heads is None else (n_heads,)), 7, 3, dtype=torch.float64, requires_grad=True)
    means, variances, log_priors = (t.requires_grad_() for t in random_mixture(4, 3, n_heads=n_heads))
    assert torch.autograd.gradcheck(gma_teach.responsibilities, (x, means, variances, log_priors))
    assert torch.autograd.gradcheck(gma_teach.log_responsibilities, (x, means, variances, log_priors))


def test_low_precision_inputs_are_computed_in_float32():
    x = torch.randn(9, 4, dtype=torch.float64)
    params = random_mixture(5, 4)
    exact = gma_teach.responsibilities(x, *params)
    for dtype in (torch.float16, torch.bfloat16):
        low = gma_teach.responsibilities(x.to(dtype), *(p.to(dtype) for p in params))
        assert low.dtype == torch.float32
        # error comes from rounding the inputs, not from half-precision arithmetic
        assert (low.double() - exact).abs().max() < 0.05


def test_em_increases_likelihood_and_finds_separated_clusters():
    centers = torch.tensor([[-6.0, 0.0], [0.0, 6.0], [6.0, -1.0]], dtype=torch.float64)
    x = torch.cat([c + 0.5 * torch.randn(200, 2, dtype=torch.float64) for c in centers])
    result = gmm.fit_em(x, 3, n_iter=200, seed=1)
    steps = np.diff(result.log_likelihoods)
    assert (steps > -1e-9).all(), "EM must never decrease the likelihood"
    assert result.converged
    found = result.means[torch.cdist(centers, result.means).argmin(1)]
    assert torch.allclose(found, centers, atol=0.15)
    assert torch.allclose(result.variances, torch.full_like(result.variances, 0.25), atol=0.08)
    assert torch.allclose(result.log_priors.exp(), torch.full((3,), 1 / 3, dtype=torch.float64), atol=1e-3)


def test_em_rejects_bad_input():
    with pytest.raises(ValueError, match="x must be"):
        gmm.fit_em(torch.randn(2, 3, 4), 2)
    with pytest.raises(ValueError, match="at least n_components"):
        gmm.fit_em(torch.randn(2, 3), 5)


def test_module_parameterization():
    mixture = gma_teach.GaussianMixture(5, 3, n_heads=2, min_variance=1e-2)
    assert mixture.means.shape == (2, 5, 3) and mixture.prior_logits.shape == (2, 5)
    assert torch.allclose(mixture.log_priors.exp(), torch.full((2, 5), 0.2))
    assert torch.allclose(mixture.variances, torch.full((2, 5, 3), 1.01))
    with torch.no_grad():
        mixture.raw_variances.fill_(-50.0)
    assert (mixture.variances >= 1e-2).all(), "the floor holds for any raw value"
    x = torch.randn(4, 2, 7, 3)
    expected = gma_teach.responsibilities(x, mixture.means, mixture.variances, mixture.log_priors)
    assert torch.allclose(mixture(x), expected)
    assert torch.allclose(mixture.log_responsibilities(x).exp(), expected, atol=1e-6)


@pytest.mark.parametrize("kwargs, match", [
    (dict(n_components=0, dim=3), "n_components"),
    (dict(n_components=2, dim=3, n_heads=0), "n_heads"),
    (dict(n_components=2, dim=3, min_variance=0.0), "min_variance"),
    (dict(n_components=2.5, dim=3), "n_components"),
])
def test_module_rejects_bad_arguments(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        gma_teach.GaussianMixture(**kwargs)


def test_bad_input_names_the_argument():
    x = torch.randn(7, 3)
    means, variances, log_priors = random_mixture(4, 3, dtype=torch.float32)
    with pytest.raises(ValueError, match="feature dim"):
        gma_teach.responsibilities(torch.randn(7, 2), means, variances, log_priors)
    with pytest.raises(ValueError, match="variances must have the shape of means"):
        gma_teach.responsibilities(x, means, variances[:3], log_priors)
    with pytest.raises(ValueError, match="log_priors must have shape"):
        gma_teach.responsibilities(x, means, variances, log_priors[:3])
    with pytest.raises(ValueError, match="variances must be > 0"):
        gma_teach.responsibilities(x, means, -variances, log_priors)
    with pytest.raises(ValueError, match="log_priors must be normalized"):
        gma_teach.responsibilities(x, means, variances, log_priors + 1.0)
    with pytest.raises(ValueError, match="means must be"):
        gma_teach.responsibilities(x, means[None, None], variances[None, None], log_priors[None, None])
    with pytest.raises(ValueError, match="x must have at least 2"):
        gma_teach.responsibilities(torch.randn(3), means, variances, log_priors)
    with pytest.raises(ValueError, match=r"H=2"):
        gma_teach.responsibilities(x, *random_mixture(4, 3, n_heads=2, dtype=torch.float32))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        gma_teach.responsibilities(x.numpy(), means, variances, log_priors)
    with pytest.raises(TypeError, match="floating-point"):
        gma_teach.responsibilities(torch.ones(7, 3, dtype=torch.long), means, variances, log_priors)


def test_the_random_builders_give_valid_reproducible_inputs():
    means, variances, log_priors = gmm.random_mixture(5, 3, n_heads=2, generator=torch.Generator().manual_seed(4))
    assert means.shape == variances.shape == (2, 5, 3) and log_priors.shape == (2, 5)
    assert means.dtype == torch.float64 and bool((variances >= 0.3).all()) and bool((variances <= 1.8).all())
    torch.testing.assert_close(log_priors.exp().sum(-1), torch.ones(2, dtype=torch.float64))
    again = gmm.random_mixture(5, 3, n_heads=2, generator=torch.Generator().manual_seed(4))
    assert all(torch.equal(a, b) for a, b in zip((means, variances, log_priors), again))
    inputs = gmm.random_gma_inputs(2, 3, 7, 9, 4, 5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    assert [tuple(t.shape) for t in inputs] == [(2, 3, 7, 4), (2, 3, 9, 4), (2, 3, 9, 5), (3, 6, 4), (3, 6, 4), (3, 6)]
    assert [t.dtype for t in inputs] == [torch.float64] * 3 + [torch.float32] * 3
    gamma = gmm.responsibilities(inputs[0], *(t.double() for t in inputs[3:]))
    torch.testing.assert_close(gamma.sum(-1), torch.ones(2, 3, 7, dtype=torch.float64))
