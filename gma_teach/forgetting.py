r"""Chapter 12: forgetting. Decayed linear attention (RetNet-style) and GMA with the same decay.

Causal GMA's memory only grows: every key ever written stays in :math:`\tilde V` and :math:`Z` with full weight.
A fixed per-head decay :math:`g \in (0, 1]` forgets geometrically (Sun et al., "Retentive Network", 2023):

.. math::

    \tilde V_t = g \tilde V_{t-1} + \gamma^K_t v_t^\top,\qquad Z_t = g Z_{t-1} + \gamma^K_t,\qquad
    o_t = \frac{\gamma^Q_t \tilde V_t}{\gamma^Q_t Z_t + \varepsilon},

which equals :math:`A V` for the row-normalized decayed affinity
:math:`A_{ij} = g^{i-j} \gamma^Q_i\cdot\gamma^K_j / (\sum_{j' \le i} g^{i-j'} \gamma^Q_i\cdot\gamma^K_{j'} +
\varepsilon)` for :math:`j \le i` (0 above the diagonal). The decay touches the memory *and* the normalizer, so the
output stays a weighted average of the values; ``g = 1`` is plain causal GMA. With non-negative features
:math:`\phi(q), \phi(k)` in place of responsibilities the same forms compute decayed linear attention.

:func:`decayed_gma_from_responsibilities` computes it in three forms (``impl=``):

* ``"naive"``: the explicit ``N x N`` decayed affinity -- the spec, ``O(N^2)`` memory;
* ``"chunked"``: chunks of ``chunk_size`` tokens. Inside a chunk the scores are multiplied by the decay mask
  :math:`D_{ij} = g^{i-j}` (``j <= i``); each chunk writes its tokens with weights :math:`g^{C-1-j}`, the state
  carried into chunk ``c`` is :math:`\sum_{c' < c} g^{C (c-1-c')} W_{c'}`, and a query at offset ``i`` reads it
  with weight :math:`g^{i+1}`. Every power has a non-negative exponent and is computed as
  ``exp(exponent * log g)``, so nothing overflows however long the chunk or the sequence (small powers underflow
  to 0, which is what they are);
* ``"recurrent"``: token by token with the constant-size :class:`~gma_teach.mixing.GMAState` -- the decoding form
  (:func:`decayed_recurrent_step`).

The two mixers, causal only (a decay runs forwards in time):

* :class:`DecayedLinearAttention` (registry name ``decay_linear``): the Linear Transformer's ``elu + 1`` features
  with one fixed decay per head;
* :class:`DecayedGaussianMixtureAttention` (``decay_gma``): :class:`~gma_teach.GaussianMixtureAttention`'s routing
  (the same projections and mixture, by subclassing) with the decayed memory.

Default decays follow RetNet's schedule :func:`retnet_decays`, ``g_h = 1 - 2^(-5-h)`` for head ``h = 0..H-1``: head 0
forgets with a half-life of about 22 tokens, each next head twice as slowly.
"""
from __future__ import annotations

import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from . import _checks
from .gmm import compute_dtype, gemm_logits
from .layer import (
    DEFAULT_COMPONENTS,
    GaussianMixtureAttention,
    routing_balance_loss,
    routing_distillation_loss,
)
from .mixing import GMAState, read_memory

DECAYED_IMPLS = ("naive", "chunked", "recurrent")


def retnet_decays(n_heads: int) -> tuple[float, ...]:
    """RetNet's fixed per-head decays ``g_h = 1 - 2^(-5-h)``, ``h = 0..n_heads-1`` (float64 values; in float32 the
    heads from ``h = 20`` on round to 1, no forgetting, and in bfloat16 those from ``h = 4`` on)."""
    n_heads = _checks.positive_int("n_heads", n_heads)
    return tuple(1.0 - 2.0 ** (-5 - h) for h in range(n_heads))


# ------------------------------------------------------------------------------------------------ validation
def _check_decay_number(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number in (0, 1] or a tensor of such numbers, got {type(value).__name__}")
    if not 0 < value <= 1:  # also refuses nan
        raise ValueError(f"{name} must be in (0, 1] (1 = no forgetting), got {value}")
    return float(value)


def _check_decay(decay) -> torch.Tensor | float:
    """A number in ``(0, 1]`` or a floating tensor of such numbers."""
    if isinstance(decay, torch.Tensor):
        if not decay.is_floating_point():
            raise TypeError(f"decay must be a floating-point tensor, got dtype {decay.dtype}")
        if decay.numel() and not bool(((decay > 0) & (decay <= 1)).all()):
            raise ValueError(f"decay must lie in (0, 1] (1 = no forgetting), got values from "
                             f"{float(decay.min())} to {float(decay.max())}")
        return decay
    return _check_decay_number("decay", decay)


def _check_inputs(gamma_q, gamma_k, v, decay, eps, impl, chunk_size):
    _checks.positive_number("eps", eps)
    _checks.one_of("impl", impl, DECAYED_IMPLS)
    _checks.positive_int("chunk_size", chunk_size)
    for name, value in (("gamma_q", gamma_q), ("gamma_k", gamma_k), ("v", v)):
        _checks.tensor(name, value, min_rank=2)
    _checks.same_device(gamma_q=gamma_q, gamma_k=gamma_k, v=v)
    if gamma_q.shape[-1] != gamma_k.shape[-1]:
        raise ValueError(f"gamma_q and gamma_k must have the same K (last dim), got gamma_q "
                         f"{tuple(gamma_q.shape)} and gamma_k {tuple(gamma_k.shape)}")
    if v.shape[-2] != gamma_k.shape[-2]:
        raise ValueError(f"v must have one row per key: gamma_k has N={gamma_k.shape[-2]} ({tuple(gamma_k.shape)}), "
                         f"v has {v.shape[-2]} ({tuple(v.shape)})")
    if gamma_q.shape[-2] != gamma_k.shape[-2]:
        raise ValueError(f"decayed GMA is causal and needs as many queries as keys, got N_q={gamma_q.shape[-2]} "
                         f"and N_k={gamma_k.shape[-2]}")
    lead = _checks.leading_shape(gamma_q=gamma_q, gamma_k=gamma_k, v=v)
    decay = _check_decay(decay)
    if isinstance(decay, torch.Tensor):
        if decay.device != v.device:
            raise ValueError(f"decay must be on v's device {v.device}, got {decay.device}")
        try:
            torch.broadcast_shapes(decay.shape, lead)
        except RuntimeError:
            raise ValueError(f"decay {tuple(decay.shape)} must broadcast against the leading (batch/head) dims "
                             f"{tuple(lead)} of the inputs (e.g. (H,) for (B, H, N, K))") from None
    return decay


# ---------------------------------------------------------------------------------------------- the forms
def _log_decay(decay, dtype, device):
    """``log g`` as a tensor of the compute dtype, shape of ``decay`` (``()`` for a number)."""
    if isinstance(decay, torch.Tensor):
        return torch.log(decay.to(dtype))
    return torch.tensor(math.log(decay), dtype=dtype, device=device)


def _powers(log_decay, exponents):
    """``g ** exponents`` for non-negative ``exponents`` ``(..., P, Q)``, as ``exp(exponents * log g)`` (no
    overflow); ``log_decay`` has the leading shape and gets two trailing dims."""
    return torch.exp(log_decay[..., None, None] * exponents)


def _naive(gamma_q, gamma_k, v, log_decay, eps, chunk_size):
    n = gamma_k.shape[-2]
    positions = torch.arange(n, device=v.device, dtype=v.dtype)
    lags = positions[:, None] - positions[None, :]  # (N, N): i - j
    mask = _powers(log_decay, lags.clamp_min(0)) * (lags >= 0)
    scores = (gamma_q @ gamma_k.transpose(-1, -2)) * mask
    return (scores @ v) / (scores.sum(-1, keepdim=True) + eps)


def _chunked(gamma_q, gamma_k, v, log_decay, eps, chunk_size):
    n_tokens = gamma_k.shape[-2]
    chunk_size = min(chunk_size, max(n_tokens, 1))
    n_chunks = -(-n_tokens // chunk_size)
    pad = n_chunks * chunk_size - n_tokens

    def chunks(t):  # (..., N, F) -> (..., n_chunks, C, F); padded keys have gamma = 0 and write nothing
        t = F.pad(t, (0, 0, 0, pad)) if pad else t
        return t.reshape(*t.shape[:-2], n_chunks, chunk_size, t.shape[-1])

    queries, keys = chunks(gamma_q), chunks(gamma_k)
    values = chunks(F.pad(v, (0, 1), value=1.0))  # [v, 1]: one product gives memory and normalizer
    log_chunk = log_decay[..., None]  # one more leading dim for the chunks
    offsets = torch.arange(chunk_size, device=v.device, dtype=v.dtype)
    lags = offsets[:, None] - offsets[None, :]
    inside = (queries @ keys.transpose(-1, -2)) * (_powers(log_chunk, lags.clamp_min(0)) * (lags >= 0))
    write = _powers(log_chunk, (chunk_size - 1 - offsets)[:, None])  # (..., 1, C, 1): g^(C-1-j)
    written = (keys * write).transpose(-1, -2) @ values  # (..., n_chunks, K, d_v + 1)
    starts = torch.arange(n_chunks, device=v.device, dtype=v.dtype)
    chunk_lags = starts[:, None] - starts[None, :] - 1  # c - 1 - c'
    carry = _powers(log_decay, chunk_size * chunk_lags.clamp_min(0)) * (chunk_lags >= 0)  # (..., nc, nc)
    carried = (carry @ written.flatten(-2)).unflatten(-1, written.shape[-2:])  # state entering each chunk
    read = _powers(log_chunk, (offsets + 1)[:, None])  # (..., 1, C, 1): g^(i+1)
    output = (queries * read) @ carried + inside @ values
    output = output[..., :-1] / (output[..., -1:] + eps)
    output = output.reshape(*output.shape[:-3], n_chunks * chunk_size, output.shape[-1])
    return output[..., :n_tokens, :]


def _recurrent(gamma_q, gamma_k, v, log_decay, eps, chunk_size):
    lead = torch.broadcast_shapes(gamma_q.shape[:-2], gamma_k.shape[:-2], v.shape[:-2], log_decay.shape)
    state = GMAState.zeros(lead, gamma_k.shape[-1], v.shape[-1], dtype=v.dtype, device=v.device)
    decay = torch.exp(log_decay)
    outputs = [v.new_zeros(*lead, 0, v.shape[-1])]
    for t in range(gamma_k.shape[-2]):
        output, state = decayed_recurrent_step(gamma_q[..., t, :], gamma_k[..., t, :], v[..., t, :], state, decay,
                                               eps)
        outputs.append(output[..., None, :])
    return torch.cat(outputs, dim=-2)


_FORMS = {"naive": _naive, "chunked": _chunked, "recurrent": _recurrent}


def decayed_recurrent_step(gamma_q_t, gamma_k_t, v_t, state: GMAState, decay, eps: float = 1e-6):
    """One decoding step of decayed GMA: decay the state, write token ``t``, read it.

    Args:
        gamma_q_t, gamma_k_t: ``(..., K)``; v_t: ``(..., d_v)``; state: a :class:`~gma_teach.mixing.GMAState` over
            ``...``; decay: a number or a tensor broadcastable to ``...`` (e.g. ``(H,)`` for ``(B, H)``).

    Returns:
        ``(o_t (..., d_v), new_state)``; the input state is not modified (autograd-safe).
    """
    if isinstance(decay, torch.Tensor):
        decay = decay.to(state.memory.dtype)[..., None]
    memory = state.memory * (decay[..., None] if isinstance(decay, torch.Tensor) else decay)
    memory = memory + gamma_k_t.unsqueeze(-1) * v_t.unsqueeze(-2)
    normalizer = state.normalizer * decay + gamma_k_t
    state = GMAState(memory, normalizer, state.position + 1)
    output = read_memory(gamma_q_t.unsqueeze(-2), state.memory, state.normalizer, eps).squeeze(-2)
    return output, state


def decayed_gma_from_responsibilities(gamma_q, gamma_k, v, decay, *, eps: float = 1e-6, impl: str = "chunked",
                                      chunk_size: int = 64) -> torch.Tensor:
    r"""Causal GMA with a fixed decay: :math:`o_i = \sum_{j \le i} g^{i-j} (\gamma^Q_i\cdot\gamma^K_j) v_j /
    (\sum_{j \le i} g^{i-j} \gamma^Q_i\cdot\gamma^K_j + \varepsilon)`.

    Any non-negative features work in place of responsibilities (decayed linear attention).

    Args:
        gamma_q, gamma_k: ``(..., N, K)`` non-negative query and key responsibilities (or features).
        v: ``(..., N, d_v)`` values. Leading dims equal or broadcastable.
        decay: ``g``: a number in ``(0, 1]`` or a floating tensor of such numbers broadcastable against the leading
            dims (``(H,)`` gives each head of ``(B, H, N, K)`` its own decay). ``1`` is plain causal GMA.
        eps: the normalizer's floor (> 0).
        impl: ``"chunked"`` (default), ``"recurrent"`` or ``"naive"``; see the module docstring.
        chunk_size: tokens per chunk for ``impl="chunked"``.

    Returns:
        ``(..., N, d_v)`` in ``v``'s dtype, computed in :func:`gma_teach.gmm.compute_dtype` of the inputs.
    """
    decay = _check_inputs(gamma_q, gamma_k, v, decay, eps, impl, chunk_size)
    dtype = compute_dtype(gamma_q.dtype, gamma_k.dtype, v.dtype)
    with torch.autocast(v.device.type, enabled=False):
        log_decay = _log_decay(decay, dtype, v.device)
        output = _FORMS[impl](gamma_q.to(dtype), gamma_k.to(dtype), v.to(dtype), log_decay, eps, chunk_size)
    return output.to(v.dtype)


def decayed_affinity(gamma_q, gamma_k, decay, *, eps: float = 1e-6) -> torch.Tensor:
    """The row-normalized ``(..., N, N)`` decayed affinity (lower-triangular), so that
    ``decayed_gma_from_responsibilities(gamma_q, gamma_k, v, decay) == decayed_affinity(gamma_q, gamma_k, decay) @ v``
    (for pictures and checks)."""
    decay = _check_inputs(gamma_q, gamma_k, gamma_k[..., :1], decay, eps, "naive", 1)
    dtype = compute_dtype(gamma_q.dtype, gamma_k.dtype)
    eye = torch.eye(gamma_k.shape[-2], dtype=dtype, device=gamma_k.device)
    return _naive(gamma_q.to(dtype), gamma_k.to(dtype), eye, _log_decay(decay, dtype, gamma_k.device), eps, 1)


# ------------------------------------------------------------------------------------------------- mixers
def _head_decays(decay, n_heads: int) -> torch.Tensor:
    """The ``decay`` option of a mixer as a float64 ``(n_heads,)`` tensor: ``None`` for :func:`retnet_decays`, one
    number for every head, or a sequence of ``n_heads`` numbers in ``(0, 1]``."""
    if decay is None:
        values = retnet_decays(n_heads)
    elif isinstance(decay, (list, tuple)):
        if len(decay) != n_heads:
            raise ValueError(f"decay must have one value per head ({n_heads}), got {len(decay)}: {decay!r}")
        values = tuple(_check_decay_number(f"decay[{h}]", value) for h, value in enumerate(decay))
    elif isinstance(decay, numbers.Real) and not isinstance(decay, bool):
        values = (_check_decay_number("decay", decay),) * n_heads
    else:
        raise TypeError(f"decay must be None (RetNet's schedule), a number in (0, 1] or a list of n_heads such "
                        f"numbers, got {type(decay).__name__}")
    return torch.tensor(values, dtype=torch.float64)


class DecayedLinearAttention(nn.Module):
    r"""RetNet-style decayed linear attention: ``phi = elu + 1`` features, one fixed decay per head, normalized
    like the Linear Transformer (the decay applies to the memory :math:`S_t = g S_{t-1} + \phi(k_t) v_t^\top` and to
    the normalizer :math:`z_t = g z_{t-1} + \phi(k_t)`). Causal only.

    Args:
        d_model, n_heads: width and heads (``d_model % n_heads == 0``).
        causal: must be ``True``.
        decay: ``None`` (:func:`retnet_decays`), one number in ``(0, 1]`` for every head, or a list of ``n_heads``.
        eps: the normalizer's floor.
        impl: ``"chunked"``, ``"recurrent"`` or ``"naive"`` (see :func:`decayed_gma_from_responsibilities`).
        chunk_size: tokens per chunk.

    Decodes with a constant-size :class:`~gma_teach.mixing.GMAState`: ``(B, H, d_head, d_head)`` and ``(B, H,
    d_head)``. The decays are a buffer ``decay`` ``(H,)`` (not trained; it takes the module's dtype, see
    :func:`retnet_decays` for what rounds to 1).
    """

    def __init__(self, d_model, n_heads, *, causal=True, decay=None, eps=1e-6, impl="chunked", chunk_size=64):
        super().__init__()
        d_model, n_heads = _checks.heads(d_model, n_heads)
        if not _checks.boolean("causal", causal):
            raise ValueError("decay_linear is causal only (its decay runs forwards in time); use causal=True")
        self.d_model, self.n_heads, self.causal = d_model, n_heads, True
        self.head_dim = d_model // n_heads
        self.eps = _checks.positive_number("eps", eps)
        self.impl = _checks.one_of("impl", impl, DECAYED_IMPLS)
        self.chunk_size = _checks.positive_int("chunk_size", chunk_size)
        self.register_buffer("decay", _head_decays(decay, n_heads))
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def _heads(self, projection, x):
        """``(B, N, d_model) -> (B, H, N, d_head)``."""
        return projection(x).unflatten(-1, (self.n_heads, self.head_dim)).transpose(1, 2)

    def _features(self, x):
        q, k, v = (self._heads(p, x) for p in (self.q_proj, self.k_proj, self.v_proj))
        return F.elu(q) + 1, F.elu(k) + 1, v

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)``, ``key_padding_mask (B, N)`` bool (``True`` = real) -> ``(B, N, d_model)``."""
        _checks.sequence("x", x, self.d_model)
        phi_q, phi_k, v = self._features(x)
        if key_padding_mask is not None:
            _checks.bool_mask("key_padding_mask", key_padding_mask, tuple(x.shape[:2]), "(B, N)")
            phi_k = phi_k * key_padding_mask[:, None, :, None].to(phi_k.dtype)
        y = decayed_gma_from_responsibilities(phi_q, phi_k, v, self.decay, eps=self.eps, impl=self.impl,
                                              chunk_size=self.chunk_size)
        return self.out_proj(y.transpose(1, 2).flatten(-2))

    def init_state(self, batch_size):
        """Zero memory ``(B, H, d_head, d_head)`` and normalizer ``(B, H, d_head)``: constant size."""
        batch_size = _checks.positive_int("batch_size", batch_size)
        weight = self.k_proj.weight
        return GMAState.zeros((batch_size, self.n_heads), self.head_dim, self.head_dim,
                              dtype=torch.promote_types(weight.dtype, torch.float32), device=weight.device)

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        _checks.token("x_t", x_t, self.d_model)
        if not isinstance(state, GMAState):
            raise TypeError(f"state must be a GMAState (from init_state), got {type(state).__name__}")
        phi_q, phi_k, v = (t[:, :, 0] for t in self._features(x_t[:, None, :]))
        dtype = state.memory.dtype
        y, state = decayed_recurrent_step(phi_q.to(dtype), phi_k.to(dtype), v.to(dtype), state, self.decay, self.eps)
        return self.out_proj(y.to(x_t.dtype).flatten(-2)), state

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, impl={self.impl!r}"


class DecayedGaussianMixtureAttention(GaussianMixtureAttention):
    """GMA with a fixed per-head decay on its memory and normalizer: :class:`~gma_teach.GaussianMixtureAttention`'s
    projections, mixture, routing remedies and diagnostics, with :func:`decayed_gma_from_responsibilities` in
    place of the plain prefix sums. Causal only.

    Args:
        d_model, n_heads: width and heads.
        causal: must be ``True``.
        n_components: K (default :data:`gma_teach.layer.DEFAULT_COMPONENTS`, GMA's one default, 64).
        decay: ``None`` (:func:`retnet_decays`), one number in ``(0, 1]`` for every head, or a list of ``n_heads``.
        impl: ``"chunked"``, ``"recurrent"`` or ``"naive"``.
        d_route, d_value, eps, min_variance, chunk_size, init_variance, init_mean_std, balance_weight, balance_form,
        tied_routing, distill_weight, assignment_weight, assignment_form:
            as in :class:`~gma_teach.GaussianMixtureAttention` (so ``**LM_ROUTING_REMEDY`` applies).

    Decodes with the layer's constant-size :class:`~gma_teach.mixing.GMAState` ``(B, H, K, d_value)``. The decays
    are a buffer ``decay`` ``(H,)``, as in :class:`DecayedLinearAttention`.
    """

    def __init__(self, d_model, n_heads, *, causal=True, n_components=DEFAULT_COMPONENTS, decay=None, impl="chunked",
                 d_route=None, d_value=None, eps=1e-6, min_variance=1e-3, chunk_size=64, init_variance=1.0,
                 init_mean_std=1.0, balance_weight=0.0, balance_form="switch", tied_routing=False, distill_weight=0.0,
                 assignment_weight=0.0, assignment_form="information"):
        if not _checks.boolean("causal", causal):
            raise ValueError("decay_gma is causal only (its decay runs forwards in time); use causal=True")
        super().__init__(d_model, n_heads, n_components, causal=True, d_route=d_route, d_value=d_value, eps=eps,
                         min_variance=min_variance, impl="auto", chunk_size=chunk_size, init_variance=init_variance,
                         init_mean_std=init_mean_std, balance_weight=balance_weight, balance_form=balance_form,
                         tied_routing=tied_routing, distill_weight=distill_weight,
                         assignment_weight=assignment_weight, assignment_form=assignment_form)
        self.impl = _checks.one_of("impl", impl, DECAYED_IMPLS)
        self.register_buffer("decay", _head_decays(decay, self.n_heads))

    def forward(self, x, context=None, key_padding_mask=None):
        """``x (B, N, d_model)``, ``key_padding_mask (B, N)`` bool (``True`` = real) -> ``(B, N, d_model)``."""
        self._check_input("x", x)
        if context is not None:
            raise ValueError("decay_gma is causal and takes no context (cross-attention needs plain GMA)")
        if key_padding_mask is not None:
            self._check_padding_mask(key_padding_mask, x)
        q, k, v = self._project(x, None)
        mixture = self.mixture
        log_gamma_q = torch.log_softmax(gemm_logits(q, mixture.means, mixture.variances, mixture.log_priors), dim=-1)
        gamma_q = log_gamma_q.exp()
        gamma_k = torch.softmax(gemm_logits(k, mixture.means, mixture.variances, mixture.log_priors), dim=-1)
        if key_padding_mask is not None:
            gamma_k = gamma_k * key_padding_mask[:, None, :, None].to(gamma_k.dtype)
        output = decayed_gma_from_responsibilities(gamma_q, gamma_k, v, self.decay, eps=self.eps, impl=self.impl,
                                                   chunk_size=self.chunk_size)
        if self.store_responsibilities:
            self.last_responsibilities = {"query": gamma_q.detach(), "key": gamma_k.detach()}
        if self.balance_weight > 0:
            self._last_balance_loss = 0.5 * (
                routing_balance_loss(gamma_q, form=self.balance_form, mask=key_padding_mask)
                + routing_balance_loss(gamma_k, form=self.balance_form, mask=key_padding_mask))
        if self.distill_weight > 0:
            self._last_distill_loss = routing_distillation_loss(log_gamma_q, gamma_k, mask=key_padding_mask)
        if self.assignment_weight > 0:
            self._last_assignment_loss = self._assignment_term(k, gamma_k, key_padding_mask)
        return self.out_proj(output.transpose(1, 2).flatten(-2))

    def _recurrent_step(self, gamma_q_t, gamma_k_t, v_t, state):
        """:meth:`step`'s state update, with the decay: ``Ṽ <- g Ṽ + γ^K v^T``, ``Z <- g Z + γ^K``."""
        return decayed_recurrent_step(gamma_q_t, gamma_k_t, v_t, state, self.decay, self.eps)
