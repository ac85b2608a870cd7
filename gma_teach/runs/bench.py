"""Benchmarks of the core forms, as ratios measured in one run: ``python -m gma_teach.bench``.

Three comparisons (CPU float32, forward + backward, B=1, H=4, d=32, K=64 unless ``--quick``):

1. GEMM-form responsibilities against broadcasting ``(x - mu)`` into ``(N, K, d)`` (N=2048; target >= 20x);
2. ``impl="chunked"`` against the paper's ``impl="cumsum"`` for causal GMA, both mixing the same responsibilities
   (N=4096; target >= 5x faster and <= 1/10 of its peak memory);
3. bidirectional ``impl="linear"`` GMA against ``scaled_dot_product_attention`` (N in {512, 2048, 8192}; target
   >= 10x faster at N=8192).

Each ratio compares the two forms timed *interleaved* (one call of each per repeat) after a warm-up, keeping the
fastest call of each (:func:`gma_teach.measure.compare_timings`), so a burst of load from other programs slows both
alike. ``--quick`` shrinks every size so the script can run in tests (its ratios are then not the targets' sizes).
``--json FILE`` also writes the rows with their provenance (:func:`gma_teach.measure.provenance`); ``--threads N``
fixes torch's CPU threads (use 1 on a machine that other jobs share).
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F

from .. import gma, gma_from_responsibilities, gmm
from ..measure import compare_timings, peak_memory
from ..records import provenance, write_record


@dataclass
class Row:
    comparison: str
    n_tokens: int
    fast_ms: float
    slow_ms: float
    speedup: float
    memory_ratio: float | None  # fast peak / slow peak, where measured
    target: str
    holds: bool | None  # None where no target applies at this size


def _parameter_leaves(n_tokens, *, batch_size=1, n_heads=4, d_route=32, n_components=64, seed=0):
    """Leaf tensors ``q, k, v (B, H, N, d_route)`` (values as wide as the routing) and a mixture's parameters."""
    generator = torch.Generator().manual_seed(seed)

    def leaf(*shape, scale=1.0):
        return (torch.randn(*shape, generator=generator) * scale).requires_grad_()

    q, k, v = (leaf(batch_size, n_heads, n_tokens, d_route) for _ in range(3))
    means = leaf(n_heads, n_components, d_route)
    raw_variances = leaf(n_heads, n_components, d_route, scale=0.1)
    prior_logits = leaf(n_heads, n_components, scale=0.1)
    return q, k, v, means, raw_variances, prior_logits


def _mixture(means, raw_variances, prior_logits):
    return means, F.softplus(raw_variances) + 1e-3, torch.log_softmax(prior_logits, -1)


def _forward_backward(loss_fn):
    def run():
        loss_fn().backward()
    return run


def _fast_and_slow_seconds(fast, slow, repeat):
    """Seconds of the fast and the slow form, interleaved, the minimum of ``repeat`` calls each (threads as set)."""
    seconds = compare_timings({"fast": fast, "slow": slow}, repeat=repeat, threads=None)
    return seconds["fast"], seconds["slow"]


def _responsibility_rows(n_tokens, repeat):
    q, _, _, means, raw_variances, prior_logits = _parameter_leaves(n_tokens)
    params = (means, raw_variances, prior_logits)
    fast = _forward_backward(lambda: gmm.responsibilities(q, *_mixture(*params)).square().sum())
    slow = _forward_backward(lambda: gmm.responsibilities_direct(q, *_mixture(*params)).square().sum())
    fast_s, slow_s = _fast_and_slow_seconds(fast, slow, repeat)
    ratio = slow_s / fast_s
    return [Row("responsibilities: GEMM form vs (x - mu) broadcast", n_tokens, 1e3 * fast_s, 1e3 * slow_s,
                ratio, None, ">= 20x at N=2048", ratio >= 20 if n_tokens == 2048 else None)]


def _causal_rows(n_tokens, repeat):
    """The two prefix-sum forms on the same responsibilities (the mixing alone: the posterior is shared)."""
    generator = torch.Generator().manual_seed(0)
    gamma_q, gamma_k = (torch.softmax(torch.randn(1, 4, n_tokens, 64, generator=generator), -1).requires_grad_()
                        for _ in range(2))
    v = torch.randn(1, 4, n_tokens, 32, generator=generator).requires_grad_()

    def run(impl):
        return _forward_backward(
            lambda: gma_from_responsibilities(gamma_q, gamma_k, v, causal=True, impl=impl).square().sum())

    fast_s, slow_s = _fast_and_slow_seconds(run("chunked"), run("cumsum"), repeat)
    fast_mem, slow_mem = peak_memory(run("chunked")), peak_memory(run("cumsum"))
    ratio, memory_ratio = slow_s / fast_s, fast_mem / slow_mem
    holds = ratio >= 5 and memory_ratio <= 0.1 if n_tokens == 4096 else None
    return [Row("causal mixing: chunked vs cumsum", n_tokens, 1e3 * fast_s, 1e3 * slow_s, ratio, memory_ratio,
                ">= 5x and <= 1/10 memory at N=4096", holds)]


def _sdpa_row(n_tokens, repeat):
    q, k, v, *params = _parameter_leaves(n_tokens)
    fast = _forward_backward(lambda: gma(q, k, v, *_mixture(*params), impl="linear").square().sum())
    slow = _forward_backward(lambda: F.scaled_dot_product_attention(q, k, v).square().sum())
    fast_s, slow_s = _fast_and_slow_seconds(fast, slow, repeat)
    ratio = slow_s / fast_s
    return Row("bidirectional: GMA linear vs SDPA", n_tokens, 1e3 * fast_s, 1e3 * slow_s, ratio, None,
               ">= 10x at N=8192", ratio >= 10 if n_tokens == 8192 else None)


def run_benchmarks(*, quick: bool = False) -> list[Row]:
    """Measure all three comparisons; ``quick`` uses small sizes (for tests)."""
    repeat = 2 if quick else 5
    rows = _responsibility_rows(128 if quick else 2048, repeat)
    rows += _causal_rows(256 if quick else 4096, repeat)
    rows += [_sdpa_row(n_tokens, repeat) for n_tokens in ((64, 128) if quick else (512, 2048, 8192))]
    return rows


def format_comparisons(rows: list[Row]) -> str:
    """The benchmark's rows as a plain-text table: each comparison's times, speedup, memory ratio and target."""
    header = f"{'comparison':<52} {'N':>6} {'fast ms':>9} {'slow ms':>9} {'speedup':>8} {'mem':>7}  target"
    lines = [header, "-" * len(header)]
    for row in rows:
        memory = "" if row.memory_ratio is None else f"{row.memory_ratio:.3f}"
        verdict = "" if row.holds is None else ("  holds" if row.holds else "  MISSED")
        lines.append(f"{row.comparison:<52} {row.n_tokens:>6} {row.fast_ms:>9.2f} {row.slow_ms:>9.2f} "
                     f"{row.speedup:>7.1f}x {memory:>7}  {row.target}{verdict}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(prog="python -m gma_teach.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, for tests")
    parser.add_argument("--json", metavar="FILE", help="also write the rows and their provenance as JSON")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch CPU threads (default: torch's choice); 1 gives steady timings on a shared machine, "
                             "where threads that wait for each other dominate the clock")
    args = parser.parse_args(argv)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be >= 1, got {args.threads}")
        torch.set_num_threads(args.threads)
    rows = run_benchmarks(quick=args.quick)
    print(format_comparisons(rows))
    if args.json:
        command = "python -m gma_teach.bench " + " ".join(argv if argv is not None else sys.argv[1:])
        record = {**provenance(command), "rows": [asdict(row) for row in rows]}
        write_record(args.json, record)
    return rows


if __name__ == "__main__":
    main()
