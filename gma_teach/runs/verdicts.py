"""A study's declared comparisons and what they found: the paired t-tests of its declared family with Holm-adjusted
p-values (:func:`declared_comparisons`), the verdict on any paired difference (:func:`with_verdict`), the findings
as sentences (:func:`study_findings`, :func:`findings_summary`) and as printed lines (:func:`format_declared`).
Nothing here trains.

"Told apart" means one thing everywhere: a comparison of the study's declared primary family (``study["primary"]``,
see :mod:`gma_teach.designs`) whose paired t-test over the declared seeds has a Holm-adjusted p-value below
:data:`gma_teach.designs.ALPHA`, 0.05 (:func:`declared_comparisons`). A study with widths (the recall study)
declares its family at every width, one family over all of them. A study that declares a ``"second_look"`` (more
seeds for every arm, decided after the first look) tests the same family again over all its seeds, and pays for
looking twice at both looks: each adjusted p is doubled at the first look and at the second, so each look is tested
at 2.5% and the chance of any false "told apart" over the two together stays within 5%. Every other paired
difference a table reports carries ``"exploratory": True`` and its unadjusted ``"p"``: a result to test again, not a
finding.
"""
from __future__ import annotations

import textwrap

from ..designs import ALPHA, METRICS, metric_facts
from ..measure import PAGE_WIDTH
from ..stats import holm, paired_t_p
from .arm_records import load_arm
from .study_values import declared_metrics, metric_of, paired_on_common_seeds, seed_values

__all__ = ["ALPHA", "LOOKS", "LOWER_IS_BETTER", "declared_comparisons", "declared_looks", "findings_summary",
           "follow_on_choice", "format_declared", "rests_on_looks", "selected_arm", "study_findings", "study_selection",
           "with_verdict"]

LOOKS = 2
"""How many times a study with a declared ``"second_look"`` has been tested: its first seeds, then all of them.
The Holm-adjusted p-values of *both* looks are multiplied by it (Bonferroni over the looks: each look at
``ALPHA / LOOKS``, 2.5%), so the chance of any false "told apart" over both looks stays below
:data:`gma_teach.designs.ALPHA`. The first look was first read at 5%, before the second was declared; read again at
2.5%, every verdict it gave stands."""


def rests_on_looks(comparison: dict, looks: int) -> bool:
    """Whether a declared comparison's verdict rests on paying for a second look: its Holm p, already multiplied by
    ``looks`` (:func:`declared_comparisons`), is at least :data:`gma_teach.designs.ALPHA`, while the p before that
    multiplication is below it, so a study tested once would have told the pair apart. One scale, the multiplied p
    against :data:`gma_teach.designs.ALPHA`: a pair told apart never rests on it (its p is below ALPHA with or
    without the multiplication).

    Args:
        comparison: a declared comparison with its ``"p_holm"``.
        looks: how many looks the study declares (``declared.get("looks", 1)``).
    """
    if not isinstance(looks, int) or looks < 1:
        raise ValueError(f"looks must be a positive int, got {looks!r}")
    p_holm = comparison["p_holm"]
    return looks > 1 and ALPHA <= p_holm < 1.0 and p_holm / looks < ALPHA


def with_verdict(paired: dict, arm: str, other: str, metric: str, looks: list[dict]) -> dict:
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


def declared_comparisons(study: dict, folder=None, *, look: str = "first", _records: dict | None = None) -> dict:
    """The study's declared primary comparisons, each tested as declared: the paired t-test over the declared
    seeds (``study["seeds"]``, those recorded for both arms), two-sided, with Holm's correction over the whole
    family (every declared metric times every primary pair). A declared comparison not recorded yet (fewer than two
    common declared seeds) counts as ``p = 1`` in the correction, so a partial study never gets a smaller
    correction than the full one would.

    ``look="second"`` tests the same family as the study's declared ``"second_look"`` says: over its seeds (every
    one of them recorded for both arms, else the comparison counts as not recorded). A study that declares a second
    look pays for it at both looks: each Holm-adjusted p of either look is multiplied by the number of looks (2,
    Bonferroni over the looks, capped at 1), so each look is tested at 2.5% and the two together at 5%. A study
    without a ``"second_look"`` is tested once, at 5%, and refuses ``look="second"``.

    A study with widths declares its family at each width (the family is every width times every metric times
    every primary pair), and each comparison carries its ``"width"``; a study that sweeps learning rates is read
    at each arm's kept rate (``gma_teach.runs.study_values.seed_values``).

    Returns:
        ``{"test", "seeds", "family_size", "alpha", "comparisons": [{"arm", "against", "metric", "seeds",
        "differences", "mean", "std", "n", "ci95", "p", "p_holm", "told_apart"}]}`` and, at either look of a study
        with a second look, ``"looks": 2``; ``mean`` is ``arm - against`` and ``told_apart`` is ``p_holm < alpha``.
        A study that declares no comparison gets an empty list.
    """
    if look not in ("first", "second"):
        raise ValueError(f"look must be 'first' or 'second', got {look!r}")
    if look == "second" and "second_look" not in study:
        raise ValueError(f"look='second' needs a study that declares a second look; {study['name']!r} does not")
    widths = list(study.get("widths") or [None])
    declared = [(metric, arm, against, width) for width in widths for metric in declared_metrics(study)
                for arm, against in study.get("primary", [])]
    records = _records if _records is not None else {
        (arm, width): load_arm(study, arm, folder, width=width) for arm in study["arms"] for width in widths}
    seeds = set(study["seeds"] if look == "first" else study["second_look"]["seeds"])
    looks = LOOKS if "second_look" in study else 1
    comparisons = []
    for metric, arm, against, width in declared:
        _, (part, key) = metric_of(study, metric)
        first, second = (records.get((name, width)) if width is not None else records.get(name, records.get(
            (name, None))) for name in (arm, against))
        if first is None or second is None:
            continue
        first, second = (seed_values(record, part, key) for record in (first, second))
        paired = paired_on_common_seeds({s: v for s, v in first.items() if s in seeds},
                                        {s: v for s, v in second.items() if s in seeds})
        if paired is not None and (look == "first" or set(paired["seeds"]) == seeds):
            p = paired_t_p(paired["differences"], [0.0] * len(paired["differences"]))
            at = {"width": width} if width is not None else {}
            comparisons.append({"arm": arm, "against": against, **at, "metric": metric, **paired, "p": p})
    if comparisons:
        adjusted = holm([c["p"] for c in comparisons] + [1.0] * (len(declared) - len(comparisons)))
        for comparison, p_holm in zip(comparisons, adjusted):
            p_holm = min(1.0, looks * p_holm)
            comparison.update(p_holm=p_holm, told_apart=p_holm < ALPHA)
    test = study.get("test") if look == "first" else study["second_look"]["test"]
    if look == "first" and looks > 1:
        test = (f"{test}; each adjusted p then doubled for the {looks} looks the study declares (each look at "
                f"{ALPHA / looks:g})")
    result = {"test": test, "seeds": sorted(seeds), "family_size": len(declared), "alpha": ALPHA}
    return {**result, **({"looks": looks} if looks > 1 else {}), "comparisons": comparisons}


def selected_arm(study: dict, declared: dict, means: dict) -> dict:
    """The arm a study's declared ``selection`` rule picks from its declared comparisons.

    The rule (the remedy study's, :data:`gma_teach.designs.REMEDY_STUDY`): among the arms compared with
    ``selection["against"]``, those whose ``selection["metric"]`` is told apart better than it and whose
    ``selection["guard"]`` is not told apart worse; of these, the one with the best mean of the metric. If none
    qualifies, the comparator itself stays.

    Args:
        study: a study with a ``selection``.
        declared: its :func:`declared_comparisons`.
        means: ``arm -> mean of selection["metric"]`` over the declared seeds.

    Returns:
        ``{"arm": the pick, "qualified": [arms that passed, best first], "failed": {arm: reason}, "rule": words,
        "complete": whether every declared comparison is recorded, over every seed ``declared`` names}``.
    """
    rule = study.get("selection")
    if not rule:
        raise ValueError(f"study {study['name']!r} declares no selection rule")
    metric, guard, against = rule["metric"], rule["guard"], rule["against"]
    by_pair = {(c["arm"], c["against"], c["metric"]): c for c in declared["comparisons"]}
    qualified, failed = [], {}
    for arm, other in study["primary"]:
        if other != against:
            continue
        gain, cost = by_pair.get((arm, against, metric)), by_pair.get((arm, against, guard))
        if gain is None or cost is None:
            failed[arm] = "not recorded"
            continue
        better = (gain["mean"] < 0) if metric in LOWER_IS_BETTER else (gain["mean"] > 0)
        worse = (cost["mean"] > 0) if guard in LOWER_IS_BETTER else (cost["mean"] < 0)
        if not (gain["told_apart"] and better):
            failed[arm] = f"{metric} not told apart better than {against}"
        elif cost["told_apart"] and worse:
            failed[arm] = f"{guard} told apart worse than {against}"
        else:
            qualified.append(arm)
    qualified.sort(key=lambda name: means[name], reverse=metric not in LOWER_IS_BETTER)
    every_seed = set(declared.get("seeds", ()))
    complete = len(declared["comparisons"]) == declared["family_size"] and all(
        every_seed <= set(c.get("seeds", every_seed)) for c in declared["comparisons"])
    return {"arm": qualified[0] if qualified else against, "qualified": qualified, "failed": failed,
            "rule": rule["rule"], "complete": complete}


def study_selection(study: dict, folder=None, *, extra: tuple | None = None) -> dict:
    """:func:`selected_arm` of a study's recorded arms (under ``folder``, default the book's results), with the
    declared comparisons it read (``"declared"``) and each arm's mean of the selection metric (``"means"``) over
    the declared seeds it has.

    ``extra=(other_study, arm)`` reads the rule again with ``arm``, trained under ``other_study`` in the same setting
    (a follow-on such as ``gma_teach.designs.SLOT_FOLLOW_ONS["lm"]``), as one more arm: its record is read from
    ``other_study``'s file, the family gains its comparison with the rule's ``against`` arm on both metrics, and
    Holm runs over the widened family.

    Raises:
        ValueError: ``extra``'s study has another setting or seeds, or does not declare ``arm``; or ``arm`` is
            already an arm of ``study``.
    """
    if extra is None:
        widened, sources = study, {arm: study for arm in study["arms"]}
    else:
        other, arm = extra
        if other["setting"] != study["setting"] or tuple(other["seeds"]) != tuple(study["seeds"]):
            raise ValueError(f"extra must come from a study with {study['name']!r}'s setting and seeds, got "
                             f"{other['name']!r}")
        if arm not in other["arms"] or arm in study["arms"]:
            raise ValueError(f"extra's arm must be an arm of {other['name']!r} and not of {study['name']!r}, got "
                             f"{arm!r}")
        widened = study.with_changes(arms={**study["arms"], arm: other["arms"][arm]},
                                     primary=[*study["primary"], (arm, study["selection"]["against"])])
        sources = {**{name: study for name in study["arms"]}, arm: other}
    records = {name: load_arm(source, name, folder) for name, source in sources.items()}
    declared = declared_comparisons(widened, folder, _records=records)
    _, (part, key) = metric_of(widened, widened["selection"]["metric"])
    means = {}
    for arm, record in records.items():
        values = [] if record is None else [v for s, v in seed_values(record, part, key).items()
                                             if s in set(widened["seeds"])]
        if values:
            means[arm] = sum(values) / len(values)
    return {**selected_arm(widened, declared, means), "declared": declared, "means": means}


def follow_on_choice(study: dict, follow_on: dict, arm: str, *, cost_against: str, folder=None) -> dict:
    """Whether ``arm``, run in ``follow_on`` (a study in ``study``'s setting that compares it with some of
    ``study``'s arms, e.g. ``gma_teach.designs.SLOT_FOLLOW_ONS["lm"]`` for the remedy study), earns a place in
    ``study``'s selection rule, and what the rule then picks, as the slot-routing goal declares
    (``gma_teach.designs.SLOT_ROUTING_GOAL``):

    * ``"carries"``: in the follow-on's declared family, ``arm`` is told apart better than the rule's ``against``
      arm on the rule's metric (routing information);
    * ``"not_worse"``: it is not told apart worse than ``cost_against`` on the rule's guard (bits per byte);
    * ``"cost"``: that comparison (``arm - cost_against`` on the guard, its mean, interval and Holm p): its cost;
    * ``"selection"``: when both hold, :func:`study_selection` of ``study`` with ``arm`` as one more arm; else None.

    Returns ``{"complete": False}`` alone until every comparison of the follow-on's declared family is recorded at
    every declared seed.
    """
    rule = study["selection"]
    declared = declared_comparisons(follow_on, folder)
    every_seed = set(follow_on["seeds"])
    if len(declared["comparisons"]) < declared["family_size"] or any(
            set(c["seeds"]) != every_seed for c in declared["comparisons"]):
        return {"complete": False}
    by_pair = {(c["arm"], c["against"], c["metric"]): c for c in declared["comparisons"]}
    gain = by_pair[(arm, rule["against"], rule["metric"])]
    cost = by_pair[(arm, cost_against, rule["guard"])]
    better = gain["mean"] < 0 if rule["metric"] in LOWER_IS_BETTER else gain["mean"] > 0
    worse = cost["mean"] > 0 if rule["guard"] in LOWER_IS_BETTER else cost["mean"] < 0
    carries, not_worse = gain["told_apart"] and better, not (cost["told_apart"] and worse)
    selection = study_selection(study, folder, extra=(follow_on, arm)) if carries and not_worse else None
    return {"complete": True, "carries": carries, "not_worse": not_worse, "gain": gain, "cost": cost,
            "selection": selection}


def declared_looks(study: dict, folder, records: dict) -> list[dict]:
    """:func:`declared_comparisons` of every look the study declares (the first, and its second if any)."""
    looks = [declared_comparisons(study, folder, _records=records)]
    if "second_look" in study:
        looks.append(declared_comparisons(study, folder, look="second", _records=records))
    return looks


LOWER_IS_BETTER = tuple(name for name, facts in METRICS.items() if facts.lower_is_better)
"""Metrics for which a lower value is better (from :data:`gma_teach.designs.METRICS`); for every other, higher is."""


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
        study: a :class:`gma_teach.designs.Study` (its arms say which side is GMA).
        declared: :func:`declared_comparisons` of the study (or the ``"declared"`` of its saved table).

    Returns:
        ``{"wins": [sentence], "ties": [...], "losses": [...], "family": sentence}``; a sentence reads like
        ``"gma vs softmax, last-epoch accuracy: +3.54 points [+2.02, +5.06], Holm p 0.001"`` (subject - other,
        its 95% interval and its Holm-adjusted p-value).
    """
    found = {"wins": [], "ties": [], "losses": []}
    for comparison in declared["comparisons"]:
        metric = comparison["metric"]
        facts = metric_facts(metric)
        scale, digits, unit, name = facts.factor, facts.digits, facts.unit, facts.label
        subject, other, difference, (low, high) = _gma_first(study, comparison)
        better = difference < 0 if facts.lower_is_better else difference > 0
        group = "ties" if not comparison["told_apart"] else "wins" if better else "losses"
        at = f" (d={comparison['width']})" if comparison.get("width") is not None else ""
        found[group].append(f"{subject} vs {other}{at}, {name}: "
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
    loss (the first arm named is the GMA side, or the remedy), any verdict that rests on paying for the looks
    (:func:`rests_on_looks`: not told apart, though a study tested once would have told it apart), and the ties as
    a count with the one of the smallest adjusted p spelled out (the smallest Holm p, not the smallest gap, a tie
    broken by the unadjusted p; its interval is the unadjusted 95% one)."""
    lines = [found["family"][0].upper() + found["family"][1:] + "."]
    lines += [f"Told apart, first arm ahead: {sentence}." for sentence in found["wins"]]
    lines += [f"Told apart, first arm behind: {sentence}." for sentence in found["losses"]]
    looks = declared.get("looks", 1)
    for c in declared["comparisons"]:
        if rests_on_looks(c, looks):
            name = metric_facts(c["metric"]).label
            lines.append(f"The verdict on {c['arm']} vs {c['against']} ({name}) rests on paying for the {looks} "
                         f"looks: its Holm p is {c['p_holm']:.3f} with each p times {looks}, "
                         f"{c['p_holm'] / looks:.3f} without, so a single look would have told it apart.")
    if found["ties"]:
        ties = [c for c in declared["comparisons"] if not c["told_apart"]]
        # Holm's p ties where it caps at 1 (or where the step-down carries a larger p forward): the unadjusted p
        # breaks the tie, never the order of the list
        smallest = min(range(len(ties)), key=lambda i: (ties[i]["p_holm"], ties[i].get("p", ties[i]["p_holm"])))
        lines.append(f"Not told apart: {len(found['ties'])} comparison(s); the smallest adjusted p, "
                     f"{found['ties'][smallest]} (unadjusted 95% interval).")
    return lines


def format_declared(declared: dict, *, width: int = PAGE_WIDTH) -> list[str]:
    """Lines of at most ``width`` characters (default the book's page, :data:`gma_teach.measure.PAGE_WIDTH`):
    each declared comparison, its difference and unadjusted 95% interval (Holm adjusts the p, not the interval),
    its p, Holm's p and the verdict. A line too long for the
    page is wrapped, never cut, so a verdict is always read whole."""
    looks = declared.get("looks", 1)
    lines = [f"declared comparisons ({len(declared['comparisons'])} of {declared['family_size']} recorded), "
             f"seeds {declared['seeds'][0]}-{declared['seeds'][-1]},",
             "Holm over the family" + (f", each p x{looks} for {looks} looks:" if looks > 1 else ":"),
             "  each: mean [unadjusted 95% interval], p, Holm p"]
    for c in declared["comparisons"]:
        facts = metric_facts(c["metric"])
        scale, digits, unit, name = facts.factor, facts.digits, facts.unit, facts.label
        verdict = "told apart" if c["told_apart"] else "not told apart"
        low, high = (scale * bound for bound in c["ci95"])
        at = f" d={c['width']}" if c.get("width") is not None else ""
        lines.append(f"  {c['arm']} - {c['against']}{at} ({name}{',' + unit if unit else ''})")
        lines.append(f"    {scale * c['mean']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}] "
                     f"p {c['p']:.3f}, Holm p {c['p_holm']:.3f}: {verdict}")
    return [part for line in lines
            for part in textwrap.wrap(line, width=width, subsequent_indent=" " * (len(line) - len(line.lstrip()) + 2),
                                      break_long_words=False, drop_whitespace=True) or [""]]
