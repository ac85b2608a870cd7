"""Summaries and intervals of one arm and of a paired difference: ``(mean, std)``, the 95% Student-t interval of a
mean and its half width (an error bar), the per-seed differences of two arms with their interval, and the largest
difference an interval leaves open."""
from __future__ import annotations

import math
import statistics

from ._distributions import t_quantile_975
from ._values import floats, paired_differences


def mean_std(values) -> tuple[float, float]:
    """``(mean, sample standard deviation)`` of ``values`` (the deviation is 0 for one value)."""
    values = floats("values", values)
    if not values:
        raise ValueError("mean_std needs at least one value")
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def describe(values) -> dict:
    """``{"mean", "std" (sample; 0 for one value), "n"}`` of ``values``: :func:`mean_std` with the count."""
    mean, std = mean_std(values)
    return {"mean": mean, "std": std, "n": len(floats("values", values))}


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
    differences = paired_differences(a, b)
    return {"differences": differences, **mean_interval(differences)}


def largest_difference_allowed(interval) -> float:
    """The largest difference, either way, that an interval of a difference ``[low, high]`` leaves open:
    ``max(|low|, |high|)``.

    Where two arms are not told apart, this is what to write instead of "the same" or "level with": "not told
    apart; the 95% interval allows a difference of up to ...". At a handful of seeds it is often as large as the
    effects the study was run to find, which is the honest size of what the seeds could not rule out.

    Args:
        interval: ``[low, high]``, two finite numbers with ``low <= high`` (the ``"ci95"`` of a paired difference).
    """
    bounds = floats("interval", interval)
    if len(bounds) != 2 or not all(math.isfinite(v) for v in bounds) or bounds[0] > bounds[1]:
        raise ValueError(f"interval must be [low, high], two finite numbers with low <= high, got {interval!r}")
    return max(abs(bounds[0]), abs(bounds[1]))
