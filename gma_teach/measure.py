"""Measuring time and memory the same way everywhere in the book.

Speed is reported as ratios of times measured in one run (never as timed unit tests). Memory is the *incremental*
peak: the most bytes that ``fn`` held at once beyond what existed before it started.

* On CUDA: ``torch.cuda.max_memory_allocated`` after ``reset_peak_memory_stats``.
* On a CPU, torch has no peak counter, so we replay the allocator's own record: ``torch.profiler`` with
  ``profile_memory=True`` gives every operator the bytes it allocated net of what it freed
  (``self_cpu_memory_usage``) and lists frees outside operators as ``[memory]`` events; the running sum of those
  numbers in time order is the memory held by tensors that ``fn`` created, and its maximum is the peak. Scratch
  space that one operator allocates and frees inside itself, Python objects and allocator caching are not
  counted, which is what we want when comparing the activations of two algorithms.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
from typing import Callable

import torch


def _synchronize(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], *, warmup: int = 1, repeat: int = 5, device=None) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeat`` calls after ``warmup`` calls (CUDA synchronized)."""
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    device = torch.device(device) if device is not None else None
    for _ in range(warmup):
        fn()
    _synchronize(device)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        _synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_memory(fn: Callable[[], object], *, device=None) -> int:
    """Incremental peak bytes held by tensors that ``fn()`` allocates on ``device`` (default: CPU).

    See the module docstring for how this is measured on a CPU and on CUDA.
    """
    device = torch.device(device) if device is not None else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return max(0, torch.cuda.max_memory_allocated(device) - before)
    if device.type != "cpu":
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device}")
    from torch.profiler import ProfilerActivity, profile

    with _native_stderr_silenced(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [
        (event.time_range.start, event.self_cpu_memory_usage)
        for event in prof.events()
        if event.self_cpu_memory_usage
    ]
    held = peak = 0
    for _, size in sorted(events, key=lambda item: item[0]):
        held += size
        peak = max(peak, held)
    return peak


@contextlib.contextmanager
def _native_stderr_silenced():
    """Send file descriptor 2 to /dev/null for the block: the profiler's C++ start/stop log lines would
    otherwise land in notebook outputs. Python exceptions are unaffected (they are raised, not printed)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real descriptor (some notebook front ends)
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def hardware(device=None) -> dict:
    """What a number was measured on: CPU model, cores and torch threads; GPU name, capability and CUDA version."""
    import platform

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


def git_commit() -> str:
    """The commit of the package's checkout, with ``+dirty`` if tracked files changed; ``"unknown"`` outside one."""
    import subprocess
    from pathlib import Path

    folder = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=folder,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return commit + ("+dirty" if dirty else "")


def provenance(command: str | None = None, device=None) -> dict:
    """``{"hardware", "date", "commit", "command"}`` for a recorded result (date in UTC, ISO 8601)."""
    import datetime

    return {"hardware": hardware(device),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "commit": git_commit(),
            "command": command or " ".join(["python"] + sys.argv)}


def results_folder() -> "Path":
    """The folder of recorded result files (``gma_teach/results``), shipped with the package so that a notebook
    opened alone (on Colab, say) finds them too."""
    from pathlib import Path

    return Path(__file__).resolve().parent / "results"
