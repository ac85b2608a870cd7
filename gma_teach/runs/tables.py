"""The studies' tables, read from their records: summaries, paired differences with their intervals, the order
of the arms over training, and how much context each arm recovers. Nothing here trains."""
from __future__ import annotations

import statistics

from ..stats import mean_interval, paired_difference
from .arm_records import final_health, load_arm

__all__ = ["METRIC_PATHS", "context_recovered", "format_study_table", "gma_against_baselines",
           "ordering_at_last_evaluations", "study_table", "study_tables"]


METRIC_PATHS = {"val_bits_per_byte": ("val", "bits_per_byte"), "val_loss": ("val", "loss"),
           "val_perplexity": ("val", "perplexity"), "test_accuracy": ("test", "accuracy"),
           "active_share": ("health", "active_share"), "usage_entropy": ("health", "usage_entropy")}
"""What :func:`study_table` can pair: a run's validation or test numbers, or (GMA arms) its routing health at the
last evaluation (:func:`final_health`)."""


def _metric_of(study: dict, metric: str | None) -> tuple[str, tuple[str, str]]:
    """``metric`` (default: bits per byte for a language-model study, test accuracy for a classifier) and its
    ``(part, key)`` of :data:`METRIC_PATHS`."""
    metric = metric or ("val_bits_per_byte" if study.get("experiment", "lm") == "lm" else "test_accuracy")
    if metric not in METRIC_PATHS:
        raise ValueError(f"metric must be one of {sorted(METRIC_PATHS)}, got {metric!r}")
    return metric, METRIC_PATHS[metric]


def _run_value(run: dict, part: str, key: str):
    if part == "health":
        health = final_health(run)
        return None if health is None else health[key]
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
    table = {"metric": metric, "reference": reference, "confidence": 0.95,
             "arms": {a: r["summary"] for a, r in arms.items()}, "paired": {}}
    if part == "val" and arms:
        table["ordering"] = ordering_at_last_evaluations(arms)
    if reference in arms:
        by_seed = _seed_values(arms[reference], part, key)
        for arm, record in arms.items():
            paired = None if arm == reference else _paired_on_common_seeds(_seed_values(record, part, key), by_seed)
            if paired is not None:
                table["paired"][arm] = paired
    return table


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
    """Every table of :func:`study_table` worth reading for ``study``: bits per byte and (GMA arms) active share
    for a language-model study, test accuracy for a classifier; ``{metric: table}``."""
    metrics = (("val_bits_per_byte", "active_share") if study.get("experiment", "lm") == "lm"
               else ("test_accuracy",))
    return {metric: study_table(study, folder, metric=metric) for metric in metrics}


def gma_against_baselines(study: dict, folder=None, *, metric: str | None = None) -> dict:
    """Every GMA arm of ``study`` against every other arm (baselines and controls): the paired per-seed difference
    ``gma - other`` of ``metric`` (default as in :func:`study_table`) with its 95% t-interval, on the seeds both
    have; a pair with fewer than two common seeds is left out.

    Returns:
        ``{"metric", "pairs": {gma_arm: {other_arm: {"seeds", "differences", "mean", "std", "n", "ci95"}}}}``.
    """
    metric, (part, key) = _metric_of(study, metric)
    records = {arm: load_arm(study, arm, folder) for arm in study["arms"]}
    values = {arm: _seed_values(record, part, key) for arm, record in records.items() if record is not None}
    gma_arms = [arm for arm, spec in study["arms"].items() if spec["mixer"] == "gma" and arm in values]
    result = {"metric": metric, "pairs": {}}
    for other in (arm for arm in values if arm not in gma_arms):
        for arm in gma_arms:
            paired = _paired_on_common_seeds(values[arm], values[other])
            if paired is not None:
                result["pairs"].setdefault(arm, {})[other] = paired
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
    training, so the ordering also reports ``told_apart``: the pairs ``[a, b]`` that the seeds order at the last
    evaluation (the 95% interval of the paired per-seed difference excludes 0), and ``told_apart_swapped``: those of
    them that the evaluation before ordered the other way. An empty ``told_apart_swapped`` says that every order the
    seeds can tell has settled.

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
                "last_means": {}, "previous_means": {}, "told_apart": [], "told_apart_swapped": []}
    last, last_means = order(-1)
    previous, previous_means = order(-2)
    pairs = [[a, b] for i, a in enumerate(last) for b in last[i + 1:]]
    swapped = [pair for pair in pairs if previous.index(pair[0]) > previous.index(pair[1])]
    told_apart = []
    if len(seeds) >= 2:
        told_apart = [[a, b] for a, b in pairs
                      if paired_difference(last_values(b), last_values(a))["ci95"][0] > 0]
    return {"seeds": seeds, "last": last, "previous": previous, "stable": last == previous, "swapped": swapped,
            "left_out": left_out, "last_means": last_means, "previous_means": previous_means,
            "told_apart": told_apart, "told_apart_swapped": [pair for pair in told_apart if pair in swapped]}


def context_recovered(study: dict, folder=None, *, baseline: str = "none", full: str = "sdpa") -> dict:
    """How much of the context that full attention exploits each arm of a language-model study recovers.

    Per seed, the share :math:`(b_\text{baseline} - b_\text{arm}) / (b_\text{baseline} - b_\text{full})` of
    validation bits per byte ``b``: 0 for an arm that gains nothing over the ``baseline`` control (no mixing), 1 for
    one as good as ``full`` (causal SDPA). Computed on the seeds the arm, ``baseline`` and ``full`` have in common,
    then averaged with a 95% t-interval over those seeds (``ci95`` is ``None`` with one seed).

    Returns:
        ``{"baseline", "full", "gain": mean b_baseline - b_full over the seeds both have, "arms": {arm: {"seeds",
        "mean", "std", "n", "ci95"}}}``; arms with no seed in common are left out, and so are the two references.
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
    level = [s for s in references if low[s] == high[s]]
    if level:
        raise ValueError(f"{full} gains nothing over {baseline} at seed(s) {level} ({low[level[0]]} bits per byte "
                         f"each), so no share of that gain can be computed")
    result = {"baseline": baseline, "full": full,
              "gain": statistics.fmean(low[s] - high[s] for s in references) if references else None, "arms": {}}
    for arm in study["arms"]:
        if arm in (baseline, full):
            continue
        values = bits(arm)
        seeds = [s for s in references if s in values]
        if not seeds:
            continue
        result["arms"][arm] = {"seeds": seeds,
                               **mean_interval([(low[s] - values[s]) / (low[s] - high[s]) for s in seeds])}
    return result


def _cell(summary: dict, name: str, digits: int) -> str:
    if name not in summary:
        return "-"
    return f"{summary[name]['mean']:.{digits}f}+-{summary[name]['std']:.{digits}f}"


def format_study_table(table: dict) -> str:
    """The table of :func:`study_table` as aligned text."""
    if table["metric"] == "test_accuracy":
        lines = [f"{'arm':<20} {'seeds':>5} {'test accuracy':>16}"]
        lines += [f"{arm:<20} {len(s['seeds']):>5} {_cell(s, 'test_accuracy', 4):>16}"
                  for arm, s in table["arms"].items()]
    else:
        lines = [f"{'arm':<20} {'seeds':>5} {'val loss':>16} {'bits/byte':>16} {'active share':>14}"]
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
            lines.append(f"the seeds tell {len(ordering['told_apart'])} of {n_arms * (n_arms - 1) // 2} pairs apart, "
                         f"and {'swapped: ' + told_swapped if told_swapped else 'none of those swapped'}")
    for arm, d in table["paired"].items():
        lines.append(f"{arm} - {table['reference']} ({table['metric']}, seeds {d['seeds']}): {d['mean']:+.4f}, "
                     f"95% CI [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]")
    return "\n".join(lines)
