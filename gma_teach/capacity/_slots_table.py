"""What a capacity-form study's records say about its slots, its stopping and its primary family: the split of each
GMA arm's lost pairs into collisions, misrouted queries and blur (:func:`lost_pair_table`), each run's stopping
reason and steps (:func:`stopping_table`), how many runs of the primary family reached the step ceiling
(:func:`ceiling_count`), how many declared runs are recorded (:func:`study_progress`), the primary family with
"not yet recorded" entries where seeds are missing (:func:`primary_family`), and how far each routing got towards
the slot-routing study's declared goal and which one its rule names (:func:`slot_goal`, :func:`slot_winner`).

A capacity-form study is a :class:`gma_teach.designs.Study` whose ``experiment`` is ``"capacity"``
(:data:`gma_teach.designs.CAPACITY_STUDY`, :data:`gma_teach.designs.SLOT_ROUTING_STUDY`). Every function reads
``records``, ``{arm: record or None}`` as ``gma_teach.study.load_arm`` gives them (one record per arm, its
``"runs"`` one per seed, each with per-``S`` entries keyed by ``str(S)``). Nothing here computes a statistic: the
primary family's differences, intervals and Holm p are those of ``gma_teach.study.declared_comparisons``, the one
path that also makes ``<study>_tables.json``, passed in as ``declared``. A private module of
:mod:`gma_teach.capacity`, which exports its public names.
"""
from __future__ import annotations

import statistics
import textwrap
from collections.abc import Mapping

from ..designs import SLOT_ROUTING_GOAL, Study, metric_facts
from ._table import gma_size

__all__ = ["IMPROVING_WINDOW", "NOT_YET", "ceiling_count", "family_sizes", "format_primary_family",
           "format_stopping", "lost_pair_table", "primary_family", "slot_goal", "slot_winner", "stopping_table",
           "study_progress"]

IMPROVING_WINDOW = 5
"""How many evaluations back a run stopped at the step ceiling is read as still improving, its validation loss at
the last evaluation being below its value this many evaluations earlier (500 steps at the capacity studies' evaluation
every 100 steps), as README's capacity row reads it."""

NOT_YET = "not yet recorded"
"""The status of a declared comparison whose declared seeds are not all recorded for both of its arms."""

SPLIT_NAMES = ("lost", "collisions", "misrouted", "blur", "beyond_slots")
"""The numbers of a run's ``slots[S]["split"]`` that :func:`lost_pair_table` averages over seeds: pairs per
sequence."""

SLOT_NAMES = ("retrieved", "solitary", "agreement", "predicted_pairs")
"""The numbers of a run's ``slots[S]`` beside the split: the pairs retrieved, the keys alone in their slot, the
share of queries in their key's slot and the pairs those predict (``gma_teach.diagnostics.slot_report``)."""


def _capacity_study(study) -> Study:
    if not isinstance(study, Study):
        raise TypeError(f"study must be a gma_teach.designs.Study, got {type(study).__name__}")
    if study.experiment != "capacity":
        raise ValueError(f"study must be a capacity-form study (experiment 'capacity'), got {study.experiment!r}")
    return study


def _runs(records, arm: str) -> list[dict]:
    """The runs recorded for ``arm`` (none when its record is missing or empty), in the order of their seeds."""
    if not isinstance(records, Mapping):
        raise TypeError(f"records must map arms to records (or None), got {type(records).__name__}")
    record = records.get(arm)
    if record is None:
        return []
    if not isinstance(record, Mapping) or not isinstance(record.get("runs"), list):
        raise ValueError(f"records[{arm!r}] must be an arm's record with a list of 'runs'")
    return sorted(record["runs"], key=lambda run: run["seed"])


def family_sizes(study) -> tuple[int, ...]:
    """The ``S`` of each metric a capacity-form study declares (``retrieval_accuracy_s<S>``), in its order."""
    sizes = []
    for metric in _capacity_study(study).declared_metrics():
        facts = metric_facts(metric)
        if facts.part != "retrieval_accuracy":
            raise ValueError(f"metric {metric!r} is not a retrieval accuracy at one S")
        sizes.append(int(facts.key))
    return tuple(sizes)


def lost_pair_table(study, records) -> dict:
    """Per GMA arm of ``study`` and per ``S``, the split of its lost pairs, the mean over the seeds that recorded
    it (``run["slots"][str(S)]``, :func:`gma_teach.capacity.slot_summary`).

    Returns:
        ``{"arms": {arm: {S: {"n_pairs", "seeds", "n_seeds", "retrieved", "lost", "collisions", "misrouted",
        "blur", "beyond_slots", "solitary", "agreement", "predicted_pairs"}}}, "without_slots": [arms recorded
        whose runs hold no slot record], "not_recorded": [GMA arms with no run]}``, arms in the study's order, ``S``
        ascending; counts are pairs per sequence, ``agreement`` a share. ``collisions + misrouted + blur == lost``
        holds for each mean as for each run.
    """
    study = _capacity_study(study)
    found = {"arms": {}, "without_slots": [], "not_recorded": []}
    for arm, spec in study.arms.items():
        if gma_size(arm, spec) is None:
            continue
        runs = _runs(records, arm)
        if not runs:
            found["not_recorded"].append(arm)
            continue
        slotted = [run for run in runs if run.get("slots")]
        if not slotted:
            found["without_slots"].append(arm)
            continue
        sizes = sorted({int(n) for run in slotted for n in run["slots"]})
        table = {}
        for n in sizes:
            held = [run for run in slotted if str(n) in run["slots"]]
            entry = {"n_pairs": n, "seeds": [run["seed"] for run in held], "n_seeds": len(held)}
            for name in SPLIT_NAMES:
                entry[name] = statistics.fmean(float(run["slots"][str(n)]["split"][name]) for run in held)
            for name in SLOT_NAMES:
                entry[name] = statistics.fmean(float(run["slots"][str(n)][name]) for run in held)
            table[n] = entry
        found["arms"][arm] = table
    return found


def _improving(run: dict, n: int, window: int) -> bool | None:
    """Whether the validation loss at the last evaluation is below its value ``window`` evaluations earlier (``None``
    for a curve too short to tell)."""
    loss = run.get("curves", {}).get(str(n), {}).get("loss", [])
    if len(loss) <= window:
        return None
    return loss[-1] < loss[-1 - window]


def stopping_table(study, records, *, window: int = IMPROVING_WINDOW) -> dict:
    """Each recorded run's stopping reason and steps at every ``S`` it trained.

    Returns:
        ``{"max_steps": the study's ceiling, "runs": [{"arm", "seed", "stopped": {S: "target" | "plateau" |
        "max_steps"}, "steps": {S: int}, "improving": {S: bool or None}}], "not_recorded": [arms with no run]}``,
        runs in the order of the study's arms, then seeds; ``improving`` is read only for a run stopped at the
        ceiling (else ``None``): its loss fell over its last ``window`` evaluations.
    """
    study = _capacity_study(study)
    found = {"max_steps": int(study.setting["max_steps"]), "runs": [], "not_recorded": []}
    for arm in study.arms:
        runs = _runs(records, arm)
        if not runs:
            found["not_recorded"].append(arm)
        for run in runs:
            sizes = sorted(int(n) for n in run["stopped"])
            stopped = {n: run["stopped"][str(n)] for n in sizes}
            found["runs"].append({
                "arm": arm, "seed": run["seed"], "stopped": stopped,
                "steps": {n: int(run["steps"][str(n)]) for n in sizes},
                "improving": {n: _improving(run, n, window) if stopped[n] == "max_steps" else None
                              for n in sizes}})
    return found


def ceiling_count(study, records, *, window: int = IMPROVING_WINDOW) -> dict:
    """How many runs of the primary family reached the study's step ceiling: its arms (both sides of every
    primary pair) at its declared seeds and at the ``S`` of its family (:func:`family_sizes`), one run each.

    Returns:
        ``{"arms", "seeds", "sizes", "max_steps", "declared": arms x seeds x sizes, "recorded", "at_ceiling"
        (stopped == "max_steps"), "improving" (of those, the loss still falling over the last ``window``
        evaluations), "by_arm": {arm: {"recorded", "at_ceiling", "improving"}}}``.
    """
    study = _capacity_study(study)
    arms = list(dict.fromkeys(name for pair in study.primary for name in pair))
    sizes, seeds = family_sizes(study), set(study.seeds)
    found = {"arms": arms, "seeds": sorted(seeds), "sizes": sizes, "max_steps": int(study.setting["max_steps"]),
             "declared": len(arms) * len(seeds) * len(sizes), "recorded": 0, "at_ceiling": 0, "improving": 0,
             "by_arm": {}}
    for arm in arms:
        counts = {"recorded": 0, "at_ceiling": 0, "improving": 0}
        for run in _runs(records, arm):
            if run["seed"] not in seeds:
                continue
            for n in sizes:
                if str(n) not in run["stopped"]:
                    continue
                counts["recorded"] += 1
                if run["stopped"][str(n)] == "max_steps":
                    counts["at_ceiling"] += 1
                    counts["improving"] += bool(_improving(run, n, window))
        found["by_arm"][arm] = counts
        for key, value in counts.items():
            found[key] += value
    return found


def study_progress(study, records) -> dict:
    """How many of the runs a study declares are recorded: every primary arm at the declared seeds, every arm its
    ``exploratory`` declaration lists at the seeds it names there (one run per arm and seed, over its whole grid).

    Returns:
        ``{"declared", "recorded", "by_arm": {arm: {"declared": [seeds], "recorded": [seeds], "missing":
        [seeds]}}}``, arms in the study's order.
    """
    study = _capacity_study(study)
    exploratory = study.exploratory or {}
    found = {"declared": 0, "recorded": 0, "by_arm": {}}
    primary = {name for pair in study.primary for name in pair}
    for arm in study.arms:
        if arm in primary:
            declared = list(study.seeds)
        elif arm in tuple(exploratory.get("arms", ())):
            declared = list(exploratory.get("seeds", ()))
        else:
            continue
        recorded = sorted(run["seed"] for run in _runs(records, arm) if run["seed"] in declared)
        found["by_arm"][arm] = {"declared": declared, "recorded": recorded,
                                "missing": [seed for seed in declared if seed not in recorded]}
        found["declared"] += len(declared)
        found["recorded"] += len(recorded)
    return found


def _common_seeds(records, arm: str, against: str, n: int) -> list[int]:
    """The seeds at which both arms recorded their retrieval accuracy at ``S = n``."""
    held = [{run["seed"] for run in _runs(records, name) if str(n) in run.get("retrieval_accuracy", {})}
            for name in (arm, against)]
    return sorted(held[0] & held[1])


def primary_family(study, declared: dict, records=None) -> dict:
    """The primary family of a capacity-form study, one entry per declared comparison (each primary pair at each
    ``S`` of its family), read from ``declared``, ``gma_teach.study.declared_comparisons(study)``.

    An entry whose comparison holds every declared seed carries its numbers: ``mean`` (arm minus against), its
    unadjusted 95% interval ``ci95``, ``p``, Holm's ``p_holm`` over the family and ``told_apart``. Any other entry
    is :data:`NOT_YET`, with the seeds both arms hold (from the comparison, or from ``records`` where fewer than
    two are common) and the declared seeds still missing. While the family is incomplete, its Holm p counts every
    comparison not yet recorded as p = 1 (``declared_comparisons``), so no verdict is final.

    Returns:
        ``{"seeds", "family_size", "recorded", "complete", "test", "entries": [{"arm", "against", "metric",
        "n_pairs", "status": "recorded" or NOT_YET, "seeds", "missing", ...}]}``.
    """
    study = _capacity_study(study)
    if not isinstance(declared, Mapping) or "comparisons" not in declared:
        raise TypeError("declared must be gma_teach.study.declared_comparisons(study): a mapping with "
                        "'comparisons'")
    seeds = sorted(study.seeds)
    by_key = {(c["arm"], c["against"], c["metric"]): c for c in declared["comparisons"]}
    entries = []
    for metric, n in zip(study.declared_metrics(), family_sizes(study)):
        for arm, against in study.primary:
            comparison = by_key.get((arm, against, metric))
            held = (list(comparison["seeds"]) if comparison is not None
                    else _common_seeds(records or {}, arm, against, n))
            entry = {"arm": arm, "against": against, "metric": metric, "n_pairs": n, "seeds": held,
                     "missing": [seed for seed in seeds if seed not in held]}
            if comparison is not None and not entry["missing"]:
                entry.update(status="recorded", **{key: comparison[key] for key in
                                                   ("mean", "ci95", "p", "p_holm", "told_apart")})
            else:
                entry["status"] = NOT_YET
            entries.append(entry)
    recorded = sum(entry["status"] == "recorded" for entry in entries)
    return {"seeds": seeds, "family_size": len(entries), "recorded": recorded, "complete": recorded == len(entries),
            "test": study.test, "entries": entries}


def format_primary_family(family: dict, *, width: int = 75) -> list[str]:
    """:func:`primary_family` as lines of at most ``width`` characters, grouped by pair: at each ``S``, the
    difference (arm minus against) in its metric's units, its unadjusted 95% interval, Holm's p and the verdict,
    or :data:`NOT_YET` with the seeds held; while the family is incomplete no verdict is printed."""
    lines = [f"primary family: {family['recorded']} of {family['family_size']} comparisons recorded, seeds "
             f"{family['seeds'][0]}-{family['seeds'][-1]}; each: mean [unadjusted 95% interval], Holm p over the "
             "family"]
    if not family["complete"]:
        lines.append("Holm p provisional until every comparison is recorded: no verdict yet")
    pairs = list(dict.fromkeys((entry["arm"], entry["against"]) for entry in family["entries"]))
    for arm, against in pairs:
        entries = [entry for entry in family["entries"] if (entry["arm"], entry["against"]) == (arm, against)]
        unit = metric_facts(entries[0]["metric"]).unit.strip()
        lines.append(f"{arm} - {against}" + (f" ({unit})" if unit else "") + ":")
        for entry in entries:
            facts = metric_facts(entry["metric"])
            head = f"  S={entry['n_pairs']}:"
            if entry["status"] != "recorded":
                lines.append(f"{head} {NOT_YET} ({len(entry['seeds'])} of {len(family['seeds'])} seeds)")
                continue
            low, high = (facts.factor * bound for bound in entry["ci95"])
            verdict = ("" if not family["complete"] else
                       ", told apart" if entry["told_apart"] else ", not told apart")
            lines.append(f"{head} {facts.factor * entry['mean']:+.{facts.digits}f} [{low:+.{facts.digits}f}, "
                         f"{high:+.{facts.digits}f}], Holm p {entry['p_holm']:.2g}{verdict}")
    return [part for line in lines for part in textwrap.wrap(line, width=width, subsequent_indent="    ")]


_CODES = {"target": "t", "plateau": "p"}


def format_stopping(table: dict, *, width: int = 75) -> list[str]:
    """:func:`stopping_table` as lines of at most ``width`` characters, one per run (arm and seed): at each ``S``,
    ``cap`` for a run stopped at the ceiling (``cap-`` where its loss was no longer falling), ``t<steps>`` at the
    target loss, ``p<steps>`` by the plateau rule."""
    runs = table["runs"]
    if not runs:
        return ["no run recorded"]
    sizes = sorted({n for run in runs for n in run["stopped"]})
    label = max(len(f"{run['arm']} {run['seed']}") for run in runs)

    def code(run, n):
        if n not in run["stopped"]:
            return "-"
        if run["stopped"][n] == "max_steps":
            return {True: "cap", False: "cap-", None: "cap?"}[run["improving"][n]]
        return f"{_CODES.get(run['stopped'][n], '?')}{run['steps'][n]}"

    cell = 1 + max(5, *(len(str(n)) for n in sizes), *(len(code(run, n)) for run in runs for n in sizes))
    lines = [*textwrap.wrap(f"cap: stopped at the {table['max_steps']:,}-step ceiling, loss still falling "
                            "(cap-: not falling; cap?: too few evaluations to tell); t: target loss; p: plateau rule "
                            "(with the steps run)", width),
             f"{'arm seed':<{label}}" + "".join(f"{n:>{cell}}" for n in sizes)]
    lines += [f"{run['arm'] + ' ' + str(run['seed']):<{label}}" + "".join(f"{code(run, n):>{cell}}" for n in sizes)
              for run in runs]
    too_wide = [line for line in lines if len(line) > width]
    if too_wide:
        raise ValueError(f"the table needs {max(map(len, too_wide))} characters, more than width = {width}")
    return lines


def _goal_rule(goal) -> dict:
    if not isinstance(goal, Mapping):
        raise TypeError(f"goal must be a mapping like gma_teach.designs.SLOT_ROUTING_GOAL, got {type(goal).__name__}")
    missing = [key for key in ("share", "sizes", "against", "margin") if key not in goal]
    if missing:
        raise ValueError(f"goal lacks {', '.join(missing)}: it needs share, sizes, against and margin "
                         "(gma_teach.designs.SLOT_ROUTING_GOAL)")
    return goal


def _mean_accuracy(runs: list[dict], n: int) -> float | None:
    values = [float(run["retrieval_accuracy"][str(n)]) for run in runs if str(n) in run.get("retrieval_accuracy", {})]
    return statistics.fmean(values) if values else None


def slot_goal(study, declared: dict, records, goal: Mapping | None = None) -> dict:
    """How far each GMA arm of a capacity-form study got towards the declared goal
    (:data:`gma_teach.designs.SLOT_ROUTING_GOAL`), and whether collisions or misrouted queries remain.

    For every GMA arm, over the declared seeds it has recorded: its mean retrieval accuracy at each ``S`` of the
    family and the comparator's over the same seeds, the pairs it keeps at each ``S`` (``S`` times the accuracy)
    and, at the largest ``S`` of ``goal["sizes"]``, the mean collisions and misrouted queries per sequence
    (:func:`lost_pair_table`). A routing of the primary family gets a ``status``:

    * ``"reached"``: every comparison with ``goal["against"]`` is recorded at every declared seed
      (``declared``, ``gma_teach.study.declared_comparisons(study)``), its mean accuracy is at least
      ``goal["share"]`` at every ``S`` of ``goal["sizes"]``, and at every ``S`` of the family the lower end of
      the 95% interval of its difference from the comparator is at least ``-goal["margin"]``;
    * ``"not reached"``: recorded, and one of these fails; ``"short"`` lists each failure in words;
    * :data:`NOT_YET`: some declared seed is missing.

    Every other GMA arm is ``"exploratory"``: its numbers are shown, no test is made of them.

    Returns:
        ``{"goal", "sizes": the family's S, "at": the S the split is read at, "arms": {arm: {"status",
        "seeds", "accuracy": {S: mean}, "against": {S: the comparator's mean on those seeds}, "pairs": {S: S x
        mean}, "difference": {S: {"mean", "ci95"}} (primary arms, recorded S), "collisions", "misrouted" (None
        where no run holds the split), "short": [reasons]}}}``, arms in the study's order.
    """
    study = _capacity_study(study)
    goal = _goal_rule(SLOT_ROUTING_GOAL if goal is None else goal)
    if not isinstance(declared, Mapping) or "comparisons" not in declared:
        raise TypeError("declared must be gma_teach.study.declared_comparisons(study): a mapping with "
                        "'comparisons'")
    sizes, seeds = family_sizes(study), set(study.seeds)
    at = max(goal["sizes"])
    family = primary_family(study, declared, records)
    split = lost_pair_table(study, records)["arms"]
    against_runs = {run["seed"]: run for run in _runs(records, goal["against"])}
    primary = [arm for arm, other in study.primary if other == goal["against"]]
    found = {"goal": dict(goal), "sizes": sizes, "at": at, "arms": {}}
    for arm, spec in study.arms.items():
        if gma_size(arm, spec) is None:
            continue
        runs = [run for run in _runs(records, arm) if run["seed"] in seeds]
        paired = [against_runs[run["seed"]] for run in runs if run["seed"] in against_runs]
        entry = {"seeds": [run["seed"] for run in runs],
                 "accuracy": {n: _mean_accuracy(runs, n) for n in sizes},
                 "against": {n: _mean_accuracy(paired, n) for n in sizes}}
        entry["pairs"] = {n: None if value is None else n * value for n, value in entry["accuracy"].items()}
        cut = split.get(arm, {}).get(at)
        entry["collisions"] = None if cut is None else cut["collisions"]
        entry["misrouted"] = None if cut is None else cut["misrouted"]
        if arm not in primary:
            entry.update(status="exploratory", short=[])
            found["arms"][arm] = entry
            continue
        mine = [e for e in family["entries"] if e["arm"] == arm and e["against"] == goal["against"]]
        entry["difference"] = {e["n_pairs"]: {"mean": e["mean"], "ci95": list(e["ci95"])}
                               for e in mine if e["status"] == "recorded"}
        if any(e["status"] != "recorded" for e in mine):
            entry.update(status=NOT_YET, short=[])
            found["arms"][arm] = entry
            continue
        short = [f"S={n}: {entry['pairs'][n]:.1f} of {n} pairs, short of {goal['share']:.0%}"
                 for n in goal["sizes"] if entry["accuracy"][n] < goal["share"]]
        short += [f"S={n}: the interval reaches {low:+.3f} below {goal['against']}"
                  for n, d in entry["difference"].items() for low in [d["ci95"][0]] if low < -goal["margin"]]
        entry.update(status="not reached" if short else "reached", short=short)
        found["arms"][arm] = entry
    return found


def slot_winner(*goal_tables: dict) -> dict:
    """The routing the declared rule names from one or more of :func:`slot_goal`'s tables (the slot-routing study's
    and the balanced-assignment study's, read under one goal): of the routings that reached the goal, the one with
    the highest mean accuracy over the family's ``S``; if none reached it, the primary routing with the highest such
    mean. No winner (``"arm": None``) while any primary routing is :data:`NOT_YET`.

    Returns:
        ``{"arm", "reached": whether the winner reached the goal, "mean_accuracy": {arm: mean over the S}
        (primary routings), "complete"}``.
    """
    if not goal_tables:
        raise TypeError("slot_winner needs at least one of gma_teach.capacity.slot_goal(...)'s tables")
    for table in goal_tables:
        if not isinstance(table, Mapping) or "arms" not in table or "sizes" not in table:
            raise TypeError("each goal table must be gma_teach.capacity.slot_goal(...)'s result")
    sizes = tuple(goal_tables[0]["sizes"])
    if any(tuple(table["sizes"]) != sizes for table in goal_tables):
        raise ValueError("the goal tables must share their family's S: "
                         f"{[tuple(table['sizes']) for table in goal_tables]}")
    routings = {arm: e for table in goal_tables for arm, e in table["arms"].items() if e["status"] != "exploratory"}
    complete = bool(routings) and all(e["status"] != NOT_YET for e in routings.values())
    means = {arm: statistics.fmean(e["accuracy"][n] for n in sizes)
             for arm, e in routings.items() if all(e["accuracy"][n] is not None for n in sizes)}
    if not complete:
        return {"arm": None, "reached": False, "mean_accuracy": means, "complete": False}
    reached = [arm for arm, e in routings.items() if e["status"] == "reached"]
    pool = reached or list(routings)
    best = max(pool, key=lambda arm: means[arm])
    return {"arm": best, "reached": bool(reached), "mean_accuracy": means, "complete": True}
