"""Chapter 3's exercises: the normalized GMA affinity, and its rank measured numerically.

Each checker calls your function on random responsibilities of odd sizes and compares it with a float64
reference; it raises :class:`~gma_teach.exercises.ExerciseError` saying what is wrong, or prints "Exercise N.M:
correct" (the protocol is in :mod:`gma_teach.exercises._common`).
"""
from __future__ import annotations

import torch

from .. import mixing
from ._common import ExerciseError, call_reader, checker, compare

__all__ = ["check_affinity", "check_affinity_rank"]


def _responsibilities(generator, n: int, k: int, *, sharpness: float = 1.0) -> torch.Tensor:
    """Random rows on the probability simplex, ``(n, k)`` float64."""
    return torch.softmax(sharpness * torch.randn(n, k, generator=generator, dtype=torch.float64), -1)


def _shape(tensor) -> tuple:
    return tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else ()


@checker("3.1")
def check_affinity(fn, *, seed: int = 0) -> str:
    """Check ``fn(gamma_q, gamma_k, eps) -> A`` with ``A = M / (M 1 + eps)`` and ``M = gamma_q gamma_k^T``.

    Args:
        fn: your function; ``gamma_q`` ``(N_q, K)``, ``gamma_k`` ``(N_k, K)``, ``eps`` a float ->
            ``(N_q, N_k)``, each row of ``M`` divided by its sum plus ``eps``.
        seed: seed of the random inputs.

    The first cases have ``N_q != N_k`` (cross-attention), so a transposed product (``gamma_k gamma_q^T``, or ``A``
    transposed) shows in its shape and is named; a square case follows, where a transposed answer is caught by its
    values. Normalizing over the wrong axis, a missing ``eps`` and an unnormalized ``M`` are named too.
    """
    generator = torch.Generator().manual_seed(seed)
    for n_q, n_k, k, eps in ((5, 11, 4, 1e-6), (9, 6, 2, 0.5), (7, 7, 3, 1e-6)):
        gamma_q, gamma_k = _responsibilities(generator, n_q, k), _responsibilities(generator, n_k, k)
        got = call_reader(fn, gamma_q, gamma_k, eps)
        expected = mixing.affinity(gamma_q, gamma_k, eps=eps)
        sizes = f"N_q={n_q} queries, N_k={n_k} keys"
        if n_q != n_k and _shape(got) == (n_k, n_q):
            raise ExerciseError(
                f"A has shape {(n_k, n_q)} for {sizes}: it is transposed. Rows are queries and columns keys: "
                f"A = gamma_q gamma_k^T has shape (N_q, N_k) = {(n_q, n_k)}, each query's row normalized")
        if isinstance(got, torch.Tensor) and got.shape == expected.shape:
            got64 = got.detach().double()
            unnormalized = gamma_q @ gamma_k.T
            if n_q == n_k and (torch.allclose(got64, expected.T, atol=1e-10)
                               or torch.allclose(got64, mixing.affinity(gamma_k, gamma_q, eps=eps), atol=1e-10)):
                raise ExerciseError(
                    f"A is transposed ({sizes}): row i must be query i, so A = gamma_q gamma_k^T, each row "
                    "divided by its sum plus eps (you computed the keys' rows, gamma_k gamma_q^T)")
            if torch.allclose(got64, unnormalized, atol=1e-10):
                raise ExerciseError("A is not normalized: divide each row of gamma_q gamma_k^T by its sum plus eps")
            by_column = unnormalized / (unnormalized.sum(0, keepdim=True) + eps)
            if torch.allclose(got64, by_column, atol=1e-10):
                raise ExerciseError("A is normalized over queries (columns); normalize each query's row instead")
            without_eps = unnormalized / unnormalized.sum(-1, keepdim=True)
            if eps > 1e-3 and torch.allclose(got64, without_eps, atol=1e-10):
                raise ExerciseError(f"eps={eps} is missing from the denominator: divide by (row sum + eps)")
            if (got < 0).any():
                raise ExerciseError(f"A has negative entries (min {got.min().item():.3g}); it must be >= 0")
        compare(f"affinity for N_q={n_q}, N_k={n_k}, K={k}, eps={eps}", got, expected)
    return "including cross-attention shapes and a large eps."


@checker("3.2")
def check_affinity_rank(fn, *, seed: int = 0) -> str:
    """Check ``fn(gamma_q, gamma_k) -> int``: the numerical rank of ``gamma_q gamma_k^T``.

    Args:
        fn: your function; ``gamma_q`` ``(N_q, K)``, ``gamma_k`` ``(N_k, K)`` -> the number of singular values of
            the ``N_q x N_k`` matrix above a tolerance relative to the largest (as ``torch.linalg.matrix_rank``
            does).
        seed: seed of the random inputs.

    The cases include ``K < N`` (rank K), ``K > N`` (rank N) and responsibilities in which two components always
    carry equal mass (rank K - 1): the rank is at most K, and can be less.
    """
    generator = torch.Generator().manual_seed(seed)
    cases = []
    for n_q, n_k, k in ((20, 24, 3), (15, 15, 6), (5, 7, 9)):
        cases.append((_responsibilities(generator, n_q, k), _responsibilities(generator, n_k, k)))
    tied_q, tied_k = _responsibilities(generator, 18, 5), _responsibilities(generator, 21, 5)
    tied_q[:, 1] = tied_q[:, 0]  # components 0 and 1 carry equal mass for every query
    tied_q = tied_q / tied_q.sum(-1, keepdim=True)
    cases.append((tied_q, tied_k))
    for gamma_q, gamma_k in cases:
        expected = int(torch.linalg.matrix_rank(gamma_q @ gamma_k.T))
        got = call_reader(fn, gamma_q, gamma_k)
        if isinstance(got, torch.Tensor):
            if got.numel() != 1:
                raise ExerciseError(f"return one number (the rank), got a tensor of shape {tuple(got.shape)}")
            got = got.item()
        if isinstance(got, float) and got.is_integer():
            got = int(got)
        if not isinstance(got, int):
            raise ExerciseError(f"return the rank as an int, got {type(got).__name__} {got!r}")
        shape = f"N_q={gamma_q.shape[0]}, N_k={gamma_k.shape[0]}, K={gamma_q.shape[1]}"
        if got == min(gamma_q.shape[0], gamma_k.shape[0]) and got > expected:
            raise ExerciseError(
                f"rank {got} for {shape} is min(N_q, N_k): count only singular values above a tolerance "
                "relative to the largest; the tiny ones are rounding noise"
            )
        if got != expected:
            raise ExerciseError(f"rank {got} for {shape}, expected {expected}")
    return "the rank never exceeds K and drops when components are tied."
