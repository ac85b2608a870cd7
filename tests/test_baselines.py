"""Pinning tests for the comparators of chapter 8: each fast form against an independent slow spec in float64."""
import math

import pytest
import torch

import gma_teach
from gma_teach import baselines
from gma_teach.baselines import MIXER_NAMES, make_mixer

D_MODEL, N_HEADS = 24, 3
CAUSAL_OPTIONS = {
    "gma": {"n_components": 5, "chunk_size": 4},
    "softmax": {}, "sdpa": {},
    "linear": {"chunk_size": 4},
    "performer": {"n_features": 16, "chunk_size": 4},
    "mamba": {"chunk_size": 4, "d_state": 4},
    "uniform": {}, "none": {},
}
CAUSAL_ONLY = {"decay_linear", "decay_gma"}  # refuse causal=False (tests/test_forgetting.py)


def _inputs(b=2, n=13, d=D_MODEL, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, d, generator=generator, dtype=torch.float64)


def _heads(b=2, h=3, n=11, d=5, seed=0, scale=1.0):
    generator = torch.Generator().manual_seed(seed)
    return [scale * torch.randn(b, h, n, d, generator=generator, dtype=torch.float64) for _ in range(3)]


def _slow_softmax(q, k, v, causal):
    """Row by row with Python loops over queries: the definition of attention."""
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
    for i in range(q.shape[-2]):
        last = i + 1 if causal else k.shape[-2]
        weights = torch.softmax((k[..., :last, :] @ q[..., i, :, None])[..., 0] / math.sqrt(q.shape[-1]), dim=-1)
        out[..., i, :] = (weights[..., None] * v[..., :last, :]).sum(-2)
    return out


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_and_eager_softmax_equal_the_definition(causal):
    torch.manual_seed(1)
    x = _inputs()
    eager = make_mixer("softmax", D_MODEL, N_HEADS, causal=causal).double()
    fused = make_mixer("sdpa", D_MODEL, N_HEADS, causal=causal).double()
    fused.load_state_dict(eager.state_dict())
    torch.testing.assert_close(fused(x), eager(x), rtol=1e-10, atol=1e-12)
    q, k, v = _heads()
    torch.testing.assert_close(baselines.softmax_attention(q, k, v, causal=causal), _slow_softmax(q, k, v, causal),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("chunk_size", [1, 4, 64])
def test_causal_linear_attention_equals_its_masked_matrix_form(chunk_size):
    q, k, v = _heads(n=13)
    phi_q, phi_k = baselines.elu_feature_map(q), baselines.elu_feature_map(k)
    scores = (phi_q @ phi_k.transpose(-1, -2)).tril()
    expected = (scores @ v) / (scores.sum(-1, keepdim=True) + 1e-6)
    got = baselines.linear_attention(phi_q, phi_k, v, causal=True, eps=1e-6, chunk_size=chunk_size)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)
    scores = phi_q @ phi_k.transpose(-1, -2)
    torch.testing.assert_close(baselines.linear_attention(phi_q, phi_k, v),
                               (scores @ v) / (scores.sum(-1, keepdim=True) + 1e-6), rtol=1e-10, atol=1e-12)


def test_performer_error_against_softmax_falls_with_n_features():
    q, k, v = _heads(b=1, h=2, n=32, d=8, scale=0.5)
    exact = baselines.softmax_attention(q, k, v)
    errors = []
    for n_features in (8, 64, 512):
        per_seed = []
        for seed in range(8):
            projection = baselines.orthogonal_random_features(n_features, 8, dtype=torch.float64,
                                                              generator=torch.Generator().manual_seed(seed))
            phi_q = baselines.favor_features(q, projection, is_query=True)
            phi_k = baselines.favor_features(k, projection, is_query=False)
            approx = baselines.linear_attention(phi_q, phi_k, v, eps=1e-12)
            per_seed.append(float((approx - exact).norm() / exact.norm()))
        errors.append(sum(per_seed) / len(per_seed))
    assert errors[0] > 1.5 * errors[1] > 2.25 * errors[2], errors


def test_orthogonal_features_are_orthogonal_within_a_block():
    projection = baselines.orthogonal_random_features(6, 6, dtype=torch.float64,
                                                      generator=torch.Generator().manual_seed(0))
    directions = projection / projection.norm(dim=-1, keepdim=True)
    torch.testing.assert_close(directions @ directions.T, torch.eye(6, dtype=torch.float64))


@pytest.mark.parametrize("name", sorted(CAUSAL_OPTIONS))
def test_causal_mixers_leak_nothing_from_the_future(name):
    torch.manual_seed(4)
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, **CAUSAL_OPTIONS[name]).double()
    x = _inputs(n=15)
    for cut in (1, 7, 14):
        changed = x.clone()
        changed[:, cut:] = torch.randn_like(changed[:, cut:]) * 3
        assert torch.equal(mixer(changed)[:, :cut], mixer(x)[:, :cut]), f"{name} leaks at cut {cut}"


@pytest.mark.parametrize("name", sorted(CAUSAL_OPTIONS))
def test_step_by_step_decoding_equals_the_causal_forward(name):
    torch.manual_seed(5)
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, **CAUSAL_OPTIONS[name]).double()
    x = _inputs(n=9)
    state, outputs = mixer.init_state(2), []
    for t in range(x.shape[1]):
        y_t, state = mixer.step(x[:, t], state)
        outputs.append(y_t)
    torch.testing.assert_close(torch.stack(outputs, 1), mixer(x), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name", ["softmax", "sdpa", "linear", "performer", "linformer", "uniform", "none"])
def test_key_padding_mask_makes_padding_invisible(name):
    torch.manual_seed(6)
    options = {"max_seq_len": 20, "k": 7} if name == "linformer" else {}
    mixer = make_mixer(name, D_MODEL, N_HEADS, **options).double()
    x = _inputs(b=1, n=10)
    padded = torch.cat([x, torch.randn(1, 6, D_MODEL, dtype=torch.float64)], dim=1)
    mask = torch.arange(16)[None] < 10
    torch.testing.assert_close(mixer(padded, key_padding_mask=mask)[:, :10], mixer(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", MIXER_NAMES)
def test_every_mixer_keeps_the_shape_and_has_gradients(name):
    options = {"max_seq_len": 16, "k": 4} if name == "linformer" else {}
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=name in CAUSAL_ONLY, **options)
    x = torch.randn(2, 11, D_MODEL, requires_grad=True)
    y = mixer(x)
    assert y.shape == x.shape and torch.isfinite(y).all()
    y.square().sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_gma_gets_its_options_through():
    mixer = make_mixer("gma", D_MODEL, N_HEADS, causal=True, n_components=7, d_route=5)
    assert isinstance(mixer, gma_teach.GaussianMixtureAttention)
    assert (mixer.n_components, mixer.d_route, mixer.causal) == (7, 5, True)


def test_linformer_parameters_grow_with_max_seq_len():
    def count(n):
        return sum(p.numel() for p in make_mixer("linformer", D_MODEL, N_HEADS, max_seq_len=n, k=4).parameters())

    assert count(40) - count(20) == 2 * 4 * 20


@pytest.mark.parametrize("call, message", [
    (lambda: make_mixer("flash", 8, 2), "known names"),
    (lambda: make_mixer("linformer", 8, 2, causal=True, max_seq_len=8), "bidirectional only"),
    (lambda: make_mixer("linformer", 8, 2), "max_seq_len"),
    (lambda: make_mixer("performer", 8, 2, n_features=0), "n_features"),
    (lambda: make_mixer("performer", 8, 2, n_components=3), "unknown options"),
    (lambda: make_mixer("softmax", 10, 3), "divisible"),
    (lambda: make_mixer("mamba", 8, 1, d_state=0), "d_state"),
    (lambda: make_mixer("linear", 8, 2, eps=0.0), "eps"),
    (lambda: make_mixer("linear", 8, 2)(torch.zeros(2, 3, 5)), r"x must be \(B, N, d_model=8\)"),
    (lambda: make_mixer("linformer", 8, 2, max_seq_len=4)(torch.zeros(1, 5, 8)), "exceeds"),
    (lambda: make_mixer("softmax", 8, 2).step(torch.zeros(1, 8), None), "causal"),
])
def test_bad_options_raise_clear_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize("name", sorted(CAUSAL_OPTIONS))
def test_decoding_state_size_is_constant_except_for_the_kv_cache(name):
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, **CAUSAL_OPTIONS[name])
    state = mixer.init_state(2)
    sizes = []
    for _ in range(3):
        _, state = mixer.step(torch.randn(2, D_MODEL), state)
        sizes.append(state.nbytes())
    if name in ("softmax", "sdpa"):  # the cache grows by one key and one value per head and batch row
        assert sizes[2] - sizes[1] == sizes[1] - sizes[0] == 2 * 2 * D_MODEL * 4
    elif name == "none":
        assert sizes == [0, 0, 0]
    else:
        assert sizes[0] == sizes[1] == sizes[2] > 0


@pytest.mark.parametrize("causal", [False, True])
def test_uniform_control_equals_the_plain_average_of_visible_values(causal):
    torch.manual_seed(11)
    mixer = make_mixer("uniform", D_MODEL, N_HEADS, causal=causal).double()
    x = _inputs(n=10)
    mask = torch.ones(2, 10, dtype=torch.bool)
    mask[1, [2, 7, 8, 9]] = False
    values = x @ mixer.v_proj.weight.T + mixer.v_proj.bias
    expected = torch.empty_like(values)
    for b in range(2):
        for i in range(10):
            visible = [j for j in range(10) if mask[b, j] and (j <= i or not causal)]
            expected[b, i] = values[b, visible].mean(0) if visible else 0.0
    expected = expected @ mixer.out_proj.weight.T + mixer.out_proj.bias
    torch.testing.assert_close(mixer(x, key_padding_mask=mask), expected, rtol=1e-12, atol=1e-12)


def test_no_mixing_control_returns_zeros_and_keeps_the_graph():
    mixer = make_mixer("none", D_MODEL, N_HEADS, causal=True)
    x = torch.randn(2, 7, D_MODEL, requires_grad=True)
    y = mixer(x)
    assert torch.equal(y, torch.zeros_like(x)) and y.requires_grad
    assert sum(p.numel() for p in mixer.parameters()) == 0


def test_the_mixer_registry_builds_every_name_with_its_class():
    assert baselines.MIXER_NAMES == tuple(baselines.MIXERS)
    for name, cls in baselines.MIXERS.items():
        options = {"max_seq_len": 8, "k": 4} if name == "linformer" else {}
        assert type(make_mixer(name, D_MODEL, N_HEADS, causal=name in CAUSAL_ONLY, **options)) is cls
