"""Shared helpers for exercise checkers."""
from __future__ import annotations

import torch


class ExerciseError(AssertionError):
    """Raised by a checker when the reader's answer is wrong; the message says what is wrong."""


def call_reader(fn, *args):
    """Call the reader's ``fn``; any exception it raises becomes an :class:`ExerciseError` naming its cause."""
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    try:
        return fn(*args)
    except ExerciseError:
        raise
    except Exception as error:  # the reader's bug: report it as the exercise's failure, with its cause
        raise ExerciseError(f"your function raised {type(error).__name__}: {error}") from error


def compare(name: str, got, expected: torch.Tensor, *, atol: float = 1e-8, rtol: float = 1e-6) -> None:
    """Raise :class:`ExerciseError` naming the first problem between ``got`` and ``expected``."""
    if not isinstance(got, torch.Tensor):
        raise ExerciseError(f"{name}: expected a torch.Tensor, got {type(got).__name__}")
    if tuple(got.shape) != tuple(expected.shape):
        raise ExerciseError(f"{name}: expected shape {tuple(expected.shape)}, got {tuple(got.shape)}")
    got64, expected64 = got.detach().double(), expected.detach().double()
    if not torch.isfinite(got64).all():
        bad = (~torch.isfinite(got64)).nonzero()[0].tolist()
        raise ExerciseError(f"{name}: non-finite value at index {bad}")
    error = (got64 - expected64).abs()
    tolerance = atol + rtol * expected64.abs()
    if (error > tolerance).any():
        worst = error.argmax()
        index = list(torch.unravel_index(worst, error.shape))
        index = [int(i) for i in index]
        raise ExerciseError(
            f"{name}: {(error > tolerance).sum().item()} of {error.numel()} entries differ; worst at index {index}: "
            f"got {got64.flatten()[worst].item():.6g}, expected {expected64.flatten()[worst].item():.6g}"
        )
