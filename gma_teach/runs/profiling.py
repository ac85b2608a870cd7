"""Chapter 8: the paper's Table 1 protocol -- one mixing block, forward + backward, memory and tokens/s.

Protocol (Section 5.1 of the paper): every mixer is one block of the same width ``d_model`` and heads ``n_heads``
(:func:`gma_teach.make_mixer`), fed a synthetic input ``x (B, N, d_model)`` with ``requires_grad=True``. One call is
``mixer(x)`` followed by a backward pass of ``(y * g).sum()`` for a fixed random ``g``.

* Memory is the *incremental* peak of that call from :func:`gma_teach.measure.peak_memory`: on CUDA
  ``max_memory_allocated`` minus what was allocated before; on a CPU the running sum of the allocator's records
  from ``torch.profiler`` (what tensors created during the call held at most). Parameters and the input are
  allocated before and not counted; parameter gradients are (they are created in the call).
* Speed is ``B * N`` tokens divided by the median of ``repeat`` timed calls (:func:`gma_teach.measure.time_call`,
  after one warm-up call).

Sweeps: every mixer over the sequence lengths ``seq_lens`` (GMA with ``n_components`` K), and GMA over
``k_values`` at one length ``k_sweep_len``. :func:`fit_slopes` fits ``log(memory) = a + p log(N)`` by least
squares: ``p ~ 1`` is linear memory, ``p ~ 2`` quadratic.

Command line (writes a JSON file with hardware, date, commit and command)::

    python -m gma_teach.profiling --scale small --out book/results/profiling_cpu.json

With ``--block``, the equal-state comparison of GMA's block with linear attention's and SDPA's
(:mod:`gma_teach.runs.block_profile`)::

    python -m gma_teach.profiling --block --threads 1 --out book/results/profiling_block_cpu.json
"""
from __future__ import annotations

import argparse
import functools
import os
import shlex
import sys

import torch
from tqdm.auto import tqdm

from .. import _checks, cost
from .. import mixers as mixer_registry  # `mixers` is sweep()'s argument
from ..baselines import make_mixer
from ..environment import SCALES, preset, seed_everything
from ..layer import DEFAULT_COMPONENTS
from ..measure import peak_memory, run_point, time_call
from ..models import parameter_counts
from ..records import provenance, write_record
from .block_profile import BLOCK_SEQ_LENS, run_block_record
from .profile_tables import (
    PAPER_TABLE_1,
    block_ratios,
    fit_slopes,
    format_block_table,
    format_table,
    label_of,
    load_recorded,
    n_sweep,
)

__all__ = ["DEFAULT_MIXERS", "PAPER_TABLE_1", "block_fits", "fit_slopes", "format_table", "label_of", "load_recorded",
           "main", "n_sweep", "profile_mixer", "run_recorded", "sweep", "sweep_config", "table1_options"]

DEFAULT_MIXERS = mixer_registry.LiveNames(mixer_registry.table1_names)
"""The mixers the sweep measures by default, those with a place in the Table 1 protocol (their registry entry's
``table1_options``), in the package's order of mixers; read from the registry when used, so a mixer registered with
Table 1 options joins the sweep."""


def table1_options(name, *, seq_len, n_components=DEFAULT_COMPONENTS, n_features=256, linformer_k=256):
    """The options the Table 1 protocol gives mixer ``name`` at length ``seq_len`` (for :func:`gma_teach.make_mixer`),
    as its registry entry states them (:class:`gma_teach.mixers.MixerEntry`): GMA's K, Performer's features,
    Linformer's ``k`` and ``max_seq_len = N`` (so its parameters grow with N, as in the paper); ``{}`` for the others.
    (The experiments' options, sized by a chapter's preset, are :func:`gma_teach.experiments.mixer_options`.)"""
    options = mixer_registry.entry(name).table1_options
    if options is None:
        return {}
    return options(seq_len=seq_len, n_components=n_components, n_features=n_features, linformer_k=linformer_k)


def profile_mixer(name, *, d_model, n_heads, seq_len, batch_size=1, repeat=3, device=None, dtype=torch.float32,
                  seed=0, options=None, measure_memory=True):
    """Measure one mixer at one size (forward + backward).

    Args:
        name: a mixer name (:data:`gma_teach.baselines.MIXER_NAMES`).
        d_model, n_heads, seq_len, batch_size: the block and its input ``(B, N, d_model)``.
        repeat: timed calls (median).
        device, dtype: where and in which precision (default: CPU, float32).
        options: mixer options (default :func:`table1_options`).
        measure_memory: also measure the incremental peak memory (one extra call).

    Returns:
        a dict with ``mixer, label, seq_len, n_components, batch_size, d_model, n_heads, params,
        peak_memory_bytes, seconds, tokens_per_second, device, dtype``.
    """
    if name not in mixer_registry.registered_names():
        raise ValueError(f"unknown mixer name {name!r}; known names: {', '.join(mixer_registry.registered_names())}")
    device = torch.device(device) if device is not None else torch.device("cpu")
    options = table1_options(name, seq_len=seq_len) if options is None else dict(options)
    seed_everything(seed)
    mixer = make_mixer(name, d_model, n_heads, **options).to(device=device, dtype=dtype)
    x = torch.randn(batch_size, seq_len, d_model, device=device, dtype=dtype, requires_grad=True)
    grad_out = torch.randn_like(x)

    def forward_backward():
        mixer.zero_grad(set_to_none=True)
        x.grad = None
        (mixer(x) * grad_out).sum().backward()

    seconds = time_call(forward_backward, warmup=1, repeat=repeat, device=device)
    memory = None
    if measure_memory:
        mixer.zero_grad(set_to_none=True)
        x.grad = None
        memory = peak_memory(forward_backward, device=device)
    k = options.get("n_components")
    return {"mixer": name, "label": label_of(name, k), "seq_len": seq_len, "n_components": k,
            "batch_size": batch_size, "d_model": d_model, "n_heads": n_heads,
            "params": parameter_counts(mixer)["mixer"], "peak_memory_bytes": memory, "seconds": seconds,
            "tokens_per_second": batch_size * seq_len / seconds, "device": str(device), "dtype": str(dtype)}


def sweep(*, mixers=DEFAULT_MIXERS, seq_lens, d_model, n_heads, batch_size=1,
          n_components=DEFAULT_COMPONENTS, k_values=(),
          k_sweep_len=None, n_features=256, linformer_k=256, softmax_max_len=None, repeat=3, device=None,
          dtype=torch.float32, progress=False, printer=None, fits=None):
    """Every mixer over ``seq_lens`` and GMA over ``k_values`` (at ``k_sweep_len``); a list of result dicts.

    A point that does not fit is a gap, not the end of the sweep (:func:`gma_teach.measure.run_point`): a point
    that runs out of memory, or that ``fits`` predicts will not fit, is recorded with ``None`` measurements and an
    ``"error"`` (``"out of memory"`` or ``"predicted not to fit"``) after a printed note; :func:`fit_slopes` fits
    the points that ran.

    Args:
        mixers: names of :data:`gma_teach.baselines.MIXER_NAMES` (default ``DEFAULT_MIXERS``).
        seq_lens: the lengths N of the sweep over N.
        d_model, n_heads, batch_size: the block and its input ``(B, N, d_model)``.
        n_components, n_features, linformer_k: GMA's K, Performer's features, Linformer's k
            (:func:`table1_options`).
        k_values, k_sweep_len: GMA's K values for the sweep over K, and its length.
        softmax_max_len: skip eager softmax above that N (its ``(B, H, N, N)`` matrices run out of memory first).
        repeat: timed calls per point (median).
        device, dtype: where and in which precision.
        progress: a progress bar.
        printer: a callable given each finished row (for live tables), e.g. ``print``.
        fits: ``None``, or a cost model's predicate ``fits(point) -> bool`` given each point as a dict
            ``{"mixer", "seq_len", "n_components", "batch_size", "d_model", "n_heads", "dtype", "device"}``.
    """
    unknown = set(mixers) - set(mixer_registry.registered_names())
    if unknown:
        raise ValueError(f"unknown mixer names {sorted(unknown)}; known names: "
                         f"{', '.join(mixer_registry.registered_names())}")
    if not seq_lens:
        raise ValueError("seq_lens must name at least one sequence length")
    if fits is not None and not callable(fits):
        raise TypeError(f"fits must be None or a callable point -> bool, got {type(fits).__name__}")
    # N outer, mixer inner: mixers compared at one N are measured close together in time (shared machines).
    jobs = [(name, n, n_components) for n in seq_lens for name in mixers
            if not (name == "softmax" and softmax_max_len is not None and n > softmax_max_len)]
    if k_values:
        if k_sweep_len is None:
            raise ValueError("k_values needs k_sweep_len, the sequence length of the K sweep")
        jobs += [("gma", k_sweep_len, k) for k in k_values if not ("gma" in mixers and k == n_components
                                                                   and k_sweep_len in seq_lens)]
    device = torch.device(device) if device is not None else torch.device("cpu")
    rows = []
    for name, n, k in tqdm(jobs, desc="profiling", disable=not progress or bool(os.environ.get("CI"))):
        options = table1_options(name, seq_len=n, n_components=k, n_features=n_features, linformer_k=linformer_k)
        point = {"mixer": name, "seq_len": n, "n_components": options.get("n_components"),
                 "batch_size": batch_size, "d_model": d_model, "n_heads": n_heads, "dtype": dtype, "device": device}
        predicted = None if fits is None else bool(fits(point))
        measure_point = functools.partial(profile_mixer, name, d_model=d_model, n_heads=n_heads, seq_len=n,
                                          batch_size=batch_size, repeat=repeat, device=device, dtype=dtype,
                                          options=options)
        row = run_point(measure_point, label=f"{label_of(name, point['n_components'])} at N={n}", fits=predicted)
        if row is None:  # a gap in the record: the point did not fit
            row = {"mixer": name, "label": label_of(name, point["n_components"]), "seq_len": n,
                   "n_components": point["n_components"], "batch_size": batch_size, "d_model": d_model,
                   "n_heads": n_heads, "params": None, "peak_memory_bytes": None, "seconds": None,
                   "tokens_per_second": None, "device": str(device), "dtype": str(dtype),
                   "error": "predicted not to fit" if predicted is False else "out of memory"}
        rows.append(row)
        if printer is not None:
            printer(row)
    return rows


def block_fits(point: dict) -> bool:
    """The cost model's answer for :func:`sweep`'s ``fits``: would this block's forward + backward fit in this
    machine's memory? (:func:`gma_teach.cost.point_fits` for ``"block:<mixer>"`` on
    :func:`gma_teach.cost.current_profile`.)"""
    return cost.point_fits(f"block:{point['mixer']}", batch_size=point["batch_size"], n_heads=point["n_heads"],
                           seq_len=point["seq_len"], d_route=point["d_model"],
                           n_components=point["n_components"] or DEFAULT_COMPONENTS, backward=True)


# -------------------------------------------------------------------------------------------- recording
def sweep_config(scale_name=None, *, mixers=None, seq_lens=None, softmax_max_len=None) -> dict:
    """The sizes of the sweep :func:`run_recorded` runs (and records as its ``"config"``): preset ``"ch08"`` at a
    scale, with ``mixers``, ``seq_lens`` and ``softmax_max_len`` replacing the preset's where given (a record
    sweeps further than the chapter's live cell)."""
    p = preset("ch08", scale_name)
    config = {key: getattr(p, key) for key in ("d_model", "n_heads", "batch_size", "seq_lens", "n_components",
                                               "k_values", "k_sweep_len", "n_features", "linformer_k",
                                               "softmax_max_len", "repeat")}
    config["mixers"] = list(mixers or p.mixers)
    if seq_lens is not None:
        config["seq_lens"] = [_checks.positive_int("seq_lens", n) for n in seq_lens]
    if softmax_max_len is not None:
        config["softmax_max_len"] = _checks.positive_int("softmax_max_len", softmax_max_len)
    return config


def run_recorded(scale_name=None, *, device=None, mixers=None, command=None, printer=None, seq_lens=None,
                 softmax_max_len=None) -> dict:
    """Run the sweep of :func:`sweep_config` and return a record with its provenance; a point the cost model says
    will not fit this machine (:func:`block_fits`) is recorded as a gap instead of run.

    Returns:
        ``{"hardware", "date", "commit", "command", "scale", "config", "results", "memory_slopes"}``.
    """
    p = preset("ch08", scale_name)
    device = torch.device(device) if device is not None else torch.device("cpu")
    config = sweep_config(scale_name, mixers=mixers, seq_lens=seq_lens, softmax_max_len=softmax_max_len)
    origin = provenance(command or "gma_teach.profiling.run_recorded", device)  # before the run: its code
    results = sweep(device=device, printer=printer, fits=block_fits, **config)
    return {**origin, "scale": p.scale, "config": config, "results": results,
            "memory_slopes": fit_slopes(n_sweep(results))}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gma_teach.profiling", description=__doc__.split("\n")[0])
    parser.add_argument("--scale", choices=SCALES, default=None,
                        help="preset 'ch08' scale (default: GMA_TEACH_SCALE or the device's default)")
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--mixers", nargs="*", default=None, help=f"subset of {', '.join(DEFAULT_MIXERS)}")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice); 1 avoids stalls on a busy shared machine")
    parser.add_argument("--note", default="", help="a remark stored in the record (e.g. why --threads was set)")
    parser.add_argument("--seq-lens", nargs="+", type=int, default=None,
                        help="sequence lengths of the sweep (default: the preset's)")
    parser.add_argument("--softmax-max-len", type=int, default=None,
                        help="longest sequence the explicit N x N softmax runs at (default: the preset's)")
    parser.add_argument("--block", action="store_true",
                        help="GMA K=64 against linear attention and SDPA at width 256, 4 heads, interleaved, with "
                             f"the term-by-term breakdown (CPU; default lengths {list(BLOCK_SEQ_LENS)})")
    parser.add_argument("--repeat", type=int, default=3, help="--block: timed rounds per length")
    parser.add_argument("--long-repeat", type=int, default=2, help="--block: timed rounds at N >= 16,384")
    parser.add_argument("--breakdown-len", type=int, default=4096, help="--block: N of the term-by-term breakdown")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    command = "python -m gma_teach.profiling " + shlex.join(argv if argv is not None else sys.argv[1:])
    if args.block:
        if args.device not in (None, "cpu"):
            parser.error(f"--block measures the CPU path, got --device {args.device}")
        for name in ("repeat", "long_repeat", "breakdown_len"):
            if getattr(args, name) < 1:
                parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
        record = run_block_record(seq_lens=tuple(args.seq_lens or BLOCK_SEQ_LENS), repeat=args.repeat,
                                  long_repeat=args.long_repeat, breakdown_len=args.breakdown_len, command=command,
                                  progress=True)
        record["note"] = args.note
        write_record(args.out, record)
        print(format_block_table(block_ratios(record)))
        print(f"wrote {args.out}")
        return
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    record = run_recorded(args.scale, device=device, mixers=args.mixers, command=command,
                          printer=lambda row: print(format_table([row]).splitlines()[1], flush=True),
                          seq_lens=args.seq_lens, softmax_max_len=args.softmax_max_len)
    record["note"] = args.note
    write_record(args.out, record)
    print(format_table(record["results"]))
    print("memory slopes:", {k: round(v, 3) for k, v in record["memory_slopes"].items()})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
