r"""The lean torch form of GMA (``impl="lean"``): one autograd function that recomputes the responsibilities.

Autograd through the separate operators of :func:`gma_teach.mixing.gma` keeps, for the backward pass, the GEMM
operand ``[x*x, x]`` ``(N, 2d)`` and the responsibilities ``(N, K)`` of queries and of keys, the values padded
with a column of ones and the unnormalized output ``(N, d_v + 1)``. :func:`lean_gma` keeps only what the
backward pass cannot rebuild cheaply, as flash attention and fla's chunked kernels do:

* the routing vectors ``q``, ``k`` and the values ``v`` (the block's projections, which the block holds anyway);
* one denominator per token, ``Gamma^Q Z + eps`` ``(N, 1)``;
* bidirectional only: the ``(K, d_v)`` memory and the ``(K,)`` normalizer.

The backward pass rebuilds ``Gamma`` with the same operations on the same inputs as the forward pass. The logits
are the GEMM form of :func:`gma_teach.gmm.gemm_logits`, ``x @ weight[:, d:]^T + (x*x) @ weight[:, :d]^T +
constant`` in two fused multiply-adds (``baddbmm``, no ``(N, 2d)`` operand), with the coefficients of
:func:`gma_teach.gmm.gemm_coefficients` passed in (autograd carries them back to the means, variances and priors);
the log-space steps are torch's fused softmax (row maximum, ``exp``, sum and division in one kernel) and its fused
backward.

Backward, with ``g = dL/dO``, ``den = Gamma^Q Z + eps`` and ``S = Gamma^K^T V`` (prefix sums when causal):
``dnum = g / den``, ``gS = dnum S^T`` ``(N, K)``, ``g . O = (gS * Gamma^Q).sum(-1)`` (no need to rebuild ``O``),
``dden = -(g . O) / den``, ``dGamma^Q = gS + dden Z^T``; ``dS = Gamma^Q^T dnum``, ``dZ = Gamma^Q^T dden``,
``dGamma^K = V dS^T + dZ``, ``dV = Gamma^K dS``; then the softmax's and the GEMM form's backward.

Causal: chunks of ``chunk_size`` tokens, a masked ``(C, C)`` block inside each chunk and ``(K, d_v)`` prefix states
between chunks, computed for :data:`GROUP_CHUNKS` chunks at a time, with one state carried from group to group (the
prefix states alive never grow with N). The backward pass sweeps the groups forward (rebuilding the prefix states,
for ``dGamma^Q``) and then backward (suffix states ``sum_{i >= j} Gamma^Q_i dnum_i^T``, for ``dGamma^K`` and
``dV``); no state is subtracted, so no rounding carries one chunk's tokens into another's.

Not twice differentiable (``once_differentiable``); :func:`gma_teach.mixing.gma` routes a key padding mask and
``return_responsibilities`` to the operator forms.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from .gmm import GEMM_LOGIT_TOLERANCE, compute_dtype, gemm_cancellation_bound, gemm_coefficients

__all__ = ["lean_applies", "lean_from_coefficients", "lean_gma", "responsibilities"]


def _logits(x, square, weight, constant):
    """``[x*x, x] @ weight^T + constant`` ``(L, N, K)`` for ``x`` ``(L, N, d)`` and its ``square = x * x``,
    ``weight`` ``(L, K, 2d)`` and ``constant`` ``(L, 1, K)``: two GEMMs on ``x`` as it lies (no ``(N, 2d)``
    operand is built)."""
    d = x.shape[-1]
    logits = torch.baddbmm(constant, x, weight[..., d:].transpose(-1, -2))
    return logits.baddbmm_(square, weight[..., :d].transpose(-1, -2))


def responsibilities(x, weight, constant, square=None):
    """``softmax([x*x, x] @ weight^T + constant)``: the responsibilities ``(L, N, K)`` of routing vectors
    ``x`` ``(L, N, d)`` under the GEMM-form coefficients ``weight`` ``(L, K, 2d)`` and ``constant`` ``(L, 1, K)``
    (:func:`gma_teach.gmm.gemm_coefficients`), with torch's fused softmax; ``square`` is ``x * x`` if at hand."""
    return torch.softmax(_logits(x, x * x if square is None else square, weight, constant), dim=-1)


def _softmax_backward(gamma, dgamma):
    """``dlogits = Gamma * (dGamma - <dGamma, Gamma>)`` (torch's fused softmax backward)."""
    return torch.ops.aten._softmax_backward_data(dgamma, gamma, -1, gamma.dtype)


def _logits_backward(x, square, dlogits, weight):
    """Gradients of :func:`_logits`: ``(dx (L, N, d), dweight (L, K, 2d), dconstant (L, 1, K))``."""
    d = x.shape[-1]
    both = torch.bmm(dlogits, weight)  # (L, N, 2d)
    dx = torch.addcmul(both[..., d:], both[..., :d], x, value=2.0)
    dlogits_t = dlogits.transpose(-1, -2)
    dweight = torch.cat([torch.bmm(dlogits_t, square), torch.bmm(dlogits_t, x)], dim=-1)
    return dx, dweight, dlogits.sum(-2, keepdim=True)


GROUP_CHUNKS = 16
"""Chunks handled together by the causal form: their in-chunk blocks and their prefix states are computed in one
batch (``GROUP_CHUNKS`` states of ``(K, d_v)`` alive, whatever N), and one ``(K, d_v)`` state is carried from group
to group."""


def _groups(n_tokens, chunk_size):
    """``(start, n_chunks, chunk_length)`` of each group: groups of up to :data:`GROUP_CHUNKS` full chunks, then
    the remaining tokens as one short chunk."""
    groups, start, full = [], 0, n_tokens // chunk_size
    while full > 0:
        n_chunks = min(GROUP_CHUNKS, full)
        groups.append((start, n_chunks, chunk_size))
        start, full = start + n_chunks * chunk_size, full - n_chunks
    if start < n_tokens:
        groups.append((start, 1, n_tokens - start))
    return groups


def _split(t, start, n_chunks, length):
    """``(L, N, F)`` -> the group's ``(L, n_chunks, length, F)`` (a view)."""
    return t[:, start:start + n_chunks * length].unflatten(1, (n_chunks, length))


def _before(chunk_sums, carried):
    """The state before each chunk of a group, ``carried + sum of the group's earlier chunks`` ``(L, g, K, F)``
    (one product with a strictly lower-triangular matrix of ones: a chunk's own tokens never enter, not even as a
    rounding error), and the state after the group."""
    n_chunks = chunk_sums.shape[1]
    earlier = torch.ones(n_chunks, n_chunks, dtype=chunk_sums.dtype, device=chunk_sums.device).tril_(-1)
    before = torch.matmul(earlier, chunk_sums.flatten(2)).unflatten(2, chunk_sums.shape[2:])
    before += carried.unsqueeze(1)
    return before, before[:, -1] + chunk_sums[:, -1]


def _after(chunk_sums, carried):
    """The mirror of :func:`_before`: ``carried + sum of the group's later chunks``, and the state before the
    group."""
    n_chunks = chunk_sums.shape[1]
    later = torch.ones(n_chunks, n_chunks, dtype=chunk_sums.dtype, device=chunk_sums.device).triu_(1)
    after = torch.matmul(later, chunk_sums.flatten(2)).unflatten(2, chunk_sums.shape[2:])
    after += carried.unsqueeze(1)
    return after, after[:, 0] + chunk_sums[:, 0]


def _inclusive(rows):
    """``rows.cumsum(-2)`` over a chunk ``(L, g, C, K)``, as one product with a lower-triangular matrix of ones."""
    length = rows.shape[-2]
    return torch.matmul(torch.ones(length, length, dtype=rows.dtype, device=rows.device).tril_(), rows)


def _write(keys, values):
    """Each chunk's ``(Gamma^K^T V, Gamma^K^T 1)``: ``(L, g, K, d_v)`` and ``(L, g, K, 1)``."""
    return torch.matmul(keys.transpose(-1, -2), values), keys.sum(-2, keepdim=True).transpose(-1, -2)


def _causal_forward(gamma_q, gamma_k, v, eps, chunk_size):
    """Causal GMA on ``(L, N, *)``: ``(output (L, N, d_v), den (L, N, 1))``."""
    n_batch, n_tokens, n_components, d_v = *gamma_q.shape, v.shape[-1]
    memory, normalizer = v.new_zeros(n_batch, n_components, d_v), v.new_zeros(n_batch, n_components, 1)
    output, den = v.new_empty(n_batch, n_tokens, d_v), v.new_empty(n_batch, n_tokens, 1)
    for group in _groups(n_tokens, chunk_size):
        queries, keys, values = (_split(t, *group) for t in (gamma_q, gamma_k, v))
        chunk_memory, chunk_normalizer = _write(keys, values)
        memory_before, memory = _before(chunk_memory, memory)
        normalizer_before, normalizer = _before(chunk_normalizer, normalizer)
        inside = torch.matmul(queries, keys.transpose(-1, -2)).tril_()  # (L, g, C, C), causal within the chunk
        numerator = torch.matmul(inside, values).add_(torch.matmul(queries, memory_before))
        chunk_den = torch.matmul(queries, normalizer_before).add_(inside.sum(-1, keepdim=True)).add_(eps)
        _split(output, *group).copy_(numerator.div_(chunk_den))
        _split(den, *group).copy_(chunk_den)
    return output, den


def _causal_backward(gamma_q, gamma_k, v, dnum, den, dden, chunk_size):
    """``(dGamma^Q, dGamma^K, dV)`` of causal GMA on ``(L, N, *)``, given ``dnum = g / den`` ``(L, N, d_v)`` and
    ``den`` ``(L, N, 1)``; ``dden`` is filled in place with ``dL/dden`` ``(L, N, 1)`` during the forward sweep."""
    n_batch, n_tokens, n_components, d_v = *gamma_q.shape, v.shape[-1]
    groups = _groups(n_tokens, chunk_size)
    dgamma_q = torch.empty_like(gamma_q)
    memory, normalizer = v.new_zeros(n_batch, n_components, d_v), v.new_zeros(n_batch, n_components, 1)
    for group in groups:  # forward sweep: the prefix states, for the queries
        queries, keys, values, chunk_dnum = (_split(t, *group) for t in (gamma_q, gamma_k, v, dnum))
        chunk_memory, chunk_normalizer = _write(keys, values)
        memory_before, memory = _before(chunk_memory, memory)
        normalizer_before, normalizer = _before(chunk_normalizer, normalizer)
        inside = torch.matmul(chunk_dnum, values.transpose(-1, -2)).tril_()  # [j <= i] dnum_i . v_j
        gs = torch.matmul(inside, keys).add_(torch.matmul(chunk_dnum, memory_before.transpose(-1, -2)))
        # dden = -(g . O) / den, with g . O = dnum . num = <gs, Gamma^Q>: no need to rebuild O
        chunk_dden = (gs * queries).sum(-1, keepdim=True).neg_().div_(_split(den, *group))
        _split(dden, *group).copy_(chunk_dden)
        gs += chunk_dden * (_inclusive(keys) + normalizer_before.transpose(-1, -2))
        _split(dgamma_q, *group).copy_(gs)
    dgamma_k, dv = torch.empty_like(gamma_k), torch.empty_like(v)
    suffix, suffix_normalizer = v.new_zeros(n_batch, n_components, d_v), v.new_zeros(n_batch, n_components, 1)
    for group in reversed(groups):  # backward sweep: sum_{i after the chunk} Gamma^Q_i [dnum_i, dden_i]^T
        queries, keys, values, chunk_dnum, chunk_dden = (_split(t, *group)
                                                         for t in (gamma_q, gamma_k, v, dnum, dden))
        suffix_after, suffix = _after(torch.matmul(queries.transpose(-1, -2), chunk_dnum), suffix)
        normalizer_after, suffix_normalizer = _after(torch.matmul(queries.transpose(-1, -2), chunk_dden),
                                                     suffix_normalizer)
        # (L, g, C, C), row i, column j: [j <= i] (dnum_i . v_j + dden_i)
        weights = torch.matmul(chunk_dnum, values.transpose(-1, -2)).add_(chunk_dden).tril_()
        chunk_dgamma_k = torch.matmul(weights.transpose(-1, -2), queries)
        chunk_dgamma_k += torch.matmul(values, suffix_after.transpose(-1, -2)) + normalizer_after.transpose(-1, -2)
        _split(dgamma_k, *group).copy_(chunk_dgamma_k)
        scores = torch.matmul(queries, keys.transpose(-1, -2)).tril_()
        chunk_dv = torch.matmul(scores.transpose(-1, -2), chunk_dnum).add_(torch.matmul(keys, suffix_after))
        _split(dv, *group).copy_(chunk_dv)
    return dgamma_q, dgamma_k, dv


class _LeanGMA(torch.autograd.Function):
    """On ``(L, N, *)`` tensors; ``recompute=False`` saves ``Gamma^Q`` and ``Gamma^K`` instead of rebuilding them."""

    @staticmethod
    def forward(ctx, q, k, v, weight, constant, causal, eps, chunk_size, recompute):
        gamma_k = responsibilities(k, weight, constant)
        if causal:
            gamma_q = responsibilities(q, weight, constant)
            output, den = _causal_forward(gamma_q, gamma_k, v, eps, chunk_size)
            state = ()
        else:
            memory = torch.bmm(gamma_k.transpose(-1, -2), v)  # (L, K, d_v)
            normalizer = gamma_k.sum(-2, keepdim=True).transpose(-1, -2)  # (L, K, 1)
            if recompute:
                del gamma_k  # gone before the queries' responsibilities are made
            gamma_q = responsibilities(q, weight, constant)
            output = torch.bmm(gamma_q, memory)
            den = torch.bmm(gamma_q, normalizer).add_(eps)
            output.div_(den)
            state = (memory, normalizer)
        saved = () if recompute else (gamma_q, gamma_k)
        ctx.save_for_backward(q, k, v, weight, constant, den, *state, *saved)
        ctx.causal, ctx.chunk_size, ctx.recompute = causal, chunk_size, recompute
        return output

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        q, k, v, weight, constant, den, *rest = ctx.saved_tensors
        state, saved = (rest, ()) if ctx.recompute else (rest[:-2], rest[-2:])
        square_q, square_k = q * q, k * k

        def gamma_of(x, square, index):  # rebuilt (the same GEMMs and softmax as the forward pass), or as saved
            return responsibilities(x, weight, constant, square) if ctx.recompute else saved[index]

        dnum = grad_output / den
        gamma_q = gamma_of(q, square_q, 0)
        if ctx.causal:
            gamma_k = gamma_of(k, square_k, 1)
            dden = torch.empty_like(den)
            dgamma_q, dgamma_k, dv = _causal_backward(gamma_q, gamma_k, v, dnum, den, dden, ctx.chunk_size)
            dgamma_q = _softmax_backward(gamma_q, dgamma_q)
            dgamma_k = _softmax_backward(gamma_k, dgamma_k)
            del gamma_q, gamma_k
        else:
            memory, normalizer = state
            dgamma_q = torch.bmm(dnum, memory.transpose(-1, -2))  # (L, N, K)
            # dL/dden = -(g . O) / den, and g . O = <dnum S^T, Gamma^Q>: O is not rebuilt
            dden = (dgamma_q * gamma_q).sum(-1, keepdim=True).neg_().div_(den)
            dgamma_q.baddbmm_(dden, normalizer.transpose(-1, -2))
            dmemory = torch.bmm(gamma_q.transpose(-1, -2), dnum)  # (L, K, d_v)
            dnormalizer = torch.bmm(gamma_q.transpose(-1, -2), dden)  # (L, K, 1)
            dgamma_q = _softmax_backward(gamma_q, dgamma_q)
            del gamma_q
            gamma_k = gamma_of(k, square_k, 1)
            dgamma_k = torch.baddbmm(dnormalizer.transpose(-1, -2), v, dmemory.transpose(-1, -2))
            dv = torch.bmm(gamma_k, dmemory)
            dgamma_k = _softmax_backward(gamma_k, dgamma_k)
            del gamma_k
        dq, dweight_q, dconstant_q = _logits_backward(q, square_q, dgamma_q, weight)
        dk, dweight_k, dconstant_k = _logits_backward(k, square_k, dgamma_k, weight)
        return dq, dk, dv, dweight_q + dweight_k, dconstant_q + dconstant_k, None, None, None, None


def lean_applies(q, k, v, means, variances, log_priors) -> bool:
    """Whether :func:`lean_gma` takes these (validated) inputs: tokens on both sides and, in float32, GEMM-form
    logits within :data:`~gma_teach.gmm.GEMM_LOGIT_TOLERANCE` (:func:`gma_teach.gmm.gemm_cancellation_bound`);
    else :func:`gma_teach.mixing.gma` runs the operator forms, whose logits fall back to float64."""
    if q.shape[-2] == 0 or k.shape[-2] == 0:
        return False
    if compute_dtype(q.dtype, k.dtype, v.dtype, means.dtype, variances.dtype, log_priors.dtype) == torch.float64:
        return True
    return max(gemm_cancellation_bound(q, means, variances),
               gemm_cancellation_bound(k, means, variances)) <= GEMM_LOGIT_TOLERANCE


def lean_gma(q, k, v, means, variances, log_priors, *, causal: bool, eps: float, chunk_size: int) -> torch.Tensor:
    """GMA from routing vectors and a mixture (validated, as :func:`gma_teach.mixing.gma` takes them), computed in
    :func:`gma_teach.gmm.compute_dtype` of all inputs with autocast off and returned in ``v``'s dtype."""
    dtype = compute_dtype(q.dtype, k.dtype, v.dtype, means.dtype, variances.dtype, log_priors.dtype)
    with torch.autocast(v.device.type, enabled=False):
        weight, constant = gemm_coefficients(means.to(dtype), variances.to(dtype), log_priors.to(dtype))
        output = lean_from_coefficients(q.to(dtype), k.to(dtype), v.to(dtype), weight, constant, causal=causal,
                                        eps=eps, chunk_size=chunk_size)
    return output.to(v.dtype)


def lean_from_coefficients(q, k, v, weight, constant, *, causal: bool, eps: float, chunk_size: int,
                           recompute: bool = True) -> torch.Tensor:
    """GMA from routing vectors with the lean autograd function (inputs already validated and in one dtype).

    Args:
        q: ``(..., N_q, d)``; k: ``(..., N_k, d)``; v: ``(..., N_k, d_v)`` (leading dims broadcastable).
        weight: ``(..., K, 2d)``; constant: ``(..., K)``: :func:`gma_teach.gmm.gemm_coefficients`, with per-head
            mixtures ``(H, K, 2d)`` and ``(H, K)`` broadcasting against ``q``'s ``(..., H, N, d)``.
        causal: prefix sums (``N_q == N_k``), chunked by ``chunk_size``.
        eps: the normalizer's floor.
        recompute: rebuild the responsibilities in the backward pass (least memory); ``False`` saves the
            ``(..., N, K)`` responsibilities of queries and keys instead (four GEMMs and two softmaxes fewer).

    Returns:
        ``(..., N_q, d_v)`` in the inputs' dtype.
    """
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2], weight.shape[:-2], constant.shape[:-1])

    def flat(t, *tail):  # (*lead, *tail) -> (L, *tail): a view where the leading dims allow it
        return t.expand(*lead, *tail).reshape(-1, *tail)

    output = _LeanGMA.apply(flat(q, *q.shape[-2:]), flat(k, *k.shape[-2:]), flat(v, *v.shape[-2:]),
                            flat(weight, *weight.shape[-2:]), flat(constant, constant.shape[-1]).unsqueeze(-2),
                            causal, eps, chunk_size, recompute)
    return output.reshape(*lead, *output.shape[-2:])
