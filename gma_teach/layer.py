"""Chapter 5 (and 6): the multi-head Gaussian Mixture Attention layer, with recurrent decoding.

Data flow for input ``x`` ``(B, N, d_model)`` (and ``context`` ``(B, M, d_model)`` for cross-attention)::

    q = q_proj(x),  k = k_proj(context or x),  v = v_proj(context or x)      split into H heads
    Gamma_Q = mixture(q) (B, H, N, K),  Gamma_K = mixture(k) (B, H, M, K)     one shared mixture per head
    O = Gamma_Q (Gamma_K^T V) / (Gamma_Q (Gamma_K^T 1) + eps)                 prefix sums when causal
    y = out_proj(merge heads of O)                                            (B, N, d_model)

Queries and keys of a head share one mixture: that is what makes ``gamma_q . gamma_k`` a similarity.
"""
from __future__ import annotations

import torch
from torch import nn

from . import _checks
from .gmm import GaussianMixture
from .mixing import IMPLS, GMAState, _auto_impl, gma, gma_from_responsibilities, recurrent_step


class GaussianMixtureAttention(nn.Module):
    """Multi-head Gaussian Mixture Attention.

    Args:
        d_model: model width D.
        n_heads: H.
        n_components: K, Gaussian components per head.
        causal: position ``i`` sees only ``j <= i`` (decoder); causal layers take no ``context``.
        d_route: routing dimension per head (default ``d_model // n_heads``).
        d_value: value dimension per head (default ``d_model // n_heads``).
        eps: the normalizer's floor.
        min_variance: the mixture's variance floor.
        impl: ``"auto"`` or one of :data:`gma_teach.IMPLS` (see :mod:`gma_teach.mixing`).
        chunk_size: chunk length for ``impl="chunked"`` (and the kernels' causal form).

    Diagnostics: set ``layer.store_responsibilities = True``; after each forward ``layer.last_responsibilities``
    holds ``{"query": (B, H, N, K), "key": (B, H, M, K)}`` (detached). :meth:`routing` computes them directly.

    Decoding (causal layers): ``state = layer.init_state(B)``, then ``y_t, state = layer.step(x_t, state)`` for
    ``x_t`` ``(B, d_model)``; the outputs equal the causal forward and the state stays ``(B, H, K, d_value)``.
    """

    def __init__(self, d_model: int, n_heads: int, n_components: int, *, causal: bool = False,
                 d_route: int | None = None, d_value: int | None = None, eps: float = 1e-6,
                 min_variance: float = 1e-3, impl: str = "auto", chunk_size: int = 64):
        super().__init__()
        self.d_model = _checks.positive_int("d_model", d_model)
        self.n_heads = _checks.positive_int("n_heads", n_heads)
        self.n_components = _checks.positive_int("n_components", n_components)
        if (d_route is None or d_value is None) and d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads} unless d_route and "
                             "d_value are given")
        self.d_route = _checks.positive_int("d_route", d_route if d_route is not None else d_model // n_heads)
        self.d_value = _checks.positive_int("d_value", d_value if d_value is not None else d_model // n_heads)
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be a bool, got {type(causal).__name__}")
        if impl != "auto" and impl not in IMPLS:
            raise ValueError(f"impl must be 'auto' or one of {IMPLS}, got {impl!r}")
        if impl == "linear" and causal:
            raise ValueError("impl='linear' is bidirectional; a causal layer needs 'chunked', 'cumsum', "
                             "'recurrent', 'triton' or 'auto'")
        self.causal = causal
        self.eps = _checks.positive_number("eps", eps)
        self.impl = impl
        self.chunk_size = _checks.positive_int("chunk_size", chunk_size)
        self.q_proj = nn.Linear(d_model, self.n_heads * self.d_route)
        self.k_proj = nn.Linear(d_model, self.n_heads * self.d_route)
        self.v_proj = nn.Linear(d_model, self.n_heads * self.d_value)
        self.out_proj = nn.Linear(self.n_heads * self.d_value, d_model)
        self.mixture = GaussianMixture(self.n_components, self.d_route, n_heads=self.n_heads,
                                       min_variance=min_variance)
        self.store_responsibilities = False
        self.last_responsibilities: dict[str, torch.Tensor] | None = None

    # ------------------------------------------------------------------------------------------ helpers
    def _check_input(self, name: str, x) -> None:
        _checks.tensor(name, x, min_rank=1)
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"{name} must be (B, N, d_model={self.d_model}), got shape {tuple(x.shape)}")

    def _heads(self, t: torch.Tensor, width: int) -> torch.Tensor:
        """``(B, N, H * width)`` -> ``(B, H, N, width)``."""
        return t.unflatten(-1, (self.n_heads, width)).transpose(1, 2)

    def _project(self, x, context):
        source = x if context is None else context
        q = self._heads(self.q_proj(x), self.d_route)
        k = self._heads(self.k_proj(source), self.d_route)
        v = self._heads(self.v_proj(source), self.d_value)
        return q, k, v

    # --------------------------------------------------------------------------------------------- API
    def routing(self, x: torch.Tensor, context: torch.Tensor | None = None):
        """Query and key responsibilities: ``((B, H, N, K), (B, H, M, K))``."""
        self._check_input("x", x)
        if context is not None:
            self._check_input("context", context)
        q, k, _ = self._project(x, context)
        return self.mixture(q), self.mixture(k)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None = None,
                key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` ``(B, N, d_model)`` -> ``(B, N, d_model)``.

        Args:
            x: the queries' tokens (and the keys' too without ``context``).
            context: ``(B, M, d_model)`` tokens for cross-attention (bidirectional layers only).
            key_padding_mask: ``(B, M)`` bool, ``True`` for real keys; padded keys get responsibility 0, so they
                write nothing into the memory (same convention as :mod:`gma_teach.baselines`).
        """
        self._check_input("x", x)
        if context is not None:
            if self.causal:
                raise ValueError("a causal layer takes no context: cross-attention needs causal=False")
            self._check_input("context", context)
            if context.shape[0] != x.shape[0]:
                raise ValueError(f"context must have the batch size of x ({x.shape[0]}), got {context.shape[0]}")
        source = x if context is None else context
        if key_padding_mask is not None:
            if not isinstance(key_padding_mask, torch.Tensor) or key_padding_mask.dtype != torch.bool:
                raise TypeError(f"key_padding_mask must be a bool tensor, got "
                                f"{getattr(key_padding_mask, 'dtype', type(key_padding_mask).__name__)}")
            if key_padding_mask.shape != source.shape[:2]:
                raise ValueError(f"key_padding_mask must have shape (B, M) = {tuple(source.shape[:2])}, "
                                 f"got {tuple(key_padding_mask.shape)}")
            if self.impl == "triton":
                raise ValueError("impl='triton' takes no key_padding_mask (the kernels never store Gamma_K); "
                                 "use impl='auto' or a torch form")
        q, k, v = self._project(x, context)
        mixture = self.mixture
        if self.impl != "auto":
            impl = self.impl
        else:  # the fused kernels never store Gamma_K, so a padding mask needs a torch form
            impl = _auto_impl(self.causal, v, None if key_padding_mask is not None else mixture.means,
                              self.chunk_size)
        if impl == "triton":
            output = gma(q, k, v, mixture.means, mixture.variances, mixture.log_priors, causal=self.causal,
                         eps=self.eps, impl="triton", chunk_size=self.chunk_size)
            if self.store_responsibilities:
                with torch.no_grad():
                    self.last_responsibilities = {"query": mixture(q), "key": mixture(k)}
        else:
            gamma_q, gamma_k = mixture(q), mixture(k)
            if key_padding_mask is not None:
                gamma_k = gamma_k * key_padding_mask[:, None, :, None].to(gamma_k.dtype)
            output = gma_from_responsibilities(gamma_q, gamma_k, v, causal=self.causal, eps=self.eps, impl=impl,
                                               chunk_size=self.chunk_size)
            if self.store_responsibilities:
                self.last_responsibilities = {"query": gamma_q.detach(), "key": gamma_k.detach()}
        return self.out_proj(output.transpose(1, 2).flatten(-2))

    def init_state(self, batch_size: int, *, device=None, dtype=None) -> GMAState:
        """The empty decoding state: memory ``(B, H, K, d_value)``, normalizer ``(B, H, K)`` (float32 or
        float64, whatever the parameters' dtype, so long generations do not lose precision)."""
        if not self.causal:
            raise ValueError("init_state/step are the decoding form of a causal layer; this layer has causal=False")
        batch_size = _checks.positive_int("batch_size", batch_size)
        weight = self.v_proj.weight
        dtype = dtype or (torch.float64 if weight.dtype == torch.float64 else torch.float32)
        return GMAState.zeros((batch_size, self.n_heads), self.n_components, self.d_value, dtype=dtype,
                              device=device or weight.device)

    def step(self, x_t: torch.Tensor, state: GMAState):
        """One decoding step: ``x_t`` ``(B, d_model)`` -> ``(y_t (B, d_model), new_state)``."""
        if not self.causal:
            raise ValueError("step is the decoding form of a causal layer; this layer has causal=False")
        _checks.tensor("x_t", x_t, min_rank=1)
        if x_t.dim() != 2 or x_t.shape[-1] != self.d_model:
            raise ValueError(f"x_t must be (B, d_model={self.d_model}), got shape {tuple(x_t.shape)}")
        if not isinstance(state, GMAState):
            raise TypeError(f"state must be a GMAState (from init_state), got {type(state).__name__}")
        expected = (x_t.shape[0], self.n_heads, self.n_components, self.d_value)
        if tuple(state.memory.shape) != expected:
            raise ValueError(f"state.memory must be {expected} for this layer and batch, "
                             f"got {tuple(state.memory.shape)}")
        q, k, v = self._project(x_t.unsqueeze(1), None)  # (B, H, 1, .)
        gamma_q, gamma_k = self.mixture(q)[:, :, 0], self.mixture(k)[:, :, 0]
        dtype = state.memory.dtype
        output, state = recurrent_step(gamma_q.to(dtype), gamma_k.to(dtype), v[:, :, 0].to(dtype), state, self.eps)
        return self.out_proj(output.to(x_t.dtype).flatten(-2)), state

    def extra_repr(self) -> str:
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, n_components={self.n_components}, "
                f"d_route={self.d_route}, d_value={self.d_value}, causal={self.causal}, impl={self.impl!r}")
