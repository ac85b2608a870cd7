"""Edge cases of the math and the layer: mixed precision, empty sequences, bad eps, tiny variances, the caller's
argument names, float32 cancellation in the GEMM-form logits, the padding mask through gma(), one state size."""
import math

import pytest
import torch
from conftest import random_mixture

import gma_teach
from gma_teach import baselines, gmm, kernels, mamba, mixing

TORCH_IMPLS = ("naive", "linear", "cumsum", "chunked", "recurrent")


def _routing(b=2, h=3, n=11, d=4, d_v=5, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, n, width, generator=generator, dtype=dtype) for width in (d, d, d_v)]


# ------------------------------------------------------------------------------------------------ mixed precision
@pytest.mark.parametrize("causal", [False, True])
def test_a_float64_mixture_takes_float32_inputs_and_returns_their_dtype(causal):
    q, k, v = _routing()
    mixture = random_mixture(6, 4, n_heads=3)  # float64, as fit_em on float64 data gives
    reference = gma_teach.gma(q.double(), k.double(), v.double(), *mixture, causal=causal, impl="naive")
    for impl in TORCH_IMPLS:
        if impl == "linear" and causal:
            continue
        out = gma_teach.gma(q, k, v, *mixture, causal=causal, impl=impl, chunk_size=4)
        assert out.dtype == torch.float32, impl
        torch.testing.assert_close(out.double(), reference, rtol=1e-5, atol=1e-6)
    gamma = gma_teach.responsibilities(q, *mixture)
    assert gamma.dtype == torch.float64
    torch.testing.assert_close(gamma, gmm.responsibilities_direct(q.double(), *mixture), rtol=1e-10, atol=1e-12)


def test_float32_mixture_and_float64_inputs_compute_in_float64():
    q, k, v = (t.double() for t in _routing())
    mixture = [t.float() for t in random_mixture(6, 4, n_heads=3)]
    out = gma_teach.gma(q, k, v, *mixture, impl="linear")
    assert out.dtype == torch.float64
    reference = gma_teach.gma(q, k, v, *(t.double() for t in mixture), impl="naive")
    torch.testing.assert_close(out, reference, rtol=1e-12, atol=1e-12)


# -------------------------------------------------------------------------------------------------- empty input
@pytest.mark.parametrize("causal", [False, True])
def test_every_form_returns_an_empty_result_for_zero_tokens(causal):
    gamma = torch.softmax(torch.randn(2, 3, 0, 4), -1)
    v = torch.randn(2, 3, 0, 5)
    for impl in TORCH_IMPLS:
        if impl == "linear" and causal:
            continue
        out = gma_teach.gma_from_responsibilities(gamma, gamma, v, causal=causal, impl=impl)
        assert out.shape == (2, 3, 0, 5), impl
    q, k, v = _routing(n=0)
    assert gma_teach.gma(q, k, v, *random_mixture(6, 4, n_heads=3), causal=causal, impl="recurrent").shape == \
        (2, 3, 0, 5)


@pytest.mark.skipif(not kernels.is_available(torch.device("cpu")), reason="the Triton interpreter is not installed")
def test_the_kernel_path_returns_an_empty_result_for_zero_tokens():
    q, k, v = _routing(n=0)
    mixture = [t.float() for t in random_mixture(6, 4, n_heads=3)]
    assert gma_teach.gma(q, k, v, *mixture, causal=True, impl="triton").shape == (2, 3, 0, 5)


# --------------------------------------------------------------------------------------------------- bad eps
@pytest.mark.parametrize("eps", [math.inf, math.nan, -math.inf])
def test_non_finite_eps_is_refused_everywhere(eps):
    q, k, v = _routing()
    gamma = torch.softmax(q, -1)
    mixture = random_mixture(6, 4, n_heads=3, dtype=torch.float32)
    calls = [
        lambda: gma_teach.gma(q, k, v, *mixture, eps=eps),
        lambda: gma_teach.gma_from_responsibilities(gamma, gamma, v, eps=eps),
        lambda: gma_teach.affinity(gamma, gamma, eps=eps),
        lambda: gma_teach.GaussianMixtureAttention(8, 2, 3, eps=eps),
        lambda: gma_teach.make_mixer("linear", 8, 2, eps=eps),
        lambda: gma_teach.make_mixer("performer", 8, 2, eps=eps),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="eps must be"):
            call()


# ----------------------------------------------------------------------------------------------- tiny variances
@pytest.mark.parametrize("smallest", [1e-45, 0.0, -1.0, math.nan])
def test_subnormal_zero_negative_or_nan_variances_are_refused(smallest):
    q, k, v = _routing()
    means, variances, log_priors = random_mixture(6, 4, n_heads=3, dtype=torch.float32)
    variances = variances.clone()
    variances[1, 2, 3] = smallest
    with pytest.raises(ValueError, match="variances must be > 0 and normal"):
        gma_teach.responsibilities(q, means, variances, log_priors)
    with pytest.raises(ValueError, match="variances must be > 0 and normal"):
        gma_teach.gma(q, k, v, means, variances, log_priors)


def test_the_smallest_normal_variance_is_accepted_and_gives_finite_responsibilities():
    q, _, _ = _routing()
    means, variances, log_priors = random_mixture(6, 4, n_heads=3, dtype=torch.float32)
    variances = variances.clone()
    variances[0, 0, 0] = torch.finfo(torch.float32).tiny
    assert torch.isfinite(gma_teach.responsibilities(q, means, variances, log_priors)).all()


# ------------------------------------------------------------------------------------------- the caller's names
def test_gma_errors_name_q_k_and_v():
    q, k, v = _routing()
    mixture = random_mixture(6, 4, n_heads=3, dtype=torch.float32)
    with pytest.raises(ValueError, match="q has feature dim 3"):
        gma_teach.gma(q[..., :3], k, v, *mixture)
    with pytest.raises(ValueError, match="k has feature dim 3"):
        gma_teach.gma(q, k[..., :3], v, *mixture)
    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        gma_teach.gma(q.tolist(), k, v, *mixture)
    with pytest.raises(TypeError, match="k must be a floating-point tensor"):
        gma_teach.gma(q, k.long(), v, *mixture)
    with pytest.raises(ValueError, match=r"q \(2, 3, 11, 4\), k \(1, 3, 11, 4\), v \(3, 3, 11, 5\)"):
        gma_teach.gma(q, k[:1], torch.randn(3, 3, 11, 5), *mixture)
    with pytest.raises(ValueError, match=r"N_q=11 \(q"):
        gma_teach.gma(q, k[..., :5, :], v[..., :5, :], *mixture, causal=True)


@pytest.mark.parametrize("call, error, message", [
    (lambda: gma_teach.GaussianMixtureAttention(8, 2, 3.0), TypeError, "n_components must be an int"),
    (lambda: gma_teach.GaussianMixtureAttention(8, 2, 0), ValueError, "n_components must be >= 1"),
    (lambda: gma_teach.GaussianMixtureAttention(8, 2, 3, causal="yes"), TypeError, "causal must be a bool"),
    (lambda: gma_teach.GaussianMixtureAttention(8, 2, 3, impl=3), TypeError, "impl must be a str"),
    (lambda: gma_teach.make_mixer("performer", 8, 2, n_features=2.5), TypeError, "n_features must be an int"),
    (lambda: gma_teach.make_mixer("linformer", 8, 2, max_seq_len=8, k=0), ValueError, "k must be >= 1"),
    (lambda: gma_teach.make_mixer("mamba", 8, 2, expand=True), TypeError, "expand must be an int"),
    (lambda: gma_teach.make_mixer("softmax", 8, 2, causal=1), TypeError, "causal must be a bool"),
    (lambda: gma_teach.make_mixer("uniform", 8, 2)(torch.randn(2, 3, 8), key_padding_mask=torch.ones(2, 3)),
     TypeError, "key_padding_mask must be a bool tensor"),
    (lambda: gmm.fit_em(torch.randn(9, 2), 2, seed=-1), ValueError, "seed must be >= 0"),
])
def test_one_rule_type_errors_for_types_value_errors_for_values(call, error, message):
    with pytest.raises(error, match=message):
        call()


# ------------------------------------------------------------------------------------------- float32 cancellation
def _far_means_case(seed=0):
    """Means near 1000 +- 2 with unit variances, tokens among them."""
    generator = torch.Generator().manual_seed(seed)
    means = 1000 + 2 * torch.randn(6, 8, generator=generator)
    x = 1000 + 2 * torch.randn(300, 8, generator=generator)
    return x, means, torch.ones(6, 8), torch.log_softmax(torch.randn(6, generator=generator), -1)


def _overlapping_case(seed=0):
    """Overlapping components with variances 1e-6 around a common centre, tokens among them."""
    generator = torch.Generator().manual_seed(seed)
    centre = torch.randn(8, generator=generator)
    means = centre + 1e-3 * torch.randn(6, 8, generator=generator)
    x = centre + 1e-3 * torch.randn(300, 8, generator=generator)
    return x, means, torch.full((6, 8), 1e-6), torch.log_softmax(torch.randn(6, generator=generator), -1)


def _plain_float32_gemm_responsibilities(x, means, variances, log_priors):
    """The GEMM form evaluated in float32 with no guard (what the package did before the guard)."""
    weight, constant = gmm.gemm_coefficients(means, variances, log_priors)
    return torch.softmax(torch.cat([x * x, x], -1) @ weight.T + constant, dim=-1)


@pytest.mark.parametrize("case", [_far_means_case, _overlapping_case])
def test_cancelling_float32_logits_are_detected_and_computed_accurately(case):
    x, means, variances, log_priors = case()
    assert gmm.gemm_cancellation_bound(x, means, variances) > gmm.GEMM_LOGIT_TOLERANCE
    reference = gmm.responsibilities_direct(x.double(), means.double(), variances.double(), log_priors.double())
    unguarded = _plain_float32_gemm_responsibilities(x, means, variances, log_priors)
    assert (unguarded.double() - reference).abs().max() > 1e-3  # the failure the guard exists for
    got = gma_teach.responsibilities(x, means, variances, log_priors)
    assert got.dtype == torch.float32
    assert (got.double() - reference).abs().max() < 1e-5
    v = torch.randn(300, 5)
    out = gma_teach.gma(x, x, v, means, variances, log_priors, causal=True)
    expected = gma_teach.gma_from_responsibilities(reference, reference, v.double(), causal=True, impl="naive")
    assert (out.double() - expected).abs().max() < 1e-4


def test_the_guard_does_not_trip_on_ordinary_routing_vectors():
    layer = gma_teach.GaussianMixtureAttention(64, 4, 64, causal=True)
    x = torch.nn.functional.layer_norm(torch.randn(4, 256, 64), (64,))
    q, _, _ = layer._project(x, None)
    mixture = layer.mixture
    bound = gmm.gemm_cancellation_bound(q, mixture.means, mixture.variances)
    assert 0 < bound < gmm.GEMM_LOGIT_TOLERANCE / 10
    ordinary = random_mixture(16, 8, dtype=torch.float32)
    assert gmm.gemm_cancellation_bound(torch.randn(500, 8), *ordinary[:2]) < gmm.GEMM_LOGIT_TOLERANCE / 10


def test_the_bound_bounds_the_measured_float32_error():
    for case in (_far_means_case, _overlapping_case):
        x, means, variances, log_priors = case(seed=1)
        weight, constant = gmm.gemm_coefficients(means, variances, log_priors)
        float32_logits = torch.cat([x * x, x], -1) @ weight.T + constant
        exact = gmm.direct_log_joint(x.double(), means.double(), variances.double(), log_priors.double())
        error = (float32_logits.double() - exact).abs().max().item()
        assert error <= 4 * gmm.gemm_cancellation_bound(x, means, variances)


# --------------------------------------------------------------------------------------- padding mask in gma()
@pytest.mark.parametrize("causal", [False, True])
def test_gma_key_padding_mask_hides_padded_keys(causal):
    q, k, v = _routing(n=9)
    mixture = random_mixture(6, 4, n_heads=3, dtype=torch.float32)
    mask = torch.ones(2, 9, dtype=torch.bool)
    mask[:, 6:] = False
    padded_out = gma_teach.gma(q, k, v, *mixture, causal=causal, key_padding_mask=mask)
    trimmed_out = gma_teach.gma(q[..., :6, :], k[..., :6, :], v[..., :6, :], *mixture, causal=causal)
    torch.testing.assert_close(padded_out[..., :6, :], trimmed_out, rtol=1e-5, atol=1e-6)
    _, gamma_q, gamma_k = gma_teach.gma(q, k, v, *mixture, causal=causal, key_padding_mask=mask,
                                        return_responsibilities=True)
    assert gamma_q.shape == (2, 3, 9, 6) and (gamma_k[..., 6:, :] == 0).all()
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, N_k\) = \(2, 9\)"):
        gma_teach.gma(q, k, v, *mixture, key_padding_mask=mask[:, :5])
    with pytest.raises(ValueError, match="impl='triton' takes no key_padding_mask"):
        gma_teach.gma(q, k, v, *mixture, key_padding_mask=mask, impl="triton")


# -------------------------------------------------------------------------------------------- one state size
def test_every_decoding_state_counts_its_bytes_the_same_way():
    states = [
        mixing.GMAState.zeros((2, 3), 4, 5),
        baselines.KVCache(torch.zeros(2, 3, 7, 4), torch.zeros(2, 3, 7, 4, dtype=torch.float64)),
        baselines.LinearAttentionState.zeros((2, 3), 6, 4),
        baselines.UniformAverageState(torch.zeros(2, 8), 3),
        baselines.EmptyState(),
        mamba.MambaState(torch.zeros(2, 16, 3), torch.zeros(2, 16, 4)),
    ]
    expected = [(2 * 3 * 4 * 5 + 2 * 3 * 4) * 4, 2 * 3 * 7 * 4 * (4 + 8), (2 * 3 * 6 * 4 + 2 * 3 * 6) * 4,
                2 * 8 * 4, 0, (2 * 16 * 3 + 2 * 16 * 4) * 4]
    for state, size in zip(states, expected):
        assert isinstance(state, mixing.DecodingState)
        assert type(state).nbytes is mixing.DecodingState.nbytes
        assert state.nbytes() == size, type(state).__name__
