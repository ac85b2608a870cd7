"""Decayed GMA and decayed linear attention (chapter 12): every form against a loop spec in float64."""
import math

import pytest
import torch

import gma_teach
from gma_teach import forgetting
from gma_teach.baselines import make_mixer
from gma_teach.forgetting import decayed_gma_from_responsibilities

D_MODEL, N_HEADS = 24, 3


def _responsibilities(b=2, h=3, n=37, k=5, d_v=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    gamma_q = torch.softmax(torch.randn(b, h, n, k, generator=generator, dtype=torch.float64), dim=-1)
    gamma_k = torch.softmax(torch.randn(b, h, n, k, generator=generator, dtype=torch.float64), dim=-1)
    v = torch.randn(b, h, n, d_v, generator=generator, dtype=torch.float64)
    return gamma_q, gamma_k, v


def _loop_spec(gamma_q, gamma_k, v, decays, eps=1e-6):
    """The definition, one query and one key at a time: ``o_i = sum_{j<=i} g^(i-j) (q_i.k_j) v_j / (... + eps)``
    with ``decays`` one Python number per head."""
    out = torch.zeros(*gamma_q.shape[:-1], v.shape[-1], dtype=torch.float64)
    for b in range(gamma_q.shape[0]):
        for h in range(gamma_q.shape[1]):
            for i in range(gamma_q.shape[2]):
                numerator, denominator = torch.zeros(v.shape[-1], dtype=torch.float64), 0.0
                for j in range(i + 1):
                    weight = decays[h] ** (i - j) * float(gamma_q[b, h, i] @ gamma_k[b, h, j])
                    numerator += weight * v[b, h, j]
                    denominator += weight
                out[b, h, i] = numerator / (denominator + eps)
    return out


DECAYS = (0.5, 0.93, 1.0)


@pytest.fixture(scope="module")
def spec_case():
    gamma_q, gamma_k, v = _responsibilities()
    return gamma_q, gamma_k, v, _loop_spec(gamma_q, gamma_k, v, DECAYS)


@pytest.mark.parametrize("impl, chunk_size", [("naive", 64), ("recurrent", 64), ("chunked", 1), ("chunked", 8),
                                              ("chunked", 37), ("chunked", 64)])
def test_every_form_equals_the_loop_spec_on_odd_sizes(spec_case, impl, chunk_size):
    gamma_q, gamma_k, v, expected = spec_case
    decay = torch.tensor(DECAYS, dtype=torch.float64)  # (H,): one decay per head of (B, H, N, K)
    got = decayed_gma_from_responsibilities(gamma_q, gamma_k, v, decay, impl=impl, chunk_size=chunk_size)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


def test_the_decayed_affinity_is_the_spec_matrix(spec_case):
    gamma_q, gamma_k, v, expected = spec_case
    matrix = forgetting.decayed_affinity(gamma_q, gamma_k, torch.tensor(DECAYS, dtype=torch.float64))
    assert torch.equal(matrix, matrix.tril())
    torch.testing.assert_close(matrix @ v, expected, rtol=1e-10, atol=1e-12)


def test_a_number_decays_every_head_alike():
    gamma_q, gamma_k, v = _responsibilities(n=11)
    expected = _loop_spec(gamma_q, gamma_k, v, (0.8,) * 3)
    for impl in forgetting.DECAYED_IMPLS:
        got = decayed_gma_from_responsibilities(gamma_q, gamma_k, v, 0.8, impl=impl, chunk_size=4)
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


def test_strong_decay_over_long_chunks_stays_finite_and_exact():
    """Powers g^(C (c-1-c')) and g^(C-1-j) underflow for g = 0.01 and C = 128 but never overflow."""
    gamma_q, gamma_k, v = _responsibilities(b=1, h=2, n=300, k=3, d_v=2, seed=3)
    decay = torch.tensor([0.01, 0.999], dtype=torch.float64)
    reference = decayed_gma_from_responsibilities(gamma_q, gamma_k, v, decay, impl="recurrent")
    got = decayed_gma_from_responsibilities(gamma_q, gamma_k, v, decay, impl="chunked", chunk_size=128)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, reference, rtol=1e-10, atol=1e-12)
    single = decayed_gma_from_responsibilities(gamma_q.float(), gamma_k.float(), v.float(), decay.float(),
                                               impl="chunked", chunk_size=128)
    assert single.dtype == torch.float32
    torch.testing.assert_close(single.double(), reference, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("impl", forgetting.DECAYED_IMPLS)
def test_decay_one_is_plain_causal_gma(impl):
    gamma_q, gamma_k, v = _responsibilities(n=29)
    expected = gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v, causal=True, impl="naive")
    got = decayed_gma_from_responsibilities(gamma_q, gamma_k, v, 1.0, impl=impl, chunk_size=8)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("impl", forgetting.DECAYED_IMPLS)
def test_gradients_of_every_form_pass_gradcheck(impl):
    gamma_q, gamma_k, v = _responsibilities(b=1, h=2, n=7, k=3, d_v=2, seed=1)
    decay = torch.tensor([0.6, 0.9], dtype=torch.float64)
    inputs = tuple(t.clone().requires_grad_() for t in (gamma_q, gamma_k, v, decay))

    def function(gq, gk, values, g):
        return decayed_gma_from_responsibilities(gq, gk, values, g, impl=impl, chunk_size=3)

    assert torch.autograd.gradcheck(function, inputs)


@pytest.mark.parametrize("impl", forgetting.DECAYED_IMPLS)
def test_the_forms_leak_nothing_from_the_future(impl):
    gamma_q, gamma_k, v = _responsibilities(n=23)
    decay = torch.tensor(DECAYS, dtype=torch.float64)
    before = decayed_gma_from_responsibilities(gamma_q, gamma_k, v, decay, impl=impl, chunk_size=8)
    for cut in (1, 8, 13, 22):
        changed = [t.clone() for t in (gamma_q, gamma_k, v)]
        for t in changed:
            t[..., cut:, :] = torch.rand_like(t[..., cut:, :]) * 5
        after = decayed_gma_from_responsibilities(*changed, decay, impl=impl, chunk_size=8)
        assert torch.equal(after[..., :cut, :], before[..., :cut, :]), f"{impl} leaks at cut {cut}"
        assert not torch.equal(after[..., cut:, :], before[..., cut:, :])


# ------------------------------------------------------------------------------------------------ mixers
MIXER_OPTIONS = {
    "decay_linear": {"chunk_size": 4, "decay": [0.5, 0.8, 0.97]},
    "decay_gma": {"n_components": 5, "chunk_size": 4, **gma_teach.LM_ROUTING_REMEDY},
}


def _inputs(b=2, n=13, seed=0):
    return torch.randn(b, n, D_MODEL, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize("name", sorted(MIXER_OPTIONS))
@pytest.mark.parametrize("impl", forgetting.DECAYED_IMPLS)
def test_mixer_forms_agree_and_step_by_step_decoding_equals_forward(name, impl):
    torch.manual_seed(2)
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, impl=impl, **MIXER_OPTIONS[name]).double()
    x = _inputs(n=11)
    state, outputs = mixer.init_state(2), []
    for t in range(x.shape[1]):
        y_t, state = mixer.step(x[:, t], state)
        outputs.append(y_t)
    torch.testing.assert_close(torch.stack(outputs, 1), mixer(x), rtol=1e-9, atol=1e-11)
    reference = make_mixer(name, D_MODEL, N_HEADS, causal=True, impl="naive", **MIXER_OPTIONS[name]).double()
    reference.load_state_dict(mixer.state_dict())
    torch.testing.assert_close(mixer(x), reference(x), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", sorted(MIXER_OPTIONS))
def test_mixers_leak_nothing_from_the_future(name):
    torch.manual_seed(4)
    mixer = make_mixer(name, D_MODEL, N_HEADS, causal=True, **MIXER_OPTIONS[name]).double()
    x = _inputs(n=15)
    for cut in (1, 7, 14):
        changed = x.clone()
        changed[:, cut:] = torch.randn_like(changed[:, cut:]) * 3
        assert torch.equal(mixer(changed)[:, :cut], mixer(x)[:, :cut]), f"{name} leaks at cut {cut}"


def test_decay_linear_with_decay_one_is_linear_attention():
    torch.manual_seed(5)
    decayed = make_mixer("decay_linear", D_MODEL, N_HEADS, causal=True, decay=1.0, chunk_size=4).double()
    plain = make_mixer("linear", D_MODEL, N_HEADS, causal=True, chunk_size=5).double()
    plain.load_state_dict({name: value for name, value in decayed.state_dict().items() if name != "decay"})
    x = _inputs(n=17)
    torch.testing.assert_close(decayed(x), plain(x), rtol=1e-10, atol=1e-12)


def test_decay_gma_with_decay_one_is_causal_gma():
    torch.manual_seed(6)
    decayed = make_mixer("decay_gma", D_MODEL, N_HEADS, causal=True, decay=1.0, n_components=5).double()
    plain = make_mixer("gma", D_MODEL, N_HEADS, causal=True, n_components=5).double()
    plain.load_state_dict({name: value for name, value in decayed.state_dict().items() if name != "decay"})
    x = _inputs(n=17)
    torch.testing.assert_close(decayed(x), plain(x), rtol=1e-10, atol=1e-12)


def test_decay_gma_forgets_an_old_token():
    """With decay 0.5 the first token's effect on the 30th output is a tiny fraction of its effect without decay."""
    torch.manual_seed(7)
    x = _inputs(b=1, n=30)
    changed = x.clone()
    changed[:, 0] += 5.0
    remembering = make_mixer("decay_gma", D_MODEL, N_HEADS, causal=True, decay=1.0, n_components=5).double()
    forgetting_layer = make_mixer("decay_gma", D_MODEL, N_HEADS, causal=True, decay=0.5, n_components=5).double()
    forgetting_layer.load_state_dict({name: value for name, value in remembering.state_dict().items()
                                      if name != "decay"}, strict=False)
    with torch.no_grad():
        effects = [float((layer(changed)[:, -1] - layer(x)[:, -1]).abs().max())
                   for layer in (remembering, forgetting_layer)]
    assert effects[0] > 1e-3 and effects[1] < 1e-6 * effects[0], effects


def test_default_decays_follow_retnet_and_the_options_reach_the_layers():
    decays = forgetting.retnet_decays(4)
    assert decays == tuple(1 - 2.0 ** (-5 - h) for h in range(4))
    assert math.log(0.5) / math.log(decays[0]) == pytest.approx(21.8, abs=0.05)  # head 0's half-life in tokens
    mixer = make_mixer("decay_linear", 32, 4, causal=True)
    assert mixer.decay.tolist() == list(decays)
    layer = make_mixer("decay_gma", D_MODEL, N_HEADS, causal=True, n_components=7, d_route=5, decay=0.9,
                       **{**gma_teach.LM_ROUTING_REMEDY, "balance_weight": 0.01, "init_variance": "d_route"})
    assert isinstance(layer, gma_teach.GaussianMixtureAttention)
    assert (layer.n_components, layer.d_route, layer.init_variance, layer.balance_weight) == (7, 5, 5.0, 0.01)
    assert layer.k_proj is layer.q_proj and layer.assignment_weight == gma_teach.LM_ROUTING_REMEDY["assignment_weight"]
    assert layer.decay.tolist() == [0.9] * N_HEADS
    layer(torch.randn(2, 6, D_MODEL))
    assert layer.auxiliary_loss() > 0


def test_decay_gma_keeps_the_defaults_of_the_gma_layer():
    import inspect

    parent = inspect.signature(gma_teach.GaussianMixtureAttention.__init__).parameters
    child = inspect.signature(forgetting.DecayedGaussianMixtureAttention.__init__).parameters
    for name, parameter in child.items():
        if name in parent and name not in ("self", "causal", "impl", "n_components"):
            assert parameter.default == parent[name].default, name
    assert set(parent) - set(child) == set()


@pytest.mark.parametrize("call, error, message", [
    (lambda: make_mixer("decay_linear", 8, 2, causal=False), ValueError, "causal only"),
    (lambda: make_mixer("decay_gma", 8, 2, causal=False), ValueError, "causal only"),
    (lambda: make_mixer("decay_linear", 8, 2, causal=True, decay=0.0), ValueError, r"decay must be in \(0, 1\]"),
    (lambda: make_mixer("decay_linear", 8, 2, causal=True, decay=1.5), ValueError, r"\(0, 1\]"),
    (lambda: make_mixer("decay_gma", 8, 2, causal=True, decay=float("nan")), ValueError, r"\(0, 1\]"),
    (lambda: make_mixer("decay_gma", 8, 2, causal=True, decay=[0.5]), ValueError, "one value per head"),
    (lambda: make_mixer("decay_gma", 8, 2, causal=True, decay=[0.5, -1.0]), ValueError, r"decay\[1\]"),
    (lambda: make_mixer("decay_linear", 8, 2, causal=True, decay="0.9"), TypeError, "decay must be"),
    (lambda: make_mixer("decay_linear", 8, 2, causal=True, decay=True), TypeError, "decay must be"),
    (lambda: make_mixer("decay_linear", 8, 2, causal=True, impl="cumsum"), ValueError, "impl must be one of"),
    (lambda: make_mixer("decay_gma", 8, 2, causal=True, n_components=0), ValueError, "n_components"),
    (lambda: make_mixer("decay_gma", 8, 2, causal=True, window=4), ValueError, "unknown options"),
    (lambda: make_mixer("decay_gma", 8, 2, causal=True)(torch.zeros(1, 3, 8), torch.zeros(1, 3, 8)), ValueError,
     "no context"),
    (lambda: make_mixer("decay_linear", 8, 2, causal=True).step(torch.zeros(1, 8), None), TypeError,
     "state must be a GMAState"),
])
def test_bad_mixer_options_raise_clear_errors(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("change, error, message", [
    ({"decay": torch.tensor([0.5, 0.0, 1.0], dtype=torch.float64)}, ValueError, r"decay must lie in \(0, 1\]"),
    ({"decay": torch.tensor([1, 1, 1])}, TypeError, "floating-point"),
    ({"decay": torch.tensor([0.5, 0.5], dtype=torch.float64)}, ValueError, "must broadcast"),
    ({"decay": 2}, ValueError, r"\(0, 1\]"),
    ({"decay": None}, TypeError, "decay must be a number"),
    ({"impl": "linear"}, ValueError, "impl must be one of"),
    ({"eps": 0.0}, ValueError, "eps"),
    ({"chunk_size": 0}, ValueError, "chunk_size"),
    ({"gamma_q": torch.rand(2, 3, 9, 5, dtype=torch.float64)}, ValueError, "as many queries as keys"),
    ({"v": torch.rand(2, 3, 9, 4, dtype=torch.float64)}, ValueError, "one row per key"),
    ({"gamma_k": torch.rand(2, 3, 11, 4, dtype=torch.float64)}, ValueError, "same K"),
    ({"v": [[1.0]]}, TypeError, "v must be a torch.Tensor"),
])
def test_bad_function_inputs_raise_clear_errors(change, error, message):
    gamma_q, gamma_k, v = _responsibilities(n=11)
    arguments = {"gamma_q": gamma_q, "gamma_k": gamma_k, "v": v, "decay": 0.9, **change}
    options = {key: arguments.pop(key) for key in ("impl", "eps", "chunk_size") if key in arguments}
    with pytest.raises(error, match=message):
        decayed_gma_from_responsibilities(arguments["gamma_q"], arguments["gamma_k"], arguments["v"],
                                          arguments["decay"], **options)
