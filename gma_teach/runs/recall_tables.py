"""The recall study's table (chapter 12): every recorded arm at its kept learning rate, and the declared comparisons.

:func:`recall_table` reads the records that ``gma_teach.runs.recall`` writes and returns the one dict the
chapter's figures and sentences read (see its docstring). The primary comparisons are those the design declares
(:data:`gma_teach.designs.RECALL_STUDY` ``.primary``, at every width), tested by the one verdict path of every
study (:func:`gma_teach.study.declared_comparisons`): their p-values are Holm-adjusted over the *whole*
declared family, a comparison not recorded yet counting as ``p = 1``, so a partial study never gets a smaller
correction than the full one would. :func:`exploratory_comparison` pairs any two arms and says so.
"""
from __future__ import annotations

import textwrap

from .. import stats
from ..designs import RECALL_STUDY
from ..measure import PAGE_WIDTH
from .arm_records import chosen_lr, load_arm, record_path, record_setting, record_spec, study_folder
from .options import arm_options
from .verdicts import declared_comparisons


def _arm_entry(record: dict, arm: str, width: int) -> dict | None:
    """One arm at one width: its runs at the kept rate, by seed (``None`` while its sweep is incomplete), with the
    options its mixer was built with (resolved from the record's design as the runner resolved them:
    ``gma_teach.runs.options.arm_options``, the registry's defaults and then the arm's own)."""
    lr = chosen_lr(record)
    if lr is None:
        return None
    runs = sorted((r for r in record["runs"] if r["lr"] == lr), key=lambda r: r["seed"])
    counts = sorted({int(n) for r in runs for n in r["test_accuracy"]})
    spec = record_spec(record)
    options = arm_options({**record_setting(record), "d_model": width}, spec, arm)
    return {"mixer": spec.mixer, "options": options, "lr": lr,
            "seeds": [r["seed"] for r in runs], "state_bytes": runs[0]["state_bytes"],
            "test_mean": [r["test_mean"] for r in runs],
            "by_count": {n: [r["test_accuracy"][str(n)] if str(n) in r["test_accuracy"] else r["test_accuracy"][n]
                             for r in runs] for n in counts},
            "cpu_seconds": [r["cpu_seconds"] for r in runs]}


def _pair(a: dict, b: dict) -> dict | None:
    """Paired difference of the mean test accuracy of ``a`` and ``b`` on their common seeds (>= 2), with its p."""
    common = sorted(set(a["seeds"]) & set(b["seeds"]))
    if len(common) < 2:
        return None
    first = [a["test_mean"][a["seeds"].index(s)] for s in common]
    second = [b["test_mean"][b["seeds"].index(s)] for s in common]
    paired = stats.paired_difference(first, second)
    return {"difference": paired["mean"], "ci95": paired["ci95"], "p": stats.paired_t_p(first, second),
            "seeds": common}


def recall_table(folder=None, study: dict = RECALL_STUDY) -> dict:
    """The recorded recall study.

    Returns::

        {"design": {"seq_len", "vocab_size", "kv_pairs", "widths"},
         "arms": {arm: {width: {"mixer", "options", "lr", "seeds", "state_bytes", "test_mean": [per seed],
                                "by_count": {n_pairs: [per seed]}, "cpu_seconds": [per seed]}}},
         "comparisons": [{"arm", "against", "width", "metric", "difference", "ci95", "p", "p_holm", "told_apart",
                          "seeds"}],
         "family_size": the number of declared primary comparisons (all widths)}

    ``told_apart`` means the Holm-adjusted p-value is below :data:`gma_teach.designs.ALPHA`. An arm's
    ``"options"`` are those its mixer was built with: the registry's defaults read from the record's setting (GMA's
    K among them, where the arm leaves it to the setting), then the arm's own; what the readers of the table
    (:func:`gma_teach.capacity.gma_size`, the figures' :func:`gma_teach.plots.recall.arm_style`) read an arm's K
    and routing from.

    The records read are those of the study's declared arms at its declared widths (:func:`load_arm`, the lookup
    of every study), in the order of their files' names; an arm at a width without a record, or whose sweep of
    learning rates is incomplete, is left out.
    """
    folder = study_folder(folder)
    arm_widths = [(arm, int(width)) for arm in study["arms"] for width in study["widths"]]
    arms: dict = {}
    for arm, width in sorted(arm_widths, key=lambda pair: record_path(study, pair[0], folder, width=pair[1]).name):
        record = load_arm(study, arm, folder, width=width)
        entry = None if record is None else _arm_entry(record, arm, width)
        if entry is not None:
            arms.setdefault(arm, {})[width] = entry
    declared = declared_comparisons(study, folder)
    comparisons = [{"arm": c["arm"], "against": c["against"], "width": c["width"], "metric": c["metric"],
                    "difference": c["mean"], "ci95": c["ci95"], "p": c["p"], "seeds": c["seeds"],
                    "p_holm": c["p_holm"], "told_apart": c["told_apart"]} for c in declared["comparisons"]]
    design = {"seq_len": study["seq_len"], "vocab_size": study["vocab_size"], "kv_pairs": list(study["kv_pairs"]),
              "widths": list(study["widths"])}
    return {"design": design, "arms": arms, "comparisons": comparisons, "family_size": declared["family_size"]}


def exploratory_comparison(table: dict, arm: str, against: str, width: int) -> dict | None:
    """A comparison outside the declared family, paired on common seeds and *not* corrected: label it exploratory.
    ``None`` when either arm lacks the width or two common seeds."""
    entries = table["arms"]
    if width not in entries.get(arm, {}) or width not in entries.get(against, {}):
        return None
    pair = _pair(entries[arm][width], entries[against][width])
    return None if pair is None else {"arm": arm, "against": against, "width": width, "exploratory": True, **pair}


def format_recall_table(table: dict, *, width: int = PAGE_WIDTH) -> list[str]:
    """Lines of at most ``width`` characters (default the book's page, :data:`gma_teach.measure.PAGE_WIDTH`; a
    comparison too long for it is wrapped, never cut): each arm's mean test accuracy (mean over the kv counts,
    then the lowest count's and the highest's) and state bytes at each width, then the declared comparisons with
    Holm's p."""
    counts = table["design"]["kv_pairs"]
    lines = [f"{'arm':<17}{'d':>4}{'seeds':>6}{'acc':>7}{f'@{counts[0]}':>7}{f'@{counts[-1]}':>7}{'state B':>10}"]
    for arm, widths in table["arms"].items():
        for d_model, e in sorted(widths.items()):
            mean = sum(e["test_mean"]) / len(e["test_mean"])
            low, high = (sum(e["by_count"][n]) / len(e["by_count"][n]) for n in (counts[0], counts[-1]))
            lines.append(f"{arm:<17}{d_model:>4}{len(e['seeds']):>6}{mean:>7.3f}{low:>7.3f}{high:>7.3f}"
                         f"{e['state_bytes']:>10,}")
    lines += textwrap.wrap(f"declared comparisons ({len(table['comparisons'])} of {table['family_size']} "
                           "recorded), test accuracy:", width=width, break_long_words=False)
    for c in table["comparisons"]:
        verdict = "told apart" if c["told_apart"] else "not told apart"
        lines += textwrap.wrap(f"  {c['arm']} - {c['against']} d={c['width']}: {c['difference']:+.3f} "
                               f"[{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}] Holm p {c['p_holm']:.3f}, {verdict}",
                               width=width, subsequent_indent="    ", break_long_words=False)
    return lines
