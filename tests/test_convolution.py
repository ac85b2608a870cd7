"""The short causal convolution (chapter 12's first recall layer) against a float64 loop, causality and decoding."""
from __future__ import annotations

import pytest
import torch

from gma_teach import make_mixer
from gma_teach.convolution import ShortConvolution
from gma_teach.models import DecoderLM


def loop_spec(layer: ShortConvolution, x: torch.Tensor) -> torch.Tensor:
    """``y_t = W_o (W_u x_t ⊙ sum_j f_j x_{t - k + 1 + j})`` position by position, in float64."""
    layer = layer.double()
    x = x.double()
    k, (b, n, d) = layer.kernel_size, x.shape
    out = torch.zeros(b, n, d, dtype=torch.float64)
    for t in range(n):
        mixed = torch.zeros(b, d, dtype=torch.float64)
        for j in range(k):
            source = t - k + 1 + j
            if source >= 0:
                mixed += layer.filters[:, j] * x[:, source]
        out[:, t] = layer.out_proj(layer.in_proj(x[:, t]) * mixed)
    return out


@pytest.mark.parametrize("kernel_size, n", [(1, 5), (3, 17), (4, 3)])
def test_forward_equals_the_float64_loop(kernel_size, n):
    torch.manual_seed(0)
    layer = ShortConvolution(12, kernel_size=kernel_size).double()
    x = torch.randn(2, n, 12, dtype=torch.float64)
    assert torch.allclose(layer(x), loop_spec(layer, x), atol=1e-12)


def test_the_future_does_not_reach_the_past_and_step_equals_forward():
    torch.manual_seed(1)
    layer = make_mixer("conv", 8, 1, causal=True, kernel_size=3)
    x = torch.randn(3, 11, 8)
    changed = x.clone()
    changed[:, 6:] += torch.randn(3, 5, 8)
    assert torch.equal(layer(x)[:, :6], layer(changed)[:, :6])
    assert not torch.allclose(layer(x)[:, 6:], layer(changed)[:, 6:])
    state = layer.init_state(3)
    steps = []
    for t in range(11):
        y, state = layer.step(x[:, t], state)
        steps.append(y)
    assert torch.allclose(torch.stack(steps, 1), layer(x), atol=1e-6)
    assert state.nbytes() == 3 * 2 * 8 * 4  # the last k - 1 inputs, whatever the position


def test_gradients_match_finite_differences():
    torch.manual_seed(2)
    layer = ShortConvolution(4, kernel_size=2).double()
    x = torch.randn(1, 5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(layer, (x,))


def test_bad_options_are_refused():
    with pytest.raises(TypeError, match="causal"):
        ShortConvolution(8, causal="yes")
    with pytest.raises(ValueError, match="kernel_size"):
        ShortConvolution(8, kernel_size=0)
    with pytest.raises(TypeError, match="kernel_size"):
        ShortConvolution(8, kernel_size=2.5)


def test_a_decoder_takes_one_mixer_per_layer_and_blocks_without_ffn():
    model = DecoderLM(20, 8, 2, 1, mixer=["conv", "sdpa"], max_seq_len=6, d_ff=0, mixer_options=[{}, {}])
    assert [type(b.mixer).__name__ for b in model.blocks] == ["ShortConvolution", "SDPAttention"]
    assert all(b.ffn is None for b in model.blocks)
    tokens = torch.randint(0, 20, (2, 6))
    assert model(tokens).shape == (2, 6, 20)
    out = model.generate(tokens[:, :2], 3, temperature=0)  # decodes through every layer's step
    assert torch.equal(out, model.generate(tokens[:, :2], 3, temperature=0, use_recurrent=False))
    with pytest.raises(ValueError, match="one entry per layer"):
        DecoderLM(20, 8, 2, 1, mixer=["conv"], max_seq_len=6)
