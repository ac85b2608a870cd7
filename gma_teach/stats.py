"""Every summary and interval the studies, tables and figures report, each with one contract.

* :func:`mean_std` -- ``(mean, std)``; :func:`describe` -- ``{"mean", "std", "n"}``;
* :func:`mean_interval` -- ``{"mean", "std", "n", "ci95"}``, the 95% Student-t interval of a mean;
  :func:`mean_half_width` -- ``(mean, half width of that interval)``, what an error bar needs;
* :func:`paired_difference` -- per-seed differences of two arms with their 95% t-interval;
  :func:`paired_t_p` -- the two-sided p-value of the paired t-test on the same differences;
* :func:`fisher_exact_p` -- two-sided p-value of Fisher's exact test on two counts;
* :func:`holm` -- Holm-Bonferroni adjusted p-values for a family of tests;
* :func:`fieller_ratio_interval` -- a ratio of two means paired by seed, with Fieller's 95% confidence set (exact
  coverage for normal seeds, t on n - 1 degrees of freedom; unbounded where the denominator is not clearly non-zero);
  :func:`ratio_of_means_interval` -- the same ratio with a percentile bootstrap, which under-covers at a handful of
  seeds (kept to show why);
* :func:`tost` -- two one-sided paired t-tests: are two arms within a declared margin of each other?
  :func:`largest_difference_allowed` -- the largest difference, either way, that an interval leaves open;
* :func:`optional_stopping_rate` -- how often seeds added after a first look make noise look like a difference;
* :func:`paired_t_power` -- the power of the paired t-test (noncentral t); :func:`seeds_to_tell_apart` -- how many
  seeds a paired difference of a given mean and spread would need, at a stated power (80% unless told);
* :func:`t_quantile_975`, :func:`t_quantile`, :func:`student_t_cdf` -- Student's t distribution.

Standard library only (scipy is not a dependency): the t distribution's CDF is the regularized incomplete beta
function, evaluated by its continued fraction; the noncentral t is an integral over the chi distribution of the
spread, by Simpson's rule.
"""
from __future__ import annotations

import functools
import math
import random
import statistics
from collections.abc import Sequence

from . import _checks

__all__ = ["describe", "fieller_ratio_interval", "fisher_exact_p", "half_width", "holm", "largest_difference_allowed",
           "mean_half_width", "mean_interval", "mean_std", "paired_difference", "optional_stopping_rate",
           "paired_t_p", "paired_t_power", "ratio_of_means_interval", "seeds_to_tell_apart", "student_t_cdf",
           "t_quantile", "t_quantile_975", "tost"]

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


@functools.lru_cache(maxsize=1024)
def t_quantile(p: float, dof: float) -> float:
    """The ``p`` quantile of Student's t with ``dof`` > 0 degrees of freedom, for ``0 < p < 1``: the ``t`` with
    ``student_t_cdf(t, dof) == p``.

    Found by bisection on the tail probability ``P(T > |t|)``, so a small tail (Holm's strictest step over a large
    family, say ``0.05 / 24`` split over two sides) keeps its precision. ``t_quantile(0.975, n - 1)`` is the
    multiplier of a 95% interval over ``n`` seeds (:func:`t_quantile_975` holds it as a table).
    """
    p = float(p)
    if not 0.0 < p < 1.0:
        raise ValueError(f"p must lie in (0, 1), got {p}")
    dof = float(dof)
    if not dof > 0 or math.isinf(dof):
        raise ValueError(f"dof must be positive and finite, got {dof}")
    if p == 0.5:
        return 0.0
    tail = min(p, 1.0 - p)  # the probability above the positive quantile
    low, high = 0.0, 1.0
    while student_t_cdf(-high, dof) > tail:
        low, high = high, 2.0 * high
    for _ in range(200):
        middle = 0.5 * (low + high)
        if student_t_cdf(-middle, dof) > tail:
            low = middle
        else:
            high = middle
        if high - low <= 1e-14 * high:
            break
    quantile = 0.5 * (low + high)
    return quantile if p > 0.5 else -quantile


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
    differences = _paired(a, b)
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


def largest_difference_allowed(interval) -> float:
    """The largest difference, either way, that an interval of a difference ``[low, high]`` leaves open:
    ``max(|low|, |high|)``.

    Where two arms are not told apart, this is what to write instead of "the same" or "level with": "not told
    apart; the 95% interval allows a difference of up to ...". At a handful of seeds it is often as large as the
    effects the study was run to find, which is the honest size of what the seeds could not rule out.

    Args:
        interval: ``[low, high]``, two finite numbers with ``low <= high`` (the ``"ci95"`` of a paired difference).
    """
    bounds = _floats("interval", interval)
    if len(bounds) != 2 or not all(math.isfinite(v) for v in bounds) or bounds[0] > bounds[1]:
        raise ValueError(f"interval must be [low, high], two finite numbers with low <= high, got {interval!r}")
    return max(abs(bounds[0]), abs(bounds[1]))


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
    ratio of the numerators' sign. With 3 seeds there are only 10 distinct resamples, and at 3 or 5 seeds the
    interval covers the true ratio far less often than 95% (it cannot reach beyond the seeds it resamples, and
    knows nothing of Student's t): read it as "how far the seeds alone move the ratio". The interval with a stated
    coverage is ``fieller_ratio_interval``; this one stays to show the difference.

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


def fieller_ratio_interval(numerators, denominators) -> dict:
    """The ratio ``mean(numerators) / mean(denominators)`` of two quantities measured on the same seeds, with
    Fieller's 95% confidence set for the ratio of their true means, paired by seed.

    For a trial ratio ``r`` the per-seed values ``x_i - r y_i`` (``x`` the numerators, ``y`` the denominators) have
    mean zero exactly when ``r`` is the true ratio, and then their paired t statistic ``T(r) = mean / (sd /
    sqrt(n))`` follows Student's t with ``n - 1`` degrees of freedom. The set of every ``r`` that the two-sided
    paired t-test at 5% does not reject, ``{r : T(r)^2 <= t^2}`` with ``t = t_{0.975, n-1}``, therefore covers the
    true ratio 95% of the time at any ``n``: exactly, when each seed's pair ``(x_i, y_i)`` is bivariate normal. (A
    percentile bootstrap promises no such thing: at 3 or 5 seeds it covers well under 95%.) Written out, the set is
    where ``a r^2 - 2 b r + c <= 0``, with ``a = ybar^2 - t^2 s_yy / n``, ``b = xbar ybar - t^2 s_xy / n`` and
    ``c = xbar^2 - t^2 s_xx / n`` (``s`` the sample variances and covariance), ``D = b^2 - a c``. It takes one of
    three shapes:

    * ``a > 0``, which holds exactly when the denominators' own paired t-test tells their mean from zero at 5%
      (``|denominator_t| > t``): the bounded interval ``[(b - sqrt(D)) / a, (b + sqrt(D)) / a]``, returned as
      ``ci95``;
    * ``a <= 0`` and ``D > 0``: every ratio outside an interval (two rays);
    * ``a <= 0`` and ``D <= 0``: every ratio.

    In the last two the seeds cannot tell the denominator from zero, and no finite interval holds 95%: ``ci95`` is
    then ``None`` and ``confidence_set`` spells the set out, never a finite interval that would silently
    under-cover.

    Args:
        numerators, denominators: one value per seed each, in the same seed order (n >= 2), finite, with
            denominators that do not average exactly 0.

    Returns:
        ``{"ratio", "ci95": [low, high] or None, "bounded", "confidence_set": [[low, high], ...] (``None`` for an
        unbounded end), "denominator_t", "t", "n", "dof", "method"}``.
    """
    top, bottom = _floats("numerators", numerators), _floats("denominators", denominators)
    if len(top) != len(bottom):
        raise ValueError(f"numerators and denominators must have one value per seed each, got {len(top)} and "
                         f"{len(bottom)}")
    n = len(top)
    if n < 2:
        raise ValueError(f"a ratio interval over seeds needs at least 2 seeds, got {n}")
    if not all(math.isfinite(v) for v in top + bottom):
        raise ValueError("numerators and denominators must be finite")
    x_bar, y_bar = statistics.fmean(top), statistics.fmean(bottom)
    if y_bar == 0.0:
        raise ValueError("the denominators average 0, so the ratio of the means is undefined")
    s_xx = sum((x - x_bar) ** 2 for x in top) / (n - 1)
    s_yy = sum((y - y_bar) ** 2 for y in bottom) / (n - 1)
    s_xy = sum((x - x_bar) * (y - y_bar) for x, y in zip(top, bottom)) / (n - 1)
    t = t_quantile(0.975, n - 1)
    t2n = t * t / n
    a, b, c = y_bar * y_bar - t2n * s_yy, x_bar * y_bar - t2n * s_xy, x_bar * x_bar - t2n * s_xx
    discriminant = b * b - a * c
    if a > 0.0:  # the ratio itself lies in the set, so the discriminant is >= 0 up to rounding
        root = math.sqrt(max(discriminant, 0.0))
        pieces = [[(b - root) / a, (b + root) / a]]
    elif a < 0.0 and discriminant > 0.0:
        root = math.sqrt(discriminant)
        low, high = sorted(((b - root) / a, (b + root) / a))
        pieces = [[None, low], [high, None]]
    elif a == 0.0 and b != 0.0:  # a linear inequality: one ray
        pieces = [[c / (2.0 * b), None]] if b > 0.0 else [[None, c / (2.0 * b)]]
    else:
        pieces = [[None, None]]
    bounded = len(pieces) == 1 and None not in pieces[0]
    denominator_t = (y_bar / math.sqrt(s_yy / n) if s_yy > 0.0 else math.copysign(math.inf, y_bar))
    return {"ratio": x_bar / y_bar, "ci95": pieces[0] if bounded else None, "bounded": bounded,
            "confidence_set": pieces, "denominator_t": denominator_t, "t": t, "n": n, "dof": n - 1,
            "method": "Fieller, paired over seeds, t on n - 1 degrees of freedom"}


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
