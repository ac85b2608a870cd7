"""The studies' tables, read from their records: summaries, the declared comparisons with Holm-adjusted p-values,
exploratory paired differences, the order of the arms over training, and how much context each arm recovers.
Nothing here trains.

"Told apart" means one thing everywhere: a comparison of the study's declared primary family
(``study["primary"]``, see ``gma_teach.runs.settings``) whose paired t-test over the declared seeds has a
Holm-adjusted p-value below 0.05 (:func:`declared_comparisons`). A study that declares a ``"second_look"`` (more
seeds for every arm, decided after the first look) tests the same family again over all its seeds, each adjusted p
doubled for the two looks. Every other paired difference a table reports carries ``"exploratory": True`` and its
unadjusted ``"p"``: a result to test again, not a finding.
"""
from __future__ import annotations

import statistics

from ..stats import (
    describe,
    fisher_exact_p,
    half_width,
    holm,
    paired_difference,
    paired_t_p,
    ratio_of_means_interval,
)
from .arm_records import final_health, load_arm

__all__ = ["ALPHA", "LOOKS", "METRIC_PATHS", "context_recovered", "declared_comparisons", "declared_metrics",
           "format_declared", "format_study_table", "gma_against_baselines", "left_plateau",
           "findings_summary", "ordering_at_last_evaluations", "study_findings", "study_table", "study_tables"]

ALPHA = 0.05
"""The family-wise level: a declared comparison is told apart when its Holm-adjusted p-value is below it."""

LOOKS = 2
"""How many times a study with a declared ``"second_look"`` has been tested: its first seeds, then all of them.
The second look's Holm-adjusted p-values are multiplied by it (Bonferroni over the looks), so the chance of any
false "told apart" over both looks stays below :data:`ALPHA`."""

METRIC_PATHS = {"val_bits_per_byte": ("val", "bits_per_byte"), "val_loss": ("val", "loss"),
                "val_perplexity": ("val", "perplexity"), "test_accuracy": ("test", "accuracy"),
                "last_epoch_test_accuracy": ("history", "val_metric"),
                "active_share": ("health", "active_share"), "usage_entropy": ("health", "usage_entropy")}
"""What :func:`study_table` can pair: a run's validation or test numbers, or (GMA arms) its routing health at the
last evaluation (:func:`final_health`). ``test_accuracy`` is what a classifier's record calls its test accuracy:
that of the best epoch on the validation split. ``last_epoch_test_accuracy`` is the accuracy on the validation
split after the last epoch, which is the test accuracy of the last epoch's weights only for a study whose
validation split is its test split (the Text stand-in); it is refused for any other."""

_LAST_EPOCH_EXPERIMENTS = ("text",)
"""Experiments whose validation split is their test split (``gma_teach.runs.experiments.text_data``)."""


def declared_metrics(study: dict) -> tuple[str, ...]:
    """The metrics ``study`` declares (``"metric"`` or ``"metrics"``); for a study without a declaration, bits per
    byte for a language-model study and test accuracy for a classifier."""
    if "metrics" in study:
        return tuple(study["metrics"])
    if "metric" in study:
        return (study["metric"],)
    return ("val_bits_per_byte",) if study.get("experiment", "lm") == "lm" else ("test_accuracy",)


def _metric_of(study: dict, metric: str | None) -> tuple[str, tuple[str, str]]:
    """``metric`` (default: the study's first declared metric, :func:`declared_metrics`) and its ``(part, key)``
    of :data:`METRIC_PATHS`."""
    metric = metric or declared_metrics(study)[0]
    if metric not in METRIC_PATHS:
        raise ValueError(f"metric must be one of {sorted(METRIC_PATHS)}, got {metric!r}")
    if metric == "last_epoch_test_accuracy" and study.get("experiment") not in _LAST_EPOCH_EXPERIMENTS:
        raise ValueError(f"metric 'last_epoch_test_accuracy' needs a study whose validation split is its test split "
                         f"(experiment in {_LAST_EPOCH_EXPERIMENTS}), got experiment {study.get('experiment')!r}")
    return metric, METRIC_PATHS[metric]


def _run_value(run: dict, part: str, key: str):
    if part == "health":
        health = final_health(run)
        return None if health is None else health[key]
    if part == "history":
        return run["history"][key][-1]
    return run[part][key]


def study_table(study: dict, folder=None, *, reference: str | None = None, metric: str | None = None) -> dict:
    """What is recorded for ``study``: per arm, the summary; and for ``reference`` (default: the study's first
    arm) against every other arm, the paired per-seed difference of ``metric`` (default: bits per byte for a
    language model, test accuracy for a classifier) on their common seeds, with its interval at ``confidence``
    (0.95)."""
    metric, (part, key) = _metric_of(study, metric)
    arms = {arm: load_arm(study, arm, folder) for arm in study["arms"]}
    arms = {arm: record for arm, record in arms.items() if record is not None and record["runs"]}
    reference = reference or next(iter(study["arms"]))
    summaries = {}
    for arm, record in arms.items():
        summaries[arm] = dict(record["summary"])
        values = list(_seed_values(record, part, key).values())
        if metric not in summaries[arm] and values:
            summaries[arm][metric] = describe(values)
    table = {"metric": metric, "reference": reference, "confidence": 0.95, "arms": summaries, "paired": {}}
    if part == "val" and arms:
        table["ordering"] = ordering_at_last_evaluations(arms)
    if reference in arms:
        by_seed = _seed_values(arms[reference], part, key)
        looks = _declared_looks(study, folder, arms)
        for arm, record in arms.items():
            paired = None if arm == reference else _paired_on_common_seeds(_seed_values(record, part, key), by_seed)
            if paired is not None:
                table["paired"][arm] = _labelled(paired, arm, reference, metric, looks)
    return table


def _labelled(paired: dict, arm: str, other: str, metric: str, looks: list[dict]) -> dict:
    """``paired`` (``arm - other``) with its unadjusted ``"p"`` and, when it is a declared comparison on the
    seeds of one of the declared ``looks`` (:func:`declared_comparisons`), its ``"p_holm"``, ``"told_apart"`` and
    ``"look"`` (1 or 2; ``"exploratory": False``); otherwise ``"exploratory": True``."""
    for number, declared in enumerate(looks, start=1):
        for comparison in declared["comparisons"]:
            if (comparison["metric"] == metric and {comparison["arm"], comparison["against"]} == {arm, other}
                    and comparison["seeds"] == paired["seeds"]):
                return {**paired, "p": comparison["p"], "p_holm": comparison["p_holm"],
                        "told_apart": comparison["told_apart"], "look": number, "exploratory": False}
    differences = paired["differences"]
    return {**paired, "p": paired_t_p(differences, [0.0] * len(differences)), "exploratory": True}


def _seed_values(record: dict, part: str, key: str) -> dict:
    """``{seed: value}`` of one arm's record, leaving out seeds without the value."""
    values = {r["seed"]: _run_value(r, part, key) for r in record["runs"]}
    return {seed: value for seed, value in values.items() if value is not None}


def _paired_on_common_seeds(a: dict, b: dict) -> dict | None:
    """:func:`paired_difference` of ``a - b`` (``{seed: value}`` each) on their common seeds, with ``"seeds"``;
    ``None`` with fewer than two common seeds."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return None
    return {"seeds": common, **paired_difference([a[s] for s in common], [b[s] for s in common])}


def study_tables(study: dict, folder=None) -> dict:
    """Every table of :func:`study_table` worth reading for ``study``: its declared metrics, then bits per byte and
    (GMA arms) active share for a language-model study, test accuracy (the record's, best epoch on the validation
    split) for a classifier; ``{metric: table}``."""
    usual = (("val_bits_per_byte", "active_share") if study.get("experiment", "lm") == "lm"
             else ("test_accuracy",))
    metrics = dict.fromkeys((*declared_metrics(study), *usual))
    return {metric: study_table(study, folder, metric=metric) for metric in metrics}


def declared_comparisons(study: dict, folder=None, *, look: str = "first", _records: dict | None = None) -> dict:
    """The study's declared primary comparisons, each tested as declared: the paired t-test over the declared
    seeds (``study["seeds"]``, those recorded for both arms), two-sided, with Holm's correction over the whole
    family (every declared metric times every primary pair). A declared comparison not recorded yet (fewer than two
    common declared seeds) counts as ``p = 1`` in the correction, so a partial study never gets a smaller
    correction than the full one would.

    ``look="second"`` tests the same family as the study's declared ``"second_look"`` says: over its seeds (every
    one of them recorded for both arms, else the comparison counts as not recorded), with each Holm-adjusted p
    multiplied by the number of looks (2, Bonferroni over the looks, capped at 1), because the decision to look
    again followed the first look. A study without a ``"second_look"`` refuses it.

    Returns:
        ``{"test", "seeds", "family_size", "alpha", "comparisons": [{"arm", "against", "metric", "seeds",
        "differences", "mean", "std", "n", "ci95", "p", "p_holm", "told_apart"}]}`` and, on the second look,
        ``"looks": 2``; ``mean`` is ``arm - against`` and ``told_apart`` is ``p_holm < alpha``. A study that
        declares no comparison gets an empty list.
    """
    if look not in ("first", "second"):
        raise ValueError(f"look must be 'first' or 'second', got {look!r}")
    if look == "second" and "second_look" not in study:
        raise ValueError(f"look='second' needs a study that declares a second look; {study['name']!r} does not")
    declared = [(metric, arm, against) for metric in declared_metrics(study)
                for arm, against in study.get("primary", [])]
    records = _records if _records is not None else {arm: load_arm(study, arm, folder) for arm in study["arms"]}
    seeds = set(study["seeds"] if look == "first" else study["second_look"]["seeds"])
    looks = 1 if look == "first" else LOOKS
    comparisons = []
    for metric, arm, against in declared:
        _, (part, key) = _metric_of(study, metric)
        if records.get(arm) is None or records.get(against) is None:
            continue
        first, second = (_seed_values(records[name], part, key) for name in (arm, against))
        paired = _paired_on_common_seeds({s: v for s, v in first.items() if s in seeds},
                                         {s: v for s, v in second.items() if s in seeds})
        if paired is not None and (look == "first" or set(paired["seeds"]) == seeds):
            p = paired_t_p(paired["differences"], [0.0] * len(paired["differences"]))
            comparisons.append({"arm": arm, "against": against, "metric": metric, **paired, "p": p})
    if comparisons:
        adjusted = holm([c["p"] for c in comparisons] + [1.0] * (len(declared) - len(comparisons)))
        for comparison, p_holm in zip(comparisons, adjusted):
            p_holm = min(1.0, looks * p_holm)
            comparison.update(p_holm=p_holm, told_apart=p_holm < ALPHA)
    test = study.get("test") if look == "first" else study["second_look"]["test"]
    result = {"test": test, "seeds": sorted(seeds), "family_size": len(declared), "alpha": ALPHA}
    return {**result, **({"looks": looks} if look == "second" else {}), "comparisons": comparisons}


def _declared_looks(study: dict, folder, records: dict) -> list[dict]:
    """:func:`declared_comparisons` of every look the study declares (the first, and its second if any)."""
    looks = [declared_comparisons(study, folder, _records=records)]
    if "second_look" in study:
        looks.append(declared_comparisons(study, folder, look="second", _records=records))
    return looks


LOWER_IS_BETTER = ("val_bits_per_byte", "val_loss", "val_perplexity")
"""Metrics for which a lower value is better; for every other metric of :data:`METRIC_PATHS`, higher is."""

_UNITS = {"val_bits_per_byte": (1.0, 4, "", "bits/byte"), "val_loss": (1.0, 4, "", "val loss"),
          "val_perplexity": (1.0, 2, "", "perplexity"), "test_accuracy": (100.0, 2, " points", "test accuracy"),
          "last_epoch_test_accuracy": (100.0, 2, " points", "last-epoch accuracy"),
          "active_share": (1.0, 3, "", "active share"), "usage_entropy": (1.0, 3, "", "usage entropy")}
"""Per metric: the scale a difference is printed at, its decimals, its unit and its short name."""


def _gma_first(study: dict, comparison: dict) -> tuple[str, str, float, list]:
    """``(subject, other, difference, interval)`` of a declared comparison, turned so that the subject is the GMA
    arm when exactly one side is GMA (else the comparison's own ``arm``): ``difference`` is subject - other."""
    arm, against = comparison["arm"], comparison["against"]
    is_gma = {name: study["arms"][name]["mixer"] == "gma" for name in (arm, against)}
    low, high = comparison["ci95"]
    if is_gma[against] and not is_gma[arm]:
        return against, arm, -comparison["mean"], [-high, -low]
    return arm, against, comparison["mean"], [low, high]


def study_findings(study: dict, declared: dict) -> dict:
    """What a study's declared comparisons found, from the GMA side, as sentences with their numbers.

    Each declared comparison is turned so that its subject is the GMA arm (when exactly one side is GMA; a remedy
    against the default keeps the remedy as subject) and sorted into ``wins`` (told apart, the subject better),
    ``losses`` (told apart, the other better) and ``ties`` (not told apart: Holm p >= 0.05). Better is lower for
    bits per byte and losses (``LOWER_IS_BETTER``), higher for accuracy and active share.

    Args:
        study: a study of ``gma_teach.runs.settings`` (its arms say which side is GMA).
        declared: :func:`declared_comparisons` of the study (or the ``"declared"`` of its saved table).

    Returns:
        ``{"wins": [sentence], "ties": [...], "losses": [...], "family": sentence}``; a sentence reads like
        ``"gma vs softmax, last-epoch accuracy: +3.54 points [+2.02, +5.06], Holm p 0.001"`` (subject - other,
        its 95% interval and its Holm-adjusted p-value).
    """
    found = {"wins": [], "ties": [], "losses": []}
    for comparison in declared["comparisons"]:
        metric = comparison["metric"]
        scale, digits, unit, name = _UNITS[metric]
        subject, other, difference, (low, high) = _gma_first(study, comparison)
        better = difference < 0 if metric in LOWER_IS_BETTER else difference > 0
        group = "ties" if not comparison["told_apart"] else "wins" if better else "losses"
        found[group].append(f"{subject} vs {other}, {name}: "
                            f"{scale * difference:+.{digits}f}{unit} [{scale * low:+.{digits}f}, "
                            f"{scale * high:+.{digits}f}], Holm p {comparison['p_holm']:.3f}")
    seeds = declared["seeds"]
    told = sum(c["told_apart"] for c in declared["comparisons"])
    looks = declared.get("looks", 1)
    correction = "Holm's correction" + (f", each p times {looks} for {looks} looks" if looks > 1 else "")
    found["family"] = (f"{len(declared['comparisons'])} of {declared['family_size']} declared comparisons recorded, "
                       f"paired over seeds {seeds[0]}-{seeds[-1]} with {correction}; {told} told apart")
    return found


def findings_summary(found: dict, declared: dict) -> list[str]:
    """A few sentences for a chapter's "What we found" box from :func:`study_findings`: the family, every win and
    loss (the first arm named is the GMA side, or the remedy), and the ties as a count with the closest one
    (smallest Holm p) spelled out."""
    lines = [found["family"][0].upper() + found["family"][1:] + "."]
    lines += [f"Told apart, first arm ahead: {sentence}." for sentence in found["wins"]]
    lines += [f"Told apart, first arm behind: {sentence}." for sentence in found["losses"]]
    if found["ties"]:
        ties = [c for c in declared["comparisons"] if not c["told_apart"]]
        closest = min(range(len(ties)), key=lambda i: ties[i]["p_holm"])
        lines.append(f"Not told apart: {len(found['ties'])} comparison(s); the closest, {found['ties'][closest]}.")
    return lines


def format_declared(declared: dict, *, width: int = 75) -> list[str]:
    """Lines of at most ``width`` characters: each declared comparison, its difference and 95% interval, Holm's p
    and the verdict."""
    looks = declared.get("looks", 1)
    lines = [f"declared comparisons ({len(declared['comparisons'])} of {declared['family_size']} recorded), "
             f"seeds {declared['seeds'][0]}-{declared['seeds'][-1]},",
             "Holm over the family" + (f", each p x{looks} for {looks} looks:" if looks > 1 else ":")]
    for c in declared["comparisons"]:
        scale, digits, unit, name = _UNITS[c["metric"]]
        verdict = "told apart" if c["told_apart"] else "not told apart"
        low, high = (scale * bound for bound in c["ci95"])
        lines.append(f"  {c['arm']} - {c['against']} ({name}{',' + unit if unit else ''})")
        lines.append(f"    {scale * c['mean']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}] "
                     f"p {c['p']:.3f}, Holm p {c['p_holm']:.3f}: {verdict}")
    return [line[:width] for line in lines]


def gma_against_baselines(study: dict, folder=None, *, metric: str | None = None) -> dict:
    """Every GMA arm of ``study`` against every other arm (baselines and controls): the paired per-seed difference
    ``gma - other`` of ``metric`` (default as in :func:`study_table`) with its 95% t-interval, on the seeds both
    have; a pair with fewer than two common seeds is left out.

    Returns:
        ``{"metric", "pairs": {gma_arm: {other_arm: {"seeds", "differences", "mean", "std", "n", "ci95", "p",
        "exploratory", ...}}}}``: a pair that is a declared comparison on the declared seeds also carries its
        ``"p_holm"`` and ``"told_apart"`` (:func:`declared_comparisons`); every other pair is exploratory.
    """
    metric, (part, key) = _metric_of(study, metric)
    records = {arm: load_arm(study, arm, folder) for arm in study["arms"]}
    values = {arm: _seed_values(record, part, key) for arm, record in records.items() if record is not None}
    gma_arms = [arm for arm, spec in study["arms"].items() if spec["mixer"] == "gma" and arm in values]
    looks = _declared_looks(study, folder, records)
    result = {"metric": metric, "pairs": {}}
    for other in (arm for arm in values if arm not in gma_arms):
        for arm in gma_arms:
            paired = _paired_on_common_seeds(values[arm], values[other])
            if paired is not None:
                result["pairs"].setdefault(arm, {})[other] = _labelled(paired, arm, other, metric, looks)
    return result


def ordering_at_last_evaluations(arms: dict) -> dict:
    """Whether training ran long enough to order the arms: the arms sorted by their mean validation bits per byte
    over the seeds they all have (``seeds``; seeds differ a lot, so only common ones are compared) at the last
    evaluation and at the one before, whether the two orders agree (``None`` without a common seed), and
    ``swapped``: the pairs ``[a, b]`` (``a`` ahead at the last evaluation) that the evaluation before ordered the
    other way. Only the arms with at least as many seeds as the typical arm (the lower median of the seed counts)
    are ordered; the others are listed in ``left_out``. So an arm with one seed recorded does not reduce the
    comparison to that seed, and a pair of arms given extra seeds does not leave out every other arm.

    Two arms whose means differ by less than the seed-to-seed noise can swap at every evaluation however long the
    training, so the ordering also reports, over all its pairs at the last evaluation (an exploratory analysis:
    ``exploratory`` is ``True``): ``interval_excludes_zero``, the pairs ``[a, b]`` whose unadjusted 95% paired
    interval puts ``a`` ahead; ``told_apart``, those whose paired t-test survives Holm's correction over all the
    pairs (``p`` and ``p_holm`` give each pair's raw and adjusted p-values, keyed ``"a < b"``); and
    ``told_apart_swapped``: those told apart that the evaluation before ordered the other way. An empty
    ``told_apart_swapped`` says that every order the seeds can tell has settled.

    Args:
        arms: ``{arm: record}`` of language-model arms.
    """
    typical = statistics.median_low(len(record["runs"]) for record in arms.values())
    left_out = [arm for arm, record in arms.items() if len(record["runs"]) < typical]
    arms = {arm: record for arm, record in arms.items() if arm not in left_out}
    seeds = sorted(set.intersection(*({r["seed"] for r in record["runs"]} for record in arms.values())))

    def order(position):
        means = {arm: statistics.fmean(r["history"]["val_bits_per_byte"][position] for r in record["runs"]
                                       if r["seed"] in seeds)
                 for arm, record in arms.items()}
        return sorted(means, key=means.get), means

    def last_values(arm):
        by_seed = {r["seed"]: r["history"]["val_bits_per_byte"][-1] for r in arms[arm]["runs"]}
        return [by_seed[seed] for seed in seeds]

    if not seeds:
        return {"seeds": [], "last": [], "previous": [], "stable": None, "swapped": [], "left_out": left_out,
                "last_means": {}, "previous_means": {}, "exploratory": True, "interval_excludes_zero": [],
                "p": {}, "p_holm": {}, "told_apart": [], "told_apart_swapped": []}
    last, last_means = order(-1)
    previous, previous_means = order(-2)
    pairs = [[a, b] for i, a in enumerate(last) for b in last[i + 1:]]
    swapped = [pair for pair in pairs if previous.index(pair[0]) > previous.index(pair[1])]
    excluding, told_apart, adjusted, unadjusted = [], [], {}, {}
    if len(seeds) >= 2 and pairs:
        raw = [paired_t_p(last_values(b), last_values(a)) for a, b in pairs]
        unadjusted = {f"{a} < {b}": p for (a, b), p in zip(pairs, raw)}
        adjusted = {f"{a} < {b}": p for (a, b), p in zip(pairs, holm(raw))}
        excluding = [[a, b] for a, b in pairs if paired_difference(last_values(b), last_values(a))["ci95"][0] > 0]
        told_apart = [[a, b] for a, b in excluding if adjusted[f"{a} < {b}"] < ALPHA]
    return {"seeds": seeds, "last": last, "previous": previous, "stable": last == previous, "swapped": swapped,
            "left_out": left_out, "last_means": last_means, "previous_means": previous_means, "exploratory": True,
            "interval_excludes_zero": excluding, "p": unadjusted, "p_holm": adjusted, "told_apart": told_apart,
            "told_apart_swapped": [pair for pair in told_apart if pair in swapped]}


def context_recovered(study: dict, folder=None, *, baseline: str = "none", full: str = "sdpa",
                      n_boot: int = 10_000, seed: int = 0) -> dict:
    """How much of the context that full attention exploits each arm of a language-model study recovers.

    The share :math:`\\bar g_\\text{arm} / \\bar g_\\text{full}`, where :math:`g = b_\\text{baseline} - b` is a run's
    gain in validation bits per byte ``b`` over the ``baseline`` control (no mixing) and the bars are means over
    the seeds the arm, ``baseline`` and ``full`` (causal SDPA) have in common: 0 for an arm that gains nothing over
    the baseline, 1 for one that gains as much as ``full``. A ratio of means, not a mean of per-seed ratios: the
    gain of ``full`` is small (under 0.1 bits per byte) and one seed's can be tiny, which would rule a mean of
    ratios. Its 95% interval is a percentile bootstrap over seeds, each seed's two gains kept together
    (:func:`gma_teach.stats.ratio_of_means_interval` with ``n_boot`` resamples from ``seed``; ``None`` with one
    seed). An exploratory summary: no declared comparison.

    Returns:
        ``{"baseline", "full", "gain": mean b_baseline - b_full over the seeds both have, "exploratory": True,
        "arms": {arm: {"seeds", "mean" (the ratio of the mean gains), "ci95", "n", "n_boot", "seed",
        "method"}}}``; arms with no seed in common are left out, and so are the two references.
    """
    if study.get("experiment", "lm") != "lm":
        raise ValueError(f"study must be a language-model study, got experiment {study.get('experiment')!r}")
    for name, arm in (("baseline", baseline), ("full", full)):
        if arm not in study["arms"]:
            raise ValueError(f"{name} must be an arm of the study ({sorted(study['arms'])}), got {arm!r}")

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
                                   "n_boot": 0, "seed": seed, "method": "one seed: no interval"}
            continue
        interval = ratio_of_means_interval(gains, full_gains, n_boot=n_boot, seed=seed)
        result["arms"][arm] = {"seeds": seeds, "mean": interval["ratio"], "ci95": interval["ci95"],
                               "n": interval["n"], "n_boot": n_boot, "seed": seed, "method": interval["method"]}
    return result


def left_plateau(study: dict, folder=None, *, reference: str | None = None) -> dict:
    """How many seeds of each arm of a classifier study ended above the test set's majority class ("left the
    plateau" of the constant answer), and Fisher's exact test of each arm's count against ``reference``'s (default:
    the study's first arm) on all recorded seeds.

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
        counts[arm] = [sum(run["test"]["accuracy"] > majority for run in record["runs"]), len(record["runs"])]
    fisher = {}
    if reference in counts:
        others = [arm for arm in counts if arm != reference]
        raw = [fisher_exact_p(*counts[arm], *counts[reference]) for arm in others]
        fisher = {arm: {"p": p, "p_holm": adjusted} for arm, p, adjusted in zip(others, raw, holm(raw) if raw else [])}
    return {"outcome": "test accuracy above the test set's majority class", "reference": reference,
            "exploratory": True, "counts": counts, "fisher": fisher}


def _cell(summary: dict, name: str, digits: int) -> str:
    """``mean+-h``: the mean over seeds and the half-width of its 95% Student-t interval (``(1 seed)`` alone)."""
    if name not in summary:
        return "-"
    n = summary[name]["n"]
    if n < 2:
        return f"{summary[name]['mean']:.{digits}f} (1 seed)"
    return f"{summary[name]['mean']:.{digits}f}+-{half_width(summary[name]['std'], n):.{digits}f}"


def format_study_table(table: dict) -> str:
    """The table of :func:`study_table` as aligned text; each cell is the mean over seeds +- the half-width of its
    95% Student-t interval, as the line above the table says."""
    if table["metric"] in ("test_accuracy", "last_epoch_test_accuracy"):
        title = "test accuracy" if table["metric"] == "test_accuracy" else "last-epoch test acc."
        lines = ["mean +- 95% half-width over seeds", f"{'arm':<20} {'seeds':>5} {title:>20}"]
        lines += [f"{arm:<20} {len(s['seeds']):>5} {_cell(s, table['metric'], 4):>20}"
                  for arm, s in table["arms"].items()]
    else:
        lines = ["mean +- 95% half-width over seeds",
                 f"{'arm':<20} {'seeds':>5} {'val loss':>16} {'bits/byte':>16} {'active share':>14}"]
        lines += [f"{arm:<20} {len(s['seeds']):>5} {_cell(s, 'val_loss', 4):>16} "
                  f"{_cell(s, 'val_bits_per_byte', 4):>16} {_cell(s, 'active_share', 3):>14}"
                  for arm, s in table["arms"].items()]
    if table.get("ordering", {}).get("seeds"):
        ordering = table["ordering"]
        swaps = "; ".join(f"{a} < {b} was {b} < {a}" for a, b in ordering["swapped"])
        left_out = f"; fewer seeds, not ordered: {', '.join(ordering['left_out'])}" if ordering["left_out"] else ""
        lines.append(f"order at the last evaluation, seeds {ordering['seeds']}: {' < '.join(ordering['last'])} "
                     f"({'same as the evaluation before' if ordering['stable'] else 'before it: ' + swaps}){left_out}")
        if "told_apart" in ordering:
            n_arms = len(ordering["last"])
            told_swapped = "; ".join(f"{a} < {b}" for a, b in ordering["told_apart_swapped"])
            lines.append(f"all {n_arms * (n_arms - 1) // 2} pairs (exploratory): "
                         f"{len(ordering.get('interval_excludes_zero', []))} unadjusted intervals exclude 0, "
                         f"{len(ordering['told_apart'])} survive Holm, and "
                         f"{'swapped: ' + told_swapped if told_swapped else 'none of those swapped'}")
    for arm, d in table["paired"].items():
        label = ("exploratory" if d.get("exploratory", True) else
                 f"declared, Holm p {d['p_holm']:.3f}: {'told apart' if d['told_apart'] else 'not told apart'}")
        lines.append(f"{arm} - {table['reference']} ({table['metric']}, seeds {d['seeds']}): {d['mean']:+.4f}, "
                     f"95% CI [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}] ({label})")
    return "\n".join(lines)
