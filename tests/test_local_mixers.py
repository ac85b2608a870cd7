"""Sliding-window attention and the local + GMA hybrid (chapter 12) against slow float64 specs."""
import math

import pytest
import torch

import gma_teach
from gma_teach import baselines, local
from gma_teach.baselines import make_mixer
from gma_teach.local import sliding_window_attention
from gma_teach.models import DecoderLM

D_MODEL, N_HEADS = 24, 3


def _heads(b=2, h=3, n=37, d=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(b, h, n, d, generator=generator, dtype=torch.float64) for _ in range(3)]


def _slow_window(q, k, v, window, causal, key_padding_mask=None):
    """One query at a time over the list of keys it may see (no visible key: zeros)."""
    out = torch.zeros(*q.shape[:-1], v.shape[-1], dtype=torch.float64)
    n = q.shape[-2]
    for b in range(q.shape[0]):
        for i in range(n):
            seen = [j for j in range(n) if (i - window < j <= i if causal else abs(i - j) < window)
                    and (key_padding_mask is None or key_padding_mask[b, j])]
            if seen:
                scores = (k[b, :, seen, :] @ q[b, :, i, :, None])[..., 0] / math.sqrt(q.shape[-1])
                out[b, :, i] = (torch.softmax(scores, dim=-1)[..., None] * v[b, :, seen, :]).sum(-2)
    return out


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("window", [1, 5, 8, 37, 50])
def test_sliding_window_attention_equals_the_slow_spec_on_odd_sizes(window, causal):
    q, k, v = _heads()
    expected = _slow_window(q, k, v, window, causal)
    torch.testing.assert_close(sliding_window_attention(q, k, v, window, causal=causal), expected,
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_padding_is_invisible_and_a_query_seeing_nothing_gets_zeros(causal):
    q, k, v = _heads(n=19)
    mask = torch.ones(2, 19, dtype=torch.bool)
    mask[0, 3:9] = False  # a gap longer than the window: queries 5..6 see no key when causal=False
    mask[1, 15:] = False
    got = sliding_window_attention(q, k, v, 3, causal=causal, key_padding_mask=mask)
    torch.testing.assert_close(got, _slow_window(q, k, v, 3, causal, mask), rtol=1e-10, atol=1e-12)
    assert torch.isfinite(got).all() and (got[0, :, 5:7] == 0).all()


def test_a_window_as_long_as_the_sequence_is_causal_softmax_attention():
    q, k, v = _heads(n=23)
    torch.testing.assert_close(sliding_window_attention(q, k, v, 23, causal=True),
                               baselines.softmax_attention(q, k, v, causal=True), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [True, False])
def test_sliding_window_gradients_pass_gradcheck(causal):
    q, k, v = (t.requires_grad_() for t in _heads(b=1, h=2, n=7, d=3, seed=2))
    mask = torch.tensor([[True, True, False, True, True, True, False]])

    def function(queries, keys, values):
        return sliding_window_attention(queries, keys, values, 3, causal=causal, key_padding_mask=mask)

    assert torch.autograd.gradcheck(function, (q, k, v))


# ------------------------------------------------------------------------------------------------ mixers
CAUSAL_OPTIONS = {
    "window": [{"window": 4}, {"window": 20}],
    "local_gma": [{"window": 4, "n_components": 5, "chunk_size": 4},
                  {"window": 3, "n_components": 6, "chunk_size": 5, "local_heads": 1, **gma_teach.LM_ROUTING_REMEDY}],
}
CASES = [(name, options) for name, variants in CAUSAL_OPTIONS.items() for options in variants]


def _inputs(b=2, n=13, seed=0):
    return torch.randn(b, n, D_MODEL, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("name, options", CASES)
def test_step_by_step_decoding_equals_the_causal_forward_at_every_position(name, options):
    torch.manual_seed(3)
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, **options).double()
    x = _inputs(n=11)
    state, outputs = mixer.init_state(2), []
    for t in range(x.shape[1]):
        y_t, state = mixer.step(x[:, t], state)
        outputs.append(y_t)
    torch.testing.assert_close(torch.stack(outputs, 1), mixer(x), rtol=1e-9, atol=1e-11)


@pytest.mark.parametrize("name, options", CASES)
def test_causal_mixers_leak_nothing_from_the_future(name, options):
    torch.manual_seed(4)
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, **options).double()
    x = _inputs(n=15)
    for cut in (1, 7, 14):
        changed = x.clone()
        changed[:, cut:] = torch.randn_like(changed[:, cut:]) * 3
        assert torch.equal(mixer(changed)[:, :cut], mixer(x)[:, :cut]), f"{name} leaks at cut {cut}"


def test_the_window_mixer_forgets_what_left_the_window():
    torch.manual_seed(5)
    mixer = make_mixer("window", D_MODEL, N_HEADS, causal=True, window=4).double()
    x = _inputs(n=12)
    changed = x.clone()
    changed[:, 2] += 3.0
    difference = (mixer(changed) - mixer(x)).abs().amax(dim=(0, 2))
    assert (difference[2:6] > 0).all() and (difference[6:] == 0).all() and (difference[:2] == 0).all()


@pytest.mark.parametrize("name", ["window", "local_gma"])
def test_bidirectional_mixers_hide_padding(name):
    torch.manual_seed(6)
    mixer = make_mixer(name, D_MODEL, N_HEADS, window=3, **({"n_components": 5} if name == "local_gma" else {}))
    mixer = mixer.double()
    x = _inputs(b=1, n=10)
    padded = torch.cat([x, torch.randn(1, 6, D_MODEL, dtype=torch.float64)], dim=1)
    mask = torch.arange(16)[None] < 10
    torch.testing.assert_close(mixer(padded, key_padding_mask=mask)[:, :10], mixer(x), rtol=1e-10, atol=1e-12)


def test_local_gma_is_split_heads_with_one_output_projection():
    """Window heads and GMA heads side by side, concatenated, through one output projection."""
    torch.manual_seed(7)
    mixer = make_mixer("local_gma", D_MODEL, 4, causal=True, window=5, n_components=5, local_heads=1).double()
    x = _inputs(n=17)
    window, gma = mixer.local, mixer.gma
    head_dim = D_MODEL // 4

    def heads(projection, n_heads):
        return projection(x).unflatten(-1, (n_heads, head_dim)).transpose(1, 2)

    local_out = _slow_window(heads(window.q_proj, 1), heads(window.k_proj, 1), heads(window.v_proj, 1), 5, True)
    mixture = gma.mixture
    gma_out = gma_teach.gma(heads(gma.q_proj, 3), heads(gma.k_proj, 3), heads(gma.v_proj, 3), mixture.means,
                            mixture.variances, mixture.log_priors, causal=True, impl="naive")
    concatenated = torch.cat([local_out, gma_out], dim=1).transpose(1, 2).flatten(-2)  # (B, N, d_model)
    weight = torch.cat([window.out_proj.weight, gma.out_proj.weight], dim=1)
    expected = concatenated @ weight.T + window.out_proj.bias + gma.out_proj.bias
    torch.testing.assert_close(mixer(x), expected, rtol=1e-10, atol=1e-12)
    assert (window.n_heads, gma.n_heads, gma.n_components, gma.d_route, gma.d_value) == (1, 3, 5, 6, 6)


def test_local_gma_has_the_projections_of_one_attention_layer():
    hybrid = make_mixer("local_gma", D_MODEL, 4, n_components=5)
    attention = make_mixer("sdpa", D_MODEL, 4)
    mixture = sum(p.numel() for p in hybrid.gma.mixture.parameters())
    count = sum(p.numel() for p in hybrid.parameters())
    assert count == sum(p.numel() for p in attention.parameters()) + mixture + D_MODEL  # one more output bias


def test_a_model_finds_the_gma_heads_of_the_hybrid():
    torch.manual_seed(8)
    model = DecoderLM(40, D_MODEL, 2, N_HEADS, mixer="local_gma", max_seq_len=16,
                      mixer_options={"window": 4, "n_components": 5, **gma_teach.LM_ROUTING_REMEDY})
    tokens = torch.randint(0, 40, (2, 12))
    model(tokens)
    assert model.auxiliary_loss() > 0
    assert model.init_routing_means(tokens) == 2
    assert model.can_decode_recurrently()


@pytest.mark.parametrize("call, error, message", [
    (lambda: make_mixer("window", 8, 2, window=0), ValueError, "window must be >= 1"),
    (lambda: make_mixer("window", 8, 2, window=2.5), TypeError, "window must be an int"),
    (lambda: make_mixer("window", 8, 2, window="8"), TypeError, "window must be an int"),
    (lambda: make_mixer("window", 10, 3), ValueError, "divisible"),
    (lambda: make_mixer("window", 8, 2, n_components=4), ValueError, "unknown options"),
    (lambda: make_mixer("local_gma", 8, 1), ValueError, "n_heads >= 2"),
    (lambda: make_mixer("local_gma", 8, 2, local_heads=2), ValueError, r"local_heads must be an int in \[1, 1\]"),
    (lambda: make_mixer("local_gma", 8, 2, local_heads=0), ValueError, "local_heads"),
    (lambda: make_mixer("local_gma", 8, 2, window=-1), ValueError, "window"),
    (lambda: make_mixer("local_gma", 8, 2, n_components=0), ValueError, "n_components"),
    (lambda: make_mixer("local_gma", 8, 2, balance_form="max"), ValueError, "balance_form"),
    (lambda: make_mixer("window", 8, 2).init_state(1), ValueError, "causal"),
    (lambda: make_mixer("local_gma", 8, 2).step(torch.zeros(1, 8), None), ValueError, "causal"),
    (lambda: make_mixer("window", 8, 2, causal=True).step(torch.zeros(1, 8), None), TypeError, "WindowCache"),
    (lambda: make_mixer("window", 8, 2, causal=True).step(torch.zeros(1, 5), None), ValueError, "x_t"),
    (lambda: sliding_window_attention(*_heads(n=5), 0), ValueError, "window"),
    (lambda: sliding_window_attention(*_heads(n=5)[:2], torch.zeros(2, 3, 4, 4), 2), ValueError, "must agree"),
    (lambda: sliding_window_attention(*_heads(n=5), 2, key_padding_mask=torch.ones(2, 4, dtype=torch.bool)),
     ValueError, "key_padding_mask"),
])
def test_bad_options_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_window_state_is_the_last_w_keys_and_values():
    torch.manual_seed(9)
    mixer = make_mixer("window", D_MODEL, N_HEADS, causal=True, window=4).double()
    x = _inputs(b=1, n=9)
    state = mixer.init_state(1)
    for t in range(9):
        _, state = mixer.step(x[:, t], state)
    keys = mixer.k_proj(x[:, 5:]).unflatten(-1, (N_HEADS, D_MODEL // N_HEADS)).transpose(1, 2)
    assert isinstance(state, local.WindowCache) and state.position == 9
    torch.testing.assert_close(state.keys, keys, rtol=1e-12, atol=1e-14)
