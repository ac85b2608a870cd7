"""Reading a router head by head (chapter 11): each head's hard assignment, never an average of the heads.

Each head of a GMA layer routes with a mixture of its own, so component ``k`` of one head and component ``k`` of
another are different experts. Averaging the heads' rows blends them: four one-hot heads that disagree give a row
of four cells of exactly 0.25, whose ``argmax`` is a tie broken by index. The functions here read each head's
rows ``(T, K)`` and its hard assignment :math:`z_{t,h} = \\arg\\max_k \\gamma_{t,h,k}` on their own, then average
the heads' *scores*:

* :func:`head_assignments` and :func:`tied_share` (how often a row's maximum is shared: the averaging artefact);
* :func:`head_routing_metrics` (Table 4 per head), :func:`head_permutation_baseline` (the categories shuffled once
  for every head) and :func:`head_routing_report` (both, with the separation);
* :func:`head_component_summary` (the paper's Table 7 over every head's components, each listed with the tokens
  it takes the largest share of, not the most frequent tokens of the corpus).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from .. import _checks
from .metrics import (
    as_labels,
    checked_responsibilities,
    encode_labels,
    hard_scores,
    joint_counts,
    routing_metrics,
    separation,
)

__all__ = ["HARD_SCORES", "head_assignments", "head_component_summary", "head_permutation_baseline", "head_rows",
           "head_routing_metrics", "head_routing_report", "tied_share"]

HARD_SCORES = ("purity", "mi", "nmi_category", "nmi_arithmetic")
"""The hard-assignment scores a permutation baseline is computed for."""


def head_rows(resp) -> torch.Tensor:
    """``resp`` ``(T, H, K)`` (or ``(T, K)``, one head) checked and returned as a float64 ``(T, H, K)`` CPU tensor."""
    resp = checked_responsibilities(resp)
    return resp.unsqueeze(1) if resp.dim() == 2 else resp


def head_assignments(resp) -> torch.Tensor:
    """Each head's hard assignment :math:`z_{t,h} = \\arg\\max_k \\gamma_{t,h,k}`: a ``(T, H)`` long tensor for
    ``resp`` ``(T, H, K)`` (``(T, 1)`` for ``(T, K)``). Ties go to the lowest index, as in ``torch.argmax``."""
    return head_rows(resp).argmax(dim=-1)


def tied_share(resp, *, tolerance: float = 1e-9) -> float:
    """The share of rows whose largest responsibility is shared by two or more components (within
    ``tolerance``), for ``resp`` ``(T, K)``; for ``(T, H, K)`` the mean of the heads' shares. A tied row's
    ``argmax`` is decided by the components' index, not by the router."""
    rows = head_rows(resp)
    _checks.nonnegative_number("tolerance", tolerance)
    top = rows.max(dim=-1, keepdim=True).values
    tied = ((top - rows) <= tolerance).sum(dim=-1) >= 2  # (T, H)
    return float(tied.to(torch.float64).mean())


def _mean_over_heads(heads: list[dict]) -> dict:
    first = heads[0]
    mean = {key: sum(head[key] for head in heads) / len(heads) for key in first
            if key not in ("n_tokens", "n_components")}
    return {"n_tokens": first["n_tokens"], "n_components": first["n_components"], **mean}


def head_routing_metrics(resp, categories) -> dict:
    """Table 4 for each head of ``resp`` ``(T, H, K)`` on its own (:func:`routing_metrics` of ``resp[:, h]``), and
    the mean of each number over the heads.

    Returns:
        ``{"heads": [metrics of head 0, ...], "mean": {name: mean over heads} (``n_tokens`` and ``n_components``
        as ints; ``active`` becomes a mean, a float), "n_heads": H}``.
    """
    rows = head_rows(resp)
    labels = as_labels(categories, rows.shape[0])
    heads = [routing_metrics(rows[:, h], labels) for h in range(rows.shape[1])]
    return {"heads": heads, "mean": _mean_over_heads(heads), "n_heads": rows.shape[1]}


def head_permutation_baseline(resp, categories, *, n_shuffles: int = 100, seed: int = 0) -> dict:
    """The head-mean of each hard score when the categories are shuffled and every head's assignment kept.

    One permutation of the categories per shuffle serves every head, so the baseline is the distribution of the
    same statistic the table reports (the mean over heads) under no association between components and categories.

    Returns:
        ``{name: {"mean", "std"} for name in HARD_SCORES, "n_shuffles": n, "seed": seed}`` (``std`` with
        ``ddof=1``).
    """
    _checks.integer("n_shuffles", n_shuffles, minimum=2)
    _checks.integer("seed", seed)
    rows = head_rows(resp)
    codes, names = encode_labels(as_labels(categories, rows.shape[0]))
    assignments = rows.argmax(dim=-1)  # (T, H)
    n_tokens, n_heads, n_components = rows.shape
    generator = torch.Generator().manual_seed(seed)
    values: dict[str, list[float]] = {name: [] for name in HARD_SCORES}
    for _ in range(n_shuffles):
        shuffled = codes[torch.randperm(n_tokens, generator=generator)]
        tables = torch.stack([joint_counts(assignments[:, h], shuffled, n_components, len(names))
                              for h in range(n_heads)])
        scores = hard_scores(tables)
        for name in HARD_SCORES:
            values[name].append(float(scores[name].mean()))
    result: dict = {}
    for name, draws in values.items():
        tensor = torch.tensor(draws, dtype=torch.float64)
        result[name] = {"mean": float(tensor.mean()), "std": float(tensor.std(correction=1))}
    return {**result, "n_shuffles": n_shuffles, "seed": seed}


def head_routing_report(resp, categories, *, n_shuffles: int = 100, seed: int = 0) -> dict:
    """Per-head Table 4, its permutation baseline and the distance between them.

    Returns:
        ``{"metrics": the mean over heads, "heads": each head's metrics, "baseline":
        head_permutation_baseline(...), "separation_sd": {name: sd}}`` for the names of ``HARD_SCORES``.
    """
    table = head_routing_metrics(resp, categories)
    baseline = head_permutation_baseline(resp, categories, n_shuffles=n_shuffles, seed=seed)
    return {"metrics": table["mean"], "heads": table["heads"], "baseline": baseline,
            "separation_sd": {name: separation(table["mean"][name], baseline[name]) for name in HARD_SCORES}}


def _distinctive(tokens: list, positions: list[int], total: dict, examples: int, min_count: int) -> list:
    """The tokens at ``positions`` ranked by the share of all their occurrences that fall there, then by count."""
    counts: dict = {}
    for position in positions:
        counts[tokens[position]] = counts.get(tokens[position], 0) + 1
    kept = [token for token, count in counts.items() if count >= min_count] or list(counts)
    kept.sort(key=lambda token: (-counts[token] / total[token], -counts[token], token))
    return kept[:examples]


def head_component_summary(resp, categories, *, tokens: Sequence[str] | None = None, top: int = 10,
                           examples: int = 8, min_count: int = 2) -> list[dict]:
    """The paper's Table 7 over every head's components, each read by its own head's hard assignment.

    Args:
        resp: ``(T, H, K)`` responsibilities (``(T, K)``: one head).
        categories: ``T`` labels.
        tokens: optional ``T`` token strings, to list each component's distinctive tokens.
        top: how many (head, component) pairs, the most assigned first (ties: lower head, then lower component).
        examples: tokens listed per component.
        min_count: a token is listed only where the component takes it at least this often (unless none is).

    Returns:
        One dict per (head, component): ``head``, ``component``, ``hard_fraction`` (its share of its head's
        tokens), ``purity``, ``dominant_category`` and, with ``tokens``, ``examples``: the tokens this component
        takes the largest share of (count here over count in the text), so that a frequent token such as a space
        is listed only where this component takes most of it.
    """
    rows = head_rows(resp)
    labels = as_labels(categories, rows.shape[0])
    _checks.positive_int("top", top)
    _checks.positive_int("examples", examples)
    _checks.positive_int("min_count", min_count)
    if tokens is not None and len(tokens) != rows.shape[0]:
        raise ValueError(f"tokens has {len(tokens)} entries but resp has {rows.shape[0]} rows")
    codes, names = encode_labels(labels)
    assignments = rows.argmax(dim=-1)
    n_tokens, n_heads, n_components = rows.shape
    tables = [joint_counts(assignments[:, h], codes, n_components, len(names)) for h in range(n_heads)]
    pairs = [(h, k) for h in range(n_heads) for k in range(n_components) if int(tables[h][k].sum()) > 0]
    pairs.sort(key=lambda pair: (-int(tables[pair[0]][pair[1]].sum()), pair))
    total: dict = {}
    for token in tokens or ():
        total[token] = total.get(token, 0) + 1
    summary = []
    for h, k in pairs[:top]:
        size = int(tables[h][k].sum())
        row = {"head": h, "component": k, "hard_fraction": size / n_tokens,
               "purity": int(tables[h][k].max()) / size, "dominant_category": names[int(tables[h][k].argmax())]}
        if tokens is not None:
            positions = (assignments[:, h] == k).nonzero().flatten().tolist()
            row["examples"] = _distinctive(list(tokens), positions, total, examples, min_count)
        summary.append(row)
    return summary
