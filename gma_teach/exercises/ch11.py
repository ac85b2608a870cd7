"""Chapter 11's exercises: weighted purity (11.1), normalized token entropy (11.2), mutual information between
component and category (11.3) and the information a router carries, between token and component (11.4).

Each checker calls your function on random inputs of odd sizes (and on corner cases: one component taking every
token, perfect alignment, one-hot rows) and compares it with :func:`gma_teach.diagnostics.routing_metrics`; it
raises :class:`~gma_teach.exercises.ExerciseError` naming the misconception, or prints "Exercise 11.N: correct"
(the protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import math

import torch

from .. import diagnostics
from ._common import ExerciseError, call_reader, checker

__all__ = ["check_mutual_information", "check_purity", "check_routing_information", "check_token_entropy"]


def _as_number(name: str, got) -> float:
    if isinstance(got, torch.Tensor):
        if got.numel() != 1:
            raise ExerciseError(f"{name}: expected a single number, got a tensor of shape {tuple(got.shape)}")
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        raise ExerciseError(f"{name}: expected a float, got {type(got).__name__}")
    if not math.isfinite(got):
        raise ExerciseError(f"{name}: got a non-finite value {got} (0 * log 0 must count as 0)")
    return float(got)


_TOLERANCE = 1e-6  # absolute; float32 answers pass, the mistakes named below differ by far more


def _tables(seed: int):
    """Hard assignments and integer categories: random, correlated, and the corner cases."""
    generator = torch.Generator().manual_seed(seed)
    for n_tokens, n_components, n_categories in ((13, 3, 2), (101, 7, 5), (257, 11, 10)):
        assignments = torch.randint(0, n_components, (n_tokens,), generator=generator)
        noise = torch.randint(0, n_categories, (n_tokens,), generator=generator)
        follow = torch.rand(n_tokens, generator=generator) < 0.5
        yield assignments, torch.where(follow, assignments % n_categories, noise), n_components
    yield torch.zeros(9, dtype=torch.long), torch.arange(9) % 3, 2  # one component takes every token
    yield torch.arange(12) % 4, torch.arange(12) % 4, 4  # perfect alignment


def _reference(assignments, categories, n_components) -> dict:
    resp = torch.nn.functional.one_hot(assignments, n_components).double()
    return diagnostics.routing_metrics(resp, categories.tolist())


def _macro_purity(assignments, categories) -> float:
    values = []
    for component in assignments.unique():
        mine = categories[assignments == component]
        values.append(torch.bincount(mine).max().item() / mine.numel())
    return sum(values) / len(values)


@checker("11.1")
def check_purity(fn, *, seed: int = 0):
    """Exercise 11.1: check ``fn(assignments, categories) -> purity``, the weighted purity of hard assignments.

    Args:
        fn: your function; ``assignments`` ``(T,)`` long (the winning component of each token), ``categories``
            ``(T,)`` long (the category of each token) -> a float,
            :math:`\\frac1T\\sum_k \\max_y n_{k,y}`.
        seed: seed of the random inputs.
    """
    for assignments, categories, n_components in _tables(seed):
        expected = _reference(assignments, categories, n_components)["purity"]
        got = _as_number("purity", call_reader(fn, assignments.clone(), categories.clone()))
        if abs(got - expected) > _TOLERANCE:
            if abs(got - _macro_purity(assignments, categories)) < _TOLERANCE:
                raise ExerciseError(
                    f"you averaged the per-component purities ({got:.4f}); weight each component by its number of "
                    f"tokens instead: sum over components of the dominant count, divided by T (expected {expected:.4f})"
                )
            if abs(got - expected * assignments.numel()) < 1e-6:
                raise ExerciseError(f"you returned a count ({got:g}); divide by the number of tokens T")
            raise ExerciseError(
                f"purity for T={assignments.numel()} tokens, K={n_components}: got {got:.6f}, expected {expected:.6f}"
            )
    return "weighted by component size."


@checker("11.3")
def check_mutual_information(fn, *, seed: int = 0):
    """Exercise 11.3: check ``fn(assignments, categories) -> I(Z; Y)`` in nats from hard assignments.

    Args:
        fn: your function; ``assignments`` and ``categories`` ``(T,)`` long -> a float,
            :math:`\\sum_{k,y} p(k,y) \\ln \\frac{p(k,y)}{p(k)\\,p(y)}` (``Y`` the category).
        seed: seed of the random inputs.
    """
    for assignments, categories, n_components in _tables(seed):
        reference = _reference(assignments, categories, n_components)
        expected = reference["mi"]
        got = _as_number("mutual information", call_reader(fn, assignments.clone(), categories.clone()))
        if abs(got - expected) > _TOLERANCE:
            if expected > 0 and abs(got - expected / math.log(2)) < _TOLERANCE:
                raise ExerciseError("your value is in bits: use the natural logarithm (nats), as the paper does")
            if expected > 0 and abs(got - reference["nmi_category"]) < _TOLERANCE:
                raise ExerciseError("you returned MI / H(Y), the normalized MI; return the MI itself")
            raise ExerciseError(
                f"mutual information for T={assignments.numel()} tokens, K={n_components}: got {got:.6f}, "
                f"expected {expected:.6f} nats"
            )
    return "in nats, from the table of counts."


@checker("11.2")
def check_token_entropy(fn, *, seed: int = 0):
    """Exercise 11.2: check ``fn(resp) -> normalized token entropy``, the mean of each row's entropy over ``ln K``.

    Args:
        fn: your function; ``resp`` ``(T, K)`` float64 responsibilities (rows sum to 1, some rows one-hot)
            -> a float in [0, 1].
        seed: seed of the random inputs.
    """
    generator = torch.Generator().manual_seed(seed)
    cases = []  # (K, the reference's metrics, your value): every size first, so that a diagnosis fits them all
    for n_tokens, n_components in ((5, 2), (31, 7), (64, 128)):
        logits = 3.0 * torch.randn(n_tokens, n_components, generator=generator, dtype=torch.float64)
        resp = torch.softmax(logits, dim=-1)
        resp[0] = 0.0
        resp[0, n_components - 1] = 1.0  # a one-hot row: 0 * log 0 must count as 0
        metrics = diagnostics.routing_metrics(resp, [0] * n_tokens)
        cases.append((n_components, metrics, _as_number("token entropy", call_reader(fn, resp.clone()))))
    wrong = [(k, metrics, got) for k, metrics, got in cases if abs(got - metrics["token_entropy"]) > _TOLERANCE]
    if not wrong:
        return "normalized by ln K, with 0 log 0 = 0."

    def explains_every_size(value) -> bool:  # at K = 2, ln K = ln 2: one size alone cannot tell two mistakes apart
        return all(abs(got - value(k, metrics)) < _TOLERANCE for k, metrics, got in cases)

    if explains_every_size(lambda k, m: m["token_entropy"] * math.log(k)):
        raise ExerciseError("you did not normalize: divide each row's entropy by ln K")
    if explains_every_size(lambda k, m: m["token_entropy"] * math.log(2)):
        raise ExerciseError("you divided an entropy in nats by log2 K: the entropy and the normalizer must use the "
                            "same logarithm (nats over ln K, or bits over log2 K)")
    if explains_every_size(lambda k, m: m["token_entropy"] / math.log(2)):
        raise ExerciseError("you divided an entropy in bits by ln K: the entropy and the normalizer must use the "
                            "same logarithm (nats over ln K, or bits over log2 K)")
    if explains_every_size(lambda k, m: m["usage_entropy"]):
        raise ExerciseError("you computed the entropy of the mean row (the usage entropy); average the rows' entropies")
    n_components, metrics, got = wrong[0]
    raise ExerciseError(f"token entropy for K={n_components}: got {got:.6f}, expected {metrics['token_entropy']:.6f}")


def _routers(seed: int):
    """Responsibility matrices ``(T, K)``: random of odd sizes, and the corner cases a router's information must
    get right (every token to one component, uniform rows, a perfect K-way split)."""
    generator = torch.Generator().manual_seed(seed)
    for n_tokens, n_components, scale in ((9, 3, 0.5), (31, 7, 3.0), (101, 11, 8.0)):
        yield torch.softmax(scale * torch.randn(n_tokens, n_components, generator=generator, dtype=torch.float64), -1)
    one_component = torch.zeros(12, 5, dtype=torch.float64)
    one_component[:, 2] = 1.0
    yield one_component
    yield torch.full((10, 4), 0.25, dtype=torch.float64)
    yield torch.eye(6, dtype=torch.float64).repeat(3, 1)


def _hard_information(resp: torch.Tensor) -> float:
    """The information of the argmax assignment alone, in bits: H(Z) of the winners (a common wrong answer)."""
    counts = torch.bincount(resp.argmax(-1), minlength=resp.shape[-1]).double()
    share = counts / counts.sum()
    return float(-torch.special.xlogy(share, share).sum()) / math.log(2)


@checker("11.4")
def check_routing_information(fn, *, seed: int = 0):
    """Exercise 11.4: check ``fn(resp) -> I`` in bits, the information a router's component carries about the token.

    Args:
        fn: your function; ``resp`` ``(T, K)`` float64 responsibilities (rows sum to 1; some rows one-hot, some
            uniform) -> a float, :math:`I = H(\\bar\\gamma) - \\frac1T\\sum_t H(\\gamma_t)` in bits, with
            :math:`\\bar\\gamma` the mean row and :math:`0 \\log 0 = 0`.
        seed: seed of the random inputs.
    """
    for resp in _routers(seed):
        reference = diagnostics.routing_information(resp)
        expected = reference["bits"]
        got = _as_number("routing information", call_reader(fn, resp.clone()))
        if abs(got - expected) > _TOLERANCE:
            log_k = math.log(resp.shape[-1])
            if expected > 0 and abs(got - expected * math.log(2)) < _TOLERANCE:
                raise ExerciseError("your value is in nats: divide by ln 2 for bits")
            if expected > 0 and abs(got - reference["share"]) < _TOLERANCE:
                raise ExerciseError("you divided by ln K (the share of the most there is); return I in bits")
            if abs(got + expected) < _TOLERANCE and expected > 0:
                raise ExerciseError("the sign is flipped: it is the entropy of the mean row minus the mean of the "
                                    "rows' entropies (the mean row is the more spread of the two)")
            if abs(got - reference["usage_entropy"] * log_k / math.log(2)) < _TOLERANCE:
                raise ExerciseError("you returned the entropy of the mean row alone (the usage entropy); subtract "
                                    "the mean of the rows' entropies")
            if abs(got - _hard_information(resp)) < _TOLERANCE:
                raise ExerciseError("you used the argmax winners: read the rows as distributions, so that a token "
                                    "spread over all K components carries nothing")
            raise ExerciseError(f"routing information for T={resp.shape[0]}, K={resp.shape[1]}: got {got:.6f}, "
                                f"expected {expected:.6f} bits")
    return "in bits, from the soft rows: collapsed and dissolved routers both carry none."
