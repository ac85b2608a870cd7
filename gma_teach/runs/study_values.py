"""What a study's records hold, metric by metric and seed by seed: the metrics a study declares, where each metric
sits in a run's record (:data:`METRIC_PATHS`), one arm's values by seed, and two arms paired on the seeds they have
in common. The tables (``tables``), the declared comparisons (``verdicts``) and the exploratory analyses
(``analyses``) read their numbers through these. Nothing here trains.
"""
from __future__ import annotations

from types import MappingProxyType

from ..designs import METRICS
from ..stats import paired_difference
from .arm_records import chosen_lr, final_health, record_setting

__all__ = ["METRIC_PATHS", "declared_metrics", "kept_runs", "metric_by_seed", "metric_of", "paired_on_common_seeds",
           "seed_values"]

METRIC_PATHS = MappingProxyType({name: (facts.part, facts.key) for name, facts in METRICS.items()})
"""Where each metric of :data:`gma_teach.designs.METRICS` sits in a run's record, ``name -> (part, key)``, read from
the table of metric facts; a run's validation or test numbers, (GMA arms) its routing health at the last evaluation
(:func:`final_health`), or a recall run's own ``test_mean``. ``last_epoch_test_accuracy`` is refused for a study
whose validation split is not its test split."""

_LAST_EPOCH_EXPERIMENTS = ("text",)
"""Experiments whose validation split is their test split (``gma_teach.runs.experiments.text_data``)."""


def declared_metrics(study: dict) -> tuple[str, ...]:
    """The metrics ``study`` declares (``"metric"`` or ``"metrics"``); for a study without a declaration, bits per
    byte for a language-model study and test accuracy for a classifier."""
    if hasattr(study, "declared_metrics"):
        return study.declared_metrics()
    if "metrics" in study:
        return tuple(study["metrics"])
    if "metric" in study:
        return (study["metric"],)
    return ("val_bits_per_byte",) if study.get("experiment", "lm") == "lm" else ("test_accuracy",)


def metric_of(study: dict, metric: str | None) -> tuple[str, tuple[str, str]]:
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
    if part == "run":
        return run.get(key)
    return run[part][key]


def kept_runs(record: dict) -> list[dict]:
    """The runs of one arm's record that its numbers are read from: every run, or in a record of a study that
    sweeps learning rates, the runs at the kept rate (:func:`gma_teach.study.chosen_lr`; none until
    the sweep is complete)."""
    if (record_setting(record) or {}).get("learning_rates"):
        lr = chosen_lr(record)
        return [r for r in record["runs"] if lr is not None and r["lr"] == lr]
    return list(record["runs"])


def seed_values(record: dict, part: str, key: str) -> dict:
    """``{seed: value}`` of one arm's record (its :func:`kept_runs`), leaving out seeds without the value."""
    values = {r["seed"]: _run_value(r, part, key) for r in kept_runs(record)}
    return {seed: value for seed, value in values.items() if value is not None}


def metric_by_seed(study: dict, record: dict, metric: str | None = None) -> dict:
    """``{seed: value}`` of ``metric`` in one arm's ``record`` of ``study``, by default the study's declared metric
    (:func:`declared_metrics`): the one way to read an arm's numbers. For the Text stand-in that is the last epoch's
    test accuracy (``"last_epoch_test_accuracy"``), never the record's ``test.accuracy``, whose epoch was chosen on
    the test split. Seeds without the value are left out."""
    _, (part, key) = metric_of(study, metric)
    return seed_values(record, part, key)


def paired_on_common_seeds(a: dict, b: dict) -> dict | None:
    """:func:`paired_difference` of ``a - b`` (``{seed: value}`` each) on their common seeds, with ``"seeds"``;
    ``None`` with fewer than two common seeds."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return None
    return {"seeds": common, **paired_difference([a[s] for s in common], [b[s] for s in common])}
