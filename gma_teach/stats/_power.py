"""Planning and its pitfalls: how often seeds added after a first look make noise look like a difference
(:func:`optional_stopping_rate`), the power of the paired t-test from the noncentral t (:func:`paired_t_power`), and
the seeds a difference would need to be told apart at a stated power (:func:`seeds_to_tell_apart`)."""
from __future__ import annotations

import math
import random

from .. import _checks
from ._distributions import t_quantile
from ._tests import paired_t_p


def optional_stopping_rate(first: int, added: int, *, trials: int, seed: int, alpha: float = 0.05) -> dict:
    """How often two arms that do *not* differ are told apart when seeds are added after a first look.

    Each trial draws ``first`` per-seed differences from a normal law of mean 0 (no true difference) and tests them
    (:func:`paired_t_p`, two-sided); if the test does not reject at ``alpha``, it draws ``added`` more and tests all
    ``first + added`` again. Returns the share of trials rejected at the first look, and at either look: the first
    is close to ``alpha`` (what a declared design promises), the second above it (what looking twice costs).

    Args:
        first: seeds at the first look (>= 2); added: seeds added after it (>= 1).
        trials: simulated studies (>= 100); seed: seeds ``random.Random``.
        alpha: the level of each test, in (0, 1).

    Returns:
        ``{"first_look", "either_look", "trials", "first", "added", "alpha"}``.
    """
    first = _checks.integer("first", first, minimum=2)
    added = _checks.integer("added", added, minimum=1)
    trials = _checks.integer("trials", trials, minimum=100)
    seed = _checks.integer("seed", seed)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    generator = random.Random(seed)
    at_first = at_either = 0
    for _ in range(trials):
        differences = [generator.gauss(0.0, 1.0) for _ in range(first)]
        if paired_t_p(differences, [0.0] * first) < alpha:
            at_first += 1
            at_either += 1
            continue
        differences += [generator.gauss(0.0, 1.0) for _ in range(added)]
        if paired_t_p(differences, [0.0] * len(differences)) < alpha:
            at_either += 1
    return {"first_look": at_first / trials, "either_look": at_either / trials, "trials": trials, "first": first,
            "added": added, "alpha": alpha}


def _normal_cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def _two_sided_noncentral_t(c: float, dof: int, delta: float) -> float:
    """``P(|T| > c)`` for the noncentral t with ``dof`` degrees of freedom and noncentrality ``delta``.

    ``T = (Z + delta) / S`` with ``Z`` standard normal and ``S = sqrt(chi2_dof / dof)``, so ``P(T > c) = E[Phi(delta
    - c S)]`` and ``P(T < -c) = E[Phi(-delta - c S)]``: one integral over the density of ``S``, a scaled chi density
    ``2 (dof/2)^(dof/2) / Gamma(dof/2) s^(dof-1) exp(-dof s^2 / 2)``, by Simpson's rule over the range that holds all
    but about 1e-15 of it, with panels fine enough for the steepest of the two normal CDFs (scale ``1 / c``).
    """
    spread = 12.0 * math.sqrt(2.0 * dof)
    s_low, s_high = math.sqrt(max(0.0, dof - spread) / dof), math.sqrt((dof + spread + 40.0) / dof)
    panels = max(2000, 2 * math.ceil(10.0 * c * (s_high - s_low)))
    log_front = math.log(2.0) + (dof / 2.0) * math.log(dof / 2.0) - math.lgamma(dof / 2.0)

    def integrand(s: float) -> float:
        if s <= 0.0:
            density = math.exp(log_front) if dof == 1 else 0.0
        else:
            density = math.exp(log_front + (dof - 1.0) * math.log(s) - dof * s * s / 2.0)
        return density * (_normal_cdf(delta - c * s) + _normal_cdf(-delta - c * s))

    step = (s_high - s_low) / panels
    total = integrand(s_low) + integrand(s_high)
    for i in range(1, panels):
        total += (4.0 if i % 2 else 2.0) * integrand(s_low + i * step)
    return min(1.0, max(0.0, total * step / 3.0))


def paired_t_power(mean: float, std: float, n: int, *, alpha: float) -> float:
    """The power of the two-sided paired t-test at level ``alpha`` over ``n`` seeds: the chance that it tells apart
    a difference whose per-seed values are normal with this ``mean`` and standard deviation ``std``.

    The test rejects when ``|T| > c = t_{1 - alpha/2, n-1}``. With a true mean difference ``T`` follows the
    *noncentral* t with ``n - 1`` degrees of freedom and noncentrality ``delta = sqrt(n) |mean| / std`` (the
    difference in units of its standard error), so the power is ``P(|T| > c)`` under that law
    (``_two_sided_noncentral_t``). It equals ``alpha`` at mean 0 and grows with ``n`` and with ``|mean| /
    std``. Note what it is not: at the ``n`` where ``delta`` just equals ``c`` -- where the *observed* t of a
    study whose estimates came out exactly true would just pass -- the power is only about one half.

    Args:
        mean: the mean per-seed difference; std: their standard deviation (> 0); n: seeds (>= 2).
        alpha: the two-sided level, in (0, 1).
    """
    mean, std = float(mean), float(std)
    if not (math.isfinite(mean) and math.isfinite(std)) or std <= 0.0:
        raise ValueError(f"mean must be finite and std positive and finite, got mean {mean} and std {std}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    n = _checks.integer("n", n, minimum=2)
    critical = t_quantile(1.0 - alpha / 2.0, n - 1)
    return _two_sided_noncentral_t(critical, n - 1, math.sqrt(n) * abs(mean) / std)


def seeds_to_tell_apart(mean: float, std: float, *, alpha: float, power: float = 0.80,
                        at_most: int = 1000) -> int | None:
    """The fewest seeds at which the two-sided paired t-test at level ``alpha`` would tell apart, with probability
    at least ``power`` (80% unless told), a paired difference with this ``mean`` and standard deviation ``std``
    over seeds (:func:`paired_t_power`); ``None`` when even ``at_most`` seeds would not (or the mean is 0).

    A planning figure, not a promise: it takes the observed mean and spread as the truth, and they are estimates
    from a few seeds. Quote the power with the count. Planning at the ``n`` where the observed t would just reach
    the critical value (what this function did before it took ``power``) plans at about 50%: half of such studies
    would miss a difference that is really there. For a family of tests, pass the level of the strictest step
    (Bonferroni: ``0.05 / m``).

    Args:
        mean: the mean per-seed difference; std: their standard deviation (> 0).
        alpha: the level, in (0, 1); power: the chance of telling the pair apart, in (0, 1).
        at_most: the largest seed count tried (>= 2).
    """
    mean, std = float(mean), float(std)
    if not (math.isfinite(mean) and math.isfinite(std)) or std <= 0.0:
        raise ValueError(f"mean must be finite and std positive and finite, got mean {mean} and std {std}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must lie in (0, 1), got {power}")
    at_most = _checks.integer("at_most", at_most, minimum=2)
    if mean == 0.0 or paired_t_power(mean, std, at_most, alpha=alpha) < power:
        return None
    low, high = 1, at_most  # the power grows with n: low fails (or is below 2), high passes
    while high - low > 1:
        middle = (low + high) // 2
        if paired_t_power(mean, std, middle, alpha=alpha) >= power:
            high = middle
        else:
            low = middle
    return high
