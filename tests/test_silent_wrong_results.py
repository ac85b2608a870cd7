"""Inputs a student plausibly gets wrong, which once gave a silent wrong result: each now gets a clear error naming
the argument, or a documented behaviour that is tested here."""
import pytest
import torch
from conftest import random_mixture, random_responsibilities

import gma_teach
from gma_teach import mixing
from gma_teach.baselines import make_mixer
from gma_teach.diagnostics import routing_metrics
from gma_teach.layer import routing_balance_loss
from gma_teach.models import EncoderClassifier

D_MODEL, N_HEADS = 8, 2
MASKED_MIXERS = ["gma", "softmax", "sdpa", "linear", "performer", "linformer", "uniform"]
PROJECTING_MIXERS = ["gma", "softmax", "sdpa", "linear", "performer", "linformer", "uniform"]
DECODING_MIXERS = ["gma", "softmax", "sdpa", "linear", "performer", "uniform", "none"]


def _mixer(name, causal=False):
    options = {"n_components": 3} if name == "gma" else {"max_seq_len": 16, "k": 5} if name == "linformer" else {}
    return make_mixer(name, D_MODEL, N_HEADS, causal=causal, **options)


# ------------------------------------------------------------------------------ the padding mask's convention
def _torch_convention_mask():
    """Right padding in torch.nn.MultiheadAttention's convention (True = padding): row 0 is full length, so its
    row is all False, as in every batch padded to its longest sequence."""
    lengths = torch.tensor([6, 4])
    return torch.arange(6)[None] >= lengths[:, None]


@pytest.mark.parametrize("name", MASKED_MIXERS)
def test_a_mask_in_torch_convention_is_refused_by_every_mixer(name):
    mixer = _mixer(name)
    x = torch.randn(2, 6, D_MODEL)
    flipped = _torch_convention_mask()
    with pytest.raises(ValueError, match=r"key_padding_mask marks real tokens with True \(the opposite of "
                                         r"torch.nn.MultiheadAttention\); row 0 has no True entry"):
        mixer(x, key_padding_mask=flipped)
    real = ~flipped
    out = mixer(x, key_padding_mask=real)  # the same mask in our convention runs
    assert out.shape == x.shape and torch.isfinite(out).all()


@pytest.mark.parametrize("name", MASKED_MIXERS)
def test_all_true_rows_and_padding_at_the_start_are_accepted(name):
    torch.manual_seed(3)
    mixer = _mixer(name).double()
    x = torch.randn(2, 6, D_MODEL, dtype=torch.float64)
    mask = torch.ones(2, 6, dtype=torch.bool)
    torch.testing.assert_close(mixer(x, key_padding_mask=mask), mixer(x), rtol=1e-10, atol=1e-12)
    mask[1, :2] = False  # left padding: legitimate
    assert torch.isfinite(mixer(x, key_padding_mask=mask)).all()


def test_gma_and_the_layer_helpers_refuse_a_row_without_a_real_token():
    means, variances, log_priors = random_mixture(4, 3, n_heads=2, dtype=torch.float32)
    q = torch.randn(2, 2, 5, 3)
    mask = torch.ones(2, 5, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match="key_padding_mask marks real tokens with True.*row 1 has no True entry"):
        gma_teach.gma(q, q, q, means, variances, log_priors, key_padding_mask=mask)
    layer = gma_teach.GaussianMixtureAttention(D_MODEL, N_HEADS, 3)
    with pytest.raises(ValueError, match="key_padding_mask marks real tokens with True.*row 1"):
        layer.init_means_from(torch.randn(2, 5, D_MODEL), key_padding_mask=mask)
    with pytest.raises(ValueError, match="mask marks real tokens with True.*row 1"):
        routing_balance_loss(torch.softmax(torch.randn(2, 2, 5, 3), -1), mask=mask)


def test_encoder_classifier_refuses_an_all_padding_row_with_mean_pooling():
    model = EncoderClassifier(10, 2, D_MODEL, 1, N_HEADS, max_seq_len=6, pooling="mean", mixer="gma",
                              mixer_options={"n_components": 3})
    tokens = torch.tensor([[3, 4, 5, 0, 0, 0], [0, 0, 0, 0, 0, 0]])
    with pytest.raises(ValueError, match=r"tokens row 1 is all padding \(pad_id=0\)"):
        model(tokens)
    cls_model = EncoderClassifier(10, 2, D_MODEL, 1, N_HEADS, max_seq_len=6, pooling="cls", mixer="gma",
                                  mixer_options={"n_components": 3})
    assert torch.isfinite(cls_model(tokens)).all()  # the CLS token is a real token in every row


# ------------------------------------------------------------------------- per-head mixture, missing head dim
def test_per_head_mixture_needs_the_head_dim_even_when_batch_equals_heads():
    n_heads = 3
    means, variances, log_priors = random_mixture(4, 5, n_heads=n_heads)
    k = torch.randn(n_heads, n_heads, 7, 5, dtype=torch.float64)  # (B=3, H=3, N, d)
    v = torch.randn(n_heads, n_heads, 7, 2, dtype=torch.float64)
    q_without_heads = torch.randn(n_heads, 7, 5, dtype=torch.float64)  # (B, N, d) with B == H
    with pytest.raises(ValueError,
                       match=r"with one mixture per head .* q, k and v must each be \(\.\.\., H=3, N, \*\)"):
        gma_teach.gma(q_without_heads, k, v, means, variances, log_priors)
    with pytest.raises(ValueError, match="the same number of dims"):
        gma_teach.gma(k, k, v[:, 0], means, variances, log_priors)
    shared = gma_teach.gma(q_without_heads.unsqueeze(-3).expand(-1, n_heads, -1, -1), k, v, means, variances,
                           log_priors)  # the head dim given explicitly: runs
    assert shared.shape == (n_heads, n_heads, 7, 2)


# ------------------------------------------------------------------------------ responsibilities, not logits
def test_logits_are_refused_by_gma_from_responsibilities():
    logits = torch.randn(2, 9, 4, dtype=torch.float64) * 3
    gamma = torch.softmax(logits, -1)
    v = torch.randn(2, 9, 3, dtype=torch.float64)
    with pytest.raises(ValueError, match="gamma_q must hold responsibilities.*minimum entry"):
        gma_teach.gma_from_responsibilities(logits, gamma, v)
    with pytest.raises(ValueError, match="gamma_k must hold responsibilities.*minimum entry"):
        gma_teach.gma_from_responsibilities(gamma, logits, v)
    with pytest.raises(ValueError, match=r"gamma_k must hold responsibilities: each row .* sum to 1 within 0.001"):
        gma_teach.gma_from_responsibilities(gamma, logits.exp(), v)  # non-negative but not normalized
    with pytest.raises(ValueError, match="gamma_q must hold responsibilities"):
        gma_teach.affinity(logits, gamma)


def test_responsibilities_pass_with_padded_zero_rows_and_half_precision_rounding():
    gamma = random_responsibilities(2, 9, 64)
    v = torch.randn(2, 9, 3, dtype=torch.float64)
    padded = gamma.clone()
    padded[:, 6:] = 0  # padded keys write nothing, as gma(..., return_responsibilities=True) returns them
    out = gma_teach.gma_from_responsibilities(gamma, padded, v)
    torch.testing.assert_close(out, gma_teach.gma_from_responsibilities(gamma, gamma[:, :6], v[:, :6]))
    for dtype in (torch.float16, torch.bfloat16):
        rounded = gamma.to(dtype)
        assert (rounded.double().sum(-1) - 1).abs().max() > mixing.distribution_tolerance(torch.float32) / 10
        assert torch.isfinite(gma_teach.gma_from_responsibilities(rounded, rounded, v.to(dtype))).all()
    assert mixing.distribution_tolerance(torch.bfloat16) > mixing.distribution_tolerance(torch.float32)


def test_linear_attention_features_need_not_sum_to_one():
    phi = torch.rand(1, 2, 8, 5, dtype=torch.float64) * 4  # positive features: rows sum to anything
    v = torch.randn(1, 2, 8, 3, dtype=torch.float64)
    for causal in (False, True):
        out = gma_teach.baselines.linear_attention(phi, phi, v, causal=causal)
        scores = phi @ phi.transpose(-1, -2)
        scores = scores.tril() if causal else scores
        torch.testing.assert_close(out, (scores @ v) / (scores.sum(-1, keepdim=True) + 1e-6))


# ----------------------------------------------------------------------------- half-precision decoding state
def test_half_precision_decoding_state_is_refused():
    layer = gma_teach.GaussianMixtureAttention(D_MODEL, N_HEADS, 3, causal=True)
    for dtype in (torch.float16, torch.bfloat16):
        with pytest.raises(ValueError, match=r"dtype must be torch.float32 or torch.float64 .*got torch\."):
            layer.init_state(2, dtype=dtype)
        half_state = gma_teach.GMAState.zeros((2, N_HEADS), 3, D_MODEL // N_HEADS, dtype=dtype)
        with pytest.raises(ValueError, match="state.memory.dtype must be torch.float32 or torch.float64"):
            layer.step(torch.randn(2, D_MODEL), half_state)
    assert layer.init_state(2, dtype=torch.float64).memory.dtype == torch.float64


@pytest.mark.parametrize("name", ["linear", "performer"])
def test_a_half_precision_kernel_mixer_decodes_into_a_float32_state(name):
    mixer = _mixer(name, causal=True).to(torch.bfloat16)
    state = mixer.init_state(2)
    assert state.memory.dtype == torch.float32
    y, state = mixer.step(torch.randn(2, D_MODEL, dtype=torch.bfloat16), state)
    assert y.dtype == torch.bfloat16 and state.memory.dtype == torch.float32


# ------------------------------------------------------------------------- NMI and normalized entropies in range
def test_nmi_and_normalized_entropies_stay_in_zero_one():
    # the category is a function of the assignment: I(Z;C) = H(C), which rounded to 1.0000000000000002 before
    assignments = [6, 0, 1, 2, 4, 2, 0, 5, 3, 2, 2, 5, 0, 7, 5, 1, 7, 0, 2, 2, 3, 2, 7, 7, 3, 2, 1, 2, 6, 3, 6]
    resp = torch.nn.functional.one_hot(torch.tensor(assignments), 8).double() * 0.9 + 0.1 / 8
    metrics = routing_metrics(resp, [f"c{a % 4}" for a in assignments])
    assert metrics["nmi_category"] == 1.0
    assert 0.0 <= metrics["nmi_arithmetic"] <= 1.0
    uniform = routing_metrics(torch.full((3, 5), 0.2, dtype=torch.float64), ["a", "b", "a"])
    assert uniform["usage_entropy"] == 1.0 and uniform["token_entropy"] == 1.0  # 1.0000000000000002 before


# ------------------------------------------------------------------------------ an input of the wrong dtype
@pytest.mark.parametrize("name", PROJECTING_MIXERS)
def test_float64_input_to_a_float32_mixer_names_x(name):
    mixer = _mixer(name)
    with pytest.raises(TypeError, match=r"x has dtype torch.float64 but the (layer|mixer)'s parameters are "
                                        r"torch.float32"):
        mixer(torch.randn(2, 6, D_MODEL, dtype=torch.float64))


@pytest.mark.parametrize("name", ["gma", "softmax", "sdpa", "linear", "performer", "uniform"])
def test_float64_token_to_a_float32_mixer_step_names_x_t(name):
    mixer = _mixer(name, causal=True)
    with pytest.raises(TypeError, match=r"x_t has dtype torch.float64 but the (layer|mixer)'s parameters are "
                                        r"torch.float32"):
        mixer.step(torch.randn(2, D_MODEL, dtype=torch.float64), mixer.init_state(2))


@pytest.mark.parametrize("name", PROJECTING_MIXERS)
def test_autocast_still_takes_an_input_of_another_dtype(name):
    torch.manual_seed(5)
    mixer = _mixer(name)
    x = torch.randn(2, 6, D_MODEL)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = mixer(x.to(torch.bfloat16))  # float32 weights, bfloat16 input: autocast casts
    assert torch.isfinite(out.float()).all()
    torch.testing.assert_close(out.float(), mixer(x), rtol=0.1, atol=0.1)


# --------------------------------------------------------------------------------------- a batch of zero
@pytest.mark.parametrize("name", DECODING_MIXERS)
def test_a_batch_of_zero_decodes_like_it_runs_forward(name):
    mixer = _mixer(name, causal=True)
    assert mixer(torch.randn(0, 5, D_MODEL)).shape == (0, 5, D_MODEL)
    state = mixer.init_state(0)
    y, state = mixer.step(torch.randn(0, D_MODEL), state)
    assert y.shape == (0, D_MODEL)
    with pytest.raises(ValueError, match="batch_size must be >= 0, got -1"):
        mixer.init_state(-1)


# ------------------------------------------------------------------------------ the naive form's memory
def test_naive_form_names_the_memory_it_would_need_before_allocating():
    n_tokens = 100_000
    # expanded views of one row: the inputs take a few bytes, the (1, 2, N, N) affinity would take 80 GB
    gamma = torch.full((1, 1, 1, 4), 0.25).expand(1, 2, n_tokens, 4)
    v = torch.zeros(1, 1, 1, 3).expand(1, 2, n_tokens, 3)
    needed = 2 * n_tokens * n_tokens * 4
    with pytest.raises(ValueError, match=rf"\(1, 2, {n_tokens}, {n_tokens}\) affinity in torch.float32: "
                                         rf"{needed / 2**30:.3g} GiB, above max_naive_bytes=.*impl='chunked'"):
        gma_teach.gma_from_responsibilities(gamma, gamma, v, impl="naive")
    with pytest.raises(ValueError, match="GiB, above max_naive_bytes"):
        gma_teach.affinity(gamma, gamma)
    means, variances, log_priors = random_mixture(4, 2, n_heads=2, dtype=torch.float32)
    q = torch.zeros(1, 1, 1, 2).expand(1, 2, n_tokens, 2)
    with pytest.raises(ValueError, match="impl='naive' would materialize"):
        gma_teach.gma(q, q, v, means, variances, log_priors, causal=True, impl="naive")


def test_max_naive_bytes_is_a_limit_that_a_call_can_move():
    gamma = random_responsibilities(1, 2, 40, 3)
    v = torch.randn(1, 2, 40, 3, dtype=torch.float64)
    needed = 2 * 40 * 40 * 8
    with pytest.raises(ValueError, match="impl='naive' would materialize"):
        gma_teach.gma_from_responsibilities(gamma, gamma, v, impl="naive", max_naive_bytes=needed - 1)
    out = gma_teach.gma_from_responsibilities(gamma, gamma, v, impl="naive", max_naive_bytes=needed)
    torch.testing.assert_close(out, gma_teach.gma_from_responsibilities(gamma, gamma, v, impl="linear"))
    assert mixing.NAIVE_MAX_BYTES == 8 * 2**30
