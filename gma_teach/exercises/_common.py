"""What every exercise checker shares: one protocol for a stub, a wrong answer and a right one.

A chapter's exercise is a stub cell (tagged ``exercise``) whose function raises ``NotImplementedError``, followed by
the checker's call. A checker is a function decorated with :func:`checker`:

* the reader's function still raises ``NotImplementedError`` (the stub): it prints
  ``"Exercise 4.1: not attempted yet (fill in the cell above and run it again)"`` and returns, so that a chapter
  runs from top to bottom before the reader has written anything;
* the answer is wrong: it raises :class:`ExerciseError`, whose message starts with ``"Exercise 4.1: "`` and names
  the misconception;
* the answer is right: it prints ``"Exercise 4.1: correct"`` (plus a short remark).

``strict=True`` (for grading) makes a stub raise :class:`NotAttempted` instead of printing.
"""
from __future__ import annotations

import functools
import re
import textwrap

import torch

from ..measure import PAGE_WIDTH


class ExerciseError(AssertionError):
    """Raised by a checker when the reader's answer is wrong; the message says what is wrong."""


class NotAttempted(Exception):
    """Raised by ``call_reader`` when the reader's function is still the stub (it raises NotImplementedError)."""


def call_reader(fn, *args):
    """Call the reader's ``fn``.

    A ``NotImplementedError`` (the stub) becomes :class:`NotAttempted`; any other exception becomes an
    :class:`ExerciseError` naming its cause.

    Raises:
        TypeError: ``fn`` is not callable.
    """
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    try:
        return fn(*args)
    except ExerciseError:
        raise
    except NotImplementedError as error:
        raise NotAttempted(f"{getattr(fn, '__name__', 'your function')} raises NotImplementedError") from error
    except Exception as error:  # the reader's bug: report it as the exercise's failure, with its cause
        raise ExerciseError(f"your function raised {type(error).__name__}: {error}") from error


def not_attempted_message(exercise: str) -> str:
    """The line a checker prints for a stub, e.g. ``"Exercise 4.1: not attempted yet (...)"``."""
    return f"Exercise {exercise}: not attempted yet (fill in the cell above and run it again)"


def correct_message(exercise: str, remark: str | None = None) -> str:
    """The lines a checker prints for a right answer: ``"Exercise 4.1: correct"``, then ``" -- remark"`` when there
    is one, wrapped at :data:`gma_teach.measure.PAGE_WIDTH` characters (continuation lines indented by four spaces)."""
    line = f"Exercise {exercise}: correct" + (f" -- {remark}" if remark else "")
    return textwrap.fill(line, width=PAGE_WIDTH, subsequent_indent="    ", break_long_words=False,
                         break_on_hyphens=False)


def checker(exercise: str):
    """Decorate a check function as the checker of ``Exercise <exercise>`` (e.g. ``@checker("4.1")``).

    The decorated function calls the reader's code through ``call_reader``, raises :class:`ExerciseError` for a
    wrong answer and returns ``None`` or a short remark for a right one. The checker it becomes prints
    ``"Exercise 4.1: correct"`` (``" -- remark"`` appended when there is one, wrapped to the page by
    ``correct_message``) or, for a stub, the
    ``not_attempted_message``; it returns ``None``. It takes one more keyword argument, ``strict``: when true, a
    stub raises :class:`NotAttempted` instead of printing (an instructor's grading loop counts that as a fail).
    """
    if not isinstance(exercise, str) or not re.fullmatch(r"\d+\.\d+", exercise):
        raise ValueError(f"exercise must be a number like '4.1', got {exercise!r}")

    def decorate(check):
        @functools.wraps(check)
        def run(*args, strict: bool = False, **kwargs) -> None:
            try:
                remark = check(*args, **kwargs)
            except NotAttempted:
                if strict:
                    raise
                print(not_attempted_message(exercise))
                return
            except ExerciseError as error:  # name the exercise in the message, keep the traceback
                if not str(error).startswith("Exercise "):
                    error.args = (f"Exercise {exercise}: {error}",)
                raise
            print(correct_message(exercise, remark))

        run.exercise = exercise
        return run

    return decorate


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
