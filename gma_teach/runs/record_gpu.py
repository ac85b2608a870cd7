"""The GPU record in one command: ``python -m gma_teach.record_gpu`` (``--out FOLDER``; default: the recorded
results shipped with the package, :func:`gma_teach.measure.results_folder`, where the chapters read them).

On a CUDA GPU it runs four stages, each in its own process with a time budget (about 10 minutes in all on an
H200-class GPU), and writes one JSON file per stage with its provenance (:func:`gma_teach.measure.provenance`:
hardware, date, commit, command):

1. ``gpu_tests``  -- ``pytest -m gpu tests/test_kernels_gpu.py`` (when run from a checkout that has the tests;
   otherwise the stage is skipped with a note): the compiled kernels against the float64 spec;
2. ``kernels``    -- the kernel benchmark (:func:`benchmark_kernels`): Triton kernels, torch forms, a paper-style
   PyTorch port, SDPA and flash-linear-attention, with a roofline column;
3. ``profiling``  -- Table 1 of the paper at its shapes: ``python -m gma_teach.profiling --scale full``;
4. ``listops``    -- a short ListOps run at N = 2K (GMA, one seed, one epoch on a subset).

``--quick`` runs every stage at smoke-test sizes (a minute or two); ``--dry-run`` prints the plan (stages,
commands, budgets, files) and works anywhere. Without CUDA the command stops with a message saying so. A stage that
fails or runs past its budget is recorded as such in ``gpu_record_<gpu>.json``; the other stages still run.
"""
from __future__ import annotations

import argparse
import inspect
import math
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from .. import measure
from ..gmm import random_gma_inputs, responsibilities, responsibilities_direct
from ..mixing import gma
from ..records import provenance, write_record
from .experiments import headline, run

REPOSITORY = Path(__file__).resolve().parents[2]
GPU_TESTS = REPOSITORY / "tests" / "test_kernels_gpu.py"
STAGES = ("gpu_tests", "kernels", "profiling", "listops")
# Seconds per stage on an H200-class GPU (full, quick); the sum stays under 10 minutes with process start-up.
BUDGETS = {"gpu_tests": (150, 90), "kernels": (150, 60), "profiling": (150, 60), "listops": (100, 60)}
# ListOps at N = 2K: the paper's sequence length, a subset and one epoch so that it fits its budget.
LISTOPS_OVERRIDES = {"full": dict(n_train=4000, n_val=500, n_test=500, epochs=1),
                     "quick": dict(n_train=256, n_val=64, n_test=64, epochs=1)}
CHUNK = 64
# Dense bf16 tensor-core TFLOP/s and HBM TB/s. H200: measured (project kernel notes).
PEAKS = {"H200": (790.0, 4.3)}


# ------------------------------------------------------------------------------------------------------------------
# The kernel benchmark. Each implementation takes (q, k, v, means, variances, log_priors, causal), (B, H, N, d).
# ------------------------------------------------------------------------------------------------------------------
def run_triton(q, k, v, means, variances, log_priors, causal):
    from .. import kernels  # imported when used: importing it turns Triton's interpreter on where there is no GPU

    return kernels.gma_triton(q, k, v, means, variances, log_priors, causal=causal, eps=1e-6, chunk_size=CHUNK)


def run_torch(q, k, v, means, variances, log_priors, causal):
    impl = "chunked" if causal else "linear"
    return gma(q, k, v, means, variances, log_priors, causal=causal, eps=1e-6, impl=impl, chunk_size=CHUNK)


def run_paper(q, k, v, means, variances, log_priors, causal, eps=1e-6):
    """The paper-style PyTorch port: responsibilities by broadcasting ``(x - mu)`` into (B, H, N, K, d), causal by
    materializing the (B, N, H, K, d_v) prefix sums."""
    gamma_q = responsibilities_direct(q.float(), means, variances, log_priors)
    gamma_k = responsibilities_direct(k.float(), means, variances, log_priors)
    values = v.float()
    if not causal:
        memory = gamma_k.transpose(-1, -2) @ values
        normalizer = gamma_k.sum(-2)
        out = (gamma_q @ memory) / ((gamma_q * normalizer[:, :, None]).sum(-1, keepdim=True) + eps)
        return out.to(v.dtype)
    gq, gk, vv = (t.transpose(1, 2) for t in (gamma_q, gamma_k, values))
    prefix_memory = torch.cumsum(gk[..., None] * vv[:, :, :, None, :], dim=1)
    prefix_normalizer = torch.cumsum(gk, dim=1)
    numerator = (gq[..., None] * prefix_memory).sum(-2)
    denominator = (gq * prefix_normalizer).sum(-1, keepdim=True) + eps
    return (numerator / denominator).transpose(1, 2).to(v.dtype)


def run_sdpa(q, k, v, means, variances, log_priors, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def run_fla(q, k, v, means, variances, log_priors, causal):
    from fla.ops.linear_attn import chunk_linear_attn  # optional dependency (flash-linear-attention, CUDA only)

    gamma_q = responsibilities(q, means, variances, log_priors).to(v.dtype).transpose(1, 2)
    gamma_k = responsibilities(k, means, variances, log_priors).to(v.dtype).transpose(1, 2)
    extra = {"head_first": False} if "head_first" in inspect.signature(chunk_linear_attn).parameters else {}
    out, _ = chunk_linear_attn(gamma_q, gamma_k, v.transpose(1, 2).contiguous(), scale=1.0, normalize=True, **extra)
    return out.transpose(1, 2)


IMPLEMENTATIONS = {"triton": run_triton, "torch": run_torch, "paper": run_paper, "sdpa": run_sdpa, "fla": run_fla}


def unavailable(name: str, device: torch.device, causal: bool) -> str | None:
    """None if implementation ``name`` can run here, else the reason it is skipped."""
    if name == "triton":
        from .. import kernels  # imported when used: importing it turns Triton's interpreter on where there is no GPU

        return None if kernels.is_available(device) else f"triton: {kernels.triton_status()}"
    if name == "fla":
        if not causal:
            return "fla computes causal linear attention only"
        if device.type != "cuda":
            return "fla needs CUDA"
        try:
            import fla.ops.linear_attn  # noqa: F401  (optional dependency: is it installed and working?)
        except Exception as error:  # ImportError, or a Triton/driver error on import
            return f"fla does not import ({type(error).__name__})"
    return None


def model_flops(impl, batch, heads, n, n_components, d, d_v, causal, backward) -> float:
    """The roofline model's FLOPs. GMA forward per (batch, head): 8 N K d (two logits GEMMs on [x^2, x]) + 4 N K d_v
    (write and read), plus 2 N C (K + d_v) when causal (chunk C); the backward adds 24 N K d + 8 N K d_v (+ 3x the
    causal term). SDPA: FlashAttention's 4 N^2 d (halved when causal), x3.5 for forward+backward."""
    if impl == "sdpa":
        forward = 4 * n * n * d * (0.5 if causal else 1.0)
        return batch * heads * forward * (3.5 if backward else 1.0)
    chunk = 2 * n * CHUNK * (n_components + d_v) if causal else 0
    forward = 8 * n * n_components * d + 4 * n * n_components * d_v + chunk
    total = forward + (24 * n * n_components * d + 8 * n * n_components * d_v + 3 * chunk if backward else 0)
    return batch * heads * total


def floor_seconds(flops, batch, heads, n, d, d_v, dtype, backward, peaks) -> float | None:
    """The roofline floor: the larger of FLOPs / peak (half the bf16 peak for fp32, TF32) and the minimum bytes
    (read q, k, v, write out; about 3x that with the backward) / bandwidth. None without known peaks."""
    if peaks is None:
        return None
    tflops, tbs = peaks
    element = 2 if dtype in (torch.bfloat16, torch.float16) else 4
    if dtype == torch.float32:
        tflops /= 2
    bytes_moved = batch * heads * n * (3 * d + d_v) * element * (3 if backward else 1)
    return max(flops / (tflops * 1e12), bytes_moved / (tbs * 1e12))


def peaks_for(device: torch.device, peak_tflops: float | None = None, bandwidth_tbs: float | None = None):
    if peak_tflops and bandwidth_tbs:
        return peak_tflops, bandwidth_tbs
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, value in PEAKS.items():
            if key in name:
                return value
    return None


def _gpu_inputs(batch, heads, n, n_components, d, d_v, dtype, device, backward):
    generator = torch.Generator(device="cpu").manual_seed(0)
    inputs = random_gma_inputs(batch, heads, n, n, d, d_v, n_components, dtype=dtype, spread=0.5, generator=generator,
                               device=device)
    return [t.requires_grad_(backward) for t in inputs]


def _time(impl, inputs, causal, backward, device, repeat) -> float:
    function = IMPLEMENTATIONS[impl]

    def step():
        out = function(*inputs, causal)
        if backward:
            out.float().square().mean().backward()
            for tensor in inputs:
                tensor.grad = None

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return measure.time_call(step, warmup=2 if device.type == "cuda" else 1, repeat=repeat, device=device)


def benchmark_kernels(*, seq_lens=(1024, 4096, 16384), components=(64, 128, 256), dtypes=("bfloat16",),
                      impls=tuple(IMPLEMENTATIONS), modes=("bidirectional", "causal"), batch_size=8, n_heads=8,
                      dim=64, repeat=10, device=None, peaks=None, command=None, on_row=None) -> dict:
    """Time every implementation, forward and forward+backward, over the sizes; returns the JSON-ready record.

    Args:
        seq_lens, components, dtypes, impls, modes: the sweep (``d = d_v = dim``, ``B = batch_size``,
            ``H = n_heads``); SDPA is timed once per N (it has no K).
        peaks: ``(bf16 TFLOP/s, TB/s)`` for the roofline column (default: known GPUs, else none).
        on_row: called with the record after every row (the command line saves it, so a run cut short keeps its
            rows).

    Returns:
        ``{"benchmark", "hardware", "date", "commit", "command", "sizes", "roofline", "rows"}``; each row has
        ``mode, dtype, backward, seq_len, n_components, impl`` and ``ms, tokens_per_s, tflops, roofline_percent``,
        or ``skipped`` (a reason, ``"OOM"`` for out of memory).
    """
    from .. import kernels  # imported when used: importing it turns Triton's interpreter on where there is no GPU

    device = torch.device(device) if device is not None else torch.device("cuda" if torch.cuda.is_available()
                                                                            else "cpu")
    peaks = peaks or peaks_for(device)
    origin = provenance(command or "gma_teach.record_gpu.benchmark_kernels", device)
    record = {"benchmark": "gma_teach kernels", **origin,
              "hardware": {**origin["hardware"], "triton": kernels.triton_status()},
              "sizes": dict(batch_size=batch_size, n_heads=n_heads, d_route=dim, d_value=dim, chunk_size=CHUNK),
              "roofline": None if peaks is None else dict(bf16_tflops=peaks[0], bandwidth_tbs=peaks[1],
                                                          model="gma_teach.record_gpu.model_flops"),
              "rows": []}
    for mode in modes:
        causal = mode == "causal"
        for dtype_name in dtypes:
            dtype = getattr(torch, dtype_name)
            for backward in (False, True):
                for n in seq_lens:
                    for n_components in components:
                        for impl in impls:
                            if impl == "sdpa" and n_components != components[0]:
                                continue
                            row = dict(mode=mode, dtype=dtype_name, backward=backward, seq_len=n,
                                       n_components=None if impl == "sdpa" else n_components, impl=impl)
                            reason = unavailable(impl, device, causal)
                            if reason is None:
                                row.update(_measure_row(impl, batch_size, n_heads, n, n_components, dim, dtype,
                                                        device, causal, backward, repeat, peaks))
                            else:
                                row["skipped"] = reason
                            record["rows"].append(row)
                            if on_row is not None:
                                on_row(record)
    return record


def _measure_row(impl, batch, heads, n, n_components, dim, dtype, device, causal, backward, repeat, peaks) -> dict:
    inputs = None
    try:
        inputs = _gpu_inputs(batch, heads, n, n_components, dim, dim, dtype, device, backward)
        seconds = _time(impl, inputs, causal, backward, device, repeat)
    except (torch.cuda.OutOfMemoryError, RuntimeError) as error:
        if not measure.is_out_of_memory(error):
            raise
        return {"skipped": "OOM"}
    finally:
        inputs = None
        if device.type == "cuda":
            torch.cuda.empty_cache()
    flops = model_flops(impl, batch, heads, n, n_components, dim, dim, causal, backward)
    floor = floor_seconds(flops, batch, heads, n, dim, dim, dtype, backward, peaks)
    return dict(ms=1e3 * seconds, tokens_per_s=batch * n / seconds, tflops=flops / seconds / 1e12,
                roofline_percent=None if floor is None else 100 * floor / seconds)


def format_row(row: dict) -> str:
    """One line of the benchmark table."""
    passes = "fwd+bwd" if row["backward"] else "fwd"
    k = "-" if row["n_components"] is None else str(row["n_components"])
    prefix = f"{row['mode']:13s} {row['dtype']:8s} {passes:7s} {row['seq_len']:6d} {k:>4s} {row['impl']:7s}"
    if "skipped" in row:
        return f"{prefix} skipped: {row['skipped']}"
    roof = "" if row["roofline_percent"] is None else f"{row['roofline_percent']:6.1f}"
    return f"{prefix} {row['ms']:9.3f} {row['tokens_per_s']:10.3g} {row['tflops']:8.3g} {roof:>6s}"


# ------------------------------------------------------------------------------------------------------------------
# The stages and the command line
# ------------------------------------------------------------------------------------------------------------------
def gpu_slug() -> str:
    """A file-name-safe name of the GPU (``NVIDIA_H200`` ...), or ``cpu``."""
    if not torch.cuda.is_available():
        return "cpu"
    return "".join(c if c.isalnum() else "_" for c in torch.cuda.get_device_name()).strip("_")


def plan(out: Path, *, quick: bool = False, slug: str | None = None) -> list[dict]:
    """The stages: ``{"stage", "budget_s", "command", "file", "note"}`` each (``command`` None: skipped)."""
    slug = slug or gpu_slug()
    suffix = "_quick" if quick else ""
    python = [sys.executable]
    stages = []
    for stage in STAGES:
        file = out / {"gpu_tests": f"gpu_tests_{slug}{suffix}.json", "kernels": f"kernels_{slug}{suffix}.json",
                      "profiling": f"profiling_{slug}_{'tiny' if quick else 'full'}.json",
                      "listops": f"listops_gma_{slug}_2k{suffix}.json"}[stage]
        command = [*python, "-m", "gma_teach.record_gpu", "--stage", stage, "--out", str(out)]
        note = ""
        if stage == "gpu_tests" and not GPU_TESTS.exists():
            command, note = None, f"skipped: {GPU_TESTS} is not here (an installed package has no tests)"
        elif stage == "profiling":
            command = [*python, "-m", "gma_teach.profiling", "--scale", "tiny" if quick else "full", "--device",
                       "cuda", "--out", str(file)]
        elif quick:
            command.append("--quick")
        stages.append(dict(stage=stage, budget_s=BUDGETS[stage][1 if quick else 0], command=command,
                           file=str(file), note=note))
    return stages


def _run_stage(stage: str, out: Path, quick: bool) -> None:
    """The body of one stage, run in its own process by :func:`main`."""
    slug, suffix = gpu_slug(), "_quick" if quick else ""
    command = "python -m gma_teach.record_gpu --stage " + stage + (" --quick" if quick else "")
    if stage == "gpu_tests":
        file = out / f"gpu_tests_{slug}{suffix}.json"
        origin = provenance(command, "cuda")
        started = time.perf_counter()
        pytest_command = [sys.executable, "-m", "pytest", "-m", "gpu", str(GPU_TESTS), "-q", "-p", "no:cacheprovider",
                          "-rfE", *(["-x", "-k", "not deterministic and not long_sequence"] if quick else [])]
        limit = BUDGETS[stage][1 if quick else 0] - 20  # leave time to write the record
        try:
            result = subprocess.run(pytest_command, capture_output=True, text=True, cwd=REPOSITORY, timeout=limit)
            output, returncode = result.stdout, result.returncode
        except subprocess.TimeoutExpired as error:
            output = (error.stdout or b"").decode(errors="replace") if isinstance(error.stdout, bytes) else \
                (error.stdout or "")
            output, returncode = output + f"\nstopped after {limit} s", None
        lines = output.strip().splitlines()
        record = {"stage": "gpu_tests", **origin, "pytest": " ".join(pytest_command[1:]),
                  "returncode": returncode, "summary": lines[-1] if lines else "",
                  "output_tail": "\n".join(lines[-40:]), "seconds": time.perf_counter() - started}
        write_record(file, record)
        print(record["output_tail"])
    elif stage == "kernels":
        file = out / f"kernels_{slug}{suffix}.json"
        sizes = (dict(seq_lens=(256, 1024), components=(64, 128), batch_size=2, n_heads=4, repeat=3) if quick else
                 dict(seq_lens=(1024, 4096, 16384), components=(64, 128, 256)))

        def save(record):
            write_record(file, record)
            print(format_row(record["rows"][-1]), flush=True)

        benchmark_kernels(**sizes, device="cuda", command=command, on_row=save)
    elif stage == "listops":
        file = out / f"listops_gma_{slug}_2k{suffix}.json"
        overrides = LISTOPS_OVERRIDES["quick" if quick else "full"]
        record = run("listops", "gma", scale_name="full", seeds=(0,), command=command, out=file, **overrides)
        record["note"] = f"a short run at N = 2K for the GPU record: {overrides}"
        write_record(file, record)
        print(f"{headline(record)}; wrote {file}")
    else:
        raise ValueError(f"stage must be one of {STAGES} (profiling runs gma_teach.profiling), got {stage!r}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gma_teach.record_gpu", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="folder of the result files (default: gma_teach.measure.results_folder(), where the "
                             "chapters read them: book/results in a clone)")
    parser.add_argument("--quick", action="store_true", help="smoke-test sizes: every stage in about a minute")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and exit (works without a GPU)")
    parser.add_argument("--only", nargs="+", choices=STAGES, default=None, help="run these stages only")
    parser.add_argument("--stage", choices=STAGES, default=None, help=argparse.SUPPRESS)  # one stage, in-process
    return parser


def main(argv=None) -> int:
    """Run the record (or print its plan); returns 0 when every stage that ran succeeded."""
    args = _parser().parse_args(argv)
    out = (args.out or measure.results_folder()).resolve()
    stages = [s for s in plan(out, quick=args.quick, slug=None if torch.cuda.is_available() else "<gpu>")
              if args.only is None or s["stage"] in args.only]
    if args.dry_run:
        total = sum(s["budget_s"] for s in stages if s["command"])
        print(f"GPU record plan ({'quick' if args.quick else 'full'}), writing to {out}; budget {total} s "
              f"(~{math.ceil(total / 60)} min):")
        for s in stages:
            what = " ".join(s["command"]) if s["command"] else s["note"]
            print(f"  {s['stage']:10s} <= {s['budget_s']:4d} s  {what}\n  {'':10s}    -> {s['file']}")
        return 0
    if not torch.cuda.is_available():
        raise SystemExit("python -m gma_teach.record_gpu needs a CUDA GPU, and torch sees none here "
                         f"(torch {torch.__version__}, CUDA build: {torch.version.cuda}). Use --dry-run to see the "
                         "plan; on a CPU, `python -m gma_teach.profiling` and `python -m gma_teach.bench` record the "
                         "CPU results.")
    if args.stage is not None:
        _run_stage(args.stage, out, args.quick)
        return 0
    summary = {"record": "gma_teach GPU record", **provenance(
        "python -m gma_teach.record_gpu " + " ".join(argv if argv is not None else sys.argv[1:]), "cuda"),
        "quick": args.quick, "stages": []}
    failures = 0
    for s in stages:
        entry = dict(stage=s["stage"], budget_s=s["budget_s"], file=s["file"])
        if s["command"] is None:
            entry.update(status="skipped", note=s["note"])
            print(f"== {s['stage']}: {s['note']}", flush=True)
        else:
            print(f"== {s['stage']} (budget {s['budget_s']} s): {' '.join(s['command'])}", flush=True)
            started = time.perf_counter()
            process = subprocess.Popen(s["command"], start_new_session=True)  # its own group: stopped as a whole
            try:
                returncode = process.wait(timeout=s["budget_s"])
                entry["status"] = "ok" if returncode == 0 else f"failed (exit {returncode})"
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                entry["status"] = f"stopped at its budget of {s['budget_s']} s (the file keeps what finished)"
            entry["seconds"] = round(time.perf_counter() - started, 1)
            failures += entry["status"] != "ok"
        summary["stages"].append(entry)
        write_record(out / f"gpu_record_{gpu_slug()}{'_quick' if args.quick else ''}.json", summary)
    for entry in summary["stages"]:
        print(f"{entry['stage']:10s} {entry['status']:40s} {entry.get('seconds', '-')} s  {entry['file']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
