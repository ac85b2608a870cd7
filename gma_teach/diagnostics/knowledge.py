"""What a router's hard assignment knows about the tokens, against baselines that know nothing (chapter 11).

* :func:`mutual_information_bits`: :math:`I(A;B)` in bits between two labellings of the same tokens;
* :func:`usage_matched_hash`: a random function of the vocabulary whose component usage (how many tokens each
  component takes) equals a router's exactly: it knows each token's identity and nothing else;
* :func:`identity_information`: per head, how much the component says about the token's identity and about its
  category, beside the same numbers for usage-matched hashes. A hash is a function of the token, so its identity
  information is the most a lookup table of that usage can have; its category information is what a lookup that
  ignores categories gets for free;
* :func:`band_report`: whether neighbouring tokens share a component (bands in a heatmap) more often than the same
  assignments shuffled along each sequence.
"""
from __future__ import annotations

import math

import torch

from .. import _checks

__all__ = ["band_report", "identity_information", "mean_run_length", "mutual_information_bits",
           "usage_matched_hash"]


def _labels(name: str, value) -> torch.Tensor:
    """Check that ``value`` is a tensor of integer labels with at least one entry and return it."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of integer labels, got {type(value).__name__}")
    if value.is_floating_point() or value.is_complex() or value.numel() == 0:
        raise TypeError(f"{name} must be a non-empty integer tensor, got dtype {value.dtype}, shape "
                        f"{tuple(value.shape)}")
    return value.to(torch.long)


def _codes(labels) -> torch.Tensor:
    """Integer codes ``(T,)`` for a tensor or a sequence of hashable labels."""
    if isinstance(labels, torch.Tensor):
        return torch.unique(labels.flatten(), return_inverse=True)[1]
    if isinstance(labels, (str, bytes)):
        raise TypeError("labels must be a sequence of labels, got a single string")
    code_of: dict = {}
    return torch.tensor([code_of.setdefault(label, len(code_of)) for label in labels], dtype=torch.long)


def mutual_information_bits(first, second) -> float:
    """:math:`I(A;B) = \\sum_{a,b} p(a,b) \\log_2 \\frac{p(a,b)}{p(a)p(b)}` from the counts of the pairs of two
    labellings of the same ``T`` tokens (tensors or sequences of hashable labels), in bits (plug-in estimate)."""
    a, b = _codes(first), _codes(second)
    if a.numel() != b.numel() or a.numel() == 0:
        raise ValueError(f"both labellings must label the same T >= 1 tokens, got {a.numel()} and {b.numel()}")
    n_b = int(b.max()) + 1
    pairs, counts = torch.unique(a * n_b + b, return_counts=True)
    p_ab = counts.to(torch.float64) / a.numel()
    p_a = torch.bincount(a).to(torch.float64) / a.numel()
    p_b = torch.bincount(b).to(torch.float64) / a.numel()
    ratio = p_ab / (p_a[pairs // n_b] * p_b[pairs % n_b])
    return max(0.0, float((p_ab * torch.log2(ratio)).sum()))


def usage_matched_hash(token_ids, usage, *, generator: torch.Generator) -> torch.Tensor:
    """A random hash of the vocabulary onto ``K`` components with the usage ``usage`` exactly.

    The distinct token ids are put in a random order, the ``T`` tokens sorted by the rank of their id (their
    positions break ties), and cut into consecutive blocks of ``usage[k]`` tokens for the components in a random
    order. Every occurrence of a token id goes to one component, except the ids cut by a block's edge (at most
    ``K - 1`` of them), and component ``k`` takes exactly ``usage[k]`` tokens.

    Args:
        token_ids: ``(T,)`` integer ids (any integers).
        usage: ``(K,)`` non-negative counts summing to ``T`` (e.g. ``torch.bincount(z, minlength=K)``).
        generator: the ``torch.Generator`` that draws the orders.

    Returns:
        ``(T,)`` long component of each token.
    """
    ids = _codes(_labels("token_ids", token_ids).flatten())
    usage = torch.as_tensor(usage).flatten().to(torch.long)
    if (usage < 0).any() or int(usage.sum()) != ids.numel():
        raise ValueError(f"usage must be non-negative counts summing to T = {ids.numel()}, got {usage.tolist()}")
    rank = torch.randperm(int(ids.max()) + 1, generator=generator)[ids]
    order = torch.argsort(rank * ids.numel() + torch.arange(ids.numel()))
    components = torch.randperm(usage.numel(), generator=generator)
    blocks = torch.repeat_interleave(components, usage[components])
    hashed = torch.empty_like(ids)
    hashed[order] = blocks
    return hashed


def identity_information(assignments, token_ids, categories, *, n_hashes: int = 20, seed: int = 0) -> dict:
    """Per head, the information a hard assignment carries about the token's identity and its category, in bits,
    beside usage-matched hashes (:func:`usage_matched_hash`) of the same head.

    Args:
        assignments: ``(T,)`` or ``(T, H)`` long hard assignments (one column per head).
        token_ids: ``(T,)`` token ids of the same tokens.
        categories: ``T`` category labels.
        n_hashes: hashes drawn per head (>= 2).
        seed: seed of the generator that draws them.

    Returns:
        ``{"router": {"identity", "category", "entropy"}, "hash": {"identity": {"mean", "std"}, "category":
        {"mean", "std"}}, "heads": [each head's {"identity", "category", "entropy", "hash_category"}],
        "n_hashes", "seed"}``: ``entropy`` is :math:`H(Z)` in bits, the most either information can be; router
        numbers are means over heads, hash numbers the mean and spread (ddof=1) over draws of the heads' mean.
    """
    _checks.integer("n_hashes", n_hashes, minimum=2)
    _checks.integer("seed", seed)
    z = _labels("assignments", assignments)
    z = z.unsqueeze(1) if z.dim() == 1 else z
    ids = _labels("token_ids", token_ids).flatten()
    labels = _codes(categories)
    if z.dim() != 2 or not z.shape[0] == ids.numel() == labels.numel():
        raise ValueError(f"assignments (T,) or (T, H), token_ids and categories must cover the same T tokens, got "
                         f"{tuple(z.shape)}, {ids.numel()} and {labels.numel()}")
    generator = torch.Generator().manual_seed(seed)
    heads, hash_identity, hash_category = [], torch.zeros(n_hashes, z.shape[1]), torch.zeros(n_hashes, z.shape[1])
    for h in range(z.shape[1]):
        column = z[:, h]
        usage = torch.bincount(_codes(column))
        for draw in range(n_hashes):
            hashed = usage_matched_hash(ids, usage, generator=generator)
            hash_identity[draw, h] = mutual_information_bits(hashed, ids)
            hash_category[draw, h] = mutual_information_bits(hashed, labels)
        p = usage.to(torch.float64) / usage.sum()
        heads.append({"identity": mutual_information_bits(column, ids),
                      "category": mutual_information_bits(column, labels),
                      "entropy": float(-(p * torch.log2(p)).sum()),
                      "hash_category": float(hash_category[:, h].mean())})

    def spread(values: torch.Tensor) -> dict:
        means = values.to(torch.float64).mean(dim=1)
        return {"mean": float(means.mean()), "std": float(means.std(correction=1))}

    router = {key: sum(head[key] for head in heads) / len(heads) for key in ("identity", "category", "entropy")}
    return {"router": router, "hash": {"identity": spread(hash_identity), "category": spread(hash_category)},
            "heads": heads, "n_hashes": n_hashes, "seed": seed}


def mean_run_length(assignments) -> float:
    """The mean length of the runs of equal consecutive values along the last axis of ``(N,)`` or ``(B, N)``
    assignments (runs do not cross rows): ``N`` when a row never changes, 1 when it changes at every step."""
    z = _labels("assignments", assignments)
    z = z.unsqueeze(0) if z.dim() == 1 else z
    changes = (z[:, 1:] != z[:, :-1]).sum()
    return z.numel() / float(z.shape[0] + changes)


def band_report(assignments, *, n_shuffles: int = 100, seed: int = 0, n_sd: float = 3.0) -> dict:
    """Whether neighbouring tokens share a component: the mean run length of ``(B, N)`` hard assignments (one
    head) against the same assignments shuffled along each row, which keeps each row's usage and breaks order.

    Returns:
        ``{"mean_run": observed, "shuffled": {"mean", "std"}, "banded": observed above the shuffled mean by more
        than ``n_sd`` shuffled standard deviations and by at least 10% of it}``.
    """
    _checks.integer("n_shuffles", n_shuffles, minimum=2)
    n_sd = _checks.positive_number("n_sd", n_sd)
    z = _labels("assignments", assignments)
    z = z.unsqueeze(0) if z.dim() == 1 else z
    generator = torch.Generator().manual_seed(_checks.integer("seed", seed))
    draws = []
    for _ in range(n_shuffles):
        order = torch.stack([torch.randperm(z.shape[1], generator=generator) for _ in range(z.shape[0])])
        draws.append(mean_run_length(z.gather(1, order)))
    tensor = torch.tensor(draws, dtype=torch.float64)
    observed, mean, std = mean_run_length(z), float(tensor.mean()), float(tensor.std(correction=1))
    banded = observed > mean + n_sd * std and observed >= 1.1 * mean and not math.isclose(observed, mean)
    return {"mean_run": observed, "shuffled": {"mean": mean, "std": std}, "banded": bool(banded)}
