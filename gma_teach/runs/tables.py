"""The studies' tables, read from their records: per arm the summary over seeds; against a reference arm, each
arm's paired per-seed difference, labelled with its verdict when it is a declared comparison and exploratory
otherwise (what "told apart" means: ``gma_teach.runs.verdicts``); the order of the arms over training; and the
table as text. Nothing here trains.

So that ``from gma_teach.runs.tables import ...`` keeps working for every name of its ``__all__``, the names it
lists from the modules beside it are imported here too: the values read from records (``study_values``), the
declared comparisons and their findings (``verdicts``) and the exploratory analyses (``analyses``).
"""
from __future__ import annotations

import statistics

from ..stats import describe, half_width, holm, paired_difference, paired_t_p
from .analyses import context_recovered, gma_against_baselines, left_plateau
from .arm_records import load_arm
from .study_values import METRIC_PATHS, declared_metrics, metric_of, paired_on_common_seeds, seed_values
from .verdicts import (
    ALPHA,
    LOOKS,
    declared_comparisons,
    declared_looks,
    findings_summary,
    format_declared,
    study_findings,
    with_verdict,
)

__all__ = ["ALPHA", "LOOKS", "METRIC_PATHS", "context_recovered", "declared_comparisons", "declared_metrics",
           "format_declared", "format_study_table", "gma_against_baselines", "left_plateau",
           "findings_summary", "ordering_at_last_evaluations", "study_findings", "study_table", "study_tables"]


def study_table(study: dict, folder=None, *, reference: str | None = None, metric: str | None = None) -> dict:
    """What is recorded for ``study``: per arm, the summary; and for ``reference`` (default: the study's first
    arm) against every other arm, the paired per-seed difference of ``metric`` (default: bits per byte for a
    language model, test accuracy for a classifier) on their common seeds, with its interval at ``confidence``
    (0.95)."""
    metric, (part, key) = metric_of(study, metric)
    arms = {arm: load_arm(study, arm, folder) for arm in study["arms"]}
    arms = {arm: record for arm, record in arms.items() if record is not None and record["runs"]}
    reference = reference or next(iter(study["arms"]))
    summaries = {}
    for arm, record in arms.items():
        summaries[arm] = dict(record["summary"])
        values = list(seed_values(record, part, key).values())
        if metric not in summaries[arm] and values:
            summaries[arm][metric] = describe(values)
    table = {"metric": metric, "reference": reference, "confidence": 0.95, "arms": summaries, "paired": {}}
    if part == "val" and arms:
        table["ordering"] = ordering_at_last_evaluations(arms)
    if reference in arms:
        by_seed = seed_values(arms[reference], part, key)
        looks = declared_looks(study, folder, arms)
        for arm, record in arms.items():
            paired = None if arm == reference else paired_on_common_seeds(seed_values(record, part, key), by_seed)
            if paired is not None:
                table["paired"][arm] = with_verdict(paired, arm, reference, metric, looks)
    return table


def study_tables(study: dict, folder=None) -> dict:
    """Every table of :func:`study_table` worth reading for ``study``: its declared metrics, then bits per byte and
    (GMA arms) the information the routing carries for a language-model study whose records hold it, test accuracy
    (the record's, best epoch on the validation split) for a classifier, nothing more for the capacity study;
    ``{metric: table}``."""
    experiment = study.get("experiment", "lm")
    usual = (("val_bits_per_byte", *(("routing_information",) if _records_information(study, folder) else ()))
             if experiment == "lm" else () if experiment == "capacity" else ("test_accuracy",))
    metrics = dict.fromkeys((*declared_metrics(study), *usual))
    return {metric: study_table(study, folder, metric=metric) for metric in metrics}


def _records_information(study: dict, folder) -> bool:
    """Whether the records of ``study`` hold the routing information (those made before it was measured do not)."""
    arms = (load_arm(study, arm, folder) for arm in study["arms"])
    return any("information" in record["summary"] for record in arms if record is not None and record["runs"])


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
    if table["metric"] in ("test_accuracy", "last_epoch_test_accuracy") or table["metric"].startswith(
            "retrieval_accuracy_s"):
        title = {"test_accuracy": "test accuracy", "last_epoch_test_accuracy": "last-epoch test acc."}.get(
            table["metric"], f"accuracy at S={table['metric'].rsplit('_s', 1)[-1]}")
        lines = ["mean +- 95% half-width over seeds", f"{'arm':<20} {'seeds':>5} {title:>20}"]
        lines += [f"{arm:<20} {len(s['seeds']):>5} {_cell(s, table['metric'], 4):>20}"
                  for arm, s in table["arms"].items()]
    else:
        information = any("information" in s for s in table["arms"].values())  # not in the older records
        lines = ["mean +- 95% half-width over seeds" + (" (information: bits, GMA)" if information else ""),
                 f"{'arm':<24} {'seeds':>5} {'val loss':>15} {'bits/byte':>15}"
                 + (f" {'information':>12}" if information else "")]
        lines += [f"{arm:<24} {len(s['seeds']):>5} {_cell(s, 'val_loss', 4):>15} "
                  f"{_cell(s, 'val_bits_per_byte', 4):>15}" + (f" {_cell(s, 'information', 3):>12}" if information
                                                                else "")
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
