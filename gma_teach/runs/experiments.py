"""The experiments of chapters 9 and 10, as functions and as a command line.

* ``listops`` -- LRA ListOps (10 classes): generated with LRA's generator offline, or the official data at ``full``;
* ``text`` -- LRA Text, byte-level IMDb (2 classes); offline, the labelled stand-in "standard-library docstring ->
  package" (4 classes) from :mod:`gma_teach.data.text`;
* ``lm`` -- a causal language model on WikiText-103 (``full``) or, offline, on the Python standard library's
  English (pydoc topics + docstrings), GPT-2 BPE (its vocabulary ships with the package); every LM record
  reports validation bits per byte and names its tokenizer.

Sizes come from ``gma_teach.preset("listops" | "text" | "lm", scale)``. The chapters call the same functions as the
command line::

    python -m gma_teach.experiments listops --mixer gma --scale small --seeds 3 --out book/results/listops_gma.json

writes a JSON record: the configuration, per-epoch metrics and final test metric of every seed, their mean and
standard deviation, training tokens per second, parameter counts and the provenance of
:func:`gma_teach.measure.provenance` (hardware, threads, load, date, commit, command). The recorded studies (several
arms, seeds resumed after an interruption, paired intervals) are :mod:`gma_teach.study`. Any recorded seed of either is
re-run from the command its record stores, and compared number by number, with::

    python -m gma_teach.experiments reproduce book/results/lm_study_sdpa.json --seed 1

:func:`load_or_train_lm` keeps chapter 10's language model under ``gma_teach.cache_dir()`` for chapter 11.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from .. import mixers
from ..environment import SCALES, device, preset, scale
from ..records import provenance, results_folder, write_record
from ..stats import mean_std
from .classification import build_classifier, listops_data, majority_accuracy, run_classification, text_data
from .language_model import (
    LMRun,
    build_lm,
    decoding_state_bytes,
    lm_checkpoint_path,
    lm_data,
    load_or_train_lm,
    routing_monitor,
    run_lm,
    validation_bytes,
)
from .options import CLASSIFIER_MIXERS, EXPERIMENTS, LM_MIXERS, mixer_options
from .reproduce import reproduce_main

__all__ = ["CLASSIFIER_MIXERS", "EXPERIMENTS", "LMRun", "LM_MIXERS", "build_classifier", "build_lm",
           "decoding_state_bytes", "listops_data", "lm_checkpoint_path", "lm_data", "load_or_train_lm", "load_results",
           "main", "majority_accuracy", "mixer_options", "routing_monitor", "run", "run_classification", "run_lm",
           "text_data", "validation_bytes"]


def run(experiment: str, mixer: str, *, scale_name: str | None = None, seeds=(0,), n_components: int | None = None,
        source: str | None = None, progress: bool = False, command: str | None = None, on_seed=None,
        **overrides) -> dict:
    """Run ``experiment`` for every seed in ``seeds``; returns the JSON-ready record the command line writes.

    The record: ``experiment``, ``mixer``, ``scale``, ``config`` (the preset with overrides), ``runs`` (one record per
    seed), ``summary`` (mean and std of the final metric and of tokens/s), ``parameters``, ``data_source``,
    ``complete`` (all seeds ran) and the provenance (``hardware``, ``date``, ``commit``, ``command``).
    ``on_seed(record)``, if given, receives the partial record after every seed (the command line saves it, so an
    interrupted run keeps its finished seeds).
    """
    if experiment not in EXPERIMENTS:
        raise ValueError(f"experiment must be one of {EXPERIMENTS}, got {experiment!r}")
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    chosen = scale_name or scale()
    p = preset(experiment, chosen)
    config = {**vars(p), **overrides, "mixer": mixer, "mixer_options": mixer_options(p, mixer, n_components)}
    origin = provenance(command or " ".join(["python -m gma_teach.experiments", *sys.argv[1:]]),
                                device())  # taken before training: the commit and date of the code that runs
    started = time.perf_counter()
    q = SimpleNamespace(**{**vars(p), **overrides})
    if experiment == "lm":
        data = lm_data(q, source=source)
    else:
        data = listops_data(q, source=source) if experiment == "listops" else text_data(q, source=source)
    runs = []
    record = None
    for seed in seeds:
        if experiment == "lm":
            runs.append(run_lm(mixer, scale_name=chosen, seed=seed, n_components=n_components, data=data,
                               progress=progress, **overrides))
        else:
            runs.append(run_classification(experiment, mixer, scale_name=chosen, seed=seed, n_components=n_components,
                                           data=data, progress=progress, **overrides))
        record = _record(experiment, mixer, chosen, config, runs, len(runs) == len(seeds), started, origin)
        if on_seed is not None:
            on_seed(record)
    return record


def _record(experiment, mixer, scale_name, config, runs, complete, started, origin) -> dict:
    if experiment == "lm":
        metric, values = "val_perplexity", [r["val"]["perplexity"] for r in runs]
    else:
        metric, values = "test_accuracy", [r["test"]["accuracy"] for r in runs]
    mean, std = mean_std(values)
    speed_mean, speed_std = mean_std([r["tokens_per_second"] for r in runs])
    summary = {"metric": metric, "mean": mean, "std": std, "values": values, "seeds": [r["seed"] for r in runs],
               "tokens_per_second_mean": speed_mean, "tokens_per_second_std": speed_std}
    if experiment == "lm":
        bpb = [r["val"]["bits_per_byte"] for r in runs]
        bpb_mean, bpb_std = mean_std(bpb)
        summary.update(bits_per_byte_values=bpb, bits_per_byte_mean=bpb_mean, bits_per_byte_std=bpb_std,
                       tokenizer=runs[0]["tokenizer"])
    return {"experiment": experiment, "mixer": mixer, "n_components": runs[0]["n_components"], "scale": scale_name,
            "config": config, "data_source": runs[0]["data_source"], "parameters": runs[0]["parameters"],
            "summary": summary,
            "complete": complete, "runs": runs, "wall_seconds": time.perf_counter() - started, **origin}


def load_results(pattern: str = "*.json", folder: str | os.PathLike | None = None) -> list[dict]:
    """The recorded result files under :func:`gma_teach.measure.results_folder` (or ``folder``) matching
    ``pattern``, sorted by name."""
    folder = Path(folder) if folder is not None else results_folder()
    return [json.loads(path.read_text()) for path in sorted(folder.glob(pattern))]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gma_teach.experiments", description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", choices=EXPERIMENTS)
    parser.add_argument("--mixer", default="gma", choices=mixers.LiveNames(mixers.registered_names))
    parser.add_argument("--scale", default=None, choices=SCALES,
                        help="preset scale (default: GMA_TEACH_SCALE, else full on a GPU and small on a CPU)")
    parser.add_argument("--seeds", type=int, default=1, help="run seeds 0 .. N-1")
    parser.add_argument("--n-components", type=int, default=None, help="GMA's K (default: the preset's)")
    parser.add_argument("--source", default=None,
                        help="listops: generate|hub|auto; text: stdlib|imdb; lm: stdlib|wikitext-2|wikitext-103")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--progress", action="store_true", help="show progress bars")
    return parser


def main(argv=None) -> dict:
    """Command-line entry point: run, write the JSON record to ``--out`` and return it; or, as
    ``python -m gma_teach.experiments reproduce RECORD [--seed S] [--out-dir D]``, :func:`reproduce`."""
    words = list(argv) if argv is not None else sys.argv[1:]
    if words[:1] == ["reproduce"]:
        return reproduce_main(words[1:])
    args = _parser().parse_args(argv)
    if args.seeds < 1:
        raise SystemExit(f"--seeds must be >= 1, got {args.seeds}")
    shown = argv if argv is not None else sys.argv[1:]
    command = "python -m gma_teach.experiments " + " ".join(shown)
    out = Path(args.out)

    def save(record):
        write_record(out, record)

    record = run(args.experiment, args.mixer, scale_name=args.scale, seeds=tuple(range(args.seeds)),
                 n_components=args.n_components, source=args.source, progress=args.progress, command=command,
                 on_seed=save)
    summary = record["summary"]
    print(f"{args.experiment} {args.mixer} ({record['scale']}): {summary['metric']} {summary['mean']:.4f} +- "
          f"{summary['std']:.4f} over {len(summary['values'])} seed(s); {summary['tokens_per_second_mean']:.0f} "
          f"tokens/s; wrote {out}")
    return record


if __name__ == "__main__":
    main()
