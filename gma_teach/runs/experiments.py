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

writes the record of a study's arm (a chapter's one-arm study, :func:`gma_teach.experiments.chapter_study`,
run by the runner of every study): the configuration, per-epoch metrics and final test metric of every seed, their
mean and standard deviation, training tokens per second, parameter counts and the provenance of
:func:`gma_teach.measure.provenance` (hardware, threads, load, date, commit, command). The recorded studies (several
arms, paired intervals) are :mod:`gma_teach.study`. Any recorded seed of either is re-run from the command its
record stores, and compared number by number, with::

    python -m gma_teach.experiments reproduce book/results/lm_study_sdpa.json --seed 1

:func:`load_or_train_lm` keeps chapter 10's language model under ``gma_teach.cache_dir()`` for chapter 11.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from .. import mixers
from ..environment import SCALES
from ..records import results_folder
from .arm import run_arm
from .chapter_runs import chapter_study, load_or_train_lm, run_classification, run_lm
from .classification import build_classifier, listops_data, majority_accuracy, text_data
from .language_model import (
    LMRun,
    build_lm,
    decoding_state_bytes,
    lm_checkpoint_path,
    lm_data,
    routing_monitor,
    validation_bytes,
)
from .options import CLASSIFIER_MIXERS, EXPERIMENTS, LM_MIXERS, mixer_options
from .reproduce import reproduce_main

__all__ = ["CLASSIFIER_MIXERS", "EXPERIMENTS", "LMRun", "LM_MIXERS", "build_classifier", "build_lm", "chapter_study",
           "decoding_state_bytes", "headline", "listops_data", "lm_checkpoint_path", "lm_data", "load_or_train_lm",
           "load_results", "main", "majority_accuracy", "mixer_options", "routing_monitor", "run", "run_classification",
           "run_lm", "text_data", "validation_bytes"]


def run(experiment: str, mixer: str, *, scale_name: str | None = None, seeds=(0,), n_components: int | None = None,
        source: str | None = None, progress: bool = False, command: str | None = None, on_seed=None,
        out: str | os.PathLike | None = None, **overrides) -> dict:
    """Run ``experiment`` for every seed in ``seeds``, as the one arm of a chapter's study
    (:func:`gma_teach.experiments.chapter_study`: the preset at ``scale_name`` with ``overrides``) through the
    runner of every study (:func:`gma_teach.study.run_arm`); returns its record.

    The record is a study arm's: ``study``, ``experiment``, ``arm`` (the mixer), ``spec`` (its options),
    ``scale``, ``config`` (the preset with overrides), ``runs`` (one record per seed, each with its provenance),
    ``summary`` (:func:`gma_teach.study.summarize_arm`), ``complete`` (all seeds ran) and the provenance
    (``hardware``, ``threads``, ``load``, ``date``, ``commit``, ``command``). It is written to ``out`` after every
    seed (seeds already there are kept, so an interrupted run continues), or to a temporary file when ``out`` is
    ``None``; ``on_seed(record)``, if given, receives it after every seed.
    """
    if not seeds:
        raise ValueError("seeds must name at least one seed")
    study = chapter_study(experiment, mixer, scale_name=scale_name, seeds=seeds, n_components=n_components,
                          source=source, **overrides)
    command = command or " ".join(["python -m gma_teach.experiments", *sys.argv[1:]])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(out) if out is not None else Path(folder) / "record.json"
        return run_arm(study, mixer, command=command, progress=progress, path=path, on_record=on_seed)


def headline(record: dict) -> str:
    """One line of a record of :func:`run`: its metric's mean and std over seeds and its training speed."""
    metric = "val_bits_per_byte" if record["experiment"] == "lm" else "test_accuracy"
    summary = record["summary"]
    return (f"{record['experiment']} {record['arm']} ({record['scale']}): {metric} {summary[metric]['mean']:.4f} "
            f"+- {summary[metric]['std'] or 0.0:.4f} over {len(summary['seeds'])} seed(s); "
            f"{summary['tokens_per_second']['mean']:.0f} tokens/s")


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
    record = run(args.experiment, args.mixer, scale_name=args.scale, seeds=tuple(range(args.seeds)),
                 n_components=args.n_components, source=args.source, progress=args.progress, command=command,
                 out=args.out)
    print(f"{headline(record)}; wrote {args.out}")
    return record


if __name__ == "__main__":
    main()
