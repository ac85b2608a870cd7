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

The module holds every numeric helper a measurement needs, so that chapters, the benchmark, the profiling sweep and
the experiments measure, fit and record the same way:

* timing and memory: :func:`time_call`, :func:`compare_timings` (several forms, interleaved, minimum over repeats,
  threads fixed), :func:`peak_memory`;
* sweeps that survive: :func:`run_point` runs one sweep point and returns ``None`` (with a printed note) when it
  runs out of memory or a cost model says it will not fit;
* fits that only see points that ran: :func:`loglog_slope`, :func:`crossover`, and :func:`check_slope` /
  :func:`checked_slopes`, which print a note instead of a wrong claim when a fitted slope is not what the cost
  model allows (:func:`format_note` wraps a note to the page);
* records: :func:`provenance` (one schema for every result file) and :func:`results_folder` live in
  :mod:`gma_teach.records` (with :func:`~gma_teach.records.write_record`) and are readable here too.
"""
from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from . import _checks
from .records import (  # provenance lives in gma_teach.records; its names stay readable here, as the book uses them
    PROVENANCE_KEYS,
    RECORDS_IN_THE_CLONE,
    git_commit,
    hardware,
    load_average,
    provenance,
    results_folder,
)

__all__ = ["PAGE_WIDTH", "TERMINAL_WIDTH", "PROVENANCE_KEYS", "RECORDS_IN_THE_CLONE", "SlopeCheck", "check_slope",
           "checked_slopes", "compare_timings", "crossover", "format_note", "git_commit", "hardware",
           "is_out_of_memory", "load_average", "loglog_slope", "native_stderr_silenced", "peak_memory", "provenance",
           "results_folder", "run_point", "time_call"]


def _synchronize(device: torch.device | None) -> None:
    if device is not None and device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], *, warmup: int = 1, repeat: int = 5, device=None) -> float:
    """Median wall-clock seconds of ``fn()`` over ``repeat`` calls after ``warmup`` calls (CUDA synchronized)."""
    repeat = _checks.positive_int("repeat", repeat)
    warmup = _checks.integer("warmup", warmup, minimum=0)
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
    with native_stderr_silenced(), profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
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
def native_stderr_silenced():
    """Send file descriptor 2 to /dev/null for the block (a context manager): the profiler's C++ start/stop log
    lines would otherwise land in notebook outputs. Python exceptions are unaffected (they are raised, not
    printed)."""
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


# ------------------------------------------------------------------------------------ timings a reader can believe
def compare_timings(fns: Mapping[str, Callable[[], object]], *, repeat: int = 5, warmup: int = 1,
                    threads: int | None = 1, device=None,
                    timer: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """The fastest of ``repeat`` timed calls of each form, measured so that the forms can be compared.

    Three habits make timings on a busy machine comparable:

    * the torch CPU thread count is fixed (``threads``; one thread by default: on a shared machine, threads that
      wait for each other make timings swing by orders of magnitude) and restored afterwards, even on error;
    * every form is called ``warmup`` times first (allocator, caches, lazy initialisation), not timed;
    * the forms are *interleaved*: each repeat calls every form once, in the order of ``fns``, so a burst of
      load from other programs slows all of them alike instead of one whole form;

    and the *minimum* over repeats is kept: noise only ever adds time, so the fastest call is the best estimate
    of what the form itself costs.

    Args:
        fns: ``{name: fn}``, each ``fn()`` one call of a form (its result is ignored); empty when every form of a
            sweep point was skipped (the result is then empty too).
        repeat: timed calls of each form (>= 1).
        warmup: untimed calls of each form first (>= 0).
        threads: torch CPU threads during the measurement, or ``None`` to keep the current setting.
        device: synchronize this CUDA device around every call (``None`` or a CPU device: no synchronization).
        timer: the clock, in seconds (``time.perf_counter``; tests pass a fake one).

    Returns:
        ``{name: seconds}``, the minimum over the repeats, in the order of ``fns``.

    Example::

        seconds = compare_timings({"softmax": lambda: softmax(q, k, v), "gma": lambda: gma(q, k, v, *mix)})
    """
    if not isinstance(fns, Mapping):
        raise TypeError(f"fns must be a mapping name -> callable, got {type(fns).__name__}")
    for name, fn in fns.items():
        if not callable(fn):
            raise TypeError(f"fns[{name!r}] must be callable, got {type(fn).__name__}")
    repeat = _checks.positive_int("repeat", repeat)
    warmup = _checks.integer("warmup", warmup, minimum=0)
    if threads is not None:
        threads = _checks.positive_int("threads", threads)
    device = torch.device(device) if device is not None else None
    saved_threads = torch.get_num_threads()
    best = {name: math.inf for name in fns}
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        for _ in range(warmup):
            for fn in fns.values():
                fn()
        _synchronize(device)
        for _ in range(repeat):
            for name, fn in fns.items():
                start = timer()
                fn()
                _synchronize(device)
                best[name] = min(best[name], timer() - start)
    finally:
        torch.set_num_threads(saved_threads)
    return best


# ------------------------------------------------------------------------------------------ sweeps that survive
def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` says that an allocation failed: CUDA's ``OutOfMemoryError``, Python's ``MemoryError``,
    or a ``RuntimeError`` from torch's CPU allocator (``can't allocate memory``) or any device (``out of memory``)."""
    if isinstance(error, (MemoryError, torch.cuda.OutOfMemoryError)):
        return True
    if isinstance(error, RuntimeError):
        message = str(error).lower()
        return any(phrase in message for phrase in ("out of memory", "can't allocate memory",
                                                    "cannot allocate memory", "failed to allocate"))
    return False


def run_point(fn: Callable[[], object], *, label: str = "this point",
              fits: bool | Callable[[], bool] | None = None,
              printer: Callable[[str], object] | None = print):
    """Run one point of a sweep; ``None`` (and a printed note) when it does not fit, so the sweep goes on.

    A point is skipped, not run, when ``fits`` says so: a cost model's prediction (for example from
    ``gma_teach.cost``) given as a bool or as a callable without arguments that returns one. A point that runs
    and fails to allocate memory (:func:`is_out_of_memory`) is skipped too, after releasing CUDA's cached blocks.
    Every other error propagates: a bug is not a gap.

    Record a skipped point as ``math.nan`` (or leave it out): :func:`loglog_slope` and :func:`crossover` fit only
    the points that ran.

    Args:
        fn: the measurement, called without arguments.
        label: how the note names the point (e.g. ``"softmax at N=16384"``).
        fits: ``False`` (or a callable returning ``False``) skips the point without running it; ``None`` runs it.
        printer: where the note goes (``print``; ``None`` keeps quiet).

    Returns:
        ``fn()``'s result, or ``None`` when the point was skipped.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    predicted = fits() if callable(fits) else fits
    if predicted is not None and not isinstance(predicted, (bool, np.bool_)):
        raise TypeError(f"fits must be a bool, a callable returning one, or None; got {type(predicted).__name__}")
    if predicted is not None and not predicted:
        if printer is not None:
            printer(f"skipped {label}: predicted not to fit in this device's memory")
        return None
    try:
        return fn()
    except Exception as error:  # only allocation failures become a gap; every other error is re-raised
        if not is_out_of_memory(error):
            raise
        failure = type(error).__name__
    # Out of the handler, the traceback (whose frames hold the point's tensors) is gone: now the memory can go back.
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    if printer is not None:
        printer(f"skipped {label}: out of memory ({failure})")
    return None


# --------------------------------------------------------------------------------- fits that see only what ran
def _points_that_ran(sizes, **series) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``sizes`` and each series as float arrays, without the sizes where any series is missing (``None``, NaN or
    infinite: a sweep point that was skipped or ran out of memory)."""
    def as_floats(name, values):
        if isinstance(values, torch.Tensor):
            values = values.detach().to("cpu", torch.float64).reshape(-1).tolist()
        if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
            raise TypeError(f"{name} must be a sequence of numbers, got {type(values).__name__}")
        try:
            return np.array([math.nan if value is None else value for value in values], dtype=np.float64).ravel()
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name} must be a sequence of numbers, got {list(values)!r}") from error

    x = as_floats("sizes", sizes)
    if not np.isfinite(x).all():
        raise ValueError(f"sizes must be finite numbers, got {x.tolist()}")
    arrays = {name: as_floats(name, values) for name, values in series.items()}
    for name, y in arrays.items():
        if y.shape != x.shape:
            raise ValueError(f"sizes and {name} must have the same length, got {x.size} and {y.size}")
    ran = np.logical_and.reduce([np.isfinite(y) for y in arrays.values()])
    return x[ran], {name: y[ran] for name, y in arrays.items()}


def loglog_slope(sizes: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope of ``log(values)`` against ``log(sizes)``: the exponent ``p`` in ``value ~ size**p``.

    Points whose value is missing (``None``, NaN or infinite: a sweep point that was skipped or ran out of
    memory) are left out, so the fit sees only the points that ran.

    Raises:
        ValueError: fewer than two points that ran, different lengths, or a size or value that is not positive.
    """
    x, series = _points_that_ran(sizes, values=values)
    y = series["values"]
    if x.size < 2:
        raise ValueError(f"need at least 2 points that ran to fit a slope, got {x.size}")
    if (x <= 0).any() or (y <= 0).any():
        raise ValueError(f"sizes and values must be positive to fit on log-log axes, got sizes {x.tolist()} and "
                         f"values {y.tolist()}")
    slope, _ = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope)


def crossover(sizes: Sequence[float], faster_later: Sequence[float], slower_first: Sequence[float]) -> float | None:
    """The size at which ``faster_later`` starts to beat ``slower_first`` (two costs measured at the same sizes).

    The ratio ``faster_later / slower_first`` is followed along increasing sizes; the crossover is where it first
    falls to 1, interpolated on log-log axes between the two neighbouring sizes. Sizes where either cost is
    missing (``None``, NaN, infinite) are left out.

    Returns:
        the crossover size; the smallest size if ``faster_later`` is already no slower there; ``None`` if it is
        slower at every size.

    Raises:
        ValueError: fewer than two sizes where both costs were measured, different lengths, non-positive values.
    """
    x, costs = _points_that_ran(sizes, faster_later=faster_later, slower_first=slower_first)
    if x.size < 2:
        raise ValueError(f"need at least 2 sizes where both costs were measured to find a crossover, got {x.size}")
    if (x <= 0).any() or any((cost <= 0).any() for cost in costs.values()):
        raise ValueError(f"sizes and costs must be positive to interpolate on log-log axes, got sizes {x.tolist()}, "
                         f"costs {[cost.tolist() for cost in costs.values()]}")
    order = np.argsort(x)
    x = x[order]
    log_ratio = np.log(costs["faster_later"][order] / costs["slower_first"][order])
    if log_ratio[0] <= 0:
        return float(x[0])
    for i in range(1, x.size):
        if log_ratio[i] <= 0 < log_ratio[i - 1]:
            t = log_ratio[i - 1] / (log_ratio[i - 1] - log_ratio[i])
            return float(np.exp(np.log(x[i - 1]) + t * np.log(x[i] / x[i - 1])))
    return None


def check_slope(slope: float, expected_range: tuple[float, float], *, label: str = "this form",
                quantity: str = "time") -> str | None:
    """``None`` when a fitted slope lies in ``expected_range``, else a note to print instead of a claim.

    Use it where prose would say "grows linearly": the range comes from what the cost model allows (for example
    ``(0.7, 1.3)`` for a linear form measured at sizes large enough to hide fixed costs). A slope outside it on a
    busy machine (``0.02``, ``-2.68``) says more about the other programs running than about the algorithm.

    Args:
        slope: the fitted log-log slope (NaN: too few points ran).
        expected_range: ``(low, high)`` inclusive.
        label: the form, as the note names it.
        quantity: what was fitted (``"time"``, ``"memory"``).

    Returns:
        ``None``, or a one-line note.
    """
    low, high = _checked_range(expected_range)
    if not isinstance(slope, (int, float, np.floating)) or isinstance(slope, bool):
        raise TypeError(f"slope must be a number, got {type(slope).__name__}")
    if math.isnan(slope):
        return f"{label}: too few sizes ran to fit a {quantity} slope; no claim about its growth from this run"
    if low <= slope <= high:
        return None
    return (f"{label}: the measured {quantity} slope {slope:.2f} is outside {low:.3g}..{high:.3g}, the range its "
            f"cost allows at these sizes; these measurements are too disturbed (other programs, fixed per-call "
            f"costs) to read a growth rate from")


PAGE_WIDTH = 75
"""The characters a printed line may use, which is what a code block of the book shows at the theme's default
width. It is defined once here; the exercise checkers wrap their messages at it and ``.ci/check_book.py`` holds
every printed line of the built book to it."""

TERMINAL_WIDTH = 120
"""The characters a line printed by a command (``python -m gma_teach.study ... --summary``) may use, a terminal's,
wider than the book's page (:data:`PAGE_WIDTH`)."""


def format_note(note: str, *, width: int = PAGE_WIDTH) -> str:
    """``"note: " + note`` wrapped at ``width`` characters, continuation lines indented by four spaces: a note of
    :func:`check_slope` (a sentence or two, with numbers of any length) printed so that every line fits the page."""
    if not isinstance(note, str):
        raise TypeError(f"note must be a str, got {type(note).__name__}")
    width = _checks.integer("width", width, minimum=20)
    return textwrap.fill(f"note: {note}", width=width, subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)


def _checked_range(expected_range) -> tuple[float, float]:
    try:
        low, high = (float(value) for value in expected_range)
    except (TypeError, ValueError) as error:
        raise TypeError(f"expected_range must be a pair (low, high) of numbers, got {expected_range!r}") from error
    if not low <= high:
        raise ValueError(f"expected_range must have low <= high, got {expected_range!r}")
    return low, high


@dataclass
class SlopeCheck:
    """What :func:`checked_slopes` found.

    Attributes:
        values: ``{name: values}`` of the measurement the slopes come from (the repeat, when there was one).
        slopes: ``{name: slope}`` for every name with at least two points that ran (NaN otherwise).
        notes: ``{name: note}`` for every checked name whose slope stayed outside its range (print them with
            :func:`format_note`).
        remeasured: whether the first measurement had a slope outside its range and was repeated.
    """

    values: dict
    slopes: dict
    notes: dict
    remeasured: bool


def checked_slopes(measure: Callable[[], Mapping[str, Sequence[float]]], sizes: Sequence[float],
                   expected: Mapping[str, tuple[float, float]], *, fit_last: int | None = None,
                   quantity: str = "time") -> SlopeCheck:
    """Measure, fit a log-log slope per form, re-measure once if a slope is not what the cost allows.

    ``measure()`` runs the whole sweep and returns ``{name: values}`` (one value per size; NaN or ``None`` for a
    point that did not run). If a name of ``expected`` gets a slope outside its range, the whole sweep runs once
    more (all forms, so they stay interleaved) and the second measurement is kept; a slope still outside its range
    then gets a note (:func:`check_slope`) instead of standing as a claim.

    Args:
        measure: runs the sweep; called once or twice.
        sizes: the sizes of the sweep, shared by every form.
        expected: ``{name: (low, high)}``, the slopes the cost model allows; names not listed are fitted, not checked.
        fit_last: fit on the last ``fit_last`` sizes only (small sizes are dominated by fixed costs).
        quantity: what the values are (``"time"``, ``"memory"``), for the notes.

    Returns:
        a :class:`SlopeCheck`.
    """
    if not callable(measure):
        raise TypeError(f"measure must be callable, got {type(measure).__name__}")
    if fit_last is not None:
        fit_last = _checks.integer("fit_last", fit_last, minimum=2)
    ranges = {name: _checked_range(bounds) for name, bounds in expected.items()}

    def fit(values):
        missing = set(ranges) - set(values)
        if missing:
            raise ValueError(f"measure() returned no values for {sorted(missing)}, which expected names")
        slopes = {}
        for name, series in values.items():
            x, y = list(sizes), list(series)
            if fit_last is not None:
                x, y = x[-fit_last:], y[-fit_last:]
            try:
                slopes[name] = loglog_slope(x, y)
            except ValueError as error:
                if "at least 2" not in str(error):
                    raise
                slopes[name] = math.nan
        return slopes

    def outside(slopes):
        return [name for name, (low, high) in ranges.items() if not low <= slopes[name] <= high]

    values = {name: list(series) for name, series in measure().items()}
    slopes = fit(values)
    remeasured = bool(outside(slopes))
    if remeasured:
        values = {name: list(series) for name, series in measure().items()}
        slopes = fit(values)
    notes = {name: check_slope(slopes[name], ranges[name], label=name, quantity=quantity)
             for name in outside(slopes)}
    return SlopeCheck(values=values, slopes=slopes, notes=notes, remeasured=remeasured)

