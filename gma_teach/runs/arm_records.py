"""Where a study arm's record lives, reading it back and summarizing its seeds: what tables and figures read.

An arm of a study is recorded as ``<study name>_<arm>.json`` under :func:`gma_teach.records.results_folder` (or a
``folder`` given), unless the study shares the arm with another study (:func:`recorded_under`); an arm of a study
with widths (the recall study) as ``<study name>_study_<arm>_d<width>.json``, one record per width. Nothing here
trains.

A record is read merged (:func:`read_record`): the record file, where one is (every record made before the run
store, and a command's ``--out`` file), and the runs kept one file each in its run folder beside it
(:func:`gma_teach.records.run_folder`, ``<record stem>.runs/``), which is where the runner puts every run it
finishes: any number of processes may add runs to one arm and none is lost.
"""
from __future__ import annotations

import copy
import json
import os
import statistics
from collections.abc import Mapping
from pathlib import Path

from ..designs import Arm
from ..records import PROVENANCE_KEYS, read_runs, results_folder
from ..stats import describe

__all__ = ["CURVES", "chosen_lr", "final_health", "health_curve", "health_means", "load_arm", "load_speed",
           "merged_record", "read_record", "record_path", "record_setting", "record_spec", "recorded_under", "run_key",
           "run_name", "speed_path", "study_folder", "summarize_arm", "tables_path"]


def study_folder(folder=None) -> Path:
    """``folder`` as a path, or the records' folder :func:`gma_teach.records.results_folder` when ``None``."""
    return Path(folder) if folder is not None else results_folder()


def recorded_under(study: dict, arm: str) -> tuple[dict, str]:
    """The study and arm under which ``arm`` of ``study`` is trained and recorded: itself, unless ``study`` names
    another in ``shared_with``, has the same setting (``overrides``) and that study has an arm with the same spec;
    then the run is that arm's (recorded once, read by both)."""
    other = study.get("shared_with")
    if other is not None and arm in study["arms"] and other["overrides"] == study["overrides"]:
        for name, spec in other["arms"].items():
            if spec == study["arms"][arm]:
                return other, name
    return study, arm


def record_path(study: dict, arm: str, folder: str | os.PathLike | None = None, *, width: int | None = None) -> Path:
    """Where arm ``arm`` of ``study`` is recorded: ``<folder or results_folder()>/<study name>_<arm>.json``, with
    the study and arm of :func:`recorded_under`; at a ``width`` (a study with widths),
    ``<study name>_study_<arm>_d<width>.json``."""
    study, arm = recorded_under(study, arm)
    if width is not None:
        return study_folder(folder) / f"{study['name']}_study_{arm}_d{int(width)}.json"
    return study_folder(folder) / f"{study['name']}_{arm}.json"


def record_spec(record: dict) -> Arm | None:
    """The arm an arm's record was trained as, read from either form a record has: ``record["spec"]``, or
    ``record["design"]["arm"]`` (a recall record made before every study wrote one form); ``None`` for a record
    with neither (one of ``python -m gma_teach.experiments`` from before it ran studies)."""
    if not isinstance(record, Mapping):
        raise TypeError(f"record must be an arm's record (a mapping), got {type(record).__name__}")
    if "spec" in record:
        return Arm.from_spec(record["spec"])
    if "arm" in record.get("design", {}):
        return Arm.from_spec(record["design"]["arm"])
    return None


def record_setting(record: dict) -> dict | None:
    """The sizes an arm's record was trained under, read from either form a record has (``{name: value}``, as
    stored): ``record["config"]`` with, in a study that sweeps learning rates, its ``sweep`` (the
    ``learning_rates`` and their ``lr_seed``); or, in a recall record made before every study wrote that form,
    ``record["design"]`` less its ``"arm"`` (the setting with the sweep); ``None`` for a record with neither."""
    if not isinstance(record, Mapping):
        raise TypeError(f"record must be an arm's record (a mapping), got {type(record).__name__}")
    if "config" in record:
        return {**record["config"], **record.get("sweep", {})}
    if "design" in record:
        return {key: value for key, value in record["design"].items() if key != "arm"}
    return None


def chosen_lr(record: dict) -> float | None:
    """The learning rate kept for an arm of a study that sweeps rates: the best mean validation accuracy among
    the sweep on the design's first seed (``None`` until every rate of the sweep has run)."""
    setting = record_setting(record)
    sweep = [r for r in record["runs"] if r["seed"] == setting["lr_seed"]]
    if {r["lr"] for r in sweep} != set(setting["learning_rates"]):
        return None
    return max(sweep, key=lambda r: r["val_mean"])["lr"]


def final_health(run: dict) -> dict | None:
    """Means over heads of the routing health at the last evaluation of one seed's record, per layer and overall:
    ``{"active_share", "usage_entropy", "logit_spread", "per_layer": [{...}, ...]}`` (``None`` without GMA)."""
    routing = run.get("routing")
    if not routing or not routing["evaluations"]:
        return None
    return health_means(routing["evaluations"][-1])


HEALTH_NAMES = ("information", "usage_entropy", "token_entropy", "mean_max_ratio", "logit_spread", "active_share")
"""The routing-health numbers an arm's summary carries, those a record has (``information``, ``token_entropy`` and
``mean_max_ratio`` only in records made since they were measured)."""


def health_means(health: list[dict]) -> dict:
    """Means over heads (and layers) of the routing health of one evaluation (``[{name: per-head values}]`` per
    layer): ``{name: mean for each of HEALTH_NAMES the record has, "per_layer": [{...}, ...]}``."""
    names = [name for name in HEALTH_NAMES if name in health[0]]
    per_layer = [{name: statistics.fmean(layer[name]) for name in names} for layer in health]
    overall = {name: statistics.fmean(v for layer in health for v in layer[name]) for name in names}
    return {**overall, "per_layer": per_layer}


CURVES = ("information", "token_entropy", "mean_max_ratio", "active_share", "usage_entropy", "logit_spread",
          "prior", "volume", "distance", "prior_entropy",
          "floor_share", "spread_ratio")
"""What :func:`health_curve` can follow: the routing health and (records made since they were added) the spreads
of the logits' terms of :func:`gma_teach.diagnostics.routing_logit_terms`."""


def health_curve(record: dict, name: str = "active_share", *, layer: int | None = None) -> dict:
    """One routing-health number over training for an arm's record, for a figure: ``{"steps": [0, ...],
    "mean": [...], "std": [...], "n": seeds}``; step 0 is the initialization. Averaged over heads (and layers, or
    only ``layer``) within a seed, then mean and std over the seeds that have it. ``name``: one of
    ``CURVES``.
    """
    if name not in CURVES:
        raise ValueError(f"name must be one of {CURVES}, got {name!r}")
    runs = [r for r in record["runs"] if r.get("routing")]
    if not runs:
        raise ValueError(f"record {record.get('arm', '?')!r} has no routing health (not a GMA arm)")
    if any(name not in entry for r in runs for entry in r["routing"]["initial"]):
        raise ValueError(f"record {record.get('arm', '?')!r} did not track {name!r} (recorded before it was added)")

    def value(health):
        layers = health if layer is None else [health[layer]]
        return statistics.fmean(v for entry in layers for v in entry[name])

    steps = [0, *runs[0]["routing"]["steps"]]
    per_seed = [[value(r["routing"]["initial"]), *(value(h) for h in r["routing"]["evaluations"])] for r in runs]
    columns = [describe([curve[i] for curve in per_seed]) for i in range(len(steps))]
    return {"steps": steps, "mean": [c["mean"] for c in columns], "std": [c["std"] for c in columns],
            "n": len(per_seed)}


def summarize_arm(study: dict, arm: str, runs: list[dict]) -> dict:
    """Mean and std over seeds of an arm's validation loss, perplexity, bits per byte, training speed and (GMA)
    final active share, usage entropy and logit spread, overall and per layer; of a classifier's test accuracy; of a
    capacity run's retrieval accuracy at each ``S``."""
    if "retrieval_accuracy" in runs[0]:  # the capacity test
        return {"seeds": [r["seed"] for r in runs],
                "retrieval_accuracy": {n: describe([r["retrieval_accuracy"][n] for r in runs])
                                       for n in runs[0]["retrieval_accuracy"]}}
    if "test" in runs[0]:  # a classifier (ListOps, Text)
        return {"seeds": [r["seed"] for r in runs],
                "test_accuracy": describe([r["test"]["accuracy"] for r in runs]),
                "majority_baseline": runs[0]["majority_baseline"],
                "tokens_per_second": describe([r["tokens_per_second"] for r in runs])}
    summary = {"seeds": [r["seed"] for r in runs],
               "val_loss": describe([r["val"]["loss"] for r in runs]),
               "val_perplexity": describe([r["val"]["perplexity"] for r in runs]),
               "val_bits_per_byte": describe([r["val"]["bits_per_byte"] for r in runs]),
               "tokens_per_second": describe([r["tokens_per_second"] for r in runs])}
    healths = [final_health(r) for r in runs]
    if all(h is not None for h in healths):
        names = [name for name in HEALTH_NAMES if all(name in h for h in healths)]
        for name in names:
            summary[name] = describe([h[name] for h in healths])
        n_layers = len(healths[0]["per_layer"])
        summary["per_layer"] = [{name: describe([h["per_layer"][i][name] for h in healths]) for name in names}
                                for i in range(n_layers)]
    return summary


def load_arm(study: dict, arm: str, folder=None, *, width: int | None = None) -> dict | None:
    """The record of one arm (at ``width``, for a study with widths), or ``None`` if nothing is recorded yet."""
    return read_record(record_path(study, arm, folder, width=width))


def run_key(record: dict, run: dict) -> tuple:
    """What tells one run of an arm's record from another: its seed, and in a study that sweeps learning rates its
    rate too (``(seed, lr)``; ``(seed, None)`` otherwise)."""
    return (run["seed"], run.get("lr") if "sweep" in record else None)


def run_name(seed: int, lr: float | None = None) -> str:
    """The file name (without ``.json``) of one run in an arm's run folder: ``seed-3``, or ``seed-0-lr-0.001`` for
    a run of a learning-rate sweep."""
    return f"seed-{int(seed)}" if lr is None else f"seed-{int(seed)}-lr-{float(lr):g}"


def merged_record(record: dict, runs: list[dict], declared_seeds=None) -> dict:
    """``record`` with ``runs`` added (a run of the same ``run_key`` as one already there replaces it), in the
    order of seed and rate, and what depends on the runs computed again: the ``summary`` and ``complete`` (every
    one of ``declared_seeds``, or the record's own, recorded) or, in a study that sweeps rates, the ``chosen_lr``;
    the provenance keys at the top are the newest run's."""
    record = copy.deepcopy(record)
    by_key = {run_key(record, run): run for run in record["runs"]}
    by_key.update((run_key(record, run), run) for run in runs)
    record["runs"] = sorted(by_key.values(), key=lambda r: (r["seed"], r.get("lr") or 0.0))
    if not record["runs"]:
        return record
    if "sweep" in record:
        record["chosen_lr"] = chosen_lr(record)
    else:
        record["summary"] = summarize_arm(None, record.get("arm"), record["runs"])
        declared = declared_seeds if declared_seeds is not None else record.get("declared_seeds")
        if declared is not None:
            record["complete"] = set(declared) <= {r["seed"] for r in record["runs"]}
    newest = max((r for r in record["runs"] if "provenance" in r), key=lambda r: r["provenance"]["date"],
                 default=None)
    if newest is not None:
        record.update({key: newest["provenance"][key] for key in PROVENANCE_KEYS if key in newest["provenance"]})
    return record


def read_record(path: str | os.PathLike) -> dict | None:
    """The record at ``path`` merged with the runs of its run folder (:func:`merged_record`), or ``None`` if
    nothing is recorded there yet. A record file written before the run store reads as it always did."""
    path = Path(path)
    record = json.loads(path.read_text()) if path.exists() else None
    stored = read_runs(path)
    if not stored:
        return record
    if record is None:  # every run file carries the arm's header: the record is the first's with no runs
        record = {key: value for key, value in stored[0].items() if key not in ("run", *PROVENANCE_KEYS)}
        record["runs"] = []
    declared = next((entry["declared_seeds"] for entry in stored if "declared_seeds" in entry), None)
    return merged_record(record, [entry["run"] for entry in stored], declared)


def speed_path(study: dict, folder=None) -> Path:
    """Where :func:`measure_training_speed` of ``study`` is recorded: ``<folder>/<study name>_speed.json``."""
    return study_folder(folder) / f"{study['name']}_speed.json"


def load_speed(study: dict, folder=None) -> dict | None:
    """The recorded training speed of ``study``'s arms, or ``None``."""
    return read_record(speed_path(study, folder))


def tables_path(study: dict, folder=None) -> Path:
    """Where ``python -m gma_teach.study <study> --summary --save`` records :func:`study_tables`:
    ``<folder>/<study name>_tables.json`` (``<study name>_study_tables.json`` for a study with widths, whose arm
    records are ``<study name>_study_<arm>_d<width>.json``)."""
    if study.get("widths"):
        return study_folder(folder) / f"{study['name']}_study_tables.json"
    return study_folder(folder) / f"{study['name']}_tables.json"
