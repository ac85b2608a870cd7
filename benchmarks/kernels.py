"""Benchmark GMA's Triton kernels against torch paths, a paper-style implementation, SDPA and fla.

Usage (from the repository root)::

    python benchmarks/kernels.py                 # the full sweep on a CUDA GPU -> gma_teach/results/kernels_<gpu>.json
    python benchmarks/kernels.py --quick         # tiny sizes; runs anywhere (the kernels interpreted on a CPU)
    python benchmarks/kernels.py --shared-memory 90 --components 128 --blocks 64 32
                                                 # shared memory per kernel, compiled ahead of time (no GPU)

Sweep: B=8, H=8, d=d_v=64; N in {1K, 4K, 16K}; K in {64, 128, 256}; bidirectional and causal; bf16 and fp32;
forward and forward+backward. Implementations (each computes GMA from q, k, v and the mixture, responsibilities
included, except SDPA which is softmax attention on the same q, k, v):

* ``triton``   -- :func:`gma_teach.kernels.gma_triton` (Gamma recomputed, never stored);
* ``torch``    -- ``gma_teach.gma(impl="linear")`` (bidirectional) / ``impl="chunked"`` (causal);
* ``paper``    -- the paper-style PyTorch form: responsibilities by broadcasting (x - mu) to (B, H, N, K, d),
  causal by materializing the (B, N, H, K, d_v) prefix-sum tensor;
* ``sdpa``     -- ``torch.nn.functional.scaled_dot_product_attention`` (causal or not; independent of K);
* ``fla``      -- ``fla.ops.linear_attn.chunk_linear_attn`` on the same responsibilities (causal only; only when
  ``fla`` imports).

Columns: ms (median), tok/s (B*N per second), TFLOP/s (model FLOPs below / time), and % of the roofline floor
(floor time / measured time). The roofline model is the one in the project's kernel notes: GMA forward FLOPs
per (batch, head) 8 N K d + 4 N K d_v (two logits GEMMs on [x^2, x], the write and the read), causal chunked
(C=64) adds 2 N C (K + d_v); the backward adds the recomputed logits (8 N K d), their gradients (16 N K d) and the
value gradients (8 N K d_v), plus 3 * 2 N C (K + d_v) when causal. Minimum bytes: forward reads q, k, v and
writes o (4 * 64 * element size per token and head); backward about 2x that. SDPA uses FlashAttention's
4 N^2 d (halved when causal), times 3.5 for forward+backward. Peaks come from ``--peak-tflops`` and
``--bandwidth-tbs``, or from PEAKS for known GPUs; fp32 rows use half the bf16 tensor peak (TF32) and 4-byte
tensors. Without a known peak the % column is empty. A configuration that runs out of memory is recorded as OOM.
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import sys
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

import gma_teach
from gma_teach.measure import git_commit, provenance, time_call
from gma_teach.measure import hardware as measured_hardware

ROOT = Path(__file__).resolve().parents[1]
CHUNK = 64
# Dense bf16 tensor-core TFLOP/s and HBM TB/s. H200: measured, from the project's kernel notes.
PEAKS = {"H200": (790.0, 4.3)}


# ------------------------------------------------------------------------------------------------------------------
# Implementations: each takes (q, k, v, means, variances, log_priors, causal) in (B, H, N, d) layout
# ------------------------------------------------------------------------------------------------------------------
def run_triton(q, k, v, means, variances, log_priors, causal):
    from gma_teach import kernels

    return kernels.gma_triton(q, k, v, means, variances, log_priors, causal=causal, eps=1e-6, chunk_size=CHUNK)


def run_torch(q, k, v, means, variances, log_priors, causal):
    impl = "chunked" if causal else "linear"
    return gma_teach.gma(q, k, v, means, variances, log_priors, causal=causal, eps=1e-6, impl=impl,
                         chunk_size=CHUNK)


def paper_responsibilities(x, means, variances, log_priors):
    """(B, H, N, K) by broadcasting (x - mu) into a (B, H, N, K, d) tensor, as a direct PyTorch port would."""
    diff = x.float()[:, :, :, None, :] - means[None, :, None]
    log_density = -0.5 * (diff.square() / variances[None, :, None] + torch.log(2 * math.pi * variances)[None, :, None])
    return torch.softmax(log_priors[None, :, None] + log_density.sum(-1), dim=-1)


def run_paper(q, k, v, means, variances, log_priors, causal, eps=1e-6):
    gamma_q = paper_responsibilities(q, means, variances, log_priors)
    gamma_k = paper_responsibilities(k, means, variances, log_priors)
    values = v.float()
    if not causal:
        memory = gamma_k.transpose(-1, -2) @ values
        normalizer = gamma_k.sum(-2)
        out = (gamma_q @ memory) / ((gamma_q * normalizer[:, :, None]).sum(-1, keepdim=True) + eps)
        return out.to(v.dtype)
    # (B, N, H, K, d_v): every prefix memory materialized, then a cumulative sum over N
    gq, gk, vv = (t.transpose(1, 2) for t in (gamma_q, gamma_k, values))
    prefix_memory = torch.cumsum(gk[..., None] * vv[:, :, :, None, :], dim=1)
    prefix_normalizer = torch.cumsum(gk, dim=1)
    numerator = (gq[..., None] * prefix_memory).sum(-2)
    denominator = (gq * prefix_normalizer).sum(-1, keepdim=True) + eps
    return (numerator / denominator).transpose(1, 2).to(v.dtype)


def run_sdpa(q, k, v, means, variances, log_priors, causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def run_fla(q, k, v, means, variances, log_priors, causal):
    from fla.ops.linear_attn import chunk_linear_attn

    gamma_q = gma_teach.responsibilities(q, means, variances, log_priors).to(v.dtype).transpose(1, 2)
    gamma_k = gma_teach.responsibilities(k, means, variances, log_priors).to(v.dtype).transpose(1, 2)
    extra = {"head_first": False} if "head_first" in inspect.signature(chunk_linear_attn).parameters else {}
    out, _ = chunk_linear_attn(gamma_q, gamma_k, v.transpose(1, 2).contiguous(), scale=1.0, normalize=True, **extra)
    return out.transpose(1, 2)


IMPLEMENTATIONS = {"triton": run_triton, "torch": run_torch, "paper": run_paper, "sdpa": run_sdpa, "fla": run_fla}


def available(name: str, device: torch.device, causal: bool) -> str | None:
    """None if ``name`` can run here, else the reason it is skipped."""
    if name == "triton":
        from gma_teach import kernels

        return None if kernels.is_available(device) else f"triton: {kernels.triton_status()}"
    if name == "fla":
        if not causal:
            return "fla computes causal linear attention only"
        try:
            import fla.ops.linear_attn  # noqa: F401
        except Exception as error:  # ImportError, or a Triton/driver error on import
            return f"fla does not import ({type(error).__name__})"
        if device.type != "cuda":
            return "fla needs CUDA"
    return None


# ------------------------------------------------------------------------------------------------------------------
# The roofline model
# ------------------------------------------------------------------------------------------------------------------
def model_flops(impl, batch, heads, n, n_components, d, d_v, causal, backward):
    if impl == "sdpa":
        forward = 4 * n * n * d * (0.5 if causal else 1.0)
        return batch * heads * forward * (3.5 if backward else 1.0)
    chunk = 2 * n * CHUNK * (n_components + d_v) if causal else 0
    forward = 8 * n * n_components * d + 4 * n * n_components * d_v + chunk
    total = forward + (24 * n * n_components * d + 8 * n * n_components * d_v + 3 * chunk if backward else 0)
    return batch * heads * total


def floor_seconds(flops, batch, heads, n, d, d_v, dtype, backward, peaks):
    if peaks is None:
        return None
    tflops, tbs = peaks
    element = 2 if dtype in (torch.bfloat16, torch.float16) else 4
    if dtype == torch.float32:
        tflops /= 2
    bytes_moved = batch * heads * n * (3 * d + d_v) * element * (3 if backward else 1)
    return max(flops / (tflops * 1e12), bytes_moved / (tbs * 1e12))


# ------------------------------------------------------------------------------------------------------------------
# Measurement
# ------------------------------------------------------------------------------------------------------------------
def make_inputs(batch, heads, n, n_components, d, d_v, dtype, device, backward):
    generator = torch.Generator(device="cpu").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator).to(device)

    tensors = [randn(batch, heads, n, d).to(dtype), randn(batch, heads, n, d).to(dtype),
               randn(batch, heads, n, d_v).to(dtype), 0.5 * randn(heads, n_components, d),
               0.5 + torch.rand(heads, n_components, d, generator=generator).to(device),
               torch.log_softmax(randn(heads, n_components), -1)]
    return [t.requires_grad_(backward) for t in tensors]


def measure(impl, inputs, causal, backward, device, repeat):
    """(median seconds, note): the note names any torch fallback of gma_triton (tiles too big for this GPU)."""
    function = IMPLEMENTATIONS[impl]

    def step():
        out = function(*inputs, causal)
        if backward:
            out.float().square().mean().backward()
            for tensor in inputs:
                tensor.grad = None

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        step()
    fallbacks = sorted({str(w.message).split("computing the ")[-1] for w in caught if "do not fit" in str(w.message)})
    seconds = time_call(step, warmup=2 if device.type == "cuda" else 1, repeat=repeat, device=device)
    return seconds, "; ".join(f"torch fallback: {text}" for text in fallbacks)


def hardware(device: torch.device) -> dict:
    from gma_teach import kernels

    return {**measured_hardware(device), "triton": kernels.triton_status()}


def peaks_for(device, args):
    if args.peak_tflops and args.bandwidth_tbs:
        return args.peak_tflops, args.bandwidth_tbs
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, value in PEAKS.items():
            if key in name:
                return value
    return None


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes that run anywhere (CI, CPU)")
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--components", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"],
                        choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--impls", nargs="+", default=list(IMPLEMENTATIONS), choices=list(IMPLEMENTATIONS))
    parser.add_argument("--modes", nargs="+", default=["bidirectional", "causal"], choices=["bidirectional", "causal"])
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--dim", type=int, default=64, help="d = d_v")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 tensor TFLOP/s of this GPU")
    parser.add_argument("--bandwidth-tbs", type=float, default=None, help="memory bandwidth in TB/s")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default: gma_teach/results/kernels_<gpu>.json "
                        "on CUDA, the gma_teach cache folder otherwise)")
    parser.add_argument("--shared-memory", type=int, metavar="ARCH", default=None,
                        help="instead of timing, compile every kernel for sm_ARCH (e.g. 90, 80, 75; no GPU needed) "
                        "and report its shared memory per block for --components and --blocks")
    parser.add_argument("--blocks", type=int, nargs="+", default=[64, 32, 16], help="tile rows for --shared-memory")
    args = parser.parse_args(argv)
    if args.quick:
        args.seq_lens, args.components, args.batch, args.heads, args.dim, args.repeat = [64, 100], [8, 16], 1, 2, 16, 2
        if not torch.cuda.is_available():
            args.dtypes = ["float32"]
    return args


def shared_memory_report(arch: int, components, chunk_or_block, dim: int) -> list[dict]:
    """Compile every kernel ahead of time for ``sm_<arch>`` (no GPU needed) and report its shared memory.

    Loads ``_triton_kernels.py`` as a standalone module so that its kernels are compiled, not interpreted.
    A GPU has at most 227 KiB (sm_90), 163 KiB (sm_80) or 64 KiB (sm_75) per block; a kernel over the limit is
    launched with smaller tiles, and where none fit ``gma_triton`` falls back to torch.
    """
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget

    path = ROOT / "gma_teach" / "kernels" / "_triton_kernels.py"
    spec = importlib.util.spec_from_file_location("gma_kernels_aot", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    precisions = ([("tf32x3", "tf32", "bf16"), ("tf32x3", "tf32x3", "fp32")] if arch >= 80
                  else [("ieee", "ieee", "fp16")])
    names = ["write_kernel", "read_kernel", "causal_forward_kernel", "query_backward_kernel", "key_backward_kernel",
             "causal_query_backward_kernel", "causal_key_backward_kernel"]
    rows = []
    for logit_precision, precision, dtype in precisions:
        for n_components in components:
            for block in chunk_or_block:
                for name in names:
                    kernel = getattr(module, name)
                    constants = {"CHUNK" if name.startswith("causal") else "BLOCK_N": block, "BLOCK_K": n_components,
                                 "BLOCK_D": dim, "BLOCK_DV": dim, "PRECISION": precision,
                                 "LOGIT_PRECISION": logit_precision}
                    signature = {arg: "constexpr" if arg in constants else
                                 f"*{dtype}" if arg in ("q_ptr", "k_ptr", "v_ptr", "out_ptr") else
                                 "*fp32" if arg.endswith("_ptr") else "fp32" if arg == "eps" else "i32"
                                 for arg in kernel.arg_names}
                    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constants)
                    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32),
                                              options={"num_warps": 8 if n_components * block > 8192 else 4})
                    row = dict(kernel=name, arch=arch, inputs=dtype, n_components=n_components, block=block, d=dim,
                               shared_kib=compiled.metadata.shared / 1024)
                    print(f"sm_{arch} {dtype:5s} K={n_components:4d} block={block:3d} {name:30s} "
                          f"{row['shared_kib']:7.1f} KiB", flush=True)
                    rows.append(row)
    return rows


def default_out(device: torch.device, quick: bool) -> Path:
    if device.type == "cuda" and not quick:
        slug = "".join(c if c.isalnum() else "_" for c in torch.cuda.get_device_name(device)).strip("_")
        return ROOT / "gma_teach" / "results" / f"kernels_{slug}.json"
    return gma_teach.cache_dir() / "benchmarks" / f"kernels_{device.type}{'_quick' if quick else ''}.json"


def main(argv=None):
    args = parse_args(argv)
    if args.shared_memory is not None:
        rows = shared_memory_report(args.shared_memory, args.components, args.blocks, args.dim)
        out = args.out or gma_teach.cache_dir() / "benchmarks" / f"kernels_shared_memory_sm{args.shared_memory}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"command": " ".join([Path(sys.executable).name, *sys.argv]),
                                   "commit": git_commit(), "triton": hardware(torch.device("cpu"))["triton"],
                                   "rows": rows}, indent=1))
        print(f"wrote {out}")
        return rows
    device = gma_teach.device()
    peaks = peaks_for(device, args)
    batch, heads, d = args.batch, args.heads, args.dim
    rows = []
    header = f"{'mode':13s} {'dtype':8s} {'pass':7s} {'N':>6s} {'K':>4s} {'impl':7s} {'ms':>9s} {'tok/s':>10s} " \
             f"{'TFLOP/s':>8s} {'%roof':>6s}"
    print(header)
    for mode in args.modes:
        causal = mode == "causal"
        for dtype_name in args.dtypes:
            dtype = getattr(torch, dtype_name)
            for backward in (False, True):
                for n in args.seq_lens:
                    for n_components in args.components:
                        for impl in args.impls:
                            if impl == "sdpa" and n_components != args.components[0]:
                                continue  # independent of K
                            row = dict(mode=mode, dtype=dtype_name, backward=backward, seq_len=n,
                                       n_components=None if impl == "sdpa" else n_components, impl=impl)
                            reason = available(impl, device, causal)
                            if reason is None:
                                try:
                                    inputs = make_inputs(batch, heads, n, n_components, d, d, dtype, device, backward)
                                    seconds, note = measure(impl, inputs, causal, backward, device, args.repeat)
                                    if note:
                                        row["note"] = note
                                    flops = model_flops(impl, batch, heads, n, n_components, d, d, causal, backward)
                                    floor = floor_seconds(flops, batch, heads, n, d, d, dtype, backward, peaks)
                                    row.update(ms=1e3 * seconds, tokens_per_s=batch * n / seconds,
                                               tflops=flops / seconds / 1e12,
                                               roofline_percent=None if floor is None else 100 * floor / seconds)
                                except torch.cuda.OutOfMemoryError:
                                    row["skipped"] = "OOM"
                                except RuntimeError as error:
                                    if "out of memory" not in str(error).lower() and "allocate" not in str(error):
                                        raise
                                    row["skipped"] = "OOM"
                                finally:
                                    inputs = None
                                    if device.type == "cuda":
                                        torch.cuda.empty_cache()
                            else:
                                row["skipped"] = reason
                            rows.append(row)
                            print_row(row)
    result = {
        "benchmark": "gma_teach kernels",
        **provenance(" ".join([Path(sys.executable).name, *sys.argv]), device),
        "hardware": hardware(device),
        "sizes": dict(batch=batch, heads=heads, d=d, d_v=d, chunk_size=CHUNK, quick=args.quick),
        "roofline": None if peaks is None else dict(bf16_tflops=peaks[0], bandwidth_tbs=peaks[1],
                                                    model="benchmarks/kernels.py docstring"),
        "rows": rows,
    }
    out = args.out or default_out(device, args.quick)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return result


def print_row(row):
    backward = "fwd+bwd" if row["backward"] else "fwd"
    k = "-" if row["n_components"] is None else str(row["n_components"])
    prefix = f"{row['mode']:13s} {row['dtype']:8s} {backward:7s} {row['seq_len']:6d} {k:>4s} {row['impl']:7s}"
    if "skipped" in row:
        print(f"{prefix} skipped: {row['skipped']}")
        return
    roof = "" if row["roofline_percent"] is None else f"{row['roofline_percent']:6.1f}"
    note = f"  ({row['note']})" if row.get("note") else ""
    print(f"{prefix} {row['ms']:9.3f} {row['tokens_per_s']:10.3g} {row['tflops']:8.3g} {roof:>6s}{note}")


if __name__ == "__main__":
    main()
