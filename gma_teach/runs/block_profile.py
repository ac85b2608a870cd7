"""Chapter 8: GMA's block against linear attention at equal state -- where memory and time go, and one interleaved run.

At width ``d_model`` with ``n_heads`` heads, GMA with ``K = d_model / n_heads`` components keeps a ``(K, d)`` memory
per head, as linear attention with ``d``-wide features does. Three measurements:

* :func:`saved_for_backward` -- the bytes a block's forward pass keeps for its backward pass, term by term: every
  tensor autograd saves (``torch.autograd.graph.saved_tensors_hooks``) is charged to the line of ``gma_teach`` that
  saved it, once per storage (a view keeps its whole base alive; the input and the parameters, allocated before,
  are not counted);
* :func:`time_by_operator` -- ``torch.profiler``'s self CPU time of one forward + backward call by ATen operator;
* :func:`interleaved_run` -- the mixers alternated at each ``N`` and each repeat, so that the load of a shared
  machine falls on all alike: the median seconds of a forward + backward call (training tokens/s) and the
  incremental peak memory of :func:`gma_teach.measure.peak_memory` (on a CPU, the allocator's records replayed
  from ``torch.profiler``: everything the call holds at once, activations saved for backward and transients).

Command line (the record chapter 8 reads)::

    python -m gma_teach.profiling --block --threads 1 --out book/results/profiling_block_cpu.json
"""
from __future__ import annotations

import collections
import linecache
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile
from tqdm.auto import tqdm

from .. import _checks
from ..baselines import make_mixer
from ..environment import seed_everything
from ..measure import native_stderr_silenced, peak_memory
from ..records import load_average, provenance

__all__ = ["BLOCK_MIXERS", "BLOCK_SEQ_LENS", "block_mixer", "interleaved_run", "run_block_record",
           "saved_for_backward", "time_by_operator"]

BLOCK_SEQ_LENS = (1024, 2048, 4096, 8192, 16384)
"""The lengths of the recorded run."""

BLOCK_MIXERS = {
    "gma": ("gma", {"impl": "auto"}),
    "gma (operators)": ("gma", {"impl": "operators"}),
    "linear": ("linear", {}),
    "sdpa": ("sdpa", {}),
}
"""The mixers of the run: ``label -> (mixer name, options)``. ``"gma"`` is the default path (``impl="auto"``: the
lean autograd form on a CPU); ``"gma (operators)"`` is autograd through the separate operators (``impl="linear"``
bidirectional, ``"chunked"`` causal), the path before the lean form."""

_PACKAGE_DIR = str(Path(__file__).resolve().parents[1])


def block_mixer(label, *, d_model=256, n_heads=4, causal=False):
    """The block of ``label`` (a key of ``BLOCK_MIXERS``): GMA with ``K = d_model / n_heads`` components, linear
    attention with ``d_model / n_heads`` features per head, or SDPA."""
    if label not in BLOCK_MIXERS:
        raise ValueError(f"unknown block label {label!r}; known: {', '.join(BLOCK_MIXERS)}")
    name, options = BLOCK_MIXERS[label]
    options = dict(options)
    if name == "gma":
        options["n_components"] = d_model // n_heads
        if options["impl"] == "operators":
            options["impl"] = "chunked" if causal else "linear"
    return make_mixer(name, d_model, n_heads, causal=causal, **options)


def _forward_backward(mixer, x, grad_out):
    def call():
        mixer.zero_grad(set_to_none=True)
        x.grad = None
        (mixer(x) * grad_out).sum().backward()

    return call


def _saving_line():
    """``(where, code)`` of the innermost frame of ``gma_teach`` on the stack (the line whose operation saves)."""
    frame = sys._getframe(2)
    while frame is not None and not (frame.f_code.co_filename.startswith(_PACKAGE_DIR)
                                     and "/runs/" not in frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return "torch", ""
    module = Path(frame.f_code.co_filename).stem
    code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
    return f"{module}.{frame.f_code.co_name}:{frame.f_lineno}", code


def saved_for_backward(mixer, x) -> list[dict]:
    """The bytes ``mixer(x)`` keeps for the backward pass, charged to the line of ``gma_teach`` that saved them.

    Args:
        mixer: a block ``(B, N, D) -> (B, N, D)``; x: its input.

    Returns:
        one dict per saving line, largest first: ``{"where": "module.function:line", "code": the source line,
        "bytes", "tensors"}``. A storage saved twice is counted once, where it was first saved.
    """
    existing = {t.untyped_storage().data_ptr() for t in [x, *mixer.parameters()]}
    seen, rows = set(), collections.OrderedDict()

    def pack(tensor):
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in existing and storage.data_ptr() not in seen and storage.nbytes():
            seen.add(storage.data_ptr())
            where, code = _saving_line()
            row = rows.setdefault(where, {"where": where, "code": code, "bytes": 0, "tensors": 0})
            row["bytes"] += storage.nbytes()
            row["tensors"] += 1
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = mixer(x)
    del output
    return sorted(rows.values(), key=lambda row: -row["bytes"])


def time_by_operator(mixer, x, *, repeat=3, top=8, threads=1) -> list[dict]:
    """``torch.profiler``'s self CPU time of ``repeat`` forward + backward calls (after one warm-up), by ATen
    operator: the ``top`` largest as ``{"op", "seconds" (per call), "share"}``, then ``"other"``.

    ``threads`` torch threads for the calls (restored after; ``None`` keeps the current number): one thread keeps
    the shares to the work itself on a shared machine, where threads that wait for each other at every operator
    charge their wait to whichever operator they wait in."""
    call = _forward_backward(mixer, x, torch.randn_like(x))
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(_checks.positive_int("threads", threads))
    try:
        call()
        with native_stderr_silenced(), profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(_checks.positive_int("repeat", repeat)):
                call()
    finally:
        torch.set_num_threads(before)
    events = [(e.key, e.self_cpu_time_total) for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(t for _, t in events)
    events.sort(key=lambda item: -item[1])
    rows = [{"op": op, "seconds": t / 1e6 / repeat, "share": t / total} for op, t in events[:top]]
    rest = sum(t for _, t in events[top:])
    rows.append({"op": "other", "seconds": rest / 1e6 / repeat, "share": rest / total})
    return rows


def interleaved_run(*, seq_lens=BLOCK_SEQ_LENS, labels=tuple(BLOCK_MIXERS), causal_modes=(False, True),
                    d_model=256, n_heads=4, batch_size=1, repeat=3, long_repeat=2, long_from=16384, seed=0,
                    progress=False) -> list[dict]:
    """Every mixer of ``labels`` at every ``N``, alternated: at one ``N`` and form, one warm-up call each, then
    ``repeat`` rounds (``long_repeat`` from ``N = long_from``) in which each mixer runs one timed forward + backward
    call in turn; then each mixer's peak memory (one more call, under the profiler).

    Returns:
        one row per (form, N, mixer): ``{"label", "causal", "seq_len", "seconds" (median), "times",
        "tokens_per_second", "peak_memory_bytes", "d_model", "n_heads", "batch_size"}``.
    """
    rows = []
    jobs = [(causal, n) for causal in causal_modes for n in seq_lens]
    for causal, n in tqdm(jobs, desc="block run", disable=not progress or bool(os.environ.get("CI"))):
        seed_everything(seed)
        mixers = {label: block_mixer(label, d_model=d_model, n_heads=n_heads, causal=causal) for label in labels}
        x = torch.randn(batch_size, n, d_model, requires_grad=True)
        grad_out = torch.randn_like(x)
        calls = {label: _forward_backward(mixer, x, grad_out) for label, mixer in mixers.items()}
        for call in calls.values():
            call()
        times = {label: [] for label in labels}
        for _ in range(repeat if n < long_from else long_repeat):
            for label, call in calls.items():
                start = time.perf_counter()
                call()
                times[label].append(time.perf_counter() - start)
        for label, call in calls.items():
            seconds = statistics.median(times[label])
            rows.append({"label": label, "causal": causal, "seq_len": n, "seconds": seconds,
                         "times": times[label], "tokens_per_second": batch_size * n / seconds,
                         "peak_memory_bytes": peak_memory(call), "d_model": d_model, "n_heads": n_heads,
                         "batch_size": batch_size})
    return rows


def run_block_record(*, seq_lens=BLOCK_SEQ_LENS, repeat=3, long_repeat=2, breakdown_len=4096, command=None,
                     progress=False) -> dict:
    """The record of chapter 8's equal-state comparison: :func:`interleaved_run` at width 256, 4 heads (``K = 64``
    against 64 features per head), and the term-by-term breakdown of both GMA paths and linear attention at
    ``N = breakdown_len`` (:func:`saved_for_backward`, :func:`time_by_operator`), with provenance and the load
    before and after."""
    origin = provenance(command or "gma_teach.profiling.run_block_record", "cpu")
    config = {"d_model": 256, "n_heads": 4, "n_components": 64, "features_per_head": 64, "batch_size": 1,
              "seq_lens": list(seq_lens), "repeat": repeat, "long_repeat": long_repeat,
              "breakdown_len": breakdown_len}
    breakdown = {}
    for causal in (False, True):
        form = "causal" if causal else "bidirectional"
        for label in ("gma", "gma (operators)", "linear"):
            seed_everything(0)
            mixer = block_mixer(label, causal=causal)
            x = torch.randn(1, breakdown_len, 256, requires_grad=True)
            breakdown[f"{form}/{label}"] = {"saved": saved_for_backward(mixer, x),
                                            "time": time_by_operator(mixer, x)}
    results = interleaved_run(seq_lens=seq_lens, repeat=repeat, long_repeat=long_repeat, progress=progress)
    return {**origin, "load_after": load_average(), "config": config, "results": results, "breakdown": breakdown}
