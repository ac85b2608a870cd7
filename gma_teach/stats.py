"""Every summary and interval the studies, tables and figures report, each with one contract.

* :func:`mean_std` -- ``(mean, std)``; :func:`describe` -- ``{"mean", "std", "n"}``;
* :func:`mean_interval` -- ``{"mean", "std", "n", "ci95"}``, the 95% Student-t interval of a mean;
  :func:`mean_half_width` -- ``(mean, half width of that interval)``, what an error bar needs;
* :func:`paired_difference` -- per-seed differences of two arms with their 95% t-interval;
  :func:`paired_t_p` -- the two-sided p-value of the paired t-test on the same differences;
* :func:`fisher_exact_p` -- two-sided p-value of Fisher's exact test on two counts;
* :func:`holm` -- Holm-Bonferroni adjusted p-values for a family of tests;
* :func:`ratio_of_means_interval` -- a ratio of two means paired by seed, with a seeded bootstrap interval;
* :func:`optional_stopping_rate` -- how often seeds added after a first look make noise look like a difference;
* :func:`seeds_to_tell_apart` -- how many seeds a paired difference of a given mean and spread would need;
* :func:`t_quantile_975`, :func:`student_t_cdf` -- Student's t distribution.

Standard library only (scipy is not a dependency): the t distribution's CDF is the regularized incomplete beta
function, evaluated by its continued fraction.
"""
from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence

from . import _checks

__all__ = ["describe", "fisher_exact_p", "half_width", "holm", "mean_half_width", "mean_interval", "mean_std",
           "paired_difference", "optional_stopping_rate", "paired_t_p", "ratio_of_means_interval",
           "seeds_to_tell_apart", "student_t_cdf", "t_quantile_975"]

_T_975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
          2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
          2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
"""Student's t 0.975 quantiles for 1..30 degrees of freedom (two-sided 95% intervals)."""


def _floats(name: str, values) -> list[float]:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
    return [float(v) for v in values]


def t_quantile_975(dof: int) -> float:
    """The 0.975 quantile of Student's t with ``dof`` degrees of freedom (exact table to 30, then the
    Cornish-Fisher expansion around the normal quantile, accurate to 1e-4 beyond)."""
    dof = _checks.integer("dof", dof, minimum=1)
    if dof <= len(_T_975):
        return _T_975[dof - 1]
    z = 1.959963984540054
    return (z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * dof ** 3))


def mean_std(values) -> tuple[float, float]:
    """``(mean, sample standard deviation)`` of ``values`` (the deviation is 0 for one value)."""
    values = _floats("values", values)
    if not values:
        raise ValueError("mean_std needs at least one value")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def describe(values) -> dict:
    """``{"mean", "std" (sample; 0 for one value), "n"}`` of ``values``: :func:`mean_std` with the count."""
    mean, std = mean_std(values)
    return {"mean": mean, "std": std, "n": len(_floats("values", values))}


def half_width(std: float, n: int) -> float:
    """The half-width ``t_{0.975, n-1} std / sqrt(n)`` of the 95% t-interval of a mean over ``n >= 2`` values whose
    sample standard deviation is ``std``."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n must be an int >= 2 (an interval needs two values), got {n!r}")
    return t_quantile_975(n - 1) * std / math.sqrt(n)


def mean_interval(values) -> dict:
    """``{"mean", "std" (sample), "n", "ci95"}`` of ``values``: the 95% t-interval ``[low, high]`` of ``mean +-
    t_{0.975, n-1} std / sqrt(n)``, or ``None`` for one value."""
    summary = describe(values)
    if summary["n"] < 2:
        return {**summary, "ci95": None}
    half = half_width(summary["std"], summary["n"])
    return {**summary, "ci95": [summary["mean"] - half, summary["mean"] + half]}


def mean_half_width(values) -> tuple[float, float | None]:
    """``(mean, half width of its 95% t-interval)`` of ``values`` (the width is ``None`` for one value): the
    interval of :func:`mean_interval` as an error bar."""
    interval = mean_interval(values)
    if interval["ci95"] is None:
        return interval["mean"], None
    return interval["mean"], interval["ci95"][1] - interval["mean"]


def _paired(a, b) -> list[float]:
    a, b = _floats("a", a), _floats("b", b)
    if len(a) != len(b):
        raise ValueError(f"a and b must have one value per seed each, got {len(a)} and {len(b)}")
    if len(a) < 2:
        raise ValueError(f"a paired comparison needs at least 2 seeds, got {len(a)}")
    return [x - y for x, y in zip(a, b)]


def paired_difference(a, b) -> dict:
    """Per-seed differences ``a[i] - b[i]`` of two arms measured on the same seeds, with a 95% t-interval.

    Args:
        a, b: sequences of equal length n >= 2 (the metric of each seed, in the same seed order).

    Returns:
        ``{"differences", "mean", "std" (sample), "n", "ci95": [low, high]}``; the interval is
        ``mean +- t_{0.975, n-1} std / sqrt(n)``. For one comparison planned in advance, an interval that excludes 0
        says the sign of the difference holds beyond seed-to-seed noise (at this n, assuming roughly normal
        differences). Among several comparisons, one in twenty such intervals excludes 0 by chance: then only a
        Holm-adjusted p-value below 0.05 tells two arms apart (:func:`holm`,
        :func:`gma_teach.study.declared_comparisons`).
    """
    differences = _paired(a, b)
    return {"differences": differences, **mean_interval(differences)}


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz), which converges fast
    for ``x < (a + 1) / (a + b + 2)``."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for numerator in (even, odd):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            return h
    raise ArithmeticError(f"the incomplete beta fraction did not converge for a={a}, b={b}, x={x}")


def _regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """``I_x(a, b)``, the CDF at ``x`` of the Beta(a, b) distribution, for ``a, b > 0`` and ``0 <= x <= 1``."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def student_t_cdf(t: float, dof: float) -> float:
    """``P(T <= t)`` for Student's t with ``dof`` > 0 degrees of freedom, exact through the regularized incomplete
    beta function: ``P(|T| > |t|) = I_{dof / (dof + t^2)}(dof / 2, 1 / 2)``."""
    t = float(t)
    dof = float(dof)
    if not dof > 0 or math.isnan(dof):
        raise ValueError(f"dof must be positive, got {dof}")
    if math.isnan(t):
        raise ValueError("t must be a number, got nan")
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * _regularized_incomplete_beta(dof / 2.0, 0.5, dof / (dof + t * t))  # P(T > |t|)
    return 1.0 - tail if t >= 0 else tail


def paired_t_p(a, b) -> float:
    """Two-sided p-value of the paired t-test that the per-seed differences ``a[i] - b[i]`` have mean zero.

    ``t = mean / (std / sqrt(n))`` with ``n - 1`` degrees of freedom, as in :func:`paired_difference` (whose 95%
    interval excludes 0 exactly when this p-value is below 0.05). Differences that are all equal give 1 when they
    are zero and 0 otherwise (no noise to weigh them against).
    """
    differences = _paired(a, b)
    mean, std = mean_std(differences)
    n = len(differences)
    if std == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    t = mean / (std / math.sqrt(n))
    return min(1.0, 2.0 * student_t_cdf(-abs(t), n - 1))


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
    p = _floats("p_values", p_values)
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


def ratio_of_means_interval(numerators, denominators, *, n_boot: int, seed: int) -> dict:
    """The ratio ``mean(numerators) / mean(denominators)`` of two quantities measured on the same seeds, with a
    95% percentile-bootstrap interval over seeds.

    A mean of per-seed ratios is ruled by the seed whose denominator is smallest (one tiny denominator can give a
    ratio of -3 where the others are near 0.5); the ratio of the means weighs every seed by its denominator. Its
    interval: draw ``n`` seeds with replacement, keeping each seed's numerator and denominator together (paired),
    ``n_boot`` times from ``random.Random(seed)``; the 2.5% and 97.5% percentiles of the resampled ratios (linear
    interpolation between order statistics). A resample whose denominators average exactly 0 gives an infinite
    ratio of the numerators' sign. With 3 seeds there are only 10 distinct resamples, so the interval is coarse:
    read it as "how far the seeds alone move the ratio", not as an exact 95% coverage.

    Args:
        numerators, denominators: one value per seed each, in the same seed order (n >= 2).
        n_boot: resamples (>= 100).
        seed: seeds the resampling, so the interval is reproducible.

    Returns:
        ``{"ratio", "ci95": [low, high], "n", "n_boot", "seed", "method"}``.
    """
    top, bottom = _floats("numerators", numerators), _floats("denominators", denominators)
    if len(top) != len(bottom):
        raise ValueError(f"numerators and denominators must have one value per seed each, got {len(top)} and "
                         f"{len(bottom)}")
    if len(top) < 2:
        raise ValueError(f"a bootstrap over seeds needs at least 2 seeds, got {len(top)}")
    n_boot = _checks.integer("n_boot", n_boot, minimum=100)
    seed = _checks.integer("seed", seed)
    if not all(math.isfinite(v) for v in top + bottom):
        raise ValueError("numerators and denominators must be finite")
    mean_bottom = statistics.fmean(bottom)
    if mean_bottom == 0.0:
        raise ValueError("the denominators average 0, so the ratio of the means is undefined")

    def ratio(indices):
        num = statistics.fmean(top[i] for i in indices)
        den = statistics.fmean(bottom[i] for i in indices)
        return num / den if den != 0.0 else math.copysign(math.inf, num)

    generator = random.Random(seed)
    n = len(top)
    draws = sorted(ratio([generator.randrange(n) for _ in range(n)]) for _ in range(n_boot))

    def percentile(q):
        position = q * (n_boot - 1)
        low = math.floor(position)
        high = min(low + 1, n_boot - 1)
        if draws[low] == draws[high]:
            return draws[low]
        return draws[low] + (position - low) * (draws[high] - draws[low])

    return {"ratio": statistics.fmean(top) / mean_bottom, "ci95": [percentile(0.025), percentile(0.975)], "n": n,
            "n_boot": n_boot, "seed": seed, "method": "percentile bootstrap over seeds, paired"}


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


def seeds_to_tell_apart(mean: float, std: float, *, alpha: float, at_most: int = 1000) -> int | None:
    """The fewest seeds at which a paired difference with this ``mean`` and standard deviation ``std`` over seeds
    would have a two-sided paired t-test p-value below ``alpha``; ``None`` when even ``at_most`` seeds would not
    (or the mean is 0).

    A planning figure, not a promise: it takes the observed mean and spread as the truth, so it is the number of
    seeds at which such a study would be told apart about half the time. For a family of tests, pass the level of
    the strictest step (Bonferroni: ``0.05 / m``, halved again for a second look).

    Args:
        mean: the mean per-seed difference; std: their standard deviation (> 0).
        alpha: the level, in (0, 1); at_most: the largest seed count tried (>= 2).
    """
    mean, std = float(mean), float(std)
    if not (math.isfinite(mean) and math.isfinite(std)) or std <= 0.0:
        raise ValueError(f"mean must be finite and std positive and finite, got mean {mean} and std {std}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    at_most = _checks.integer("at_most", at_most, minimum=2)
    if mean == 0.0:
        return None
    for n in range(2, at_most + 1):
        t = abs(mean) / (std / math.sqrt(n))
        if 2.0 * student_t_cdf(-t, n - 1) < alpha:
            return n
    return None
