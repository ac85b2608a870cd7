"""The multi-head attention baselines: softmax (eager and SDPA), linear attention, Performer and Linformer, with their
decoding states. A private module of :mod:`gma_teach.baselines`, which exports its names."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .. import _checks
from ..mixing import DecodingState, GMAState, read_memory, recurrent_step
from ._functional import (
    FAVOR_MAX_EXPONENT,
    attention_mask,
    elu_feature_map,
    favor_attention,
    favor_logits,
    linear_attention,
    orthogonal_random_features,
    softmax_attention,
)


@dataclass
class KVCache(DecodingState):
    """Decoding state of softmax attention: all keys and values so far, ``(B, H, t, d_head)`` (grows with t, by
    ``2 B H d_head`` elements a token)."""

    keys: torch.Tensor
    values: torch.Tensor


LinearAttentionState = GMAState  # documented in gma_teach.baselines, which exports it


class MultiHeadMixer(nn.Module):
    """Base of the attention baselines: q/k/v/out projections ``d_model -> d_model`` split into ``n_heads`` heads
    of ``d_model // n_heads``; subclasses define ``_mix(q, k, v, key_padding_mask)`` on ``(B, H, N, d_head)``."""

    def __init__(self, d_model, n_heads, causal):
        super().__init__()
        d_model, n_heads = _checks.heads(d_model, n_heads)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, _checks.boolean("causal", causal)
        self.head_dim = d_model // n_heads
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _heads(self, projection, x):
        """``(B, N, d_model) -> (B, H, N, d_head)``."""
        b, n, _ = x.shape
        return projection(x).view(b, n, self.n_heads, self.head_dim).transpose(1, 2)

    def _merge(self, y):
        """``(B, H, N, d_head) -> (B, N, d_model)`` through the output projection."""
        b, _, n, _ = y.shape
        return self.out_proj(y.transpose(1, 2).reshape(b, n, self.d_model))

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)``, ``key_padding_mask (B, N)`` bool (``True`` = real, the opposite of
        ``torch.nn.MultiheadAttention``; a row with no ``True`` entry is refused) -> ``(B, N, d_model)``."""
        _checks.sequence("x", x, self.d_model)
        _checks.matching_dtype("x", x, self.q_proj.weight, "the mixer")
        if key_padding_mask is not None:
            _checks.real_token_mask("key_padding_mask", key_padding_mask, tuple(x.shape[:2]), "(B, N)")
        q, k, v = (self._heads(p, x) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self._merge(self._mix(q, k, v, key_padding_mask))

    def _check_step(self, x_t):
        if not self.causal:
            raise ValueError("step() needs a causal mixer (built with causal=True)")
        _checks.token("x_t", x_t, self.d_model)
        _checks.matching_dtype("x_t", x_t, self.q_proj.weight, "the mixer")


class SoftmaxAttention(MultiHeadMixer):
    """Multi-head softmax attention in the eager form (the ``(B, H, N, N)`` matrix is materialized)."""

    def __init__(self, d_model, n_heads, *, causal=False):
        super().__init__(d_model, n_heads, causal)

    def _mix(self, q, k, v, key_padding_mask):
        return softmax_attention(q, k, v, causal=self.causal, key_padding_mask=key_padding_mask)

    def init_state(self, batch_size):
        """An empty key/value cache (``batch_size`` >= 0)."""
        _checks.batch_size("batch_size", batch_size)
        weight = self.k_proj.weight
        empty = weight.new_zeros(batch_size, self.n_heads, 0, self.head_dim)
        return KVCache(empty, empty.clone())

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``; the cache grows by one."""
        self._check_step(x_t)
        x = x_t[:, None, :]
        q, k, v = (self._heads(p, x) for p in (self.q_proj, self.k_proj, self.v_proj))
        state = KVCache(torch.cat([state.keys, k], dim=2), torch.cat([state.values, v], dim=2))
        y = softmax_attention(q, state.keys, state.values)  # the newest query may see every cached key
        return self._merge(y)[:, 0], state


class SDPAttention(SoftmaxAttention):
    """Multi-head softmax attention through ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels);
    decodes like :class:`SoftmaxAttention`."""

    def _mix(self, q, k, v, key_padding_mask):
        if key_padding_mask is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        mask = attention_mask(q.shape[-2], k.shape[-2], self.causal, key_padding_mask, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class _KernelAttention(MultiHeadMixer):
    """Normalized kernel attention with a feature map ``_features(x, is_query)``; see :func:`linear_attention`."""

    def __init__(self, d_model, n_heads, causal, eps, chunk_size):
        super().__init__(d_model, n_heads, causal)
        self.eps = _checks.positive_number("eps", eps)
        self.chunk_size = _checks.positive_int("chunk_size", chunk_size)

    def _mix(self, q, k, v, key_padding_mask):
        phi_q, phi_k = self._features(q, True), self._features(k, False)
        if key_padding_mask is not None:
            phi_k = phi_k * key_padding_mask[:, None, :, None].to(phi_k.dtype)
        return linear_attention(phi_q, phi_k, v, causal=self.causal, eps=self.eps, chunk_size=self.chunk_size)

    def init_state(self, batch_size):
        """Zero memory and normalizer: constant size, whatever the position (``batch_size`` >= 0). In float32 at
        least: a half-precision layer's running sums would drift over a long generation."""
        _checks.batch_size("batch_size", batch_size)
        m = self._n_features()
        weight = self.k_proj.weight
        return LinearAttentionState.zeros((batch_size, self.n_heads), m, self.head_dim,
                                          dtype=torch.promote_types(weight.dtype, torch.float32), device=weight.device)

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        self._check_step(x_t)
        x = x_t[:, None, :]
        q, k, v = (self._heads(p, x) for p in (self.q_proj, self.k_proj, self.v_proj))
        phi_q, phi_k = self._features(q, True)[:, :, 0], self._features(k, False)[:, :, 0]  # (B, H, m)
        dtype = state.memory.dtype
        y, state = recurrent_step(phi_q.to(dtype), phi_k.to(dtype), v[:, :, 0].to(dtype), state, self.eps)
        return self._merge(y[:, :, None, :].to(v.dtype))[:, 0], state


class LinearAttention(_KernelAttention):
    """Linear Transformer (Katharopoulos et al., 2020): ``phi = elu + 1``; causal by chunked prefix sums."""

    def __init__(self, d_model, n_heads, *, causal=False, eps=1e-6, chunk_size=64):
        super().__init__(d_model, n_heads, causal, eps, chunk_size)

    def _features(self, x, is_query):
        return elu_feature_map(x)

    def _n_features(self):
        return self.head_dim


@dataclass
class PerformerState(DecodingState):
    """Decoding state of :class:`PerformerAttention`: the memory ``(B, H, m, d_head)`` and normalizer ``(B, H, m)``
    of kernel attention, both relative to ``stabilizer (B, H)``, the largest key feature exponent so far (constant
    size: ``H (m d_head + m + 1)`` numbers a row)."""

    memory: torch.Tensor
    normalizer: torch.Tensor
    stabilizer: torch.Tensor
    position: int = 0


class PerformerAttention(_KernelAttention):
    """Performer (Choromanski et al., 2021): FAVOR+ positive orthogonal random features approximating softmax,
    computed by :func:`favor_attention` (stabilized so that the normalizer never sinks below ``eps``).

    The projection ``(n_features, d_head)`` is a buffer (not trained); :meth:`redraw_features` draws a new one.
    Decoding keeps a :class:`PerformerState`.
    """

    def __init__(self, d_model, n_heads, *, causal=False, n_features=256, eps=1e-6, chunk_size=64):
        super().__init__(d_model, n_heads, causal, eps, chunk_size)
        self.n_features = _checks.positive_int("n_features", n_features)
        self.register_buffer("projection", orthogonal_random_features(n_features, self.head_dim))

    def redraw_features(self, generator=None):
        """Replace the random projection by a fresh draw."""
        self.projection.copy_(orthogonal_random_features(self.n_features, self.head_dim, generator=generator))

    def _mix(self, q, k, v, key_padding_mask):
        return favor_attention(q, k, v, self.projection, causal=self.causal, eps=self.eps,
                               chunk_size=self.chunk_size, key_padding_mask=key_padding_mask)

    def _n_features(self):
        return self.n_features

    def init_state(self, batch_size):
        """Zero memory and normalizer, no key seen (``batch_size`` >= 0), in float32 at least."""
        _checks.batch_size("batch_size", batch_size)
        weight = self.k_proj.weight
        dtype = torch.promote_types(weight.dtype, torch.float32)
        zeros = LinearAttentionState.zeros((batch_size, self.n_heads), self.n_features, self.head_dim, dtype=dtype,
                                           device=weight.device)
        lowest = torch.full((batch_size, self.n_heads), torch.finfo(dtype).min, dtype=dtype, device=weight.device)
        return PerformerState(zeros.memory, zeros.normalizer, lowest)

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``, the same numbers as the causal
        forward (the memory is rescaled whenever a key raises the running maximum)."""
        self._check_step(x_t)
        x = x_t[:, None, :]
        q, k, v = (self._heads(p, x) for p in (self.q_proj, self.k_proj, self.v_proj))
        dtype, root_m = state.memory.dtype, math.sqrt(self.n_features)
        query_logits = favor_logits(q[:, :, 0], self.projection).to(dtype)  # (B, H, m)
        key_logits = favor_logits(k[:, :, 0], self.projection).to(dtype)
        stabilizer = torch.maximum(state.stabilizer, key_logits.amax(-1).detach())  # s
        decay = torch.exp(state.stabilizer - stabilizer)
        phi_k = torch.exp(key_logits - stabilizer[..., None]) / root_m
        value = v[:, :, 0].to(dtype)
        memory = state.memory * decay[..., None, None] + phi_k[..., None] * value[..., None, :]
        normalizer = state.normalizer * decay[..., None] + phi_k
        with torch.no_grad():  # c - s = max_r (l_r(q) + log sum_j exp(l_r(k_j) - s)), as in favor_attention
            shift = (query_logits + torch.log(normalizer * root_m)).amax(-1, keepdim=True)
        phi_q = torch.exp((query_logits - shift).clamp_max(FAVOR_MAX_EXPONENT)) / root_m
        y = read_memory(phi_q[..., None, :], memory, normalizer, self.eps)  # (B, H, 1, d_head)
        state = PerformerState(memory, normalizer, stabilizer, state.position + 1)
        return self._merge(y.to(v.dtype))[:, 0], state


class LinformerAttention(MultiHeadMixer):
    """Linformer (Wang et al., 2020): keys and values are projected along the sequence by learned ``E, F``
    ``(k, max_seq_len)`` (shared by the heads), then softmax attention over ``k`` slots. Sequences shorter than
    ``max_seq_len`` use the first ``N`` columns. Parameters grow with ``max_seq_len``; bidirectional only.
    """

    def __init__(self, d_model, n_heads, *, causal=False, max_seq_len=None, k=256):
        if causal:
            raise ValueError("linformer is bidirectional only: its sequence projections mix future tokens into "
                             "every slot; use causal=False (or another mixer for causal models)")
        super().__init__(d_model, n_heads, causal=False)
        if max_seq_len is None:
            raise ValueError("linformer needs max_seq_len (the longest input, a positive int), got None")
        self.max_seq_len = _checks.positive_int("max_seq_len", max_seq_len)
        self.k = _checks.positive_int("k", k)
        self.key_projection = nn.Parameter(torch.randn(k, max_seq_len) / math.sqrt(k))
        self.value_projection = nn.Parameter(torch.randn(k, max_seq_len) / math.sqrt(k))

    def _mix(self, q, k, v, key_padding_mask):
        n = k.shape[-2]
        if n > self.max_seq_len:
            raise ValueError(f"sequence length {n} exceeds linformer max_seq_len={self.max_seq_len}")
        if key_padding_mask is not None:
            keep = key_padding_mask[:, None, :, None].to(k.dtype)
            k, v = k * keep, v * keep
        keys = self.key_projection[:, :n].to(k.dtype) @ k  # (B, H, k, d_head)
        values = self.value_projection[:, :n].to(v.dtype) @ v
        return softmax_attention(q, keys, values)
