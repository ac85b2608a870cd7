"""The recorded studies of Part IV, seed by seed: why GMA's routing collapses (and a remedy), and the LM comparison.

A *study* is a fixed setting (scale, preset overrides, seeds) and a list of *arms* (a mixer and its options). Each
arm's seeds are written to one JSON record under :func:`gma_teach.measure.results_folder` (``<study>_<arm>.json``)
as soon as each seed finishes, with the provenance of every seed (hardware, threads, load, date, commit, command).
Seeds already recorded are skipped, so an interrupted study continues where it stopped::

    python -m gma_teach.study collapse                    # every arm, every seed not yet recorded
    python -m gma_teach.study lm --arms sdpa gma_k64      # some arms
    python -m gma_teach.study collapse --arms default --seeds 1 --out-dir /tmp/check   # reproduce one seed
    python -m gma_teach.study lm --summary                # the table of what is recorded (and paired intervals)

Studies:

* ``collapse`` (:data:`COLLAPSE_STUDY`): the small LM (:data:`LM_SETTING`, 600 steps, GMA K=64), today's default routing
  against the remedies -- variances initialised at ``d_route`` (logits of order one at the start), means from
  k-means of the routing vectors, a usage-balancing auxiliary loss, and the first and third together -- on the
  same seeds. Read: active share of
  components, usage entropy, logit spread (at initialization and every evaluation) and validation loss / bits per
  byte.
* ``cause`` (:data:`CAUSE_STUDY`): the default and balance arms again, evaluated every 50 steps with the spread of
  each term of the routing logits (prior, volume, distance), to see when the collapse happens and what drives it.
* ``lm`` (:data:`LM_STUDY`): the same LM and steps with causal SDPA, GMA at K = 32, 64, 128 with and without the
  remedy, linear attention, Performer and the two controls ``none`` (no mixing) and ``uniform`` (a causal average
  of the past). Its GMA K=64 arms are the collapse study's runs (same setting, same seeds): an arm whose setting and
  options equal an arm of the study it names in ``shared_with`` is trained and recorded once, under that study.
* ``listops-lra`` (:data:`LISTOPS_LRA_STUDY`): ListOps at LRA's lengths (500-2000 tokens, depth 10) with a model
  small enough for a CPU; ``text`` (:data:`TEXT_STUDY`): the offline stand-in for LRA Text.
* ``init-scan`` (:data:`INIT_SCAN`, not a study of arms): the untrained LM's routing under several routing widths
  and initialisations, one record.

Every LM record reports validation **bits per byte** (tokenizer-independent) next to the per-token loss, and names
the tokenizer. :func:`paired_difference` gives, for two arms, the per-seed differences with a 95% t-interval.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from . import _checks, measure
from .environment import device, preset
from .experiments import listops_data, lm_data, run_classification, run_lm, text_data
from .layer import LM_ROUTING_REMEDY

# ---------------------------------------------------------------------------------------------------- settings
REMEDY = dict(LM_ROUTING_REMEDY)
"""The routing remedy the LM study compares against the default, the collapse study's winner
:data:`gma_teach.layer.LM_ROUTING_REMEDY`. It is the ``variance_and_balance`` arm, the only one better than the
default on both active share and bits per byte, beyond seed noise, over its three seeds."""

LM_SETTING = dict(source="stdlib", tokenizer="auto", seq_len=128, max_train_tokens=None, max_val_tokens=None,
                  compact_vocab=True, data_seed=0, d_model=128, n_layers=2, n_heads=4, d_ff=512, dropout=0.0,
                  n_components=64, n_features=64, batch_size=16, n_steps=600, eval_every=200, lr=2e-3,
                  weight_decay=0.01, warmup_fraction=0.05)
"""The small LM every LM study trains, pinned here (not read from the chapters' presets, which may change size):
the standard-library corpus in GPT-2 BPE (compacted), context 128, width 128, 2 layers, 4 heads, batch 16."""

COLLAPSE_STUDY = {
    "name": "routing_collapse",
    "scale": "small",
    "overrides": dict(LM_SETTING),
    "seeds": (0, 1, 2),
    "arms": {
        "default": {"mixer": "gma", "n_components": 64},
        "variance_d_route": {"mixer": "gma", "n_components": 64, "gma_options": {"init_variance": "d_route"}},
        "kmeans_means": {"mixer": "gma", "n_components": 64, "prepare": "kmeans"},
        "balance": {"mixer": "gma", "n_components": 64, "gma_options": {"balance_weight": 0.01}},
        "variance_and_balance": {"mixer": "gma", "n_components": 64,
                                 "gma_options": {"init_variance": "d_route", "balance_weight": 0.01}},
    },
}
"""The collapse study -- the small LM of :data:`LM_SETTING` (600 steps, evaluated every 200), GMA K=64, today's
default routing and four remedies."""

CAUSE_STUDY = {
    "name": "routing_collapse_cause",
    "scale": "small",
    "overrides": {**LM_SETTING, "eval_every": 50},
    "seeds": (0, 1, 2),
    "arms": {"default": dict(COLLAPSE_STUDY["arms"]["default"]), "balance": dict(COLLAPSE_STUDY["arms"]["balance"])},
}
"""Where the collapse happens and which term of the routing logits drives it. The collapse study's default and
balance arms, evaluated every 50 steps (the routing health and
:func:`gma_teach.diagnostics.routing_logit_terms` at every evaluation). Evaluating more often does not change the
training (the batches come from their own generator), so step 600 repeats the collapse study's run of the same seed."""

LM_STUDY = {
    "name": "lm_study",
    "scale": "small",
    "overrides": dict(LM_SETTING),
    "shared_with": COLLAPSE_STUDY,
    "seeds": (0, 1, 2),
    "arms": {
        "sdpa": {"mixer": "sdpa"},
        **{f"gma_k{k}": {"mixer": "gma", "n_components": k} for k in (32, 64, 128)},
        **{f"gma_k{k}_remedy": {"mixer": "gma", "n_components": k, "gma_options": dict(REMEDY)}
           for k in (32, 64, 128)},
        "linear": {"mixer": "linear"},
        "performer": {"mixer": "performer"},
        "none": {"mixer": "none"},
        "uniform": {"mixer": "uniform"},
    },
}
"""The LM comparison -- :data:`LM_SETTING` (600 steps, evaluated every 200), 3 seeds per arm.

Why 600 steps: a step reads 16 x 128 GPT-2 tokens, about 7,300 bytes of text (3.6 bytes a token), so 600 steps
read about 4.4 MB, as much text as 2,400 steps of a byte-level model of the same size. On one CPU core a step takes
about one second (the 13,002-way output layer is most of it), so a run takes 10-12 minutes. Whether the arms'
order has settled is measured, not assumed: :func:`ordering_at_last_evaluations` compares steps 400 and 600."""

LISTOPS_LRA_STUDY = {
    "name": "listops_lra",
    "experiment": "listops",
    "scale": "small",
    "overrides": {"max_depth": 10, "min_length": 500, "max_length": 2000, "n_train": 4000, "n_val": 200,
                  "n_test": 500, "d_model": 64, "n_layers": 2, "n_heads": 4, "d_ff": 128, "n_components": 32,
                  "batch_size": 16, "epochs": 3, "lr": 2e-3, "length_buckets": 8},
    "seeds": (0, 1, 2),
    "arms": {"gma": {"mixer": "gma"}, "sdpa": {"mixer": "sdpa"}, "linear": {"mixer": "linear"},
             "performer": {"mixer": "performer"}, "gma_remedy": {"mixer": "gma", "gma_options": dict(REMEDY)}},
}
"""ListOps at LRA's lengths on a CPU -- LRA's generator (depth 10, 500 < length < 2000) with 4,000 trees (LRA:
96,000), 3 epochs (750 steps of 16) and a 2-layer width-64 encoder; the chapter's live ListOps setting (preset
``listops``, lengths 50-256) stays short.

Softmax attention is the ``sdpa`` arm: the same function as ``softmax``, through PyTorch's fused kernel instead of
an explicit N x N matrix. Batches hold trees of similar length (``length_buckets=8``), each cut after its longest
tree: the trees range from 500 to 2,000 tokens, and a batch padded to the split's longest would spend much of its
time on padding (quadratically so for softmax). ``gma_remedy`` is GMA with the language
model's routing remedy (:data:`REMEDY`), to see whether the collapse fix matters on a long classification task."""

TEXT_STUDY = {
    "name": "text_standin",
    "experiment": "text",
    "scale": "small",
    "overrides": {},
    "seeds": tuple(range(10)),
    "arms": {"gma": {"mixer": "gma"}, "softmax": {"mixer": "softmax"}, "linear": {"mixer": "linear"},
             "gma_variance_d_route": {"mixer": "gma", "gma_options": {"init_variance": "d_route"}},
             "gma_balance": {"mixer": "gma", "gma_options": {"balance_weight": 0.01}}},
}
"""The offline stand-in for LRA Text (standard-library docstring -> package, byte-level; preset ``text`` at
``small``), labelled as a stand-in in every record; IMDb stays the ``full`` path for readers with the hub. A run
takes half a minute (GMA, linear) to two minutes (softmax) on one core, so every arm gets 10 seeds, and the two
routing remedies of the collapse study are tried on a bidirectional encoder as well."""

STUDIES = {"collapse": COLLAPSE_STUDY, "cause": CAUSE_STUDY, "lm": LM_STUDY, "listops-lra": LISTOPS_LRA_STUDY,
           "text": TEXT_STUDY}
PREPARATIONS = ("kmeans",)


# ------------------------------------------------------------------------------------------------- statistics
_T_975 = (12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157, 2.228139,
          2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922, 2.093024, 2.085963,
          2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831, 2.048407, 2.045230, 2.042272)
"""Student's t 0.975 quantiles for 1..30 degrees of freedom (two-sided 95% intervals)."""


def t_quantile_975(dof: int) -> float:
    """The 0.975 quantile of Student's t with ``dof`` degrees of freedom (exact table to 30, then the
    Cornish-Fisher expansion around the normal quantile, accurate to 1e-4 beyond)."""
    dof = _checks.integer("dof", dof, minimum=1)
    if dof <= len(_T_975):
        return _T_975[dof - 1]
    z = 1.959963984540054
    return (z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * dof ** 3))


def paired_difference(a, b) -> dict:
    """Per-seed differences ``a[i] - b[i]`` of two arms measured on the same seeds, with a 95% t-interval.

    Args:
        a, b: sequences of equal length n >= 2 (the metric of each seed, in the same seed order).

    Returns:
        ``{"differences", "mean", "std" (sample), "n", "ci95": [low, high]}``; the interval is
        ``mean +- t_{0.975, n-1} std / sqrt(n)``. An interval that excludes 0 says the sign of the difference holds
        beyond seed-to-seed noise (at this n, assuming roughly normal differences).
    """
    a, b = [float(x) for x in a], [float(x) for x in b]
    if len(a) != len(b):
        raise ValueError(f"a and b must have one value per seed each, got {len(a)} and {len(b)}")
    if len(a) < 2:
        raise ValueError(f"a paired interval needs at least 2 seeds, got {len(a)}")
    differences = [x - y for x, y in zip(a, b)]
    return {"differences": differences, **mean_interval(differences)}


def mean_interval(values) -> dict:
    """``{"mean", "std" (sample), "n", "ci95"}`` of ``values``: the 95% t-interval ``mean +- t_{0.975, n-1} std /
    sqrt(n)``, or ``None`` for one value."""
    summary = mean_std(values)
    if summary["n"] < 2:
        return {**summary, "ci95": None}
    half = t_quantile_975(summary["n"] - 1) * summary["std"] / math.sqrt(summary["n"])
    return {**summary, "ci95": [summary["mean"] - half, summary["mean"] + half]}


def mean_std(values) -> dict:
    """``{"mean", "std" (sample; 0 for one value), "n"}`` of ``values``."""
    values = [float(v) for v in values]
    if not values:
        raise ValueError("mean_std needs at least one value")
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
            "n": len(values)}


def fisher_exact_p(hits_a: int, runs_a: int, hits_b: int, runs_b: int) -> float:
    """Two-sided p-value of Fisher's exact test: do two arms reach an outcome (say, leaving a plateau) in
    ``hits_a`` of ``runs_a`` and ``hits_b`` of ``runs_b`` seeds at different rates?

    A t-interval suits a metric that varies smoothly from seed to seed. When every seed either reaches an outcome or
    does not, the count is what to compare. Given the total number of hits, ``hits_a`` follows a hypergeometric
    law if both arms share one rate. The p-value adds the probabilities of every split no more likely than the one
    observed (scipy's convention). A p-value below 0.05 tells the rates apart at the 5% level.
    """
    for name, value in (("runs_a", runs_a), ("runs_b", runs_b)):
        _checks.integer(name, value, minimum=1)
    _checks.integer("hits_a", hits_a, minimum=0, maximum=runs_a)
    _checks.integer("hits_b", hits_b, minimum=0, maximum=runs_b)
    hits = hits_a + hits_b

    splits = range(max(0, hits - runs_b), min(runs_a, hits) + 1)  # the possible hits of arm a
    probability = {x: math.comb(runs_a, x) * math.comb(runs_b, hits - x) / math.comb(runs_a + runs_b, hits)
                   for x in splits}
    observed = probability[hits_a]
    return min(1.0, sum(p for p in probability.values() if p <= observed * (1 + 1e-7)))


# ------------------------------------------------------------------------------------------------- one arm
def _folder(folder) -> Path:
    return Path(folder) if folder is not None else measure.results_folder()


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


def record_path(study: dict, arm: str, folder: str | os.PathLike | None = None) -> Path:
    """Where arm ``arm`` of ``study`` is recorded: ``<folder or results_folder()>/<study name>_<arm>.json``, with
    the study and arm of :func:`recorded_under`."""
    study, arm = recorded_under(study, arm)
    return _folder(folder) / f"{study['name']}_{arm}.json"


KMEANS_BLOCKS = 16
"""Training blocks whose routing vectors the ``kmeans`` preparation clusters (16 x 128 tokens at ``small``)."""


def _prepare(name: str | None):
    if name is None:
        return None
    if name not in PREPARATIONS:
        raise ValueError(f"prepare must be one of {PREPARATIONS} or None, got {name!r}")
    from .models import init_routing_means

    def prepare(model, data):
        """Means of every GMA layer from k-means of its routing vectors on the first KMEANS_BLOCKS training
        blocks."""
        blocks = data.train[:KMEANS_BLOCKS, :-1].to(next(model.parameters()).device)
        init_routing_means(model, blocks)

    return prepare


def final_health(run: dict) -> dict | None:
    """Means over heads of the routing health at the last evaluation of one seed's record, per layer and overall:
    ``{"active_share", "usage_entropy", "logit_spread", "per_layer": [{...}, ...]}`` (``None`` without GMA)."""
    routing = run.get("routing")
    if not routing or not routing["evaluations"]:
        return None
    return _health_means(routing["evaluations"][-1])


def _health_means(health: list[dict]) -> dict:
    names = ("active_share", "usage_entropy", "logit_spread")
    per_layer = [{name: statistics.fmean(layer[name]) for name in names} for layer in health]
    overall = {name: statistics.fmean(v for layer in health for v in layer[name]) for name in names}
    return {**overall, "per_layer": per_layer}


CURVES = ("active_share", "usage_entropy", "logit_spread", "prior", "volume", "distance", "prior_entropy",
          "floor_share", "spread_ratio")
"""What :func:`health_curve` can follow: the routing health and (records made since they were added) the spreads
of the logits' terms of :func:`gma_teach.diagnostics.routing_logit_terms`."""


def health_curve(record: dict, name: str = "active_share", *, layer: int | None = None) -> dict:
    """One routing-health number over training for an arm's record, for a figure: ``{"steps": [0, ...],
    "mean": [...], "std": [...], "n": seeds}``; step 0 is the initialization. Averaged over heads (and layers, or
    only ``layer``) within a seed, then mean and std over the seeds that have it. ``name``: one of
    :data:`CURVES`.
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
    columns = [mean_std([curve[i] for curve in per_seed]) for i in range(len(steps))]
    return {"steps": steps, "mean": [c["mean"] for c in columns], "std": [c["std"] for c in columns],
            "n": len(per_seed)}


def summarize(study: dict, arm: str, runs: list[dict]) -> dict:
    """Mean and std over seeds of an arm's validation loss, perplexity, bits per byte, training speed and (GMA)
    final active share, usage entropy and logit spread, overall and per layer."""
    if "test" in runs[0]:  # a classifier (ListOps, Text)
        return {"seeds": [r["seed"] for r in runs],
                "test_accuracy": mean_std([r["test"]["accuracy"] for r in runs]),
                "majority_baseline": runs[0]["majority_baseline"],
                "tokens_per_second": mean_std([r["tokens_per_second"] for r in runs])}
    summary = {"seeds": [r["seed"] for r in runs],
               "val_loss": mean_std([r["val"]["loss"] for r in runs]),
               "val_perplexity": mean_std([r["val"]["perplexity"] for r in runs]),
               "val_bits_per_byte": mean_std([r["val"]["bits_per_byte"] for r in runs]),
               "tokens_per_second": mean_std([r["tokens_per_second"] for r in runs])}
    healths = [final_health(r) for r in runs]
    if all(h is not None for h in healths):
        for name in ("active_share", "usage_entropy", "logit_spread"):
            summary[name] = mean_std([h[name] for h in healths])
        n_layers = len(healths[0]["per_layer"])
        summary["per_layer"] = [{name: mean_std([h["per_layer"][i][name] for h in healths])
                                 for name in ("active_share", "usage_entropy", "logit_spread")}
                                for i in range(n_layers)]
    return summary


def load_arm(study: dict, arm: str, folder=None) -> dict | None:
    """The record of one arm, or ``None`` if nothing is recorded yet."""
    path = record_path(study, arm, folder)
    return json.loads(path.read_text()) if path.exists() else None


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
        origin = measure.provenance(command or "python -m gma_teach.study " + " ".join(sys.argv[1:]), device())
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
        run["provenance"] = {**origin, "load_after": measure.provenance(origin["command"])["load"]}
        record["runs"] = sorted([*record["runs"], run], key=lambda r: r["seed"])
        record["summary"] = summarize(study, arm, record["runs"])
        record["complete"] = set(study["seeds"]) <= {r["seed"] for r in record["runs"]}
        record.update({key: origin[key] for key in measure.PROVENANCE_KEYS})
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        temporary.write_text(json.dumps(record, indent=1, default=str) + "\n")
        temporary.replace(path)
        result = (f"val loss {run['val']['loss']:.4f}, {run['val']['bits_per_byte']:.4f} bits/byte"
                  if experiment == "lm" else f"test accuracy {run['test']['accuracy']:.4f}")
        print(f"{study['name']} {arm} seed {seed}: {result} ({run['wall_seconds']:.0f} s) -> {path}", flush=True)
    return record


def _namespace(config: dict):
    from types import SimpleNamespace

    return SimpleNamespace(**config)


def study_data(study: dict):
    """The data every arm of ``study`` trains on (loaded once per command)."""
    experiment = study.get("experiment", "lm")
    q = _namespace({**vars(preset(experiment, study["scale"])), **study["overrides"]})
    if experiment == "lm":
        return lm_data(q)
    return listops_data(q) if experiment == "listops" else text_data(q)


# ----------------------------------------------------------------------------------------------- training speed
def measure_training_speed(study: dict, *, steps: int = 3, repeat: int = 3, warmup: int = 1, data=None) -> dict:
    """Training throughput of every arm of a language-model study, measured in one process so that the arms can
    be compared: each arm's model (built as its runs build it) trains ``steps`` steps of :func:`~gma_teach.train.fit`
    per call, the arms interleaved, on one thread, and the fastest of ``repeat`` calls is kept
    (:func:`gma_teach.measure.compare_timings`). The seeds' own ``tokens_per_second`` were measured on whatever
    load the machine had while each ran; these are the numbers to compare.

    Returns:
        ``{"steps_per_call", "tokens_per_step", "seconds_per_step": {arm: s}, "tokens_per_second": {arm: ...}}``.
    """
    from .experiments import build_lm
    from .train import fit

    if study.get("experiment", "lm") != "lm":
        raise ValueError(f"study must be a language-model study, got experiment {study.get('experiment')!r}")
    steps = _checks.positive_int("steps", steps)
    data = data if data is not None else study_data(study)
    q = _namespace({**vars(preset("lm", study["scale"])), **study["overrides"]})
    blocks = data.train[: q.batch_size * steps]

    def one_call(model):
        return lambda: fit(model, blocks, steps=steps, lr=q.lr, weight_decay=q.weight_decay, batch_size=q.batch_size,
                           task="lm", progress=False, seed=0)

    calls = {}
    for arm, spec in study["arms"].items():
        torch.manual_seed(0)
        model = build_lm(q, spec["mixer"], data.tokenizer.n_vocab, n_components=spec.get("n_components"),
                         gma_options=spec.get("gma_options"))
        calls[arm] = one_call(model)
    seconds = measure.compare_timings(calls, repeat=repeat, warmup=warmup, threads=1)
    tokens_per_step = q.batch_size * q.seq_len
    return {"steps_per_call": steps, "tokens_per_step": tokens_per_step,
            "seconds_per_step": {arm: t / steps for arm, t in seconds.items()},
            "tokens_per_second": {arm: tokens_per_step * steps / t for arm, t in seconds.items()}}


def speed_path(study: dict, folder=None) -> Path:
    """Where :func:`measure_training_speed` of ``study`` is recorded: ``<folder>/<study name>_speed.json``."""
    return _folder(folder) / f"{study['name']}_speed.json"


def load_speed(study: dict, folder=None) -> dict | None:
    """The recorded training speed of ``study``'s arms, or ``None``."""
    path = speed_path(study, folder)
    return json.loads(path.read_text()) if path.exists() else None


# ------------------------------------------------------------------------------------------ initial routing
INIT_SCAN = {
    "name": "routing_collapse_init",
    "scale": "small",
    "seeds": (0, 1, 2),
    "n_blocks": 8,
    "settings": {
        **{f"d_route={d}": {"d_route": d} for d in (8, 16, 32, 64)},
        **{f"d_route={d}, init_variance=d_route": {"d_route": d, "init_variance": "d_route"} for d in (8, 16, 32, 64)},
        "d_route=32, init_mean_std=0.5": {"d_route": 32, "init_mean_std": 0.5},
    },
}
"""The logit-scale scan -- the untrained small LM (K=64) under several routing widths and initialisations."""


def scan_initial_routing(scan: dict = INIT_SCAN, *, command: str | None = None) -> dict:
    """Routing health of the *untrained* LM of ``scan["scale"]`` (GMA, the preset's K) on the first
    ``scan["n_blocks"]`` validation blocks, for each setting (extra GMA options) and seed: whether the routing is
    near one-hot before any training, and how that scales with ``d_route`` and the initial variances.

    Returns a JSON-ready record: per setting, the health of every seed (per layer and head), the means over
    layers, heads and seeds, and the spread (std) of the routing vectors' coordinates.
    """
    from .environment import seed_everything
    from .experiments import build_lm

    p = preset("lm", scan["scale"])
    origin = measure.provenance(command or "python -m gma_teach.study init-scan", device())
    data = lm_data(p)
    tokens = data.val[:scan["n_blocks"], :-1].to(device())
    settings = {}
    for name, options in scan["settings"].items():
        per_seed = []
        for seed in scan["seeds"]:
            seed_everything(seed)
            model = build_lm(p, "gma", data.tokenizer.n_vocab, gma_options=options).to(device()).eval()
            health = _health_means_with_layers(model, tokens)
            per_seed.append({"seed": seed, **health})
        settings[name] = {"options": options, "seeds": per_seed,
                          **{key: mean_std([r[key] for r in per_seed])
                             for key in ("active_share", "usage_entropy", "logit_spread", "routing_std")}}
    return {"study": scan["name"], "scale": scan["scale"], "n_components": p.n_components,
            "tokens": int(tokens.numel()), "settings": settings, "tokenizer": data.tokenizer.name, **origin}


@torch.no_grad()
def _health_means_with_layers(model, tokens) -> dict:
    from . import diagnostics

    health = diagnostics.routing_health(model, tokens)
    stds = []

    def hook(layer, args):
        stds.append(float(layer.q_proj(args[0]).std()))

    handles = [layer.register_forward_pre_hook(hook) for layer in diagnostics.gma_layers(model)]
    try:
        model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return {**_health_means(health), "routing_std": statistics.fmean(stds), "per_layer_routing_std": stds,
            "health": health}


# --------------------------------------------------------------------------------------------------- tables
METRICS = {"val_bits_per_byte": ("val", "bits_per_byte"), "val_loss": ("val", "loss"),
           "val_perplexity": ("val", "perplexity"), "test_accuracy": ("test", "accuracy"),
           "active_share": ("health", "active_share"), "usage_entropy": ("health", "usage_entropy")}
"""What :func:`study_table` can pair: a run's validation or test numbers, or (GMA arms) its routing health at the
last evaluation (:func:`final_health`)."""


def _metric_of(study: dict, metric: str | None) -> tuple[str, tuple[str, str]]:
    """``metric`` (default: bits per byte for a language-model study, test accuracy for a classifier) and its
    ``(part, key)`` of :data:`METRICS`."""
    metric = metric or ("val_bits_per_byte" if study.get("experiment", "lm") == "lm" else "test_accuracy")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
    return metric, METRICS[metric]


def _run_value(run: dict, part: str, key: str):
    if part == "health":
        health = final_health(run)
        return None if health is None else health[key]
    return run[part][key]


def study_table(study: dict, folder=None, *, reference: str | None = None, metric: str | None = None) -> dict:
    """What is recorded for ``study``: per arm, the summary; and for ``reference`` (default: the study's first
    arm) against every other arm, the paired per-seed difference of ``metric`` (default: bits per byte for a
    language model, test accuracy for a classifier) on their common seeds, with its interval at ``confidence``
    (0.95)."""
    metric, (part, key) = _metric_of(study, metric)
    arms = {arm: load_arm(study, arm, folder) for arm in study["arms"]}
    arms = {arm: record for arm, record in arms.items() if record is not None and record["runs"]}
    reference = reference or next(iter(study["arms"]))
    table = {"metric": metric, "reference": reference, "confidence": 0.95,
             "arms": {a: r["summary"] for a, r in arms.items()}, "paired": {}}
    if part == "val" and arms:
        table["ordering"] = ordering_at_last_evaluations(arms)
    if reference in arms:
        by_seed = _seed_values(arms[reference], part, key)
        for arm, record in arms.items():
            paired = None if arm == reference else _paired_on_common_seeds(_seed_values(record, part, key), by_seed)
            if paired is not None:
                table["paired"][arm] = paired
    return table


def _seed_values(record: dict, part: str, key: str) -> dict:
    """``{seed: value}`` of one arm's record, leaving out seeds without the value."""
    values = {r["seed"]: _run_value(r, part, key) for r in record["runs"]}
    return {seed: value for seed, value in values.items() if value is not None}


def _paired_on_common_seeds(a: dict, b: dict) -> dict | None:
    """:func:`paired_difference` of ``a - b`` (``{seed: value}`` each) on their common seeds, with ``"seeds"``;
    ``None`` with fewer than two common seeds."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return None
    return {"seeds": common, **paired_difference([a[s] for s in common], [b[s] for s in common])}


def study_tables(study: dict, folder=None) -> dict:
    """Every table of :func:`study_table` worth reading for ``study``: bits per byte and (GMA arms) active share
    for a language-model study, test accuracy for a classifier; ``{metric: table}``."""
    metrics = (("val_bits_per_byte", "active_share") if study.get("experiment", "lm") == "lm"
               else ("test_accuracy",))
    return {metric: study_table(study, folder, metric=metric) for metric in metrics}


def gma_against_baselines(study: dict, folder=None, *, metric: str | None = None) -> dict:
    """Every GMA arm of ``study`` against every other arm (baselines and controls): the paired per-seed difference
    ``gma - other`` of ``metric`` (default as in :func:`study_table`) with its 95% t-interval, on the seeds both
    have; a pair with fewer than two common seeds is left out.

    Returns:
        ``{"metric", "pairs": {gma_arm: {other_arm: {"seeds", "differences", "mean", "std", "n", "ci95"}}}}``.
    """
    metric, (part, key) = _metric_of(study, metric)
    records = {arm: load_arm(study, arm, folder) for arm in study["arms"]}
    values = {arm: _seed_values(record, part, key) for arm, record in records.items() if record is not None}
    gma_arms = [arm for arm, spec in study["arms"].items() if spec["mixer"] == "gma" and arm in values]
    result = {"metric": metric, "pairs": {}}
    for other in (arm for arm in values if arm not in gma_arms):
        for arm in gma_arms:
            paired = _paired_on_common_seeds(values[arm], values[other])
            if paired is not None:
                result["pairs"].setdefault(arm, {})[other] = paired
    return result


def tables_path(study: dict, folder=None) -> Path:
    """Where ``python -m gma_teach.study <study> --summary --save`` records :func:`study_tables`:
    ``<folder>/<study name>_tables.json``."""
    return _folder(folder) / f"{study['name']}_tables.json"


def ordering_at_last_evaluations(arms: dict) -> dict:
    """Whether training ran long enough to order the arms: the arms sorted by their mean validation bits per byte
    over the seeds they all have (``seeds``; seeds differ a lot, so only common ones are compared) at the last
    evaluation and at the one before, whether the two orders agree (``None`` without a common seed), and
    ``swapped``: the pairs ``[a, b]`` (``a`` ahead at the last evaluation) that the evaluation before ordered the
    other way. Only the arms with at least as many seeds as the typical arm (the lower median of the seed counts)
    are ordered; the others are listed in ``left_out``. So an arm with one seed recorded does not reduce the
    comparison to that seed, and a pair of arms given extra seeds does not leave out every other arm.

    Two arms whose means differ by less than the seed-to-seed noise can swap at every evaluation however long the
    training, so the ordering also reports ``told_apart``: the pairs ``[a, b]`` that the seeds order at the last
    evaluation (the 95% interval of the paired per-seed difference excludes 0), and ``told_apart_swapped``: those of
    them that the evaluation before ordered the other way. An empty ``told_apart_swapped`` says that every order the
    seeds can tell has settled.

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
                "last_means": {}, "previous_means": {}, "told_apart": [], "told_apart_swapped": []}
    last, last_means = order(-1)
    previous, previous_means = order(-2)
    pairs = [[a, b] for i, a in enumerate(last) for b in last[i + 1:]]
    swapped = [pair for pair in pairs if previous.index(pair[0]) > previous.index(pair[1])]
    told_apart = []
    if len(seeds) >= 2:
        told_apart = [[a, b] for a, b in pairs
                      if paired_difference(last_values(b), last_values(a))["ci95"][0] > 0]
    return {"seeds": seeds, "last": last, "previous": previous, "stable": last == previous, "swapped": swapped,
            "left_out": left_out, "last_means": last_means, "previous_means": previous_means,
            "told_apart": told_apart, "told_apart_swapped": [pair for pair in told_apart if pair in swapped]}


def context_recovered(study: dict, folder=None, *, baseline: str = "none", full: str = "sdpa") -> dict:
    """How much of the context that full attention exploits each arm of a language-model study recovers.

    Per seed, the share :math:`(b_\text{baseline} - b_\text{arm}) / (b_\text{baseline} - b_\text{full})` of
    validation bits per byte ``b``: 0 for an arm that gains nothing over the ``baseline`` control (no mixing), 1 for
    one as good as ``full`` (causal SDPA). Computed on the seeds the arm, ``baseline`` and ``full`` have in common,
    then averaged with a 95% t-interval over those seeds (``ci95`` is ``None`` with one seed).

    Returns:
        ``{"baseline", "full", "gain": mean b_baseline - b_full over the seeds both have, "arms": {arm: {"seeds",
        "mean", "std", "n", "ci95"}}}``; arms with no seed in common are left out, and so are the two references.
    """
    if study.get("experiment", "lm") != "lm":
        raise ValueError(f"study must be a language-model study, got experiment {study.get('experiment')!r}")
    for name, arm in (("baseline", baseline), ("full", full)):
        if arm not in study["arms"]:
            raise ValueError(f"{name} must be an arm of the study ({sorted(study['arms'])}), got {arm!r}")

    def bits(arm):
        record = load_arm(study, arm, folder)
        return {r["seed"]: r["val"]["bits_per_byte"] for r in record["runs"]} if record else {}

    low, high = bits(baseline), bits(full)
    references = sorted(set(low) & set(high))
    level = [s for s in references if low[s] == high[s]]
    if level:
        raise ValueError(f"{full} gains nothing over {baseline} at seed(s) {level} ({low[level[0]]} bits per byte "
                         f"each), so no share of that gain can be computed")
    result = {"baseline": baseline, "full": full,
              "gain": statistics.fmean(low[s] - high[s] for s in references) if references else None, "arms": {}}
    for arm in study["arms"]:
        if arm in (baseline, full):
            continue
        values = bits(arm)
        seeds = [s for s in references if s in values]
        if not seeds:
            continue
        result["arms"][arm] = {"seeds": seeds,
                               **mean_interval([(low[s] - values[s]) / (low[s] - high[s]) for s in seeds])}
    return result


def _cell(summary: dict, name: str, digits: int) -> str:
    if name not in summary:
        return "-"
    return f"{summary[name]['mean']:.{digits}f}+-{summary[name]['std']:.{digits}f}"


def format_study_table(table: dict) -> str:
    """The table of :func:`study_table` as aligned text."""
    if table["metric"] == "test_accuracy":
        lines = [f"{'arm':<20} {'seeds':>5} {'test accuracy':>16}"]
        lines += [f"{arm:<20} {len(s['seeds']):>5} {_cell(s, 'test_accuracy', 4):>16}"
                  for arm, s in table["arms"].items()]
    else:
        lines = [f"{'arm':<20} {'seeds':>5} {'val loss':>16} {'bits/byte':>16} {'active share':>14}"]
        lines += [f"{arm:<20} {len(s['seeds']):>5} {_cell(s, 'val_loss', 4):>16} "
                  f"{_cell(s, 'val_bits_per_byte', 4):>16} {_cell(s, 'active_share', 3):>14}"
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
            lines.append(f"the seeds tell {len(ordering['told_apart'])} of {n_arms * (n_arms - 1) // 2} pairs apart, "
                         f"and {'swapped: ' + told_swapped if told_swapped else 'none of those swapped'}")
    for arm, d in table["paired"].items():
        lines.append(f"{arm} - {table['reference']} ({table['metric']}, seeds {d['seeds']}): {d['mean']:+.4f}, "
                     f"95% CI [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- command line
def main(argv=None) -> dict:
    """Command line: run (or summarize) a study."""
    parser = argparse.ArgumentParser(prog="python -m gma_teach.study", description=__doc__.split("\n\n")[0])
    parser.add_argument("study", choices=[*sorted(STUDIES), "init-scan"],
                        help="a study, or init-scan: the untrained routing under several initialisations")
    parser.add_argument("--arms", nargs="*", default=None, help="arms to run (default: all)")
    parser.add_argument("--seeds", nargs="*", type=int, default=None, help="seeds (default: the study's)")
    parser.add_argument("--out-dir", default=None,
                        help="folder of the records (default: measure.results_folder(), book/results in a clone)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--summary", action="store_true", help="print the recorded table and run nothing")
    parser.add_argument("--save", action="store_true",
                        help="with --summary: also record the tables (paired intervals) as <study>_tables.json")
    parser.add_argument("--speed", action="store_true",
                        help="measure every arm's training speed in one process (interleaved) and record it")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args(argv)
    shown = argv if argv is not None else sys.argv[1:]
    command = "python -m gma_teach.study " + " ".join(shown)
    if args.study == "init-scan":
        torch.set_num_threads(args.threads)
        record = scan_initial_routing(INIT_SCAN, command=command)
        path = _folder(args.out_dir) / f"{INIT_SCAN['name']}.json"
        path.write_text(json.dumps(record, indent=1, default=str) + "\n")
        for name, setting in record["settings"].items():
            print(f"{name:<40} active {setting['active_share']['mean']:.3f}  usage entropy "
                  f"{setting['usage_entropy']['mean']:.3f}  logit spread {setting['logit_spread']['mean']:.2f}")
        return record
    study = STUDIES[args.study]
    if args.summary:
        tables = study_tables(study, args.out_dir)
        for table in tables.values():
            print(format_study_table(table))
        context = None
        if {"none", "sdpa"} <= set(study["arms"]) and study.get("experiment", "lm") == "lm":
            context = context_recovered(study, args.out_dir)
            for arm, share in context["arms"].items():
                interval = "" if share["ci95"] is None else f", 95% CI [{share['ci95'][0]:.2f}, {share['ci95'][1]:.2f}]"
                print(f"{arm:<20} recovers {share['mean']:.2f} of sdpa's gain over none (seeds {share['seeds']}"
                      f"{interval})")
        against = None
        if study.get("experiment", "lm") == "lm" and any(spec["mixer"] != "gma" for spec in study["arms"].values()):
            against = gma_against_baselines(study, args.out_dir)
            for arm, pairs in against["pairs"].items():
                for other, d in pairs.items():
                    print(f"{arm} - {other} ({against['metric']}, seeds {d['seeds']}): {d['mean']:+.4f}, "
                          f"95% CI [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}]")
        if args.save:
            record = {"study": study["name"], "tables": tables, **measure.provenance(command, device())}
            if context is not None:
                record["context_recovered"] = context
            if against is not None:
                record["gma_against_baselines"] = against
            path = tables_path(study, args.out_dir)
            path.write_text(json.dumps(record, indent=1, default=str) + "\n")
            print(f"-> {path}")
        return tables
    if args.speed:
        origin = measure.provenance(command, device())
        record = {"study": study["name"], **measure_training_speed(study), **origin}
        path = speed_path(study, args.out_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1, default=str) + "\n")
        for arm, speed in record["tokens_per_second"].items():
            print(f"{arm:<20} {speed:9,.0f} training tokens/s")
        return record
    torch.set_num_threads(args.threads)
    arms = args.arms or list(study["arms"])
    unknown = [arm for arm in arms if arm not in study["arms"]]
    if unknown:
        raise SystemExit(f"unknown arms {unknown}; known: {sorted(study['arms'])}")
    data = study_data(study)
    records = {arm: run_arm(study, arm, seeds=args.seeds, folder=args.out_dir, command=command,
                            progress=args.progress, data=data) for arm in arms}
    return records


if __name__ == "__main__":
    main()
