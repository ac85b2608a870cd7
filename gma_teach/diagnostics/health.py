"""Routing health while a model trains: does each GMA head's routing carry information, or has it collapsed or
dissolved?

Numbers per layer and head, from the query routing of one batch of tokens (``T`` query positions):

* ``information``: the mutual information between a token and its component in bits,
  :math:`I = H(\\bar p) - \\frac1T\\sum_t H(\\gamma^Q_t)` (:mod:`gma_teach.diagnostics.information`): near 0
  when the routing collapses *and* when it dissolves; the measure of use;
* ``usage_entropy``: :math:`H(\\bar p)/\\ln K` of the mean responsibility :math:`\\bar p_k = \\frac1T \\sum_t
  \\gamma^Q_{t,k}` (1: all components used equally; 0: one takes everything);
* ``token_entropy``: :math:`\\frac1T\\sum_t H(\\gamma^Q_t)/\\ln K` (1: every token spread evenly over all K);
* ``mean_max_ratio``: the mean maximum responsibility over its floor ``1/K`` (1: uniform rows);
* ``logit_spread``: the standard deviation over the ``K`` components of the routing logits, averaged over tokens.
  Logits that differ by many units make each token's softmax nearly one-hot; logits that differ by a small fraction
  of a unit make it nearly uniform. (Computed from the log-responsibilities, which differ from the logits by one
  constant per token and so have the same spread.)
* ``active_share``: the fraction of the ``K`` components that are the argmax of at least one token. It is kept to
  read the records made before ``information`` was measured, and it is **not** a measure of use: a dissolved
  router's near-equal rows hand argmax wins to almost every component.

:func:`routing_health` reads them from any model that contains
:class:`~gma_teach.GaussianMixtureAttention` layers, leaving the model as it was.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .. import _checks
from .capture import gma_layers
from .information import information_from_log

HEALTH_METRICS = ("information", "usage_entropy", "token_entropy", "mean_max_ratio", "logit_spread", "active_share")


def head_health(log_resp: torch.Tensor) -> dict[str, list[float]]:
    """The health numbers per head (``HEALTH_METRICS``) from log-responsibilities ``(B, H, N, K)`` (or
    ``(H, T, K)``).

    Returns ``{"information": [H floats], "usage_entropy": [...], "token_entropy": [...], "mean_max_ratio": [...],
    "logit_spread": [...], "active_share": [...]}``.
    """
    if not isinstance(log_resp, torch.Tensor):
        raise TypeError(f"log_resp must be a torch.Tensor, got {type(log_resp).__name__}")
    if log_resp.dim() == 4:
        log_resp = log_resp.transpose(0, 1).flatten(1, 2)  # (H, B * N, K)
    if log_resp.dim() != 3 or log_resp.shape[1] < 1 or log_resp.shape[2] < 2:
        raise ValueError(f"log_resp must be (B, H, N, K) or (H, T, K) with T >= 1 and K >= 2, got "
                         f"{tuple(log_resp.shape)}")
    log_resp = log_resp.detach().to(torch.float64)
    n_components = log_resp.shape[-1]
    resp = log_resp.exp()
    winners = resp.argmax(dim=-1)  # (H, T)
    active = [torch.unique(row).numel() / n_components for row in winners]
    usage = resp.mean(dim=1)  # (H, K)
    usage_entropy = -torch.special.xlogy(usage, usage).sum(dim=-1) / math.log(n_components)
    finite = torch.where(torch.isfinite(log_resp), log_resp, torch.full_like(log_resp, -745.0))
    spread = finite.std(dim=-1).mean(dim=-1)
    information = information_from_log(log_resp)
    return {"information": information["information"], "usage_entropy": usage_entropy.tolist(),
            "token_entropy": information["token_entropy"], "mean_max_ratio": information["mean_max_ratio"],
            "logit_spread": spread.tolist(), "active_share": [float(a) for a in active]}


def logit_term_spreads(x: torch.Tensor, means: torch.Tensor, variances: torch.Tensor, log_priors: torch.Tensor,
                       min_variance: float) -> dict[str, list[float]]:
    """Where the routing logits' spread comes from, per head. A component's log joint is the sum of three terms,

    .. math:: \\log\\pi_k \\;-\\; \\tfrac12\\sum_d \\log\\sigma^2_{k,d}
              \\;-\\; \\tfrac12\\sum_d (x_d-\\mu_{k,d})^2/\\sigma^2_{k,d}

    (prior, volume and distance; the constant :math:`-\\tfrac d2\\log 2\\pi` is left out). For each term: its
    standard deviation over the ``K`` components, averaged over tokens, as ``logit_spread`` is; the term with the
    largest spread decides which component wins. Also ``prior_entropy`` (:math:`H(\\pi)/\\ln K`), ``floor_share``
    (the share of variances below twice the floor ``min_variance``: pressed onto it) and ``spread_ratio``, the
    routing vectors' root-mean-square distance from their centre over the means' distance from theirs (well below
    1, the tokens sit in a small cloud among the components and the few means nearest to it win every token).

    Args:
        x: routing vectors ``(H, T, d)``; means, variances ``(H, K, d)``; log_priors ``(H, K)``.
        min_variance: the mixture's variance floor (> 0).

    Returns:
        ``{"prior": [H], "volume": [H], "distance": [H], "prior_entropy": [H], "floor_share": [H],
        "spread_ratio": [H]}``.
    """
    for name, value, dims in (("x", x, 3), ("means", means, 3), ("variances", variances, 3),
                              ("log_priors", log_priors, 2)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
        if value.dim() != dims:
            raise ValueError(f"{name} must have {dims} dimensions, got shape {tuple(value.shape)}")
    if (means.shape != variances.shape or means.shape[0] != x.shape[0] or means.shape[2] != x.shape[2]
            or log_priors.shape != means.shape[:2]):
        raise ValueError(f"shapes must be x (H, T, d), means and variances (H, K, d), log_priors (H, K); got "
                         f"{tuple(x.shape)}, {tuple(means.shape)}, {tuple(variances.shape)}, "
                         f"{tuple(log_priors.shape)}")
    min_variance = _checks.positive_number("min_variance", min_variance)
    x, means, variances, log_priors = (t.detach().to(torch.float64) for t in (x, means, variances, log_priors))
    n_components = means.shape[1]
    distance = -0.5 * (((x[:, :, None, :] - means[:, None]) ** 2) / variances[:, None]).sum(-1)  # (H, T, K)
    volume = -0.5 * variances.log().sum(-1)  # (H, K)
    priors = log_priors.exp()
    token_spread = (x - x.mean(dim=1, keepdim=True)).square().sum(-1).mean(-1).sqrt()
    mean_spread = (means - means.mean(dim=1, keepdim=True)).square().sum(-1).mean(-1).sqrt()
    return {"prior": log_priors.std(dim=-1).tolist(), "volume": volume.std(dim=-1).tolist(),
            "distance": distance.std(dim=-1).mean(dim=-1).tolist(),
            "prior_entropy": (-torch.special.xlogy(priors, priors).sum(-1) / math.log(n_components)).tolist(),
            "floor_share": (variances <= 2 * min_variance).to(torch.float64).mean(dim=(1, 2)).tolist(),
            "spread_ratio": (token_spread / mean_spread).tolist()}


def _routing_vectors(model: nn.Module, tokens: torch.Tensor) -> list[tuple[nn.Module, torch.Tensor]]:
    """``[(layer, q), ...]``: each GMA layer of ``model`` (in :func:`~gma_teach.diagnostics.gma_layers` order) with
    its query routing vectors ``(B, H, N, d_route)`` on one forward pass of ``model(tokens)``.

    Each layer's input is caught with a forward pre-hook and projected again by the layer's own ``q_proj``; the
    model runs in evaluation mode and its modes and hooks are restored afterwards."""
    layers = gma_layers(model)
    if not layers:
        raise ValueError(f"model contains no GaussianMixtureAttention layer ({type(model).__name__})")
    inputs: dict[int, list[torch.Tensor]] = {index: [] for index in range(len(layers))}

    def hook_for(index):
        def hook(module, args):
            inputs[index].append(args[0])

        return hook

    saved_modes = {module: module.training for module in model.modules()}
    handles = [layer.register_forward_pre_hook(hook_for(index)) for index, layer in enumerate(layers)]
    try:
        model.eval()
        model(tokens)
        result = []
        for index, layer in enumerate(layers):
            if len(inputs[index]) != 1:
                raise RuntimeError(f"GMA layer {index} ran {len(inputs[index])} times in one forward pass")
            x = inputs[index][0]
            q = layer.q_proj(x).unflatten(-1, (layer.n_heads, layer.d_route)).transpose(1, 2)  # (B, H, N, d_route)
            result.append((layer, q))
    finally:
        for handle in handles:
            handle.remove()
        for module, mode in saved_modes.items():
            module.training = mode
    return result


@torch.no_grad()
def routing_logit_terms(model: nn.Module, tokens: torch.Tensor) -> list[dict]:
    """Per GMA layer of ``model``, :func:`logit_term_spreads` of each head's query routing on ``model(tokens)``.

    Returns:
        ``[{"layer": i, "prior": [H], "volume": [H], "distance": [H], "prior_entropy": [H], "floor_share": [H],
        "spread_ratio": [H]}, ...]``.
    """
    return [{"layer": index, **_layer_term_spreads(layer, q)}
            for index, (layer, q) in enumerate(_routing_vectors(model, tokens))]


def _layer_term_spreads(layer: nn.Module, q: torch.Tensor) -> dict[str, list[float]]:
    """:func:`logit_term_spreads` of one GMA layer's query routing vectors ``q`` ``(B, H, N, d_route)``."""
    mixture = layer.mixture
    x = q.transpose(0, 1).flatten(1, 2)  # (H, B * N, d_route)
    return logit_term_spreads(x, mixture.means, mixture.variances, mixture.log_priors, mixture.min_variance)


@torch.no_grad()
def routing_health(model: nn.Module, tokens: torch.Tensor, *, with_logit_terms: bool = False) -> list[dict]:
    """Per GMA layer of ``model`` (in :func:`~gma_teach.diagnostics.gma_layers` order), the health of each head's
    query routing on one forward pass of ``model(tokens)``.

    The routing vectors come from ``_routing_vectors`` (the model is left as it was) and are routed through
    each layer's own mixture (``layer.mixture.log_responsibilities``). With ``with_logit_terms`` the same pass
    also gives each layer's :func:`routing_logit_terms` entries, so a training monitor runs the model once.

    Returns:
        ``[{"layer": i, name: [H], ...}, ...]`` with every name of ``HEALTH_METRICS``, each dict
        extended by ``"prior"``, ``"volume"``, ``"distance"``, ``"prior_entropy"``, ``"floor_share"`` and
        ``"spread_ratio"`` (one value per head) when ``with_logit_terms``.
    """
    with_logit_terms = _checks.boolean("with_logit_terms", with_logit_terms)
    return [{"layer": index, **head_health(layer.mixture.log_responsibilities(q)),
             **(_layer_term_spreads(layer, q) if with_logit_terms else {})}
            for index, (layer, q) in enumerate(_routing_vectors(model, tokens))]


def summarize_health(health: list[dict]) -> dict[str, float]:
    """Means over layers and heads of each health number, plus the lowest active share of any head."""
    if not health:
        raise ValueError("health is empty")
    summary = {}
    for name in HEALTH_METRICS:
        values = [v for layer in health for v in layer[name]]
        summary[name] = sum(values) / len(values)
    summary["min_active_share"] = min(v for layer in health for v in layer["active_share"])
    return summary
