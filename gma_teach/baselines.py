"""The paper's comparators as sequence mixers with GMA's interface (chapter 8).

Every mixer maps ``x (B, N, d_model) -> (B, N, d_model)`` and is built by one factory::

    mixer = gma_teach.make_mixer("performer", d_model=256, n_heads=4, causal=True, n_features=128)

================  ==========================================================================  ====================
name              what it computes                                                            memory in N
================  ==========================================================================  ====================
``gma``           :class:`gma_teach.GaussianMixtureAttention` (options passed through)        linear (fixed K)
``softmax``       eager softmax attention: the ``(B, H, N, N)`` matrix is materialized        quadratic
``sdpa``          ``torch.nn.functional.scaled_dot_product_attention`` (fused kernels)        linear on GPU
``linear``        Linear Transformer, feature map ``elu(x) + 1``                              linear
``performer``     FAVOR+ with positive orthogonal random features                             linear
``linformer``     keys and values projected along the sequence to length ``k``                linear (params too)
``mamba``         selective state-space block (Mamba-1), pure PyTorch chunked scan            linear
``uniform``       control: the mean of the values of all (causal: past) tokens                linear
``none``          control: no mixing at all, the mixer returns zeros                          none
``window``        :class:`gma_teach.local.SlidingWindowAttention`: softmax over ``w`` keys    linear (fixed w)
``local_gma``     :class:`gma_teach.local.LocalGMA`: window heads + GMA heads (split)         linear
``decay_linear``  :class:`gma_teach.forgetting.DecayedLinearAttention` (RetNet decay)         linear (causal only)
``decay_gma``     :class:`gma_teach.forgetting.DecayedGaussianMixtureAttention`               linear (causal only)
``conv``          gated short causal convolution (after Zoology's BaseConv; chapter 12)             none (fixed k)
================  ==========================================================================  ====================

The two controls bracket what a mixer buys: ``none`` is a model with no context (each position sees only itself),
``uniform`` the simplest context (a bag of the past). A mixer is worth what it recovers of SDPA's gain over them.

Bidirectional mixers accept ``key_padding_mask (B, N)`` (``True`` = real token, the opposite of
``torch.nn.MultiheadAttention``'s ``True`` = padding) so that padding cannot leak into real tokens; a row with no
``True`` entry (no real token, or a mask in torch's convention) is refused.
Causal mixers other than GMA also decode one token at a time with ``state = mixer.init_state(B)``
and ``y_t, state = mixer.step(x_t (B, d_model), state)``: a growing key/value cache for ``softmax``/``sdpa``,
a constant-size state for ``linear``, ``performer``, ``mamba`` and ``uniform`` (``none`` keeps an empty one), and
for ``window`` (the last ``w`` keys and values), ``local_gma``, ``decay_linear`` and ``decay_gma``.
Every state's ``nbytes()`` counts its bytes; :func:`mixer_state_bytes` gives the same count from the formula.

:data:`MIXERS` maps every name to its class; :func:`make_mixer` builds from it.
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks
from .convolution import ShortConvolution
from .forgetting import DecayedGaussianMixtureAttention, DecayedLinearAttention
from .layer import GaussianMixtureAttention
from .local import LocalGMA, SlidingWindowAttention
from .mamba import MambaMixer
from .mixing import DecodingState, GMAState, normalized_kernel_attention, read_memory, recurrent_step


# ----------------------------------------------------------------------------------------------------------------
# Functional forms (used by the modules and by the tests)
# ----------------------------------------------------------------------------------------------------------------
def softmax_attention(q, k, v, *, causal=False, key_padding_mask=None):
    """Eager softmax attention ``softmax(q k^T / sqrt(d)) v``.

    Args:
        q, k: ``(B, H, N, d)``; v: ``(B, H, N, d_v)``.
        causal: mask out keys after the query.
        key_padding_mask: ``(B, N)`` bool, ``True`` for real tokens (the opposite of
            ``torch.nn.MultiheadAttention``), or ``None``. Not read here (the mixers check it): every row needs a
            ``True`` entry, or its queries get NaN.

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

    The same algorithm as GMA with features in place of responsibilities, so it *is*
    :func:`gma_teach.mixing.normalized_kernel_attention` (:func:`gma_teach.gma_from_responsibilities` without its
    check that rows sum to 1): the associative form (``impl="linear"``) when bidirectional, the
    chunked prefix sums (``impl="chunked"``: a masked ``(C, C)`` product inside each chunk of ``chunk_size``
    tokens, a running ``(m, d_v)`` state across chunks) when causal.

    Args:
        phi_q, phi_k: non-negative features ``(B, H, N, m)``; v: ``(B, H, N, d_v)``.
        causal: prefix sums instead of full sums.
        eps: added to the normalizer.

    Returns:
        ``(B, H, N, d_v)`` in ``v``'s dtype.
    """
    return normalized_kernel_attention(phi_q, phi_k, v, causal=causal, eps=eps, chunk_size=chunk_size,
                                       impl="chunked" if causal else "linear")


def orthogonal_random_features(n_features, dim, *, generator=None, dtype=torch.float32, device=None):
    """FAVOR+ projection ``(n_features, dim)``: blocks of orthonormal rows, each row rescaled to the norm of an
    independent Gaussian vector so that every row is marginally ``N(0, I)`` (Choromanski et al., 2021).

    Each block is the ``Q`` of a Gaussian matrix's QR decomposition with ``R``'s diagonal made positive: without
    that correction ``Q`` is not uniform over rotations, the rows' mean is not zero, and the features' estimate
    of ``exp(q^T k / sqrt(d))`` is biased (about 8% at ``d = 8``, whatever the number of features)."""
    if n_features < 1 or dim < 1:
        raise ValueError(f"n_features and dim must be >= 1, got n_features={n_features}, dim={dim}")
    blocks = []
    for _ in range(math.ceil(n_features / dim)):
        gaussian = torch.randn(dim, dim, generator=generator, dtype=torch.float64)
        orthonormal, triangular = torch.linalg.qr(gaussian)
        # QR's sign convention depends on the input, so its Q is not uniformly distributed (each direction leans
        # towards minus the first axis); fixing R's diagonal positive makes Q Haar, every direction uniform
        orthonormal = orthonormal * torch.sign(triangular.diagonal())
        blocks.append(orthonormal.T)
    rows = torch.cat(blocks)[:n_features]
    norms = torch.randn(n_features, dim, generator=generator, dtype=torch.float64).norm(dim=-1, keepdim=True)
    return (rows * norms).to(dtype=dtype, device=device)


def favor_logits(x, projection):
    """The exponents of FAVOR+'s positive random features, ``w_r^T x' - |x'|^2 / 2`` with ``x' = x / d^(1/4)``.

    Args:
        x: ``(..., N, d)``; projection: ``(m, d)``.

    Returns:
        ``(..., N, m)`` in float32 or wider (computed outside autocast).
    """
    dtype = torch.promote_types(x.dtype, torch.float32)
    with torch.autocast(device_type=x.device.type, enabled=False):
        x = x.to(dtype) * x.shape[-1] ** -0.25
        return x @ projection.to(dtype).T - 0.5 * (x * x).sum(dim=-1, keepdim=True)


def favor_features(x, projection, *, is_query):
    """Positive random features ``exp(w^T x' - |x'|^2/2) / sqrt(m)`` with ``x' = x / d^(1/4)``, so that
    ``E[phi(q)^T phi(k)] = exp(q^T k / sqrt(d))``, each divided by a stabilizer that cancels in the ratio of
    normalized attention. Computed in float32 or wider (under autocast too).

    A query's features are divided by their own largest (it cancels in that query's normalization). Keys are
    divided by the largest feature of the whole sequence ``(..., N, m)``: common to all keys, it cancels for every
    query, and it keeps the largest key feature at ``1 / sqrt(m)`` whatever the scale of the activations. A
    sequence-wide maximum would let future keys rescale past outputs through ``eps``; the causal mixer uses
    :func:`favor_attention`, whose stabilizer sees only the past.

    Args:
        x: ``(..., N, d)``; projection: ``(m, d)``.

    Returns:
        ``(..., N, m)``.
    """
    logits = favor_logits(x, projection)
    dims = -1 if is_query else (-2, -1)
    stabilizer = logits.amax(dim=dims, keepdim=True).detach()
    return torch.exp(logits - stabilizer) / math.sqrt(projection.shape[0])


def favor_attention(q, k, v, projection, *, causal=False, eps=1e-6, chunk_size=64, key_padding_mask=None):
    """Performer's FAVOR+ attention, stabilized so that every normalizer is at least ``1 / m`` (``eps`` decides
    nothing) whatever the scale of the activations.

    The estimate of softmax attention is ``O_i = sum_j phi(q_i)^T phi(k_j) v_j / sum_j phi(q_i)^T phi(k_j)`` over
    the keys ``j`` query ``i`` may see, with ``phi(x)_r = exp(l_r(x)) / sqrt(m)`` and
    ``l_r(x) = w_r^T x' - |x'|^2 / 2`` (:func:`favor_logits`). The exponents span hundreds of nats, so both sums
    are divided by ``exp(c_i)`` before ``eps`` is added, with ``c_i = max_r (l_r(q_i) + log sum_j exp(l_r(k_j)))``
    the log of the largest feature's share of the normalizer: that share becomes ``1 / m``, every term stays at
    most 1, and the ratio is unchanged. ``c_i`` reads only the keys ``i`` may see, so causality is exact.

    In memory the keys are kept relative to ``s_i``, the largest key exponent ``i`` may see (every key when
    bidirectional; keys ``0..i`` when causal), and the queries carry ``exp(l(q_i) + s_i - c_i)``. Causal form:
    chunks of ``chunk_size`` keys. Each chunk's summary ``[memory, normalizer]`` is taken relative to its own
    largest key, carried into later chunks relative to the largest key before them, and rescaled to ``s_i`` for
    each query; inside a chunk the ``(C, C)`` product carries ``exp(a_j - s_i)`` for each key's own maximum
    ``a_j``. Every factor is ``exp`` of a non-positive number, except a query's features, clipped at ``exp(80)``:
    only a feature whose keys all lie 80 nats below the largest key can lose weight, and float32 keys that far
    down are zero anyway. Decoding (:meth:`PerformerAttention.step`) keeps ``s`` in its state and computes the same
    numbers.

    Args:
        q, k: ``(B, H, N, d)``; v: ``(B, H, N, d_v)``; projection: ``(m, d)``.
        causal: query ``i`` reads keys ``j <= i``.
        eps: added to each (rescaled, at least ``1 / m``) normalizer.
        chunk_size: keys per chunk of the causal form.
        key_padding_mask: ``(B, N)`` bool, ``True`` for real keys, or ``None``.

    Returns:
        ``(B, H, N, d_v)`` in ``v``'s dtype (computed in float32 or wider).
    """
    dtype = torch.promote_types(torch.promote_types(q.dtype, v.dtype), torch.float32)
    root_m, lowest = math.sqrt(projection.shape[0]), torch.finfo(dtype).min
    with torch.autocast(device_type=v.device.type, enabled=False):
        query_logits, key_logits = favor_logits(q, projection), favor_logits(k, projection)
        if key_padding_mask is not None:
            key_logits = key_logits.masked_fill(~key_padding_mask[:, None, :, None], float("-inf"))
        with torch.no_grad():  # the stabilizers cancel in the ratio: constants for autograd
            if causal:
                seen = key_logits.amax(-1).cummax(-1).values[..., None]  # s_i (..., N, 1)
                log_sums = torch.logcumsumexp(key_logits, dim=-2)  # log sum_{j <= i} exp(l_r(k_j))
            else:
                seen = key_logits.amax(dim=(-2, -1), keepdim=True)
                log_sums = torch.logsumexp(key_logits, dim=-2, keepdim=True)
            share = (query_logits + log_sums).amax(-1, keepdim=True).clamp_min(lowest)  # c_i
            query_shift = seen.clamp_min(lowest) - share
        phi_q = torch.exp((query_logits + query_shift).clamp_max(FAVOR_MAX_EXPONENT)) / root_m
        values = v.to(dtype)
        if causal:
            output = _favor_causal(phi_q, key_logits, values, eps, chunk_size)
        else:
            phi_k = torch.exp(key_logits - seen) / root_m
            output = linear_attention(phi_q, phi_k, values, eps=eps)
    return output.to(v.dtype)


FAVOR_MAX_EXPONENT = 80.0
"""The largest exponent of a query's stored features in :func:`favor_attention` (``exp(80)`` is about ``5e34``,
below float32's ``3e38``)."""


def _favor_causal(phi_q, key_logits, v, eps, chunk_size):
    """The causal form of :func:`favor_attention`: ``phi_q (..., N, m)`` (stabilized), ``key_logits (..., N, m)``
    (``-inf`` for padded keys), ``v (..., N, d_v)`` -> ``(..., N, d_v)``."""
    n_tokens, root_m = key_logits.shape[-2], math.sqrt(key_logits.shape[-1])
    lowest = torch.finfo(key_logits.dtype).min
    own = key_logits.amax(-1).detach().clamp_min(lowest)  # a_j, each key's largest exponent (..., N)
    seen = own.cummax(-1).values  # s_i, the largest among the keys query i may see
    keys = torch.exp(key_logits - own[..., None]) / root_m  # each key relative to its own maximum
    n_chunks = -(-n_tokens // chunk_size)
    pad = n_chunks * chunk_size - n_tokens

    def chunks(t, value=0.0):  # (..., N, F) -> (..., n_chunks, C, F)
        t = F.pad(t, (0, 0, 0, pad), value=value) if pad else t
        return t.reshape(*t.shape[:-2], n_chunks, chunk_size, t.shape[-1])

    queries, keys, values = chunks(phi_q), chunks(keys), chunks(F.pad(v, (0, 1), value=1.0))
    own = chunks(own[..., None], lowest)[..., 0]  # (..., n_chunks, C)
    seen = chunks(seen[..., None], float("inf"))[..., 0]  # a padded query reads nothing
    chunk_max = own.amax(-1)  # (..., n_chunks)
    summaries = (keys * torch.exp(own - chunk_max[..., None])[..., None]).transpose(-1, -2) @ values
    before = F.pad(chunk_max.cummax(-1).values[..., :-1], (1, 0), value=lowest)  # largest key before chunk c
    earlier = torch.ones(n_chunks, n_chunks, dtype=torch.bool, device=v.device).tril(-1)
    weights = torch.exp(torch.where(earlier, chunk_max[..., None, :] - before[..., :, None], float("-inf")))
    carried = (weights @ summaries.flatten(-2)).unflatten(-1, summaries.shape[-2:])  # (..., n_chunks, m, d_v+1)
    output = (queries @ carried) * torch.exp(before[..., None] - seen)[..., None]
    causal = torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=v.device).tril()
    inside = (queries @ keys.transpose(-1, -2)) * torch.exp(
        torch.where(causal, own[..., None, :] - seen[..., :, None], float("-inf")))
    output = output + inside @ values
    output = output[..., :-1] / (output[..., -1:] + eps)
    return output.reshape(*output.shape[:-3], n_chunks * chunk_size, output.shape[-1])[..., :n_tokens, :]


# ----------------------------------------------------------------------------------------------------------------
# Multi-head modules
# ----------------------------------------------------------------------------------------------------------------
@dataclass
class KVCache(DecodingState):
    """Decoding state of softmax attention: all keys and values so far, ``(B, H, t, d_head)`` (grows with t, by
    ``2 B H d_head`` elements a token)."""

    keys: torch.Tensor
    values: torch.Tensor


LinearAttentionState = GMAState
"""Decoding state of kernel attention: GMA's state, ``memory (B, H, m, d_head)`` and ``normalizer (B, H, m)`` with
features in place of responsibilities (the same recurrence, :func:`gma_teach.mixing.recurrent_step`)."""


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
        mask = _attention_mask(q.shape[-2], k.shape[-2], self.causal, key_padding_mask, q.device)
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


# ----------------------------------------------------------------------------------------------------------------
# Controls
# ----------------------------------------------------------------------------------------------------------------
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
    "window": SlidingWindowAttention,
    "local_gma": LocalGMA,
    "decay_linear": DecayedLinearAttention,
    "decay_gma": DecayedGaussianMixtureAttention,
    "conv": ShortConvolution,
}
"""Every sequence mixer by name, ``name -> class``, each built as ``cls(d_model, n_heads, causal=..., **options)``."""

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
            ``expand`` (2), ``dt_rank``, ``chunk_size``; ``softmax``, ``sdpa``, ``uniform``, ``none``: none;
            ``window``: ``window`` (64), ``head_dim``; ``local_gma``: ``window`` (64), ``local_heads``
            (``n_heads // 2``), ``n_components`` (64) and the other keywords of GMA, routing remedies included;
            ``decay_linear`` (causal only): ``decay`` (``None``: RetNet's ``1 - 2^(-5-h)``; a number or a list of
            ``n_heads`` numbers in ``(0, 1]``), ``eps``, ``impl`` (``"chunked"``, ``"recurrent"``, ``"naive"``),
            ``chunk_size``; ``decay_gma`` (causal only): ``decay``, ``impl`` as ``decay_linear``,
            ``n_components`` (64) and the other keywords of GMA.

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


# ----------------------------------------------------------------------------------------------------------------
# Decoding-state bytes from the formulas
# ----------------------------------------------------------------------------------------------------------------
def mixer_state_bytes(mixer, seq_len, *, batch_size=1) -> int:
    """Bytes of a causal mixer's decoding state after ``seq_len`` tokens, from its sizes (nothing is run).

    It equals ``state.nbytes()`` of the state that ``mixer.init_state(batch_size)`` and ``seq_len`` calls of
    ``mixer.step`` produce (per batch row, with ``e`` the bytes of the state's dtype):

    * ``softmax``, ``sdpa`` (KV cache): ``2 H N d_head e``, growing with ``N``;
    * ``linear``: ``H (m d_head + m) e`` with ``m = d_head`` features; ``performer``: ``H (m d_head + m + 1) e``
      (``m`` features and the running stabilizer of each head, in float32 at least);
      ``decay_linear``: the same with ``m = d_head``;
    * ``gma``, ``decay_gma``: ``H K (d_value + 1) e``;
    * ``window``: ``2 H w d_head e`` (the window is allocated whole from the first token);
    * ``local_gma``: its window's plus its GMA heads';
    * ``mamba``: ``d_inner (d_conv - 1 + d_state) e``; ``conv``: ``(k - 1) d_model e``; ``uniform``: ``d_model e``;
      ``none``: 0.

    Args:
        mixer: a causal mixer from :func:`make_mixer` (``mamba`` and ``conv`` decode whatever their ``causal``).
        seq_len: tokens decoded, ``N >= 0``.
        batch_size: ``B >= 1``.

    Returns:
        an int.
    """
    seq_len = _checks.integer("seq_len", seq_len, minimum=0)
    batch_size = _checks.positive_int("batch_size", batch_size)
    if not isinstance(mixer, mixer_types()):
        raise TypeError(f"mixer must be a mixer of gma_teach.baselines.MIXERS, got {type(mixer).__name__}")
    if not isinstance(mixer, (MambaMixer, ShortConvolution)) and not mixer.causal:
        raise ValueError(f"{type(mixer).__name__} was built with causal=False and has no decoding state")
    return batch_size * _state_bytes_per_row(mixer, seq_len)


def _element_size(dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _state_bytes_per_row(mixer, seq_len) -> int:
    """The formulas of :func:`mixer_state_bytes` for one batch row."""
    if isinstance(mixer, LocalGMA):
        return _state_bytes_per_row(mixer.local, seq_len) + _state_bytes_per_row(mixer.gma, seq_len)
    if isinstance(mixer, GaussianMixtureAttention):  # decay_gma too; the layer keeps float32 or float64
        dtype = torch.float64 if mixer.v_proj.weight.dtype == torch.float64 else torch.float32
        return mixer.n_heads * mixer.n_components * (mixer.d_value + 1) * _element_size(dtype)
    if isinstance(mixer, NoMixing):
        return 0
    if isinstance(mixer, UniformAverage):
        return mixer.d_model * _element_size(torch.promote_types(mixer.v_proj.weight.dtype, torch.float32))
    if isinstance(mixer, ShortConvolution):
        return (mixer.kernel_size - 1) * mixer.d_model * _element_size(mixer.in_proj.weight.dtype)
    if isinstance(mixer, MambaMixer):
        return mixer.d_inner * (mixer.d_conv - 1 + mixer.d_state) * _element_size(mixer.in_proj.weight.dtype)
    size = _element_size(mixer.k_proj.weight.dtype)
    if isinstance(mixer, SoftmaxAttention):
        return 2 * mixer.n_heads * seq_len * mixer.head_dim * size
    if isinstance(mixer, SlidingWindowAttention):
        return 2 * mixer.n_heads * mixer.window * mixer.head_dim * size
    if isinstance(mixer, DecayedLinearAttention):
        size = _element_size(torch.promote_types(mixer.k_proj.weight.dtype, torch.float32))
        return mixer.n_heads * (mixer.head_dim + 1) * mixer.head_dim * size
    if isinstance(mixer, PerformerAttention):  # its running stabilizer: one number a head
        size = _element_size(torch.promote_types(mixer.k_proj.weight.dtype, torch.float32))
        return mixer.n_heads * (mixer.n_features * (mixer.head_dim + 1) + 1) * size
    if isinstance(mixer, _KernelAttention):
        return mixer.n_heads * mixer._n_features() * (mixer.head_dim + 1) * size
    raise ValueError(f"{type(mixer).__name__} has no decoding state")
