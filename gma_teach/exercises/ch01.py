"""Chapter 1's exercises: softmax attention written by hand, then its causal (masked) form.

Each checker calls your function on random inputs of odd sizes (with batch and head axes) and compares it with a
float64 reference; it raises
:class:`~gma_teach.exercises.ExerciseError` saying what is wrong, or prints "Exercise N.M: correct" (the
protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import math

import torch

from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_causal_attention", "check_softmax_attention"]


def _reference_attention(q, k, v, causal: bool):
    """``softmax(q k^T / sqrt(d)) v`` in float64, with ``-inf`` above the diagonal when ``causal``."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n_q, n_k = scores.shape[-2:]
        future = torch.ones(n_q, n_k, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def _cases(seed: int):
    """Random (q, k, v) triples: 2-D, with a batch axis, with batch and head axes; odd sizes."""
    generator = torch.Generator().manual_seed(seed)
    for shape_prefix, n, d, d_v in (((), 7, 5, 3), ((2,), 13, 4, 6), ((2, 3), 9, 8, 5)):
        q = torch.randn(*shape_prefix, n, d, generator=generator, dtype=torch.float64)
        k = torch.randn(*shape_prefix, n, d, generator=generator, dtype=torch.float64)
        v = torch.randn(*shape_prefix, n, d_v, generator=generator, dtype=torch.float64)
        yield q, k, v


def _check_large_scores(fn, causal: bool, seed: int) -> None:
    """Scores of several hundred overflow exp() in float32: a stable softmax subtracts the row maximum first."""
    generator = torch.Generator().manual_seed(seed + 1)
    q = 40.0 * torch.randn(6, 16, generator=generator)
    k = 40.0 * torch.randn(6, 16, generator=generator)
    v = torch.randn(6, 3, generator=generator)
    got = call_reader(fn, q, k, v)
    if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
        raise ExerciseError(
            "non-finite output for float32 inputs with large scores (|q.k|/sqrt(d) of several hundred): "
            "exp() overflowed. Subtract each row's maximum score before exponentiating (or use torch.softmax)."
        )
    compare("output for large scores", got, _reference_attention(q, k, v, causal), atol=1e-4, rtol=1e-4)


@checker("1.1")
def check_softmax_attention(fn, *, seed: int = 0) -> str:
    """Check ``fn(q, k, v) -> softmax(q k^T / sqrt(d)) v``.

    Args:
        fn: your function; ``q`` ``(..., N, d)``, ``k`` ``(..., N, d)``, ``v`` ``(..., N, d_v)`` ->
            ``(..., N, d_v)``. Leading axes (batch, heads) must pass through.
        seed: seed of the random inputs.
    """
    for q, k, v in _cases(seed):
        got = call_reader(fn, q, k, v)
        expected = _reference_attention(q, k, v, causal=False)
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            unscaled = torch.softmax(q @ k.transpose(-1, -2), -1) @ v
            if torch.allclose(got.double(), unscaled, atol=1e-8) and not torch.allclose(unscaled, expected):
                raise ExerciseError("the scores are not scaled: divide q k^T by sqrt(d) before the softmax")
            over_queries = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), -2) @ v
            if torch.allclose(got.double(), over_queries, atol=1e-8):
                raise ExerciseError(
                    "the softmax normalizes the wrong axis: each query's row of weights (dim=-1) must sum to 1"
                )
        compare(f"output for q of shape {tuple(q.shape)}", got, expected)
    _check_large_scores(fn, causal=False, seed=seed)
    return "right on every case, including large float32 scores."


@checker("1.2")
def check_causal_attention(fn, *, seed: int = 0) -> str:
    """Check ``fn(q, k, v)``: causal softmax attention, where query ``i`` sees only keys ``j <= i``.

    Besides comparing with the reference, the checker changes the *future* keys and values of one position and
    requires that position's output to stay exactly the same.

    Args:
        fn: your function; shapes as in :func:`check_softmax_attention`.
        seed: seed of the random inputs.
    """
    for q, k, v in _cases(seed):
        got = call_reader(fn, q, k, v)
        if isinstance(got, torch.Tensor) and got.shape == v.shape[:-2] + (q.shape[-2], v.shape[-1]):
            if torch.allclose(got.double(), _reference_attention(q, k, v, causal=False), atol=1e-8):
                raise ExerciseError("no causal mask applied: the output equals bidirectional attention")
            n = q.shape[-2]
            position = n // 2
            k_changed, v_changed = k.clone(), v.clone()
            k_changed[..., position + 1:, :] += 3.0
            v_changed[..., position + 1:, :] -= 5.0
            changed = call_reader(fn, q, k_changed, v_changed)
            difference = (changed[..., : position + 1, :].double() - got[..., : position + 1, :].double()).abs()
            if difference.max() > 0:
                raise ExerciseError(
                    f"the future leaks: changing keys/values after position {position} changed the outputs at "
                    f"positions <= {position} by up to {difference.max().item():.3g}. Mask scores with j > i "
                    "to -inf before the softmax."
                )
        compare(f"output for q of shape {tuple(q.shape)}", got, _reference_attention(q, k, v, causal=True))
    _check_large_scores(fn, causal=True, seed=seed)
    return "and no future token leaks into the past."
