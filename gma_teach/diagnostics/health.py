"""Routing health while a model trains: is each GMA head using its components, or has it collapsed?

Three numbers per layer and head, from the query routing of one batch of tokens (``T`` query positions):

* ``active_share``: the fraction of the ``K`` components that are the argmax of at least one token
  (:math:`|\\{\\arg\\max_k \\gamma^Q_{t,k}\\}_t| / K`; the paper's Table 4 reports 104/128 = 0.81 at convergence);
* ``usage_entropy``: :math:`H(\\bar p)/\\ln K` of the mean responsibility :math:`\\bar p_k = \\frac1T \\sum_t
  \\gamma^Q_{t,k}` (1: all components used equally; 0: one takes everything);
* ``logit_spread``: the standard deviation over the ``K`` components of the routing logits, averaged over tokens.
  Logits that differ by many units make each token's softmax nearly one-hot, so gradients reach only the winning
  component: the symptom of a routing that can collapse. (Computed from the log-responsibilities, which differ
  from the logits by one constant per token and so have the same spread.)

:func:`routing_health` reads them from any model that contains
:class:`~gma_teach.GaussianMixtureAttention` layers, leaving the model as it was.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from .capture import gma_layers

HEALTH_METRICS = ("active_share", "usage_entropy", "logit_spread")


def head_health(log_resp: torch.Tensor) -> dict[str, list[float]]:
    """The three health numbers per head from log-responsibilities ``(B, H, N, K)`` (or ``(H, T, K)``).

    Returns ``{"active_share": [H floats], "usage_entropy": [...], "logit_spread": [...]}``.
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
    return {"active_share": [float(a) for a in active], "usage_entropy": usage_entropy.tolist(),
            "logit_spread": spread.tolist()}


@torch.no_grad()
def routing_health(model: nn.Module, tokens: torch.Tensor) -> list[dict]:
    """Per GMA layer of ``model`` (in :func:`~gma_teach.diagnostics.gma_layers` order), the health of each head's
    query routing on one forward pass of ``model(tokens)``.

    Each layer's input is caught with a forward pre-hook and routed again through the layer's own query projection
    and mixture (``layer.q_proj``, ``layer.mixture.log_responsibilities``); the model runs in evaluation mode and its
    modes and hooks are restored afterwards.

    Returns:
        ``[{"layer": i, "active_share": [H], "usage_entropy": [H], "logit_spread": [H]}, ...]``.
    """
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
            result.append({"layer": index, **head_health(layer.mixture.log_responsibilities(q))})
    finally:
        for handle in handles:
            handle.remove()
        for module, mode in saved_modes.items():
            module.training = mode
    return result


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
