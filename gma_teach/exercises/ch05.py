"""Chapter 5's exercises: initializing a softplus-parameterized variance, and the responsibility Jacobian.

Each checker calls your function on random inputs and compares it with an independent reference (``softplus``
itself; autograd); it raises
:class:`~gma_teach.exercises.ExerciseError` saying what is wrong, or prints "Exercise N.M: correct" (the
protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_raw_for_variance", "check_responsibility_jacobian"]


@checker("5.1")
def check_raw_for_variance(fn, *, seed: int = 0) -> str:
    """Check ``fn(target, min_variance) -> raw`` with ``softplus(raw) + min_variance == target``.

    This is how a layer starts its variances at a chosen value although the optimizer only sees ``raw``.

    Args:
        fn: your function; ``target`` a tensor of variances ``> min_variance``, ``min_variance`` a float ->
            a tensor of ``target``'s shape and dtype.
        seed: seed of the random targets.
    """
    generator = torch.Generator().manual_seed(seed)
    for min_variance in (1e-3, 0.05):
        target = min_variance + torch.rand(4, 7, generator=generator, dtype=torch.float64) * 3 + 1e-3
        raw = call_reader(fn, target, min_variance)
        if (isinstance(raw, torch.Tensor) and raw.shape == target.shape
                and torch.allclose(F.softplus(raw.double()), target, rtol=1e-9)):
            raise ExerciseError(f"softplus(raw) equals the target, but the variance is softplus(raw) + "
                                f"min_variance: subtract min_variance={min_variance} first")
        got = F.softplus(raw.double()) + min_variance if isinstance(raw, torch.Tensor) else raw
        compare(f"softplus(raw) + min_variance (min_variance={min_variance})", got, target, rtol=1e-9)
    # large and tiny variances in float32: log(exp(y) - 1) overflows for y > 88 and loses everything for y << 1
    target = torch.tensor([1e-4, 0.5, 1.0, 30.0, 200.0], dtype=torch.float32) + 1e-3
    raw = call_reader(fn, target, 1e-3)
    if isinstance(raw, torch.Tensor) and not torch.isfinite(raw).all():
        raise ExerciseError(
            f"non-finite raw value for float32 targets {target.tolist()}: exp(y) overflows for y > 88. "
            "Use the stable form raw = y + log(-expm1(-y)) with y = target - min_variance"
        )
    got = F.softplus(raw.double()) + 1e-3 if isinstance(raw, torch.Tensor) else raw
    compare("softplus(raw) + min_variance for float32 targets from 1e-4 to 200", got, target.double(), rtol=1e-3)
    return "stable in float32: the layer can start at any variance you choose."


@checker("5.2")
def check_responsibility_jacobian(fn, *, seed: int = 0) -> str:
    """Check ``fn(gamma) -> J`` with ``J[..., k, j] = d gamma_k / d s_j`` for ``gamma = softmax(s)``.

    The reference is autograd, applied to ``torch.softmax`` one row of logits at a time. The likely mistakes are
    named: only the diagonal, the sign flipped (``gamma gamma^T - diag(gamma)``), and a formula for one vector that
    loses or mixes the batch axes (``torch.diag`` and ``torch.outer`` take one vector; ``gamma[..., :, None]`` and
    ``torch.diag_embed`` keep every leading axis).

    Args:
        fn: your function; ``gamma`` ``(..., K)`` (rows on the simplex) -> ``(..., K, K)``.
        seed: seed of the random logits.
    """
    generator = torch.Generator().manual_seed(seed)
    batch_hint = ("the leading axes of gamma are a batch: build J for every row at once, with "
                  "torch.diag_embed(gamma) and gamma[..., :, None] * gamma[..., None, :] (torch.diag and "
                  "torch.outer take a single vector)")
    for prefix, n_components in (((), 5), ((3,), 4), ((2, 3), 7)):
        logits = 2 * torch.randn(*prefix, n_components, generator=generator, dtype=torch.float64)
        gamma = logits.softmax(-1)
        flat = logits.reshape(-1, n_components)
        rows = [torch.autograd.functional.jacobian(lambda s: torch.softmax(s, -1), row) for row in flat]
        expected = torch.stack(rows).reshape(*prefix, n_components, n_components)
        try:
            got = call_reader(fn, gamma.clone())
        except ExerciseError as error:
            if prefix:
                raise ExerciseError(f"for gamma of shape {tuple(gamma.shape)}: {error}; {batch_hint}") from error
            raise
        if prefix and isinstance(got, torch.Tensor) and got.shape != expected.shape:
            raise ExerciseError(f"for gamma of shape {tuple(gamma.shape)} J has shape {tuple(got.shape)}, expected "
                                f"{tuple(expected.shape)}: {batch_hint}")
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            got64 = got.detach().double()
            if torch.allclose(got64, torch.diag_embed(gamma * (1 - gamma)), atol=1e-10):
                raise ExerciseError("you returned only the diagonal gamma_k (1 - gamma_k); the off-diagonal "
                                    "entries are -gamma_k gamma_j (raising s_j takes mass from every other k)")
            if torch.allclose(got64, -expected, atol=1e-10):
                raise ExerciseError("the sign is flipped: J = diag(gamma) - gamma gamma^T, not gamma gamma^T - "
                                    "diag(gamma) (raising s_k raises gamma_k: the diagonal is positive)")
        compare(f"Jacobian for gamma of shape {tuple(gamma.shape)}", got, expected, atol=1e-10)
    return "diag(gamma) - gamma gamma^T."
