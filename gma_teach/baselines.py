"""The paper's comparators as sequence mixers with GMA's interface (chapter 8).

Every mixer maps ``x (B, N, d_model) -> (B, N, d_model)`` and is built by one factory::

    mixer = gma_teach.make_mixer("performer", d_model=256, n_heads=4, causal=True, n_features=128)

=============  =====================================================================  ==================
name           what it computes                                                       memory in N
=============  =====================================================================  ==================
``gma``        :class:`gma_teach.GaussianMixtureAttention` (options passed through)    linear (fixed K)
``softmax``    eager softmax attention: the ``(B, H, N, N)`` matrix is materialized   quadratic
``sdpa``       ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels)   linear on GPU
``linear``     Linear Transformer, feature map ``elu(x) + 1``                         linear
``performer``  FAVOR+ with positive orthogonal random features                        linear
``linformer``  keys and values projected along the sequence to length ``k``           linear (params too)
``mamba``      selective state-space block (Mamba-1), pure PyTorch chunked scan       linear
``uniform``    control: the mean of the values of all (causal: past) tokens           linear
``none``       control: no mixing at all, the mixer returns zeros                     none
=============  =====================================================================  ==================

The two controls bracket what a mixer buys: ``none`` is a model with no context (each position sees only itself),
``uniform`` the simplest context (a bag of the past). A mixer is worth what it recovers of SDPA's gain over them.

Bidirectional mixers accept ``key_padding_mask (B, N)`` (``True`` = real token) so that padding cannot leak into
real tokens. Causal mixers other than GMA also decode one token at a time with ``state = mixer.init_state(B)``
and ``y_t, state = mixer.step(x_t (B, d_model), state)``: a growing key/value cache for ``softmax``/``sdpa``,
a constant-size state for ``linear``, ``performer``, ``mamba`` and ``uniform`` (``none`` keeps an empty one).

:data:`MIXERS` maps every name to its class; :func:`make_mixer` builds from it.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layer import GaussianMixtureAttention


# ----------------------------------------------------------------------------------------------------------------
# Functional forms (used by the modules and by the tests)
# ----------------------------------------------------------------------------------------------------------------
def softmax_attention(q, k, v, *, causal=False, key_padding_mask=None):
    """Eager softmax attention ``softmax(q k^T / sqrt(d)) v``.

    Args:
        q, k: ``(B, H, N, d)``; v: ``(B, H, N, d_v)``.
        causal: mask out keys after the query.
        key_padding_mask: ``(B, N)`` bool, ``True`` for real tokens, or ``None``.

    Returns:
        ``(B, H, N, d_v)``. The ``(B, H, N, N)`` score matrix is stored, hence quadratic memory.
    """
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    mask = _attention_mask(q.shape[-2], k.shape[-2], causal, key_padding_mask, q.device)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _attention_mask(n_q, n_k, causal, key_padding_mask, device):
    """Boolean mask broadcastable to ``(B, H, N_q, N_k)`` (``True`` = attend), or ``None``."""
    mask = None
    if causal:
        mask = torch.ones(n_q, n_k, dtype=torch.bool, device=device).tril(n_k - n_q)
    if key_padding_mask is not None:
        keys = key_padding_mask[:, None, None, :]
        mask = keys if mask is None else mask & keys
    return mask


def elu_feature_map(x):
    """The Linear Transformer's positive feature map ``phi(x) = elu(x) + 1``."""
    return F.elu(x) + 1


def linear_attention(phi_q, phi_k, v, *, causal=False, eps=1e-6, chunk_size=64):
    """Normalized kernel attention ``phi(q) [phi(k)^T v] / (phi(q) [phi(k)^T 1] + eps)`` without an N x N matrix.

    Args:
        phi_q, phi_k: non-negative features ``(B, H, N, m)``; v: ``(B, H, N, d_v)``.
        causal: prefix sums instead of full sums. Computed in chunks of ``chunk_size`` tokens: inside a chunk a
            masked ``(C, C)`` product, across chunks a running ``(m, d_v)`` state, so memory is
            ``O(N/C * m * d_v + N * C)`` per head.
        eps: added to the normalizer.

    Returns:
        ``(B, H, N, d_v)``.
    """
    if not causal:
        memory = phi_k.transpose(-1, -2) @ v  # (B, H, m, d_v)
        normalizer = phi_k.sum(dim=-2)  # (B, H, m)
        return (phi_q @ memory) / ((phi_q @ normalizer.unsqueeze(-1)) + eps)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    n = phi_q.shape[-2]
    pad = (-n) % chunk_size
    if pad:
        phi_q, phi_k, v = (F.pad(t, (0, 0, 0, pad)) for t in (phi_q, phi_k, v))
    *lead, n_padded, m = phi_q.shape
    n_chunks = n_padded // chunk_size
    q_c = phi_q.reshape(*lead, n_chunks, chunk_size, m)
    k_c = phi_k.reshape(*lead, n_chunks, chunk_size, m)
    v_c = v.reshape(*lead, n_chunks, chunk_size, v.shape[-1])
    # Ones column appended to v: the same products give the normalizer.
    v_c = torch.cat([v_c, torch.ones_like(v_c[..., :1])], dim=-1)
    chunk_memory = k_c.transpose(-1, -2) @ v_c  # (B, H, n_chunks, m, d_v + 1)
    running = torch.cumsum(chunk_memory, dim=-3)
    before = torch.cat([torch.zeros_like(running[..., :1, :, :]), running[..., :-1, :, :]], dim=-3)
    within = (q_c @ k_c.transpose(-1, -2)).tril()  # (B, H, n_chunks, C, C)
    out = within @ v_c + q_c @ before
    out = out[..., :-1] / (out[..., -1:] + eps)
    return out.reshape(*lead, n_padded, -1)[..., :n, :]


def orthogonal_random_features(n_features, dim, *, generator=None, dtype=torch.float32, device=None):
    """FAVOR+ projection ``(n_features, dim)``: blocks of orthonormal rows, each row rescaled to the norm of an
    independent Gaussian vector so that every row is marginally ``N(0, I)`` (Choromanski et al., 2021)."""
    if n_features < 1 or dim < 1:
        raise ValueError(f"n_features and dim must be >= 1, got n_features={n_features}, dim={dim}")
    blocks = []
    for _ in range(math.ceil(n_features / dim)):
        gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
        orthonormal, _ = torch.linalg.qr(gaussian)
        blocks.append(orthonormal.T)
    rows = torch.cat(blocks)[:n_features]
    norms = torch.randn(n_features, dim, generator=generator, dtype=torch.float64).norm(dim=-1, keepdim=True)
    return (rows * norms).to(dtype=dtype, device=device)


def favor_features(x, projection, *, is_query):
    """Positive random features ``exp(w^T x' - |x'|^2/2) / sqrt(m)`` with ``x' = x / d^(1/4)``, so that
    ``E[phi(q)^T phi(k)] = exp(q^T k / sqrt(d))``. Computed in float32 or wider (under autocast too).

    A query's features are divided by their own maximum (it cancels in that query's normalization). Keys are
    divided by the data-independent bound ``exp(max_r |w_r|^2 / 2)`` of every feature, which cancels for all
    queries and, unlike a maximum over keys, does not let future tokens change past outputs.

    Args:
        x: ``(..., N, d)``; projection: ``(m, d)``.

    Returns:
        ``(..., N, m)``.
    """
    dtype = torch.promote_types(x.dtype, torch.float32)
    with torch.autocast(device_type=x.device.type, enabled=False):
        x = x.to(dtype) * x.shape[-1] ** -0.25
        projection = projection.to(dtype)
        logits = x @ projection.T - 0.5 * (x * x).sum(dim=-1, keepdim=True)
        if is_query:
            stabilizer = logits.amax(dim=-1, keepdim=True).detach()
        else:
            stabilizer = 0.5 * (projection * projection).sum(dim=-1).max()
        return torch.exp(logits - stabilizer) / math.sqrt(projection.shape[0])


# ----------------------------------------------------------------------------------------------------------------
# Multi-head modules
# ----------------------------------------------------------------------------------------------------------------
def _check_sizes(d_model, n_heads):
    for name, value in (("d_model", d_model), ("n_heads", n_heads)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if d_model % n_heads:
        raise ValueError(f"d_model must be divisible by n_heads, got d_model={d_model}, n_heads={n_heads}")


def _check_input(x, d_model):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor of shape (B, N, d_model), got {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"x must have shape (B, N, {d_model}), got {tuple(x.shape)}")


def _nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


@dataclass
class KVCache:
    """Decoding state of softmax attention: all keys and values so far, ``(B, H, t, d_head)`` (grows with t)."""

    keys: torch.Tensor
    values: torch.Tensor

    def nbytes(self) -> int:
        """Bytes held by the cache (grows by ``2 B H d_head`` elements a token)."""
        return _nbytes(self.keys, self.values)


@dataclass
class LinearAttentionState:
    """Decoding state of kernel attention: ``memory (B, H, m, d_head)`` and ``normalizer (B, H, m)``."""

    memory: torch.Tensor
    normalizer: torch.Tensor

    def nbytes(self) -> int:
        """Bytes held by the state (constant)."""
        return _nbytes(self.memory, self.normalizer)


class _MultiHeadMixer(nn.Module):
    """Shared q/k/v/out projections ``d_model -> d_model`` split into ``n_heads`` heads of ``d_model // n_heads``."""

    def __init__(self, d_model, n_heads, causal):
        super().__init__()
        _check_sizes(d_model, n_heads)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, bool(causal)
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
        """``x (B, N, d_model)``, ``key_padding_mask (B, N)`` bool (``True`` = real) -> ``(B, N, d_model)``."""
        _check_input(x, self.d_model)
        if key_padding_mask is not None and key_padding_mask.shape != x.shape[:2]:
            raise ValueError(f"key_padding_mask must have shape {tuple(x.shape[:2])}, "
                             f"got {tuple(key_padding_mask.shape)}")
        q, k, v = (self._heads(p, x) for p in (self.q_proj, self.k_proj, self.v_proj))
        return self._merge(self._mix(q, k, v, key_padding_mask))

    def _check_step(self, x_t):
        if not self.causal:
            raise ValueError("step() needs a causal mixer (built with causal=True)")
        if x_t.dim() != 2 or x_t.shape[-1] != self.d_model:
            raise ValueError(f"x_t must have shape (B, {self.d_model}), got {tuple(x_t.shape)}")


class SoftmaxAttention(_MultiHeadMixer):
    """Multi-head softmax attention in the eager form (the ``(B, H, N, N)`` matrix is materialized)."""

    def __init__(self, d_model, n_heads, *, causal=False):
        super().__init__(d_model, n_heads, causal)

    def _mix(self, q, k, v, key_padding_mask):
        return softmax_attention(q, k, v, causal=self.causal, key_padding_mask=key_padding_mask)

    def init_state(self, batch_size):
        """An empty key/value cache."""
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
        mask = _attention_mask(q.shape[-2], k.shape[-2], self.causal, key_padding_mask, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class _KernelAttention(_MultiHeadMixer):
    """Normalized kernel attention with a feature map ``_features(x, is_query)``; see :func:`linear_attention`."""

    def __init__(self, d_model, n_heads, causal, eps, chunk_size):
        super().__init__(d_model, n_heads, causal)
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        if not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
        self.eps, self.chunk_size = eps, chunk_size

    def _mix(self, q, k, v, key_padding_mask):
        phi_q, phi_k = self._features(q, True), self._features(k, False)
        if key_padding_mask is not None:
            phi_k = phi_k * key_padding_mask[:, None, :, None].to(phi_k.dtype)
        out = linear_attention(phi_q, phi_k, v.to(phi_q.dtype), causal=self.causal, eps=self.eps,
                               chunk_size=self.chunk_size)
        return out.to(v.dtype)

    def init_state(self, batch_size):
        """Zero memory and normalizer: constant size, whatever the position."""
        m = self._n_features()
        weight = self.k_proj.weight
        memory = weight.new_zeros(batch_size, self.n_heads, m, self.head_dim)
        return LinearAttentionState(memory, weight.new_zeros(batch_size, self.n_heads, m))

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        self._check_step(x_t)
        x = x_t[:, None, :]
        q, k, v = (self._heads(p, x) for p in (self.q_proj, self.k_proj, self.v_proj))
        phi_q, phi_k = self._features(q, True)[:, :, 0], self._features(k, False)[:, :, 0]  # (B, H, m)
        memory = state.memory + phi_k[..., :, None] * v[:, :, 0, None, :]
        normalizer = state.normalizer + phi_k
        numerator = (phi_q[..., None, :] @ memory)[..., 0, :]
        y = numerator / ((phi_q * normalizer).sum(-1, keepdim=True) + self.eps)
        return self._merge(y[:, :, None, :].to(v.dtype))[:, 0], LinearAttentionState(memory, normalizer)


class LinearAttention(_KernelAttention):
    """Linear Transformer (Katharopoulos et al., 2020): ``phi = elu + 1``; causal by chunked prefix sums."""

    def __init__(self, d_model, n_heads, *, causal=False, eps=1e-6, chunk_size=64):
        super().__init__(d_model, n_heads, causal, eps, chunk_size)

    def _features(self, x, is_query):
        return elu_feature_map(x)

    def _n_features(self):
        return self.head_dim


class PerformerAttention(_KernelAttention):
    """Performer (Choromanski et al., 2021): FAVOR+ positive orthogonal random features approximating softmax.

    The projection ``(n_features, d_head)`` is a buffer (not trained); :meth:`redraw_features` draws a new one.
    """

    def __init__(self, d_model, n_heads, *, causal=False, n_features=256, eps=1e-6, chunk_size=64):
        super().__init__(d_model, n_heads, causal, eps, chunk_size)
        if not isinstance(n_features, int) or isinstance(n_features, bool) or n_features < 1:
            raise ValueError(f"n_features must be a positive int, got {n_features!r}")
        self.n_features = n_features
        self.register_buffer("projection", orthogonal_random_features(n_features, self.head_dim))

    def redraw_features(self, generator=None):
        """Replace the random projection by a fresh draw."""
        self.projection.copy_(orthogonal_random_features(self.n_features, self.head_dim, generator=generator))

    def _features(self, x, is_query):
        return favor_features(x, self.projection, is_query=is_query)

    def _n_features(self):
        return self.n_features


class LinformerAttention(_MultiHeadMixer):
    """Linformer (Wang et al., 2020): keys and values are projected along the sequence by learned ``E, F``
    ``(k, max_seq_len)`` (shared by the heads), then softmax attention over ``k`` slots. Sequences shorter than
    ``max_seq_len`` use the first ``N`` columns. Parameters grow with ``max_seq_len``; bidirectional only.
    """

    def __init__(self, d_model, n_heads, *, causal=False, max_seq_len=None, k=256):
        if causal:
            raise ValueError("linformer is bidirectional only: its sequence projections mix future tokens into "
                             "every slot; use causal=False (or another mixer for causal models)")
        super().__init__(d_model, n_heads, causal=False)
        if not isinstance(max_seq_len, int) or isinstance(max_seq_len, bool) or max_seq_len < 1:
            raise ValueError(f"linformer needs max_seq_len, a positive int, got {max_seq_len!r}")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"linformer k must be a positive int, got {k!r}")
        self.max_seq_len, self.k = max_seq_len, k
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


# ----------------------------------------------------------------------------------------------------------------
# Controls
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class EmptyState:
    """Decoding state of :class:`NoMixing`: nothing (0 bytes)."""

    def nbytes(self) -> int:
        """Bytes held by the state: 0."""
        return 0


@dataclass
class UniformAverageState:
    """Decoding state of :class:`UniformAverage`: the running sum of the values ``(B, d_model)`` and the number of
    tokens summed (constant size)."""

    total: torch.Tensor
    position: int = 0

    def nbytes(self) -> int:
        """Bytes held by the state (constant)."""
        return _nbytes(self.total)


class NoMixing(nn.Module):
    """Control: no sequence mixing. ``forward(x)`` returns zeros ``(B, N, d_model)`` (kept on the autograd graph with
    a zero gradient, so a model built with it trains unchanged); each position of a model sees only itself.

    ``n_heads`` and ``causal`` are accepted for the common interface (it is causal and bidirectional alike)."""

    def __init__(self, d_model, n_heads=1, *, causal=False):
        super().__init__()
        _check_sizes(d_model, n_heads)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, bool(causal)

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)`` -> zeros of the same shape."""
        _check_input(x, self.d_model)
        return x * 0

    def init_state(self, batch_size):
        """The empty state."""
        return EmptyState()

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(zeros (B, d_model), state)``."""
        if x_t.dim() != 2 or x_t.shape[-1] != self.d_model:
            raise ValueError(f"x_t must have shape (B, {self.d_model}), got {tuple(x_t.shape)}")
        return x_t * 0, state


class UniformAverage(nn.Module):
    """Control: every position reads the plain average of the values of the tokens it may see,
    ``y_i = W_o mean_{j <= i} (W_v x_j)`` (causal) or the mean over all real tokens (bidirectional).

    ``O(N)`` by a cumulative sum, in at least float32; ``n_heads`` is accepted for the common interface (uniform
    weights are the same in every head). Decodes with a constant-size :class:`UniformAverageState`.
    """

    def __init__(self, d_model, n_heads=1, *, causal=False):
        super().__init__()
        _check_sizes(d_model, n_heads)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, bool(causal)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)``, ``key_padding_mask (B, N)`` bool (``True`` = real) -> ``(B, N, d_model)``."""
        _check_input(x, self.d_model)
        if key_padding_mask is not None and key_padding_mask.shape != x.shape[:2]:
            raise ValueError(f"key_padding_mask must have shape {tuple(x.shape[:2])}, "
                             f"got {tuple(key_padding_mask.shape)}")
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
        """A zero running sum."""
        weight = self.v_proj.weight
        return UniformAverageState(weight.new_zeros(batch_size, self.d_model, dtype=torch.promote_types(
            weight.dtype, torch.float32)))

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        if not self.causal:
            raise ValueError("step() needs a causal mixer (built with causal=True)")
        if x_t.dim() != 2 or x_t.shape[-1] != self.d_model:
            raise ValueError(f"x_t must have shape (B, {self.d_model}), got {tuple(x_t.shape)}")
        v = self.v_proj(x_t)
        state = UniformAverageState(state.total + v.to(state.total.dtype), state.position + 1)
        return self.out_proj((state.total / state.position).to(v.dtype)), state


# ----------------------------------------------------------------------------------------------------------------
# Mamba
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class MambaState:
    """Decoding state of :class:`MambaMixer`: the last ``d_conv - 1`` conv inputs ``(B, d_inner, d_conv - 1)`` and
    the SSM state ``(B, d_inner, d_state)``: constant size."""

    conv: torch.Tensor
    ssm: torch.Tensor

    def nbytes(self) -> int:
        """Bytes held by the state (constant)."""
        return _nbytes(self.conv, self.ssm)


def selective_scan_sequential(x, dt, a, b, c, d):
    """The selective scan as a loop (the spec): ``h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t``,
    ``y_t = C_t . h_t + D x_t``.

    Args:
        x, dt: ``(B, L, D)``; a: ``(D, S)`` (negative); b, c: ``(B, L, S)``; d: ``(D,)``.

    Returns:
        ``y (B, L, D)``.
    """
    h = x.new_zeros(x.shape[0], x.shape[2], a.shape[1])
    ys = []
    for t in range(x.shape[1]):
        h = torch.exp(dt[:, t, :, None] * a) * h + (dt[:, t] * x[:, t])[..., None] * b[:, t, None, :]
        ys.append((h * c[:, t, None, :]).sum(-1))
    return torch.stack(ys, dim=1) + x * d


def selective_scan_chunked(x, dt, a, b, c, d, *, chunk_size=32, max_log_decay=60.0):
    """The same scan, parallel inside chunks of ``chunk_size`` tokens, sequential across chunks.

    Inside a chunk, with ``L_t = sum_{s<=t} dt_s A`` (log decay from the chunk start),
    ``h_t = exp(L_t) (h_0 + sum_{s<=t} exp(-L_s) dt_s B_s x_s)``: one cumsum. Each rounding error stays relative
    to ``|dt B x|``; ``exp(-L_s)`` must not overflow, so a chunk whose total log decay exceeds ``max_log_decay``
    is split in halves (recursively; a chunk of one token is the exact recurrence). Memory holds the states
    ``(B, L, D, S)``, which is what a fused kernel (``mamba_ssm``) avoids.
    """
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size!r}")
    h = x.new_zeros(x.shape[0], x.shape[2], a.shape[1])
    ys = []
    for start in range(0, x.shape[1], chunk_size):
        part = slice(start, start + chunk_size)
        y, h = _scan_chunk(dt[:, part], dt[:, part] * x[:, part], a, b[:, part], c[:, part], h, max_log_decay)
        ys.append(y)
    return torch.cat(ys, dim=1) + x * d


def _scan_chunk(dt, dt_x, a, b, c, h0, max_log_decay):
    """One chunk of :func:`selective_scan_chunked`: returns ``(y (B, C, D), h_last (B, D, S))``."""
    log_decay = torch.cumsum(dt[..., None] * a, dim=1)  # (B, C, D, S), non-increasing in t
    length = dt.shape[1]
    if length > 1 and float(-log_decay[:, -1].detach().min()) > max_log_decay:
        half = length // 2
        y1, h = _scan_chunk(dt[:, :half], dt_x[:, :half], a, b[:, :half], c[:, :half], h0, max_log_decay)
        y2, h = _scan_chunk(dt[:, half:], dt_x[:, half:], a, b[:, half:], c[:, half:], h, max_log_decay)
        return torch.cat([y1, y2], dim=1), h
    inputs = dt_x[..., None] * b[:, :, None, :]  # (B, C, D, S)
    states = torch.exp(log_decay) * (h0[:, None] + torch.cumsum(torch.exp(-log_decay) * inputs, dim=1))
    y = (states * c[:, :, None, :]).sum(-1)
    return y, states[:, -1]


class MambaMixer(nn.Module):
    """A Mamba-1 block (Gu and Dao): in-projection to ``x, z`` of width ``d_inner = expand * d_model``, causal
    depthwise conv, input-dependent ``dt, B, C``, selective scan, gate ``silu(z)``, out-projection.

    Causal by construction (``causal=False`` gives the same mixer: it reads left to right); ``n_heads`` is
    accepted for the common interface and unused. On CUDA with ``mamba_ssm`` installed the scan runs in its fused
    kernel; otherwise :func:`selective_scan_chunked`.
    """

    def __init__(self, d_model, n_heads=1, *, causal=True, d_state=16, d_conv=4, expand=2, dt_rank=None,
                 chunk_size=32):
        super().__init__()
        _check_sizes(d_model, n_heads)
        for name, value in (("d_state", d_state), ("d_conv", d_conv), ("expand", expand), ("chunk_size", chunk_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"mamba {name} must be a positive int, got {value!r}")
        self.d_model, self.n_heads, self.causal = d_model, n_heads, bool(causal)
        self.d_inner, self.d_state, self.d_conv, self.chunk_size = expand * d_model, d_state, d_conv, chunk_size
        self.dt_rank = dt_rank if dt_rank is not None else math.ceil(d_model / 16)
        self.in_proj = nn.Linear(d_model, 2 * self.d_inner)
        self.conv = nn.Conv1d(self.d_inner, self.d_inner, d_conv, groups=self.d_inner, padding=d_conv - 1)
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner)
        self.a_log = nn.Parameter(torch.log(torch.arange(1, d_state + 1, dtype=torch.float32)).repeat(self.d_inner, 1))
        self.skip = nn.Parameter(torch.ones(self.d_inner))
        self.out_proj = nn.Linear(self.d_inner, d_model)
        with torch.no_grad():  # dt initialized log-uniformly in [1e-3, 1e-1], as in the reference implementation
            dt = torch.exp(torch.rand(self.d_inner) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))

    def _ssm_inputs(self, u):
        """``u (B, L, d_inner)`` after conv and silu -> ``dt (B, L, D), a (D, S), b, c (B, L, S)``."""
        dt_low, b, c = self.x_proj(u).split([self.dt_rank, self.d_state, self.d_state], dim=-1)
        return F.softplus(self.dt_proj(dt_low)), -torch.exp(self.a_log.float()), b, c

    def forward(self, x, *, sequential=False):
        """``x (B, L, d_model) -> (B, L, d_model)``; ``sequential=True`` uses the loop spec."""
        _check_input(x, self.d_model)
        length = x.shape[1]
        u, z = self.in_proj(x).chunk(2, dim=-1)
        u = F.silu(self.conv(u.transpose(1, 2))[..., :length].transpose(1, 2))
        dt, a, b, c = self._ssm_inputs(u)
        if _mamba_kernel_available(x) and not sequential:
            from mamba_ssm.ops.selective_scan_interface import selective_scan_fn

            y = selective_scan_fn(u.transpose(1, 2).contiguous(), dt.transpose(1, 2).contiguous(), a,
                                  b.transpose(1, 2).contiguous(), c.transpose(1, 2).contiguous(),
                                  self.skip.float()).transpose(1, 2)
        else:
            scan = selective_scan_sequential if sequential else selective_scan_chunked
            options = {} if sequential else {"chunk_size": self.chunk_size}
            with torch.autocast(device_type=x.device.type, enabled=False):
                dtype = torch.promote_types(u.dtype, torch.float32)
                y = scan(u.to(dtype), dt.to(dtype), a.to(dtype), b.to(dtype), c.to(dtype), self.skip.to(dtype),
                         **options)
        return self.out_proj(y.to(z.dtype) * F.silu(z))

    def init_state(self, batch_size):
        """Zero conv buffer and SSM state."""
        weight = self.in_proj.weight
        return MambaState(weight.new_zeros(batch_size, self.d_inner, self.d_conv - 1),
                          weight.new_zeros(batch_size, self.d_inner, self.d_state))

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        if x_t.dim() != 2 or x_t.shape[-1] != self.d_model:
            raise ValueError(f"x_t must have shape (B, {self.d_model}), got {tuple(x_t.shape)}")
        u, z = self.in_proj(x_t).chunk(2, dim=-1)
        window = torch.cat([state.conv, u[..., None]], dim=-1)  # (B, D, d_conv)
        u = F.silu((window * self.conv.weight[:, 0]).sum(-1) + self.conv.bias)
        dt, a, b, c = self._ssm_inputs(u[:, None])
        dt, b, c = dt[:, 0], b[:, 0], c[:, 0]
        h = torch.exp(dt[..., None] * a) * state.ssm + (dt * u)[..., None] * b[:, None, :]
        y = (h * c[:, None, :]).sum(-1) + u * self.skip
        return self.out_proj(y * F.silu(z)), MambaState(window[..., 1:], h)


def _mamba_kernel_available(x):
    if not x.is_cuda:
        return False
    try:
        import mamba_ssm.ops.selective_scan_interface  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------------------------------------------
# The factory
# ----------------------------------------------------------------------------------------------------------------
MIXERS = {
    "gma": GaussianMixtureAttention,
    "softmax": SoftmaxAttention,
    "sdpa": SDPAttention,
    "linear": LinearAttention,
    "performer": PerformerAttention,
    "linformer": LinformerAttention,
    "mamba": MambaMixer,
    "uniform": UniformAverage,
    "none": NoMixing,
}
"""Every sequence mixer by name: ``name -> class``, each built as ``cls(d_model, n_heads, causal=..., **options)``."""

MIXER_NAMES = tuple(MIXERS)
"""The names of :data:`MIXERS`, in the book's order."""


def mixer_types() -> tuple:
    """The distinct mixer classes (for ``isinstance`` checks)."""
    return tuple(dict.fromkeys(MIXERS.values()))


def make_mixer(name, d_model, n_heads, *, causal=False, **options):
    """Build a sequence mixer ``(B, N, d_model) -> (B, N, d_model)`` by name.

    Args:
        name: one of :data:`gma_teach.baselines.MIXER_NAMES`.
        d_model, n_heads: width and heads (``d_model % n_heads == 0``; ``mamba`` ignores ``n_heads``).
        causal: whether position ``i`` may only read positions ``<= i``.
        **options: per mixer --
            ``gma``: ``n_components`` (default 64) and any other keyword of
            :class:`gma_teach.GaussianMixtureAttention` (``d_route``, ``impl``, ``chunk_size``, and the routing
            remedies ``init_variance``, ``init_mean_std``, ``balance_weight``, ``balance_form``);
            ``linear``: ``eps``, ``chunk_size``; ``performer``: ``n_features`` (256), ``eps``, ``chunk_size``;
            ``linformer``: ``max_seq_len`` (required), ``k`` (256); ``mamba``: ``d_state`` (16), ``d_conv`` (4),
            ``expand`` (2), ``dt_rank``, ``chunk_size``; ``softmax``, ``sdpa``, ``uniform``, ``none``: none.

    Returns:
        an ``nn.Module``.
    """
    if name not in MIXERS:
        raise ValueError(f"unknown mixer name {name!r}; known names: {', '.join(MIXER_NAMES)}")
    cls = MIXERS[name]
    if name == "gma":
        options.setdefault("n_components", 64)
        return cls(d_model, n_heads, options.pop("n_components"), causal=causal, **options)
    allowed = _keyword_options(cls)
    unknown = set(options) - allowed
    if unknown:
        raise ValueError(f"mixer {name!r} got unknown options {sorted(unknown)}; "
                         f"it accepts {sorted(allowed) or 'none'}")
    return cls(d_model, n_heads, causal=causal, **options)


def _keyword_options(cls) -> set:
    """The keyword-only options of a mixer class's constructor, besides ``causal``."""
    parameters = inspect.signature(cls.__init__).parameters.values()
    return {p.name for p in parameters if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "causal"}
