"""Chapter 8's exercises: predict a memory cost from the formula and check it against a measurement; fit a
log-log slope; extrapolate GMA's memory from a K sweep.

Each checker calls your function on several configurations and compares it with a measurement
(:func:`gma_teach.measure.peak_memory`, :func:`gma_teach.profiling.profile_mixer`) or with the package's
least-squares fit
(:func:`gma_teach.measure.loglog_slope`); it raises :class:`~gma_teach.exercises.ExerciseError` saying what is
wrong, or prints "Exercise 8.N: correct" (the protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import math

import torch

from ..baselines import softmax_attention
from ..measure import loglog_slope, peak_memory
from ..profiling import profile_mixer
from ._common import ExerciseError, call_reader, checker

__all__ = ["check_gma_memory_extrapolation", "check_loglog_slope", "check_softmax_memory_prediction",
           "measure_gma_memory", "measure_softmax_attention_memory"]

GMA_SWEEP_LEN = 256
"""The sequence length of the K sweep that Exercise 8.3's checker hands to the reader's function."""
GMA_SWEEP_KS = (8, 16, 32)
"""The K values of that sweep."""
GMA_TARGETS = ((512, 48), (768, 24), (384, 64))
"""The ``(seq_len, n_components)`` points where Exercise 8.3's checker compares prediction and measurement."""


def measure_softmax_attention_memory(batch: int, heads: int, seq_len: int, d_head: int = 16) -> int:
    """Incremental peak bytes of eager softmax attention, forward + backward, on float32 ``(B, H, N, d_head)``
    inputs (created before the measurement, so not counted)."""
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(batch, heads, seq_len, d_head, generator=generator).requires_grad_() for _ in range(3))
    grad = torch.randn(batch, heads, seq_len, d_head, generator=generator)
    return peak_memory(lambda: (softmax_attention(q, k, v) * grad).sum().backward())


@checker("8.1")
def check_softmax_memory_prediction(predict, *, tolerance: float = 0.1) -> str:
    """Exercise 8.1: check ``predict(batch, heads, seq_len, bytes_per_element) -> bytes`` against measurements.

    Predict the incremental peak memory of eager softmax attention (forward + backward, float32, ``d_head = 16``)
    from the size of its ``(B, H, N, N)`` matrices: how many of them are alive at the peak? Terms linear in N
    are small at these sizes; the prediction must be within ``tolerance`` (relative) of the measurement.
    """
    for batch, heads, seq_len in ((1, 2, 384), (2, 1, 512), (1, 3, 640)):
        measured = measure_softmax_attention_memory(batch, heads, seq_len)
        got = call_reader(predict, batch, heads, seq_len, 4)
        if not isinstance(got, (int, float)) or isinstance(got, bool) or not math.isfinite(got) or got <= 0:
            raise ExerciseError(f"return a positive number of bytes, got {got!r}")
        matrix = batch * heads * seq_len * seq_len * 4
        if abs(got - measured) > tolerance * measured:
            raise ExerciseError(
                f"B={batch}, H={heads}, N={seq_len}: you predict {got:,.0f} bytes = {got / matrix:.2f} N x N "
                f"matrices, measured {measured:,} bytes = {measured / matrix:.2f} matrices; think about which "
                "N x N tensors the forward keeps for the backward and which the backward creates")
    return "the peak holds two (B, H, N, N) matrices -- memory ~ N^2"


@checker("8.2")
def check_loglog_slope(fit, *, seed: int = 0) -> str:
    """Exercise 8.2: check ``fit(sizes, values) -> slope``, the least-squares slope of ``log(values)`` against
    ``log(sizes)``.

    Tested on noisy power laws ``c * N**p`` (the answer must match the least-squares slope, not just ``p``).
    """
    generator = torch.Generator().manual_seed(seed)
    for exponent, n_points in ((1.0, 5), (2.0, 4), (1.37, 7)):
        sizes = [2.0 ** (7 + i) for i in range(n_points)]
        noise = torch.exp(0.05 * torch.randn(n_points, generator=generator, dtype=torch.float64))
        values = [3.0 * n ** exponent * float(e) for n, e in zip(sizes, noise)]
        expected = loglog_slope(sizes, values)
        got = call_reader(fit, list(sizes), list(values))
        try:
            got = float(got)
        except (TypeError, ValueError):
            raise ExerciseError(f"return the slope as a number, got {type(got).__name__}") from None
        if abs(got - expected) > 1e-6:
            hint = ""
            if abs(got - exponent) < 0.05:
                hint = " (close to the true exponent, but not the least-squares fit: use every point)"
            raise ExerciseError(f"for values ~ N^{exponent} with noise the least-squares slope is {expected:.6f}, "
                                f"you return {got:.6f}{hint}")
    return "your slope is the least-squares fit on log-log axes"


def measure_gma_memory(seq_len: int, n_components: int, *, d_model: int = 32, n_heads: int = 2) -> int:
    """Incremental peak bytes of one GMA block in its operator form (``impl="linear"``, chapter 4's, whose backward
    keeps the responsibilities, so that its memory grows with K), forward + backward, float32, batch 1
    (:func:`gma_teach.profiling.profile_mixer`). The lean form that ``impl="auto"`` takes on a CPU rebuilds the
    responsibilities instead, and its memory barely moves with K."""
    row = profile_mixer("gma", d_model=d_model, n_heads=n_heads, seq_len=seq_len, batch_size=1, repeat=1,
                        options={"n_components": n_components, "impl": "linear"})
    return int(row["peak_memory_bytes"])


@checker("8.3")
def check_gma_memory_extrapolation(predict, *, tolerance: float = 0.15) -> str:
    """Exercise 8.3: check ``predict(k_sweep, sweep_len, seq_len, n_components) -> bytes``.

    ``k_sweep`` maps K to the measured peak bytes of a GMA block (width 32, 2 heads, batch 1, float32) at
    ``sweep_len`` tokens. Predict the peak at ``seq_len`` tokens and ``n_components`` components, each outside the
    sweep: its K values (``GMA_SWEEP_KS``) at ``GMA_SWEEP_LEN`` tokens. The prediction must be within
    ``tolerance`` (relative) of the measurement at every point of ``GMA_TARGETS``.
    """
    k_sweep = {k: measure_gma_memory(GMA_SWEEP_LEN, k) for k in GMA_SWEEP_KS}
    for seq_len, n_components in GMA_TARGETS:
        measured = measure_gma_memory(seq_len, n_components)
        got = call_reader(predict, dict(k_sweep), GMA_SWEEP_LEN, seq_len, n_components)
        if not isinstance(got, (int, float)) or isinstance(got, bool) or not math.isfinite(got) or got <= 0:
            raise ExerciseError(f"return a positive number of bytes, got {got!r}")
        if abs(got - measured) <= tolerance * measured:
            continue
        ratio = got / measured
        if abs(ratio * seq_len / GMA_SWEEP_LEN - 1) <= tolerance:
            hint = (f"your prediction is off by the factor N / sweep_len = {seq_len / GMA_SWEEP_LEN:g}: the sweep "
                    "was measured at sweep_len tokens, and almost every stored tensor grows with N")
        else:
            hint = ("fit memory = a + b K through the sweep (b: bytes per component, a: the rest), then scale the "
                    "line to the new N")
        raise ExerciseError(f"N={seq_len}, K={n_components}: you predict {got:,.0f} bytes, measured {measured:,} "
                            f"({100 * (ratio - 1):+.0f}%); {hint}")
    return ("memory ~ (a + b K) N: the K sweep's line, scaled by N; what is left over is the part that does not "
            "grow with N, such as the parameter gradients")
