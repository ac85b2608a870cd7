"""Running one arm of a study, seed by seed, saving its record after every seed.

Seeds already in the record are skipped, so an interrupted study continues where it stopped. The record is written
with :func:`gma_teach.records.write_record` (atomically) after each seed.
"""
from __future__ import annotations

import sys
import time
from types import SimpleNamespace

from ..environment import device, preset
from ..models import init_routing_means
from ..records import PROVENANCE_KEYS, provenance, write_record
from .arm_records import load_arm, record_path, recorded_under, summarize_arm
from .classification import listops_data, run_classification, text_data
from .language_model import lm_data, run_lm
from .settings import KMEANS_BLOCKS, PREPARATIONS

__all__ = ["run_arm", "study_data"]


def _prepare(name: str | None):
    if name is None:
        return None
    if name not in PREPARATIONS:
        raise ValueError(f"prepare must be one of {PREPARATIONS} or None, got {name!r}")
    def prepare(model, data):
        """Means of every GMA layer from k-means of its routing vectors on the first KMEANS_BLOCKS training
        blocks."""
        blocks = data.train[:KMEANS_BLOCKS, :-1].to(next(model.parameters()).device)
        init_routing_means(model, blocks)

    return prepare


def run_arm(study: dict, arm: str, *, seeds=None, folder=None, command: str | None = None, progress=False,
            data=None) -> dict:
    """Train every seed of ``arm`` not yet in its record, saving the record after each seed; returns it."""
    if arm not in study["arms"]:
        raise ValueError(f"arm must be one of {sorted(study['arms'])}, got {arm!r}")
    owner, owner_arm = recorded_under(study, arm)
    if owner is not study:
        return run_arm(owner, owner_arm, seeds=seeds if seeds is not None else study["seeds"], folder=folder,
                       command=command, progress=progress, data=data)
    spec = dict(study["arms"][arm])
    seeds = tuple(study["seeds"] if seeds is None else seeds)
    path = record_path(study, arm, folder)
    record = load_arm(study, arm, folder)
    experiment = study.get("experiment", "lm")
    config = {**vars(preset(experiment, study["scale"])), **study["overrides"]}
    if record is None:
        record = {"study": study["name"], "arm": arm, "spec": spec, "scale": study["scale"], "config": config,
                  "runs": [], "complete": False}
    elif record["spec"] != spec or any(record["config"].get(key) != config[key] for key in study["overrides"]):
        raise ValueError(f"{path} was recorded with another setting ({record['spec']}, {record['config']}); move it "
                         "away or use --out-dir")
    overrides = dict(study["overrides"])
    setting_k = overrides.pop("n_components", None)
    n_components = spec.get("n_components", setting_k)  # an arm's K wins over the setting's
    done = {r["seed"] for r in record["runs"]}
    for seed in seeds:
        if seed in done:
            continue
        if data is None:
            data = study_data(study)
        origin = provenance(command or "python -m gma_teach.study " + " ".join(sys.argv[1:]), device())
        started, cpu_started = time.perf_counter(), time.process_time()
        if experiment == "lm":
            run = run_lm(spec["mixer"], scale_name=study["scale"], seed=seed, n_components=n_components,
                         data=data, progress=progress, gma_options=spec.get("gma_options"),
                         prepare=_prepare(spec.get("prepare")), **overrides)
        else:
            run = run_classification(experiment, spec["mixer"], scale_name=study["scale"], seed=seed,
                                     n_components=n_components, data=data, progress=progress,
                                     gma_options=spec.get("gma_options"), **overrides)
        run["wall_seconds"] = time.perf_counter() - started
        run["cpu_seconds"] = time.process_time() - cpu_started  # what the run cost, whatever the machine's load
        run["provenance"] = {**origin, "load_after": provenance(origin["command"])["load"]}
        record["runs"] = sorted([*record["runs"], run], key=lambda r: r["seed"])
        record["summary"] = summarize_arm(study, arm, record["runs"])
        record["complete"] = set(study["seeds"]) <= {r["seed"] for r in record["runs"]}
        record.update({key: origin[key] for key in PROVENANCE_KEYS})
        write_record(path, record)
        result = (f"val loss {run['val']['loss']:.4f}, {run['val']['bits_per_byte']:.4f} bits/byte"
                  if experiment == "lm" else f"test accuracy {run['test']['accuracy']:.4f}")
        print(f"{study['name']} {arm} seed {seed}: {result} ({run['wall_seconds']:.0f} s) -> {path}", flush=True)
    return record


def study_data(study: dict):
    """The data every arm of ``study`` trains on (loaded once per command)."""
    experiment = study.get("experiment", "lm")
    q = SimpleNamespace(**{**vars(preset(experiment, study["scale"])), **study["overrides"]})
    if experiment == "lm":
        return lm_data(q)
    return listops_data(q) if experiment == "listops" else text_data(q)
