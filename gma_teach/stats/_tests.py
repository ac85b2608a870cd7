"""The tests: the paired t-test of two arms measured on the same seeds, two one-sided tests of their equivalence
within a declared margin (TOST), Fisher's exact test on two counts, and Holm's correction for a family."""
from __future__ import annotations

import math
from collections.abc import Sequence

from .. import _checks
from ._distributions import student_t_cdf, t_quantile
from ._intervals import mean_std
from ._values import floats, paired_differences


def paired_t_p(a, b) -> float:
    """Two-sided p-value of the paired t-test that the per-seed differences ``a[i] - b[i]`` have mean zero.

    ``t = mean / (std / sqrt(n))`` with ``n - 1`` degrees of freedom, as in :func:`paired_difference` (whose 95%
    interval excludes 0 exactly when this p-value is below 0.05). Differences that are all equal give 1 when they
    are zero and 0 otherwise (no noise to weigh them against).
    """
    differences = paired_differences(a, b)
    mean, std = mean_std(differences)
    n = len(differences)
    if std == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (std / math.sqrt(n))
    return min(1.0, 2.0 * student_t_cdf(-abs(t), n - 1))


def tost(a, b, *, margin: float, alpha: float = 0.05) -> dict:
    """Equivalence of two arms measured on the same seeds: two one-sided paired t-tests (TOST) that the mean
    difference ``a[i] - b[i]`` lies inside ``(-margin, margin)``.

    "Not told apart" says only that the seeds cannot order two arms; it is no evidence that they are close. To say
    they are close, declare how close is close (the ``margin``, in the metric's units) before the runs, and test
    it: reject "the difference is at most -margin" (``p_lower``, from ``t = (mean + margin) / se``) and reject "the
    difference is at least +margin" (``p_upper``, from ``t = (mean - margin) / se``), each one-sided at level
    ``alpha`` on ``n - 1`` degrees of freedom, ``se = std / sqrt(n)``. The arms are *equivalent within the margin*
    when both reject: ``p = max(p_lower, p_upper) < alpha``. That happens exactly when the ``1 - 2 alpha``
    t-interval of the mean difference (90% at alpha 0.05) lies inside the margin, so ``smallest_margin``, the
    larger end of that interval in absolute value, is the smallest margin these seeds could have supported. A
    margin chosen after seeing it is no test. Differences that are all equal (no spread) are equivalent exactly
    when their value lies inside the margin.

    Args:
        a, b: one value per seed each, in the same seed order (n >= 2).
        margin: the declared margin (> 0, in the metric's units).
        alpha: the level of each one-sided test, in (0, 0.5).

    Returns:
        ``{"mean", "std", "n", "margin", "alpha", "p_lower", "p_upper", "p", "equivalent", "interval" (the
        1 - 2 alpha t-interval), "smallest_margin"}``.
    """
    differences = paired_differences(a, b)
    margin = float(margin)
    if not (math.isfinite(margin) and margin > 0.0):
        raise ValueError(f"margin must be positive and finite, got {margin}")
    if not 0.0 < alpha < 0.5:
        raise ValueError(f"alpha must lie in (0, 0.5), got {alpha}")
    mean, std = mean_std(differences)
    n = len(differences)
    if std == 0.0:
        p_lower = 0.0 if mean > -margin else 1.0
        p_upper = 0.0 if mean < margin else 1.0
        interval = [mean, mean]
    else:
        se = std / math.sqrt(n)
        p_lower = 1.0 - student_t_cdf((mean + margin) / se, n - 1)
        p_upper = student_t_cdf((mean - margin) / se, n - 1)
        half = t_quantile(1.0 - alpha, n - 1) * se
        interval = [mean - half, mean + half]
    p = max(p_lower, p_upper)
    return {"mean": mean, "std": std, "n": n, "margin": margin, "alpha": alpha, "p_lower": p_lower,
            "p_upper": p_upper, "p": p, "equivalent": p < alpha, "interval": interval,
            "smallest_margin": max(abs(interval[0]), abs(interval[1]))}


def fisher_exact_p(hits_a: int, runs_a: int, hits_b: int, runs_b: int) -> float:
    """Two-sided p-value of Fisher's exact test: do two arms reach an outcome (say, leaving a plateau) in
    ``hits_a`` of ``runs_a`` and ``hits_b`` of ``runs_b`` seeds at different rates?

    A t-interval suits a metric that varies smoothly from seed to seed. When every seed either reaches an outcome or
    does not, the count is what to compare. Given the total number of hits, ``hits_a`` follows a hypergeometric
    law if both arms share one rate. The p-value adds the probabilities of every split no more likely than the one
    observed (scipy's convention). A p-value below 0.05 tells the rates apart at the 5% level.
    """
    for name, value in (("runs_a", runs_a), ("runs_b", runs_b)):
        _checks.integer(name, value, minimum=1)
    _checks.integer("hits_a", hits_a, minimum=0, maximum=runs_a)
    _checks.integer("hits_b", hits_b, minimum=0, maximum=runs_b)
    hits = hits_a + hits_b

    splits = range(max(0, hits - runs_b), min(runs_a, hits) + 1)  # the possible hits of arm a
    probability = {x: math.comb(runs_a, x) * math.comb(runs_b, hits - x) / math.comb(runs_a + runs_b, hits)
                   for x in splits}
    observed = probability[hits_a]
    return min(1.0, sum(p for p in probability.values() if p <= observed * (1 + 1e-7)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values of a family of ``m`` tests, in the order given.

    Sort the p-values ``p_(1) <= ... <= p_(m)``; the adjusted value of ``p_(i)`` is
    ``max_{j <= i} min(1, (m - j + 1) p_(j))``. A hypothesis is rejected at family-wise level ``alpha`` exactly when
    its adjusted p-value is at most ``alpha`` (the step-down procedure), so the adjusted values are monotone in the
    raw ones and never above 1.

    Args:
        p_values: the raw p-values, each in [0, 1] (at least one).
    """
    p = floats("p_values", p_values)
    if not p:
        raise ValueError("p_values must hold at least one p-value")
    bad = [value for value in p if not 0.0 <= value <= 1.0]
    if bad:
        raise ValueError(f"p_values must lie in [0, 1], got {bad}")
    m = len(p)
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(sorted(range(m), key=lambda i: p[i])):
        running = max(running, min(1.0, (m - rank) * p[index]))
        adjusted[index] = running
    return adjusted
