"""The recorded studies of Part IV, seed by seed: why GMA's routing collapses (and what fixes it), and the LM
comparison.

A *study* is a fixed setting (scale, preset overrides, seeds) and a list of *arms* (a mixer and its options). Each
arm's record lives under :func:`gma_teach.measure.results_folder` (``<study>_<arm>``): every seed is written, as
soon as it finishes, to a file of its own in the arm's run folder (``<study>_<arm>.runs/``), with its provenance
(hardware, threads, load, date, commit, command), and the record is those runs merged when read. Seeds already
recorded are skipped and a seed another live process is running is left to it, so an interrupted study continues
where it stopped and several commands may share one folder::

    python -m gma_teach.study collapse                    # every arm, every seed not yet recorded
    python -m gma_teach.study lm --arms sdpa gma_k64      # some arms
    python -m gma_teach.study collapse --arms default --seeds 1 --out-dir /tmp/check   # reproduce one seed
    python -m gma_teach.study lm --summary                # the table of what is recorded (and paired intervals)
    python -m gma_teach.study lm --summary --save         # ... and save it, with the declared comparisons' Holm p
    python -m gma_teach.study text --executor dask --workers 4   # each (arm, seed, width) a Dask task

Studies:

* ``collapse`` (:data:`COLLAPSE_STUDY`): the small LM (:data:`LM_SETTING`, 600 steps, GMA K=64), the default
  routing against four routing changes -- variances initialised at ``d_route`` (logits of order one at the start),
  means from k-means of the routing vectors, a usage-balancing auxiliary loss, and the first and third together --
  on the same seeds. Read: the share of components that win a token by argmax (an argmax count, no measure of use),
  usage entropy, logit spread (at initialization and every evaluation) and validation loss / bits per byte.
* ``remedy`` (:data:`REMEDY_STUDY`): the same LM with six routings, judged by the information the routing carries
  (bits) and by bits per byte; its declared rule, read again with the slot memory's follow-on (``slot-lm``), picks
  :data:`gma_teach.layer.LM_ROUTING_REMEDY`.
* ``cause`` (:data:`CAUSE_STUDY`): the default and balance arms again, evaluated every 50 steps with the spread of
  each term of the routing logits (prior, volume, distance), to see when the collapse happens and what drives it.
* ``lm`` (:data:`LM_STUDY`): the same LM and steps with causal SDPA, GMA at K = 32, 64, 128 with the default routing
  and with the variance change and the balance loss (``_var_bal``, a routing that dissolves), linear attention,
  Performer and the two controls ``none`` (no mixing) and ``uniform`` (a causal average of the past). Its GMA K=64
  arms are the collapse study's runs (same setting, same seeds): an arm whose setting and options equal an arm of
  the study it names in ``shared_with`` is trained and recorded once, under that study.
* ``listops-lra`` (:data:`LISTOPS_LRA_STUDY`): ListOps at LRA's lengths (500-2000 tokens, depth 10) with a model
  small enough for a CPU; ``text`` (:data:`TEXT_STUDY`): the offline stand-in for LRA Text.
* ``recall`` (:data:`RECALL_STUDY`): chapter 12's multi-query associative recall against each mixer's state,
  every arm at each width (``--widths``), its learning rate kept from a sweep on the first seed's validation
  accuracy; one record per arm and width, its table saved as ``recall_study_tables.json``.
* ``mqar-pilot`` (:data:`MQAR_PILOT`): a pilot, not a comparison: SDPA and linear attention at two heads on MQAR at
  128 tokens, one seed, one rate, 6,000 steps, each run's validation curve per kv-pair count recorded; it decides
  whether the recurrent arm learns in that budget (:func:`gma_teach.capacity.pilot_learned`).
* ``init-scan`` (:data:`INIT_SCAN`, not a study of arms): the untrained LM's routing under several routing widths
  and initialisations, one record.

Every LM record reports validation **bits per byte** (tokenizer-independent) next to the per-token loss, and names
the tokenizer. :func:`paired_difference` gives, for two arms, the per-seed differences with a 95% t-interval; each
study declares its primary comparisons (:mod:`gma_teach.designs`), and only those, Holm-adjusted over their
family, can be "told apart" (:func:`gma_teach.study.declared_comparisons`); every other pair is exploratory.
"""
from __future__ import annotations

import argparse
import sys

import torch

from ..designs import INIT_SCAN, RENAMED_ARMS, STUDIES, as_study, thawed
from ..environment import device
from ..measure import TERMINAL_WIDTH
from ..records import provenance, write_record
from .analyses import context_recovered, gma_against_baselines, left_plateau
from .arm import resolve, run_arm, study_data
from .arm_records import speed_path, study_folder, tables_path
from .fan_out import ENGINES, submit_study
from .init_scan import scan_initial_routing
from .recall_tables import format_recall_table, recall_table
from .speed import measure_training_speed
from .tables import format_study_table, study_tables
from .verdicts import declared_comparisons, format_declared

__all__ = ["main"]


def _design(study: dict) -> dict:
    """The declared design a saved table was computed under (JSON-ready): seeds, metric(s), primary comparisons,
    test and what is exploratory."""
    keys = ("seeds", "metric", "metrics", "primary", "test", "second_look", "reruns", "exploratory")
    return {key: thawed(study[key]) for key in keys if key in study}


def _summary_by_width(study, folder, command: str, save: bool) -> dict:
    """The summary of a study with widths (the recall study): its table, printed, and saved with ``save``.

    Its own summary because its table is not a study table: each arm is an entry per width, at the learning rate
    its sweep kept, and its declared comparisons are paired per width
    (:func:`gma_teach.runs.recall_tables.recall_table`; the records are read as every study's are,
    :func:`gma_teach.runs.arm_records.load_arm`). The saved file keeps the form that the synthesis, the book and
    ``recall_study_tables.json`` already have: ``{"study", "design", "declared", "table"}``, the declared
    comparisons saying ``"difference"`` for the mean."""
    table = recall_table(folder, study)
    for line in format_recall_table(table, width=TERMINAL_WIDTH):
        print(line)
    if save:
        declared = {"comparisons": table["comparisons"], "family_size": table["family_size"], "test": study["test"],
                    "metric": study["metric"]}
        path = write_record(tables_path(study, folder), {"study": study["name"], "design": _design(study),
                                                         "declared": declared, "table": table,
                                                         **provenance(command, device())})
        print(f"-> {path}")
    return table


def main(argv=None) -> dict:
    """Command line: run (or summarize) a study."""
    parser = argparse.ArgumentParser(prog="python -m gma_teach.study", description=__doc__.split("\n\n")[0])
    parser.add_argument("study", choices=[*sorted(STUDIES), "init-scan"],
                        help="a study, or init-scan: the untrained routing under several initialisations")
    parser.add_argument("--arms", nargs="*", default=None, help="arms to run (default: all)")
    parser.add_argument("--widths", nargs="*", type=int, default=None,
                        help="widths to run, for a study with widths (recall; default: all)")
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
    parser.add_argument("--executor", choices=ENGINES, default=None,
                        help="send each (arm, seed, width) run to this engine as one task (default: run them here, "
                             "one after another); needs the optional extra: pip install 'gma-teach[distributed]'")
    parser.add_argument("--workers", type=int, default=2,
                        help="with --executor: worker processes of the engine's local mode (default 2)")
    parser.add_argument("--scheduler", default=None,
                        help="with --executor dask: a running scheduler's address (a Slurm cluster's) in place of "
                             "the local mode")
    args = parser.parse_args(argv)
    shown = argv if argv is not None else sys.argv[1:]
    command = "python -m gma_teach.study " + " ".join(shown)
    if args.study == "init-scan":
        torch.set_num_threads(args.threads)
        record = scan_initial_routing(INIT_SCAN, command=command)
        write_record(study_folder(args.out_dir) / f"{INIT_SCAN['name']}.json", record)
        for name, setting in record["settings"].items():
            print(f"{name:<40} active {setting['active_share']['mean']:.3f}  usage entropy "
                  f"{setting['usage_entropy']['mean']:.3f}  logit spread {setting['logit_spread']['mean']:.2f}")
        return record
    study = as_study(STUDIES[args.study])
    renamed = RENAMED_ARMS.get(study["name"], {})  # a stored command may name an arm by its old name
    for old in [arm for arm in args.arms or [] if arm in renamed]:
        print(f"arm {old!r} of {study['name']} is now named {renamed[old]!r} (designs.RENAMED_ARMS)")
    args.arms = [renamed.get(arm, arm) for arm in args.arms] if args.arms else args.arms
    widths = args.widths or list(study.widths or [])
    if args.widths and not set(args.widths) <= set(study.widths or ()):
        raise SystemExit(f"unknown widths {args.widths}; study {args.study!r} has {list(study.widths or [])}")
    if args.summary and study.widths:
        return _summary_by_width(study, args.out_dir, command, args.save)
    if args.summary:
        tables = study_tables(study, args.out_dir)
        for table in tables.values():
            print(format_study_table(table))
        declared = declared_comparisons(study, args.out_dir)
        for line in format_declared(declared, width=TERMINAL_WIDTH):
            print(line)
        second = declared_comparisons(study, args.out_dir, look="second") if "second_look" in study else None
        for line in format_declared(second, width=TERMINAL_WIDTH) if second is not None else ():
            print(line)
        context = None
        if {"none", "sdpa"} <= set(study["arms"]) and study.get("experiment", "lm") == "lm":
            context = context_recovered(study, args.out_dir)
            for arm, share in context["arms"].items():
                interval = ("" if share["n"] < 2 else f", 95% CI [{share['ci95'][0]:.2f}, {share['ci95'][1]:.2f}]"
                            if share["ci95"] is not None else f", 95% set unbounded: {share['confidence_set']}")
                print(f"{arm:<20} recovers {share['mean']:.2f} of sdpa's gain over none (ratio of mean gains, "
                      f"seeds {share['seeds']}{interval}, {share['method']}; exploratory)")
        against = None
        if study.get("experiment", "lm") == "lm" and any(spec["mixer"] != "gma" for spec in study["arms"].values()):
            against = gma_against_baselines(study, args.out_dir)
            for arm, pairs in against["pairs"].items():
                for other, d in pairs.items():
                    label = "exploratory" if d["exploratory"] else f"declared, Holm p {d['p_holm']:.3f}"
                    print(f"{arm} - {other} ({against['metric']}, seeds {d['seeds']}): {d['mean']:+.4f}, "
                          f"95% CI [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}], p {d['p']:.3f} ({label})")
        plateau = None
        if "left_plateau" in study.get("exploratory", {}).get("post_hoc_tests", ()):
            plateau = left_plateau(study, args.out_dir)
            for arm, (left, seeds) in plateau["counts"].items():
                test = plateau["fisher"].get(arm)
                versus = "" if test is None else (f"; Fisher against {plateau['reference']} p {test['p']:.3f} "
                                                  f"(post hoc, exploratory)")
                print(f"{arm:<20} left the plateau at {left} of {seeds} seeds{versus}")
        if args.save:
            record = {"study": study["name"], "design": _design(study), "declared": declared, "tables": tables,
                      **provenance(command, device())}
            if second is not None:
                record["second_look"] = second
            if context is not None:
                record["context_recovered"] = context
            if against is not None:
                record["gma_against_baselines"] = against
            if plateau is not None:
                record["left_plateau"] = plateau
            path = write_record(tables_path(study, args.out_dir), record)
            print(f"-> {path}")
        return tables
    if args.speed:
        origin = provenance(command, device())
        record = {"study": study["name"], **measure_training_speed(study), **origin}
        write_record(speed_path(study, args.out_dir), record)
        for arm, speed in record["tokens_per_second"].items():
            print(f"{arm:<20} {speed:9,.0f} training tokens/s")
        return record
    torch.set_num_threads(args.threads)
    arms = args.arms or list(study["arms"])
    unknown = [arm for arm in arms if arm not in study["arms"]]
    if unknown:
        raise SystemExit(f"unknown arms {unknown}; known: {sorted(study['arms'])}")
    for arm in arms:  # every arm is resolved before anything trains: a bad option stops the command at once
        for width in widths or [None]:
            resolve(study, arm, width)
    if args.executor is not None:
        return submit_study(study, arms=arms, seeds=args.seeds, widths=widths, folder=args.out_dir, command=command,
                            threads=args.threads, workers=args.workers, scheduler=args.scheduler)
    data = study_data(study)
    if widths:
        return {(arm, width): run_arm(study, arm, seeds=args.seeds, width=width, folder=args.out_dir,
                                      command=command, progress=args.progress, data=data)
                for width in widths for arm in arms}
    return {arm: run_arm(study, arm, seeds=args.seeds, folder=args.out_dir, command=command, progress=args.progress,
                         data=data) for arm in arms}

