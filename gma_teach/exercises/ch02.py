"""Chapter 2's exercises: stable log-responsibilities, and the coefficient matrix of the GEMM form.

Each checker calls your function on random diagonal mixtures of odd sizes and compares it with the package's
float64 reference (:mod:`gma_teach.gmm`); it raises
:class:`~gma_teach.exercises.ExerciseError` saying what is wrong, or prints "Exercise N.M: correct" (the
protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import math

import torch

from .. import gmm
from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_gemm_coefficients", "check_log_responsibilities"]


def _mixture(generator, n_components: int, dim: int):
    means = 2.0 * torch.randn(n_components, dim, generator=generator, dtype=torch.float64)
    variances = 0.2 + torch.rand(n_components, dim, generator=generator, dtype=torch.float64)
    log_priors = torch.log_softmax(torch.randn(n_components, generator=generator, dtype=torch.float64), -1)
    return means, variances, log_priors


@checker("2.1")
def check_log_responsibilities(fn, *, seed: int = 0) -> str:
    """Check ``fn(x, means, variances, log_priors) -> log p(c=k | x)``, computed stably.

    Args:
        fn: your function; ``x`` ``(N, d)``, ``means``/``variances`` ``(K, d)``, ``log_priors`` ``(K,)``
            -> ``(N, K)`` log-responsibilities (each row's ``exp`` sums to 1).
        seed: seed of the random inputs.

    The last case puts points a hundred standard deviations from every component: every ``p(x, k)`` underflows to
    0 in floating point, so only a log-sum-exp formulation survives.
    """
    generator = torch.Generator().manual_seed(seed)
    for n, k, d in ((11, 3, 2), (17, 5, 1), (9, 7, 4)):
        means, variances, log_priors = _mixture(generator, k, d)
        x = 2.0 * torch.randn(n, d, generator=generator, dtype=torch.float64)
        got = call_reader(fn, x, means, variances, log_priors)
        expected = gmm.log_responsibilities(x, means, variances, log_priors)
        if isinstance(got, torch.Tensor) and got.shape == expected.shape and torch.isfinite(got).all():
            row_sums = torch.logsumexp(got.double(), -1)
            if (got.double() >= -1e-12).all() and torch.allclose(
                got.double().sum(-1), torch.ones(n, dtype=torch.float64)
            ):
                raise ExerciseError("you returned responsibilities, not their logarithm: return log p(c=k | x)")
            if (row_sums.abs() > 1e-6).any():
                raise ExerciseError(
                    f"rows are not normalized: logsumexp over k should be 0, got up to {row_sums.abs().max():.3g}. "
                    "Subtract logsumexp_k log p(x, k) from log p(x, k)."
                )
            difference = got.double() - expected
            if difference.abs().max() > 1e-6 and (difference - difference[:, :1]).abs().max() < 1e-8:
                raise ExerciseError("every log-responsibility is off by the same amount per row: normalize each row")
        compare(f"log-responsibilities for x {tuple(x.shape)} and K={k}", got, expected)
    means, variances, log_priors = _mixture(generator, 4, 3)
    far = means[0] + 100.0 * variances[0].sqrt() * torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)
    x = torch.stack([far, -far, 3.0 * far])
    got = call_reader(fn, x, means, variances, log_priors)
    if isinstance(got, torch.Tensor) and got.shape == (3, 4) and not torch.isfinite(got).all():
        raise ExerciseError(
            "non-finite log-responsibilities for points far from every component: exp(log p(x, k)) underflowed to "
            "0 for all k. Stay in log space: log_softmax, or subtract the row maximum before exponentiating."
        )
    compare("log-responsibilities for points far from every component", got,
            gmm.log_responsibilities(x, means, variances, log_priors), atol=1e-6, rtol=1e-8)
    return "and stable far from every component."


@checker("2.2")
def check_gemm_coefficients(fn, *, seed: int = 0) -> str:
    """Check ``fn(means, variances, log_priors) -> (W, c)`` with ``log p(x, k) = [x*x, x] @ W[k] + c[k]``.

    Args:
        fn: your function; ``means``/``variances`` ``(K, d)``, ``log_priors`` ``(K,)`` -> ``W`` ``(K, 2d)`` (the
            first ``d`` columns multiply ``x*x``, the last ``d`` multiply ``x``) and ``c`` ``(K,)``.
        seed: seed of the random inputs.

    The checker applies your ``W`` and ``c`` to random points and compares with the direct (broadcast) formula.
    """
    generator = torch.Generator().manual_seed(seed)
    for n, k, d in ((13, 3, 2), (7, 5, 3), (10, 1, 5)):
        means, variances, log_priors = _mixture(generator, k, d)
        result = call_reader(fn, means, variances, log_priors)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise ExerciseError(f"return a pair (W, c), got {type(result).__name__}")
        weight, constant = result
        compare_shapes = {"W": (weight, (k, 2 * d)), "c": (constant, (k,))}
        for name, (value, shape) in compare_shapes.items():
            if not isinstance(value, torch.Tensor):
                raise ExerciseError(f"{name}: expected a torch.Tensor, got {type(value).__name__}")
            if tuple(value.shape) != shape:
                raise ExerciseError(f"{name}: expected shape {shape} for K={k}, d={d}, got {tuple(value.shape)}")
        x = 1.5 * torch.randn(n, d, generator=generator, dtype=torch.float64)
        got = torch.cat([x * x, x], -1) @ weight.double().T + constant.double()
        expected = gmm.direct_log_joint(x, means, variances, log_priors)
        difference = got - expected
        offset = difference[0]
        if difference.abs().max() > 1e-8 and (difference - offset).abs().max() < 1e-8:
            hint = ""
            if torch.allclose(offset, torch.full_like(offset, 0.5 * d * math.log(2 * math.pi)), atol=1e-8):
                hint = " (exactly +d/2 log(2 pi): the Gaussian's normalizing constant is missing)"
            elif torch.allclose(offset, -log_priors, atol=1e-8):
                hint = " (exactly -log pi_k: the log prior is missing)"
            raise ExerciseError(
                f"W is right but the constant c is off by {offset.tolist()} per component{hint}"
            )
        quadratic, linear = weight.double()[:, :d], weight.double()[:, d:]
        if torch.allclose(quadratic, 0.5 / variances, atol=1e-10):
            raise ExerciseError("the x*x coefficients have the wrong sign: they are -1 / (2 sigma^2)")
        if torch.allclose(linear, -means / variances, atol=1e-10):
            raise ExerciseError("the x coefficients have the wrong sign: they are +mu / sigma^2")
        compare(f"[x*x, x] @ W.T + c for K={k}, d={d} against log p(x, k)", got, expected)
    return "[x*x, x] @ W.T + c reproduces log p(x, k)."
