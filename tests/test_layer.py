"""The multi-head layer: per-head math, causality, decoding, cross-attention, stability, diagnostics, bad input."""
import pytest
import torch

import gma_teach
from gma_teach import GaussianMixtureAttention


def reference_layer_output(layer, x, context=None):
    """Recompute the layer by hand, head by head, with the naive N x N form (float64)."""
    source = x if context is None else context
    mixture = layer.mixture
    outputs = []
    for h in range(layer.n_heads):
        route = slice(h * layer.d_route, (h + 1) * layer.d_route)
        value = slice(h * layer.d_value, (h + 1) * layer.d_value)
        q = x @ layer.q_proj.weight[route].T + layer.q_proj.bias[route]
        k = source @ layer.k_proj.weight[route].T + layer.k_proj.bias[route]
        v = source @ layer.v_proj.weight[value].T + layer.v_proj.bias[value]
        params = mixture.means[h], mixture.variances[h], mixture.log_priors[h]
        gamma_q = gma_teach.responsibilities(q, *params)
        gamma_k = gma_teach.responsibilities(k, *params)
        outputs.append(gma_teach.gma_from_responsibilities(gamma_q, gamma_k, v, causal=layer.causal, impl="naive"))
    return layer.out_proj(torch.cat(outputs, -1))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("impl", ["auto", "naive", "cumsum", "chunked", "recurrent"])
def test_layer_matches_head_by_head_reference(causal, impl):
    layer = GaussianMixtureAttention(12, 3, 5, causal=causal, impl=impl, chunk_size=4, d_route=3, d_value=5).double()
    x = torch.randn(2, 9, 12, dtype=torch.float64)
    assert (layer(x) - reference_layer_output(layer, x)).abs().max() <= 1e-10


def test_cross_attention():
    layer = GaussianMixtureAttention(8, 2, 3).double()
    x, context = torch.randn(2, 5, 8, dtype=torch.float64), torch.randn(2, 11, 8, dtype=torch.float64)
    out = layer(x, context)
    assert out.shape == (2, 5, 8)
    assert (out - reference_layer_output(layer, x, context)).abs().max() <= 1e-10
    gamma_q, gamma_k = layer.routing(x, context)
    assert gamma_q.shape == (2, 2, 5, 3) and gamma_k.shape == (2, 2, 11, 3)


@pytest.mark.parametrize("causal", [False, True])
def test_padded_keys_write_nothing(causal):
    layer = GaussianMixtureAttention(8, 2, 3, causal=causal, chunk_size=4).double()
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    padded = torch.cat([x, torch.randn(2, 5, 8, dtype=torch.float64)], dim=1)
    mask = torch.ones(2, 12, dtype=torch.bool)
    mask[:, 7:] = False
    assert (layer(padded, key_padding_mask=mask)[:, :7] - layer(x)).abs().max() <= 1e-12
    mask[1, 3] = False  # a hole in the middle: that key must be invisible to every query
    alone = torch.cat([x[1:, :3], x[1:, 4:]], dim=1)
    if not causal:
        got = layer(padded, key_padding_mask=mask)[1:, :7]
        assert (layer(x[1:], context=alone) - got).abs().max() <= 1e-12


def test_module_is_causal_exactly():
    layer = GaussianMixtureAttention(16, 4, 7, causal=True, chunk_size=4)
    x = torch.randn(2, 23, 16)
    before = layer(x)
    for position in (0, 3, 4, 13, 21):
        changed = x.clone()
        changed[:, position + 1:] = torch.randn_like(changed[:, position + 1:]) * 5
        after = layer(changed)
        assert torch.equal(before[:, :position + 1], after[:, :position + 1])
        assert not torch.equal(before[:, position + 1:], after[:, position + 1:])


def test_decoding_steps_equal_the_causal_forward_with_constant_state():
    layer = GaussianMixtureAttention(16, 4, 6, causal=True, chunk_size=5).double()
    x = torch.randn(3, 31, 16, dtype=torch.float64)
    full = layer(x)
    state = layer.init_state(3)
    first_size = state.nbytes()
    for t in range(31):
        y_t, state = layer.step(x[:, t], state)
        assert (y_t - full[:, t]).abs().max() <= 1e-10, t
        assert state.nbytes() == first_size
    assert state.memory.shape == (3, 4, 6, 4) and state.position == 31


def test_gradcheck_layer_inputs():
    layer = GaussianMixtureAttention(6, 2, 3, causal=True, chunk_size=2).double()
    x = torch.randn(1, 5, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(layer, (x,))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_stays_finite_with_large_inputs_and_tiny_variances(dtype, causal):
    layer = GaussianMixtureAttention(32, 4, 16, causal=causal, min_variance=1e-4)
    with torch.no_grad():
        layer.mixture.raw_variances.fill_(-30.0)  # variances at the floor, 1e-4
    layer = layer.to(dtype)
    x = (torch.randn(2, 65, 32) * 1e3).to(dtype).requires_grad_()
    out = layer(x)
    out.float().square().mean().backward()
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert torch.isfinite(x.grad).all()
    for name, parameter in layer.named_parameters():
        assert torch.isfinite(parameter.grad).all(), name


def test_store_responsibilities_for_diagnostics():
    layer = GaussianMixtureAttention(8, 2, 4)
    x = torch.randn(3, 6, 8)
    layer(x)
    assert layer.last_responsibilities is None
    layer.store_responsibilities = True
    layer(x)
    stored = layer.last_responsibilities
    gamma_q, gamma_k = layer.routing(x)
    assert torch.equal(stored["query"], gamma_q.detach()) and torch.equal(stored["key"], gamma_k.detach())
    assert not stored["query"].requires_grad
    assert torch.allclose(stored["query"].sum(-1), torch.ones(3, 2, 6))


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="divisible"):
        GaussianMixtureAttention(10, 3, 4)
    with pytest.raises(ValueError, match="impl must be"):
        GaussianMixtureAttention(8, 2, 4, impl="fast")
    with pytest.raises(ValueError, match="impl='linear' is bidirectional"):
        GaussianMixtureAttention(8, 2, 4, causal=True, impl="linear")
    with pytest.raises(ValueError, match="eps must be > 0"):
        GaussianMixtureAttention(8, 2, 4, eps=0)
    with pytest.raises(ValueError, match="n_components must be >= 1"):
        GaussianMixtureAttention(8, 2, 0)
    layer = GaussianMixtureAttention(8, 2, 4)
    with pytest.raises(ValueError, match=r"x must be \(B, N, d_model=8\)"):
        layer(torch.randn(3, 6, 7))
    with pytest.raises(ValueError, match=r"x must be \(B, N, d_model=8\)"):
        layer(torch.randn(6, 8))
    with pytest.raises(ValueError, match="context must be"):
        layer(torch.randn(3, 6, 8), torch.randn(3, 6, 5))
    with pytest.raises(ValueError, match="batch size"):
        layer(torch.randn(3, 6, 8), torch.randn(2, 6, 8))
    with pytest.raises(ValueError, match="causal=False"):
        layer.init_state(2)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, M\)"):
        layer(torch.randn(3, 6, 8), key_padding_mask=torch.ones(3, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="key_padding_mask must be a bool"):
        layer(torch.randn(3, 6, 8), key_padding_mask=torch.ones(3, 6))
    causal = GaussianMixtureAttention(8, 2, 4, causal=True)
    with pytest.raises(ValueError, match="takes no context"):
        causal(torch.randn(3, 6, 8), torch.randn(3, 4, 8))
    with pytest.raises(ValueError, match=r"x_t must be \(B, d_model=8\)"):
        causal.step(torch.randn(2, 1, 8), causal.init_state(2))
    with pytest.raises(ValueError, match="state.memory must be"):
        causal.step(torch.randn(3, 8), causal.init_state(2))
    with pytest.raises(TypeError, match="state must be a GMAState"):
        causal.step(torch.randn(2, 8), None)


def test_printout_names_every_option_and_fits_the_page_nested_in_a_model():
    # the paper's widths, printed as torch prints a model: the layer three levels deep, its mixture one more
    layer = GaussianMixtureAttention(768, 12, 128, causal=True, impl="chunked", min_variance=1e-4)
    model = torch.nn.ModuleDict({"blocks": torch.nn.ModuleList([torch.nn.ModuleDict({"mixer": layer})])})
    printed = str(model)
    assert max(len(line) for line in printed.split("\n")) <= 75, printed
    words = set(printed.replace(",", " ").split())
    assert {"d_model=768", "n_heads=12", "n_components=128", "d_route=64", "d_value=64", "causal=True",
            "impl='chunked'", "dim=64", "min_variance=0.0001"} <= words, printed
    mixture = gma_teach.GaussianMixture(5, 3)
    assert str(mixture).split() == ["GaussianMixture(", "n_components=5,", "dim=3,", "min_variance=0.001", ")"]
