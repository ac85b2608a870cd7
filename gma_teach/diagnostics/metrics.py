"""The paper's Table 4 from query responsibilities (usage, entropies, purity, mutual information), its permutation
baseline, per-component summaries and the PCA of the responsibility rows."""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from .. import _checks
from .categories import CATEGORIES


def checked_responsibilities(resp) -> torch.Tensor:
    """Check ``resp`` (``(T, K)`` or ``(T, H, K)``: non-negative, finite, every row summing to 1, ``T >= 1``,
    ``K >= 2``) and return it as a float64 CPU tensor of the same shape, heads kept. Raises TypeError/ValueError
    saying what is wrong."""
    if not isinstance(resp, torch.Tensor):
        try:
            resp = torch.as_tensor(resp)
        except (TypeError, ValueError, RuntimeError) as error:
            raise TypeError(f"resp must be a tensor or array of responsibilities, got {type(resp).__name__}") from error
    if not resp.is_floating_point():
        raise TypeError(f"resp must be floating point, got dtype {resp.dtype}")
    if resp.dim() not in (2, 3):
        raise ValueError(f"resp must have shape (T, K) or (T, H, K), got {tuple(resp.shape)}")
    resp = resp.detach().to(device="cpu", dtype=torch.float64)
    n_tokens, n_components = resp.shape[0], resp.shape[-1]
    if n_tokens < 1:
        raise ValueError(f"resp must hold at least one token, got shape {tuple(resp.shape)}")
    if n_components < 2:
        raise ValueError(f"resp must have K >= 2 components (entropies are normalized by ln K), got K={n_components}")
    if not torch.isfinite(resp).all():
        bad = ~torch.isfinite(resp)
        raise ValueError(f"resp must be finite, got {int(bad.sum())} NaN or infinite values "
                         f"(first at index {bad.nonzero()[0].tolist()})")
    if (resp < 0).any():
        raise ValueError(f"resp must be non-negative, got a minimum of {resp.min().item():.3g}")
    row_error = (resp.sum(dim=-1) - 1).abs()
    if (row_error > 1e-4).any():
        worst = [int(i) for i in (row_error == row_error.max()).nonzero()[0]]
        raise ValueError(f"resp rows must sum to 1 (tolerance 1e-4); row {worst[0]} sums to "
                         f"{resp[tuple(worst)].sum().item():.6f}")
    return resp


def as_responsibilities(resp) -> torch.Tensor:
    """Check ``resp`` (``(T, K)`` or ``(T, H, K)``, :func:`checked_responsibilities`) and return it head-averaged
    as a ``(T, K)`` float64 CPU tensor. Raises TypeError/ValueError saying what is wrong."""
    resp = checked_responsibilities(resp)
    return resp.mean(dim=1) if resp.dim() == 3 else resp


def as_labels(categories, n_tokens: int) -> list:
    """Check that ``categories`` is a sequence of ``n_tokens`` labels (not a string) and return it as a list."""
    if isinstance(categories, (str, bytes)):
        raise TypeError("categories must be a sequence of labels, got a single string")
    if isinstance(categories, torch.Tensor):
        categories = categories.tolist()
    try:
        labels = list(categories)
    except TypeError as error:
        raise TypeError(f"categories must be a sequence of labels, got {type(categories).__name__}") from error
    if len(labels) != n_tokens:
        raise ValueError(f"categories has {len(labels)} labels but resp has {n_tokens} tokens (rows)")
    return labels


def _validate(resp, categories) -> tuple[torch.Tensor, list]:
    resp = as_responsibilities(resp)
    return resp, as_labels(categories, resp.shape[0])


def _encode(labels: list) -> tuple[torch.Tensor, list]:
    """Integer codes for ``labels`` and the list of distinct labels (in ``CATEGORIES`` order when possible)."""
    distinct = set(labels)
    order = {name: rank for rank, name in enumerate(CATEGORIES)}
    names = sorted(distinct, key=lambda name: (order.get(name, len(order)), str(name)))
    code_of = {name: code for code, name in enumerate(names)}
    return torch.tensor([code_of[label] for label in labels], dtype=torch.long), names


def _entropy(probabilities: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats along the last axis, with 0 log 0 = 0."""
    return -torch.special.xlogy(probabilities, probabilities).sum(dim=-1)


def _joint_counts(assignments: torch.Tensor, codes: torch.Tensor, n_components: int, n_categories: int):
    flat = assignments * n_categories + codes
    return torch.bincount(flat, minlength=n_components * n_categories).reshape(n_components, n_categories)


def _hard_scores(joint: torch.Tensor) -> dict[str, float]:
    """Purity, MI (nats) and both NMIs from a ``(K, C)`` table of counts (or a batch ``(S, K, C)``)."""
    joint = joint.to(torch.float64)
    total = joint.sum(dim=(-2, -1), keepdim=True)
    p_joint = joint / total
    p_component = p_joint.sum(dim=-1, keepdim=True)
    p_category = p_joint.sum(dim=-2, keepdim=True)
    ratio = torch.where(p_joint > 0, p_joint / (p_component * p_category), torch.ones_like(p_joint))
    mi = (p_joint * torch.log(ratio)).sum(dim=(-2, -1)).clamp_min(0.0)
    h_category = _entropy(p_category.squeeze(-2))
    h_component = _entropy(p_component.squeeze(-1))
    purity = joint.max(dim=-1).values.sum(dim=-1) / total.squeeze(-1).squeeze(-1)
    n_used_components = (p_component.squeeze(-1) > 0).sum(dim=-1)
    n_used_categories = (p_category.squeeze(-2) > 0).sum(dim=-1)
    # One category has H(C) = 0 exactly, but its float sum can be ~1e-16: decide by counting, not by the entropy.
    nmi_category = torch.where(n_used_categories > 1, mi / h_category.clamp_min(1e-300), torch.zeros_like(mi))
    both_single = (n_used_components == 1) & (n_used_categories == 1)
    mean_entropy = (h_category + h_component) / 2
    nmi_arithmetic = torch.where(mi > 0, mi / mean_entropy.clamp_min(1e-300), torch.zeros_like(mi))
    nmi_arithmetic = torch.where(both_single, torch.ones_like(mi), nmi_arithmetic)
    # Both are at most 1 in exact arithmetic (I(Z;C) <= min(H(Z), H(C))), but the float sums of MI and entropy can
    # land an ulp apart (1.0000000000000002 when C is a function of Z): clamp to the range they live in.
    nmi_category, nmi_arithmetic = nmi_category.clamp(0.0, 1.0), nmi_arithmetic.clamp(0.0, 1.0)
    return {
        "purity": purity,
        "mi": mi,
        "nmi_category": nmi_category,
        "nmi_arithmetic": nmi_arithmetic,
        "category_entropy": h_category,
        "assignment_entropy": h_component,
    }


def hard_scores(counts: torch.Tensor) -> dict[str, torch.Tensor]:
    """Purity, MI (nats), both NMIs and the two entropies from a ``(K, C)`` table of counts, or a batch
    ``(S, K, C)`` of them (one value per table): the hard-assignment half of :func:`routing_metrics`, for a table
    built elsewhere (one head's, a shuffle's)."""
    if not isinstance(counts, torch.Tensor) or counts.dim() not in (2, 3):
        raise ValueError(f"counts must be a (K, C) or (S, K, C) tensor of counts, got {counts!r:.60}")
    return _hard_scores(counts)


def joint_counts(assignments: torch.Tensor, codes: torch.Tensor, n_components: int, n_categories: int):
    """The ``(K, C)`` table of counts of the pairs ``(assignments[t], codes[t])``, two ``(T,)`` long tensors."""
    return _joint_counts(assignments, codes, n_components, n_categories)


def encode_labels(labels) -> tuple[torch.Tensor, list]:
    """Integer codes for a sequence of labels and the list of distinct labels (``CATEGORIES`` order first)."""
    return _encode(list(labels))


def hard_assignments(resp) -> torch.Tensor:
    """:math:`z_t = \\arg\\max_k \\bar\\gamma_{t,k}` for ``resp`` ``(T, K)`` or ``(T, H, K)`` (heads averaged first).

    Returns a ``(T,)`` long tensor. Ties go to the lowest component index.
    """
    return as_responsibilities(resp).argmax(dim=-1)


def contingency_table(resp, categories) -> tuple[torch.Tensor, list]:
    """Counts of hard assignments per (component, category).

    Args:
        resp: responsibilities ``(T, K)`` or ``(T, H, K)`` (heads are averaged).
        categories: ``T`` labels.

    Returns:
        ``(counts, names)``: ``counts`` is a ``(K, C)`` long tensor whose entry ``[k, c]`` counts the tokens with
        :math:`z_t = k` and category ``names[c]``; ``names`` lists the ``C`` distinct labels, in
        ``CATEGORIES`` order where they are standard categories.
    """
    resp, labels = _validate(resp, categories)
    codes, names = _encode(labels)
    return _joint_counts(resp.argmax(dim=-1), codes, resp.shape[-1], len(names)), names


def routing_metrics(resp, categories) -> dict:
    """The paper's Table 4 for one set of query responsibilities.

    Args:
        resp: responsibilities ``(T, K)`` (already head-averaged) or ``(T, H, K)`` (averaged over ``H`` here);
            a tensor or array, non-negative, each row summing to 1 (within 1e-4). ``K >= 2``.
        categories: ``T`` labels (e.g. from :func:`token_categories`), any hashable values.

    Returns:
        A dict of Python numbers. With :math:`\\bar\\gamma_t` the row of token ``t``,
        :math:`z_t = \\arg\\max_k \\bar\\gamma_{t,k}` its hard assignment and :math:`c_t` its category:

        * ``n_tokens`` (T) and ``n_components`` (K);
        * ``active``: the number of components that are the argmax of at least one token;
        * ``usage_entropy``: :math:`H(p)/\\ln K` of the mean usage :math:`p_k = \\frac1T\\sum_t \\bar\\gamma_{t,k}`
          (1 = every component used equally, 0 = one component takes everything);
        * ``token_entropy``: :math:`\\frac1T \\sum_t H(\\bar\\gamma_t)/\\ln K` (1 = uniform rows, 0 = one-hot);
        * ``mean_max``: :math:`\\frac1T\\sum_t \\max_k \\bar\\gamma_{t,k}`;
        * ``purity``: :math:`\\frac1T \\sum_k \\max_c n_{k,c}`, the fraction of tokens whose category is the most
          common one of their component (weighted purity);
        * ``mi``: :math:`I(Z;C) = \\sum_{k,c} p(k,c)\\ln\\frac{p(k,c)}{p(k)p(c)}` in nats, from the hard
          assignments;
        * ``nmi_category``: :math:`I(Z;C)/H(C)`, the share of the category entropy that the assignment explains
          (0 when there is a single category; clamped to [0, 1] against rounding). This is the normalization that
          matches the paper's NMI 0.244 (= 0.427 / 1.75); it equals scikit-learn's ``average_method="min"``
          whenever :math:`H(C) \\le H(Z)`;
        * ``nmi_arithmetic``: :math:`I(Z;C)/\\tfrac12(H(Z)+H(C))`, scikit-learn's default
          ``normalized_mutual_info_score`` (with its conventions: 1 when both labellings are constant, 0 when
          the MI is 0);
        * ``category_entropy`` :math:`H(C)` and ``assignment_entropy`` :math:`H(Z)` in nats;
        * ``majority_fraction``: the share of the most common category (the purity of a single component that
          took every token).
    """
    resp, labels = _validate(resp, categories)
    n_tokens, n_components = resp.shape
    codes, names = _encode(labels)
    assignments = resp.argmax(dim=-1)
    scores = _hard_scores(_joint_counts(assignments, codes, n_components, len(names)))
    log_k = math.log(n_components)
    usage = resp.mean(dim=0)
    category_counts = torch.bincount(codes, minlength=len(names))
    return {
        "n_tokens": n_tokens,
        "n_components": n_components,
        "active": int(torch.unique(assignments).numel()),
        "usage_entropy": float((_entropy(usage) / log_k).clamp(0.0, 1.0)),  # ulps above 1 when uniform
        "token_entropy": float((_entropy(resp).mean() / log_k).clamp(0.0, 1.0)),
        "mean_max": float(resp.max(dim=-1).values.mean()),
        **{name: float(value) for name, value in scores.items()},
        "majority_fraction": int(category_counts.max()) / n_tokens,
    }


def permutation_baseline(resp, categories, *, n_shuffles: int = 100, seed: int = 0) -> dict:
    """The hard-assignment scores when the categories are shuffled and the assignments kept.

    Shuffling keeps both marginals (how often each component wins, how common each category is) and destroys any
    association between them, so it says how much purity and MI the marginals alone produce.

    Args:
        resp: responsibilities ``(T, K)`` or ``(T, H, K)``, as in :func:`routing_metrics`.
        categories: ``T`` labels.
        n_shuffles: number of random permutations (>= 2).
        seed: seed of the ``torch.Generator`` that draws them.

    Returns:
        ``{"purity": {"mean", "std"}, "mi": {...}, "nmi_category": {...}, "nmi_arithmetic": {...},
        "n_shuffles": n, "seed": seed}``; ``std`` is the sample standard deviation (``ddof=1``) over shuffles.
    """
    _checks.integer("n_shuffles", n_shuffles, minimum=2)
    _checks.integer("seed", seed)
    resp, labels = _validate(resp, categories)
    n_tokens, n_components = resp.shape
    codes, names = _encode(labels)
    assignments = resp.argmax(dim=-1)
    generator = torch.Generator().manual_seed(seed)
    per_shuffle: dict[str, list[float]] = {"purity": [], "mi": [], "nmi_category": [], "nmi_arithmetic": []}
    for _ in range(n_shuffles):
        shuffled = codes[torch.randperm(n_tokens, generator=generator)]
        scores = _hard_scores(_joint_counts(assignments, shuffled, n_components, len(names)))
        for name, values in per_shuffle.items():
            values.append(float(scores[name]))
    result: dict = {}
    for name, values in per_shuffle.items():
        tensor = torch.tensor(values, dtype=torch.float64)
        result[name] = {"mean": float(tensor.mean()), "std": float(tensor.std(correction=1))}
    result["n_shuffles"] = n_shuffles
    result["seed"] = seed
    return result


def separation(observed: float, baseline: dict) -> float:
    """How many baseline standard deviations ``observed`` lies above the baseline mean.

    ``baseline`` is one entry of :func:`permutation_baseline` (``{"mean": ..., "std": ...}``). A zero standard
    deviation gives ``inf`` (or ``-inf``, or 0 when ``observed`` equals the mean).
    """
    difference = float(observed) - float(baseline["mean"])
    std = float(baseline["std"])
    if std > 0:
        return difference / std
    return 0.0 if difference == 0 else math.copysign(math.inf, difference)


def routing_report(resp, categories, *, n_shuffles: int = 100, seed: int = 0) -> dict:
    """Table 4, its permutation baseline and the distance between them, in one dict.

    Args:
        resp: responsibilities ``(T, K)`` or ``(T, H, K)``.
        categories: ``T`` labels.
        n_shuffles, seed: passed to :func:`permutation_baseline`.

    Returns:
        ``{"metrics": routing_metrics(...), "baseline": permutation_baseline(...), "separation_sd": {name: sd}}``
        where ``sd`` is :func:`separation` of the observed purity, MI and both NMIs from their baselines.
    """
    metrics = routing_metrics(resp, categories)
    baseline = permutation_baseline(resp, categories, n_shuffles=n_shuffles, seed=seed)
    names = ("purity", "mi", "nmi_category", "nmi_arithmetic")
    return {
        "metrics": metrics,
        "baseline": baseline,
        "separation_sd": {name: separation(metrics[name], baseline[name]) for name in names},
    }


def component_summary(resp, categories, *, tokens: Sequence[str] | None = None, top: int = 10,
                      examples: int = 8) -> list[dict]:
    """The paper's Table 7 for the ``top`` most-assigned components.

    Args:
        resp: responsibilities ``(T, K)`` or ``(T, H, K)``.
        categories: ``T`` labels.
        tokens: optional ``T`` token strings, to list each component's most frequent tokens.
        top: number of components (by hard-assignment count).
        examples: number of example tokens per component.

    Returns:
        One dict per component, most assigned first: ``component``, ``hard_fraction`` (share of tokens assigned
        to it), ``purity`` (share of its tokens in its dominant category), ``dominant_category`` and, with
        ``tokens``, ``examples`` (its most frequent tokens, most frequent first).
    """
    counts, names = contingency_table(resp, categories)
    if tokens is not None and len(tokens) != int(counts.sum()):
        raise ValueError(f"tokens has {len(tokens)} entries but resp has {int(counts.sum())} rows")
    _checks.positive_int("top", top)
    per_component = counts.sum(dim=-1)
    order = torch.argsort(per_component, descending=True, stable=True)[:top]
    assignments = hard_assignments(resp) if tokens is not None else None
    rows = []
    for component in order.tolist():
        if per_component[component] == 0:
            break
        row = {
            "component": component,
            "hard_fraction": int(per_component[component]) / int(per_component.sum()),
            "purity": int(counts[component].max()) / int(per_component[component]),
            "dominant_category": names[int(counts[component].argmax())],
        }
        if tokens is not None:
            frequency: dict[str, int] = {}
            for position in (assignments == component).nonzero().flatten().tolist():
                frequency[tokens[position]] = frequency.get(tokens[position], 0) + 1
            ranked = sorted(frequency.items(), key=lambda item: (-item[1], item[0]))
            row["examples"] = [token for token, _ in ranked[:examples]]
        rows.append(row)
    return rows


def responsibility_pca(resp, n_components: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    """Project responsibility rows onto their first principal components (exact SVD of the centred rows).

    Args:
        resp: ``(T, K)`` or ``(T, H, K)`` responsibilities (heads averaged).
        n_components: number of principal components (<= min(T, K)).

    Returns:
        ``(scores, explained)``: ``scores`` ``(T, n_components)`` and ``explained`` ``(n_components,)``, the
        fraction of the total variance along each principal direction.
    """
    resp = as_responsibilities(resp)
    if not 1 <= n_components <= min(resp.shape):
        raise ValueError(f"n_components must be in [1, {min(resp.shape)}], got {n_components}")
    centred = resp - resp.mean(dim=0, keepdim=True)
    _, singular, right = torch.linalg.svd(centred, full_matrices=False)
    variance = singular.square()
    total = variance.sum()
    explained = variance[:n_components] / total if total > 0 else torch.zeros(n_components, dtype=resp.dtype)
    return centred @ right[:n_components].T, explained


PAPER_TABLE4 = {
    "n_components": 128, "active": 104, "usage_entropy": 0.933, "token_entropy": 0.790, "mean_max": 0.103,
    "purity": 0.483, "mi": 0.427, "nmi_category": 0.244,
    "baseline": {"purity": {"mean": 0.293, "std": 0.001}, "mi": {"mean": 0.0067, "std": 0.0003},
                 "nmi_category": {"mean": 0.0038, "std": 0.0002}},
    "majority_fraction": 0.286, "pca_explained": [0.120, 0.079],
}
"""The paper's numbers (Huang & Raza 2026, Table 4, Appendix F.1 and F.3; WikiText-103, last layer, head-averaged,
K = 128, 65,536 validation tokens), typed from the paper for comparison. ``nmi_category`` is the paper's "NMI"."""
