"""Benchmark GMA's Triton kernels against torch forms, a paper-style PyTorch port, SDPA and flash-linear-attention.

Usage (from the repository root)::

    python benchmarks/kernels.py                 # the full sweep on a CUDA GPU -> book/results/kernels_<gpu>.json
    python benchmarks/kernels.py --quick         # tiny sizes; runs anywhere (the kernels interpreted on a CPU)
    python benchmarks/kernels.py --shared-memory 75 --components 512 --dim 128
                                                 # shared memory of every kernel launch on sm_75 (no GPU needed)

The benchmark itself is :func:`gma_teach.record_gpu.benchmark_kernels` (so that ``python -m gma_teach.record_gpu``
runs it from an installed package): B=8, H=8, d=d_v=64; N in {1K, 4K, 16K}; K in {64, 128, 256}; bidirectional and
causal; forward and forward+backward. Columns: ms (median), tok/s (B*N per second), TFLOP/s (the model FLOPs of
:func:`gma_teach.record_gpu.model_flops` / time), and % of the roofline floor (floor time / measured time), with
peaks from ``--peak-tflops`` and ``--bandwidth-tbs`` or known GPUs. A configuration that runs out of memory is
recorded as OOM. ``--shared-memory`` prints :func:`gma_teach.kernels.shared_memory` against the GPU's limit.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

import gma_teach
from gma_teach import kernels
from gma_teach.measure import provenance, results_folder
from gma_teach.record_gpu import IMPLEMENTATIONS, benchmark_kernels, format_row, gpu_slug


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes that run anywhere (CI, CPU)")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--components", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"],
                        choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--impls", nargs="+", default=list(IMPLEMENTATIONS), choices=list(IMPLEMENTATIONS))
    parser.add_argument("--modes", nargs="+", default=["bidirectional", "causal"], choices=["bidirectional", "causal"])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--n-heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64, help="d_r = d_v")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 tensor TFLOP/s of this GPU")
    parser.add_argument("--bandwidth-tbs", type=float, default=None, help="memory bandwidth in TB/s")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default: book/results/kernels_<gpu>"
                        ".json on CUDA, the gma_teach cache folder otherwise)")
    parser.add_argument("--shared-memory", type=int, metavar="ARCH", default=None,
                        help="instead of timing, count the shared memory of every kernel launch on sm_ARCH (e.g. 75, "
                        "90; no GPU needed) for --components, --dim and --dtypes")
    args = parser.parse_args(argv)
    if args.quick:
        args.seq_lens, args.components, args.batch_size, args.n_heads, args.dim, args.repeat = \
            [64, 100], [8, 16], 1, 2, 16, 2
        if not torch.cuda.is_available():
            args.dtypes = ["float32"]
    return args


def shared_memory_report(arch: int, components, dim: int, dtypes) -> list[dict]:
    limit = kernels.SHARED_MEMORY_LIMITS.get(arch)
    rows = []
    for dtype_name in dtypes:
        for n_components in components:
            needs = kernels.shared_memory(arch, getattr(torch, dtype_name), n_components, dim, dim)
            tiles = kernels.tile_sizes(n_components, dim, dim, arch=arch)
            for label, value in needs.items():
                rows.append(dict(kernel=label, arch=arch, inputs=dtype_name, n_components=n_components, d=dim,
                                 tiles=tiles, shared_kib=value / 1024))
                over = " OVER THE LIMIT" if limit is not None and value > limit else ""
                print(f"sm_{arch} {dtype_name:9s} K={n_components:4d} d={dim:3d} {label:45s} {value / 1024:7.1f} KiB"
                      f"{over}", flush=True)
    return rows


def default_out(device: torch.device, quick: bool) -> Path:
    if device.type == "cuda" and not quick:
        return results_folder() / f"kernels_{gpu_slug()}.json"
    return gma_teach.cache_dir() / "benchmarks" / f"kernels_{device.type}{'_quick' if quick else ''}.json"


def main(argv=None):
    args = parse_args(argv)
    command = " ".join([Path(sys.executable).name, *sys.argv])
    if args.shared_memory is not None:
        rows = shared_memory_report(args.shared_memory, args.components, args.dim, args.dtypes)
        out = args.out or gma_teach.cache_dir() / "benchmarks" / f"kernels_shared_memory_sm{args.shared_memory}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({**provenance(command), "triton": kernels.triton_status(),
                                   "limit_bytes": kernels.SHARED_MEMORY_LIMITS.get(args.shared_memory),
                                   "rows": rows}, indent=1))
        print(f"wrote {out}")
        return rows
    device = gma_teach.device()
    out = args.out or default_out(device, args.quick)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save(record):
        out.write_text(json.dumps(record, indent=1))
        print(format_row(record["rows"][-1]), flush=True)

    peaks = (args.peak_tflops, args.bandwidth_tbs) if args.peak_tflops and args.bandwidth_tbs else None
    record = benchmark_kernels(seq_lens=args.seq_lens, components=args.components, dtypes=args.dtypes,
                               impls=args.impls, modes=args.modes, batch_size=args.batch_size, n_heads=args.n_heads,
                               dim=args.dim, repeat=args.repeat, device=device, peaks=peaks, command=command,
                               on_row=save)
    record["sizes"]["quick"] = args.quick
    out.write_text(json.dumps(record, indent=1))
    print(f"wrote {out}")
    return record


if __name__ == "__main__":
    main()
