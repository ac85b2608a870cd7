"""The one runner of every study: an arm, seed by seed, into its record.

A study (:class:`gma_teach.designs.Study`) is resolved once per arm and width into a :class:`RunConfig`: the
experiment's preset at the study's scale with the study's pinned setting over it (the recall study pins every
size itself, and so does the capacity study), the arm's head count over the study's, the width, and the options
of the arm's mixer (``gma_teach.runs.options.arm_options``: its registry entry's defaults read from those
sizes, then the arm's own options; an option the mixer does not take is an error naming the arm). That frozen
configuration flows down unchanged: the trainer of one seed (:data:`SEED_TRAINERS`, one per experiment) builds
its model from it and from nothing else. Every trainer goes through :func:`gma_teach.train.fit` except the
capacity test's, which regresses values on a fresh batch each step and stops by its own rule
(:mod:`gma_teach.capacity`).

The runner is the same for every study: seeds already in the record are skipped, so an interrupted study continues
where it stopped; a study that sweeps learning rates (``learning_rates``) trains its first seed at each and keeps
the one with the best validation mean, the other seeds at it (the test split never chooses). Each run is claimed
before it trains (:func:`gma_teach.records.claim_run`: a run another live process holds is skipped with a line
saying so) and, once finished, written to a file of its own in the arm's run folder
(:func:`gma_teach.records.write_run`); the record, of one form for every study, is those runs merged when read
(:func:`gma_teach.runs.arm_records.read_record`). So any number of processes, on one machine or on several
sharing a folder, may run any seeds of any arms, and every finished run ends up in the record. A
chapter's live run is a one-arm study of the same runner (``gma_teach.runs.chapter_runs``), trained by
:func:`train_seed` as every seed here is.
"""
from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, SimpleNamespace

from ..capacity import fast_weight_seed
from ..designs import KMEANS_BLOCKS, Arm, Study, as_study, thawed
from ..environment import device, preset
from ..models import init_routing_means
from ..records import PROVENANCE_KEYS, claim_run, provenance, release_run, run_folder, write_record, write_run
from .arm_records import (
    chosen_lr,
    merged_record,
    read_record,
    record_path,
    record_setting,
    record_spec,
    recorded_under,
    run_name,
)
from .classification import classification_seed, listops_data, text_data
from .language_model import lm_data, lm_seed
from .options import arm_options
from .recall import recall_data, recall_seed

__all__ = ["RunConfig", "SEED_TRAINERS", "planned_runs", "resolve", "run_arm", "study_data", "train_seed"]


@dataclass(frozen=True)
class RunConfig:
    """One arm of one study at one width, resolved: what every seed of it trains with.

    Attributes:
        study: the declared study.
        arm_name, arm: the arm.
        width: the model width (``None``: the sizes' ``d_model``).
        sizes: the experiment's preset at the study's scale with the study's setting over it, and the arm's
            ``n_heads`` over the study's (read-only).
        options: the options its mixer is built with, resolved once (``gma_teach.runs.options.arm_options``,
            read-only).
    """

    study: Study
    arm_name: str
    arm: Arm
    width: int | None
    sizes: MappingProxyType
    options: MappingProxyType = field(default_factory=lambda: MappingProxyType({}))

    def namespace(self) -> SimpleNamespace:
        """The sizes as the attribute namespace the trainers read (``p.batch_size``, ...), a fresh copy."""
        return SimpleNamespace(**thawed(self.sizes))


def resolve(study: Study, arm: str, width: int | None = None) -> RunConfig:
    """``arm`` of ``study`` (a :class:`~gma_teach.designs.Study`, or a dict design,
    :func:`gma_teach.designs.as_study`) at ``width`` as a :class:`RunConfig`: the preset of the study's scale read
    once (a study without a scale pins every size), the setting over it, the width, the arm's head count over that,
    and its mixer's options (registry defaults, then the arm's).

    Raises:
        ValueError: for a width the study does not train at, a setting the preset lacks, an option the arm's mixer
            does not take, or a head count or preparation the study's trainer cannot honour (the capacity test's
            model has one head and no preparation)."""
    study = as_study(study)
    chosen = study.arm(arm)
    if study.widths and width not in study.widths:
        raise ValueError(f"width must be one of the study's widths {study.widths}, got {width!r}")
    if not study.widths and width is not None:
        raise ValueError(f"study {study.name!r} has no widths, got width {width!r}")
    if study.experiment == "capacity" and (chosen.n_heads not in (None, 1) or chosen.prepare is not None):
        raise ValueError(f"arm {arm!r} of capacity study {study.name!r} sets n_heads={chosen.n_heads!r}, "
                         f"prepare={chosen.prepare!r}; the capacity test's model has one head and no preparation")
    if study.scale is None:  # a study without a chapter's preset pins every size itself (recall, capacity)
        sizes = dict(thawed(study.setting))
    else:
        sizes = {**vars(preset(study.experiment, study.scale)), **thawed(study.setting)}
        unknown = sorted(set(study.setting) - set(vars(preset(study.experiment, study.scale))))
        if unknown:
            raise ValueError(f"study {study.name!r} pins {unknown}, which preset {study.experiment!r} does not have")
    if width is not None:
        sizes["d_model"] = width
    if chosen.n_heads is not None:
        sizes["n_heads"] = chosen.n_heads
    options = arm_options(sizes, chosen, arm)
    return RunConfig(study, arm, chosen, width, MappingProxyType(sizes), MappingProxyType(options))


def _first_blocks(config: RunConfig, data):
    """The first ``KMEANS_BLOCKS`` training inputs of a study's data, what a preparation reads."""
    if config.study.experiment == "lm":
        return data.train[:KMEANS_BLOCKS, :-1]
    if config.study.experiment == "recall":
        return data["train"].inputs[:KMEANS_BLOCKS]
    return data["train"][0][:KMEANS_BLOCKS]


def _prepare(config: RunConfig):
    """The arm's preparation as ``prepare(model, data)``, or ``None``."""
    if config.arm.prepare is None:
        return None

    def prepare(model, data):
        """Means of every GMA layer from k-means of its routing vectors on the first KMEANS_BLOCKS training
        inputs."""
        init_routing_means(model, _first_blocks(config, data).to(next(model.parameters()).device))

    return prepare


def _lm(config: RunConfig, seed: int, lr: float, data, progress: bool):
    return lm_seed(config.namespace(), config.arm.mixer, data, seed=seed, options=dict(config.options),
                   prepare=_prepare(config), progress=progress, return_model=True)


def _classification(config: RunConfig, seed: int, lr: float, data, progress: bool):
    return classification_seed(config.study.experiment, config.namespace(), config.arm.mixer, data, seed=seed,
                               options=dict(config.options), prepare=_prepare(config), progress=progress,
                               return_model=True)


def _recall(config: RunConfig, seed: int, lr: float, data, progress: bool):
    return recall_seed(config.namespace(), config.arm, lr, seed, data, progress=progress, arm_name=config.arm_name,
                       options=dict(config.options), prepare=_prepare(config), return_model=True)


def _capacity(config: RunConfig, seed: int, lr: float, data, progress: bool):
    return fast_weight_seed(config.sizes, config.arm.mixer, dict(config.options), seed, progress=progress,
                            label=config.arm_name), None  # a fresh model at every S: none to hand back


SEED_TRAINERS: dict[str, Callable] = {"lm": _lm, "listops": _classification, "text": _classification,
                                      "recall": _recall, "capacity": _capacity}
"""The pluggable part of the runner, ``experiment -> trainer(config, seed, lr, data, progress) -> (run record,
trained model)`` (the capacity test's model is ``None``: it trains one per ``S``)."""


def train_seed(config: RunConfig, seed: int, *, lr: float | None = None, data=None, command: str,
               progress: bool = False, return_model: bool = False):
    """Train one seed of a resolved arm (:func:`resolve`) with its experiment's trainer
    (``gma_teach.study.SEED_TRAINERS``): what :func:`run_arm` does for each missing seed, and what a chapter's
    live run does once (``gma_teach.runs.chapter_runs``), so that both record the same run.

    Args:
        config: the resolved arm.
        seed: the run's seed.
        lr: the learning rate (default: the sizes' ``lr``; a recall study's swept rate otherwise).
        data: the study's data (:func:`study_data`; loaded here when ``None``).
        command: the command (or call) stored in the run's provenance.
        progress: show the run's progress bar.
        return_model: also return the trained model.

    Returns:
        The run's record, stamped with ``wall_seconds``, ``cpu_seconds`` (what the run cost, whatever the
        machine's load) and ``provenance`` (:func:`gma_teach.records.provenance` taken before training, with the
        load after it); ``(record, model)`` with ``return_model``.
    """
    data = study_data(config.study) if data is None else data
    lr = config.sizes["lr"] if lr is None else lr
    origin = provenance(command, device())  # taken before training: the commit and date of the code that runs
    started, cpu_started = time.perf_counter(), time.process_time()
    run, model = SEED_TRAINERS[config.study.experiment](config, seed, lr, data, progress)
    run["wall_seconds"] = time.perf_counter() - started
    run["cpu_seconds"] = time.process_time() - cpu_started
    run["provenance"] = {**origin, "load_after": provenance(origin["command"])["load"]}
    return (run, model) if return_model else run


def _describe(run: dict, experiment: str) -> str:
    if experiment == "lm":
        return f"val loss {run['val']['loss']:.4f}, {run['val']['bits_per_byte']:.4f} bits/byte"
    if experiment == "recall":
        return f"test {run['test_mean']:.3f} (val {run['val_mean']:.3f})"
    if experiment == "capacity":
        return "retrieval " + ", ".join(f"S={n} {a:.2f}" for n, a in run["retrieval_accuracy"].items())
    return f"test accuracy {run['test']['accuracy']:.4f}"


def _new_record(config: RunConfig) -> dict:
    """An arm's empty record, one form for every study: what it is (``spec``), its resolved sizes (``config``), its
    ``width`` in a study with widths, and in a study that sweeps learning rates the ``sweep`` (the rates and the
    seed they are swept on), which the kept rate is chosen from (:func:`gma_teach.study.chosen_lr`)."""
    study = config.study
    record = {"study": study.name, "experiment": study.experiment, "arm": config.arm_name,
              "spec": config.arm.as_dict(), "scale": study.scale, "config": thawed(config.sizes), "runs": []}
    if config.width is not None:
        record["width"] = config.width
    if study.learning_rates:
        record["sweep"] = {"learning_rates": list(study.learning_rates), "lr_seed": study.seeds[0]}
    else:
        record["declared_seeds"] = list(study.seeds)
        record["complete"] = False
    return json.loads(json.dumps(record))


def _same_setting(record: dict, config: RunConfig) -> bool:
    """Whether a record on disk was made under ``config``: the same arm (:func:`record_spec`, either form of
    record) and, on every size the study pins (and, for a study that sweeps learning rates, the rates and the seed
    they are swept on), what a new record of ``config`` stores (:func:`record_setting`). A record without a spec
    (one of ``python -m gma_teach.experiments`` from before it ran studies) is of another setting."""
    spec = record_spec(record)
    if spec is None:
        return False
    stored, wanted = record_setting(record), record_setting(_new_record(config))
    pinned = [*config.study.setting, *(("learning_rates", "lr_seed") if config.study.learning_rates else ())]
    return spec == config.arm and all(stored.get(key) == wanted[key] for key in pinned)


def _plan(study: Study, seeds: tuple, record: dict) -> list[tuple[int, float | None]]:
    """``(seed, lr)`` of every run the arm needs: the first seed at every swept rate, then the other seeds at the
    kept rate (``None`` until the sweep is complete); without a sweep, each seed at the setting's rate."""
    if not study.learning_rates:
        return [(seed, None) for seed in seeds]
    first = study.seeds[0]
    return [(first, lr) for lr in study.learning_rates] + [(seed, None) for seed in seeds if seed != first]


def planned_runs(study: Study, arm: str, *, seeds=None, width: int | None = None, folder=None) -> list[tuple]:
    """The runs of ``arm`` (at ``width``) that :func:`run_arm` would still train, as ``(seed, lr)`` pairs (``lr``
    a swept rate, or ``None``), those already in the record left out; in a study that sweeps rates, the seeds
    after the sweep are listed only once the sweep is recorded (their rate is the one it keeps)."""
    study = as_study(study)
    owner, owner_arm = recorded_under(study, arm)
    record = read_record(record_path(owner, owner_arm, folder, width=width)) or {"runs": []}
    swept = bool(study.learning_rates)
    kept = chosen_lr(record) if swept and record["runs"] else None
    plan = []
    for seed, lr in _plan(study, tuple(study.seeds if seeds is None else seeds), record):
        if swept and lr is None and kept is None:
            continue
        if not _done(record, seed, lr if lr is not None else (kept if swept else None), swept):
            plan.append((seed, lr))
    return plan


def _done(record: dict, seed: int, lr: float | None, swept: bool) -> bool:
    return any(r["seed"] == seed and (not swept or r["lr"] == lr) for r in record["runs"])


def run_arm(study: Study, arm: str, *, seeds=None, width: int | None = None, folder=None, command: str | None = None,
            progress=False, data=None, path=None, on_record: Callable | None = None, runs=None) -> dict:
    """Train every run of ``arm`` (at ``width``, for a study with widths) not yet in its record, saving the record
    after each; returns the record.

    Args:
        study: a :class:`gma_teach.designs.Study` (or a dict design, :func:`gma_teach.designs.as_study`).
        arm: one of its arms.
        seeds: the seeds to run (default: the study's).
        width: the model width, one of ``study.widths`` (required when the study has widths).
        folder: where the records live (default: the results folder).
        command: the command stored in the provenance (default: this process's).
        progress: show each run's progress bar.
        data: the study's data (:func:`study_data`), to load it once for several arms.
        path: the record's file, in place of :func:`gma_teach.study.record_path`'s (``python -m
            gma_teach.experiments ... --out FILE``).
        on_record: called with a copy of the record after each run is saved.
        runs: only these runs of the plan, as ``(seed, lr)`` pairs (``lr`` a swept rate, or ``None`` for a seed
            at the setting's or the kept rate): one task of a study sent to an engine
            (``gma_teach.runs.fan_out``); default: every run of ``seeds``.
    """
    study = as_study(study)
    owner, owner_arm = recorded_under(study, arm)
    if owner is not study:
        return run_arm(owner, owner_arm, seeds=seeds if seeds is not None else study.seeds, width=width,
                       folder=folder, command=command, progress=progress, data=data, path=path, on_record=on_record,
                       runs=runs)
    if study.widths and width is None:
        raise ValueError(f"study {study.name!r} trains at widths {study.widths}: give width")
    config = resolve(study, arm, width)
    seeds = tuple(study.seeds if seeds is None else seeds)
    asked_for = path is not None  # a command's own file (``--out``): the merged record is also written there
    path = Path(path) if asked_for else record_path(study, arm, folder, width=width)
    command = command or "python -m gma_teach.study " + " ".join(sys.argv[1:])
    header = _new_record(config)
    record = read_record(path)
    if record is not None and not _same_setting(record, config):
        raise ValueError(f"{path} was recorded with another setting; move it away or use --out-dir")
    swept = bool(study.learning_rates)
    at = f" d={width}" if width is not None else ""
    trained = []  # this process's runs as they were trained, which the record it returns keeps as they are
    for seed, lr in _plan(study, seeds, record or header):
        if runs is not None and (seed, lr) not in runs:
            continue
        record = read_record(path) or header  # with every run another process has finished meanwhile
        lr = lr if lr is not None else (chosen_lr(record) if swept else config.sizes["lr"])
        if lr is None:
            print(f"{study.name} {arm}{at} seed {seed}: the learning-rate sweep on seed {study.seeds[0]} is not "
                  "finished (another process runs it); run this seed again once it is", flush=True)
            continue
        if _done(record, seed, lr, swept):
            continue
        name = run_name(seed, lr if swept else None)
        holder = claim_run(path, name, command)
        if holder is not None:
            print(f"{study.name} {arm}{at} seed {seed}: already being run by pid {holder['pid']} on "
                  f"{holder['host']} since {holder['date']}; skipped", flush=True)
            continue
        try:
            if _done(read_record(path) or header, seed, lr, swept):  # finished just before the claim was taken
                print(f"{study.name} {arm}{at} seed {seed}: already recorded -> {path}", flush=True)
                continue
            if data is None:
                data = study_data(study)
            run = train_seed(config, seed, lr=lr, data=data, progress=progress, command=command)
            entry = {key: value for key, value in header.items() if key not in ("runs", "complete")}
            write_run(path, name, {**entry, "run": run,
                                   **{key: run["provenance"][key] for key in PROVENANCE_KEYS}})
        finally:
            release_run(path, name)
        trained.append(run)
        record = merged_record(read_record(path), trained)
        if asked_for:
            write_record(path, record)
        if on_record is not None:
            on_record(copy.deepcopy(record))
        print(f"{study.name} {arm}{at} seed {seed}{f' lr {lr:g}' if swept else ''}: "
              f"{_describe(run, study.experiment)} ({run['wall_seconds']:.0f} s) -> {run_folder(path) / name}.json",
              flush=True)
    return merged_record(read_record(path) or header, trained)


def study_data(study: Study):
    """The data every arm of ``study`` trains on (loaded once per command; a capacity study draws its own from
    each run's seed, so it has none to load: ``{}``)."""
    study = as_study(study)
    if study.experiment == "capacity":
        return {}
    if study.experiment == "recall":
        return recall_data(study)
    q = resolve(study, next(iter(study.arms))).namespace()  # the data do not depend on the arm
    if study.experiment == "lm":
        return lm_data(q)
    return listops_data(q) if study.experiment == "listops" else text_data(q)
