"""How much information a router carries: the mutual information between a token and its component (chapter 11).

A router turns every token ``t`` into a distribution :math:`\\gamma_t` over ``K`` components. Read it as a channel:
pick a token uniformly, then a component from its row. The information the component carries about the token is

.. math:: I = H(\\bar\\gamma) - \\frac1T\\sum_t H(\\gamma_t), \\qquad \\bar\\gamma = \\frac1T\\sum_t\\gamma_t,

the entropy of the mean usage minus the mean entropy of a token's row, between 0 and :math:`\\ln K`. It is high only
when both halves hold: the components share the tokens between them (a high usage entropy) **and** each token leans
on a few (a low token entropy). A router fails in two opposite ways, and ``I`` catches both:

* **collapsed**: every token goes to the same few components. Usage entropy near 0, so ``I`` is near 0;
* **dissolved**: every token spreads evenly over all ``K``. Token entropy near :math:`\\ln K`, so ``I`` is near 0
  again, and GMA reads a running average of the values (the ``uniform`` control with extra parameters).

Counting the components that win at least one token by argmax (the *active share*) sees only the first failure: a
dissolved router's near-equal rows hand argmax wins to almost every component.

:func:`routing_information` computes ``I`` (in bits and as a share of :math:`\\ln K`) with the mean maximum
responsibility over its floor ``1/K``; :func:`shuffled_information` gives a baseline and its spread;
:func:`routing_state` names a router *in use*, *collapsed*, *dissolved* or *at baseline*.
"""
from __future__ import annotations

import math

import torch

from .. import _checks
from .metrics import checked_responsibilities

__all__ = ["MIN_SHARE", "ROUTING_STATES", "information_from_log", "information_report", "routing_information",
           "routing_state", "shuffled_information"]

ROUTING_STATES = ("in use", "collapsed", "dissolved", "at baseline")
"""The four names :func:`routing_state` gives a router."""

_LN2 = math.log(2.0)


def _per_head(resp) -> torch.Tensor:
    """``resp`` ``(T, K)`` or ``(T, H, K)`` checked (:func:`~gma_teach.diagnostics.checked_responsibilities`) and
    returned as a float64 ``(H, T, K)`` CPU tensor (``H = 1`` for a 2-D input)."""
    resp = checked_responsibilities(resp)
    return resp.unsqueeze(0) if resp.dim() == 2 else resp.transpose(0, 1)


def _entropy(probabilities: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats along the last axis, with 0 log 0 = 0."""
    return -torch.special.xlogy(probabilities, probabilities).sum(dim=-1)


def _head_information(resp: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per head of ``resp`` ``(H, T, K)``: ``I`` in nats, both entropies in nats and the mean maximum."""
    usage_entropy = _entropy(resp.mean(dim=1))  # (H,)
    token_entropy = _entropy(resp).mean(dim=1)  # (H,)
    return {"information": (usage_entropy - token_entropy).clamp_min(0.0), "usage_entropy": usage_entropy,
            "token_entropy": token_entropy, "mean_max": resp.max(dim=-1).values.mean(dim=1)}


def routing_information(resp) -> dict:
    """The information a router carries, from its responsibilities.

    Args:
        resp: ``(T, K)`` responsibilities of ``T`` tokens over ``K >= 2`` components, or ``(T, H, K)`` for ``H``
            heads, each a router of its own (heads are not averaged: averaging them can make sharp heads look
            dissolved). Rows are non-negative and sum to 1 (within 1e-4).

    Returns:
        A dict of Python floats, each the mean over heads:

        * ``bits``: :math:`I = H(\\bar\\gamma) - \\frac1T\\sum_t H(\\gamma_t)` in bits (0 to :math:`\\log_2 K`);
        * ``share``: :math:`I / \\ln K` (0: the component says nothing about the token; 1: a perfect K-way split);
        * ``usage_entropy`` and ``token_entropy``: the two halves, each as a share of :math:`\\ln K`
          (``share = usage_entropy - token_entropy``);
        * ``mean_max_ratio``: the mean maximum responsibility over its floor ``1/K`` (1: uniform rows; ``K``:
          one-hot rows);
        * ``n_components`` (K) and ``n_heads`` (H), as ints.
    """
    resp = _per_head(resp)
    n_components = resp.shape[-1]
    log_k = math.log(n_components)
    scores = _head_information(resp)
    return {"bits": float(scores["information"].mean()) / _LN2,
            "share": float(scores["information"].mean()) / log_k,
            "usage_entropy": float(scores["usage_entropy"].mean()) / log_k,
            "token_entropy": float(scores["token_entropy"].mean()) / log_k,
            "mean_max_ratio": float(scores["mean_max"].mean()) * n_components,
            "n_components": n_components, "n_heads": resp.shape[0]}


def information_from_log(log_resp: torch.Tensor) -> dict[str, list[float]]:
    """Per head, from log-responsibilities ``(H, T, K)`` (as a training monitor holds them): ``information``
    (:math:`I` in bits), ``token_entropy`` (share of :math:`\\ln K`) and ``mean_max_ratio`` (mean maximum over
    ``1/K``), each a list of ``H`` floats. The rows are normalized here (``softmax`` of the log-responsibilities),
    so a row that underflowed to ``-inf`` entries still counts as a distribution."""
    resp = torch.softmax(log_resp.detach().to(torch.float64), dim=-1)
    scores = _head_information(resp)
    n_components = resp.shape[-1]
    return {"information": (scores["information"] / _LN2).tolist(),
            "token_entropy": (scores["token_entropy"] / math.log(n_components)).tolist(),
            "mean_max_ratio": (scores["mean_max"] * n_components).tolist()}


def shuffled_information(resp, *, n_shuffles: int = 100, seed: int = 0) -> dict:
    """``I`` (bits) when each component's column of ``resp`` is shuffled over the tokens on its own.

    Shuffling a column keeps how much each component is used and how its weight is spread over the tokens, and
    breaks *which components a token uses together*. Each row is then renormalized (a row left with no weight at
    all becomes uniform). A router that assigns each token to its own few components carries more information than
    its shuffle (the shuffled rows mix several components' weights); a collapsed or a dissolved router does not
    (its columns are nearly constant, so shuffling changes nothing).

    Args:
        resp: ``(T, K)`` or ``(T, H, K)``, as in :func:`routing_information`.
        n_shuffles: how many shuffles (>= 2).
        seed: seed of the ``torch.Generator`` that draws them.

    Returns:
        ``{"mean": bits, "std": bits (ddof=1), "n_shuffles": n, "seed": seed}``.
    """
    _checks.integer("n_shuffles", n_shuffles, minimum=2)
    _checks.integer("seed", seed)
    resp = _per_head(resp)
    n_heads, n_tokens, n_components = resp.shape
    generator = torch.Generator().manual_seed(seed)
    values = []
    for _ in range(n_shuffles):
        order = torch.stack([torch.randperm(n_tokens, generator=generator) for _ in range(n_heads * n_components)])
        shuffled = resp.gather(1, order.view(n_heads, n_components, n_tokens).transpose(1, 2))  # each column
        totals = shuffled.sum(dim=-1, keepdim=True)
        shuffled = torch.where(totals > 0, shuffled / totals.clamp_min(1e-300),
                               torch.full_like(shuffled, 1.0 / n_components))
        values.append(float(_head_information(shuffled)["information"].mean()) / _LN2)
    tensor = torch.tensor(values, dtype=torch.float64)
    return {"mean": float(tensor.mean()), "std": float(tensor.std(correction=1)), "n_shuffles": n_shuffles,
            "seed": seed}


MIN_SHARE = 0.05
"""The least information, as a share of :math:`\\ln K`, that :func:`routing_state` calls a router in use (0.3 bits
at K = 64). Rows that differ from uniform by a little noise carry a few thousandths of a bit, and that can stand
many standard deviations above a shuffle whose spread is smaller still: clearly above a baseline must also mean
by an amount that matters."""


def routing_state(information: float, *, usage_entropy: float, token_entropy: float, untrained: float,
                  shuffled: dict, n_components: int, n_sd: float = 3.0, min_share: float = MIN_SHARE) -> str:
    """Name a router from its information and its baselines: one of ``ROUTING_STATES``.

    The router is *in use* when its information (bits) is clearly above both baselines: above the untrained
    model's by at least ``min_share`` of :math:`\\log_2 K`, and more than ``n_sd`` standard deviations of the
    shuffled baseline above that baseline's mean (and by at least ``min_share`` of it too). Otherwise, since
    ``I = H(usage) - H(token)`` and the token entropy is never above the usage entropy:

    * *collapsed* when the usage entropy is below half of :math:`\\ln K` (both low: a few components take the
      tokens);
    * *dissolved* when the token entropy is above half of :math:`\\ln K` (both high: every token spreads over the
      components);
    * *at baseline* otherwise: a router that sorts the tokens no better than its baselines do.

    Args:
        information: the router's ``I`` in bits (``routing_information(...)["bits"]``).
        usage_entropy, token_entropy: its two entropies as shares of :math:`\\ln K` (from
            :func:`routing_information`).
        untrained: the untrained model's ``I`` in bits.
        shuffled: :func:`shuffled_information` of the router (``{"mean", "std"}``).
        n_components: K (>= 2), for the margin ``min_share`` of :math:`\\log_2 K` bits.
        n_sd: how many baseline standard deviations count as clearly above (> 0).
        min_share: the least margin over each baseline, as a share of :math:`\\log_2 K` (in [0, 1)).
    """
    information = _checks.number("information", information)
    usage_entropy = _checks.number("usage_entropy", usage_entropy)
    token_entropy = _checks.number("token_entropy", token_entropy)
    untrained = _checks.number("untrained", untrained)
    n_sd = _checks.positive_number("n_sd", n_sd)
    margin = _checks.fraction("min_share", min_share) * math.log2(_checks.integer("n_components", n_components,
                                                                                     minimum=2))
    if not isinstance(shuffled, dict) or not {"mean", "std"} <= set(shuffled):
        raise TypeError(f"shuffled must be the dict of shuffled_information (keys 'mean' and 'std'), got {shuffled!r}")
    if (information >= untrained + margin and information >= shuffled["mean"] + margin
            and information > shuffled["mean"] + n_sd * shuffled["std"]):
        return "in use"
    if usage_entropy < 0.5:
        return "collapsed"
    return "dissolved" if token_entropy > 0.5 else "at baseline"


def information_report(resp, untrained: list, *, n_shuffles: int = 20, seed: int = 0, n_sd: float = 3.0) -> dict:
    """A router's information with both baselines, and the name :func:`routing_state` gives it.

    Args:
        resp: the trained router's responsibilities, ``(T, K)`` or ``(T, H, K)``.
        untrained: the same model's responsibilities before training, one ``(T, K)`` or ``(T, H, K)`` tensor per
            draw of its initialization (at least one; two or more give the untrained baseline a spread).
        n_shuffles, seed: the shuffled baseline's draws (:func:`shuffled_information`).
        n_sd: how many shuffled standard deviations count as clearly above.

    Returns:
        ``{"trained": routing_information(resp), "untrained": {"mean", "std", "n"} (bits), "shuffled":
        shuffled_information(resp), "separation_sd": (bits - shuffled mean) / shuffled std, "state": one of
        ROUTING_STATES}``.
    """
    if not isinstance(untrained, (list, tuple)) or not untrained:
        raise TypeError(f"untrained must be a non-empty list of responsibility tensors, got {untrained!r:.60}")
    trained = routing_information(resp)
    draws = torch.tensor([routing_information(draw)["bits"] for draw in untrained], dtype=torch.float64)
    spread = float(draws.std(correction=1)) if len(draws) > 1 else float("nan")
    shuffled = shuffled_information(resp, n_shuffles=n_shuffles, seed=seed)
    gap = trained["bits"] - shuffled["mean"]
    separation = gap / shuffled["std"] if shuffled["std"] > 0 else (math.inf if gap > 0 else 0.0)
    state = routing_state(trained["bits"], usage_entropy=trained["usage_entropy"],
                          token_entropy=trained["token_entropy"], untrained=float(draws.max()), shuffled=shuffled,
                          n_components=trained["n_components"], n_sd=n_sd)
    return {"trained": trained, "untrained": {"mean": float(draws.mean()), "std": spread, "n": len(draws)},
            "shuffled": shuffled, "separation_sd": separation, "state": state}
