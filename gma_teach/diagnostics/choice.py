"""What each routing of a recorded routing study costs and carries, read from its saved tables (chapter 11).

:func:`arm_costs` reads a study's saved ``<study>_tables.json`` (as ``python -m gma_teach.study remedy --summary
--save`` writes it): every arm's mean validation bits per byte and routing information over the declared seeds,
and, for each arm compared with the reference, the declared comparison on each metric (mean difference, unadjusted
95% interval, Holm-adjusted p and whether it is told apart). Nothing is recomputed: the verdicts are the record's.
"""
from __future__ import annotations

__all__ = ["arm_costs", "layer_information"]

_METRICS = {"val_bits_per_byte": "bits_per_byte", "routing_information": "information"}


def arm_costs(saved: dict, *, reference: str = "default") -> list[dict]:
    """One row per arm of a saved routing study's tables, the reference first, then the arms in table order.

    Args:
        saved: the parsed ``<study>_tables.json`` (keys ``"tables"`` and ``"declared"``, and ``"second_look"``
            where the study took one, whose verdicts then stand).
        reference: the arm every other arm is compared with.

    Returns:
        ``[{"arm", "bits_per_byte", "information", "n_seeds", "bits_per_byte_vs", "information_vs"}]``: the two
        means (bits per byte; information in bits, the mean over layers and heads at the end of training), and for
        every arm but the reference the declared comparison ``arm - reference`` on each metric as ``{"mean",
        "ci95", "p_holm", "told_apart"}`` (``None`` for the reference or a comparison not declared).
    """
    if not isinstance(saved, dict) or "tables" not in saved or "declared" not in saved:
        raise TypeError("saved must be a study's parsed tables file, with 'tables' and 'declared'")
    family = (saved.get("second_look") or saved["declared"])["comparisons"]
    tables = saved["tables"]
    missing = [metric for metric in _METRICS if metric not in tables]
    if missing:
        raise ValueError(f"the saved tables lack {missing}: not a routing study's tables")
    summaries = tables["val_bits_per_byte"]["arms"]
    if reference not in summaries:
        raise ValueError(f"reference {reference!r} is not an arm of the saved tables ({sorted(summaries)})")
    arms = [reference] + [arm for arm in summaries if arm != reference]
    rows = []
    for arm in arms:
        summary = summaries[arm]
        row = {"arm": arm, "bits_per_byte": summary["val_bits_per_byte"]["mean"],
               "information": summary["information"]["mean"], "n_seeds": len(summary["seeds"])}
        for metric, name in _METRICS.items():
            found = [c for c in family if c["arm"] == arm and c["against"] == reference and c["metric"] == metric]
            row[f"{name}_vs"] = ({key: found[0][key] for key in ("mean", "ci95", "p_holm", "told_apart")}
                                 if found else None)
        rows.append(row)
    return rows


def layer_information(record: dict, layer: int) -> dict:
    """The routing information of GMA layer ``layer`` over training in a study arm's record: at initialization
    (step 0) and at every evaluation, the mean over the record's seeds of each seed's mean over heads.

    Returns:
        ``{"steps": [...], "bits": [...], "n": seeds}``; ``n`` is 0 (and the lists empty) when no run recorded it.
    """
    histories = []
    for run in record.get("runs", []):
        routing = run.get("routing") or {}
        entries = [routing.get("initial"), *routing.get("evaluations", [])]
        if not routing.get("evaluations") or "information" not in routing["evaluations"][0][layer]:
            continue
        values = [sum(entry[layer]["information"]) / len(entry[layer]["information"]) for entry in entries]
        histories.append(([0, *routing["steps"]], values))
    if not histories:
        return {"steps": [], "bits": [], "n": 0}
    steps = histories[0][0]
    kept = [values for run_steps, values in histories if run_steps == steps]
    return {"steps": steps, "bits": [sum(column) / len(kept) for column in zip(*kept)], "n": len(kept)}
