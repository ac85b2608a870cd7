"""The MQAR pilot's curves (``gma_teach.designs.MQAR_PILOT``): each arm's validation accuracy against the training
step, per kv-pair count and averaged over the counts, and whether each arm learned by the pilot's stated criterion.

Everything here reads run records (``<name>_study_<arm>_d<width>.json``, as ``gma_teach.study.load_arm`` returns
them) and trains nothing.
"""
from __future__ import annotations

from collections.abc import Mapping

from .. import _checks

LEARNED_ABOVE = 0.5
"""The pilot's criterion, the accuracy an arm must pass to have *learned*, its validation accuracy averaged over the
kv-pair counts above this at any evaluation (far above the guessing floor ``1/n``, 0.073 on average over 8, 16 and
32 pairs)."""


def _run_with_curve(arm: str, record, seed: int) -> dict:
    """The run of ``seed`` in ``record`` that carries a per-count curve (at the kept rate where several rates ran)."""
    if not isinstance(record, Mapping) or not isinstance(record.get("runs"), list):
        raise TypeError(f"records[{arm!r}] must be a run record (a mapping with a 'runs' list), got "
                        f"{type(record).__name__}")
    runs = [r for r in record["runs"] if r.get("seed") == seed]
    if record.get("chosen_lr") is not None:
        runs = [r for r in runs if r.get("lr") == record["chosen_lr"]]
    if len(runs) != 1:
        raise ValueError(f"records[{arm!r}] must hold one run of seed {seed} (at its kept rate), found {len(runs)}")
    curve = runs[0].get("curve")
    if not isinstance(curve, Mapping) or "val_by_count" not in curve:
        raise ValueError(f"records[{arm!r}]: the run of seed {seed} has no per-count validation curve "
                         "('curve' with 'val_by_count'; a design with eval_every records one)")
    if len(curve["val_by_count"]) != len(curve["steps"]) or not curve["steps"]:
        raise ValueError(f"records[{arm!r}]: the curve's steps and val_by_count differ in length or are empty")
    return runs[0]


def pilot_curves(records, *, seed: int = 0) -> dict:
    """Each arm's validation curve, read from its record.

    Args:
        records: ``{arm: record}``, each record an arm's run record at one width (JSON keys as strings or ints).
        seed: the seed whose run is read (the pilot's 0).

    Returns:
        ``{arm: {"steps": [E ints], "kv_pairs": [C ints, ascending], "by_count": {n: [E accuracies]}, "mean": [E
        means over the C counts], "pooled": [E accuracies over every query, or None], "lr", "seed", "width"}}``,
        ``E`` the evaluations and ``C`` the counts.

    Raises:
        TypeError: ``records`` is not a mapping, or a record is not a run record.
        ValueError: ``records`` is empty, or a record lacks one run of ``seed`` with a per-count curve.
    """
    if not isinstance(records, Mapping):
        raise TypeError(f"records must be a mapping of arm -> run record, got {type(records).__name__}")
    if not records:
        raise ValueError("records must hold at least one arm")
    seed = _checks.integer("seed", seed, minimum=0)
    curves = {}
    for arm, record in records.items():
        run = _run_with_curve(arm, record, seed)
        curve = run["curve"]
        points = [{int(n): float(a) for n, a in point.items()} for point in curve["val_by_count"]]
        counts = sorted(points[0])
        if any(sorted(point) != counts for point in points):
            raise ValueError(f"records[{arm!r}]: the curve's evaluations hold different kv-pair counts")
        pooled = curve.get("val_accuracy")
        curves[arm] = {"steps": [int(step) for step in curve["steps"]], "kv_pairs": counts,
                       "by_count": {n: [point[n] for point in points] for n in counts},
                       "mean": [sum(point.values()) / len(point) for point in points],
                       "pooled": [float(a) for a in pooled] if pooled and len(pooled) == len(points) else None,
                       "lr": run.get("lr"), "seed": seed, "width": run.get("width", record.get("width"))}
    return curves


def pilot_learned(records, *, threshold: float = LEARNED_ABOVE, seed: int = 0) -> dict:
    """Whether each arm learned: its validation accuracy averaged over the kv-pair counts above ``threshold`` at any
    evaluation (:data:`LEARNED_ABOVE`, the pilot's declared criterion, by default).

    Args:
        records, seed: as :func:`pilot_curves`.
        threshold: the accuracy to pass, in ``(0, 1)``.

    Returns:
        ``{arm: {"learned": bool, "first_step": the first evaluation above it (None if none), "best": the highest
        mean, "best_step", "last": the last evaluation's mean, "last_step", "by_count_last": {n: accuracy},
        "threshold"}}``.
    """
    threshold = _checks.positive_number("threshold", threshold)
    if threshold >= 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    verdicts = {}
    for arm, curve in pilot_curves(records, seed=seed).items():
        steps, means = curve["steps"], curve["mean"]
        above = [step for step, mean in zip(steps, means) if mean > threshold]
        best = max(range(len(means)), key=means.__getitem__)
        verdicts[arm] = {"learned": bool(above), "first_step": above[0] if above else None, "best": means[best],
                         "best_step": steps[best], "last": means[-1], "last_step": steps[-1],
                         "by_count_last": {n: values[-1] for n, values in curve["by_count"].items()},
                         "threshold": threshold}
    return verdicts


def pilot_sentences(records, *, threshold: float = LEARNED_ABOVE, seed: int = 0) -> list[str]:
    """One sentence per arm saying whether it learned and when, on the one seed and at the one learning rate it ran,
    every number read from the records (:func:`pilot_learned`). An arm that did not learn is said not to have
    learned *on that seed at that rate*, never that the task cannot be learned; where it ends below the guessing
    floor ``1/n`` at a kv-pair count (worse than guessing among the ``n`` values), the sentence says that this points
    to a failure to optimize at that rate, not to what its state can hold."""
    sentences = []
    curves = pilot_curves(records, seed=seed)
    for arm, v in pilot_learned(records, threshold=threshold, seed=seed).items():
        last = " / ".join(f"{a:.3f}" for a in v["by_count_last"].values())
        counts = ", ".join(str(n) for n in v["by_count_last"])
        end = f"at step {v['last_step']:,} it reached {last} at {counts} pairs"
        lr = curves[arm]["lr"]
        at = f"on seed {seed}" + (f" at learning rate {lr:g}" if lr is not None else "")
        if v["learned"]:
            sentences.append(f"{arm} learned {at}: its validation accuracy, averaged over the kv-pair counts, first "
                             f"passed {threshold:g} at step {v['first_step']:,}; {end}.")
            continue
        below = [n for n, a in v["by_count_last"].items() if a < 1 / int(n)]
        floor = ("" if not below else
                 f" It ends below the guessing floor 1/n at {', '.join(str(n) for n in below)} pairs ("
                 + ", ".join(f"1/{n} = {1 / int(n):.3f}" for n in below) + "), worse than guessing: that points to "
                 "a failure to optimize at this rate, not to what its state can hold.")
        sentences.append(f"{arm} did not learn within {v['last_step']:,} steps {at}: its validation accuracy, "
                         f"averaged over the kv-pair counts, stayed at or below {threshold:g} (best {v['best']:.3f} at "
                         f"step {v['best_step']:,}); {end}.{floor} One seed at one rate does not show that the task "
                         "cannot be learned here: that would need several rates and seeds, as the recall study "
                         "swept rates.")
    return sentences
