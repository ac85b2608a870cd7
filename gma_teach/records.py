"""Where a recorded result comes from, where records live, and the one way to write one.

* provenance: :func:`provenance` (one schema for every result file: ``PROVENANCE_KEYS``), :func:`hardware`,
  :func:`load_average`, :func:`git_commit`;
* the records' folder: :func:`results_folder` (``book/results/`` in a clone, ``gma_teach/results/`` in a wheel);
* :func:`write_record`: every record is written atomically, so that an interrupted run never leaves half a file
  where a finished record stood;
* the run store: :func:`write_run`, :func:`read_runs`, :func:`claim_run` and :func:`release_run`. A record that many
  processes add runs to (a study's arm) keeps each finished run in a file of its own, in the folder
  :func:`run_folder` beside the record, and is merged when read; a run about to start is claimed by a file linked into
  place only if absent (``os.link``), so that two processes never train the same run.

Why one file per run rather than a lock around a merge: a file written once, by the one process that ran it, and
never rewritten needs no lock, so nothing can be lost whatever the other processes do, however they die, on one
machine or on several sharing a folder (locks on network file systems, where a cluster's processes meet, are not
to be trusted); and a run killed mid-way leaves no file at all, only its claim, which the next process on that
machine sees is stale (its process is gone) and takes over.

A leaf of the package: it imports torch and the standard library only.
"""
from __future__ import annotations

import datetime
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

import torch

__all__ = ["PROVENANCE_KEYS", "RECORDS_IN_THE_CLONE", "claim_run", "git_commit", "hardware", "load_average",
           "provenance", "read_runs", "release_run", "results_folder", "run_folder", "write_record", "write_run"]


def hardware(device=None) -> dict:
    """What a number was measured on: CPU model, cores and torch threads; GPU name, capability and CUDA version."""
    device = torch.device(device) if device is not None else torch.device("cpu")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    info = {"cpu": cpu, "logical_cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "torch": torch.__version__, "python": platform.python_version(), "platform": platform.platform(),
            "device": str(device)}
    if device.type == "cuda":
        major, minor = torch.cuda.get_device_capability(device)
        info.update(gpu=torch.cuda.get_device_name(device), capability=f"sm_{major}{minor}", cuda=torch.version.cuda)
    return info


#: Where a clone of the repository keeps the recorded result files, relative to its root.
RECORDS_IN_THE_CLONE = "book/results"


def git_commit(folder: str | os.PathLike | None = None) -> str:
    """The commit of the checkout that holds ``folder`` (default: the package's own folder), with ``+dirty`` if
    tracked files other than the records changed; ``"unknown"`` outside a checkout.

    The records' folder (``book/results/``) is left out of the check: a study saves each seed's record as it
    finishes, and that output must not mark the code of the next seed as changed. A tool run from a clone whose
    package is installed (not editable) passes the clone's folder, so that the record names the clone's commit."""
    folder = Path(__file__).resolve().parent if folder is None else Path(folder)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ":(top)",
                                f":(top,exclude){RECORDS_IN_THE_CLONE}"], cwd=folder, capture_output=True, text=True,
                               timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def load_average() -> list[float] | None:
    """The system's 1, 5 and 15 minute load averages (runnable processes; compare with the core count), rounded to
    0.01; ``None`` where the system has none (Windows). Record it before and after a run on a shared machine."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):
        return None


#: The keys every recorded result file starts with (:func:`provenance`).
PROVENANCE_KEYS = ("hardware", "threads", "load", "date", "commit", "command")


_PROCESS_COMMIT: list[str] = []  # the package's commit when this process first took a provenance


def _commit_of_this_process() -> str:
    """:func:`git_commit` of the package, read once per process: a study runs its seeds one after another for
    hours while the checkout may move on, and every seed runs the code the process imported at its start."""
    if not _PROCESS_COMMIT:
        _PROCESS_COMMIT.append(git_commit())
    return _PROCESS_COMMIT[0]


def provenance(command: str | None = None, device=None) -> dict:
    """Where, when, how and from which code a recorded result was made: one schema for every result file.

    Take it *before* the run, so that ``commit`` and ``load`` describe the code that ran and the machine as the
    run found it.

    Returns:
        ``{"hardware": dict (see :func:`hardware`), "threads": torch's CPU threads, "load": the 1, 5 and 15 minute
        load averages (``None`` where the system has none), "date": UTC ISO 8601, "commit": :func:`git_commit`
        when this process first took a provenance (the code it runs, however far the checkout moves since),
        "command": the command line}`` -- the keys of ``PROVENANCE_KEYS``, in that order.
    """
    return {"hardware": hardware(device),
            "threads": torch.get_num_threads(),
            "load": load_average(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": _commit_of_this_process(),
            "command": command or " ".join(["python"] + sys.argv)}


def results_folder() -> Path:
    """The folder of recorded result files.

    In a clone of the repository it is ``book/results/``, beside the chapters that read it. The wheel carries the
    same files as ``gma_teach/results/`` (``pyproject.toml`` maps the one folder onto the other), so that an installed
    package, and a notebook opened alone on Colab, finds them too. The clone's folder wins when both exist."""
    package = Path(__file__).resolve().parent
    in_the_clone = package.parent / RECORDS_IN_THE_CLONE
    return in_the_clone if in_the_clone.is_dir() else package / "results"


def write_record(path: str | os.PathLike, record: dict) -> Path:
    """Write ``record`` as JSON (indent 1; objects JSON cannot hold, as ``str``) to ``path``, atomically.

    The text goes to a temporary file in the same folder, is flushed to disk (``fsync``), and then replaces
    ``path`` in one step (``os.replace``): a reader sees the old record or the new one, never a part. The folder is
    created if needed.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict, got {type(record).__name__}")
    path = Path(path)
    text = json.dumps(record, indent=1, default=str) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")  # same folder: os.replace stays one step
    try:
        with open(temporary, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)  # only left when writing failed
    return path


RUN_FOLDER_SUFFIX = ".runs"
"""The run folder of record ``<name>.json`` is ``<name>.runs`` beside it (:func:`run_folder`)."""


def run_folder(record_path: str | os.PathLike) -> Path:
    """The folder that holds the runs of the record at ``record_path``, one file each: ``<stem>.runs`` beside it
    (``book/results/capacity_linear.json`` -> ``book/results/capacity_linear.runs/``)."""
    record_path = Path(record_path)
    return record_path.with_name(record_path.stem + RUN_FOLDER_SUFFIX)


def _run_name(name: str) -> str:
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise ValueError(f"name must be a run's file name without folders or a leading dot, got {name!r}")
    return name


def write_run(record_path: str | os.PathLike, name: str, payload: dict) -> Path:
    """Write one finished run of the record at ``record_path`` to its own file, ``<run_folder>/<name>.json``,
    atomically (:func:`write_record`). Each run is written once, by the process that ran it: no other file is read
    or rewritten, so no concurrent writer can lose it.

    Returns:
        the run's file.
    """
    return write_record(run_folder(record_path) / f"{_run_name(name)}.json", payload)


def read_runs(record_path: str | os.PathLike) -> list[dict]:
    """Every finished run of the record at ``record_path`` (:func:`write_run`), in the order of their file names;
    ``[]`` when none is there. A file still being written is not read (it is renamed into place only when whole)."""
    folder = run_folder(record_path)
    if not folder.is_dir():
        return []
    return [json.loads(file.read_text()) for file in sorted(folder.glob("*.json")) if not file.name.startswith(".")]


def _claim_path(record_path, name: str) -> Path:
    return run_folder(record_path) / f"{_run_name(name)}.claim"


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True


def _is_stale(holder: dict) -> bool:
    """Whether a claim's process is known to be gone: only a process of this machine can be looked up."""
    return holder.get("host") == socket.gethostname() and not _process_alive(int(holder.get("pid", -1)))


def claim_run(record_path: str | os.PathLike, name: str, command: str | None = None) -> dict | None:
    """Claim run ``name`` of the record at ``record_path`` before training it, so that no other process trains it
    too: the claim file is linked into place only if none is there (``os.link`` fails on an existing file: one
    step for the file system, and a claim is never seen half written).

    A claim left by a process of this machine that no longer runs (killed mid-run) is stale: it is moved aside
    (one ``os.rename``, which only one of several resuming processes can win) and claimed again. A claim of
    another machine is honoured: delete its file by hand if that machine's process is known to be dead.

    Returns:
        ``None`` when this process now holds the claim (train, then :func:`release_run`); otherwise the holder's
        ``{"host", "pid", "date", "command"}``.
    """
    path = _claim_path(record_path, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    mine = {"host": socket.gethostname(), "pid": os.getpid(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "command": command or " ".join(["python"] + sys.argv)}
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    temporary.write_text(json.dumps(mine))
    try:
        for _ in range(3):
            try:
                os.link(temporary, path)  # whole or not at all, and only if no claim is there
                return None
            except FileExistsError:
                try:
                    holder = json.loads(path.read_text())
                except FileNotFoundError:  # released meanwhile: try again
                    continue
                if not _is_stale(holder):
                    return holder
                moved = path.with_name(f".{path.name}.stale.{os.getpid()}")
                try:
                    path.rename(moved)  # of several resuming processes, one moves it
                    moved.unlink()
                except FileNotFoundError:
                    pass
        holder = json.loads(path.read_text()) if path.exists() else None
        return holder or {"host": "?", "pid": -1, "date": "?", "command": "a claim that kept changing"}
    finally:
        temporary.unlink(missing_ok=True)


def release_run(record_path: str | os.PathLike, name: str) -> None:
    """Give up this process's claim on run ``name`` (after its file is written, or when training failed)."""
    path = _claim_path(record_path, name)
    try:
        holder = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return
    if holder.get("pid") == os.getpid() and holder.get("host") == socket.gethostname():
        path.unlink(missing_ok=True)
