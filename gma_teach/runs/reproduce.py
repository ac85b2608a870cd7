"""Reproducing a record: re-run one recorded seed from the command its record stores, and compare number by number.

    python -m gma_teach.experiments reproduce book/results/lm_study_sdpa.json --seed 1
    python -m gma_teach.experiments reproduce book/results/recall_study_linear_d64.json --at-commit

A re-run at today's code can differ from the record where the code has changed since (a rewritten loop that draws
its batches in another order trains another model); ``--at-commit`` re-runs the record's own commit, checked out
beside the clone (``git worktree``), so only the machine differs. Across CPUs of one kind, float sums still differ
in their last bits and training carries that forward: ``REPLAY_TOLERANCE`` states how far a reader should
expect each kind's headline number to move, and ``tests/test_replay.py`` replays a first seed of every kind
against it.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from .. import _checks
from ..designs import STUDIES
from .arm_records import read_record

__all__ = ["RECORDING_MODULES", "REPLAY_TOLERANCE", "REPRODUCED_FILE", "compare_seed", "headline_number",
           "reproduce", "reproduce_command", "reproduce_main"]


RECORDING_MODULES = ("gma_teach.experiments", "gma_teach.study")
"""The commands whose records :func:`reproduce` can re-run: this module's and :mod:`gma_teach.study`'s."""
REPRODUCED_FILE = "reproduced.json"
"""Where a re-run of a ``python -m gma_teach.experiments`` record writes, inside the re-run's folder."""


def _without_option(args: list[str], option: str, *, variadic: bool) -> list[str]:
    """``args`` without ``option`` and its value (``variadic``: every value up to the next ``--`` option)."""
    kept, i = [], 0
    while i < len(args):
        if args[i] != option:
            kept.append(args[i])
            i += 1
            continue
        i += 1
        while i < len(args) and not args[i].startswith("--"):
            i += 1
            if not variadic:
                break
    return kept


def reproduce_command(record: dict, seed: int, out_dir: str | os.PathLike) -> list[str]:
    """The command that re-runs seed ``seed`` of ``record`` into ``out_dir``, rewritten from the command the record
    stores (the one that made that seed): the same module, experiment or study and options, with only the seeds and
    the output changed, and a study's arms (and the recall study's widths) narrowed to the record's own ``arm`` (and
    ``width``) where the record names them, since one command may have run several arms, and the study set to the
    one that owns the record (a seed that another study's command made through an arm the two share, such as the LM
    study's K=64 arms, which the collapse study records, re-runs through its owner: the same run). ``python -m
    gma_teach.experiments`` runs seeds ``0 .. n-1``, so seed ``s`` of its records re-runs seeds ``0 .. s``; a study
    re-runs the one seed.

    Returns ``[sys.executable, "-m", module, *arguments]``. Raises ``ValueError`` if the record has no such seed or
    was not written by one of ``RECORDING_MODULES``.
    """
    runs = record.get("runs")
    if not isinstance(runs, list) or not runs:
        raise ValueError(f"record must hold the seeds it ran under 'runs'; got keys {sorted(record)}")
    _checks.integer("seed", seed, minimum=0)
    seeds = [run["seed"] for run in runs]
    if seed not in seeds:
        raise ValueError(f"seed {seed} is not in the record; it holds seeds {seeds}")
    run = runs[seeds.index(seed)]
    command = run.get("provenance", {}).get("command") or record.get("command", "")
    words = shlex.split(command)
    if words[:2] != ["python", "-m"] or len(words) < 4 or words[2] not in RECORDING_MODULES:
        raise ValueError(f"record's command must be 'python -m <module> ...' with a module of {RECORDING_MODULES}, "
                         f"got {command!r}")
    module, args = words[2], words[3:]
    if module == "gma_teach.study":
        owner = next((key for key, study in STUDIES.items() if study["name"] == record.get("study")), None)
        if owner is not None and args[:1] != [owner]:  # an arm one study shares with another (``shared_with``)
            args = [owner, *args[1:]]
        narrowed = {"--arms": record.get("arm"), "--widths": record.get("width")}  # one command may run many
        for option in ("--seeds", *(option for option, value in narrowed.items() if value is not None)):
            args = _without_option(args, option, variadic=True)
        args = _without_option(args, "--out-dir", variadic=False)
        for option, value in narrowed.items():
            args += [option, str(value)] if value is not None else []
        args += ["--seeds", str(seed), "--out-dir", str(out_dir)]
    else:
        args = _without_option(_without_option(args, "--seeds", variadic=False), "--out", variadic=False)
        args += ["--seeds", str(seed + 1), "--out", str(Path(out_dir) / REPRODUCED_FILE)]
    return [sys.executable, "-m", module, *args]


RECALL_NUMBERS = ("final_train_loss", "val_mean", "test_mean", "val_accuracy", "test_accuracy")
"""The numbers of a recall study's run (``gma_teach.runs.recall``, which keeps no history) that a reproduction
compares; ``val_accuracy`` and ``test_accuracy`` hold one accuracy per kv-pair count."""


REPLAY_TOLERANCE = {"lm": ("val bits_per_byte", 0.01), "listops": ("test accuracy", 0.03),
                    "text": ("test accuracy", 0.03), "recall": ("test_mean", 0.03),
                    "capacity": ("mean retrieval_accuracy", 0.03)}
"""How far the headline number of a re-run seed may move from its record, by the kind of run, when the record's own
commit re-runs on another CPU: ``{kind: (number, largest absolute difference)}`` (bits per byte for a language
model, accuracy for the others; the capacity test's number is its retrieval accuracy averaged over ``S``). Stated
before the replays of ``tests/test_replay.py`` from the two re-runs known then: a recall seed 0.0018 apart on
another 2-core machine, a language-model seed 0.0012 bits per byte apart at a later commit. Every other number
of a run (losses along the way, accuracy per size) is compared and shown, and held to nothing."""


def headline_number(run: dict, kind: str) -> float:
    """The headline number of a run of ``kind`` (a key of ``REPLAY_TOLERANCE``: the record's experiment) as
    ``REPLAY_TOLERANCE`` names it: bits per byte of a language model, test accuracy of a classifier, the mean test
    accuracy of a recall run, the retrieval accuracy of a capacity run averaged over ``S``.

    Raises:
        ValueError: for a kind not in ``REPLAY_TOLERANCE``, or a run that does not hold that kind's number."""
    if kind not in REPLAY_TOLERANCE:
        raise ValueError(f"kind must be one of {sorted(REPLAY_TOLERANCE)}, got {kind!r}")
    try:
        if kind == "capacity":
            accuracies = [float(a) for a in run["retrieval_accuracy"].values()]
            return sum(accuracies) / len(accuracies)
        if kind == "recall":
            return float(run["test_mean"])
        if kind == "lm":
            return float(run["val"]["bits_per_byte"])
        return float(run["test"]["accuracy"])
    except (KeyError, TypeError) as error:
        raise ValueError(f"run does not hold the headline number of a {kind!r} run ({error!r}); its keys: "
                         f"{sorted(run)}") from error


def _final_numbers(run: dict) -> dict:
    """``{name: value}`` of the numbers :func:`compare_seed` compares."""
    if "retrieval_accuracy" in run:  # a capacity run: its test loss and accuracy at each S
        numbers = {f"{key} S={n}": float(value) for key in ("retrieval_accuracy", "loss")
                   for n, value in run[key].items()}
        return {"mean retrieval_accuracy": headline_number(run, "capacity"), **numbers}
    if "history" not in run:  # a recall run: its final numbers, one per kv-pair count for the accuracies
        numbers = {}
        for key in RECALL_NUMBERS:
            value = run.get(key)
            items = value.items() if isinstance(value, dict) else [("", value)]
            numbers.update({f"{key} {count}".strip(): number for count, number in items
                            if isinstance(number, (int, float))})
        return numbers
    numbers = {f"val_loss at step {step}": loss
               for step, loss in zip(run["history"]["steps"], run["history"]["val_loss"])}
    kept = {"val": "", "test": " (last epoch)" if run.get("checkpoint") == "last" else ""}
    for part in ("val", "test"):  # a test number of other weights (best or last epoch) is another number
        numbers.update({f"{part}{kept[part]} {key}": value for key, value in run.get(part, {}).items()
                        if isinstance(value, (int, float))})
    return numbers


def compare_seed(recorded: dict, reproduced: dict) -> list[dict]:
    """The numbers a reproduced seed must match (the validation loss at every evaluation, and every number under
    ``val`` and ``test``) for two runs of one seed: ``{"name", "recorded", "reproduced", "difference"}`` each, in the
    recorded run's order; a number missing from the reproduction has ``reproduced`` None."""
    if recorded["seed"] != reproduced["seed"]:
        raise ValueError(f"compare one seed with itself: recorded seed {recorded['seed']}, reproduced seed "
                         f"{reproduced['seed']}")
    again = _final_numbers(reproduced)
    rows = []
    for name, value in _final_numbers(recorded).items():
        other = again.get(name)
        rows.append({"name": name, "recorded": value, "reproduced": other,
                     "difference": None if other is None else other - value})
    return rows


def _recorded_run(record: dict, seed: int, lr: float | None = None) -> dict:
    """The run of ``seed`` in ``record``; in a recall record, which holds seed 0 once per swept learning rate, the
    run at ``lr`` (default: the record's ``chosen_lr``, else its first run of the seed)."""
    runs = [run for run in record["runs"] if run["seed"] == seed]
    lr = lr if lr is not None else record.get("chosen_lr")
    return next((run for run in runs if lr is not None and run.get("lr") == lr), runs[0])


CLONE = Path(__file__).resolve().parents[2]
"""The folder that holds this package: a git clone when installed with ``pip install -e .``."""


def _checkout_at(commit: str | None) -> Path:
    """A detached checkout of ``commit`` (``git worktree add``) in a new temporary folder, beside the clone that
    holds this package."""
    if not isinstance(commit, str) or not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        raise ValueError(f"at_commit needs the record's commit as a plain hash (not 'unknown', not '+dirty': "
                         f"uncommitted code cannot be checked out), got {commit!r}")
    if not (CLONE / ".git").exists():
        raise ValueError(f"at_commit needs a git clone of gma_teach (git clone, then pip install -e .); the "
                         f"package here is installed from {str(CLONE)!r}, which is not a clone")
    where = Path(tempfile.mkdtemp(prefix="gma_teach_at_")) / commit[:12]
    subprocess.run(["git", "-C", str(CLONE), "worktree", "add", "--detach", "--quiet", str(where), commit],
                   check=True)
    return where


def _remove_checkout(where: Path) -> None:
    """Remove a checkout of :func:`_checkout_at` and its worktree entry."""
    subprocess.run(["git", "-C", str(CLONE), "worktree", "remove", "--force", str(where)], check=False)


def reproduce(record_path: str | os.PathLike, *, seed: int | None = None,
              out_dir: str | os.PathLike | None = None, at_commit: bool = False) -> dict:
    """Re-run one recorded seed from the command its record stores and set the result beside the record.

    Args:
        record_path: a record of ``python -m gma_teach.experiments`` or ``python -m gma_teach.study``.
        seed: the seed to re-run (default: the record's first).
        out_dir: where the re-run writes its record (default: a new temporary folder); never the records' folder.
        at_commit: re-run the code of the record's own commit, checked out beside the clone (``git worktree``) and
            removed afterwards, instead of today's; needs a git clone and a record made from committed code.

    The re-run gets the record's torch thread count (through ``OMP_NUM_THREADS``), since how the work is split
    between threads changes float sums in their last bits.

    Returns ``{"record", "seed", "command", "recorded_commit", "ran_at", "rows", "headline"}``: ``ran_at`` the commit
    that ran (the record's with ``at_commit``, else ``"today"``), ``rows`` from :func:`compare_seed`, ``headline``
    ``{"kind", "name", "recorded", "reproduced", "difference", "tolerance"}`` under ``REPLAY_TOLERANCE``. On
    the machine class and commit of the record every difference is zero; the record's provenance names both.
    """
    path = Path(record_path)
    record = read_record(path) if path.suffix == ".json" else None  # the record file and its run folder, merged
    if record is None:
        raise ValueError(f"record_path must be a record (a record file, or the name of one whose runs are in its "
                         f"run folder), got {str(path)!r}")
    seed = record["runs"][0]["seed"] if seed is None and record.get("runs") else seed
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="gma_teach_reproduce_"))
    if out.resolve() == path.parent.resolve():
        raise ValueError(f"out_dir must not be the records' folder {str(path.parent)!r}: the re-run would skip or "
                         f"overwrite the recorded seeds")
    command = reproduce_command(record, seed, out)
    recorded = _recorded_run(record, seed)
    origin = recorded.get("provenance", record)
    # the recorded thread count (a study's command sets its own): float sums depend on how the work is split
    threads = {"OMP_NUM_THREADS": str(origin["threads"])} if origin.get("threads") else {}
    commit = origin.get("commit")
    checkout = _checkout_at(commit) if at_commit else None
    try:
        where = {} if checkout is None else {"cwd": str(checkout), "PYTHONPATH": str(checkout)}
        env = {**os.environ, **threads, **({"PYTHONPATH": where["PYTHONPATH"]} if where else {})}
        subprocess.run(command, check=True, env=env, **({"cwd": where["cwd"]} if where else {}))
    finally:
        if checkout is not None:
            _remove_checkout(checkout)
    written = out / (path.name if command[2] == "gma_teach.study" else REPRODUCED_FILE)
    again = _recorded_run(read_record(written), seed, lr=recorded.get("lr"))
    kind = _kind(record)
    name, tolerance = REPLAY_TOLERANCE[kind]
    value, other = headline_number(recorded, kind), headline_number(again, kind)
    return {"record": str(path), "seed": seed, "command": " ".join(command[1:]), "recorded_commit": commit,
            "ran_at": commit if at_commit else "today", "rows": compare_seed(recorded, again),
            "headline": {"kind": kind, "name": name, "recorded": value, "reproduced": other,
                         "difference": other - value, "tolerance": tolerance}}


def _kind(record: dict) -> str:
    """The kind of run a record holds (a key of ``REPLAY_TOLERANCE``): its ``experiment``, or its study's.

    Raises:
        ValueError: for a record that names neither (not a record of a run this package made)."""
    study = next((s for s in STUDIES.values() if s["name"] == record.get("study")), None)
    kind = record.get("experiment") or (study["experiment"] if study is not None else None)
    if kind not in REPLAY_TOLERANCE:
        raise ValueError(f"record must name its experiment (one of {sorted(REPLAY_TOLERANCE)}) or a declared "
                         f"study; got experiment {record.get('experiment')!r}, study {record.get('study')!r}")
    return kind


def reproduce_main(argv: list[str]) -> dict:
    """Command line: ``python -m gma_teach.experiments reproduce RECORD [--seed S] [--out-dir D] [--at-commit]``."""
    parser = argparse.ArgumentParser(prog="python -m gma_teach.experiments reproduce",
                                     description="Re-run one recorded seed from its stored command and compare.")
    parser.add_argument("record", help="a record file, e.g. book/results/lm_study_sdpa.json")
    parser.add_argument("--seed", type=int, default=None, help="the seed to re-run (default: the record's first)")
    parser.add_argument("--out-dir", default=None, help="where the re-run writes (default: a temporary folder)")
    parser.add_argument("--at-commit", action="store_true",
                        help="re-run the record's own commit (a git worktree beside the clone), not today's code")
    args = parser.parse_args(argv)
    result = reproduce(args.record, seed=args.seed, out_dir=args.out_dir, at_commit=args.at_commit)
    print(f"seed {result['seed']} of {result['record']} (recorded at commit {result['recorded_commit']}), re-run at "
          f"{result['ran_at']} as python {result['command']}")
    head = result["headline"]
    print(f"  {head['name']}: recorded {head['recorded']:.6g}, reproduced {head['reproduced']:.6g}, difference "
          f"{head['difference']:+.3g} (expected within {head['tolerance']:g} on another CPU)")
    for row in result["rows"]:
        again = "missing" if row["reproduced"] is None else f"{row['reproduced']:.6g}"
        change = "" if row["difference"] is None else f"  difference {row['difference']:+.3g}"
        print(f"  {row['name']:<28} recorded {row['recorded']:.6g}  reproduced {again}{change}")
    return result
