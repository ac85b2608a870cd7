"""The studies' exploratory analyses, read from their records: every GMA arm against every other arm
(:func:`gma_against_baselines`), how much of full attention's context each arm of a language-model study recovers
(:func:`context_recovered`), and how many seeds of each arm of a classifier study left the majority-class plateau
(:func:`left_plateau`), and how many seeds the declared comparisons would need to be told apart at the spread
seen, at 80% power (:func:`seeds_needed`). A paired difference that is also a declared comparison carries its verdict
(``gma_teach.runs.verdicts``); every other result here carries ``"exploratory": True``: a result to test again, not
a finding. Nothing here trains.
"""
from __future__ import annotations

import statistics

from ..stats import fieller_ratio_interval, fisher_exact_p, holm, ratio_of_means_interval, seeds_to_tell_apart
from .arm_records import load_arm
from .study_values import metric_by_seed, metric_of, paired_on_common_seeds, seed_values
from .verdicts import ALPHA, declared_looks, with_verdict

__all__ = ["context_recovered", "gma_against_baselines", "left_plateau", "seeds_needed"]


def gma_against_baselines(study: dict, folder=None, *, metric: str | None = None) -> dict:
    """Every GMA arm of ``study`` against every other arm (baselines and controls): the paired per-seed difference
    ``gma - other`` of ``metric`` (default as in :func:`study_table`) with its 95% t-interval, on the seeds both
    have; a pair with fewer than two common seeds is left out.

    Returns:
        ``{"metric", "pairs": {gma_arm: {other_arm: {"seeds", "differences", "mean", "std", "n", "ci95", "p",
        "exploratory", ...}}}}``: a pair that is a declared comparison on the declared seeds also carries its
        ``"p_holm"`` and ``"told_apart"`` (:func:`declared_comparisons`); every other pair is exploratory.
    """
    metric, (part, key) = metric_of(study, metric)
    records = {arm: load_arm(study, arm, folder) for arm in study["arms"]}
    values = {arm: seed_values(record, part, key) for arm, record in records.items() if record is not None}
    gma_arms = [arm for arm, spec in study["arms"].items() if spec["mixer"] == "gma" and arm in values]
    looks = declared_looks(study, folder, records)
    result = {"metric": metric, "pairs": {}}
    for other in (arm for arm in values if arm not in gma_arms):
        for arm in gma_arms:
            paired = paired_on_common_seeds(values[arm], values[other])
            if paired is not None:
                result["pairs"].setdefault(arm, {})[other] = with_verdict(paired, arm, other, metric, looks)
    return result


CONTEXT_METHODS = ("fieller", "bootstrap")
"""The intervals :func:`context_recovered` can give: Fieller's (the default, 95% coverage stated) or the percentile
bootstrap (kept to show how it under-covers at a handful of seeds)."""


def context_recovered(study: dict, folder=None, *, baseline: str = "none", full: str = "sdpa",
                      method: str = "fieller", n_boot: int = 10_000, seed: int = 0) -> dict:
    """How much of the context that full attention exploits each arm of a language-model study recovers.

    The share :math:`\\bar g_\\text{arm} / \\bar g_\\text{full}`, where :math:`g = b_\\text{baseline} - b` is a run's
    gain in validation bits per byte ``b`` over the ``baseline`` control (no mixing) and the bars are means over
    the seeds the arm, ``baseline`` and ``full`` (causal SDPA) have in common: 0 for an arm that gains nothing over
    the baseline, 1 for one that gains as much as ``full``. A ratio of means, not a mean of per-seed ratios: the
    gain of ``full`` is small (under 0.1 bits per byte) and one seed's can be tiny, which would rule a mean of
    ratios. Its 95% interval is Fieller's, paired over seeds with t on ``n - 1`` degrees of freedom
    (:func:`gma_teach.stats.fieller_ratio_interval`): it covers the true share 95% of the time when the seeds' gains
    are normal, and it is unbounded (``ci95`` ``None``, ``bounded`` False, ``confidence_set`` spelled out) when the
    seeds cannot tell ``full``'s gain from zero. ``method="bootstrap"`` gives the percentile bootstrap instead
    (:func:`gma_teach.stats.ratio_of_means_interval` with ``n_boot`` resamples from ``seed``), which covers well under
    95% at 3 or 5 seeds. One seed: no interval. An exploratory summary: no declared comparison.

    Returns:
        ``{"baseline", "full", "gain": mean b_baseline - b_full over the seeds both have, "exploratory": True,
        "arms": {arm: {"seeds", "mean" (the ratio of the mean gains), "ci95", "n", "method", ...}}}``; with Fieller
        also ``"bounded"`` and ``"confidence_set"`` (``None`` for an unbounded end), with the bootstrap ``"n_boot"``
        and ``"seed"``. Arms with no seed in common are left out, and so are the two references.
    """
    if study.get("experiment", "lm") != "lm":
        raise ValueError(f"study must be a language-model study, got experiment {study.get('experiment')!r}")
    for name, arm in (("baseline", baseline), ("full", full)):
        if arm not in study["arms"]:
            raise ValueError(f"{name} must be an arm of the study ({sorted(study['arms'])}), got {arm!r}")
    if method not in CONTEXT_METHODS:
        raise ValueError(f"method must be one of {CONTEXT_METHODS}, got {method!r}")

    def bits(arm):
        record = load_arm(study, arm, folder)
        return {r["seed"]: r["val"]["bits_per_byte"] for r in record["runs"]} if record else {}

    low, high = bits(baseline), bits(full)
    references = sorted(set(low) & set(high))
    result = {"baseline": baseline, "full": full,
              "gain": statistics.fmean(low[s] - high[s] for s in references) if references else None,
              "exploratory": True, "arms": {}}
    for arm in study["arms"]:
        if arm in (baseline, full):
            continue
        values = bits(arm)
        seeds = [s for s in references if s in values]
        if not seeds:
            continue
        gains = [low[s] - values[s] for s in seeds]
        full_gains = [low[s] - high[s] for s in seeds]
        if statistics.fmean(full_gains) == 0.0:
            raise ValueError(f"{full} gains nothing over {baseline} on average over seeds {seeds}, so no share of "
                             f"that gain can be computed")
        if len(seeds) < 2:
            result["arms"][arm] = {"seeds": seeds, "mean": gains[0] / full_gains[0], "ci95": None, "n": 1,
                                   "method": "one seed: no interval"}
        elif method == "fieller":
            interval = fieller_ratio_interval(gains, full_gains)
            result["arms"][arm] = {"seeds": seeds, "mean": interval["ratio"], "ci95": interval["ci95"],
                                   "bounded": interval["bounded"], "confidence_set": interval["confidence_set"],
                                   "n": interval["n"], "method": interval["method"]}
        else:
            interval = ratio_of_means_interval(gains, full_gains, n_boot=n_boot, seed=seed)
            result["arms"][arm] = {"seeds": seeds, "mean": interval["ratio"], "ci95": interval["ci95"],
                                   "n": interval["n"], "n_boot": n_boot, "seed": seed, "method": interval["method"]}
    return result


def left_plateau(study: dict, folder=None, *, reference: str | None = None) -> dict:
    """How many seeds of each arm of a classifier study ended above the test set's majority class ("left the
    plateau" of the constant answer), and Fisher's exact test of each arm's count against ``reference``'s (default:
    the study's first arm) on all recorded seeds. Each seed's accuracy is the study's declared metric
    (:func:`metric_by_seed`): for the Text stand-in, the last epoch's.

    A post hoc, exploratory analysis wherever the study's design does not declare it (ListOps at LRA's lengths: the
    outcome was defined after the runs were seen), so every test here carries ``"exploratory": True``; the p-values
    are raw, and ``p_holm`` adjusts them over this analysis's own comparisons only.

    Returns:
        ``{"outcome", "reference", "exploratory": True, "counts": {arm: [left, seeds]}, "fisher": {arm: {"p",
        "p_holm"}}}``.
    """
    if study.get("experiment", "lm") == "lm":
        raise ValueError(f"study must be a classifier study (listops or text), got {study['name']!r}")
    reference = reference or next(iter(study["arms"]))
    counts = {}
    for arm in study["arms"]:
        record = load_arm(study, arm, folder)
        if record is None or not record["runs"]:
            continue
        majority = record["summary"]["majority_baseline"]
        accuracies = metric_by_seed(study, record).values()
        counts[arm] = [sum(accuracy > majority for accuracy in accuracies), len(accuracies)]
    fisher = {}
    if reference in counts:
        others = [arm for arm in counts if arm != reference]
        raw = [fisher_exact_p(*counts[arm], *counts[reference]) for arm in others]
        fisher = {arm: {"p": p, "p_holm": adjusted} for arm, p, adjusted in zip(others, raw, holm(raw) if raw else [])}
    return {"outcome": "test accuracy above the test set's majority class", "reference": reference,
            "exploratory": True, "counts": counts, "fisher": fisher}


def seeds_needed(declared: dict, *, power: float = 0.80, at_most: int = 1000) -> dict:
    """How many seeds an arm each declared comparison would need to be told apart with probability ``power`` (80%
    unless told), if the mean and spread of its per-seed differences were the truth
    (:func:`gma_teach.stats.seeds_to_tell_apart`, the paired t-test's power from the noncentral t): a planning
    figure for a new study of the same family, declared before it runs and looked at once, at the level of Holm's
    strictest step, ``ALPHA / m`` for a family of ``m`` tests. Exploratory: the mean and spread are estimates from
    a few seeds, so quote the count with its power ("N seeds an arm, at 80% power").

    Args:
        declared: :func:`gma_teach.study.declared_comparisons` of a study (either look), or the
            ``"declared"`` / ``"second_look"`` of its saved table.
        power: the chance of telling each pair apart that the count plans for, in (0, 1).
        at_most: the largest seed count tried; ``None`` for a comparison that would need more (or whose mean is 0).

    Returns:
        ``{"alpha", "power", "family_size", "exploratory": True, "comparisons": [{"arm", "against", "metric",
        "seeds"}]}``.
    """
    alpha = ALPHA / declared["family_size"]
    rows = [{"arm": c["arm"], "against": c["against"], "metric": c["metric"],
             "seeds": None if c["std"] == 0.0 else seeds_to_tell_apart(c["mean"], c["std"], alpha=alpha, power=power,
                                                                        at_most=at_most)}
            for c in declared["comparisons"]]
    return {"alpha": alpha, "power": power, "family_size": declared["family_size"], "exploratory": True,
            "comparisons": rows}
