"""The two controls, no mixing and the uniform average, with their decoding states. A private module of
:mod:`gma_teach.baselines`, which exports its names."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .. import _checks
from ..mixing import DecodingState


@dataclass
class EmptyState(DecodingState):
    """Decoding state of :class:`NoMixing`: nothing (0 bytes)."""


@dataclass
class UniformAverageState(DecodingState):
    """Decoding state of :class:`UniformAverage`: the running sum of the values ``(B, d_model)`` and the number of
    tokens summed (constant size)."""

    total: torch.Tensor
    position: int = 0


class NoMixing(nn.Module):
    """Control: no sequence mixing. ``forward(x)`` returns zeros ``(B, N, d_model)`` (kept on the autograd graph with
    a zero gradient, so a model built with it trains unchanged); each position of a model sees only itself.

    ``n_heads`` and ``causal`` are accepted for the common interface (it is causal and bidirectional alike)."""

    def __init__(self, d_model, n_heads=1, *, causal=False):
        super().__init__()
        d_model, n_heads = _checks.heads(d_model, n_heads)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, _checks.boolean("causal", causal)

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)`` -> zeros of the same shape."""
        _checks.sequence("x", x, self.d_model)
        return x * 0

    def init_state(self, batch_size):
        """The empty state (``batch_size`` >= 0)."""
        _checks.batch_size("batch_size", batch_size)
        return EmptyState()

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(zeros (B, d_model), state)``."""
        _checks.token("x_t", x_t, self.d_model)
        return x_t * 0, state


class UniformAverage(nn.Module):
    """Control: every position reads the plain average of the values of the tokens it may see,
    ``y_i = W_o mean_{j <= i} (W_v x_j)`` (causal) or the mean over all real tokens (bidirectional).

    ``O(N)`` by a cumulative sum, in at least float32; ``n_heads`` is accepted for the common interface (uniform
    weights are the same in every head). Decodes with a constant-size :class:`UniformAverageState`.
    """

    def __init__(self, d_model, n_heads=1, *, causal=False):
        super().__init__()
        d_model, n_heads = _checks.heads(d_model, n_heads)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, _checks.boolean("causal", causal)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)``, ``key_padding_mask (B, N)`` bool (``True`` = real, the opposite of
        ``torch.nn.MultiheadAttention``; a row with no ``True`` entry is refused) -> ``(B, N, d_model)``."""
        _checks.sequence("x", x, self.d_model)
        _checks.matching_dtype("x", x, self.v_proj.weight, "the mixer")
        if key_padding_mask is not None:
            _checks.real_token_mask("key_padding_mask", key_padding_mask, tuple(x.shape[:2]), "(B, N)")
        v = self.v_proj(x)
        dtype = torch.promote_types(v.dtype, torch.float32)
        with torch.autocast(device_type=x.device.type, enabled=False):
            values = v.to(dtype)
            if key_padding_mask is None:
                weights = torch.ones(x.shape[:2], dtype=dtype, device=x.device)
            else:
                weights = key_padding_mask.to(dtype)
                values = values * weights[..., None]
            if self.causal:
                totals, counts = values.cumsum(1), weights.cumsum(1)
            else:
                totals, counts = values.sum(1, keepdim=True), weights.sum(1, keepdim=True)
            mean = totals / counts.clamp_min(1.0)[..., None]
        return self.out_proj(mean.to(v.dtype).expand_as(v))

    def init_state(self, batch_size):
        """A zero running sum (``batch_size`` >= 0)."""
        _checks.batch_size("batch_size", batch_size)
        weight = self.v_proj.weight
        return UniformAverageState(weight.new_zeros(batch_size, self.d_model, dtype=torch.promote_types(
            weight.dtype, torch.float32)))

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        if not self.causal:
            raise ValueError("step() needs a causal mixer (built with causal=True)")
        _checks.token("x_t", x_t, self.d_model)
        _checks.matching_dtype("x_t", x_t, self.v_proj.weight, "the mixer")
        v = self.v_proj(x_t)
        state = UniformAverageState(state.total + v.to(state.total.dtype), state.position + 1)
        return self.out_proj((state.total / state.position).to(v.dtype)), state

