"""Every GMA form equals the N x N spec; causality; gradients; the recurrence; bad input."""
import itertools

import pytest
import torch
from conftest import random_mixture, random_responsibilities

import gma_teach
from gma_teach import mixing

TORCH_IMPLS = ("naive", "linear", "cumsum", "chunked", "recurrent")
CAUSAL_IMPLS = ("naive", "cumsum", "chunked", "recurrent")


def spec(gamma_q, gamma_k, v, causal, eps):
    """An independent float64 loop over queries: the definition of GMA, entry by entry."""
    out = torch.empty(*gamma_q.shape[:-1], v.shape[-1], dtype=torch.float64)
    for i in range(gamma_q.shape[-2]):
        last = i + 1 if causal else gamma_k.shape[-2]
        weights = (gamma_q[..., i:i + 1, :] * gamma_k[..., :last, :]).sum(-1)  # (..., last)
        out[..., i, :] = (weights.unsqueeze(-1) * v[..., :last, :]).sum(-2) / (weights.sum(-1, keepdim=True) + eps)
    return out


def impls_for(causal):
    return CAUSAL_IMPLS if causal else TORCH_IMPLS


@pytest.mark.parametrize("n_tokens", [1, 7, 33, 130])
@pytest.mark.parametrize("n_components", [1, 3, 64])
@pytest.mark.parametrize("causal", [False, True])
def test_every_impl_equals_naive_and_the_spec(n_tokens, n_components, causal):
    gamma_q = random_responsibilities(2, 3, n_tokens, n_components)
    gamma_k = random_responsibilities(2, 3, n_tokens, n_components)
    v = torch.randn(2, 3, n_tokens, 5, dtype=torch.float64)
    reference = gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v, causal=causal, impl="naive")
    assert (reference - spec(gamma_q, gamma_k, v, causal, 1e-6)).abs().max() <= 1e-12
    for impl in impls_for(causal):
        for chunk_size in ((1, 16, 64) if impl == "chunked" else (64,)):
            out = gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v, causal=causal, impl=impl,
                                                      chunk_size=chunk_size)
            assert out.shape == v.shape
            assert (out - reference).abs().max() <= 1e-10, (impl, chunk_size)
    auto = gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v, causal=causal)
    assert (auto - reference).abs().max() <= 1e-10


@pytest.mark.parametrize("n_tokens, n_components, dim", list(itertools.product([1, 7, 33, 130], [1, 3, 64],
                                                                               [1, 5, 16])))
@pytest.mark.parametrize("causal", [False, True])
def test_gma_from_routing_vectors_equals_naive(n_tokens, n_components, dim, causal):
    means, variances, log_priors = random_mixture(n_components, dim, n_heads=2)
    q, k = (torch.randn(3, 2, n_tokens, dim, dtype=torch.float64) for _ in range(2))
    v = torch.randn(3, 2, n_tokens, 4, dtype=torch.float64)
    reference = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl="naive")
    assert reference.shape == (3, 2, n_tokens, 4)
    for impl in impls_for(causal):
        out = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl=impl, chunk_size=16)
        assert (out - reference).abs().max() <= 1e-10, impl


@pytest.mark.parametrize("lead", [(), (4,), (2, 3)])
def test_without_and_with_batch_dims(lead):
    means, variances, log_priors = random_mixture(3, 5)
    q, k = torch.randn(*lead, 7, 5, dtype=torch.float64), torch.randn(*lead, 7, 5, dtype=torch.float64)
    v = torch.randn(*lead, 7, 2, dtype=torch.float64)
    for causal in (False, True):
        reference = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl="naive")
        assert reference.shape == (*lead, 7, 2)
        for impl in impls_for(causal):
            out = gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl=impl, chunk_size=3)
            assert (out - reference).abs().max() <= 1e-10


@pytest.mark.parametrize("n_queries, n_keys", [(1, 7), (7, 1), (33, 130), (130, 33)])
def test_cross_attention_shapes(n_queries, n_keys):
    gamma_q = random_responsibilities(2, n_queries, 3)
    gamma_k = random_responsibilities(2, n_keys, 3)
    v = torch.randn(2, n_keys, 5, dtype=torch.float64)
    reference = spec(gamma_q, gamma_k, v, False, 1e-6)
    for impl in TORCH_IMPLS:
        out = gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v, impl=impl, chunk_size=16)
        assert out.shape == (2, n_queries, 5)
        assert (out - reference).abs().max() <= 1e-10, impl


def test_broadcast_leading_dims():
    gamma_q = random_responsibilities(2, 3, 7, 4)
    gamma_k = random_responsibilities(1, 3, 9, 4)  # one context shared by the batch
    v = torch.randn(3, 9, 5, dtype=torch.float64)
    out = gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v, impl="linear")
    assert out.shape == (2, 3, 7, 5)
    assert (out - spec(gamma_q, gamma_k.expand(2, -1, -1, -1), v.expand(2, -1, -1, -1), False, 1e-6)).abs().max() \
        <= 1e-12


def test_affinity_reproduces_the_output_and_its_structure():
    gamma_q, gamma_k = random_responsibilities(7, 3), random_responsibilities(9, 3)
    v = torch.randn(9, 4, dtype=torch.float64)
    matrix = gma_teach.affinity(gamma_q, gamma_k)
    assert matrix.shape == (7, 9)
    assert (matrix @ v - gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v)).abs().max() <= 1e-12
    assert (matrix >= 0).all()
    assert torch.linalg.matrix_rank(matrix) <= 3
    square = gma_teach.affinity(random_responsibilities(6, 2), random_responsibilities(6, 2), causal=True)
    assert (square.triu(1) == 0).all()
    assert torch.allclose(square.sum(-1), torch.ones(6, dtype=torch.float64), atol=1e-5)


@pytest.mark.parametrize("impl", CAUSAL_IMPLS)
def test_causal_outputs_ignore_the_future_exactly(impl):
    means, variances, log_priors = random_mixture(5, 4, dtype=torch.float32)
    q, k, v = torch.randn(2, 37, 4), torch.randn(2, 37, 4), torch.randn(2, 37, 3)
    before = gma_teach.gma(q, k, v, means, variances, log_priors, causal=True, impl=impl, chunk_size=8)
    for position in (0, 5, 15, 16, 36):
        q2, k2, v2 = q.clone(), k.clone(), v.clone()
        for t in (q2, k2, v2):
            t[:, position + 1:] += 10 * torch.randn_like(t[:, position + 1:])
        after = gma_teach.gma(q2, k2, v2, means, variances, log_priors, causal=True, impl=impl, chunk_size=8)
        assert torch.equal(before[:, :position + 1], after[:, :position + 1]), (impl, position)
        if position < 36:
            assert not torch.equal(before[:, position + 1:], after[:, position + 1:]), "the test must see a change"


@pytest.mark.parametrize("impl, causal", [(i, False) for i in TORCH_IMPLS] + [(i, True) for i in CAUSAL_IMPLS])
def test_gradcheck_every_impl(impl, causal):
    means, variances, log_priors = (t.requires_grad_() for t in random_mixture(3, 2))
    q, k = (torch.randn(2, 6, 2, dtype=torch.float64, requires_grad=True) for _ in range(2))
    v = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)

    def run(q, k, v, means, variances, log_priors):
        return gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, impl=impl, chunk_size=4)

    assert torch.autograd.gradcheck(run, (q, k, v, means, variances, log_priors))


def test_recurrent_step_state_is_constant_size():
    gamma = random_responsibilities(2, 3, 40, 5)
    v = torch.randn(2, 3, 40, 4, dtype=torch.float64)
    state = gma_teach.GMAState.zeros((2, 3), 5, 4, dtype=torch.float64)
    sizes, outputs = [], []
    for t in range(40):
        out, state = mixing.recurrent_step(gamma[..., t, :], gamma[..., t, :], v[..., t, :], state)
        outputs.append(out)
        sizes.append(state.nbytes())
    assert len(set(sizes)) == 1 and state.position == 40
    causal = gma_teach.gma_from_responsibilities(gamma, gamma, v, causal=True, impl="naive")
    assert (torch.stack(outputs, -2) - causal).abs().max() <= 1e-12


def test_half_precision_is_mixed_in_float32():
    gamma_q, gamma_k = random_responsibilities(300, 8), random_responsibilities(300, 8)
    v = torch.randn(300, 4, dtype=torch.float64) * 1e3
    exact = gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v, causal=True, impl="naive")
    for dtype in (torch.float16, torch.bfloat16):
        out = gma_teach.gma_from_responsibilities(gamma_q.to(dtype), gamma_k.to(dtype), v.to(dtype), causal=True)
        assert out.dtype == dtype and torch.isfinite(out).all()
        # the error is the rounding of the inputs (about 1% of the values' scale in bfloat16), nothing more
        assert (out.double() - exact).abs().max() / v.abs().max() < 0.02


def test_bad_input_names_the_argument():
    gamma_q, gamma_k, v = random_responsibilities(7, 3), random_responsibilities(7, 3), torch.randn(7, 2)
    run = gma_teach.gma_from_responsibilities
    with pytest.raises(ValueError, match="same K"):
        run(gamma_q, random_responsibilities(7, 4), v)
    with pytest.raises(ValueError, match="one row per key"):
        run(gamma_q, gamma_k, torch.randn(8, 2))
    with pytest.raises(ValueError, match="eps must be > 0"):
        run(gamma_q, gamma_k, v, eps=0.0)
    with pytest.raises(ValueError, match="eps must be > 0"):
        run(gamma_q, gamma_k, v, eps=-1e-3)
    with pytest.raises(ValueError, match="causal=True needs as many queries as keys"):
        run(random_responsibilities(5, 3), gamma_k, v, causal=True)
    with pytest.raises(ValueError, match="impl must be"):
        run(gamma_q, gamma_k, v, impl="flash")
    with pytest.raises(ValueError, match="impl='linear' is the bidirectional"):
        run(gamma_q, gamma_k, v, causal=True, impl="linear")
    with pytest.raises(ValueError, match="gma_from_responsibilities"):
        run(gamma_q, gamma_k, v, impl="triton")
    with pytest.raises(ValueError, match="gamma_q must have at least 2"):
        run(gamma_q[0], gamma_k, v)
    with pytest.raises(ValueError, match="leading"):
        run(random_responsibilities(2, 7, 3), random_responsibilities(3, 7, 3), torch.randn(3, 7, 2))
    with pytest.raises(ValueError, match="chunk_size must be >= 1"):
        run(gamma_q, gamma_k, v, chunk_size=0)
    with pytest.raises(TypeError, match="causal must be a bool"):
        run(gamma_q, gamma_k, v, causal="yes")
    means, variances, log_priors = random_mixture(3, 4, dtype=torch.float32)
    with pytest.raises(ValueError, match="feature dim"):
        gma_teach.gma(torch.randn(7, 4), torch.randn(7, 5), v, means, variances, log_priors)
    with pytest.raises(ValueError, match="variances must be > 0"):
        gma_teach.gma(torch.randn(7, 4), torch.randn(7, 4), v, means, variances * 0, log_priors)
    with pytest.raises(ValueError, match="one row per key"):
        gma_teach.gma(torch.randn(7, 4), torch.randn(7, 4), torch.randn(6, 2), means, variances, log_priors)
