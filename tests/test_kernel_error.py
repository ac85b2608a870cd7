"""gma_teach.diagnostics.favor_approximation_error and performer_approximation_error: FAVOR+'s implied attention
weights against softmax's, checked against an independent float64 spec, shrinking with more features, growing with
the scale of q and k, causal, on a Performer's own projections, and refusing bad input by name."""
import math

import pytest
import torch
from torch import nn

from gma_teach import baselines, make_mixer
from gma_teach.diagnostics import favor_approximation_error, model_favor_errors, performer_approximation_error
from gma_teach.diagnostics._kernel_error import _query_rows

torch.set_num_threads(1)


def _qk(b, h, n, d, seed=0, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(b, h, n, d, generator=generator, dtype=torch.float64) for _ in range(2)]


def _projection(m, d, seed=1):
    generator = torch.Generator().manual_seed(seed)
    return baselines.orthogonal_random_features(m, d, dtype=torch.float64, generator=generator)


def _spec(q, k, w, causal, key_padding_mask=None):
    """The measures from phi written out by hand: exp(w.x' - |x'|^2/2)/sqrt(m) with x' = x d^(-1/4)."""
    b, h, n, d = q.shape
    m = w.shape[0]

    def phi(x):
        x = x * d ** -0.25
        return torch.exp(x @ w.T - 0.5 * (x * x).sum(-1, keepdim=True)) / math.sqrt(m)

    kernel = phi(q) @ phi(k).transpose(-1, -2)
    truth = torch.exp(q @ k.transpose(-1, -2) / math.sqrt(d))
    seen = torch.ones(b, h, n, n, dtype=torch.bool)
    if causal:
        seen = seen & torch.ones(n, n, dtype=torch.bool).tril()
    counted = torch.ones(b, h, n, dtype=torch.bool)
    if key_padding_mask is not None:
        seen = seen & key_padding_mask[:, None, None, :]
        counted = key_padding_mask[:, None, :].expand(b, h, n).clone()
    counted &= seen.any(-1)
    favor = torch.where(seen, kernel, 0.0)
    favor = favor / favor.sum(-1, keepdim=True)
    exact = torch.where(seen, truth, 0.0)
    exact = exact / exact.sum(-1, keepdim=True)
    tv, tv_uniform, h_exact, h_favor, uniform, errors = [], [], [], [], [], []
    for index in counted.nonzero().tolist():
        row = tuple(index)
        keys = seen[row]
        a, f = exact[row][keys], favor[row][keys]
        tv.append(0.5 * (f - a).abs().sum())
        tv_uniform.append(0.5 * (1 / int(keys.sum()) - a).abs().sum())
        h_exact.append(-(a * a.log()).sum())
        h_favor.append(-(f * f.log()).sum())
        uniform.append(math.log(int(keys.sum())))
        errors.append((kernel[row][keys] - truth[row][keys]).abs() / truth[row][keys])
    return {"weights_tv": float(torch.stack(tv).mean()), "uniform_tv": float(torch.stack(tv_uniform).mean()),
            "softmax_entropy": float(torch.stack(h_exact).mean()),
            "favor_entropy": float(torch.stack(h_favor).mean()), "uniform_entropy": sum(uniform) / len(uniform),
            "kernel_relative_error": float(torch.cat(errors).mean()), "n_features": m}


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_matches_a_hand_written_spec(causal, padded):
    q, k = _qk(2, 3, 7, 5)
    w = _projection(11, 5)
    mask = None
    if padded:
        mask = torch.ones(2, 7, dtype=torch.bool)
        mask[0, :2] = False  # left padding: causal queries 0 and 1 of row 0 see no real key
        mask[1, 5:] = False
    got = favor_approximation_error(q, k, w, causal=causal, key_padding_mask=mask)
    want = _spec(q, k, w, causal, mask)
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-9, abs=1e-12), name
    assert isinstance(got["n_features"], int)
    assert 0.0 < got["weights_tv"] < 1.0


def test_float32_inputs_are_compared_in_float64():
    q, k = _qk(1, 2, 9, 4, seed=3)
    w = _projection(6, 4)
    got = favor_approximation_error(q.float(), k.float(), w.float())
    want = favor_approximation_error(q.float().double(), k.float().double(), w.float().double())
    assert got == want


def test_more_features_shrink_the_error():
    q, k = _qk(1, 2, 32, 8, seed=0)
    few = favor_approximation_error(q, k, _projection(16, 8))
    many = favor_approximation_error(q, k, _projection(4096, 8))
    # seed 0: TV 0.354 at m = 16, 0.111 at m = 4096 (heavy-tailed estimates: slower than 1 / sqrt(m))
    assert many["weights_tv"] < 0.5 * few["weights_tv"]
    assert many["kernel_relative_error"] < 0.5 * few["kernel_relative_error"]
    assert abs(many["favor_entropy"] - many["softmax_entropy"]) < 0.05
    assert few["softmax_entropy"] == many["softmax_entropy"]  # the exact side does not depend on the features


def test_larger_queries_and_keys_grow_the_error():
    q, k = _qk(1, 2, 32, 8, seed=0)
    w = _projection(64, 8)
    for causal in (False, True):
        unit = favor_approximation_error(q, k, w, causal=causal)
        large = favor_approximation_error(4 * q, 4 * k, w, causal=causal)
        # seed 0, bidirectional: TV 0.27 -> 0.98, kernel error 0.47 -> 0.995
        assert large["weights_tv"] > unit["weights_tv"] + 0.3
        assert large["kernel_relative_error"] > unit["kernel_relative_error"] + 0.3
        assert large["softmax_entropy"] < unit["softmax_entropy"]  # sharper softmax ...
        assert large["favor_entropy"] - large["softmax_entropy"] > 0.2  # ... that FAVOR+ does not follow


def test_small_queries_and_keys_are_approximated_well():
    q, k = _qk(1, 2, 16, 8, seed=2, scale=0.1)
    got = favor_approximation_error(q, k, _projection(64, 8))
    assert got["weights_tv"] < 0.05 and got["kernel_relative_error"] < 0.1


def test_causal_rows_ignore_future_keys():
    q, k = _qk(2, 2, 9, 4, seed=4)
    w = _projection(8, 4)
    i = 4
    moved = k.clone()
    moved[..., i + 1:, :] += 3.0 * torch.randn(2, 2, 9 - i - 1, 4, generator=torch.Generator().manual_seed(9),
                                               dtype=torch.float64)
    before, after = _query_rows(q, k, w, causal=True), _query_rows(q, moved, w, causal=True)
    torch.testing.assert_close(after["tv"][..., :i + 1], before["tv"][..., :i + 1], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(after["favor_entropy"][..., :i + 1], before["favor_entropy"][..., :i + 1],
                               rtol=1e-12, atol=1e-14)
    assert not torch.allclose(after["tv"][..., i + 1:], before["tv"][..., i + 1:])
    bidirectional = _query_rows(q, moved, w, causal=False)
    assert not torch.allclose(bidirectional["tv"][..., :i + 1], _query_rows(q, k, w)["tv"][..., :i + 1])
    # the public means are the means of these rows
    assert favor_approximation_error(q, k, w, causal=True)["weights_tv"] == pytest.approx(float(before["tv"].mean()))


def test_pairs_with_no_shared_feature_are_taken_in_log_space():
    """Two tokens along +e1 and -e1 at |x'| = a' = 600 / 2^(1/4) (about 505), features w = +e1 and -e1: each token
    has one feature 2a' nats above the other, so the opposite pair's shifted product underflows in float64. Its
    exact log kernel is log(2 e^(-a'^2) / 2) = -a'^2 = q.k / sqrt(d): a relative error of 0, where the underflowed
    product would say 1. The like pair is off by about exp(2a' - 2a'^2): an error of 1."""
    x = torch.tensor([[600.0, 0.0], [-600.0, 0.0]], dtype=torch.float64)[None, None]
    w = torch.tensor([[1.0, 0.0], [-1.0, 0.0]], dtype=torch.float64)
    got = favor_approximation_error(x, x, w)
    assert got["kernel_relative_error"] == pytest.approx(0.5)  # pairs (0, 0), (1, 1): 1; (0, 1), (1, 0): 0
    assert favor_approximation_error(x, x, w, causal=True)["kernel_relative_error"] == pytest.approx(2 / 3)
    assert got["weights_tv"] == pytest.approx(0.0, abs=1e-12) and got["favor_entropy"] == pytest.approx(0.0, abs=1e-12)
    q, k = _qk(1, 1, 6, 4, seed=5, scale=40.0)  # features spanning hundreds of nats: finite, weights in [0, 1]
    got = favor_approximation_error(q, k, _projection(5, 4))
    assert all(math.isfinite(value) for value in got.values())
    assert 0.0 <= got["weights_tv"] <= 1.0 + 1e-12


@pytest.mark.parametrize("causal", [False, True])
def test_performer_reads_its_own_queries_and_keys(causal):
    torch.manual_seed(0)
    mixer = make_mixer("performer", 12, 2, causal=causal, n_features=16)
    x = torch.randn(2, 5, 12)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    q = mixer.q_proj(x).view(2, 5, 2, 6).transpose(1, 2).detach()
    k = mixer.k_proj(x).view(2, 5, 2, 6).transpose(1, 2).detach()
    for key_padding_mask in (None, mask):
        got = performer_approximation_error(mixer, x, key_padding_mask=key_padding_mask)
        want = favor_approximation_error(q, k, mixer.projection, causal=causal, key_padding_mask=key_padding_mask)
        assert got == want
        other = favor_approximation_error(q, k, mixer.projection, causal=not causal,
                                          key_padding_mask=key_padding_mask)
        assert got["weights_tv"] != other["weights_tv"]
    assert got["n_features"] == 16


def _raises(error, name, call):
    with pytest.raises(error, match=name):
        call()


def test_bad_inputs_are_refused_by_name():
    q, k = _qk(1, 2, 5, 4)
    w = _projection(6, 4)
    _raises(TypeError, "q", lambda: favor_approximation_error(q.tolist(), k, w))
    _raises(TypeError, "q", lambda: favor_approximation_error(q.long(), k, w))
    _raises(ValueError, "q must be", lambda: favor_approximation_error(q[0], k[0], w))
    _raises(TypeError, "k", lambda: favor_approximation_error(q, k.int(), w))
    _raises(ValueError, "k must have q's shape", lambda: favor_approximation_error(q, k[..., :3, :], w))
    _raises(ValueError, "projection", lambda: favor_approximation_error(q, k, w[:, :3]))
    _raises(ValueError, "projection", lambda: favor_approximation_error(q, k, w[0]))
    _raises(TypeError, "projection", lambda: favor_approximation_error(q, k, None))
    _raises(TypeError, "causal", lambda: favor_approximation_error(q, k, w, causal=1))
    _raises(TypeError, "key_padding_mask",
            lambda: favor_approximation_error(q, k, w, key_padding_mask=torch.ones(1, 5)))
    _raises(ValueError, "key_padding_mask",
            lambda: favor_approximation_error(q, k, w, key_padding_mask=torch.ones(1, 4, dtype=torch.bool)))
    _raises(ValueError, "key_padding_mask",
            lambda: favor_approximation_error(q, k, w, key_padding_mask=torch.zeros(1, 5, dtype=torch.bool)))
    alone = torch.tensor([[False, False, False, False, True]])  # causal: the one real query sees the one real key
    assert favor_approximation_error(q, k, w, causal=True, key_padding_mask=alone)["weights_tv"] == 0.0

    mixer = make_mixer("performer", 12, 2, n_features=4)
    softmax = make_mixer("softmax", 12, 2)
    _raises(TypeError, "mixer", lambda: performer_approximation_error(softmax, torch.randn(1, 3, 12)))
    _raises(ValueError, "x", lambda: performer_approximation_error(mixer, torch.randn(1, 3, 8)))
    _raises(TypeError, "x", lambda: performer_approximation_error(mixer, torch.randn(1, 3, 12, dtype=torch.float64)))
    _raises(ValueError, "key_padding_mask", lambda: performer_approximation_error(
        mixer, torch.randn(1, 3, 12), key_padding_mask=torch.ones(1, 4, dtype=torch.bool)))


def test_model_favor_errors_reads_every_performer_layer_on_its_own_input():
    torch.manual_seed(0)
    first, second = (make_mixer("performer", 12, 2, causal=True, n_features=16) for _ in range(2))
    model = nn.Sequential(nn.Embedding(10, 12), first, nn.Tanh(), second).train()
    tokens = torch.randint(0, 10, (3, 9))
    errors = model_favor_errors(model, tokens)
    assert [e["layer"] for e in errors] == [0, 1] and model.training  # the training mode is kept
    x0 = model[0](tokens)
    x1 = model[2](first(x0))
    for error, layer, x in ((errors[0], first, x0), (errors[1], second, x1)):
        expected = performer_approximation_error(layer, x.detach())
        assert {k: v for k, v in error.items() if k != "layer"} == pytest.approx(expected)
    assert errors[0] != pytest.approx(performer_approximation_error(second, x0.detach()))
    with pytest.raises(ValueError, match="PerformerAttention"):
        model_favor_errors(nn.Sequential(nn.Embedding(10, 12)), tokens)
