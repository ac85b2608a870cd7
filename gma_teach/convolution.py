"""A short causal convolution as a sequence mixer (chapter 12): the first block of the recall study's model.

Multi-query associative recall asks a model to find, for a query key, the value that *followed* the same key
earlier. A mixer that compares the query with every position must first learn to carry each key into the next
position (the value's) -- attention needs a whole layer for that "previous token" head. The recall study's model
(:func:`gma_teach.study.build_model`) is therefore a two-block decoder: this short convolution, then the mixer
under study (one mixer layer), so that the mixer only has to match and read. That is the layout of the two-layer
MQAR models that Zoology's code trains for the Based paper's recall-memory sweep (Arora, Eyuboglu et al., 2023 and
2024) for attention, Based and the sliding window: each layer's mixer is ``Hybrid([BaseConv, mixer])``, whose layer
``i`` takes the ``i mod 2``-th entry, so layer 0 is a BaseConv and layer 1 the mixer, with no MLP. It is not the
layout of every model there (Zoology's Mamba models are two Mamba layers, with no convolution layer), nor of the
Zoology paper's own attention baseline (two attention layers).

:class:`ShortConvolution` follows BaseConv: ``y = W_o (W_u x ⊙ conv_k(x))`` with a depthwise causal convolution of
kernel ``k`` (3) along the sequence; BaseConv has no ``W_o`` and adds its input back itself, where here the block's
residual does. It decodes with a state of the last ``k - 1`` inputs, ``(k - 1) d_model`` numbers (512 bytes in
float32 at width 64): part of the recall model's decoding state, beside the mixer's own.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks
from .mixing import DecodingState


@dataclass
class ConvolutionState(DecodingState):
    """Decoding state of :class:`ShortConvolution`: the last ``kernel_size - 1`` inputs ``(B, kernel_size - 1,
    d_model)`` (zeros before the sequence starts)."""

    history: torch.Tensor


class ShortConvolution(nn.Module):
    """Gated short causal convolution, ``(B, N, d_model) -> (B, N, d_model)``.

    Args:
        d_model: width.
        n_heads: accepted for the common interface (the convolution is depthwise: one filter per channel).
        causal: accepted for the common interface; the mixer is causal by construction (position ``i`` reads
            positions ``i - k + 1 .. i``), as :class:`gma_teach.mamba.MambaMixer` is.
        kernel_size: ``k`` (>= 1), the positions each output reads.
    """

    def __init__(self, d_model, n_heads=1, *, causal=True, kernel_size=3):
        super().__init__()
        d_model, n_heads = _checks.heads(d_model, n_heads)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, _checks.boolean("causal", causal)
        self.kernel_size = _checks.positive_int("kernel_size", kernel_size)
        self.filters = nn.Parameter(torch.randn(d_model, kernel_size) / kernel_size)  # (d_model, k), last tap = now
        self.in_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _convolve(self, x):
        """Depthwise causal convolution of ``x (B, T, d_model)``; the output at ``t`` reads ``x[t - k + 1 .. t]``.
        Returns ``(B, T - k + 1, d_model)`` (the caller pads the past)."""
        return F.conv1d(x.transpose(1, 2), self.filters[:, None, :].to(x.dtype), groups=self.d_model).transpose(1, 2)

    def forward(self, x):
        """``x (B, N, d_model)`` -> ``(B, N, d_model)``."""
        _checks.sequence("x", x, self.d_model)
        padded = F.pad(x, (0, 0, self.kernel_size - 1, 0))
        return self.out_proj(self.in_proj(x) * self._convolve(padded))

    def init_state(self, batch_size):
        """Zero history: ``(B, kernel_size - 1, d_model)``."""
        weight = self.in_proj.weight
        return ConvolutionState(weight.new_zeros(batch_size, self.kernel_size - 1, self.d_model))

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        _checks.token("x_t", x_t, self.d_model)
        window = torch.cat([state.history, x_t[:, None, :]], dim=1)  # (B, k, d_model)
        y = self.out_proj(self.in_proj(x_t) * self._convolve(window)[:, 0])
        return y, ConvolutionState(window[:, 1:])
