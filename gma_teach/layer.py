"""Chapter 5 (and 6): the multi-head Gaussian Mixture Attention layer, with recurrent decoding.

Data flow for input ``x`` ``(B, N, d_model)`` (and ``context`` ``(B, M, d_model)`` for cross-attention)::

    q = q_proj(x),  k = k_proj(context or x),  v = v_proj(context or x)      split into H heads
    Gamma^Q = mixture(q) (B, H, N, K),  Gamma^K = mixture(k) (B, H, M, K)     one shared mixture per head
    O = Gamma^Q (Gamma^K^T V) / (Gamma^Q (Gamma^K^T 1) + eps)                 prefix sums when causal
    y = out_proj(merge heads of O)                                            (B, N, d_model)

Queries and keys of a head share one mixture: that is what makes ``gamma_q . gamma_k`` a similarity.

Routing collapse, and the options that change the routing (all off by default). A trained GMA can send nearly every
token to a few of its K components, so it mixes with an affinity of that small rank. Three documented options act on
it:

* ``init_variance="d_route"`` (or any number): start the variances at ``d_route`` instead of 1, so the squared
  distances over ``d_route`` dimensions give logits of order one and the initial responsibilities are soft;
* :meth:`GaussianMixtureAttention.init_means_from`: place the means at the k-means centres of the routing vectors
  of a batch, once before training (for a whole model: :func:`gma_teach.models.init_routing_means`);
* ``balance_weight > 0``: an auxiliary loss that pushes the components' usage towards uniform, as
  mixture-of-experts routers do (:func:`~gma_teach.layer.routing_balance_loss`); the training loop adds
  :meth:`GaussianMixtureAttention.auxiliary_loss` (or a model's ``auxiliary_loss()``) to its loss.

Routings that use the slots (all off by default). A slot memory returns a pair only when the pair's key holds a slot
that no other key of the sequence shares and the query for that key lands in the same slot. Three options ask for
that:

* ``tied_routing=True``: one projection routes both queries and keys (``k_proj`` *is* ``q_proj``), as Reformer and
  the Routing Transformer share Q and K, so a query and a key of the same content land in the same slot;
* ``distill_weight > 0``: an auxiliary loss, the cross-entropy from the stop-gradient key responsibilities of each
  token to its query responsibilities (:func:`~gma_teach.layer.routing_distillation_loss`), for layers whose queries
  and keys keep two projections (self-attention only);
* ``assignment_weight > 0``: an auxiliary loss that gives the keys of each sequence distinct slots. Its
  ``assignment_form`` says which: ``"information"`` (the default, :func:`~gma_teach.layer.slot_assignment_loss`: the
  information a key's slot carries about which key of its sequence it is, short of its largest value) or
  ``"balanced"`` (:func:`~gma_teach.layer.balanced_assignment_loss`: the cross-entropy to a balanced assignment of
  the sequence's keys to slots, as BASE layers train their router, :func:`~gma_teach.layer.balanced_slot_assignment`).

Routing can fail two ways: it *collapses* (a few components take every token) or it *dissolves* (every token spreads
evenly over all K, and GMA becomes a running average of the values). Both carry little information between a token
and its component (:func:`gma_teach.diagnostics.routing_information`). :data:`LM_ROUTING_REMEDY` is the option set
that the recorded remedy study chose by that information (chapter 11). It is not the default: what helps a causal
language model is not assumed to help every use of the layer.

Size: one file over 500 lines because the layer and the auxiliary losses its forward computes on its routing
(balance, distillation, slot assignment) are read together, in the order chapters 5 and 11 tell them.
"""
from __future__ import annotations

import torch
from torch import nn

from . import _checks
from .gmm import GaussianMixture, inverse_softplus, kmeans
from .mixing import IMPLS, GMAState, gma, recurrent_step

BALANCE_FORMS = ("switch", "entropy", "information")

ASSIGNMENT_FORMS = ("information", "balanced")
"""The forms of the slot-assignment term (``assignment_form``): :func:`slot_assignment_loss` and
:func:`balanced_assignment_loss`."""

DEFAULT_COMPONENTS = 64
"""GMA's one default K (``n_components``), where neither the caller nor a study's setting gives one: what
:func:`gma_teach.make_mixer` builds ``gma``, ``local_gma`` and ``decay_gma`` with when no K is given, the default of
:class:`gma_teach.forgetting.DecayedGaussianMixtureAttention`, and what the mixer registry (:mod:`gma_teach.mixers`)
gives an arm whose study pins no K. It lives here, in the core every room may import, so that the factory
(:mod:`gma_teach.baselines`, which the registry imports) reads the same value."""

ROUTING_OPTIONS = ("init_variance", "balance_weight", "tied_routing", "distill_weight", "assignment_weight")
"""The options of :class:`GaussianMixtureAttention` that change its routing from the default: where the variances
start, the weight of the balance loss (``balance_form`` says which loss, and counts only with a weight), one
projection for queries and keys, and the weights of the distillation and slot-assignment losses."""

SLOT_MEMORY_ROUTING = {"tied_routing": True, "assignment_weight": 0.2, "assignment_form": "balanced"}
"""Options of :class:`GaussianMixtureAttention` that make its K components a slot memory: one projection routes both
queries and keys (``tied_routing``), and a balanced-assignment loss (``assignment_form="balanced"``, weight 0.2)
trains the key routing to give each key of a sequence a slot of its own, as BASE layers train their router. Use them
as ``GaussianMixtureAttention(..., **SLOT_MEMORY_ROUTING)`` and add the model's ``auxiliary_loss()`` to the training
loss. For self-attention only (tied routing needs queries and keys from one sequence).

Chapter 12's slot studies (``gma_teach.designs.SLOT_ROUTING_STUDY`` and ``SLOT_BALANCED_STUDY``: the fast-weight
capacity test at K = 64, S = 40, 64, 80 and 120) chose it under the rule declared before their confirmatory runs
(``gma_teach.designs.SLOT_ROUTING_GOAL``, read by :func:`gma_teach.capacity.slot_winner`): it is the options of their
winning arm, ``gma_k64_tied_balanced``, beyond K. What it costs and gives elsewhere (a causal language model, the
recall study) is what the follow-ons of ``gma_teach.designs.slot_follow_ons`` measure; it is not the default."""

LM_ROUTING_REMEDY = dict(SLOT_MEMORY_ROUTING)
"""Options of :class:`GaussianMixtureAttention` whose routing carries information in a causal language model: the
slot memory, :data:`SLOT_MEMORY_ROUTING` (tied routing with the balanced-assignment loss). Use them as
``GaussianMixtureAttention(..., causal=True, **LM_ROUTING_REMEDY)`` and add the model's ``auxiliary_loss()`` to the
training loss (:func:`gma_teach.train.fit` does). The remedy study (``gma_teach.designs.REMEDY_STUDY``: the small LM
of ``gma_teach.designs.LM_SETTING``, K=64, six routings, six seeds, ``routing_remedy_*.json``, chapter 11) declared
the rule before it ran: of the routings whose information is told apart above the default's and whose bits per
byte are not told apart worse, the one with the most information. On its own six routings it picked the balance
loss (``gma_teach.designs.BALANCE_REMEDY``). The slot memory's follow-on in the same setting
(``gma_teach.designs.SLOT_FOLLOW_ONS["lm"]``) met the conditions its declaration set for reading the rule again with
it as one more arm (:func:`gma_teach.study.follow_on_choice`), and the rule then picks it. The earlier value before
both, the variance change with the balance loss (``gma_teach.designs.VARIANCE_AND_BALANCE``), was chosen on an
argmax count and dissolves the routing."""


def routing_balance_loss(gamma: torch.Tensor, *, form: str = "switch", mask: torch.Tensor | None = None):
    r"""How unevenly tokens use the K components: a differentiable scalar, smallest for uniform usage.

    With :math:`P_k` the mean responsibility of component ``k`` and :math:`f_k` the share of tokens whose most
    responsible component is ``k`` (both over the tokens of one head),

    * ``"switch"``: :math:`K \sum_k f_k P_k` (the Switch Transformer's load-balancing loss): 1 when usage is
      uniform, up to K when one component takes every token; the gradient flows through :math:`P_k`;
    * ``"entropy"``: :math:`\log K - H(P)`, the KL divergence of the mean responsibility from uniform: 0 when
      uniform, up to :math:`\log K`;
    * ``"information"``: :math:`\log K - I` with :math:`I = H(P) - \frac1N\sum_t H(\gamma_t)`, the information a
      token's component carries (:func:`gma_teach.diagnostics.routing_information`): the ``"entropy"`` term, which
      raises the usage entropy, plus the mean token entropy, which it lowers. 0 for a perfect K-way split, up to
      :math:`\log K` for a collapsed or a dissolved routing. Usage balance alone can be met by spreading every token
      evenly over all K (dissolving); this form cannot.

    Args:
        gamma: ``(N, K)``, ``(B, N, K)`` or ``(B, H, N, K)`` responsibilities (rows sum to 1). Usage is pooled
            over the batch and the tokens, computed per head, and the heads' losses are averaged.
        form: one of ``BALANCE_FORMS`` (``"switch"``, ``"entropy"``, ``"information"``).
        mask: ``(B, N)`` bool, ``True`` for tokens to count (padding excluded; the opposite of
            ``torch.nn.MultiheadAttention``'s ``True`` = padding), or ``None``. A row with no ``True`` entry (no token
            to count, or a mask in torch's convention) is refused.

    Returns:
        a 0-dim tensor.
    """
    _checks.tensor("gamma", gamma, min_rank=2)
    _checks.one_of("form", form, BALANCE_FORMS)
    if mask is not None:
        _checks.real_token_mask("mask", mask, (gamma.shape[0] if gamma.dim() > 2 else 1, gamma.shape[-2]), "(B, N)")
    return _balance_loss(gamma, form, mask)


def _balance_loss(gamma, form, mask):
    """:func:`routing_balance_loss` of checked inputs."""
    n_components = gamma.shape[-1]
    gamma = gamma.float() if gamma.dtype in (torch.float16, torch.bfloat16) else gamma
    if gamma.dim() == 2:
        gamma = gamma.unsqueeze(0)
    weights = torch.ones(gamma.shape[:-1], dtype=gamma.dtype, device=gamma.device)
    if mask is not None:
        weights = weights * mask.reshape(mask.shape[0], *([1] * (gamma.dim() - 3)), mask.shape[1]).to(gamma.dtype)
    pooled = (0, gamma.dim() - 2)  # batch and tokens
    total = weights.sum(pooled).clamp_min(1.0)  # (...,) tokens counted per head
    mean_gamma = (gamma * weights[..., None]).sum(pooled) / total[..., None]  # P: (..., K)
    if form in ("entropy", "information"):
        entropy = -(mean_gamma * torch.log(mean_gamma.clamp_min(1e-30))).sum(-1)
        loss = torch.log(torch.tensor(float(n_components), dtype=gamma.dtype)) - entropy
        if form == "information":
            token_entropy = -(gamma * torch.log(gamma.clamp_min(1e-30))).sum(-1)  # (..., N)
            loss = loss + (token_entropy * weights).sum(pooled) / total
        return loss.mean()
    # f_k: the counted share of tokens whose argmax is k, accumulated without a one-hot (B, H, N, K) tensor
    winners = gamma.detach().argmax(-1, keepdim=True).movedim(0, -3).flatten(-3, -2)  # (..., B N, 1)
    counted = weights.movedim(0, -2).flatten(-2)[..., None]  # (..., B N, 1)
    share = torch.zeros_like(mean_gamma).unsqueeze(-2).scatter_add_(-1, winners.transpose(-2, -1),
                                                                   counted.transpose(-2, -1)).squeeze(-2)
    share = share / total[..., None]  # f: (..., K)
    return (n_components * (share * mean_gamma).sum(-1)).mean()


def _token_weights(shape, mask, dtype, device):
    """``(B, [H,] N)`` ones, zero where ``mask`` ``(B, N)`` is ``False`` (``mask`` ``None``: all ones)."""
    weights = torch.ones(shape, dtype=dtype, device=device)
    if mask is not None:
        weights = weights * mask.reshape(mask.shape[0], *([1] * (len(shape) - 2)), mask.shape[1]).to(dtype)
    return weights


def _as_batched(name: str, gamma: torch.Tensor, mask) -> torch.Tensor:
    """``gamma`` checked and with a batch axis: ``(N, K)`` -> ``(1, N, K)``; half precision computed in float32."""
    _checks.tensor(name, gamma, min_rank=2)
    if gamma.dim() > 4:
        raise ValueError(f"{name} must be (N, K), (B, N, K) or (B, H, N, K), got shape {tuple(gamma.shape)}")
    if mask is not None:
        _checks.real_token_mask("mask", mask, (gamma.shape[0] if gamma.dim() > 2 else 1, gamma.shape[-2]), "(B, N)")
    gamma = gamma.float() if gamma.dtype in (torch.float16, torch.bfloat16) else gamma
    return gamma.unsqueeze(0) if gamma.dim() == 2 else gamma


def routing_distillation_loss(log_gamma_q: torch.Tensor, gamma_k: torch.Tensor, *,
                              mask: torch.Tensor | None = None) -> torch.Tensor:
    r"""The cross-entropy from each token's key responsibilities, held fixed, to its query responsibilities:
    :math:`-\frac1N \sum_t \sum_k \mathrm{sg}(\gamma^K_{tk}) \log \gamma^Q_{tk}`, averaged over the tokens of
    the batch, then over heads. It is smallest (the key routing's entropy) when every token's query lands where its
    key does. ``sg`` is the stop-gradient: the loss moves the query routing (and the mixture, through
    :math:`\gamma^Q`) towards the key routing, never the key routing towards the query's.

    Args:
        log_gamma_q: ``(N, K)``, ``(B, N, K)`` or ``(B, H, N, K)`` log query responsibilities (log-softmax rows;
            :meth:`gma_teach.gmm.GaussianMixture.log_responsibilities`, stable where a responsibility underflows).
        gamma_k: the key responsibilities of the same tokens, same shape (rows sum to 1); detached here.
        mask: ``(B, N)`` bool, ``True`` for tokens to count (padding excluded), or ``None``.

    Returns:
        a 0-dim tensor (nats).
    """
    log_gamma_q = _as_batched("log_gamma_q", log_gamma_q, mask)
    gamma_k = _as_batched("gamma_k", gamma_k, mask)
    if gamma_k.shape != log_gamma_q.shape:
        raise ValueError(f"gamma_k must have log_gamma_q's shape {tuple(log_gamma_q.shape)}, got "
                         f"{tuple(gamma_k.shape)}")
    per_token = -(gamma_k.detach().to(log_gamma_q.dtype) * log_gamma_q).sum(-1)  # (B, [H,] N)
    weights = _token_weights(per_token.shape, mask, per_token.dtype, per_token.device)
    pooled = (0, per_token.dim() - 1)  # batch and tokens
    return ((per_token * weights).sum(pooled) / weights.sum(pooled).clamp_min(1.0)).mean()


def slot_assignment_loss(gamma_k: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
    r"""How far each sequence's keys are from holding distinct slots: :math:`\log \min(n, K) - I`, averaged over
    sequences and heads, with :math:`I = H(\bar\gamma) - \frac1n \sum_t H(\gamma_t)` the information a key's
    slot carries about which of the sequence's ``n`` keys it is (:math:`\bar\gamma` the sequence's mean
    responsibility).

    0 when the keys of a sequence take distinct slots one-hot (a permutation; for ``n > K``, every slot taken by
    ``n / K`` keys), :math:`\log \min(n, K)` (its largest value) when they all share one slot, and also when every
    key spreads evenly over all K. Unlike the overlap of the keys' responsibilities (the mean off-diagonal of
    :math:`\Gamma^K \Gamma^{K\top}`, which a dissolved routing brings to ``1/K``, nearly its floor of 0), it cannot
    be met by spreading each key thin; unlike the pooled ``"information"`` balance loss, a routing that uses the
    slots evenly over the batch but puts a sequence's keys together does not meet it. BASE layers and Sinkhorn
    routing reach a balanced assignment by solving one; this is its smooth counterpart within a sequence.

    Args:
        gamma_k: ``(N, K)`` (one sequence), ``(B, N, K)`` or ``(B, H, N, K)`` key responsibilities (rows sum to 1).
        mask: ``(B, N)`` bool, ``True`` for keys to count (padding excluded), or ``None``.

    Returns:
        a 0-dim tensor (nats), in ``[0, log min(n, K)]``.
    """
    gamma = _as_batched("gamma_k", gamma_k, mask)
    weights = _token_weights(gamma.shape[:-1], mask, gamma.dtype, gamma.device)  # (B, [H,] N)
    counts = weights.sum(-1)  # (B, [H]) keys per sequence
    mean = (gamma * weights[..., None]).sum(-2) / counts.clamp_min(1.0)[..., None]  # (B, [H,] K)
    usage_entropy = -(mean * torch.log(mean.clamp_min(1e-30))).sum(-1)
    key_entropy = -(gamma * torch.log(gamma.clamp_min(1e-30))).sum(-1)  # (B, [H,] N)
    information = usage_entropy - (key_entropy * weights).sum(-1) / counts.clamp_min(1.0)
    largest = torch.log(counts.clamp(1.0, float(gamma.shape[-1])))
    return (largest - information).mean()


def balanced_slot_assignment(log_gamma_k: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
    """A balanced assignment of each sequence's keys to the K slots, found greedily from their log
    responsibilities: the target of :func:`balanced_assignment_loss`.

    Level filling: the most likely (key, slot) pair among the keys not yet placed and the slots that hold the fewest
    keys so far is placed, until every key has a slot. So while ``n <= K`` every key gets a slot of its own, and for
    ``n > K`` the slots hold ``floor(n / K)`` or ``ceil(n / K)`` keys each. BASE layers solve the same balanced
    assignment exactly (an auction algorithm over a batch); the greedy answer is cheaper, needs no solver, and is
    as balanced. It is computed in rounds: each places every pair that is the best open pair of both its key and
    its slot, which are the pairs the one-at-a-time greedy places next (where scores tie, the lower index wins).

    Raises ``ValueError`` for a NaN score; ``-inf`` (a responsibility of exactly 0) counts as the lowest score.

    Args:
        log_gamma_k: ``(N, K)``, ``(B, N, K)`` or ``(B, H, N, K)`` log key responsibilities (read, never
            differentiated).
        mask: ``(B, N)`` bool, ``True`` for keys to place (padding excluded), or ``None``.

    Returns:
        a long tensor of ``log_gamma_k``'s shape without its last axis (a batch axis added for ``(N, K)``): each
        key's slot, ``-1`` for keys left out by ``mask``.
    """
    scores = _as_batched("log_gamma_k", log_gamma_k, mask).detach()
    if bool(torch.isnan(scores).any()):
        raise ValueError("log_gamma_k must hold no NaN: a balanced assignment needs every key's scores")
    blocked = torch.finfo(scores.dtype).min
    scores = scores.clamp(blocked / 2, -blocked / 2)  # every real pair ranks above a closed one
    lead, (n_keys, n_slots) = scores.shape[:-2], scores.shape[-2:]
    scores = scores.reshape(-1, n_keys, n_slots)  # (R, N, K): one row per sequence and head
    counted = _token_weights((*lead, n_keys), mask, scores.dtype, scores.device).reshape(-1, n_keys) > 0
    slots = torch.full(counted.shape, -1, dtype=torch.long, device=scores.device)
    placed = ~counted
    open_pairs = scores.masked_fill(placed[..., None], blocked)  # a placed key and a slot used at this level: closed
    used_at_level = torch.zeros(scores.shape[0], dtype=torch.long, device=scores.device)
    keys = torch.arange(n_keys, device=scores.device)
    while not bool(placed.all()):
        # Every pair that is the best open pair of both its key and its slot is placed at once; the best open pair
        # of a row is always one, so each round places at least one key of every row not yet done.
        best_slot = open_pairs.argmax(-1)  # (R, N)
        best_key = open_pairs.argmax(-2)  # (R, K)
        mutual = (best_key.gather(-1, best_slot) == keys) & ~placed
        mutual &= open_pairs.gather(-1, best_slot[..., None]).squeeze(-1) > blocked
        row, key = mutual.nonzero(as_tuple=True)
        slot = best_slot[row, key]
        slots[row, key] = slot
        placed[row, key] = True
        open_pairs[row, key, :] = blocked
        open_pairs[row, :, slot] = blocked
        used_at_level.index_add_(0, row, torch.ones_like(row))
        level_full = (used_at_level == n_slots).nonzero().flatten()  # every slot holds one more key: all open again
        if len(level_full):
            used_at_level[level_full] = 0
            open_pairs[level_full] = scores[level_full].masked_fill(placed[level_full][..., None], blocked)
    return slots.reshape(*lead, n_keys)


def balanced_assignment_loss(log_gamma_k: torch.Tensor, *, mask: torch.Tensor | None = None) -> torch.Tensor:
    r"""The cross-entropy from a balanced assignment of each sequence's keys to slots
    (:func:`balanced_slot_assignment`, held fixed) to the keys' responsibilities: :math:`-\frac1n \sum_t \log
    \gamma^K_{t, a_t}`, averaged over the keys of the batch, then over heads.

    0 when every key puts all its weight on the slot the assignment gives it, so on distinct slots while ``n <= K``.
    Where :func:`slot_assignment_loss` asks for the same end through the information of the routing, its gradient
    on a slot that no key uses vanishes with that slot's responsibility (a dead slot stays dead); the cross-entropy
    to a target that names the free slot pulls a key to it however small its responsibility there, as the targets
    of BASE layers and Sinkhorn routing do.

    Args:
        log_gamma_k: ``(N, K)``, ``(B, N, K)`` or ``(B, H, N, K)`` log key responsibilities (log-softmax rows;
            :meth:`gma_teach.gmm.GaussianMixture.log_responsibilities`).
        mask: ``(B, N)`` bool, ``True`` for keys to count (padding excluded), or ``None``.

    Returns:
        a 0-dim tensor (nats), >= 0.
    """
    log_gamma = _as_batched("log_gamma_k", log_gamma_k, mask)
    target = balanced_slot_assignment(log_gamma, mask=mask)  # (B, [H,] N), -1 where left out
    picked = -log_gamma.gather(-1, target.clamp_min(0)[..., None]).squeeze(-1)  # (B, [H,] N)
    weights = _token_weights(picked.shape, mask, picked.dtype, picked.device)
    pooled = (0, picked.dim() - 1)  # batch and tokens
    return ((picked * weights).sum(pooled) / weights.sum(pooled).clamp_min(1.0)).mean()


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
        init_variance: the mixture's initial variances (before the floor ``min_variance``): a number > 0, or
            ``"d_route"`` for ``d_route`` (logits of order one at initialization instead of order ``d_route``).
            Default 1.0.
        init_mean_std: standard deviation of the initial means (default 1.0). :meth:`init_means_from` replaces
            them by k-means centres of real routing vectors.
        balance_weight: weight (>= 0) of the usage-balancing auxiliary loss returned by :meth:`auxiliary_loss`
            (default 0: off, nothing computed).
        balance_form: ``"switch"``, ``"entropy"`` or ``"information"``, see
            :func:`~gma_teach.layer.routing_balance_loss`.
        tied_routing: route queries and keys with one projection (``k_proj`` is ``q_proj``; default ``False``: two).
        distill_weight: weight (>= 0) of :func:`~gma_teach.layer.routing_distillation_loss` in
            :meth:`auxiliary_loss` (default 0: off). Self-attention only (no ``context``), with two projections.
        assignment_weight: weight (>= 0) of the slot-assignment term of the key responsibilities in
            :meth:`auxiliary_loss` (default 0: off).
        assignment_form: which term, one of ``ASSIGNMENT_FORMS``: ``"information"`` (default,
            :func:`~gma_teach.layer.slot_assignment_loss`) or ``"balanced"``
            (:func:`~gma_teach.layer.balanced_assignment_loss`); counts only with ``assignment_weight > 0``.

    Diagnostics: set ``layer.store_responsibilities = True``; after each forward ``layer.last_responsibilities``
    holds ``{"query": (B, H, N, K), "key": (B, H, M, K)}`` (detached). :meth:`routing` computes them directly.

    Decoding (causal layers): ``state = layer.init_state(B)``, then ``y_t, state = layer.step(x_t, state)`` for
    ``x_t`` ``(B, d_model)``; the outputs equal the causal forward and the state stays ``(B, H, K, d_value)``.

    Routing balance: with ``balance_weight > 0`` each forward computes
    :func:`~gma_teach.layer.routing_balance_loss` of the query and key responsibilities (their mean);
    :meth:`balance_loss` returns it (differentiable) and :meth:`auxiliary_loss` returns ``balance_weight`` times it,
    to add to the training loss. Likewise :meth:`distillation_loss` and :meth:`assignment_loss`, weighted by
    ``distill_weight`` and ``assignment_weight``; :meth:`auxiliary_loss` is the sum of the weighted terms.
    """

    def __init__(self, d_model: int, n_heads: int, n_components: int, *, causal: bool = False,
                 d_route: int | None = None, d_value: int | None = None, eps: float = 1e-6,
                 min_variance: float = 1e-3, impl: str = "auto", chunk_size: int = 64,
                 init_variance: float | str = 1.0, init_mean_std: float = 1.0, balance_weight: float = 0.0,
                 balance_form: str = "switch", tied_routing: bool = False, distill_weight: float = 0.0,
                 assignment_weight: float = 0.0, assignment_form: str = "information"):
        super().__init__()
        self.d_model = _checks.positive_int("d_model", d_model)
        self.n_heads = _checks.positive_int("n_heads", n_heads)
        self.n_components = _checks.positive_int("n_components", n_components)
        if (d_route is None or d_value is None) and d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads} unless d_route and "
                             "d_value are given")
        self.d_route = _checks.positive_int("d_route", d_route if d_route is not None else d_model // n_heads)
        self.d_value = _checks.positive_int("d_value", d_value if d_value is not None else d_model // n_heads)
        _checks.boolean("causal", causal)
        _checks.one_of("impl", impl, ("auto", *IMPLS))
        if impl == "linear" and causal:
            raise ValueError("impl='linear' is bidirectional; a causal layer needs 'chunked', 'cumsum', "
                             "'recurrent', 'triton' or 'auto'")
        self.causal = causal
        self.eps = _checks.positive_number("eps", eps)
        self.impl = impl
        self.chunk_size = _checks.positive_int("chunk_size", chunk_size)
        self.tied_routing = _checks.boolean("tied_routing", tied_routing)
        self.distill_weight = _checks.nonnegative_number("distill_weight", distill_weight)
        self.assignment_weight = _checks.nonnegative_number("assignment_weight", assignment_weight)
        self.assignment_form = _checks.one_of("assignment_form", assignment_form, ASSIGNMENT_FORMS)
        if tied_routing and self.distill_weight > 0:
            raise ValueError(f"distill_weight={distill_weight} distils the query routing from a key routing of its "
                             "own, and tied_routing=True gives both one projection: give one of them")
        self.q_proj = nn.Linear(d_model, self.n_heads * self.d_route)
        self.k_proj = self.q_proj if tied_routing else nn.Linear(d_model, self.n_heads * self.d_route)
        self.v_proj = nn.Linear(d_model, self.n_heads * self.d_value)
        self.out_proj = nn.Linear(self.n_heads * self.d_value, d_model)
        if init_variance == "d_route":
            init_variance = float(self.d_route)
        elif isinstance(init_variance, str):
            raise ValueError(f"init_variance must be a number > 0 or 'd_route', got {init_variance!r}")
        self.init_variance = _checks.positive_number("init_variance", init_variance)
        self.balance_weight = _checks.nonnegative_number("balance_weight", balance_weight)
        self.balance_form = _checks.one_of("balance_form", balance_form, BALANCE_FORMS)
        self.mixture = GaussianMixture(self.n_components, self.d_route, n_heads=self.n_heads,
                                       min_variance=min_variance, init_std=init_mean_std,
                                       init_variance=self.init_variance)
        self.store_responsibilities = False
        self.last_responsibilities: dict[str, torch.Tensor] | None = None
        self._last_balance_loss: torch.Tensor | None = None
        self._last_distill_loss: torch.Tensor | None = None
        self._last_assignment_loss: torch.Tensor | None = None

    # ------------------------------------------------------------------------------------------ helpers
    def _check_input(self, name: str, x) -> None:
        _checks.sequence(name, x, self.d_model)
        _checks.matching_dtype(name, x, self.q_proj.weight)

    @staticmethod
    def _check_padding_mask(key_padding_mask, source) -> None:
        """The mask's type and shape; its rows (a ``True`` in each) are checked by :func:`~gma_teach.gma`, or by
        :meth:`init_means_from`, so that a forward reads the mask once."""
        _checks.bool_mask("key_padding_mask", key_padding_mask, tuple(source.shape[:2]), "(B, M)")

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
            key_padding_mask: ``(B, M)`` bool, ``True`` for real keys (the opposite of
                ``torch.nn.MultiheadAttention``, where ``True`` marks padding); padded keys get responsibility 0, so
                they write nothing into the memory (same convention as :mod:`gma_teach.baselines`). A row with no
                ``True`` entry (no real key, or a mask in torch's convention) is refused.
        """
        self._check_input("x", x)
        if context is not None:
            if self.causal:
                raise ValueError("a causal layer takes no context: cross-attention needs causal=False")
            self._check_input("context", context)
            if context.shape[0] != x.shape[0]:
                raise ValueError(f"context must have the batch size of x ({x.shape[0]}), got {context.shape[0]}")
        if key_padding_mask is not None:
            self._check_padding_mask(key_padding_mask, x if context is None else context)
        if context is not None and self.distill_weight > 0:
            raise ValueError(f"distill_weight={self.distill_weight} distils each token's query routing from its own "
                             "key routing, so it needs self-attention; this forward got a context")
        q, k, v = self._project(x, context)
        mixture = self.mixture
        needs_gamma = self.store_responsibilities or max(self.balance_weight, self.distill_weight,
                                                         self.assignment_weight) > 0
        result = gma(q, k, v, mixture.means, mixture.variances, mixture.log_priors, causal=self.causal,
                     eps=self.eps, impl=self.impl, chunk_size=self.chunk_size, key_padding_mask=key_padding_mask,
                     return_responsibilities=needs_gamma, check_values=False)  # gma() checks the mask's rows
        output, gamma_q, gamma_k = result if needs_gamma else (result, None, None)
        if self.store_responsibilities:
            self.last_responsibilities = {"query": gamma_q.detach(), "key": gamma_k.detach()}
        if self.balance_weight > 0:
            query_mask = key_padding_mask if context is None else None
            self._last_balance_loss = 0.5 * (_balance_loss(gamma_q, self.balance_form, query_mask)
                                             + _balance_loss(gamma_k, self.balance_form, key_padding_mask))
        if self.distill_weight > 0:  # the log query responsibilities from the logits: exact where Gamma underflows
            self._last_distill_loss = routing_distillation_loss(mixture.log_responsibilities(q), gamma_k,
                                                                mask=key_padding_mask)
        if self.assignment_weight > 0:
            self._last_assignment_loss = self._assignment_term(k, gamma_k, key_padding_mask)
        return self.out_proj(output.transpose(1, 2).flatten(-2))

    def _assignment_term(self, k: torch.Tensor, gamma_k: torch.Tensor, mask) -> torch.Tensor:
        """The slot-assignment term of ``assignment_form`` on the key routing vectors ``k`` ``(B, H, M,
        d_route)`` and their responsibilities ``gamma_k`` ``(B, H, M, K)``."""
        if self.assignment_form == "balanced":  # log responsibilities from the logits: exact where Gamma underflows
            return balanced_assignment_loss(self.mixture.log_responsibilities(k), mask=mask)
        return slot_assignment_loss(gamma_k, mask=mask)

    # -------------------------------------------------------------------------------------- routing remedies
    def balance_loss(self) -> torch.Tensor:
        """The (unweighted) :func:`~gma_teach.layer.routing_balance_loss` of the last forward, differentiable: a
        0-dim tensor."""
        if self.balance_weight <= 0:
            raise RuntimeError("balance_loss is computed only with balance_weight > 0 (this layer has 0); "
                               "build the layer with balance_weight=... or call routing_balance_loss(gamma)")
        if self._last_balance_loss is None:
            raise RuntimeError("balance_loss needs a forward pass first")
        return self._last_balance_loss

    def distillation_loss(self) -> torch.Tensor:
        """The (unweighted) :func:`~gma_teach.layer.routing_distillation_loss` of the last forward, differentiable
        (towards the query routing only): a 0-dim tensor."""
        return self._last_term("distillation_loss", "distill_weight", self._last_distill_loss,
                               "routing_distillation_loss(log_gamma_q, gamma_k)")

    def assignment_loss(self) -> torch.Tensor:
        """The (unweighted) slot-assignment term of the last forward's key responsibilities, of the layer's
        ``assignment_form`` (:func:`~gma_teach.layer.slot_assignment_loss` or
        :func:`~gma_teach.layer.balanced_assignment_loss`), differentiable: a 0-dim tensor."""
        return self._last_term("assignment_loss", "assignment_weight", self._last_assignment_loss,
                               "slot_assignment_loss(gamma_k) or balanced_assignment_loss(log_gamma_k)")

    def _last_term(self, method: str, weight: str, value, direct: str) -> torch.Tensor:
        if getattr(self, weight) <= 0:
            raise RuntimeError(f"{method} is computed only with {weight} > 0 (this layer has 0); build the layer "
                               f"with {weight}=... or call {direct}")
        if value is None:
            raise RuntimeError(f"{method} needs a forward pass first")
        return value

    def auxiliary_loss(self) -> torch.Tensor:
        """``balance_weight * balance_loss() + distill_weight * distillation_loss() + assignment_weight *
        assignment_loss()`` of the last forward, each term only where its weight is > 0 (a 0-dim zero when every
        weight is 0), to add to the training loss."""
        terms = [weight * value for weight, value in ((self.balance_weight, self._last_balance_loss),
                                                      (self.distill_weight, self._last_distill_loss),
                                                      (self.assignment_weight, self._last_assignment_loss))
                 if weight > 0 and value is not None]
        if not terms:
            return self.out_proj.weight.new_zeros(())
        return terms[0] if len(terms) == 1 else torch.stack(terms).sum()

    @torch.no_grad()
    def init_means_from(self, x: torch.Tensor, context: torch.Tensor | None = None, *,
                        key_padding_mask: torch.Tensor | None = None, n_iter: int = 10, seed: int = 0,
                        fit_variances: bool = False) -> None:
        """Place each head's means at the k-means centres of its routing vectors (queries and keys) of a batch.

        Call it once before training, on a representative batch of this layer's inputs. Each head runs k-means++
        seeding and ``n_iter`` Lloyd steps (:func:`gma_teach.gmm.kmeans`) on its ``B N`` query and ``B M`` key
        routing vectors, so every component starts where some tokens are.

        Args:
            x: ``(B, N, d_model)``, the layer's input (``context`` ``(B, M, d_model)`` for cross-attention).
            key_padding_mask: ``(B, M)`` bool, ``True`` for real keys (padded tokens are left out; the opposite of
                ``torch.nn.MultiheadAttention``'s convention, so a row with no ``True`` entry is refused).
            n_iter, seed: k-means iterations and seed.
            fit_variances: also set each component's variances to the per-dimension variance of the routing
                vectors closest to it (floored at ``min_variance``); otherwise the variances are unchanged.
        """
        self._check_input("x", x)
        if context is not None:
            self._check_input("context", context)
        q, k, _ = self._project(x, context)  # (B, H, N, d_route), (B, H, M, d_route)
        queries = q.transpose(0, 1).reshape(self.n_heads, -1, self.d_route)
        keys = k.transpose(0, 1).reshape(self.n_heads, -1, self.d_route)
        if key_padding_mask is not None:
            source = x if context is None else context
            _checks.real_token_mask("key_padding_mask", key_padding_mask, tuple(source.shape[:2]), "(B, M)")
            keys = k.transpose(0, 1)[:, key_padding_mask]  # (H, real keys, d_route)
            if context is None:
                queries = q.transpose(0, 1)[:, key_padding_mask]
        points = torch.cat([queries, keys], dim=1)
        centres = kmeans(points, self.n_components, n_iter=n_iter, seed=seed)  # (H, K, d_route)
        mixture = self.mixture
        mixture.means.copy_(centres.to(mixture.means.dtype))
        if fit_variances:  # per component and dimension: the spread of its points (two or more), above the floor
            points, centres = points.double(), centres.double()
            nearest = torch.cdist(points, centres).argmin(-1)  # (H, n)
            winners = torch.nn.functional.one_hot(nearest, self.n_components).double()  # (H, n, K)
            counts = winners.sum(1)[..., None]  # (H, K, 1)
            mean = winners.transpose(1, 2) @ points / counts.clamp_min(1.0)
            spread = winners.transpose(1, 2) @ (points * points) / counts.clamp_min(1.0) - mean * mean
            excess = (spread - mixture.min_variance).clamp_min(mixture.min_variance)
            current = torch.nn.functional.softplus(mixture.raw_variances.double())
            excess = torch.where(counts >= 2, excess, current)
            mixture.raw_variances.copy_(inverse_softplus(excess).to(mixture.raw_variances.dtype))

    def init_state(self, batch_size: int, *, device=None, dtype=None) -> GMAState:
        """The empty decoding state: memory ``(B, H, K, d_value)``, normalizer ``(B, H, K)`` (float32 or
        float64, whatever the parameters' dtype, so long generations do not lose precision).

        ``batch_size`` may be 0 (an empty batch, as the forward pass takes one). ``dtype`` (default: float64 for a
        float64 layer, else float32) must be float32 or float64: a float16/bfloat16 state rounds its running sums
        at every token and drifts, so it is refused (a half-precision layer still decodes into a float32 state).
        """
        if not self.causal:
            raise ValueError("init_state/step are the decoding form of a causal layer; this layer has causal=False")
        batch_size = _checks.batch_size("batch_size", batch_size)
        weight = self.v_proj.weight
        if dtype is not None:
            _checks.decoding_dtype("dtype", dtype)
        dtype = dtype or (torch.float64 if weight.dtype == torch.float64 else torch.float32)
        return GMAState.zeros((batch_size, self.n_heads), self.n_components, self.d_value, dtype=dtype,
                              device=device or weight.device)

    def step(self, x_t: torch.Tensor, state: GMAState):
        """One decoding step: ``x_t`` ``(B, d_model)`` -> ``(y_t (B, d_model), new_state)``."""
        if not self.causal:
            raise ValueError("step is the decoding form of a causal layer; this layer has causal=False")
        _checks.token("x_t", x_t, self.d_model)
        _checks.matching_dtype("x_t", x_t, self.q_proj.weight)
        if not isinstance(state, GMAState):
            raise TypeError(f"state must be a GMAState (from init_state), got {type(state).__name__}")
        expected = (x_t.shape[0], self.n_heads, self.n_components, self.d_value)
        if tuple(state.memory.shape) != expected:
            raise ValueError(f"state.memory must be {expected} for this layer and batch, "
                             f"got {tuple(state.memory.shape)}")
        q, k, v = self._project(x_t.unsqueeze(1), None)  # (B, H, 1, .)
        gamma_q, gamma_k = self.mixture(q)[:, :, 0], self.mixture(k)[:, :, 0]
        dtype = state.memory.dtype
        output, state = self._recurrent_step(gamma_q.to(dtype), gamma_k.to(dtype), v[:, :, 0].to(dtype), state)
        return self.out_proj(output.to(x_t.dtype).flatten(-2)), state

    def _recurrent_step(self, gamma_q_t, gamma_k_t, v_t, state):
        """The state update of :meth:`step` (a subclass with another recurrence, such as a decay, overrides it)."""
        return recurrent_step(gamma_q_t, gamma_k_t, v_t, state, self.eps)

    def extra_repr(self) -> str:
        # two short lines, so that the module's printout fits the page even nested a few levels deep in a model
        return (f"d_model={self.d_model}, n_heads={self.n_heads}, n_components={self.n_components},\n"
                f"d_route={self.d_route}, d_value={self.d_value}, causal={self.causal}, impl={self.impl!r}")
