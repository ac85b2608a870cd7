"""Performer's FAVOR+ (gma_teach.baselines.favor_attention): unbiased features, errors within what FAVOR+ predicts
for its feature count, the stabilized forms against a float64 spec, a normalizer far above eps at the head widths
the studies use (float32 and bfloat16), gradients, causality and decoding."""
import math

import pytest
import torch

from gma_teach import baselines, make_mixer

DRAWS = 8


def _qkv(d, n=31, scale=0.5, seed=0, b=2, h=2):
    generator = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(b, h, n, d, generator=generator, dtype=torch.float64) for _ in range(3)]


def _projection(m, d, seed):
    generator = torch.Generator().manual_seed(seed)
    return baselines.orthogonal_random_features(m, d, dtype=torch.float64, generator=generator)


def _entry_mse(q, k, m):
    """FAVOR+'s relative mean squared error of each kernel entry with ``m`` i.i.d. positive features (Performer,
    Lemma 2): ``(exp(|x + y|^2) - 1) / m`` with ``x = q / d^(1/4)``, ``y = k / d^(1/4)``; orthogonal features do
    no worse (Theorem 2). ``(..., N_q, N_k)``."""
    d = q.shape[-1]
    x, y = q / d**0.25, k / d**0.25
    return torch.expm1(((x[..., :, None, :] + y[..., None, :, :]) ** 2).sum(-1)) / m


def _softmax_weights(q, k, causal):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(~torch.ones(scores.shape[-2:], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1)


def _predicted_output_mse(q, k, v, m, causal):
    """The delta-method error of the output ``sum_ij w_ij^2 mse_ij |v_j - o_i|^2`` that independent kernel errors of
    :func:`_entry_mse` would give (the sum over all queries, heads and rows)."""
    weights = _softmax_weights(q, k, causal)
    output = weights @ v
    spread = ((v[..., None, :, :] - output[..., :, None, :]) ** 2).sum(-1)
    return float((weights**2 * _entry_mse(q, k, m) * spread).sum())


def _spec(q, k, v, projection, causal, eps, mask=None):
    """The stabilized estimate written out query by query in float64: the kernel terms ``exp(l(q_i) + l(k_j))`` of
    the keys query ``i`` may see, divided by ``exp(c_i)``, the largest feature's sum over those keys."""
    m = projection.shape[0]
    query_logits, key_logits = baselines.favor_logits(q, projection), baselines.favor_logits(k, projection)
    out = torch.zeros_like(v)
    for i in range(q.shape[-2]):
        visible = torch.zeros(k.shape[-2], dtype=torch.bool)
        visible[: i + 1 if causal else k.shape[-2]] = True
        keys = key_logits.masked_fill(~visible[:, None], float("-inf"))
        if mask is not None:
            keys = keys.masked_fill(~mask[:, None, :, None], float("-inf"))
        terms = query_logits[..., i, None, :] + keys  # (..., N_k, m)
        share = torch.logsumexp(terms, dim=-2).amax(-1)[..., None, None].clamp_min(torch.finfo(terms.dtype).min)
        weights = torch.exp(terms - share).sum(-1) / m  # (..., N_k)
        out[..., i, :] = (weights[..., None] * v).sum(-2) / (weights.sum(-1, keepdim=True) + eps)
    return out


def test_orthogonal_features_are_unbiased():
    """Every row is marginally N(0, I): zero mean, identity second moment, whatever QR's sign convention."""
    m, d = 8192, 8
    projection = _projection(m, d, 0)
    assert float(projection.mean(0).abs().max()) < 4 / math.sqrt(m)
    torch.testing.assert_close(projection.T @ projection / m, torch.eye(d, dtype=torch.float64), atol=0.08, rtol=0)
    q, k, _ = _qkv(8, n=40)
    exact = torch.exp(q @ k.transpose(-1, -2) / math.sqrt(8))
    estimate = torch.exp(baselines.favor_logits(q, projection)) @ torch.exp(
        baselines.favor_logits(k, projection)).transpose(-1, -2) / m
    assert abs(float((estimate / exact).mean()) - 1) < 0.01


@pytest.mark.parametrize("d", [16, 32, 64])
def test_kernel_error_within_what_favor_predicts(d):
    q, k, _ = _qkv(d, seed=d)
    exact = torch.exp(q @ k.transpose(-1, -2) / math.sqrt(d))
    m = 256
    errors = []
    for seed in range(DRAWS):
        projection = _projection(m, d, 100 + seed)
        estimate = torch.exp(baselines.favor_logits(q, projection)) @ torch.exp(
            baselines.favor_logits(k, projection)).transpose(-1, -2) / m
        errors.append(float((((estimate - exact) / exact) ** 2).mean()))
    measured, predicted = sum(errors) / DRAWS, float(_entry_mse(q, k, m).mean())
    assert measured <= 1.25 * predicted, (measured, predicted)  # 1.25: the sampling error of 8 draws


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", [16, 32, 64])
def test_output_against_softmax_within_what_favor_predicts(d, causal):
    """The mixer's attention against exact softmax attention with the same scale, 1/sqrt(d): its mean squared error
    is at most the delta-method prediction for m features, and falls with m."""
    q, k, v = _qkv(d, seed=d)
    exact = baselines.softmax_attention(q, k, v, causal=causal)
    mse = {}
    for m in (256, 1024):
        errors = [float(((baselines.favor_attention(q, k, v, _projection(m, d, 100 + s), causal=causal,
                                                     chunk_size=8) - exact) ** 2).sum()) for s in range(DRAWS)]
        mse[m] = sum(errors) / DRAWS
        assert mse[m] <= _predicted_output_mse(q, k, v, m, causal), (m, mse[m])
    assert mse[1024] < 0.5 * mse[256]  # about 1/m: 0.25 expected


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk_size", [1, 4, 64])
def test_favor_attention_equals_its_float64_spec(causal, chunk_size):
    q, k, v = _qkv(5, n=13, scale=1.5, seed=3)
    projection = _projection(7, 5, 1)
    got = baselines.favor_attention(q, k, v, projection, causal=causal, chunk_size=chunk_size, eps=1e-6)
    torch.testing.assert_close(got, _spec(q, k, v, projection, causal, 1e-6), rtol=1e-10, atol=1e-12)
    mask = torch.ones(2, 13, dtype=torch.bool)
    mask[0, 9:] = False
    mask[1, :2] = False
    got = baselines.favor_attention(q, k, v, projection, causal=causal, chunk_size=chunk_size, key_padding_mask=mask)
    torch.testing.assert_close(got, _spec(q, k, v, projection, causal, 1e-6, mask), rtol=1e-10, atol=1e-12)


def test_keys_far_apart_in_scale_neither_overflow_nor_vanish():
    """A key a hundred orders of magnitude above the others (in feature terms) is read by the queries after it,
    and the queries before it still read theirs: every factor is exp of a non-positive number."""
    q, k, v = _qkv(8, n=20, seed=4)
    k[..., 11, :] *= 12
    projection = _projection(16, 8, 2)
    for causal in (False, True):
        got = baselines.favor_attention(q, k, v, projection, causal=causal, chunk_size=4)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(got, _spec(q, k, v, projection, causal, 1e-6), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("d_head", [16, 32, 64])
@pytest.mark.parametrize("activation_scale", [1.0, 4.0])
@pytest.mark.parametrize("causal", [False, True])
def test_the_normalizer_stays_far_above_eps(d_head, dtype, activation_scale, causal):
    """At the head widths of the studies, on unit-variance input and on activations four times larger (trained
    layers grow), in float32 and bfloat16: with values all 1 each output is ``normalizer / (normalizer + eps)``, and
    it is above ``1 - 1e-3`` everywhere, so every normalizer exceeds eps a thousandfold and eps decides nothing."""
    torch.manual_seed(0)
    mixer = make_mixer("performer", 4 * d_head, 4, causal=causal, n_features=64).to(dtype)
    x = activation_scale * torch.randn(2, 128, 4 * d_head, dtype=dtype)
    q, k = mixer._heads(mixer.q_proj, x), mixer._heads(mixer.k_proj, x)
    ones = torch.ones(*q.shape[:-1], 1)
    share = baselines.favor_attention(q, k, ones, mixer.projection, causal=causal, eps=mixer.eps)
    assert float(share.min()) > 1 - 1e-3
    y = mixer(x)
    assert torch.isfinite(y).all() and float(y.float().std(dim=0).mean()) > 1e-2


def test_bfloat16_follows_float32():
    torch.manual_seed(1)
    mixer = make_mixer("performer", 64, 4, causal=True, n_features=64)
    x = torch.randn(2, 64, 64)
    expected = mixer(x)
    got = mixer.to(torch.bfloat16)(x.to(torch.bfloat16)).float()
    assert float((got - expected).abs().max()) < 0.05 * float(expected.abs().max())


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck(causal):
    q, k, v = (t.requires_grad_() for t in _qkv(4, n=9, b=1, h=2, seed=5))
    projection = _projection(6, 4, 3)
    assert torch.autograd.gradcheck(
        lambda q, k, v: baselines.favor_attention(q, k, v, projection, causal=causal, chunk_size=4), (q, k, v))


def test_decoding_keeps_the_running_stabilizer():
    """Step-by-step decoding rescales its memory when a key raises the running maximum and ends on the forward's
    numbers; the state holds one stabilizer a head beside the memory and normalizer."""
    torch.manual_seed(2)
    mixer = make_mixer("performer", 24, 3, causal=True, n_features=8, chunk_size=4).double()
    x = torch.randn(2, 11, 24, dtype=torch.float64)
    x[:, 6] *= 6  # a key that raises the maximum
    state, outputs = mixer.init_state(2), []
    for t in range(x.shape[1]):
        y, state = mixer.step(x[:, t], state)
        outputs.append(y)
    torch.testing.assert_close(torch.stack(outputs, 1), mixer(x), rtol=1e-9, atol=1e-11)
    assert state.stabilizer.shape == (2, 3) and state.nbytes() == 2 * 3 * (8 * 8 + 8 + 1) * 8
