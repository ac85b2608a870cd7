r"""Chapters 3, 4 and 6: Gaussian Mixture Attention in every form.

Given query responsibilities :math:`\Gamma^Q` ``(N_q, K)``, key responsibilities :math:`\Gamma^K` ``(N_k, K)``
and values :math:`V` ``(N_k, d_v)``, GMA returns

.. math::

    O = \frac{\Gamma^Q \tilde V}{\Gamma^Q Z + \varepsilon},\qquad \tilde V = (\Gamma^K)^\top V \ (K \times d_v),
    \quad Z = (\Gamma^K)^\top \mathbf 1 \ (K),

which equals :math:`A V` for the row-normalized affinity :math:`A_{ij} = \gamma^Q_i\cdot\gamma^K_j /
(\sum_{j'} \gamma^Q_i\cdot\gamma^K_{j'} + \varepsilon)`. Causal GMA replaces :math:`\tilde V, Z` at position ``i`` by
their prefix sums over ``j <= i``. The implementations (``impl=``) all compute this same function:

* ``"naive"``: materializes the ``N_q x N_k`` affinity -- the spec, ``O(N^2)`` memory (refused, before anything
  is allocated, above :data:`~gma_teach.mixing.NAIVE_MAX_BYTES` unless a call's ``max_naive_bytes`` raises the limit);
* ``"linear"``: the associative order, memory ``(K, d_v)`` -- bidirectional only;
* ``"cumsum"``: the paper's prefix sums over a materialized ``(N, K, d_v)`` tensor;
* ``"chunked"``: chunks of ``chunk_size`` tokens; a masked ``C x C`` block inside each chunk and a carried
  ``(K, d_v)`` state between chunks -- memory ``O(N C + (N/C) K d_v)``, arithmetic
  ``O(N C (K + d_v) + N K d_v)`` (the in-chunk scores cost ``N C K``, their product with ``V`` ``N C d_v``);
* ``"recurrent"``: token by token with a ``(K, d_v)`` state -- the decoding form;
* ``"triton"``: the fused kernels of :mod:`gma_teach.kernels` (only through :func:`gma`, which owns the mixture);
* ``"lean"``: one autograd function (``gma_teach._gma_autograd``, only through :func:`gma`) that saves the
  routing vectors, the values and one number per token and recomputes the responsibilities in the backward pass;
  with a key padding mask, ``return_responsibilities`` or inaccurate float32 logits it runs the forms below;
* ``"auto"``: :func:`gma` is the one place that chooses: ``"triton"`` on CUDA when the kernels are available and
  accept the inputs (``kernels.supports``), there is no key padding mask, and the float32 logits are accurate
  (:func:`gma_teach.gmm.gemm_cancellation_bound`); else ``"lean"``, which itself falls back as above;
  :func:`gma_from_responsibilities` (given responsibilities) runs ``"chunked"`` (causal) or ``"linear"``.

For ``causal=False`` the prefix forms use their final (total) state, so every ``impl`` serves both settings
except ``"linear"``, which is bidirectional by construction. Cross-attention (``N_q != N_k``) needs
``causal=False``. Inputs are mixed in :func:`gma_teach.gmm.compute_dtype` of all of them (half precision in
float32, float64 if any is float64) and returned in the values' dtype.

The same forms compute any *normalized kernel attention* ``phi(Q) [phi(K)^T V] / (phi(Q) [phi(K)^T 1] + eps)``
with non-negative features in place of responsibilities: :func:`gma_teach.baselines.linear_attention` is
:func:`~gma_teach.mixing.normalized_kernel_attention` (the forms of :func:`gma_from_responsibilities` without its
check that every
row sums to 1) with feature maps.

Size: one file of 500-odd lines because it is the one place that chooses a GMA form (``impl=``), and its forms
share one validation; the lean autograd form is its own module, ``gma_teach._gma_autograd``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from . import _checks
from ._gma_autograd import lean_applies, lean_gma
from .gmm import (
    GEMM_LOGIT_TOLERANCE,
    check_gma_inputs,
    compute_dtype,
    gemm_cancellation_bound,
    gemm_logits,
)

IMPLS = ("naive", "linear", "cumsum", "chunked", "recurrent", "triton", "lean")

NAIVE_MAX_BYTES = 8 * 2**30
"""The largest ``(..., N_q, N_k)`` matrix (in bytes, in the compute dtype) that ``impl="naive"`` and
:func:`affinity` materialize unless a call's ``max_naive_bytes`` raises it: 8 GiB. Larger requests are refused
before anything is allocated, with the memory they would need; ``impl="chunked"`` (or ``"linear"``) computes the
same function in memory linear in N."""


# ----------------------------------------------------------------------------------------------- the pieces
def write_memory(gamma_k: torch.Tensor, v: torch.Tensor):
    """Keys write values into K slots: the memory ``Gamma^K^T V`` ``(..., K, d_v)`` and the normalizer
    ``Gamma^K^T 1`` ``(..., K)``.

    Args:
        gamma_k: ``(..., N_k, K)``; v: ``(..., N_k, d_v)``.
    """
    return gamma_k.transpose(-1, -2) @ v, gamma_k.sum(-2)


def read_memory(gamma_q: torch.Tensor, memory: torch.Tensor, normalizer: torch.Tensor, eps: float):
    """Queries read the memory: ``O = Gamma^Q memory / (Gamma^Q normalizer + eps)``.

    Args:
        gamma_q: ``(..., N_q, K)``; memory: ``(..., K, d_v)``; normalizer: ``(..., K)``.

    Returns:
        ``(..., N_q, d_v)``.
    """
    return (gamma_q @ memory) / ((gamma_q @ normalizer.unsqueeze(-1)) + eps)


def affinity(gamma_q, gamma_k, *, causal: bool = False, eps: float = 1e-6,
             max_naive_bytes: int | None = None) -> torch.Tensor:
    """The row-normalized ``(..., N_q, N_k)`` affinity that GMA induces (for pictures and checks).

    ``A = M / (M 1 + eps)`` with ``M = Gamma^Q Gamma^K^T`` (lower-triangular if ``causal``), so that
    ``gma_from_responsibilities(gamma_q, gamma_k, v) == affinity(gamma_q, gamma_k) @ v``.
    Rows sum to slightly less than 1 (by ``eps``); entries are non-negative; the rank is at most K.
    ``gamma_q`` and ``gamma_k`` are checked as in :func:`gma_from_responsibilities`; a matrix larger than
    ``max_naive_bytes`` (default :data:`~gma_teach.mixing.NAIVE_MAX_BYTES`) is refused before it is allocated.
    """
    _check_options(causal, eps, "auto", 1)
    _check_responsibilities(gamma_q, gamma_k, None, causal=causal)
    _check_distributions(gamma_q=gamma_q, gamma_k=gamma_k)
    _check_naive_memory(gamma_q, gamma_k, None, max_naive_bytes, "affinity",
                        dtype=torch.promote_types(gamma_q.dtype, gamma_k.dtype))
    scores = _scores(gamma_q, gamma_k, causal)
    return scores / (scores.sum(-1, keepdim=True) + eps)


def _scores(gamma_q, gamma_k, causal):
    scores = gamma_q @ gamma_k.transpose(-1, -2)
    return scores.tril() if causal else scores


# ------------------------------------------------------------------------------------------- the recurrence
class DecodingState:
    """Base of every decoding state (GMA's and the baselines'): :meth:`nbytes` counts its tensors' bytes."""

    def nbytes(self) -> int:
        """Bytes held by the state's tensors and by the decoding states it holds (a hybrid's parts); its other
        fields, like a position counter, are not counted."""
        return sum(value.numel() * value.element_size() if isinstance(value, torch.Tensor) else value.nbytes()
                   for value in vars(self).values() if isinstance(value, (torch.Tensor, DecodingState)))


@dataclass
class GMAState(DecodingState):
    """The recurrent state of causal GMA after ``position`` tokens: constant size whatever the position.

    Attributes:
        memory: ``(..., K, d_v)`` running ``sum_j gamma^K_j v_j^T``.
        normalizer: ``(..., K)`` running ``sum_j gamma^K_j``.
        position: number of tokens written so far.
    """

    memory: torch.Tensor
    normalizer: torch.Tensor
    position: int = 0

    @classmethod
    def zeros(cls, batch_shape, n_components: int, d_value: int, *, dtype=torch.float32, device=None):
        """The empty state for ``batch_shape`` (for a layer: ``(B, H)``)."""
        batch_shape = tuple(batch_shape)
        return cls(torch.zeros(*batch_shape, n_components, d_value, dtype=dtype, device=device),
                   torch.zeros(*batch_shape, n_components, dtype=dtype, device=device), 0)

    def write(self, gamma_k_t: torch.Tensor, v_t: torch.Tensor) -> GMAState:
        """The state after writing one token: ``gamma_k_t`` ``(..., K)``, ``v_t`` ``(..., d_v)`` (not in place)."""
        return GMAState(self.memory + gamma_k_t.unsqueeze(-1) * v_t.unsqueeze(-2),
                        self.normalizer + gamma_k_t, self.position + 1)


def recurrent_step(gamma_q_t, gamma_k_t, v_t, state: GMAState, eps: float = 1e-6):
    """One decoding step of causal GMA: write token ``t``, then read it.

    Args:
        gamma_q_t, gamma_k_t: ``(..., K)``; v_t: ``(..., d_v)``; state: a :class:`GMAState` over ``...``.

    Returns:
        ``(o_t (..., d_v), new_state)``; the input state is not modified (autograd-safe).

    Raises:
        ValueError: a half-precision state (float16/bfloat16): its running sums would drift over a long
            generation; build it in float32 or float64.
    """
    _checks.decoding_dtype("state.memory.dtype", state.memory.dtype)
    state = state.write(gamma_k_t, v_t)
    output = read_memory(gamma_q_t.unsqueeze(-2), state.memory, state.normalizer, eps).squeeze(-2)
    return output, state


# --------------------------------------------------------------------------------------- implementations
def _naive(gamma_q, gamma_k, v, causal, eps, chunk_size):
    scores = _scores(gamma_q, gamma_k, causal)
    return (scores @ v) / (scores.sum(-1, keepdim=True) + eps)


def _with_count(v):
    """Append a column of ones to the values: ``Gamma^K^T [V, 1] = [memory, normalizer]``, so one product yields
    both (a single pass over ``Gamma^Q`` instead of two)."""
    return F.pad(v, (0, 1), value=1.0)


def _normalize(numerator_and_count, eps):
    return numerator_and_count[..., :-1] / (numerator_and_count[..., -1:] + eps)


def _linear(gamma_q, gamma_k, v, causal, eps, chunk_size):
    if causal:
        raise ValueError("impl='linear' is the bidirectional associative form; for causal=True use "
                         "'chunked', 'cumsum' or 'recurrent' (or 'auto')")
    memory = gamma_k.transpose(-1, -2) @ _with_count(v)  # (..., K, d_v + 1) = [memory, normalizer]
    return _normalize(gamma_q @ memory, eps)


def _cumsum(gamma_q, gamma_k, v, causal, eps, chunk_size):
    outer = gamma_k.unsqueeze(-1) * v.unsqueeze(-2)  # (..., N, K, d_v): the paper's materialized tensor
    if not causal:
        return read_memory(gamma_q, outer.sum(-3), gamma_k.sum(-2), eps)
    memory = outer.cumsum(-3)
    normalizer = gamma_k.cumsum(-2)
    numerator = (gamma_q.unsqueeze(-2) @ memory).squeeze(-2)
    return numerator / ((gamma_q * normalizer).sum(-1, keepdim=True) + eps)


def _chunked(gamma_q, gamma_k, v, causal, eps, chunk_size):
    n_tokens = gamma_k.shape[-2]
    n_chunks = -(-n_tokens // chunk_size)
    pad = n_chunks * chunk_size - n_tokens

    def chunks(t):  # (..., N, F) -> (..., n_chunks, C, F); padded keys have gamma = 0 and write nothing
        t = F.pad(t, (0, 0, 0, pad)) if pad else t
        return t.reshape(*t.shape[:-2], n_chunks, chunk_size, t.shape[-1])

    keys, values = chunks(gamma_k), chunks(_with_count(v))
    chunk_memory = keys.transpose(-1, -2) @ values  # (..., n_chunks, K, d_v + 1): each chunk's [memory, normalizer]
    if not causal:
        return _normalize(gamma_q @ chunk_memory.sum(-3), eps)
    queries = chunks(gamma_q)
    # the state carried into each chunk: exclusive prefix sums over chunks (shifted, never "inclusive minus
    # own chunk", whose rounding would leak the chunk's later tokens into its earlier outputs)
    memory = F.pad(chunk_memory.cumsum(-3)[..., :-1, :, :], (0, 0, 0, 0, 1, 0))
    inside = (queries @ keys.transpose(-1, -2)).tril()  # (..., n_chunks, C, C), causal within the chunk
    output = _normalize(queries @ memory + inside @ values, eps)
    output = output.reshape(*output.shape[:-3], n_chunks * chunk_size, output.shape[-1])
    return output[..., :n_tokens, :]


def _recurrent(gamma_q, gamma_k, v, causal, eps, chunk_size):
    state = GMAState.zeros(gamma_k.shape[:-2], gamma_k.shape[-1], v.shape[-1], dtype=v.dtype, device=v.device)
    if not causal:
        for t in range(gamma_k.shape[-2]):
            state = state.write(gamma_k[..., t, :], v[..., t, :])
        return read_memory(gamma_q, state.memory, state.normalizer, eps)
    if gamma_q.shape[-2] == 0:  # no tokens: an empty result, like the other forms
        lead = torch.broadcast_shapes(gamma_q.shape[:-2], gamma_k.shape[:-2], v.shape[:-2])
        return v.new_zeros(*lead, 0, v.shape[-1])
    outputs = []
    for t in range(gamma_k.shape[-2]):
        output, state = recurrent_step(gamma_q[..., t, :], gamma_k[..., t, :], v[..., t, :], state, eps)
        outputs.append(output)
    return torch.stack(outputs, dim=-2)


_IMPLEMENTATIONS = {"naive": _naive, "linear": _linear, "cumsum": _cumsum, "chunked": _chunked,
                    "recurrent": _recurrent}


# ------------------------------------------------------------------------------------------ validation
def _check_options(causal, eps, impl, chunk_size):
    _checks.boolean("causal", causal)
    _checks.positive_number("eps", eps)
    _checks.one_of("impl", impl, ("auto", *IMPLS))
    _checks.positive_int("chunk_size", chunk_size)


def _check_responsibilities(gamma_q, gamma_k, v, *, causal, names=("gamma_q", "gamma_k", "v")):
    """Shapes of ``(gamma_q, gamma_k, v)``, named as the caller named them (``names``)."""
    name_q, name_k, name_v = names
    _checks.tensor(name_q, gamma_q, min_rank=2)
    _checks.tensor(name_k, gamma_k, min_rank=2)
    named = {name_q: gamma_q, name_k: gamma_k}
    if v is not None:
        _checks.tensor(name_v, v, min_rank=2)
        named[name_v] = v
    _checks.same_device(**named)
    if gamma_q.shape[-1] != gamma_k.shape[-1]:
        raise ValueError(f"{name_q} and {name_k} must have the same K (last dim), got {name_q} "
                         f"{tuple(gamma_q.shape)} and {name_k} {tuple(gamma_k.shape)}")
    if v is not None and v.shape[-2] != gamma_k.shape[-2]:
        raise ValueError(f"{name_v} must have one row per key: {name_k} has N_k={gamma_k.shape[-2]} "
                         f"({tuple(gamma_k.shape)}), {name_v} has {v.shape[-2]} ({tuple(v.shape)})")
    if causal and gamma_q.shape[-2] != gamma_k.shape[-2]:
        raise ValueError(f"causal=True needs as many queries as keys, got N_q={gamma_q.shape[-2]} and "
                         f"N_k={gamma_k.shape[-2]}; cross-attention (N_q != N_k) needs causal=False")
    _checks.leading_shape(**named)


def distribution_tolerance(dtype: torch.dtype) -> float:
    """How far from 1 a responsibility row of ``dtype`` may sum: ``1e-3``, or ``2e-2`` in float16/bfloat16 (whose
    rounding of K entries moves a row's sum by up to about ``2^-9`` in bfloat16)."""
    return 2e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-3


@torch.no_grad()
def _check_distributions(**named: torch.Tensor) -> None:
    """Check that each tensor's rows (last dim) are distributions: entries >= 0, each row summing to 1 within
    :func:`~gma_teach.mixing.distribution_tolerance` or all zero (a padded key, which writes nothing). Logits or
    unnormalized scores
    are refused. One reduction per tensor and one read (a GPU synchronization); skipped while ``torch.compile``
    traces."""
    if torch.compiler.is_compiling():
        return
    for name, gamma in named.items():
        if gamma.numel() == 0:
            continue
        sums = gamma.sum(-1)
        row_error = torch.where(sums == 0, torch.zeros_like(sums), (sums - 1).abs())
        smallest, worst = torch.stack([gamma.amin(), row_error.amax()]).tolist()
        if not smallest >= 0:
            raise ValueError(f"{name} must hold responsibilities (rows of non-negative entries summing to 1), got a "
                             f"minimum entry of {smallest:.4g}; logits need a softmax over the last dim first")
        tolerance = distribution_tolerance(gamma.dtype)
        if not worst <= tolerance:
            row = tuple(int(i) for i in (row_error == row_error.amax()).nonzero()[0])
            raise ValueError(f"{name} must hold responsibilities: each row (last dim) must sum to 1 within "
                             f"{tolerance:g} for {gamma.dtype} (or be all zero, a padded key), got a row at index "
                             f"{row} summing to {float(sums[row]):.6g}; normalize the rows (softmax over the last dim)")


def _check_naive_memory(gamma_q, gamma_k, v, max_naive_bytes, caller, dtype=None) -> None:
    """Refuse to materialize a ``(..., N_q, N_k)`` matrix (in ``dtype``, default the inputs' compute dtype) larger
    than ``max_naive_bytes`` (default :data:`~gma_teach.mixing.NAIVE_MAX_BYTES`), before anything is allocated,
    naming the memory it
    needs."""
    limit = NAIVE_MAX_BYTES if max_naive_bytes is None else _checks.positive_int("max_naive_bytes", max_naive_bytes)
    shapes = [t.shape[:-2] for t in (gamma_q, gamma_k, v) if t is not None]
    dtype = dtype or compute_dtype(*(t.dtype for t in (gamma_q, gamma_k, v) if t is not None))
    lead = torch.broadcast_shapes(*shapes)
    n_bytes = lead.numel() * gamma_q.shape[-2] * gamma_k.shape[-2] * torch.finfo(dtype).bits // 8
    if n_bytes > limit:
        shape = (*lead, gamma_q.shape[-2], gamma_k.shape[-2])
        raise ValueError(f"{caller} would materialize the {shape} affinity in {dtype}: {n_bytes / 2**30:.3g} GiB, "
                         f"above max_naive_bytes={limit} ({limit / 2**30:.3g} GiB); use impl='chunked' (or "
                         "'linear' when bidirectional), which computes the same output in memory linear in N, or "
                         "raise max_naive_bytes")


def _mix(gamma_q, gamma_k, v, *, causal, eps, impl, chunk_size, max_naive_bytes=None):
    """Run one torch form (validated inputs) in the compute dtype; return ``v``'s dtype."""
    if impl == "naive":
        _check_naive_memory(gamma_q, gamma_k, v, max_naive_bytes, "impl='naive'")
    if impl == "auto":
        impl = "chunked" if causal else "linear"
    dtype = compute_dtype(gamma_q.dtype, gamma_k.dtype, v.dtype)
    with torch.autocast(v.device.type, enabled=False):
        output = _IMPLEMENTATIONS[impl](gamma_q.to(dtype), gamma_k.to(dtype), v.to(dtype), causal, eps, chunk_size)
    return output.to(v.dtype)


def _kernels_take(q, k, v, means, variances, chunk_size) -> bool:
    """Whether ``impl="auto"`` may run the fused kernels: CUDA, kernels available and accepting these sizes, and
    float32 logits accurate enough (the kernels compute them in float32)."""
    if v.device.type != "cuda":
        return False
    from . import kernels  # optional dependency: the kernels need triton

    if not (kernels.is_available(v.device)
            and kernels.supports(v.dtype, means.shape[-2], means.shape[-1], v.shape[-1], chunk_size)):
        return False
    return max(gemm_cancellation_bound(q, means, variances),
               gemm_cancellation_bound(k, means, variances)) <= GEMM_LOGIT_TOLERANCE


# ----------------------------------------------------------------------------------------- public entry
def gma_from_responsibilities(gamma_q, gamma_k, v, *, causal: bool = False, eps: float = 1e-6,
                              impl: str = "auto", chunk_size: int = 64,
                              max_naive_bytes: int | None = None) -> torch.Tensor:
    """GMA given responsibilities: ``O = Gamma^Q (Gamma^K^T V) / (Gamma^Q (Gamma^K^T 1) + eps)``.

    The rows of ``gamma_q`` and ``gamma_k`` are checked to be responsibilities: entries >= 0 and each row summing
    to 1 within :func:`~gma_teach.mixing.distribution_tolerance` (``1e-3``; ``2e-2`` in float16/bfloat16), or all
    zero (a padded
    key, as :func:`gma` returns them). Logits are refused. The check costs one reduction per tensor (under
    ``torch.no_grad``) and one read. For other non-negative features (normalized kernel attention) call
    :func:`~gma_teach.mixing.normalized_kernel_attention`, the same forms without the check.

    Args:
        gamma_q: ``(..., N_q, K)`` query responsibilities.
        gamma_k: ``(..., N_k, K)`` key responsibilities.
        v: ``(..., N_k, d_v)`` values. Leading dims of the three must be equal or broadcastable.
        causal: position ``i`` reads only keys ``j <= i`` (needs ``N_q == N_k``).
        eps: the normalizer's floor (finite, > 0).
        impl: ``"auto"`` (``"chunked"`` if causal, else ``"linear"``) or one of :data:`IMPLS` except ``"triton"``
            and ``"lean"`` (which compute the responsibilities: use :func:`gma`); see the module docstring.
        chunk_size: tokens per chunk for ``impl="chunked"``.
        max_naive_bytes: the largest ``(..., N_q, N_k)`` matrix ``impl="naive"`` may allocate (default
            :data:`~gma_teach.mixing.NAIVE_MAX_BYTES`, 8 GiB); a larger one is refused before allocation with the
            memory it needs.

    Returns:
        ``(..., N_q, d_v)`` in ``v``'s dtype (computed in :func:`gma_teach.gmm.compute_dtype` of the inputs).
    """
    _check_options(causal, eps, impl, chunk_size)
    _check_responsibilities(gamma_q, gamma_k, v, causal=causal)
    _check_distributions(gamma_q=gamma_q, gamma_k=gamma_k)
    return normalized_kernel_attention(gamma_q, gamma_k, v, causal=causal, eps=eps, impl=impl,
                                       chunk_size=chunk_size, max_naive_bytes=max_naive_bytes)


def normalized_kernel_attention(phi_q, phi_k, v, *, causal: bool = False, eps: float = 1e-6, impl: str = "auto",
                                chunk_size: int = 64, max_naive_bytes: int | None = None) -> torch.Tensor:
    """The forms of :func:`gma_from_responsibilities` with any non-negative features in place of responsibilities:
    ``phi(Q) [phi(K)^T V] / (phi(Q) [phi(K)^T 1] + eps)`` (rows need not sum to 1, and are not read).

    Args:
        phi_q: ``(..., N_q, m)``; phi_k: ``(..., N_k, m)``, non-negative features; v: ``(..., N_k, d_v)``.
        causal, eps, impl, chunk_size, max_naive_bytes: as in :func:`gma_from_responsibilities`.

    Returns:
        ``(..., N_q, d_v)`` in ``v``'s dtype.
    """
    _check_options(causal, eps, impl, chunk_size)
    _check_responsibilities(phi_q, phi_k, v, causal=causal, names=("phi_q", "phi_k", "v"))
    if impl in ("triton", "lean"):
        raise ValueError(f"impl={impl!r} computes the responsibilities itself: call gma(q, k, v, means, "
                         f"variances, log_priors, impl={impl!r}) instead of gma_from_responsibilities")
    return _mix(phi_q, phi_k, v, causal=causal, eps=eps, impl=impl, chunk_size=chunk_size,
                max_naive_bytes=max_naive_bytes)


def gma(q, k, v, means, variances, log_priors, *, causal: bool = False, eps: float = 1e-6, impl: str = "auto",
        chunk_size: int = 64, key_padding_mask: torch.Tensor | None = None, return_responsibilities: bool = False,
        check_values: bool = True, max_naive_bytes: int | None = None):
    """Gaussian Mixture Attention from routing vectors: responsibilities, then the mixing form ``impl``.

    This is the one place that chooses between the fused kernels and the torch forms (``impl="auto"``).

    Args:
        q: ``(..., N_q, d)`` queries, or ``(..., H, N_q, d)`` with one mixture per head.
        k: ``(..., N_k, d)`` keys (``(..., H, N_k, d)`` per head).
        v: ``(..., N_k, d_v)`` values (``(..., H, N_k, d_v)`` per head). With one mixture per head, ``q``, ``k``
            and ``v`` must all carry the head dim and have the same number of dims (missing dims are refused: a
            ``(B, N, d)`` ``q`` with ``B == H`` would otherwise pass as ``(H, N, d)``, shared by the batch).
        means, variances: ``(K, d)`` or ``(H, K, d)``; variances normal positive numbers. Their dtype may differ
            from the inputs' (a float64 mixture on float32 inputs computes in float64).
        log_priors: ``(K,)`` or ``(H, K)``, normalized.
        causal, eps, chunk_size: as in :func:`gma_from_responsibilities`.
        impl: ``"auto"`` (the kernels on CUDA when they can take the inputs, else ``"lean"``), ``"triton"`` (the
            fused kernels, Gamma never stored; no ``key_padding_mask``), ``"lean"`` (one autograd function that
            recomputes Gamma in the backward pass; see the module docstring for when it falls back) or a torch
            form.
        key_padding_mask: ``(B, N_k)`` bool, ``True`` for real keys (the opposite of
            ``torch.nn.MultiheadAttention``, where ``True`` marks padding), with ``B`` the first dim of ``k``; padded
            keys get responsibility 0, so they write nothing into the memory. A row with no ``True`` entry is
            refused: it has no real key, and a batch padded to its longest sequence in torch's convention has one.
        return_responsibilities: also return ``(gamma_q, gamma_k)`` (``gamma_k`` with padded keys zeroed); on the
            kernel path they are computed after the kernel, for diagnostics and auxiliary losses.
        check_values: validate the mixture's values (see :func:`gma_teach.gmm.check_mixture`); ``False`` for
            callers whose mixture is valid by construction (no GPU synchronization).
        max_naive_bytes: the largest affinity ``impl="naive"`` may allocate, as in
            :func:`gma_from_responsibilities`.

    Returns:
        ``(..., N_q, d_v)`` (``(..., H, N_q, d_v)`` per head) in ``v``'s dtype; with
        ``return_responsibilities``, ``(output, gamma_q, gamma_k)``.
    """
    _check_options(causal, eps, impl, chunk_size)
    check_gma_inputs(q, k, v, means, variances, log_priors, causal=causal, check_values=check_values)
    if impl == "linear" and causal:
        raise ValueError("impl='linear' is the bidirectional associative form; for causal=True use "
                         "'chunked', 'cumsum' or 'recurrent' (or 'auto')")
    if key_padding_mask is not None:
        if k.dim() < 3:
            raise ValueError(f"key_padding_mask needs a batch dim in k: k must be (B, ..., N_k, d), got shape "
                             f"{tuple(k.shape)}")
        _checks.real_token_mask("key_padding_mask", key_padding_mask, (k.shape[0], k.shape[-2]), "(B, N_k)")
        if impl == "triton":
            raise ValueError("impl='triton' takes no key_padding_mask (the kernels never store Gamma^K); "
                             "use impl='auto' or a torch form")
    if impl == "naive":  # before the responsibilities are computed (and again, in their dtype, in _mix)
        _check_naive_memory(q, k, v, max_naive_bytes, "impl='naive'")
    if impl == "auto":
        fused = key_padding_mask is None and _kernels_take(q, k, v, means, variances, chunk_size)
        impl = "triton" if fused else "lean"
    if impl == "lean":
        if key_padding_mask is None and not return_responsibilities and lean_applies(q, k, v, means, variances,
                                                                                     log_priors):
            return lean_gma(q, k, v, means, variances, log_priors, causal=causal, eps=eps, chunk_size=chunk_size)
        impl = "chunked" if causal else "linear"
    if impl == "triton":
        output = _gma_triton(q, k, v, means, variances, log_priors, causal=causal, eps=eps, chunk_size=chunk_size)
        if not return_responsibilities:
            return output
        gamma_q = torch.softmax(gemm_logits(q, means, variances, log_priors), dim=-1)
        gamma_k = torch.softmax(gemm_logits(k, means, variances, log_priors), dim=-1)
        return output, gamma_q, gamma_k
    gamma_q = torch.softmax(gemm_logits(q, means, variances, log_priors), dim=-1)
    gamma_k = torch.softmax(gemm_logits(k, means, variances, log_priors), dim=-1)
    if key_padding_mask is not None:
        keep = key_padding_mask.reshape(k.shape[0], *([1] * (k.dim() - 3)), k.shape[-2], 1)
        gamma_k = gamma_k * keep.to(gamma_k.dtype)
    output = _mix(gamma_q, gamma_k, v, causal=causal, eps=eps, impl=impl, chunk_size=chunk_size,
                  max_naive_bytes=max_naive_bytes)
    return (output, gamma_q, gamma_k) if return_responsibilities else output


def _gma_triton(q, k, v, means, variances, log_priors, *, causal, eps, chunk_size):
    """Bring any accepted layout to the kernels' ``(B, H, N, d)`` with ``(H, K, d)`` mixtures, and back."""
    from . import kernels  # optional dependency: the kernels need triton

    if not kernels.is_available(v.device):
        raise ValueError(f"impl='triton' cannot run on {v.device}: triton {kernels.triton_status()}; "
                         "use impl='auto' (the torch forms)")
    if q.shape[-2] == 0 or k.shape[-2] == 0:  # nothing to launch: the empty result of the torch forms
        return _mix(q.new_zeros(*q.shape[:-1], means.shape[-2]), k.new_zeros(*k.shape[:-1], means.shape[-2]), v,
                    causal=causal, eps=eps, impl="chunked" if causal else "linear", chunk_size=chunk_size)
    per_head = means.dim() == 3
    if not per_head:  # one shared mixture: treat it as a single head
        q, k, v = q.unsqueeze(-3), k.unsqueeze(-3), v.unsqueeze(-3)
        means, variances, log_priors = means[None], variances[None], log_priors[None]
    lead = _checks.leading_shape(q=q, k=k, v=v)
    q, k, v = (t.expand(*lead, *t.shape[-2:]) for t in (q, k, v))

    def flat(t):
        return t.reshape(-1, *t.shape[-3:])

    output = kernels.gma_triton(flat(q), flat(k), flat(v), means, variances, log_priors, causal=causal, eps=eps,
                                chunk_size=chunk_size if causal else None, check_values=False)  # gma() checked
    output = output.reshape(*lead, *output.shape[-2:])
    return output if per_head else output.squeeze(-3)
