"""How well Performer's FAVOR+ features stand for the softmax attention they approximate, on given queries and keys.

FAVOR+ replaces :math:`\\exp(q^\\top k / \\sqrt d)` by :math:`\\phi(q)^\\top\\phi(k)`, an unbiased estimate from ``m``
positive random features (:func:`gma_teach.baselines.favor_logits`), and attention's weights
:math:`A_{ij} = \\mathrm{softmax}_j(q_i^\\top k_j / \\sqrt d)` by

.. math:: \\tilde A_{ij} = \\frac{\\phi(q_i)^\\top\\phi(k_j)}{\\sum_{j'}\\phi(q_i)^\\top\\phi(k_{j'})}.

The estimate's variance grows with ``|q|``, ``|k|`` and shrinks like ``1/m``: a Performer that learns nothing may be
reading weights that are mostly noise. :func:`favor_approximation_error` measures the gap on given ``q, k``;
:func:`performer_approximation_error` on a :class:`~gma_teach.baselines.PerformerAttention`'s own projections of
an input, and :func:`model_favor_errors` on every Performer layer of a model, each on the input that layer receives
when the model reads given tokens. A private module of :mod:`gma_teach.diagnostics`, which exports its names.
"""
from __future__ import annotations

import math

import torch

from .. import _checks
from ..baselines import PerformerAttention, favor_logits

__all__ = ["favor_approximation_error", "model_favor_errors", "performer_approximation_error"]

_PAIR_CHUNK = 1 << 22  # pairs x features per chunk of the exact log-space fallback


def _checked(q, k, projection, causal, key_padding_mask):
    """Validate the arguments of :func:`favor_approximation_error`; return ``causal`` as a bool."""
    for name, value in (("q", q), ("k", k)):
        _checks.tensor(name, value)
        if value.dim() != 4:
            raise ValueError(f"{name} must be (B, H, N, d), got shape {tuple(value.shape)}")
    if k.shape != q.shape:
        raise ValueError(f"k must have q's shape (B, H, N, d) = {tuple(q.shape)}, got {tuple(k.shape)}")
    if q.shape[-2] < 1 or q.shape[-1] < 1:
        raise ValueError(f"q must have N >= 1 tokens and d >= 1 dimensions, got shape {tuple(q.shape)}")
    _checks.tensor("projection", projection)
    if projection.dim() != 2 or projection.shape[0] < 1 or projection.shape[1] != q.shape[-1]:
        raise ValueError(f"projection must be (m, d) with m >= 1 and d = {q.shape[-1]} (q's last dim), "
                         f"got shape {tuple(projection.shape)}")
    causal = _checks.boolean("causal", causal)
    tensors = {"q": q, "k": k, "projection": projection}
    if key_padding_mask is not None:
        b, _, n, _ = q.shape
        _checks.real_token_mask("key_padding_mask", key_padding_mask, (b, n))
        tensors["key_padding_mask"] = key_padding_mask
    _checks.same_device(**tensors)
    return causal


def _log_favor_kernel(query_logits, key_logits):
    """``log(phi(q_i)^T phi(k_j)) + log m`` ``(B, H, N, N)`` from the feature exponents ``(B, H, N, m)``.

    Each row of exponents is shifted by its own maximum before the product, so a pair underflows only when no
    feature is large for both; those pairs are recomputed exactly by ``logsumexp`` over the features."""
    query_max = query_logits.amax(-1, keepdim=True)
    key_max = key_logits.amax(-1, keepdim=True)
    products = torch.exp(query_logits - query_max) @ torch.exp(key_logits - key_max).transpose(-1, -2)
    log_kernel = torch.log(products) + query_max + key_max.transpose(-1, -2)
    lost = (products == 0).nonzero(as_tuple=True)
    if lost[0].numel():
        b, h, i, j = lost
        step = max(1, _PAIR_CHUNK // query_logits.shape[-1])
        exact = [torch.logsumexp(query_logits[b[s:s + step], h[s:s + step], i[s:s + step]]
                                 + key_logits[b[s:s + step], h[s:s + step], j[s:s + step]], dim=-1)
                 for s in range(0, b.numel(), step)]
        log_kernel[lost] = torch.cat(exact)
    return log_kernel


def _entropy(log_weights, weights, seen):
    """Entropy in nats of each row of ``weights`` over the keys it sees (``0 log 0 = 0``)."""
    return -torch.where(seen, weights * log_weights, 0.0).sum(-1)


def _query_rows(q, k, projection, causal=False, key_padding_mask=None):
    """The per-query measures behind :func:`favor_approximation_error` (arguments checked there).

    Returns:
        A dict of float64 ``(B, H, N)`` tensors ``tv``, ``uniform_tv`` (equal weights on the seen keys against
        softmax's), ``softmax_entropy``, ``favor_entropy``, ``n_keys``
        (the keys each query sees), ``kernel_error_sum`` (the sum over those keys of the kernel's relative error)
        and a bool ``(B, H, N)`` tensor ``counted`` (real queries that see at least one key; the other rows hold 0).
    """
    b, h, n, d = q.shape
    q64, k64, w64 = q.detach().double(), k.detach().double(), projection.detach().double()
    seen = torch.ones(n, n, dtype=torch.bool, device=q.device)
    seen = seen.tril() if causal else seen
    seen = seen.expand(b, h, n, n)
    if key_padding_mask is not None:
        seen = seen & key_padding_mask[:, None, None, :]
    n_keys = seen.sum(-1)
    counted = n_keys > 0
    if key_padding_mask is not None:
        counted = counted & key_padding_mask[:, None, :]
    scores = (q64 @ k64.transpose(-1, -2)) / math.sqrt(d)  # log exp(q.k / sqrt(d))
    log_kernel = _log_favor_kernel(favor_logits(q64, w64), favor_logits(k64, w64)) - math.log(projection.shape[0])
    keep = seen & counted[..., None]
    # unseen keys get -inf; a row that is not counted is set to 0 whole so that its log_softmax stays finite
    log_exact, log_favor = (torch.log_softmax(torch.where(counted[..., None], t.masked_fill(~keep, -math.inf), 0.0),
                                              dim=-1) for t in (scores, log_kernel))
    exact, favor = torch.exp(log_exact), torch.exp(log_favor)
    kernel_error = torch.where(keep, torch.expm1(log_kernel - scores).abs(), 0.0)
    uniform = keep.double() / n_keys.clamp_min(1)[..., None]  # equal weight on every key a query sees
    rows = {"tv": 0.5 * torch.where(keep, (favor - exact).abs(), 0.0).sum(-1),
            "uniform_tv": 0.5 * torch.where(keep, (uniform - exact).abs(), 0.0).sum(-1),
            "softmax_entropy": _entropy(log_exact, exact, keep), "favor_entropy": _entropy(log_favor, favor, keep),
            "n_keys": n_keys.double(), "kernel_error_sum": kernel_error.sum(-1)}
    rows = {name: torch.where(counted, value, 0.0) for name, value in rows.items()}
    rows["counted"] = counted
    return rows


def favor_approximation_error(q, k, projection, *, causal=False, key_padding_mask=None) -> dict:
    """How far FAVOR+'s attention weights are from softmax's on queries ``q`` and keys ``k``.

    Computes, in float64, the exact weights :math:`A = \\mathrm{softmax}(q k^\\top / \\sqrt d)` and FAVOR+'s
    implied weights :math:`\\tilde A_{ij} \\propto \\phi(q_i)^\\top\\phi(k_j)` with the package's own features
    (:func:`~gma_teach.baselines.favor_logits`: :math:`\\phi(x)_r = \\exp(w_r^\\top x' - |x'|^2/2)/\\sqrt m`,
    :math:`x' = x d^{-1/4}`), both over the keys each query sees. The kernel is taken in log space (each pair's
    :math:`\\log \\phi(q_i)^\\top\\phi(k_j)` is exact even when the features span hundreds of nats).

    Args:
        q, k: ``(B, H, N, d)`` floating-point, one shape.
        projection: ``(m, d)`` floating point, the feature directions (a Performer's ``projection`` buffer).
        causal: query ``i`` sees keys ``j <= i``.
        key_padding_mask: ``(B, N)`` bool, ``True`` for real tokens, or ``None``. Padded keys are seen by no
            query, and padded queries (or any that sees no key) are left out of the means.

    Returns:
        A dict of Python floats, each a mean over the counted queries of all batch rows and heads:

        * ``weights_tv``: the total-variation distance :math:`\\frac12\\sum_j |\\tilde A_{ij} - A_{ij}|`
          (0: the same weights; 1: disjoint);
        * ``uniform_tv``: the same distance for equal weights on every key a query sees, the yardstick of a
          mixer that only averages its context: a ``weights_tv`` near it or above it means FAVOR+'s weights are no
          closer to softmax's than a plain average;
        * ``kernel_relative_error``: the mean over seen pairs ``(i, j)`` (not over queries) of
          :math:`|\\phi(q_i)^\\top\\phi(k_j) - e^{s_{ij}}| / e^{s_{ij}}`, :math:`s_{ij} = q_i^\\top k_j/\\sqrt d`,
          computed as :math:`|\\mathrm{expm1}(\\log\\phi(q_i)^\\top\\phi(k_j) - s_{ij})|`;
        * ``softmax_entropy`` and ``favor_entropy``: the entropy in nats of the rows of ``A`` and ``A~``;
        * ``uniform_entropy``: the log of the number of keys a query sees (the entropy of uniform weights);
        * ``n_features``: ``m``, as an int.

    Raises:
        TypeError: ``q``, ``k`` or ``projection`` not a floating-point tensor; ``causal`` not a bool;
            ``key_padding_mask`` not a bool tensor.
        ValueError: wrong shapes, tensors on several devices, or no query that sees a key.
    """
    causal = _checked(q, k, projection, causal, key_padding_mask)
    rows = _query_rows(q, k, projection, causal, key_padding_mask)
    counted = rows["counted"]
    n_rows = int(counted.sum())
    if n_rows == 0:
        raise ValueError("key_padding_mask leaves no real query that sees a real key: nothing to measure")

    def mean(value):
        return float(value.sum() / n_rows)

    uniform = torch.where(counted, torch.log(rows["n_keys"].clamp_min(1.0)), 0.0)
    return {"weights_tv": mean(rows["tv"]), "uniform_tv": mean(rows["uniform_tv"]),
            "kernel_relative_error": float(rows["kernel_error_sum"].sum() / rows["n_keys"].sum()),
            "softmax_entropy": mean(rows["softmax_entropy"]), "favor_entropy": mean(rows["favor_entropy"]),
            "uniform_entropy": mean(uniform), "n_features": int(projection.shape[0])}


def performer_approximation_error(mixer, x, *, key_padding_mask=None) -> dict:
    """:func:`favor_approximation_error` on a Performer's own queries and keys of ``x``.

    Projects ``x`` through ``mixer``'s ``q_proj`` and ``k_proj`` and splits the heads as its forward does, then
    compares FAVOR+ with softmax under ``mixer.projection`` and ``mixer.causal``. Nothing is trained or changed.

    Args:
        mixer: a :class:`~gma_teach.baselines.PerformerAttention`.
        x: ``(B, N, d_model)`` in the mixer's dtype.
        key_padding_mask: ``(B, N)`` bool, ``True`` for real tokens, or ``None``.

    Returns:
        The dict of :func:`favor_approximation_error` (means over the batch, heads and counted queries).

    Raises:
        TypeError: ``mixer`` not a ``PerformerAttention``; ``x`` not a floating-point tensor or not in the mixer's
            dtype. ValueError: ``x`` not ``(B, N, d_model)``; a bad ``key_padding_mask``.
    """
    if not isinstance(mixer, PerformerAttention):
        raise TypeError(f"mixer must be a PerformerAttention (e.g. make_mixer('performer', ...)), "
                        f"got {type(mixer).__name__}")
    _checks.sequence("x", x, mixer.d_model)
    _checks.matching_dtype("x", x, mixer.q_proj.weight, "the mixer")
    if key_padding_mask is not None:
        _checks.real_token_mask("key_padding_mask", key_padding_mask, tuple(x.shape[:2]))
    b, n, _ = x.shape
    with torch.no_grad():
        q, k = (p(x).view(b, n, mixer.n_heads, mixer.head_dim).transpose(1, 2) for p in (mixer.q_proj, mixer.k_proj))
    return favor_approximation_error(q, k, mixer.projection, causal=mixer.causal, key_padding_mask=key_padding_mask)


def model_favor_errors(model: torch.nn.Module, inputs: torch.Tensor) -> list[dict]:
    """:func:`performer_approximation_error` of every Performer layer of ``model`` on the input it receives when the
    model reads ``inputs`` (one forward pass, no gradient; the model's training mode is kept).

    Args:
        model: a module holding :class:`~gma_teach.baselines.PerformerAttention` layers (a trained LM, ...).
        inputs: what ``model`` reads, e.g. token ids ``(B, N)``.

    Returns:
        one dict per Performer layer, in the model's order: ``{"layer": its index among them, **the dict of
        performer_approximation_error}``.

    Raises:
        ValueError: ``model`` has no Performer layer.
    """
    layers = [m for m in model.modules() if isinstance(m, PerformerAttention)]
    if not layers:
        raise ValueError(f"model must hold at least one PerformerAttention layer, got a {type(model).__name__} "
                         f"with none")
    seen = {}
    hooks = [layer.register_forward_pre_hook(lambda module, args, i=i: seen.__setitem__(i, args[0].detach()))
             for i, layer in enumerate(layers)]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(inputs)
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return [{"layer": i, **performer_approximation_error(layer, seen[i])} for i, layer in enumerate(layers)]
