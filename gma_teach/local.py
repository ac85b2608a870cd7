"""Chapter 12: exact attention inside a window, and the local + GMA hybrid the paper proposes (its section 6).

* :func:`sliding_window_attention` and :class:`SlidingWindowAttention` (registry name ``window``): softmax
  attention in which query ``i`` sees only the ``w`` keys ``max(0, i-w+1) .. i`` (causal), or the symmetric band
  ``|i - j| < w`` (bidirectional). Computed block by block (blocks of ``w`` tokens, each query block against its own
  and its neighbouring key blocks), so memory grows as ``N w``, not ``N^2``. Decoding keeps the last ``w`` keys and
  values: a constant-size :class:`WindowCache`.
* :class:`LocalGMA` (``local_gma``): split heads. ``local_heads`` heads run :class:`SlidingWindowAttention`, the
  other ``n_heads - local_heads`` run an unchanged :class:`~gma_teach.GaussianMixtureAttention` (every option of
  the layer passes through, the routing remedies of :data:`~gma_teach.layer.LM_ROUTING_REMEDY` included), and the
  two output projections add up, which is one output projection over the concatenated heads.

Why split heads. Each head then is a mixer already specified and tested on its own, so the hybrid adds no new
arithmetic to trust, and its decoding state is exactly the window's plus GMA's. At the same width it has the same
projection parameters and per-token work as one attention layer (``4 d_model^2`` plus GMA's mixture), so a recall
comparison against the other mixers is not confounded by a larger layer, as a sum of two full-width mixers would
be. The output projection learns how to weigh the two ranges per output channel; what the split gives up is that
no single head sees both ranges, which a per-head gate over two full-width outputs would allow at twice the
projections.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from . import _checks
from .layer import DEFAULT_COMPONENTS, GaussianMixtureAttention
from .mixing import DecodingState, GMAState


# ---------------------------------------------------------------------------------------------- the function
def _masked_softmax(scores, mask):
    """Softmax over the last dim of ``scores`` restricted to ``mask``; a row with no visible key gives zeros (no
    NaN, no gradient through hidden entries)."""
    hidden = torch.finfo(scores.dtype).min
    return torch.softmax(scores.masked_fill(~mask, hidden), dim=-1) * mask


def _blocks(t, n_blocks, block):
    """``(..., N, F)`` padded to ``n_blocks * block`` -> ``(..., n_blocks, block, F)``."""
    pad = n_blocks * block - t.shape[-2]
    t = torch.nn.functional.pad(t, (0, 0, 0, pad)) if pad else t
    return t.reshape(*t.shape[:-2], n_blocks, block, t.shape[-1])


def _neighbours(blocks, causal):
    """Each block with its left neighbour (and right one if not causal): ``(..., nb, C, F) -> (..., nb, S, F)``,
    ``S = 2C`` or ``3C``; missing neighbours are zeros (masked by position)."""
    pad = (0, 0, 0, 0, 1, 0 if causal else 1)
    padded = torch.nn.functional.pad(blocks, pad)
    n = blocks.shape[-3]
    parts = [padded[..., :n, :, :], padded[..., 1:n + 1, :, :]]
    if not causal:
        parts.append(padded[..., 2:n + 2, :, :])
    return torch.cat(parts, dim=-2)


def sliding_window_attention(q, k, v, window: int, *, causal: bool = True, key_padding_mask=None):
    """Softmax attention ``softmax(q k^T / sqrt(d)) v`` restricted to a band of ``window`` keys.

    Query ``i`` sees keys ``j`` with ``i - window < j <= i`` (causal) or ``|i - j| < window`` (bidirectional), and,
    with ``key_padding_mask``, only real keys; a query that sees no key returns zeros.

    Args:
        q, k: ``(B, H, N, d)``; v: ``(B, H, N, d_v)``.
        window: ``w >= 1`` (``w = 1``: each token sees only itself; ``w >= N`` causal: full causal attention).
        causal: the one-sided window (``True``) or the symmetric band.
        key_padding_mask: ``(B, N)`` bool, ``True`` for real tokens, or ``None``.

    Returns:
        ``(B, H, N, d_v)``. Blocks of ``min(w, N)`` tokens against their neighbouring blocks: memory ``O(N w)``.
    """
    window = _checks.positive_int("window", window)
    _checks.boolean("causal", causal)
    for name, value in (("q", q), ("k", k), ("v", v)):
        _checks.tensor(name, value, min_rank=4)
        if value.dim() != 4:
            raise ValueError(f"{name} must be (B, H, N, d), got shape {tuple(value.shape)}")
    if q.shape[:3] != k.shape[:3] or k.shape[:3] != v.shape[:3] or q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q, k (B, H, N, d) and v (B, H, N, d_v) must agree, got q {tuple(q.shape)}, "
                         f"k {tuple(k.shape)}, v {tuple(v.shape)}")
    batch, _, n, _ = q.shape
    if key_padding_mask is not None:
        _checks.bool_mask("key_padding_mask", key_padding_mask, (batch, n), "(B, N)")
    block = max(1, min(window, n))
    n_blocks = -(-n // block)
    queries = _blocks(q, n_blocks, block)  # (B, H, nb, C, d)
    keys = _neighbours(_blocks(k, n_blocks, block), causal)  # (B, H, nb, S, d)
    values = _neighbours(_blocks(v, n_blocks, block), causal)
    starts = torch.arange(n_blocks, device=q.device)[:, None] * block
    query_pos = starts + torch.arange(block, device=q.device)  # (nb, C)
    key_pos = starts - block + torch.arange(keys.shape[-2], device=q.device)  # (nb, S)
    lag = query_pos[:, :, None] - key_pos[:, None, :]  # (nb, C, S): i - j
    visible = (lag < window) & (lag >= 0 if causal else lag > -window)
    visible = visible & (key_pos >= 0)[:, None, :] & (key_pos < n)[:, None, :]
    if key_padding_mask is not None:
        real = key_padding_mask[:, None, :, None].to(q.dtype)  # (B, 1, N, 1); padding below is 0 = not real
        real = _neighbours(_blocks(real, n_blocks, block), causal)[..., 0] > 0  # (B, 1, nb, S)
        visible = visible & real[:, :, :, None, :]
    scores = queries @ keys.transpose(-1, -2) / math.sqrt(q.shape[-1])
    output = _masked_softmax(scores, visible) @ values  # (B, H, nb, C, d_v)
    return output.flatten(-3, -2)[..., :n, :]


# ---------------------------------------------------------------------------------------------- the mixers
@dataclass
class WindowCache(DecodingState):
    """Decoding state of :class:`SlidingWindowAttention`: the last ``w`` keys and values ``(B, H, w, d_head)``
    (oldest first; before ``w`` tokens the leading slots are empty and masked) and the number of tokens seen.
    Constant size: ``2 B H w d_head`` elements whatever the position."""

    keys: torch.Tensor
    values: torch.Tensor
    position: int = 0


class SlidingWindowAttention(nn.Module):
    """Multi-head sliding-window softmax attention (see :func:`sliding_window_attention`).

    Args:
        d_model, n_heads: width and heads.
        causal: the one-sided window ``max(0, i-w+1) .. i``; ``False`` gives the symmetric band ``|i - j| < w``.
        window: ``w`` (default 64).
        head_dim: per-head width (default ``d_model // n_heads``; the heads' total width may differ from
            ``d_model``, as in :class:`LocalGMA`).
    """

    def __init__(self, d_model, n_heads, *, causal=False, window=64, head_dim=None):
        super().__init__()
        self.d_model = _checks.positive_int("d_model", d_model)
        self.n_heads = _checks.positive_int("n_heads", n_heads)
        if head_dim is None:
            _checks.heads(d_model, n_heads)
            head_dim = d_model // n_heads
        self.head_dim = _checks.positive_int("head_dim", head_dim)
        self.causal = _checks.boolean("causal", causal)
        self.window = _checks.positive_int("window", window)
        inner = self.n_heads * self.head_dim
        self.q_proj = nn.Linear(d_model, inner)
        self.k_proj = nn.Linear(d_model, inner)
        self.v_proj = nn.Linear(d_model, inner)
        self.out_proj = nn.Linear(inner, d_model)

    def _heads(self, projection, x):
        """``(B, N, d_model) -> (B, H, N, head_dim)``."""
        return projection(x).unflatten(-1, (self.n_heads, self.head_dim)).transpose(1, 2)

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)``, ``key_padding_mask (B, N)`` bool (``True`` = real) -> ``(B, N, d_model)``."""
        _checks.sequence("x", x, self.d_model)
        q, k, v = (self._heads(p, x) for p in (self.q_proj, self.k_proj, self.v_proj))
        y = sliding_window_attention(q, k, v, self.window, causal=self.causal, key_padding_mask=key_padding_mask)
        return self.out_proj(y.transpose(1, 2).flatten(-2))

    def init_state(self, batch_size):
        """An empty window: ``w`` zero slots for keys and values ``(B, H, w, head_dim)``, none of them visible."""
        if not self.causal:
            raise ValueError("init_state/step need a causal mixer (built with causal=True)")
        batch_size = _checks.positive_int("batch_size", batch_size)
        empty = self.k_proj.weight.new_zeros(batch_size, self.n_heads, self.window, self.head_dim)
        return WindowCache(empty, empty.clone(), 0)

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``; the oldest slot drops out."""
        if not self.causal:
            raise ValueError("step() needs a causal mixer (built with causal=True)")
        _checks.token("x_t", x_t, self.d_model)
        if not isinstance(state, WindowCache):
            raise TypeError(f"state must be a WindowCache (from init_state), got {type(state).__name__}")
        q, k, v = (self._heads(p, x_t[:, None, :]) for p in (self.q_proj, self.k_proj, self.v_proj))
        state = WindowCache(torch.cat([state.keys[:, :, 1:], k], dim=2),
                            torch.cat([state.values[:, :, 1:], v], dim=2), state.position + 1)
        visible = torch.arange(self.window, device=x_t.device) >= self.window - min(state.position, self.window)
        scores = q @ state.keys.transpose(-1, -2) / math.sqrt(self.head_dim)  # (B, H, 1, w)
        y = _masked_softmax(scores, visible) @ state.values
        return self.out_proj(y.transpose(1, 2).flatten(-2))[:, 0], state

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, window={self.window}, causal={self.causal}"


@dataclass
class LocalGMAState(DecodingState):
    """Decoding state of :class:`LocalGMA`: its window's :class:`WindowCache` and its GMA heads'
    :class:`~gma_teach.mixing.GMAState`; :meth:`~gma_teach.mixing.DecodingState.nbytes` is the sum of the two."""

    local: WindowCache
    gma: GMAState


class LocalGMA(nn.Module):
    """Local + GMA hybrid: ``local_heads`` heads of exact sliding-window softmax attention and ``n_heads -
    local_heads`` heads of GMA (see the module docstring for why the heads are split).

    Args:
        d_model, n_heads: width and heads (``n_heads >= 2``, ``d_model % n_heads == 0``); every head is
            ``d_model // n_heads`` wide unless ``d_route``/``d_value`` change the GMA heads.
        causal: both parts causal (decoder) or bidirectional.
        window: ``w`` of the local heads (default 64).
        local_heads: how many heads are local (default ``n_heads // 2``; between 1 and ``n_heads - 1``).
        n_components: K of the GMA heads (default :data:`gma_teach.layer.DEFAULT_COMPONENTS`, GMA's one default).
        d_route, d_value, eps, min_variance, impl, chunk_size, init_variance, init_mean_std, balance_weight,
            balance_form, tied_routing, distill_weight, assignment_weight, assignment_form: passed to
            :class:`~gma_teach.GaussianMixtureAttention` (``**LM_ROUTING_REMEDY`` works).

    ``local`` and ``gma`` are the two parts (``(B, N, d_model) -> (B, N, d_model)`` each); the output is their
    sum. A model's :func:`~gma_teach.models.auxiliary_loss` and :func:`~gma_teach.models.init_routing_means` find
    the GMA part like any GMA layer.
    """

    def __init__(self, d_model, n_heads, *, causal=False, window=64, local_heads=None,
                 n_components=DEFAULT_COMPONENTS, d_route=None, d_value=None, eps=1e-6, min_variance=1e-3,
                 impl="auto", chunk_size=64, init_variance=1.0, init_mean_std=1.0, balance_weight=0.0,
                 balance_form="switch", tied_routing=False, distill_weight=0.0, assignment_weight=0.0,
                 assignment_form="information"):
        super().__init__()
        d_model, n_heads = _checks.heads(d_model, n_heads)
        if n_heads < 2:
            raise ValueError(f"local_gma splits its heads between a window and GMA, so it needs n_heads >= 2, "
                             f"got n_heads={n_heads}")
        local_heads = n_heads // 2 if local_heads is None else local_heads
        local_heads = _checks.integer("local_heads", local_heads, minimum=1, maximum=n_heads - 1)
        self.d_model, self.n_heads, self.causal = d_model, n_heads, _checks.boolean("causal", causal)
        self.local_heads = local_heads
        head_dim = d_model // n_heads
        self.local = SlidingWindowAttention(d_model, local_heads, causal=causal, window=window, head_dim=head_dim)
        self.gma = GaussianMixtureAttention(
            d_model, n_heads - local_heads, n_components, causal=causal,
            d_route=head_dim if d_route is None else d_route, d_value=head_dim if d_value is None else d_value,
            eps=eps, min_variance=min_variance, impl=impl, chunk_size=chunk_size, init_variance=init_variance,
            init_mean_std=init_mean_std, balance_weight=balance_weight, balance_form=balance_form,
            tied_routing=tied_routing, distill_weight=distill_weight, assignment_weight=assignment_weight,
            assignment_form=assignment_form)

    def forward(self, x, key_padding_mask=None):
        """``x (B, N, d_model)``, ``key_padding_mask (B, N)`` bool (``True`` = real) -> ``(B, N, d_model)``."""
        _checks.sequence("x", x, self.d_model)
        return self.local(x, key_padding_mask) + self.gma(x, key_padding_mask=key_padding_mask)

    def init_state(self, batch_size):
        """The empty window and the empty GMA memory."""
        if not self.causal:
            raise ValueError("init_state/step need a causal mixer (built with causal=True)")
        return LocalGMAState(self.local.init_state(batch_size), self.gma.init_state(batch_size))

    def step(self, x_t, state):
        """One decoding step: ``x_t (B, d_model)`` -> ``(y_t (B, d_model), state)``."""
        if not self.causal:
            raise ValueError("step() needs a causal mixer (built with causal=True)")
        if not isinstance(state, LocalGMAState):
            raise TypeError(f"state must be a LocalGMAState (from init_state), got {type(state).__name__}")
        y_local, local = self.local.step(x_t, state.local)
        y_gma, gma = self.gma.step(x_t, state.gma)
        return y_local + y_gma, LocalGMAState(local, gma)
