"""Chapter 8's exercises: predict a memory cost from the formula and check it against a measurement; fit a
log-log slope.

Each checker calls your function on several configurations and compares it with a measurement
(:func:`gma_teach.measure.peak_memory`) or with the package's least-squares fit
(:func:`gma_teach.measure.loglog_slope`); it raises :class:`~gma_teach.exercises.ExerciseError` saying what is
wrong, or prints "Exercise 8.N: correct" (the protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import math

import torch

from ..baselines import softmax_attention
from ..measure import loglog_slope, peak_memory
from ._common import ExerciseError, call_reader, checker

__all__ = ["check_loglog_slope", "check_softmax_memory_prediction", "measure_softmax_attention_memory"]


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
