"""The lean autograd form (impl="lean", auto's choice on a CPU): the float64 spec on odd sizes, gradcheck, causality,
decoding, masks and bad input."""
import math

import pytest
import torch
from conftest import random_mixture

import gma_teach
from gma_teach import _gma_autograd, gmm, mixing


def spec(q, k, v, means, variances, log_priors, causal, eps=1e-6):
    """An independent float64 definition: responsibilities from the Gaussian densities written out (no GEMM form),
    then a loop over queries; per-head mixtures ``(H, K, d)`` on ``(B, H, N, d)``."""
    q, k, v, means, variances, log_priors = (t.double() for t in (q, k, v, means, variances, log_priors))

    def gamma(x):  # (B, H, N, K)
        diff = x.unsqueeze(-2) - means.unsqueeze(-3)  # (B, H, N, K, d)
        log_density = -0.5 * (diff ** 2 / variances.unsqueeze(-3) + torch.log(2 * math.pi * variances.unsqueeze(-3)))
        return torch.softmax(log_density.sum(-1) + log_priors.unsqueeze(-2), dim=-1)

    gamma_q, gamma_k = gamma(q), gamma(k)
    out = torch.empty(*gamma_q.shape[:-1], v.shape[-1], dtype=torch.float64)
    for i in range(gamma_q.shape[-2]):
        last = i + 1 if causal else gamma_k.shape[-2]
        weights = (gamma_q[..., i:i + 1, :] * gamma_k[..., :last, :]).sum(-1)
        out[..., i, :] = (weights.unsqueeze(-1) * v[..., :last, :]).sum(-2) / (weights.sum(-1, keepdim=True) + eps)
    return out


def odd_inputs(batch=3, heads=3, n_q=37, n_k=37, d=7, d_v=5, n_components=5, dtype=torch.float64):
    means, variances, log_priors = random_mixture(n_components, d, n_heads=heads, dtype=dtype)
    q = torch.randn(batch, heads, n_q, d, dtype=dtype)
    k = torch.randn(batch, heads, n_k, d, dtype=dtype)
    v = torch.randn(batch, heads, n_k, d_v, dtype=dtype)
    return q, k, v, means, variances, log_priors


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 4, 9, 64])  # 1: 37 chunks in groups of 16, 16 and 5
def test_lean_equals_the_float64_spec_on_odd_sizes(causal, chunk_size):
    inputs = odd_inputs()
    expected = spec(*inputs, causal)
    out = gma_teach.gma(*inputs, causal=causal, impl="lean", chunk_size=chunk_size)
    assert out.shape == (3, 3, 37, 5) and out.dtype == torch.float64
    assert (out - expected).abs().max() <= 1e-12


def test_lean_takes_cross_attention_and_a_shared_mixture():
    q, k, v, *_ = odd_inputs(n_q=11, n_k=37)
    means, variances, log_priors = random_mixture(5, 7)  # one mixture for every head
    out = gma_teach.gma(q, k, v, means, variances, log_priors, impl="lean")
    shared = [t.expand(3, *t.shape) for t in (means, variances, log_priors)]
    assert (out - spec(q, k, v, *shared, False)).abs().max() <= 1e-12
    v_shared = v[:1]  # values broadcast over the batch
    out = gma_teach.gma(q, k, v_shared, means, variances, log_priors, impl="lean")
    assert (out - spec(q, k, v_shared.expand_as(v), *shared, False)).abs().max() <= 1e-12


@pytest.mark.parametrize("causal", [False, True])
def test_lean_float32_is_close_to_the_spec(causal):
    inputs = odd_inputs(dtype=torch.float32)
    out = gma_teach.gma(*inputs, causal=causal, impl="lean", chunk_size=4)
    assert out.dtype == torch.float32
    assert (out.double() - spec(*inputs, causal)).abs().max() <= 1e-4


@pytest.mark.parametrize("causal, chunk_size", [(False, 64), (True, 2), (True, 64)])
def test_lean_passes_gradcheck(causal, chunk_size):
    q, k, v, means, variances, log_priors = odd_inputs(batch=1, heads=3, n_q=7, n_k=7, d=3, d_v=3, n_components=3)
    leaves = [t.clone().requires_grad_() for t in (q, k, v, means, variances, log_priors)]

    def f(*args):
        return gma_teach.gma(*args, causal=causal, impl="lean", chunk_size=chunk_size, check_values=False)

    assert torch.autograd.gradcheck(f, leaves)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("recompute", [True, False])
def test_lean_gradients_equal_the_operator_forms_at_larger_sizes(causal, recompute):
    inputs = odd_inputs(batch=2, heads=3, n_q=41, n_k=41, d=5, d_v=3, n_components=7)
    grad_out = torch.randn(2, 3, 41, 3, dtype=torch.float64)

    def gradients(run):
        leaves = [t.clone().requires_grad_() for t in inputs]
        (run(*leaves) * grad_out).sum().backward()
        return [t.grad for t in leaves]

    def lean(q, k, v, means, variances, log_priors):
        weight, constant = gmm.gemm_coefficients(means, variances, log_priors)
        return _gma_autograd.lean_from_coefficients(q, k, v, weight, constant, causal=causal, eps=1e-6, chunk_size=4,
                                                    recompute=recompute)

    expected = gradients(lambda *a: gma_teach.gma(*a, causal=causal, impl="naive"))
    for got, want in zip(gradients(lean), expected):
        assert (got - want).abs().max() <= 1e-10 * (1 + want.abs().max())


@pytest.mark.parametrize("chunk_size", [1, 4, 64])
def test_lean_causal_outputs_and_gradients_ignore_the_future(chunk_size):
    q, k, v, means, variances, log_priors = odd_inputs()
    cut = 20
    future = [t.clone() for t in (q, k, v)]
    for t in future:
        t[..., cut:, :] += 3 * torch.randn_like(t[..., cut:, :])
    before = gma_teach.gma(q, k, v, means, variances, log_priors, causal=True, impl="lean", chunk_size=chunk_size)
    after = gma_teach.gma(*future, means, variances, log_priors, causal=True, impl="lean", chunk_size=chunk_size)
    assert torch.equal(before[..., :cut, :], after[..., :cut, :])
    assert (before[..., cut:, :] - after[..., cut:, :]).abs().max() > 1e-3  # the perturbation did change the future
    v_leaf = v.clone().requires_grad_()
    out = gma_teach.gma(q, k, v_leaf, means, variances, log_priors, causal=True, impl="lean", chunk_size=chunk_size)
    out[..., :cut, :].sum().backward()
    assert torch.equal(v_leaf.grad[..., cut:, :], torch.zeros_like(v_leaf.grad[..., cut:, :]))


def test_decoding_equals_the_lean_causal_forward():
    torch.manual_seed(1)
    layer = gma_teach.GaussianMixtureAttention(15, 3, 5, causal=True, impl="lean", chunk_size=4).double()
    x = torch.randn(3, 13, 15, dtype=torch.float64)
    full = layer(x)
    state = layer.init_state(3)
    steps = []
    for t in range(13):
        y_t, state = layer.step(x[:, t], state)
        steps.append(y_t)
    assert (torch.stack(steps, 1) - full).abs().max() <= 1e-12


def test_auto_runs_the_lean_form_on_a_cpu(monkeypatch):
    calls = []
    real = mixing.lean_gma
    monkeypatch.setattr(mixing, "lean_gma", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    inputs = odd_inputs(dtype=torch.float32)
    for causal in (False, True):
        gma_teach.gma(*inputs, causal=causal)
    assert [kw["causal"] for kw in calls] == [False, True]


@pytest.mark.parametrize("causal", [False, True])
def test_a_key_padding_mask_or_returned_responsibilities_take_the_operator_forms(causal, monkeypatch):
    q, k, v, means, variances, log_priors = odd_inputs()
    mask = torch.ones(3, 37, dtype=torch.bool)
    mask[0, 30:] = False
    mask[2, 5:9] = False
    monkeypatch.setattr(mixing, "lean_gma", None)  # would fail if called
    out = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl="lean", key_padding_mask=mask)
    expected = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl="naive",
                             key_padding_mask=mask)
    assert (out - expected).abs().max() <= 1e-12
    out, gamma_q, gamma_k = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl="lean",
                                          return_responsibilities=True)
    assert (out - spec(q, k, v, means, variances, log_priors, causal)).abs().max() <= 1e-12
    assert gamma_q.shape == (3, 3, 37, 5) and gamma_k.shape == (3, 3, 37, 5)


def test_cancelling_float32_logits_send_lean_to_the_guarded_forms(monkeypatch):
    torch.manual_seed(3)
    means = 1000 + torch.randn(4, 3)
    variances, log_priors = torch.ones(4, 3), torch.log_softmax(torch.zeros(4), -1)
    x = means[torch.randint(0, 4, (50,))] + torch.randn(50, 3)
    assert gmm.gemm_cancellation_bound(x, means, variances) > gmm.GEMM_LOGIT_TOLERANCE
    monkeypatch.setattr(mixing, "lean_gma", None)  # would fail if called
    v = torch.randn(50, 2)
    out = gma_teach.gma(x, x, v, means, variances, log_priors, causal=True, impl="lean")
    expected = gma_teach.gma(x.double(), x.double(), v.double(), means.double(), variances.double(),
                             log_priors.double(), causal=True, impl="naive")
    assert (out.double() - expected).abs().max() < 1e-4


def test_empty_sequences_give_empty_outputs():
    q, k, v, means, variances, log_priors = odd_inputs(n_q=0, n_k=0)
    for causal in (False, True):
        out = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl="lean")
        assert out.shape == (3, 3, 0, 5)


@pytest.mark.parametrize("call, error, message", [
    (lambda g, v: gma_teach.gma_from_responsibilities(g, g, v, impl="lean"), ValueError, "call gma"),
    (lambda g, v: mixing.normalized_kernel_attention(g, g, v, impl="lean"), ValueError, "call gma"),
])
def test_lean_needs_routing_vectors(call, error, message):
    gamma = torch.softmax(torch.randn(2, 6, 3), -1)
    with pytest.raises(error, match=message):
        call(gamma, torch.randn(2, 6, 4))


@pytest.mark.parametrize("kwargs, message", [
    ({"chunk_size": 0}, "chunk_size"),
    ({"eps": -1.0}, "eps"),
    ({"causal": "yes"}, "causal"),
    ({"impl": "fast"}, "impl"),
])
def test_bad_options_are_refused_by_name(kwargs, message):
    inputs = odd_inputs(n_q=5, n_k=5)
    with pytest.raises((ValueError, TypeError), match=message):
        gma_teach.gma(*inputs, **{"impl": "lean", **kwargs})


def test_causal_lean_needs_as_many_queries_as_keys():
    with pytest.raises(ValueError, match="causal"):
        gma_teach.gma(*odd_inputs(n_q=5, n_k=7), causal=True, impl="lean")
