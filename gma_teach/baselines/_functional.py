"""The functional forms of the attention baselines: softmax, kernel (linear) and FAVOR+ attention on ``(B, H, N, d)``
tensors, used by the modules of :mod:`gma_teach.baselines` and by the tests. A private module of that package: its
names are public there."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..mixing import normalized_kernel_attention


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
    mask = attention_mask(q.shape[-2], k.shape[-2], causal, key_padding_mask, q.device)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_mask(n_q, n_k, causal, key_padding_mask, device):
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


FAVOR_MAX_EXPONENT = 80.0  # documented in gma_teach.baselines, which exports it


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

